/* emu_kernels.h: the kernel ops of a module in the order in which emu_gen numbers the cases
 * of the host-emulated dispatcher (the generated emu_count / emu_run, tests/codegen), for the
 * tests that run emitted CUDA C on the host. Header-only, test-only:
 *   h3_module_walk(m, emu_collect, &emu_kernels);   then emu_run(emu_kernel_index(op), args)
 * and check emu_kernels.n == emu_count() first. */
#ifndef H3_TESTS_EMU_KERNELS_H
#define H3_TESTS_EMU_KERNELS_H

#include "h3/codegen.h"
#include "h3/ir.h"

#include <stdlib.h>

int emu_count(void);
void emu_run(int i, void **args);

typedef struct {
  h3_op **ops;
  int n, cap;
} emu_oplist;

static emu_oplist emu_kernels;

/* Walk callback: appends the ops that codegen emits as kernels (walk order). */
static inline int emu_collect(h3_op *op, void *ctx) {
  emu_oplist *l = ctx;
  if (h3_codegen_classify(op) != H3_EXEC_KERNEL) return 0;
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 64;
    h3_op **p = realloc(l->ops, sizeof *p * (size_t)l->cap);
    if (!p) return 1;
    l->ops = p;
  }
  l->ops[l->n++] = op;
  return 0;
}

/* The dispatcher case of op, or -1 when op is not one of the collected kernels. */
static inline int emu_kernel_index(const h3_op *op) {
  for (int i = 0; i < emu_kernels.n; i++)
    if (emu_kernels.ops[i] == op) return i;
  return -1;
}

#endif
