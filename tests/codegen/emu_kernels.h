/* emu_kernels.h: the kernel ops of a module in the order in which emu_gen numbers the cases
 * of the host-emulated dispatcher (the generated emu_count / emu_run, tests/codegen), for the
 * tests that run emitted CUDA C on the host. Header-only, test-only:
 *   m = emu_load(path) (or h3_module_walk(m, emu_collect, &emu_kernels)), check
 *   emu_kernels.n == emu_count(), then emu_run(emu_kernel_index(op), args) or
 *   emu_run_op(op, operands, results); emu_unload(m). */
#ifndef H3_TESTS_EMU_KERNELS_H
#define H3_TESTS_EMU_KERNELS_H

#include "h3/codegen.h"
#include "h3/ir.h"
#include "h3/op_registry.h"
#include "h3/support.h"

#include "../common/case_data.h"

#include <stdio.h>
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
  if (h3_exec_classify(op) != H3_EXEC_KERNEL) return 0;
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

/* Reads and parses the IR file at path and collects its kernel ops into emu_kernels; NULL
 * after printing the diagnostics. The caller checks emu_kernels.n == emu_count() (the
 * dispatcher was generated from the same file) and ends with emu_unload. */
static inline h3_module *emu_load(const char *path) {
  h3_module *m = case_load_ir(path);
  if (m) h3_module_walk(m, emu_collect, &emu_kernels);
  return m;
}

/* Runs the emitted kernel of op (one of emu_kernels) on explicit pointers: in[i] operand i,
 * out[r] result r (at most 16 in all; more: a message, nothing runs). */
static inline void emu_run_op(const h3_op *op, void *const *in, void *const *out) {
  void *args[16];
  if (op->n_operands + op->n_results > 16) {
    fprintf(stderr, "emu_run_op: %s has more than 16 operands and results\n",
            h3_opcode_name(op->code));
    return;
  }
  int n = 0;
  for (int i = 0; i < op->n_operands; i++) args[n++] = in[i];
  for (int r = 0; r < op->n_results; r++) args[n++] = out[r];
  emu_run(emu_kernel_index(op), args);
}

static inline void emu_unload(h3_module *m) {
  free(emu_kernels.ops);
  emu_kernels = (emu_oplist){0};
  h3_module_free(m);
}

#endif
