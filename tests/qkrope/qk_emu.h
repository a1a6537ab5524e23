/* qk_emu.h: what the host-emulation tests of rms_norm_rope share (test_emu.c, test_emu_i8.c,
 * test_emu_write.c): the CPU backend's result of a one-result op. Test-only, header-only (the
 * emitted kernels run through emu_run_op, tests/codegen/emu_kernels.h). */
#ifndef H3_TESTS_QK_EMU_H
#define H3_TESTS_QK_EMU_H

#include "../common/case_data.h"
#include "emu_kernels.h"

#include <stdint.h>
#include <stdlib.h>

/* The CPU backend's result of op (one result) on the operands in[], 1 thread; malloc'd,
 * NULL after printing the diagnostics. */
static inline uint16_t *cpu_result(const h3_op *op, void *const *in) {
  void *o[4] = {NULL};
  if (case_cpu_results(op, in, o, 1)) return o[0];
  free(o[0]);
  return NULL;
}

#endif
