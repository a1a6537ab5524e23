/* harness.h: a small harness for the CPU op tests: builds one op at a time with the IR
 * builder (so result types come from the registry's inference), allocates host tensors
 * with random contents (a fixed-seed xorshift generator; never all zeros), runs the op
 * through h3_cpu_run_op with 1 and 2 threads (the results must be bitwise equal) and
 * counts failed checks. Expected values are computed in each test independently of the
 * backend code (straight loops over the ops.def formulas, or fp64 references with a
 * tolerance).
 */
#ifndef H3_TEST_CPU_HARNESS_H
#define H3_TEST_CPU_HARNESS_H

#include "h3/backend.h"
#include "h3/bf16.h"
#include "h3/op_registry.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_failures, t_checks;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    t_checks++;                                                                                    \
    if (!(cond)) {                                                                                 \
      t_failures++;                                                                                \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);                     \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
    }                                                                                              \
  } while (0)

typedef struct {
  h3_module *m;
  h3_graph *g;
  h3_builder b;
  uint64_t rng;
} T;

static void t_init(T *t, uint64_t seed) {
  t->m = h3_module_new("test", "tiny");
  t->g = h3_module_add_graph(t->m, "g", H3_GRAPH_FUNCTION, (h3_span){0});
  t->b = (h3_builder){t->m, &t->g->body, NULL, {0}};
  t->rng = seed * 0x9E3779B97F4A7C15ull + 1;
}

static void t_free(T *t) { h3_module_free(t->m); }

static uint64_t t_next(T *t) {
  t->rng ^= t->rng << 13;
  t->rng ^= t->rng >> 7;
  t->rng ^= t->rng << 17;
  return t->rng;
}

/* Uniform in [lo, hi). */
static double t_uniform(T *t, double lo, double hi) {
  return lo + (hi - lo) * (double)(t_next(t) >> 11) * (1.0 / 9007199254740992.0);
}

static h3_type t_type(h3_dtype dt, int rank, ...) {
  int64_t dims[H3_MAX_RANK] = {0};
  va_list ap;
  va_start(ap, rank);
  for (int i = 0; i < rank; i++) dims[i] = va_arg(ap, int64_t);
  va_end(ap);
  return h3_type_make(dt, rank, dims);
}
#define TY(dt, ...)                                                                                \
  t_type(dt, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), __VA_ARGS__)
#define SCALAR(dt) t_type(dt, 0)

static h3_value *t_in(T *t, const char *name, h3_type ty) {
  return h3_graph_add_input(t->m, t->g, name, ty, (h3_span){0});
}

static h3_op *t_op(T *t, h3_opcode c, int n, h3_value **ops, int na, const h3_attr *attrs) {
  h3_diag d;
  h3_diag_init(&d);
  h3_op *op = h3_build_op(&t->b, c, n, ops, na, attrs, 0, &d);
  if (!op) {
    fprintf(stderr, "building %s failed:\n", h3_opcode_name(c));
    h3_diag_print(&d, stderr);
    exit(1);
  }
  h3_diag_free(&d);
  return op;
}

static h3_tensor t_alloc(h3_type ty) {
  size_t n = (size_t)h3_type_bytes(&ty);
  h3_tensor x = {ty, calloc(1, n + 16)};
  if (!x.data) exit(1);
  return x;
}

static double t_get(const h3_tensor *x, int64_t i) {
  switch (x->type.dtype) {
  case H3_BF16: return h3_bf16_to_f32(((uint16_t *)x->data)[i]);
  case H3_F16: return h3_f16_to_f32(((uint16_t *)x->data)[i]);
  case H3_F32: return ((float *)x->data)[i];
  case H3_F64: return ((double *)x->data)[i];
  case H3_I32: return ((int32_t *)x->data)[i];
  case H3_I64: return (double)((int64_t *)x->data)[i];
  case H3_I8: return ((int8_t *)x->data)[i];
  case H3_U8: return ((uint8_t *)x->data)[i];
  default: return 0;
  }
}

/* Stores v with one rounding (RNE for floats). */
static void t_set(const h3_tensor *x, int64_t i, double v) {
  switch (x->type.dtype) {
  case H3_BF16: ((uint16_t *)x->data)[i] = h3_f32_to_bf16((float)v); break;
  case H3_F16: ((uint16_t *)x->data)[i] = h3_f32_to_f16((float)v); break;
  case H3_F32: ((float *)x->data)[i] = (float)v; break;
  case H3_F64: ((double *)x->data)[i] = v; break;
  case H3_I32: ((int32_t *)x->data)[i] = (int32_t)v; break;
  case H3_I64: ((int64_t *)x->data)[i] = (int64_t)v; break;
  case H3_I8: ((int8_t *)x->data)[i] = (int8_t)v; break;
  case H3_U8: ((uint8_t *)x->data)[i] = (uint8_t)v; break;
  default: break;
  }
}

static h3_tensor t_rand(T *t, h3_type ty, double lo, double hi) {
  h3_tensor x = t_alloc(ty);
  int64_t n = h3_type_numel(&ty);
  for (int64_t i = 0; i < n; i++) t_set(&x, i, t_uniform(t, lo, hi));
  return x;
}

static void t_free_all(h3_tensor *x, int n) {
  for (int i = 0; i < n; i++) free(x[i].data);
}

/* Runs op on in with 1 and with 2 threads; the two outputs must be bitwise equal.
 * out[i] get the op's result types. Returns the status of the 1-thread run. */
static h3_status t_run_seed(h3_op *op, const h3_tensor *in, h3_tensor *out, uint64_t seed) {
  h3_tensor o2[8];
  for (int i = 0; i < op->n_results; i++) {
    out[i] = t_alloc(op->results[i]->type);
    o2[i] = t_alloc(op->results[i]->type);
  }
  h3_diag d;
  h3_diag_init(&d);
  h3_status st = h3_cpu_run_op(op, in, op->n_operands, out, op->n_results, 1, seed, &d);
  if (st != H3_OK) h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  h3_diag_init(&d);
  h3_status st2 = h3_cpu_run_op(op, in, op->n_operands, o2, op->n_results, 2, seed, &d);
  h3_diag_free(&d);
  CHECK(st == st2, "%s: status differs between 1 and 2 threads", h3_opcode_name(op->code));
  for (int i = 0; st == H3_OK && i < op->n_results; i++)
    CHECK(memcmp(out[i].data, o2[i].data, (size_t)h3_type_bytes(&out[i].type)) == 0,
          "%s: result %d differs between 1 and 2 threads", h3_opcode_name(op->code), i);
  t_free_all(o2, op->n_results);
  return st;
}

static h3_status t_run(h3_op *op, const h3_tensor *in, h3_tensor *out) {
  return t_run_seed(op, in, out, 1234);
}

/* Runs an op that must fail; returns the first message (static buffer). */
static const char *t_run_error(h3_op *op, const h3_tensor *in) {
  static char msg[512];
  h3_tensor out[8];
  for (int i = 0; i < op->n_results; i++) out[i] = t_alloc(op->results[i]->type);
  h3_diag d;
  h3_diag_init(&d);
  h3_status st = h3_cpu_run_op(op, in, op->n_operands, out, op->n_results, 1, 0, &d);
  snprintf(msg, sizeof msg, "%s", st == H3_ERR && d.head ? d.head->message : "(no error)");
  h3_diag_free(&d);
  t_free_all(out, op->n_results);
  return msg;
}

static int t_report(const char *name) {
  if (t_failures) {
    fprintf(stderr, "%s: %d of %d checks failed\n", name, t_failures, t_checks);
    return 1;
  }
  printf("%s: %d checks passed\n", name, t_checks);
  return 0;
}

/* bf16 rounding of an fp32 value (the contract's final rounding). */
static float rb(float v) { return h3_bf16_round(v); }

#endif
