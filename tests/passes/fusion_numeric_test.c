/* fusion_numeric_test.c: the numeric contract of elementwise-fusion's tiers.
 *
 * Builds a graph of elementwise ops fed by a gather and a constant, with two outputs (one
 * an intermediate value also used inside the group), fuses it at --quality exact and at
 * lossless, and evaluates the unfused and the fused module on random bf16 inputs with a
 * small reference evaluator written here (fp32 math per op; bf16 rounding after every op,
 * or, inside a "lossless" fused region, only at the region's outputs). Checks:
 *   - the pass made one fused group with both outputs and the right `tier`;
 *   - exact: the fused results equal the unfused ones bit for bit;
 *   - lossless: results differ somewhere but stay within 4 bf16 ulps (2^-5 relative to
 *     max(|exact|, 1); the exact chain itself is off by up to ~3 ulps where f = s - x
 *     cancels) of the exact ones, and their error
 *     against an unrounded fp32 evaluation is no worse than 1.5x the exact error (RMS
 *     and max, the spirit of the admission rule of docs/models/accelerations.md §2).
 */
#include "h3/bf16.h"
#include "h3/op_registry.h"
#include "h3/passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROWS 48
#define DIM 80
#define TABLE 10

static int failures;
#define CHECK(c, ...)                                                                              \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                         \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

/* ---- the graph -------------------------------------------------------------------------- */
static h3_value *op1(h3_builder *b, h3_opcode code, h3_value *x, h3_diag *d) {
  h3_op *op = h3_build_op(b, code, 1, &x, 0, NULL, 0, d);
  return op ? op->results[0] : NULL;
}

static h3_value *op2(h3_builder *b, h3_opcode code, h3_value *x, h3_value *y, h3_diag *d) {
  h3_value *in[2] = {x, y};
  h3_op *op = h3_build_op(b, code, 2, in, 0, NULL, 0, d);
  return op ? op->results[0] : NULL;
}

/* g(x, w, tbl, idx) -> (t, b):
 *   e = gather(tbl, idx); a = x * w; b = a + e; c = silu(b); s = c * 0.75; f = s - x;
 *   t = tanh(f) */
static h3_module *build(h3_diag *d) {
  h3_module *m = h3_module_new("fusion_numeric", "test");
  h3_span sp = {0};
  h3_graph *g = h3_module_add_graph(m, "g", H3_GRAPH_FUNCTION, sp);
  int64_t xd[2] = {ROWS, DIM}, wd[1] = {DIM}, td[2] = {TABLE, DIM}, id[1] = {ROWS};
  h3_value *x = h3_graph_add_input(m, g, "x", h3_type_make(H3_BF16, 2, xd), sp);
  h3_value *w = h3_graph_add_input(m, g, "w", h3_type_make(H3_BF16, 1, wd), sp);
  h3_value *tbl = h3_graph_add_input(m, g, "tbl", h3_type_make(H3_BF16, 2, td), sp);
  h3_value *idx = h3_graph_add_input(m, g, "idx", h3_type_make(H3_I32, 1, id), sp);
  h3_builder b = {m, &g->body, NULL, sp};
  h3_value *e = op2(&b, H3_OP_GATHER, tbl, idx, d);
  h3_value *a = op2(&b, H3_OP_MUL, x, w, d);
  h3_value *bb = op2(&b, H3_OP_ADD, a, e, d);
  h3_value *c = op1(&b, H3_OP_SILU, bb, d);
  h3_attr ca[2] = {h3_attr_float(m, "value", 0.75), h3_attr_dtype(m, "dtype", H3_BF16)};
  h3_op *k = h3_build_op(&b, H3_OP_CONST, 0, NULL, 2, ca, 0, d);
  h3_value *s = k ? op2(&b, H3_OP_MUL, c, k->results[0], d) : NULL;
  h3_value *f = s ? op2(&b, H3_OP_SUB, s, x, d) : NULL;
  h3_value *t = f ? op1(&b, H3_OP_TANH, f, d) : NULL;
  if (!t || !bb) {
    h3_module_free(m);
    return NULL;
  }
  h3_value *outs[2] = {t, bb};
  h3_build_op_typed(&b, H3_OP_RETURN, 2, outs, 0, NULL, 0, NULL, 0);
  h3_graph_add_output(m, g, "t");
  h3_graph_add_output(m, g, "b");
  return m;
}

/* ---- the reference evaluator ------------------------------------------------------------ */
typedef struct {
  h3_type type;
  float *data; /* numel floats; i32 values are stored exactly */
} tensor;

typedef struct {
  tensor *by_id; /* by value id */
  int n;
  bool round_ops; /* false: fp32 everywhere (the unrounded reference) */
} env;

static float round_to(h3_dtype dt, float v) {
  switch (dt) {
  case H3_BF16: return h3_bf16_round(v);
  case H3_F16: return h3_f16_to_f32(h3_f32_to_f16(v));
  default: return v;
  }
}

/* Flat index into operand type `a` of the element at multi-index `idx` of `out`
 * (numpy broadcasting: trailing dims aligned, size-1 dims repeat). */
static int64_t broadcast_index(const h3_type *out, const int64_t *idx, const h3_type *a) {
  int64_t flat = 0;
  for (int d = 0; d < a->rank; d++) {
    int od = out->rank - a->rank + d;
    int64_t i = a->dims[d] == 1 ? 0 : idx[od];
    flat = flat * a->dims[d] + i;
  }
  return flat;
}

static float apply(h3_opcode code, float x, float y) {
  switch (code) {
  case H3_OP_ADD: return x + y;
  case H3_OP_SUB: return x - y;
  case H3_OP_MUL: return x * y;
  case H3_OP_SILU: return x / (1.0f + expf(-x));
  case H3_OP_TANH: return tanhf(x);
  default: return NAN;
  }
}

static tensor *get(env *e, const h3_value *v) { return &e->by_id[v->id]; }

static int eval_region(env *e, const h3_region *r, bool round_intermediates);

/* Evaluates one op into its result tensors. */
static int eval_op(env *e, const h3_op *op, bool round) {
  if (op->code == H3_OP_RETURN || op->code == H3_OP_YIELD) return 0;
  if (op->code == H3_OP_FUSED) {
    const h3_region *body = &op->regions[0];
    for (int i = 0; i < body->n_args; i++) *get(e, body->args[i]) = *get(e, op->operands[i]);
    bool lossless = h3_op_attr_tier(op, "tier", H3_TIER_EXACT) == H3_TIER_LOSSLESS;
    if (eval_region(e, body, round && !lossless) != 0) return -1;
    const h3_op *y = body->last;
    for (int i = 0; i < op->n_results; i++) { /* outputs round once, in every tier */
      tensor *src = get(e, y->operands[i]), *dst = get(e, op->results[i]);
      int64_t n = h3_type_numel(&op->results[i]->type);
      dst->type = op->results[i]->type;
      dst->data = malloc((size_t)n * sizeof(float));
      if (!dst->data) return -1;
      for (int64_t k = 0; k < n; k++)
        dst->data[k] = e->round_ops ? round_to(dst->type.dtype, src->data[k]) : src->data[k];
    }
    return 0;
  }
  const h3_type *t = &op->results[0]->type;
  int64_t n = h3_type_numel(t);
  tensor *out = get(e, op->results[0]);
  out->type = *t;
  out->data = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  if (!out->data) return -1;
  int64_t idx[H3_MAX_RANK];
  for (int64_t k = 0; k < n; k++) {
    int64_t rem = k;
    for (int d = t->rank - 1; d >= 0; d--) {
      idx[d] = rem % t->dims[d];
      rem /= t->dims[d];
    }
    float v;
    if (op->code == H3_OP_CONST) {
      v = (float)h3_op_attr_float(op, "value", 0);
    } else if (op->code == H3_OP_GATHER) {
      const tensor *tbl = get(e, op->operands[0]), *ix = get(e, op->operands[1]);
      int64_t row = (int64_t)ix->data[idx[0]], inner = n / ix->type.dims[0];
      v = tbl->data[row * inner + k % inner];
    } else {
      const tensor *a = get(e, op->operands[0]);
      float x = a->data[broadcast_index(t, idx, &a->type)], y = 0;
      if (op->n_operands > 1) {
        const tensor *b = get(e, op->operands[1]);
        y = b->data[broadcast_index(t, idx, &b->type)];
      }
      v = apply(op->code, x, y);
    }
    out->data[k] = round && e->round_ops ? round_to(t->dtype, v) : v;
  }
  return 0;
}

static int eval_region(env *e, const h3_region *r, bool round_intermediates) {
  for (const h3_op *op = r->first; op; op = op->next)
    if (eval_op(e, op, round_intermediates) != 0) return -1;
  return 0;
}

static void free_env(env *e, tensor *inputs, int n_in) {
  for (int i = 0; i < e->n; i++) {
    bool input = false;
    for (int j = 0; j < n_in; j++) input |= e->by_id[i].data == inputs[j].data;
    bool fused_arg_alias = false; /* region args share their operand's data */
    for (int j = 0; j < i && !fused_arg_alias; j++)
      fused_arg_alias = e->by_id[j].data == e->by_id[i].data;
    if (!input && !fused_arg_alias) free(e->by_id[i].data);
  }
  free(e->by_id);
}

/* Runs graph g of m on the inputs; copies the two outputs into out0/out1. */
static int run_graph(h3_module *m, tensor *inputs, bool round_ops, float *out0, float *out1) {
  h3_graph *g = m->graphs[0];
  env e = {calloc((size_t)m->next_value_id, sizeof(tensor)), m->next_value_id, round_ops};
  if (!e.by_id) return -1;
  for (int i = 0; i < g->n_inputs; i++) e.by_id[g->inputs[i]->id] = inputs[i];
  int rc = eval_region(&e, &g->body, true);
  const h3_op *ret = g->body.last;
  if (rc == 0) {
    memcpy(out0, get(&e, ret->operands[0])->data, sizeof(float) * ROWS * DIM);
    memcpy(out1, get(&e, ret->operands[1])->data, sizeof(float) * ROWS * DIM);
  }
  free_env(&e, inputs, g->n_inputs);
  return rc;
}

/* ---- checks ----------------------------------------------------------------------------- */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float uniform(void) { /* xorshift64*, in [-1, 1) */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (float)((rng_state * 2685821657736338717ull) >> 40) / (float)(1 << 23) - 1.0f;
}

static h3_module *fused_module(h3_tier tier) {
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = build(&d);
  h3_pass_options o = h3_pass_options_default();
  o.tier = tier;
  o.passes = "elementwise-fusion";
  o.verify_each = true;
  if (!m || h3_pass_pipeline_run(m, &o, &d) != H3_OK) {
    h3_diag_print(&d, stderr);
    CHECK(0, "fusion failed at %s", h3_tier_name(tier));
    if (m) h3_module_free(m);
    m = NULL;
  }
  h3_diag_free(&d);
  return m;
}

/* The body must be one fused op with 2 results, then the return. */
static void check_shape(h3_module *m, const char *tier) {
  const h3_op *op = m->graphs[0]->body.first;
  CHECK(op && op->code == H3_OP_FUSED, "%s: the first op is not fused", tier);
  if (!op || op->code != H3_OP_FUSED) return;
  CHECK(op->next && op->next->code == H3_OP_RETURN, "%s: more than one op before return", tier);
  CHECK(op->n_results == 2, "%s: fused op has %d results, expected 2", tier, op->n_results);
  CHECK(strcmp(h3_tier_name(h3_op_attr_tier(op, "tier", H3_TIER_HIGH)), tier) == 0,
        "%s: tier attr is %s", tier, h3_tier_name(h3_op_attr_tier(op, "tier", H3_TIER_HIGH)));
  CHECK(op->n_operands == 4, "%s: fused op has %d inputs, expected 4 (x w tbl idx)", tier,
        op->n_operands);
}

static void errors(const float *y, const float *ref, int n, double *rms, double *max) {
  double s = 0;
  *max = 0;
  for (int i = 0; i < n; i++) {
    double e = (double)y[i] - (double)ref[i];
    s += e * e;
    if (fabs(e) > *max) *max = fabs(e);
  }
  *rms = sqrt(s / n);
}

int main(void) {
  h3_diag d;
  h3_diag_init(&d);
  h3_module *plain = build(&d);
  h3_module *exact = fused_module(H3_TIER_EXACT), *lossless = fused_module(H3_TIER_LOSSLESS);
  if (!plain || !exact || !lossless) {
    h3_diag_print(&d, stderr);
    fprintf(stderr, "FAIL: could not build the modules\n");
    return 1;
  }
  check_shape(exact, "exact");
  check_shape(lossless, "lossless");

  enum { N = ROWS * DIM };
  static float x[N], w[DIM], tbl[TABLE * DIM], idx[ROWS];
  static float u0[N], u1[N], e0[N], e1[N], l0[N], l1[N], r0[N], r1[N];
  double worst = 0;
  long differ = 0;
  for (int trial = 0; trial < 8; trial++) {
    for (int i = 0; i < N; i++) x[i] = h3_bf16_round(3.0f * uniform());
    for (int i = 0; i < DIM; i++) w[i] = h3_bf16_round(1.5f * uniform());
    for (int i = 0; i < TABLE * DIM; i++) tbl[i] = h3_bf16_round(uniform());
    for (int i = 0; i < ROWS; i++) idx[i] = (float)(int)((uniform() + 1.0f) * 0.5f * TABLE);
    h3_graph *g = plain->graphs[0];
    tensor in[4] = {{g->inputs[0]->type, x},
                    {g->inputs[1]->type, w},
                    {g->inputs[2]->type, tbl},
                    {g->inputs[3]->type, idx}};
    CHECK(run_graph(plain, in, true, u0, u1) == 0, "eval unfused");
    CHECK(run_graph(plain, in, false, r0, r1) == 0, "eval unrounded");
    CHECK(run_graph(exact, in, true, e0, e1) == 0, "eval exact");
    CHECK(run_graph(lossless, in, true, l0, l1) == 0, "eval lossless");
    CHECK(memcmp(u0, e0, sizeof u0) == 0 && memcmp(u1, e1, sizeof u1) == 0,
          "trial %d: exact-tier fusion is not bitwise equal to the unfused ops", trial);
    for (int i = 0; i < N; i++) {
      differ += h3_f32_bits(l0[i]) != h3_f32_bits(u0[i]);
      differ += h3_f32_bits(l1[i]) != h3_f32_bits(u1[i]);
      /* difference relative to max(|exact|, 1): 2^-5 is 4 bf16 ulps at the value */
      double d0 = fabs((double)l0[i] - (double)u0[i]) / fmax(fabs((double)u0[i]), 1.0);
      double d1 = fabs((double)l1[i] - (double)u1[i]) / fmax(fabs((double)u1[i]), 1.0);
      if (fmax(d0, d1) > worst) worst = fmax(d0, d1);
    }
    double rms_e, max_e, rms_l, max_l;
    errors(u0, r0, N, &rms_e, &max_e);
    errors(l0, r0, N, &rms_l, &max_l);
    CHECK(rms_l <= 1.5 * rms_e && max_l <= 1.5 * max_e,
          "trial %d: lossless error rms %.3g max %.3g vs exact rms %.3g max %.3g", trial, rms_l,
          max_l, rms_e, max_e);
    if (trial == 0)
      printf("trial 0: error vs fp32: exact rms %.3g max %.3g, lossless rms %.3g max %.3g\n", rms_e,
             max_e, rms_l, max_l);
  }
  CHECK(differ > 0, "lossless fusion never differs from the unfused rounding chain");
  CHECK(worst <= 1.0 / 32, "lossless differs from exact by %.3g relative (more than 2^-5)", worst);
  printf("lossless: %ld elements differ from exact, worst relative difference %.3g\n", differ,
         worst);
  h3_module_free(plain);
  h3_module_free(exact);
  h3_module_free(lossless);
  h3_diag_free(&d);
  if (failures) fprintf(stderr, "%d failures\n", failures);
  return failures ? 1 : 0;
}
