/* cg_test.h: helpers shared by the codegen and plan tests: CHECK macros that record a
 * failure with file:line and keep going, loading an IR text file from the source tree,
 * and collecting the ops of a module that the CUDA backend runs as kernels.
 */
#ifndef H3_CG_TEST_H
#define H3_CG_TEST_H

#include "h3/codegen.h"
#include "h3/kernels.h"
#include "h3/op_registry.h"

#include "../common/diag_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cg_failures, cg_checks;

#define CHECK(cond)                                                                  \
  do {                                                                               \
    cg_checks++;                                                                     \
    if (!(cond)) {                                                                   \
      cg_failures++;                                                                 \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);       \
    }                                                                                \
  } while (0)

#define CHECK_STR(a, b)                                                              \
  do {                                                                               \
    const char *cg_a_ = (a), *cg_b_ = (b);                                           \
    cg_checks++;                                                                     \
    if (!cg_a_ || !cg_b_ || strcmp(cg_a_, cg_b_) != 0) {                             \
      cg_failures++;                                                                 \
      fprintf(stderr, "%s:%d: CHECK_STR failed:\n  got:  %s\n  want: %s\n", __FILE__, \
              __LINE__, cg_a_ ? cg_a_ : "(null)", cg_b_ ? cg_b_ : "(null)");         \
    }                                                                                \
  } while (0)

static inline int cg_report(const char *name) {
  fprintf(stderr, "%s: %d checks, %d failed\n", name, cg_checks, cg_failures);
  return cg_failures ? 1 : 0;
}

/* Compiles one translation unit with NVRTC for sm_90 (exact: -fmad=false, as the exact
 * tier's kernels are built); 1 when it gave a CUBIN. On failure *log_out (when given) gets
 * the diagnostics as malloc'd text, else they are printed to stderr. */
static inline int cg_compile_tu(const char *src, bool exact, char **log_out) {
  h3_nvrtc_job job;
  memset(&job, 0, sizeof job);
  const char *opts_exact[] = {"-default-device", "-std=c++17", "-fmad=false"};
  const char *opts_loss[] = {"-default-device", "-std=c++17"};
  job.label = "test_tu.cu";
  job.source = src;
  job.n_options = exact ? 3 : 2;
  job.options = exact ? opts_exact : opts_loss;
  h3_diag d;
  h3_diag_init(&d);
  h3_status st = h3_nvrtc_compile(&job, 1, NULL, 1, &d);
  if (st != H3_OK) {
    if (log_out) *log_out = diag_text(&d);
    else h3_diag_print(&d, stderr);
  }
  int ok = st == H3_OK && job.cubin && job.cubin_len > 0;
  h3_nvrtc_job_free(&job);
  h3_diag_free(&d);
  return ok;
}

/* Parses and verifies tests/codegen/<name> (or an absolute path). */
static inline h3_module *cg_load_ir(const char *name) {
  char path[1024];
  if (name[0] == '/') snprintf(path, sizeof path, "%s", name);
  else snprintf(path, sizeof path, "%s/tests/codegen/%s", H3_SOURCE_DIR, name);
  h3_diag d;
  h3_diag_init(&d);
  size_t len = 0;
  char *text = h3_read_file(path, &len, &d);
  h3_module *m = text ? h3_module_parse(path, text, len, &d) : NULL;
  if (m && h3_verify_module(m, &d) != H3_OK) {
    h3_module_free(m);
    m = NULL;
  }
  if (!m) h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  free(text);
  return m;
}

typedef struct {
  h3_op **ops;
  int n, cap;
} cg_oplist;

static int cg_collect_visit(h3_op *op, void *ctx) {
  cg_oplist *l = ctx;
  if (op->parent && op->parent->parent && op->parent->parent->code == H3_OP_FUSED) return 0;
  if (h3_exec_classify(op) != H3_EXEC_KERNEL) return 0;
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 64;
    l->ops = realloc(l->ops, sizeof(h3_op *) * (size_t)l->cap);
    if (!l->ops) abort();
  }
  l->ops[l->n++] = op;
  return 0;
}

/* The ops of m that run as kernels (outside fused regions), in walk order. */
static inline cg_oplist cg_kernel_ops(h3_module *m) {
  cg_oplist l = {0};
  h3_module_walk(m, cg_collect_visit, &l);
  return l;
}

#endif
