/* qk_emu.h: what the two host-emulation tests of rms_norm_rope share (test_emu.c,
 * test_emu_i8.c): the CPU backend's result of an op, and a run of an op's emitted kernel on
 * the host through the emu dispatcher. Test-only, header-only. */
#ifndef H3_TESTS_QK_EMU_H
#define H3_TESTS_QK_EMU_H

#include "emu_kernels.h"

#include "h3/backend.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The CPU backend's result of op (bf16, n elements) on the operands in[] (at most 8);
 * malloc'd, NULL after printing the diagnostics. */
static inline uint16_t *cpu_result(const h3_op *op, void *const *in, int64_t n) {
  h3_tensor ti[8];
  uint16_t *o = malloc((size_t)n * 2 + 16);
  h3_tensor to = {op->results[0]->type, o};
  for (int i = 0; i < op->n_operands; i++) ti[i] = (h3_tensor){op->operands[i]->type, in[i]};
  h3_diag d;
  h3_diag_init(&d);
  h3_status st = o ? h3_cpu_run_op(op, ti, op->n_operands, &to, 1, 1, 1, &d) : H3_ERR;
  if (st != H3_OK) h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  if (st != H3_OK) {
    free(o);
    return NULL;
  }
  return o;
}

/* Runs the emitted kernel of op (one of emu_kernels) on explicit operands and result. */
static inline void run_kernel(const h3_op *op, void *const *in, void *out) {
  void *args[10];
  int n = 0;
  for (int i = 0; i < op->n_operands; i++) args[n++] = in[i];
  args[n++] = out;
  emu_run(emu_kernel_index(op), args);
}

#endif
