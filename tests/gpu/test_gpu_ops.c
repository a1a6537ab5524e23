/* test_gpu_ops.c: every op of a backend against the CPU reference (h3_cpu_run_op), in the
 * manner of ggml's test-backend-ops: table-driven over the op registry (ops.def), each op
 * asked of the backend (h3_backend_supports_op) and, when supported, compared with the CPU.
 *
 * 1. Every compute op and every fused group of the tiny MiniMax-H3 module after the
 *    lossless and the exact pipelines, of the tiny M3.1 module, and of tests/codegen/
 *    all_ops.ir (one case of every kernel op): each module compiled into a plan and loaded
 *    into the backend (its kernels come from the plan, as in h3exec); random inputs (each
 *    op its own stream, seed_case; never all zeros; index operands in range), the op run
 *    once on the CPU and once on the backend, each output in a guarded, poisoned device
 *    buffer: guards intact, NaN / Inf positions equal, NMSE within the dtype's limit,
 *    integers equal. An op the backend says it does not support must fail with a message
 *    that says so (not crash, not compute garbage). The coverage table (op x result dtype:
 *    compared / unsupported) is printed, and an op of ops.def that no case reaches fails the
 *    test: a new op is covered by adding one IR line to all_ops.ir, not by editing this file.
 * 2. Hand-made shapes the tiny models do not reach: cuBLASLt linears (bias epilogue, f32
 *    output), the fp32 GEMM (bitwise equal to the CPU), the skinny linear of 1 to 16 rows
 *    (H3_LINEAR_FORM=skinny: K splits, bias, f32 output) and its streaming form of one row
 *    (H3_LINEAR_FORM=stream: odd N, bias, f32 output, one row, 1 to 72 segments a row), attention at head_dim 128 with
 *    segments through cudnn, flash and reference, partial tiles, causal GQA, index, randn
 *    (bitwise); attention reading v in place through v_view (the v columns of a packed
 *    qkv with segments, a view inside a wider row, causal GQA in f32) through each
 *    implementation; bf16 at head_dim 64 through each (flash hands it to cuDNN); moe on
 *    tensor cores, and through the grouped GEMMs (weights at U(+-1/sqrt(in)), partial m-tiles,
 *    uneven experts and one with no row) once with each form (H3_MOE_GEMM=wgmma, also with
 *    one cluster that takes every work unit, then wgmma1, then mma); M3.1's paged / sparse
 *    attention of many rows of one sequence (prefill 2048 from 0, extends at 3000, a 16k
 *    prompt's last rows; scrambled pages, NaN in every cache slot past the keys, selections
 *    that differ between rows) through kernels/m31_flash.cu and, with H3_M31_ATTENTION=tile,
 *    kernels/m31_msa_tile.cu (m31_att_case; the cpu backend runs the two small ones);
 *    sage_attention at head_dim 128 (pv fp8 and bf16, segments, GQA, smoothing on and off, a
 *    negative scale, and 1500 rows: many key stages; q's codes and deltas given as operands 3
 *    and 4, as sage-q-fusion's rms_norm_rope writes them, with segments; v read in place
 *    through v_view, pv fp8 and bf16) through each form of the kernel (H3_SAGE_FORM=mma, wg1,
 *    wg1c);
 *    sol_attention at head_dim 128 (segments, GQA, tau 1 diag, thresh exact with sinks, tau
 *    -inf, tau +inf: the band alone) through each form of the kernel (H3_SOL_FORM=mma, ws,
 *    wsp); markov_draft at 20 sequences and at 2 of the model's rank through each form of its
 *    step (H3_MARKOV_FORM=fp32, mma; every row with a clear winner, so the drafts are exact in
 *    both); spec_accept over
 *    20000 logits a row (greedy rows through the argmax pieces, bitwise); linear_nvfp4 at
 *    1 to 16 rows (every code, scales of both signs; K splits, partial column groups) and above
 *    64 through each form (H3_NVFP4_FORM unset, rows, wg, tiled, skinny).
 * 3. Random weights made on the GPU equal h3_weights_random bitwise, for every parameter of
 *    both tiny models.
 *   test_gpu_ops [MODELS_DIR] [--backend cuda|cpu]   (cuda: exit 77 without a GPU; cpu runs
 *   the same table against the reference itself, which checks the cases and the coverage)
 */
#include "gpu_common.h"

#include "../common/sage_q_rule.h"

#include "h3/frontend.h"
#include "h3/op_registry.h"
#include "h3/passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SEED 20251129u

static int passed, failed, skipped;
static gpu_rng rng;
static int ref_threads = 1; /* the CPU reference's threads (more for the big M3.1 attention cases) */
static bool print_ok;       /* check_op prints a compared result's NMSE when it passes too */

/* coverage: per opcode and result-0 dtype, how many cases were compared / found unsupported */
static int cov_compared[H3_OPCODE_COUNT][H3_DTYPE_COUNT], cov_unsupported[H3_OPCODE_COUNT][H3_DTYPE_COUNT];

static void report(h3_diag *d) {
  h3_diag_print(d, stderr);
  h3_diag_free(d);
  h3_diag_init(d);
}

/* Random host inputs for op, with index operands inside their ranges; an operand that is
 * the same value as an earlier one (mul(%a, %a)) gets a copy of its data. */
static void **make_inputs(const h3_op *op) {
  void **in = calloc((size_t)op->n_operands + 1, sizeof *in);
  for (int i = 0; in && i < op->n_operands; i++) {
    const h3_type *t = &op->operands[i]->type;
    int same = -1;
    for (int j = 0; j < i && same < 0; j++)
      if (op->operands[j] == op->operands[i]) same = j;
    if (same >= 0) {
      size_t bytes = (size_t)h3_type_bytes(t);
      if ((in[i] = malloc(bytes ? bytes : 1))) memcpy(in[i], in[same], bytes);
      continue;
    }
    int64_t hi = 4;
    const h3_type *t0 = &op->operands[0]->type;
    if ((op->code == H3_OP_INDEX || op->code == H3_OP_SET_INDEX) && i == 1)
      hi = t0->dims[0] - h3_op_attr_int(op, "offset", 0);
    if ((op->code == H3_OP_GATHER || op->code == H3_OP_SCATTER_ROWS) && i == 1) hi = t0->dims[0];
    if ((op->code == H3_OP_KV_WRITE && i == 2) || (op->code == H3_OP_RMS_NORM_ROPE_WRITE && i == 5))
      hi = t0->dims[0] * t0->dims[1]; /* a slot: a flat row of the cache */
    if ((op->code == H3_OP_SPECTRUM_UPDATE && i == 2) || (op->code == H3_OP_SPECTRUM_FORECAST && i == 1)) {
      /* the coefficient row: < rows of the `coeffs` table (width p, plus q for a forecast) */
      const h3_attr *co = h3_op_attr(op, "coeffs");
      int64_t width = t0->dims[0] + (op->n_operands == 3 && op->code == H3_OP_SPECTRUM_FORECAST
                                         ? op->operands[2]->type.dims[0] : 0);
      hi = co && width > 0 ? co->n / width : 1;
    }
    in[i] = gpu_host_random(&rng, t, -2.0, 2.0, hi > 0 ? hi : 1);
    if ((op->code == H3_OP_DIV || op->code == H3_OP_MOD) && !h3_dtype_is_float(t->dtype))
      for (int64_t e = 0; e < h3_type_numel(t); e++)
        h3_weights_store(in[i], t->dtype, (size_t)e, (double)(e % 5 + 1) * (e % 2 ? -1 : 1));
  }
  return in;
}

static void free_list(void **p, int n) {
  for (int i = 0; p && i < n; i++) free(p[i]);
  free(p);
}

/* What a case changes in the random inputs make_inputs made (scales, index patterns). */
typedef void (*input_prep)(const h3_op *op, void **in);

/* The random stream of op in the case named tag: FNV-1a of the tag, the op's name and its
 * source position (a model's ops share their module's tag), mixed into SEED, so that a case's
 * inputs do not move when cases are added or reordered around it. */
static void seed_case(const char *tag, const h3_op *op) {
  char key[320];
  snprintf(key, sizeof key, "%s|%s|%d:%d", tag, h3_opcode_name(op->code), op->span.line, op->span.col);
  uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char *c = (const unsigned char *)key; *c; c++) h = (h ^ *c) * 0x100000001b3ull;
  gpu_rng_seed(&rng, h ^ SEED);
}

/* Runs op on both backends and compares; limit < 0: the dtype's default; prep: NULL, or what
 * the case changes in the inputs (drawn, as the inputs, from the case's own random stream). */
static void check_op(h3_backend *b, const h3_op *op, const char *tag, double limit, input_prep prep) {
  const char *name = h3_opcode_name(op->code);
  h3_diag d;
  h3_diag_init(&d);
  seed_case(tag, op);
  void **in = make_inputs(op);
  if (in && prep) prep(op, in);
  void **want = calloc((size_t)op->n_results + 1, sizeof *want);
  void **got = calloc((size_t)op->n_results + 1, sizeof *got);
  h3_tensor hin[16], hout[8], din[16], dout[8];
  gpu_buf bin[16] = {0}, bout[8] = {0};
  if (!in || !want || !got || op->n_operands > 16 || op->n_results > 8) {
    printf("FAIL %s %s: test setup\n", tag, name);
    failed++;
    goto done;
  }
  for (int i = 0; i < op->n_operands; i++) hin[i] = (h3_tensor){op->operands[i]->type, in[i]};
  for (int i = 0; i < op->n_results; i++) {
    size_t bytes = (size_t)h3_type_bytes(&op->results[i]->type);
    want[i] = calloc(1, bytes ? bytes : 1);
    got[i] = calloc(1, bytes ? bytes : 1);
    hout[i] = (h3_tensor){op->results[i]->type, want[i]};
  }
  bool unsupported = !h3_backend_supports_op(b, op);
  int dt = op->n_results ? (int)op->results[0]->type.dtype : 0;
  if (unsupported) cov_unsupported[op->code][dt]++;
  else cov_compared[op->code][dt]++;
  if (!unsupported &&
      h3_cpu_run_op(op, hin, op->n_operands, hout, op->n_results, ref_threads, SEED, &d) != H3_OK) {
    printf("skip %s %s: the CPU reference rejects the random inputs\n", tag, name);
    skipped++;
    h3_diag_free(&d);
    h3_diag_init(&d);
    goto done;
  }
  bool ok = true;
  for (int i = 0; ok && i < op->n_operands; i++) {
    ok = gpu_buf_alloc(b, &bin[i], (size_t)h3_type_bytes(&hin[i].type), &d) &&
         gpu_buf_upload(b, &bin[i], in[i], &d);
    din[i] = (h3_tensor){hin[i].type, bin[i].p};
  }
  for (int i = 0; ok && i < op->n_results; i++) {
    ok = gpu_buf_alloc(b, &bout[i], (size_t)h3_type_bytes(&hout[i].type), &d) &&
         gpu_buf_poison(b, &bout[i], &d);
    dout[i] = (h3_tensor){hout[i].type, bout[i].p};
  }
  if (!ok) {
    printf("FAIL %s %s: device setup\n", tag, name);
    failed++;
    report(&d);
    goto done;
  }
  b->seed = SEED;
  h3_status st = b->ops->run_op(b, op, din, op->n_operands, dout, op->n_results, &d);
  if (st == H3_OK) st = b->ops->sync(b, &d);
  if (unsupported) {
    bool said = false;
    for (h3_diag_msg *m = d.head; m; m = m->next)
      if (m->message && strstr(m->message, "not supported")) said = true;
    if (st != H3_OK && said) {
      passed++;
    } else {
      printf("FAIL %s %s: expected 'not supported by the %s backend'\n", tag, name, b->ops->name);
      failed++;
    }
    h3_diag_free(&d);
    h3_diag_init(&d);
    goto done;
  }
  if (st != H3_OK) {
    printf("FAIL %s %s: the %s backend failed\n", tag, name, b->ops->name);
    failed++;
    report(&d);
    goto done;
  }
  for (int i = 0; i < op->n_results; i++) {
    bool guards = false;
    if (!gpu_buf_download(b, &bout[i], got[i], &guards, &d)) {
      printf("FAIL %s %s: download\n", tag, name);
      failed++;
      report(&d);
      goto done;
    }
    gpu_cmp c = gpu_compare(&hout[i].type, got[i], want[i]);
    double lim = limit >= 0 ? limit : gpu_nmse_limit(hout[i].type.dtype);
    char ty[64];
    h3_type_str(&hout[i].type, ty, sizeof ty);
    if (guards && gpu_cmp_ok(&c, lim)) {
      passed++;
      if (print_ok) printf("ok   %s %s: nmse %.3g (limit %.3g)\n", tag, name, c.nmse, lim);
    } else {
      printf("FAIL %s %s result %d %s: nmse %.3g (limit %.3g), %lld NaN/Inf mismatches, %lld "
             "integer mismatches, guards %s\n", tag, name, i, ty, c.nmse, lim,
             (long long)c.mismatched_special, (long long)c.int_diff, guards ? "intact" : "OVERWRITTEN");
      failed++;
    }
  }
done:
  for (int i = 0; i < 16; i++) gpu_buf_free(b, &bin[i]);
  for (int i = 0; i < 8; i++) gpu_buf_free(b, &bout[i]);
  free_list(in, op->n_operands);
  free_list(want, op->n_results);
  free_list(got, op->n_results);
  h3_diag_free(&d);
}

/* ---- 1. the models' ops --------------------------------------------------------------- */
static void check_region(h3_backend *b, const h3_region *r, const char *tag) {
  for (const h3_op *op = r->first; op; op = op->next) {
    switch (op->code) {
    case H3_OP_YIELD: case H3_OP_RETURN: case H3_OP_CALL: case H3_OP_BRANCH: break;
    case H3_OP_LOOP: check_region(b, &op->regions[0], tag); break;
    default: check_op(b, op, tag, -1, NULL); break;
    }
  }
}

/* The tiny module of file after the pipeline of `tier`; accelerated: with the opt-in
 * passes of --int8 and --spectrum (their quantize / int8 GEMM / forecast ops), at widths
 * of 256 so that every linear is lowered (K a multiple of the int8 group), with rotation
 * and row chunks. */
static h3_module *load(const char *dir, const char *file, h3_tier tier, bool accelerated,
                       h3_diag *d) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  static const h3_config_override wide[] = {{"dim", 256}, {"heads", 2}, {"head_dim", 128},
                                            {"ffn", 256}, {"text_dim", 256}, {"layers", 2}};
  h3_frontend_options fo = {.config = "tiny"};
  if (accelerated) fo.n_overrides = 6, fo.overrides = wide;
  h3_module *m = h3_frontend_load(path, &fo, d);
  h3_pass_options po = h3_pass_options_default();
  po.tier = tier;
  if (accelerated)
    po.int8 = "rotate=256,max_rows=24,min_split_n=0", po.enable = H3_INT8_PASSES ",spectrum";
  if (m && h3_pass_pipeline_run(m, &po, d) != H3_OK) {
    h3_module_free(m);
    return NULL;
  }
  return m;
}

/* gpu_plan_load (owning m), counted as a failure when it fails. */
static h3_plan *load_plan(h3_backend *b, h3_module *m, h3_tier tier, const char *tag) {
  h3_plan *p = gpu_plan_load(b, m, tier);
  if (!p) {
    printf("FAIL %s: cannot compile or load the plan\n", tag);
    failed++;
  }
  return p;
}

/* load_plan at the exact tier with H3_LINEAR_FORM=form while the plan loads (the cuda backend
 * reads it as it prepares each linear), the variable restored afterwards */
static h3_plan *load_plan_linear_form(h3_backend *b, h3_module *m, const char *form, const char *tag) {
  const char *was = getenv("H3_LINEAR_FORM");
  char *saved = was ? strdup(was) : NULL;
  setenv("H3_LINEAR_FORM", form, 1);
  h3_plan *plan = load_plan(b, m, H3_TIER_EXACT, tag);
  if (saved) setenv("H3_LINEAR_FORM", saved, 1);
  else unsetenv("H3_LINEAR_FORM");
  free(saved);
  return plan;
}

static void check_plan_ops(h3_backend *b, h3_module *m, h3_tier tier, const char *tag) {
  h3_plan *p = load_plan(b, m, tier, tag);
  if (!p) return;
  for (int g = 0; g < p->module->n_graphs; g++) check_region(b, &p->module->graphs[g]->body, tag);
  h3_plan_free(p); /* the next plan's load forgets these ops' records */
}

static void check_model(h3_backend *b, const char *dir, const char *file, h3_tier tier,
                        bool accelerated) {
  h3_diag d;
  h3_diag_init(&d);
  char tag[128];
  snprintf(tag, sizeof tag, "%s/%s%s", file, h3_tier_name(tier), accelerated ? " --int8 --spectrum" : "");
  h3_module *m = load(dir, file, tier, accelerated, &d);
  if (!m) {
    printf("FAIL %s: cannot build the module\n", tag);
    failed++;
    report(&d);
  } else {
    check_plan_ops(b, m, tier, tag);
  }
  h3_diag_free(&d);
}

/* The ops of an IR file (tests/codegen/all_ops.ir: one case of every kernel op). */
static void check_ir_file(h3_backend *b, const char *path) {
  h3_diag d;
  h3_diag_init(&d);
  size_t len = 0;
  char *text = h3_read_file(path, &len, &d);
  h3_module *m = text ? h3_module_parse(path, text, len, &d) : NULL;
  free(text);
  if (!m) {
    printf("FAIL %s: cannot read the module\n", path);
    failed++;
    report(&d);
  } else {
    check_plan_ops(b, m, H3_TIER_EXACT, "all_ops.ir");
  }
  h3_diag_free(&d);
}

/* ---- coverage over the registry --------------------------------------------------------- */
static bool is_control(h3_opcode c) {
  return c == H3_OP_LOOP || c == H3_OP_CALL || c == H3_OP_BRANCH || c == H3_OP_YIELD ||
         c == H3_OP_RETURN;
}

static void check_coverage(const char *backend) {
  printf("coverage (%s): op, then per result dtype compared/unsupported\n", backend);
  for (int c = 1; c < H3_OPCODE_COUNT; c++) {
    if (is_control((h3_opcode)c)) continue;
    char line[512];
    int n = 0, cases = 0;
    for (int t = 0; t < H3_DTYPE_COUNT; t++) {
      int a = cov_compared[c][t], u = cov_unsupported[c][t];
      cases += a + u;
      if (a + u && n < (int)sizeof line - 32)
        n += snprintf(line + n, sizeof line - (size_t)n, " %s %d/%d", h3_dtype_name((h3_dtype)t), a, u);
    }
    if (!cases) {
      printf("FAIL coverage: op %s has no case (add one to tests/codegen/all_ops.ir)\n",
             h3_opcode_name((h3_opcode)c));
      failed++;
      continue;
    }
    printf("  %-26s%s\n", h3_opcode_name((h3_opcode)c), line);
  }
}

/* ---- 2. hand-made ops ---------------------------------------------------------------------- */
typedef struct {
  h3_module *m;
  h3_graph *g;
  h3_builder bld;
} hand;

typedef struct {
  const char *tag;
  const h3_op *op;
  double limit; /* NMSE limit; < 0: the dtype's default */
  input_prep prep; /* NULL: make_inputs' inputs as they are */
} hand_case;

static h3_value *in_of(hand *h, const char *name, h3_dtype dt, int rank, const int64_t *dims) {
  return h3_graph_add_input(h->m, h->g, name, h3_type_make(dt, rank, dims), (h3_span){0});
}

static const h3_op *op_of(hand *h, h3_opcode c, int n, h3_value **ops, int na, const h3_attr *at) {
  h3_diag d;
  h3_diag_init(&d);
  const h3_op *op = h3_build_op(&h->bld, c, n, ops, na, at, 0, &d);
  if (!op) report(&d);
  h3_diag_free(&d);
  return op;
}

/* A case of the skinny kernel's forms: linear of bf16 x [M, K] (input x<p><i>) against w [N, K]
 * (w<p><i>), y f32 or bf16 with a bias of y's dtype (b<p><i>) or none; its tag "linear FORM M
 * .. N .. K ..[ ->f32][ +bias]" written into tag (which outlives the case). */
typedef struct {
  int64_t M, N, K;
  bool f32, bias;
} linear_shape;
static hand_case linear_case(hand *h, const char *form, char p, int i, linear_shape c, char tag[64]) {
  char name[16];
  h3_value *v[3];
  const h3_dtype yd = c.f32 ? H3_F32 : H3_BF16;
  h3_attr f32 = h3_attr_dtype(h->m, "dtype", H3_F32);
  snprintf(name, sizeof name, "x%c%d", p, i);
  v[0] = in_of(h, name, H3_BF16, 2, (int64_t[]){c.M, c.K});
  snprintf(name, sizeof name, "w%c%d", p, i);
  v[1] = in_of(h, name, H3_BF16, 2, (int64_t[]){c.N, c.K});
  snprintf(name, sizeof name, "b%c%d", p, i);
  v[2] = c.bias ? in_of(h, name, yd, 1, (int64_t[]){c.N}) : NULL;
  snprintf(tag, 64, "linear %s M %lld N %lld K %lld%s%s", form, (long long)c.M, (long long)c.N, (long long)c.K,
           c.f32 ? " ->f32" : "", c.bias ? " +bias" : "");
  return (hand_case){tag, op_of(h, H3_OP_LINEAR, v[2] ? 3 : 2, v, c.f32, &f32), -1, NULL};
}

/* n new inputs into v: input i named p + names[i], of dtype dt[i] and shape dims[i] (its first
 * rank[i] entries). */
static void inputs_of(hand *h, const char *p, int n, const char *const *names, const h3_dtype *dt,
                      const int *rank, const int64_t (*dims)[3], h3_value **v) {
  for (int i = 0; i < n; i++) {
    char name[32];
    snprintf(name, sizeof name, "%s%s", p, names[i]);
    v[i] = in_of(h, name, dt[i], rank[i], dims[i]);
  }
}

/* moe(h[T, H] bf16, gate_up[E, 2F, H] bf16, down[E, H, F] bf16, ids[T, k] i32, wts[T, k] f32)
 * {alpha 1.702, limit 7} on new inputs named p + "h", "gu", "dn", "id", "w". */
static const h3_op *moe_op(hand *h, const char *p, int64_t T, int64_t H, int64_t F, int64_t E, int64_t k) {
  static const char *const names[5] = {"h", "gu", "dn", "id", "w"};
  static const h3_dtype dt[5] = {H3_BF16, H3_BF16, H3_BF16, H3_I32, H3_F32};
  static const int rank[5] = {2, 3, 3, 2, 2};
  const int64_t dims[5][3] = {{T, H}, {E, 2 * F, H}, {E, H, F}, {T, k}, {T, k}};
  h3_value *v[5];
  inputs_of(h, p, 5, names, dt, rank, dims, v);
  h3_attr ma[2] = {h3_attr_float(h->m, "alpha", 1.702), h3_attr_float(h->m, "limit", 7.0)};
  return op_of(h, H3_OP_MOE, 5, v, 2, ma);
}

/* router_topk(h[T, H] bf16, w[E, H] f32, bias[E] f32) -> ids[T, k] i32, wts[T, k] f32 on new
 * inputs named p + "h", "w", "b" (scale 2.0) */
static const h3_op *router_op(hand *h, const char *p, int64_t T, int64_t H, int64_t E, int64_t k) {
  static const char *const names[3] = {"h", "w", "b"};
  static const h3_dtype dt[3] = {H3_BF16, H3_F32, H3_F32};
  static const int rank[3] = {2, 2, 1};
  const int64_t dims[3][3] = {{T, H}, {E, H}, {E}};
  h3_value *v[3];
  inputs_of(h, p, 3, names, dt, rank, dims, v);
  h3_attr at[2] = {h3_attr_int(h->m, "k", k), h3_attr_float(h->m, "scale", 2.0)};
  return op_of(h, H3_OP_ROUTER_TOPK, 3, v, 2, at);
}

/* index_topk(iq[T, Hi, 128] bf16, ik[P, 128, 128] bf16, pos[T] i32, pt[NP] or [T, NP] i32)
 * {block 128, topk 16}: T decode rows (a table each when T > 1), on new inputs named p + "q",
 * "k", "pos", "pt" */
static const h3_op *topk_row_op(hand *h, const char *p, int64_t T, int64_t Hi, int64_t P, int64_t NP) {
  static const char *const names[4] = {"q", "k", "pos", "pt"};
  static const h3_dtype dt[4] = {H3_BF16, H3_BF16, H3_I32, H3_I32};
  const int rank[4] = {3, 3, 1, T > 1 ? 2 : 1};
  const int64_t dims[4][3] = {{T, Hi, 128}, {P, 128, 128}, {T}, {T > 1 ? T : NP, NP}};
  h3_value *v[4];
  inputs_of(h, p, 4, names, dt, rank, dims, v);
  h3_attr at[2] = {h3_attr_int(h->m, "block", 128), h3_attr_int(h->m, "topk", 16)};
  return op_of(h, H3_OP_INDEX_TOPK, 4, v, 2, at);
}

/* topk_row_op's positions (row t: 300 t keys before the last of its table, whose NP 128-key
 * blocks end with the current one full but one key) and tables (entry i of all rows': page (7 i
 * + 3) % P, P not a multiple of 7) */
static void topk_row_prep(const h3_op *op, void **in) {
  const h3_type *pt = &op->operands[3]->type;
  const int64_t T = op->operands[2]->type.dims[0], NP = pt->dims[pt->rank - 1];
  const int64_t P = op->operands[1]->type.dims[0];
  for (int64_t t = 0; t < T; t++) ((int32_t *)in[2])[t] = (int32_t)(NP * 128 - 2 - 300 * t);
  for (int64_t i = 0; i < h3_type_numel(pt); i++) ((int32_t *)in[3])[i] = (int32_t)((7 * i + 3) % P);
}

/* router_topk's weights scaled by 1 / sqrt(H): logits of about unit size, as a trained router's
 * (make_inputs' U(-2, 2) over thousands of elements would saturate the sigmoid) */
static void router_weights(const h3_op *op, void **in) {
  const h3_type *t = &op->operands[1]->type;
  const double f = 1.0 / sqrt((double)t->dims[1]);
  for (int64_t i = 0; i < h3_type_numel(t); i++) ((float *)in[1])[i] = (float)(((float *)in[1])[i] * f);
}

/* moe's expert weights at a trained model's scale, U(-1/sqrt(in), 1/sqrt(in)) (gate_up: in = H,
 * down: in = F), so that the activations are not all clamped; the rest as make_inputs made them
 * (ids uniform in [0, 4), a repeat in a row counted once). */
static void moe_weights(const h3_op *op, void **in) {
  for (int i = 1; i <= 2; i++) {
    const h3_type *t = &op->operands[i]->type;
    double a = 1.0 / sqrt((double)t->dims[2]);
    for (int64_t e = 0; e < h3_type_numel(t); e++)
      h3_weights_store(in[i], t->dtype, (size_t)e, gpu_uniform(&rng, -a, a));
  }
}

/* moe_weights with uneven experts (E = 4, k = 2): slot 0 of every row chooses expert 0, slot 1
 * expert 1 in every 7th row and expert 3 in the others; expert 2 gets no row. */
static void moe_skewed(const h3_op *op, void **in) {
  moe_weights(op, in);
  const h3_type *t = &op->operands[3]->type;
  for (int64_t r = 0; r < t->dims[0]; r++) {
    h3_weights_store(in[3], t->dtype, (size_t)(2 * r), 0);
    h3_weights_store(in[3], t->dtype, (size_t)(2 * r + 1), r % 7 ? 3 : 1);
  }
}

/* markov_draft(base f32[S G, V], w1 bf16[V, r], w2 bf16[V, r], prev i32[S]) on new inputs named
 * p + "b", "w1", "w2", "p". */
static const h3_op *markov_op(hand *h, const char *p, int64_t S, int64_t G, int64_t V, int64_t r) {
  static const char *const names[4] = {"b", "w1", "w2", "p"};
  static const h3_dtype dt[4] = {H3_F32, H3_BF16, H3_BF16, H3_I32};
  static const int rank[4] = {2, 2, 2, 1};
  const int64_t dims[4][3] = {{S * G, V}, {V, r}, {V, r}, {S}};
  h3_value *v[4];
  inputs_of(h, p, 4, names, dt, rank, dims, v);
  return op_of(h, H3_OP_MARKOV_DRAFT, 4, v, 0, NULL);
}

/* Each base row of markov_draft gets a clear winner: token (7 row + 3) % V raised to 256
 * (the other z within about +-40 at r = 32 of U(+-2) values), so the tensor-core form's sum
 * order cannot flip a draft and the chains stay the CPU's: drafts compared exactly, z by NMSE
 * (the products hold a fifth of its energy, the winners the rest: a z without either fails). */
static void markov_winners(const h3_op *op, void **in) {
  const h3_type *t = &op->operands[0]->type;
  for (int64_t row = 0; row < t->dims[0]; row++)
    h3_weights_store(in[0], t->dtype, (size_t)(row * t->dims[1] + (7 * row + 3) % t->dims[1]), 256);
}

/* spec_accept(logits f32[S (G + 1), V], draft i32[S G], temperature f32[S], seed i32[S], pos
 * i32[S]) on new inputs named p + "x", "d", "t", "k", "q". */
static const h3_op *accept_op(hand *h, const char *p, int64_t S, int64_t G, int64_t V) {
  static const char *const names[5] = {"x", "d", "t", "k", "q"};
  static const h3_dtype dt[5] = {H3_F32, H3_I32, H3_F32, H3_I32, H3_I32};
  static const int rank[5] = {2, 1, 1, 1, 1};
  const int64_t dims[5][3] = {{S * (G + 1), V}, {S * G}, {S}, {S}, {S}};
  h3_value *v[5];
  inputs_of(h, p, 5, names, dt, rank, dims, v);
  return op_of(h, H3_OP_SPEC_ACCEPT, 5, v, 0, NULL);
}

/* spec_accept's sequences: s greedy except every third (T = 0.8); greedy s drafts its rows'
 * argmaxes for its first 8 - 3 (s % 3) tokens (8: every row decided, through the argmax pieces
 * of the cuda form), then argmax + 1; a greedy row 0 gets its best score again at its last
 * logit (the first index wins, margin 0); seeds and positions arbitrary. */
static void accept_inputs(const h3_op *op, void **in) {
  const int64_t V = op->operands[0]->type.dims[1], S = op->operands[2]->type.dims[0];
  const int64_t G = op->operands[1]->type.dims[0] / S;
  float *x = in[0], *t = in[2];
  int32_t *d = in[1], *k = in[3], *q = in[4];
  for (int64_t s = 0; s < S; s++) {
    t[s] = s % 3 == 2 ? 0.8f : 0.0f, k[s] = (int32_t)(31 * s + 7), q[s] = (int32_t)(2000 + s);
    for (int64_t i = 0; i < G; i++) {
      float *row = x + (s * (G + 1) + i) * V;
      int64_t best = 0;
      for (int64_t v = 1; v < V; v++) best = row[v] > row[best] ? v : best;
      if (i == 0 && t[s] == 0.0f) row[V - 1] = row[best];
      d[s * G + i] = (int32_t)(i < 8 - 3 * (s % 3) ? best : (best + 1) % V);
    }
  }
}

/* The cases, each tag followed by " (form)" when form is not empty. */
static void check_cases(h3_backend *b, const hand_case *cases, int n, const char *form) {
  for (int i = 0; i < n; i++) {
    char tag[160];
    snprintf(tag, sizeof tag, *form ? "%s (%s)" : "%s", cases[i].tag, form);
    if (cases[i].op) check_op(b, cases[i].op, tag, cases[i].limit, cases[i].prep);
    else {
      printf("FAIL hand-made %s: cannot build the op\n", tag);
      failed++;
    }
  }
}

/* The cases once through each form of a kernel that the cuda backend picks by environment
 * variables read at every run: forms[f][v] the value of vars[v] (NULL: unset) in form f; the
 * variables restored afterwards. */
static void check_forms(h3_backend *b, const hand_case *cases, int n, const char *const *vars, int n_vars,
                        const char *const (*forms)[2], int n_forms) {
  char *saved[2];
  for (int v = 0; v < n_vars; v++) {
    const char *was = getenv(vars[v]);
    saved[v] = was ? strdup(was) : NULL;
  }
  for (int f = 0; f < n_forms; f++) {
    char set[96] = "";
    for (int v = 0; v < n_vars; v++) {
      if (forms[f][v]) setenv(vars[v], forms[f][v], 1);
      else unsetenv(vars[v]);
      if (forms[f][v])
        snprintf(set + strlen(set), sizeof set - strlen(set), "%s%s=%s", *set ? " " : "", vars[v], forms[f][v]);
    }
    check_cases(b, cases, n, set);
  }
  for (int v = 0; v < n_vars; v++) {
    if (saved[v]) setenv(vars[v], saved[v], 1);
    else unsetenv(vars[v]);
    free(saved[v]);
  }
}

/* linear_nvfp4(x [M, K] bf16, codes u8 [N, K / 2], scales u8 [N, K / 16], g f32 [1]) on new
 * inputs named p + "x", "p", "s", "g". */
static const h3_op *nvfp4_op(hand *h, const char *p, int64_t M, int64_t N, int64_t K) {
  static const char *const names[4] = {"x", "p", "s", "g"};
  static const h3_dtype dt[4] = {H3_BF16, H3_U8, H3_U8, H3_F32};
  static const int rank[4] = {2, 2, 2, 1};
  const int64_t dims[4][3] = {{M, K}, {N, K / 2}, {N, K / 16}, {1}};
  h3_value *v[4];
  inputs_of(h, p, 4, names, dt, rank, dims, v);
  return op_of(h, H3_OP_LINEAR_NVFP4, 4, v, 0, NULL);
}

/* Every code byte, scales e4m3 of both signs from 2^-6 to 2^3 (no NaN byte), g = 0.37 (x as
 * make_inputs made it). */
static void nvfp4_inputs(const h3_op *op, void **in) {
  const int64_t codes = h3_type_numel(&op->operands[1]->type), scales = h3_type_numel(&op->operands[2]->type);
  uint32_t r = 12345u;
  for (int64_t i = 0; i < codes; i++) r = r * 1664525u + 1013904223u, ((uint8_t *)in[1])[i] = (uint8_t)(r >> 24);
  for (int64_t i = 0; i < scales; i++) {
    r = r * 1664525u + 1013904223u;
    ((uint8_t *)in[2])[i] = (uint8_t)(0x18 + (r >> 24) % 0x48) | (uint8_t)(r >> 16 & 0x80);
  }
  *(float *)in[3] = 0.37f;
}

/* The linear_nvfp4 cases through each form (H3_NVFP4_FORM unset: the skinny form at 1-4 rows,
 * the row-pair form at 5-8, the warpgroup form at 9-16, the dequantized form (w_b, then
 * cuBLASLt) above 64 rows, else the tiled kernels; rows: the row-pair form at 5-16; wg: the
 * warpgroup form at 5-16; skinny: the skinny form at 1-8 rows, the tiled kernels at 9-16; tiled:
 * the tiled kernels at every M), then the default again: a prepared op keeps one scratch, so the
 * default's second run follows the other forms' partials and checks that its counters are still
 * 0 from its first. */
static void check_nvfp4_forms(h3_backend *b, const hand_case *cases, int n) {
  static const char *const vars[1] = {"H3_NVFP4_FORM"};
  static const char *const forms[6][2] = {{NULL, NULL},     {"rows", NULL},   {"wg", NULL},
                                          {"tiled", NULL}, {"skinny", NULL}, {NULL, NULL}};
  check_forms(b, cases, n, vars, 1, forms, 6);
}

/* The moe cases of the grouped GEMMs through each form (H3_MOE_GEMM: wgmma, wgmma with one
 * cluster of 2 blocks for every work unit (H3_MOE_WGMMA_CLUSTERS=1: many units and stage
 * phases per block), wgmma1, then mma). */
static void check_moe_gemm_forms(h3_backend *b, const hand_case *cases, int n) {
  static const char *const vars[2] = {"H3_MOE_GEMM", "H3_MOE_WGMMA_CLUSTERS"};
  static const char *const forms[4][2] = {{"wgmma", NULL}, {"wgmma", "1"}, {"wgmma1", NULL}, {"mma", NULL}};
  check_forms(b, cases, n, vars, 2, forms, 4);
}

/* sage_attention's operands 3 and 4 (q's codes and deltas, sage-q-fusion's form): the Q rule of
 * ops.def on its q (operand 0) over its segments. */
static void sage_q_codes(const h3_op *op, void **in) {
  const h3_type *q = &op->operands[0]->type;
  sage_q_rule(in[0], q->dims[0], q->dims[1], q->dims[2], h3_op_attr(op, "segments"), in[3], in[4]);
}

/* The sage_attention cases through each form of the cuda kernel (H3_SAGE_FORM: mma, then wg1
 * and wg1c when `both`; pv = bf16 has the mma form only, so its case runs it three times). */
static void check_sage_forms(h3_backend *b, const hand_case *cases, int n, bool both) {
  static const char *const vars[1] = {"H3_SAGE_FORM"};
  static const char *const forms[3][2] = {{"mma", NULL}, {"wg1", NULL}, {"wg1c", NULL}};
  check_forms(b, cases, n, vars, 1, forms, both ? 3 : 1);
}

/* The sol_attention cases through each form of the cuda kernel (H3_SOL_FORM: mma, then ws and
 * wsp when `both`). */
static void check_sol_forms(h3_backend *b, const hand_case *cases, int n, bool both) {
  static const char *const vars[1] = {"H3_SOL_FORM"};
  static const char *const forms[3][2] = {{"mma", NULL}, {"ws", NULL}, {"wsp", NULL}};
  check_forms(b, cases, n, vars, 1, forms, both ? 3 : 1);
}

/* The markov_draft cases through each form of the step (H3_MARKOV_FORM: fp32, then mma). */
static void check_markov_forms(h3_backend *b, const hand_case *cases, int n) {
  static const char *const vars[1] = {"H3_MARKOV_FORM"};
  static const char *const forms[2][2] = {{"fp32", NULL}, {"mma", NULL}};
  check_forms(b, cases, n, vars, 1, forms, 2);
}

/* M3.1's paged / sparse attention of many rows of one sequence (prefill / extend: the cuda
 * backend's kernels/m31_flash.cu, and kernels/m31_msa_tile.cu under H3_M31_ATTENTION=tile):
 * T rows at positions pos0 .. pos0 + T - 1, 16 Hk q heads of 128 dims, page 128, topk 16; the NP
 * page-table entries scrambled over P physical pages (entry i: page (7 i + 3) % P, P not a
 * multiple of 7); every cache slot that holds no position <= pos0 + T - 1 (the rest of the last
 * page, the entries not used yet, the pages of no entry) NaN, so a kernel that reads past its
 * keys or through a wrong page shows NaN. sel: 0 paged_attention; 1 sparse_attention over every
 * causal block (== paged); 2 sparse_attention over varied selections (m31_att_select). R > 1: a
 * batched verify, R sequences of T / R rows, sequence b at positions pos0 + 61 b .. with its
 * own table (entries R NP apart in the same scramble), [R, NP]. */
typedef struct {
  const char *tag;
  int T, Hk, pos0, sel, NP, P;
  bool cpu; /* also on the cpu backend (backend_ops_cpu, the fast suite) */
  const h3_op *op;
  int R; /* page tables (0: one) */
} m31_att_case;

/* sage_attention's NMSE limit against the CPU reference with P V in fp8 (check_hand) */
#define SAGE_NMSE 1e-5

static const m31_att_case *m31_cur; /* the case m31_att_prep fills the inputs of */

/* Row t's selection for one kv head (nb causal blocks, NP table entries, topk slots), ascending,
 * -1 padded: the current block nb - 1 and distinct random earlier ones, min(topk, nb) in all;
 * half of them in every 7th row; none in every 29th row and in rows 40-47 (rows without keys,
 * o = 0; an 8-row block of them visits no key tile); in every 13th a block past the row's
 * position in place of one (it adds no key). */
static void m31_att_select(int32_t *sel, int t, int nb, int NP, int topk) {
  int k = nb < topk ? nb : topk, n = 0;
  if (t % 7 == 2 && k > 1) k /= 2;
  if (t % 29 == 3 || t / 8 == 5) k = 0;
  if (k > 0) sel[n++] = nb - 1;
  if (k > 1 && t % 13 == 7 && nb < NP) sel[n++] = nb;
  while (n < k) {
    int b = (int)gpu_uniform(&rng, 0, nb - 1);
    bool seen = b >= nb - 1;
    for (int i = 0; i < n; i++) seen = seen || sel[i] == b;
    if (!seen) sel[n++] = b;
  }
  for (int i = 1; i < n; i++) /* ascending */
    for (int j = i; j > 0 && sel[j - 1] > sel[j]; j--) {
      int x = sel[j];
      sel[j] = sel[j - 1], sel[j - 1] = x;
    }
  for (; n < topk; n++) sel[n] = -1;
}

/* The inputs of case m31_cur (make_inputs' q and caches, then its positions, table, selections
 * and NaN slots). */
static void m31_att_prep(const h3_op *op, void **in) {
  const m31_att_case *c = m31_cur;
  bool sparse = op->code == H3_OP_SPARSE_ATTENTION;
  int32_t *pos = in[sparse ? 4 : 3], *pt = in[sparse ? 5 : 4];
  const int R = c->R > 1 ? c->R : 1, per = c->T / R;
  for (int t = 0; t < c->T; t++) pos[t] = c->pos0 + (R > 1 ? 61 * (t / per) + t % per : t);
  for (int i = 0; i < R * c->NP; i++) pt[i] = (7 * i + 3) % c->P;
  for (int i = 1; i <= 2; i++) { /* NaN (bf16 0x7fc0) in every slot that holds no position <= its
                                    sequence's last */
    uint16_t *cache = in[i];
    for (int64_t slot = 0; slot < (int64_t)c->P * 128; slot++) {
      bool live = false;
      for (int b = 0; b < R && !live; b++) {
        const int last = pos[b * per + per - 1];
        for (int e = 0; e <= last / 128 && !live; e++)
          live = slot / 128 == pt[b * c->NP + e] && (e < last / 128 || slot % 128 <= last % 128);
      }
      for (int64_t x = 0; !live && x < (int64_t)c->Hk * 128; x++) cache[slot * c->Hk * 128 + x] = 0x7fc0;
    }
  }
  if (!sparse) return;
  int32_t *sel = in[3];
  int topk = (int)op->operands[3]->type.dims[2];
  for (int t = 0; t < c->T; t++)
    for (int h = 0; h < c->Hk; h++) {
      int32_t *s = sel + ((int64_t)t * c->Hk + h) * topk;
      int nb = pos[t] / 128 + 1;
      if (c->sel == 1)
        for (int i = 0; i < topk; i++) s[i] = i < nb ? i : -1;
      else
        m31_att_select(s, t, nb, c->NP, topk);
    }
}

/* The op of case c on new inputs named after its index i. */
static const h3_op *m31_att_op(hand *h, const m31_att_case *c, int i) {
  char name[6][16];
  static const char *const what[6] = {"q", "kc", "vc", "sel", "pos", "pt"};
  for (int j = 0; j < 6; j++) snprintf(name[j], sizeof name[j], "m%d%s", i, what[j]);
  h3_value *q = in_of(h, name[0], H3_BF16, 3, (int64_t[]){c->T, 16 * c->Hk, 128});
  h3_value *kc = in_of(h, name[1], H3_BF16, 4, (int64_t[]){c->P, 128, c->Hk, 128});
  h3_value *vc = in_of(h, name[2], H3_BF16, 4, (int64_t[]){c->P, 128, c->Hk, 128});
  h3_value *pos = in_of(h, name[4], H3_I32, 1, (int64_t[]){c->T});
  h3_value *pt = c->R > 1 ? in_of(h, name[5], H3_I32, 2, (int64_t[]){c->R, c->NP})
                          : in_of(h, name[5], H3_I32, 1, (int64_t[]){c->NP});
  h3_attr at[2] = {h3_attr_float(h->m, "scale", 1.0 / sqrt(128.0)), h3_attr_int(h->m, "page", 128)};
  if (c->sel == 0) return op_of(h, H3_OP_PAGED_ATTENTION, 5, (h3_value *[]){q, kc, vc, pos, pt}, 2, at);
  h3_value *sel = in_of(h, name[3], H3_I32, 3, (int64_t[]){c->T, c->Hk, 16});
  return op_of(h, H3_OP_SPARSE_ATTENTION, 6, (h3_value *[]){q, kc, vc, sel, pos, pt}, 2, at);
}

/* The cases (cuda: each through m31_flash.cu, then m31_msa_tile.cu; cpu: the cheap ones), the
 * CPU reference on 8 threads, each result's NMSE printed; H3_M31_ATTENTION restored afterwards. */
static void check_m31_attention(h3_backend *b, m31_att_case *cases, int n, bool cuda) {
  const char *was = getenv("H3_M31_ATTENTION");
  char *saved = was ? strdup(was) : NULL;
  static const char *const forms[2] = {"flash", "tile"};
  ref_threads = 8;
  print_ok = true;
  for (int i = 0; i < n; i++) {
    if (!cuda && !cases[i].cpu) continue;
    for (int f = 0; f < (cuda ? 2 : 1); f++) {
      char tag[160];
      snprintf(tag, sizeof tag, "m31 attention %s%s%s%s", cases[i].tag, cuda ? " (H3_M31_ATTENTION=" : "",
               cuda ? forms[f] : "", cuda ? ")" : "");
      if (cuda) setenv("H3_M31_ATTENTION", forms[f], 1);
      m31_cur = &cases[i];
      if (cases[i].op) check_op(b, cases[i].op, tag, -1, m31_att_prep);
      else {
        printf("FAIL hand-made %s: cannot build the op\n", tag);
        failed++;
      }
    }
  }
  ref_threads = 1;
  print_ok = false;
  if (saved) setenv("H3_M31_ATTENTION", saved, 1);
  else unsetenv("H3_M31_ATTENTION");
  free(saved);
}

/* M3.1's decode attention (few rows: the tensor-core decode kernel, its keys split over blocks
 * whose partials a cluster combines) at its default split count, under the tuning caps
 * H3_M31_ATT_SPLITS = 3 (splits of uneven key counts) and 1 (no partials), and with
 * H3_M31_ATT_COMBINE=scratch (the last block combines through the scratch: up to 32 splits, and 3);
 * cuda only. */
static void check_m31_decode_splits(h3_backend *b, m31_att_case *cases, int n, bool cuda) {
  if (!cuda) return; /* the caps are the cuda kernel's */
  static const char *const vars[2] = {"H3_M31_ATT_SPLITS", "H3_M31_ATT_COMBINE"};
  static const char *const caps[5][2] = {{NULL, NULL}, {"3", NULL}, {"1", NULL}, {NULL, "scratch"}, {"3", "scratch"}};
  for (int i = 0; i < n; i++) {
    const hand_case c = {cases[i].tag, cases[i].op, -1, m31_att_prep};
    m31_cur = &cases[i];
    check_forms(b, &c, 1, vars, 2, caps, 5);
  }
}

static void check_hand(h3_backend *b, bool all_attention) {
  hand h;
  h.m = h3_module_new("gpu_ops", "test");
  h.g = h3_module_add_graph(h.m, "g", H3_GRAPH_FUNCTION, (h3_span){0});
  h.bld = (h3_builder){h.m, &h.g->body, NULL, {0}};
  hand_case cases[32];
  int n = 0;
  /* cuBLASLt: bf16 with a bias epilogue; bf16 -> f32 output; the fp32 GEMM (bitwise) */
  h3_value *x1 = in_of(&h, "x1", H3_BF16, 2, (int64_t[]){100, 256});
  h3_value *w1 = in_of(&h, "w1", H3_BF16, 2, (int64_t[]){192, 256});
  h3_value *b1 = in_of(&h, "b1", H3_BF16, 1, (int64_t[]){192});
  cases[n++] = (hand_case){"linear bf16+bias", op_of(&h, H3_OP_LINEAR, 3, (h3_value *[]){x1, w1, b1}, 0, NULL), -1, NULL};
  h3_value *x2 = in_of(&h, "x2", H3_BF16, 3, (int64_t[]){3, 7, 64});
  h3_value *w2 = in_of(&h, "w2", H3_BF16, 2, (int64_t[]){48, 64});
  h3_attr f32 = h3_attr_dtype(h.m, "dtype", H3_F32), bf = h3_attr_dtype(h.m, "dtype", H3_BF16);
  cases[n++] = (hand_case){"linear bf16->f32", op_of(&h, H3_OP_LINEAR, 2, (h3_value *[]){x2, w2}, 1, &f32), -1, NULL};
  h3_value *x3 = in_of(&h, "x3", H3_F32, 2, (int64_t[]){70, 96});
  h3_value *w3 = in_of(&h, "w3", H3_F32, 2, (int64_t[]){130, 96});
  h3_value *b3 = in_of(&h, "b3", H3_F32, 1, (int64_t[]){130});
  cases[n++] = (hand_case){"linear f32->bf16 (bitwise)", op_of(&h, H3_OP_LINEAR, 3, (h3_value *[]){x3, w3, b3}, 1, &bf), 0, NULL};
  cases[n++] = (hand_case){"linear f32 (bitwise)", op_of(&h, H3_OP_LINEAR, 3, (h3_value *[]){x3, w3, b3}, 0, NULL), 0, NULL};
  /* the skinny kernel (H3_LINEAR_FORM=skinny while the plan loads: linears of <= 16 rows):
     M = 1 against a small N (16 K splits), 3 rows with a bias (m4, N odd), 16 rows to f32
     with an f32 bias (m16), one row to f32 with 64 columns per block (lm_head-like) */
  static const linear_shape sk[4] = {
      {1, 64, 6144, false, false}, {3, 999, 4096, false, true}, {16, 3000, 2048, true, true}, {1, 17000, 512, true, false}};
  static char sktag[4][64];
  for (int i = 0; i < 4; i++) cases[n++] = linear_case(&h, "skinny", 's', i, sk[i], sktag[i]);
  /* attention at head_dim 128 with segments (live rows / pad rows), partial tiles */
  int64_t qd[3] = {200, 4, 128};
  h3_value *q = in_of(&h, "q", H3_BF16, 3, qd), *k = in_of(&h, "k", H3_BF16, 3, qd);
  h3_value *v = in_of(&h, "v", H3_BF16, 3, qd);
  h3_attr att[2] = {h3_attr_float(h.m, "scale", 1.0 / sqrt(128.0)),
                    h3_attr_ints(h.m, "segments", 1, (int64_t[]){190})};
  const h3_op *a128 = op_of(&h, H3_OP_ATTENTION, 3, (h3_value *[]){q, k, v}, 2, att);
  int64_t qd2[3] = {333, 2, 128};
  h3_value *q2 = in_of(&h, "q2", H3_BF16, 3, qd2), *k2 = in_of(&h, "k2", H3_BF16, 3, qd2);
  h3_value *v2 = in_of(&h, "v2", H3_BF16, 3, qd2);
  const h3_op *a333 = op_of(&h, H3_OP_ATTENTION, 3, (h3_value *[]){q2, k2, v2}, 1, att);
  /* the same with v read in place (v_view = [start, row_stride]): the v columns of a packed
     [q | k | v] row with the segments; v inside a wider row (start 264 of 776) */
  h3_value *xv = in_of(&h, "xv", H3_BF16, 2, (int64_t[]){200, 1536});
  h3_attr attv[3] = {att[0], att[1], h3_attr_ints(h.m, "v_view", 2, (int64_t[]){1024, 1536})};
  const h3_op *a128v = op_of(&h, H3_OP_ATTENTION, 3, (h3_value *[]){q, k, xv}, 3, attv);
  h3_value *xv2 = in_of(&h, "xv2", H3_BF16, 2, (int64_t[]){333, 776});
  h3_attr attv2[2] = {att[0], h3_attr_ints(h.m, "v_view", 2, (int64_t[]){264, 776})};
  const h3_op *a333v = op_of(&h, H3_OP_ATTENTION, 3, (h3_value *[]){q2, k2, xv2}, 2, attv2);
  /* bf16 at head_dim 64: flash does not take it, so --attention flash runs it on cuDNN */
  int64_t qd4[3] = {150, 2, 64};
  h3_value *q4 = in_of(&h, "q4", H3_BF16, 3, qd4), *k4 = in_of(&h, "k4", H3_BF16, 3, qd4);
  h3_value *v4 = in_of(&h, "v4", H3_BF16, 3, qd4);
  h3_attr att4 = h3_attr_float(h.m, "scale", 0.125);
  const h3_op *a64 = op_of(&h, H3_OP_ATTENTION, 3, (h3_value *[]){q4, k4, v4}, 1, &att4);
  /* causal GQA in f32 (the reference kernel) */
  h3_value *q3 = in_of(&h, "q3", H3_F32, 3, (int64_t[]){50, 4, 64});
  h3_value *k3 = in_of(&h, "k3", H3_F32, 3, (int64_t[]){50, 2, 64});
  h3_value *v3 = in_of(&h, "v3", H3_F32, 3, (int64_t[]){50, 2, 64});
  h3_attr catt[2] = {h3_attr_float(h.m, "scale", 0.125), h3_attr_int(h.m, "causal", 1)};
  cases[n++] = (hand_case){"attention f32 causal GQA", op_of(&h, H3_OP_ATTENTION, 3, (h3_value *[]){q3, k3, v3}, 2, catt), -1, NULL};
  h3_value *xv3 = in_of(&h, "xv3", H3_F32, 2, (int64_t[]){50, 384});
  h3_attr cattv[3] = {catt[0], catt[1], h3_attr_ints(h.m, "v_view", 2, (int64_t[]){256, 384})};
  cases[n++] = (hand_case){"attention f32 causal GQA v view", op_of(&h, H3_OP_ATTENTION, 3, (h3_value *[]){q3, k3, xv3}, 3, cattv), -1, NULL};
  /* sage_attention at head_dim 128 (all_ops.ir's head_dim 16 is not the cuda kernel's: it
     must say so): 333 rows in segments of 300 and 33 (partial query and key tiles; 5 and 1
     tiles of 64 query rows, so wg1c's even grids hold a block past len), GQA 4 / 2;
     pv fp8 and bf16 with smoothing, fp8 without. The int8 codes and every rounding are the
     CPU's (tests/sage checks them bitwise under emulation); expf's last bits on the GPU may
     flip a rare e4m3 / bf16 rounding of P, and the fp32 sums run in another order. The limit:
     SAGE_NMSE for pv fp8 (an e4m3 step of P is 1/8 to 1/16 of it: on the GPU these cases
     measured 0.3-2.5e-6 over different random draws; a wrong key
     tile, scale or rescale gives 1e-3 and more), 1e-6 for pv bf16 */
  hand_case sage[9];
  int n_sage = 0;
  h3_value *qs = in_of(&h, "qs", H3_BF16, 3, (int64_t[]){333, 4, 128});
  h3_value *ks = in_of(&h, "ks", H3_BF16, 3, (int64_t[]){333, 2, 128});
  h3_value *vs = in_of(&h, "vs", H3_BF16, 3, (int64_t[]){333, 2, 128});
  const char *sage_tag[3] = {"sage_attention fp8 D=128 segments GQA", "sage_attention bf16 D=128 segments GQA",
                             "sage_attention fp8 D=128 no smoothing"};
  for (int i = 0; i < 3; i++) {
    h3_attr sa[4] = {att[0], h3_attr_ints(h.m, "segments", 1, (int64_t[]){300}),
                     h3_attr_string(h.m, "pv", i == 1 ? "bf16" : "fp8"), h3_attr_int(h.m, "smooth", i < 2)};
    sage[n_sage++] = (hand_case){sage_tag[i], op_of(&h, H3_OP_SAGE_ATTENTION, 3, (h3_value *[]){qs, ks, vs}, 4, sa), i == 1 ? 1e-6 : SAGE_NMSE, NULL};
  }
  /* 1500 rows in one segment, 2 q heads on 1 kv head: 12 stages of 128 keys (the kernel's
     3-stage ring wraps 4 times), 12 blocks of 128 query rows, the last partial */
  h3_value *ql = in_of(&h, "ql", H3_BF16, 3, (int64_t[]){1500, 2, 128});
  h3_value *kl = in_of(&h, "kl", H3_BF16, 3, (int64_t[]){1500, 1, 128});
  h3_value *vl = in_of(&h, "vl", H3_BF16, 3, (int64_t[]){1500, 1, 128});
  sage[n_sage++] = (hand_case){"sage_attention fp8 D=128 T=1500 GQA 2/1",
                               op_of(&h, H3_OP_SAGE_ATTENTION, 3, (h3_value *[]){ql, kl, vl}, 1, att), SAGE_NMSE, NULL};
  /* segments of 200 and 640 rows: 2 and 5 stages of 128 keys (an even and an odd count of
     stages through the 2-slot ring, each ending in a partial stage) */
  h3_value *qm = in_of(&h, "qm", H3_BF16, 3, (int64_t[]){840, 2, 128});
  h3_value *km = in_of(&h, "km", H3_BF16, 3, (int64_t[]){840, 1, 128});
  h3_value *vm = in_of(&h, "vm", H3_BF16, 3, (int64_t[]){840, 1, 128});
  h3_attr s2[2] = {att[0], h3_attr_ints(h.m, "segments", 1, (int64_t[]){200})};
  sage[n_sage++] = (hand_case){"sage_attention fp8 D=128 segments 200 + 640 GQA 2/1",
                               op_of(&h, H3_OP_SAGE_ATTENTION, 3, (h3_value *[]){qm, km, vm}, 2, s2), SAGE_NMSE, NULL};
  /* a negative scale: the kernels' paths for kq <= 0 (scores not monotone in the dots) */
  h3_attr neg[2] = {h3_attr_float(h.m, "scale", -1.0 / sqrt(128.0)), att[1]};
  sage[n_sage++] = (hand_case){"sage_attention fp8 D=128 negative scale",
                               op_of(&h, H3_OP_SAGE_ATTENTION, 3, (h3_value *[]){qs, ks, vs}, 2, neg), SAGE_NMSE, NULL};
  /* q's codes and deltas given (sage-q-fusion: the quant pre-pass of q skipped, each segment's
     codes read at its offset in include/h3/sage.h's layout): segments 300 + 33, padded to 384
     + 128 rows */
  h3_value *qcs = in_of(&h, "qcs", H3_I8, 1, (int64_t[]){4 * 512 * 128});
  h3_value *qds = in_of(&h, "qds", H3_F32, 1, (int64_t[]){4 * 512 / 64});
  h3_attr sqa[2] = {att[0], h3_attr_ints(h.m, "segments", 1, (int64_t[]){300})};
  sage[n_sage++] = (hand_case){"sage_attention fp8 D=128 segments GQA, q's codes given",
                               op_of(&h, H3_OP_SAGE_ATTENTION, 5, (h3_value *[]){qs, ks, vs, qcs, qds}, 2, sqa), SAGE_NMSE,
                               sage_q_codes};
  /* v read in place (attention-v-view's sage-v-view: v_view = [start, row_stride]): the v
     columns of a packed [q | k | v] row (start 768 of 1024: the colstats, v's e4m3 pass and
     the bf16 form's P V with v's row stride), pv fp8 and bf16 */
  h3_value *xs = in_of(&h, "xs", H3_BF16, 2, (int64_t[]){333, 1024});
  for (int i = 0; i < 2; i++) {
    h3_attr sv[4] = {att[0], h3_attr_ints(h.m, "segments", 1, (int64_t[]){300}), h3_attr_string(h.m, "pv", i ? "bf16" : "fp8"),
                     h3_attr_ints(h.m, "v_view", 2, (int64_t[]){768, 1024})};
    sage[n_sage++] = (hand_case){i ? "sage_attention bf16 D=128 segments GQA v view" : "sage_attention fp8 D=128 segments GQA v view",
                                 op_of(&h, H3_OP_SAGE_ATTENTION, 3, (h3_value *[]){qs, ks, xs}, 4, sv), i ? 1e-6 : SAGE_NMSE, NULL};
  }
  /* sol_attention at head_dim 128 on the same inputs: the centroids and the exact-block
     selection are the CPU's bit for bit (tests/sol checks them under emulation; a flipped
     block would move whole rows); P of the exact keys in bf16, 2^x and fp32 sum orders: NMSE
     ~5e-6. 333 rows in segments 300 + 33, GQA 4/2, tau 1 diag; 1500 rows, 2/1, thresh exact
     with sinks [100, 164) at tau 0.5; tau -inf on 333 and 1500 rows (every block exact:
     attention; at 1500 rows, 24 blocks, the warp-specialised form's ring of 6 slots wraps 4
     times; 333 rows in segments of 5 and 1 blocks: its second consumer without a block, and
     unions of 5 and 1 blocks: wsp's odd last turn); tau +inf on 1500 rows (the band |i - j| <=
     1 alone: the union of query blocks 2k, 2k + 1 is blocks 2k - 1 .. 2k + 2, the first and
     the last taken by one of the two only, so wsp's turns (2k - 1, 2k), (2k + 1, 2k + 2) mask
     a half per consumer, and the first and last pairs' unions of 3 end in an odd turn, the
     last one on the partial block 23) */
  h3_attr so[3] = {att[0], h3_attr_ints(h.m, "segments", 1, (int64_t[]){300}), h3_attr_float(h.m, "tau", 1.0)};
  hand_case sol[5];
  sol[0] = (hand_case){"sol_attention D=128 segments GQA tau 1",
                       op_of(&h, H3_OP_SOL_ATTENTION, 3, (h3_value *[]){qs, ks, vs}, 3, so), 2e-5, NULL};
  h3_attr sx[5] = {att[0], h3_attr_string(h.m, "thresh", "exact"), h3_attr_float(h.m, "tau", 0.5),
                   h3_attr_int(h.m, "sink_start", 100), h3_attr_int(h.m, "sink_tokens", 64)};
  sol[1] = (hand_case){"sol_attention D=128 T=1500 exact sinks",
                       op_of(&h, H3_OP_SOL_ATTENTION, 3, (h3_value *[]){ql, kl, vl}, 5, sx), 2e-5, NULL};
  so[2] = h3_attr_float(h.m, "tau", -INFINITY);
  sol[2] = (hand_case){"sol_attention D=128 segments GQA tau -inf",
                       op_of(&h, H3_OP_SOL_ATTENTION, 3, (h3_value *[]){qs, ks, vs}, 3, so), 2e-5, NULL};
  h3_attr sd[2] = {att[0], so[2]};
  sol[3] = (hand_case){"sol_attention D=128 T=1500 tau -inf",
                       op_of(&h, H3_OP_SOL_ATTENTION, 3, (h3_value *[]){ql, kl, vl}, 2, sd), 2e-5, NULL};
  h3_attr sb[2] = {att[0], h3_attr_float(h.m, "tau", INFINITY)};
  sol[4] = (hand_case){"sol_attention D=128 T=1500 tau +inf (the band)",
                       op_of(&h, H3_OP_SOL_ATTENTION, 3, (h3_value *[]){ql, kl, vl}, 2, sb), 2e-5, NULL};
  /* index with an offset; randn (bitwise) */
  h3_value *xi = in_of(&h, "xi", H3_BF16, 2, (int64_t[]){10, 24});
  h3_value *ii = in_of(&h, "ii", H3_I32, 0, NULL);
  h3_attr off = h3_attr_int(h.m, "offset", 1);
  cases[n++] = (hand_case){"index", op_of(&h, H3_OP_INDEX, 2, (h3_value *[]){xi, ii}, 1, &off), 0, NULL};
  h3_attr rn[2] = {h3_attr_ints(h.m, "shape", 2, (int64_t[]){37, 29}), h3_attr_string(h.m, "stream", "noise")};
  cases[n++] = (hand_case){"randn (bitwise)", op_of(&h, H3_OP_RANDN, 0, NULL, 2, rn), 0, NULL};
  /* rms_norm_rope at the H3 head (56 x 128, rope dims 96, the k columns of qkv): the tiny
     models only reach 16-wide heads */
  h3_value *xq = in_of(&h, "xq", H3_BF16, 2, (int64_t[]){40, 21504});
  h3_value *wq = in_of(&h, "wq", H3_BF16, 1, (int64_t[]){128});
  h3_value *cq = in_of(&h, "cq", H3_BF16, 2, (int64_t[]){40, 48});
  h3_value *sq = in_of(&h, "sq", H3_BF16, 2, (int64_t[]){40, 48});
  h3_attr nr[3] = {h3_attr_int(h.m, "start", 7168), h3_attr_int(h.m, "heads", 56),
                   h3_attr_float(h.m, "eps", 1e-5)};
  cases[n++] = (hand_case){"rms_norm_rope 56x128 R=96",
                           op_of(&h, H3_OP_RMS_NORM_ROPE, 4, (h3_value *[]){xq, wq, cq, sq}, 3, nr), -1, NULL};
  /* moe at widths the tensor-core path takes (multiples of 128; the tiny model's are not),
     40 rows over 8 experts: more than one 16-row pass for some; f32 of bf16 roundings taken
     in another sum order (a flipped rounding moves a row by a bf16 ulp) */
  cases[n++] = (hand_case){"moe tensor cores H 256 F 128", moe_op(&h, "m", 40, 256, 128, 8, 4), 1e-5, NULL};
  /* one row: a block per slot, no route launch (the batch-1 decode's form), k 4 and 2 (ids in
     [0, 4): repeated experts, counted once) */
  cases[n++] = (hand_case){"moe tensor cores one row H 256 F 128", moe_op(&h, "m1", 1, 256, 128, 8, 4), 1e-5, NULL};
  cases[n++] = (hand_case){"moe tensor cores one row H 384 F 256 k 2", moe_op(&h, "m2", 1, 384, 256, 8, 2), 1e-5,
                           NULL};
  /* one row at the model's widths: the gate-up step runs long enough (~150 MB of weights) for
     the down step, launched programmatically after it, to start while its blocks run (a read of
     act before h3_pdl_wait would show here) */
  cases[n++] = (hand_case){"moe tensor cores one row H 6144 F 3072 E 8 k 4 (programmatic down step)",
                           moe_op(&h, "m3", 1, 6144, 3072, 8, 4), 1e-5, moe_weights};
  /* one row's router at the model's width (6 segments x 32 experts) and at a partial segment
     (2 x 12) */
  cases[n++] = (hand_case){"router_topk one row H 6144 E 32 k 4", router_op(&h, "r1", 1, 6144, 32, 4), -1,
                           router_weights};
  cases[n++] = (hand_case){"router_topk one row H 1100 E 12 k 3", router_op(&h, "r2", 1, 1100, 12, 3), -1,
                           router_weights};
  /* decode rows' index_topk: one row of 40 blocks (16 selected) and of 3 (every block selected,
     no score computed), 5 rows of their own tables (40 down to 31 blocks) */
  cases[n++] = (hand_case){"index_topk one row 40 blocks Hi 4", topk_row_op(&h, "t1", 1, 4, 45, 40), -1,
                           topk_row_prep};
  cases[n++] = (hand_case){"index_topk one row 3 blocks Hi 4", topk_row_op(&h, "t2", 1, 4, 5, 3), -1,
                           topk_row_prep};
  cases[n++] = (hand_case){"index_topk 5 rows of a table each Hi 4", topk_row_op(&h, "t3", 5, 4, 211, 40), -1,
                           topk_row_prep};
  /* moe's cuBLASLt form (from 1024 rows per expert on average): 2048 rows, k 2 over 4 experts,
     ids uniform over the 4 (a repeat in a row counted once), and skewed (experts 0 .. 3: 2048,
     293, none, 1755 rows) */
  cases[n++] = (hand_case){"moe cuBLASLt T 2048 H 256 F 256 E 4 k 2", moe_op(&h, "l", 2048, 256, 256, 4, 2),
                           1e-5, moe_weights};
  cases[n++] = (hand_case){"moe cuBLASLt uneven experts T 2048 H 384 F 128 E 4 k 2",
                           moe_op(&h, "u", 2048, 384, 128, 4, 2), 1e-5, moe_skewed};
  /* moe through the grouped GEMMs (T k >= 32 E rows): 384 rows, ~260 per expert (3 m-tiles,
     the last partial); 333 rows with uneven experts (333, 48, none, 285), 2 and 3 n-tiles and
     more k-steps than the wgmma pipeline's 4 stages (down: 6, not a multiple of 4); in the
     persistent wgmma form m-tile pairs of one expert, odd m-tiles of two experts, one beside
     no m-tile, and m-tiles of at most 64 rows (one warpgroup idle) */
  hand_case gemm[2] = {
      {"moe GEMMs T 384 H 256 F 256 E 4 k 4", moe_op(&h, "g", 384, 256, 256, 4, 4), 1e-5, moe_weights},
      {"moe GEMMs uneven experts T 333 H 512 F 384 E 4 k 2", moe_op(&h, "s", 333, 512, 384, 4, 2), 1e-5,
       moe_skewed}};
  /* markov_draft at 20 sequences (two m-tiles of the tensor-core step, the second partial),
     V = 300 (a partial last block), r = 32: the fp32 form bitwise, the mma form's fp32 sums in
     another order (NMSE ~1e-14; a draft may only differ at a near tie, which markov_winners
     rules out) */
  hand_case markov[2] = {
      {"markov_draft S 20 G 3 V 300 r 32", markov_op(&h, "mk", 20, 3, 300, 32), 1e-10, markov_winners},
      /* the model's rank: the fp32 step's 4 stages of w2 rows, 3 full blocks and a partial one */
      {"markov_draft S 2 G 3 V 1000 r 256", markov_op(&h, "ml", 2, 3, 1000, 256), 1e-10, markov_winners}};
  /* spec_accept over 20000 logits a row (5 argmax pieces, the last partial): greedy sequences
     deciding all 9 rows and 6, a sampled one; bitwise (the pieces merge to one scan's result) */
  hand_case accept[1] = {{"spec_accept S 3 G 8 V 20000", accept_op(&h, "sa", 3, 8, 20000), 0, accept_inputs}};
  /* linear_nvfp4 at decode and draft-like shapes: 12 rows in K splits, 1 row over the draft's
     fc K (K splits), 8 rows with a partial column group, 13 rows, 16 rows over 3 chunks, 6 rows
     over 32 column groups, 6 rows at the draft's fc (the row-pair form: 192 column groups in 2
     splits, 9 turns a warp, its weight ring past its first rounds), and above 64 rows (the
     dequantized form's shapes) */
  hand_case nvfp4[9] = {
      {"linear_nvfp4 M 12 N 16 K 20480", nvfp4_op(&h, "ng", 12, 16, 20480), -1, nvfp4_inputs},
      {"linear_nvfp4 M 1 N 300 K 18432", nvfp4_op(&h, "na", 1, 300, 18432), -1, nvfp4_inputs},
      {"linear_nvfp4 M 8 N 200 K 4096", nvfp4_op(&h, "nb", 8, 200, 4096), -1, nvfp4_inputs},
      {"linear_nvfp4 M 13 N 96 K 2560", nvfp4_op(&h, "nc", 13, 96, 2560), -1, nvfp4_inputs},
      {"linear_nvfp4 M 16 N 64 K 768", nvfp4_op(&h, "nd", 16, 64, 768), -1, nvfp4_inputs},
      {"linear_nvfp4 M 6 N 1000 K 6144", nvfp4_op(&h, "nh", 6, 1000, 6144), -1, nvfp4_inputs},
      {"linear_nvfp4 M 6 N 6144 K 18432", nvfp4_op(&h, "ni", 6, 6144, 18432), -1, nvfp4_inputs},
      {"linear_nvfp4 M 80 N 136 K 1024", nvfp4_op(&h, "ne", 80, 136, 1024), -1, nvfp4_inputs},
      /* the dequantized form's two slabs of 128 MiB at most: 1920 weight rows, then 1772 */
      {"linear_nvfp4 M 72 N 3692 K 18432", nvfp4_op(&h, "nf", 72, 3692, 18432), -1, nvfp4_inputs}};
  /* M3.1 attention of many rows of one sequence (m31_att_case): the measured prefill (2048
     rows from 0; 4 kv heads there, 2 here to keep the CPU reference short), extends of 130 rows
     (the last 8-row block with 2 rows; at 3003 the 8-row blocks straddle page boundaries), a
     16k prompt's last rows (each row 16 of 126-128 blocks: 8 rows choose up to ~120), and two
     small ones the cpu backend runs too (rows straddling pages from 61; varied selections) */
  m31_att_case m31[9] = {
      {"paged T=2048 from 0 Hk=2", 2048, 2, 0, 0, 17, 20, false, NULL, 0},
      {"sparse T=2048 from 0 Hk=2, every causal block", 2048, 2, 0, 1, 17, 20, false, NULL, 0},
      {"paged T=130 at 3000 Hk=4", 130, 4, 3000, 0, 26, 30, false, NULL, 0},
      {"sparse T=130 at 3003 Hk=2, varied selections", 130, 2, 3003, 2, 26, 30, false, NULL, 0},
      {"sparse T=384 at 16000 Hk=1, varied selections", 384, 1, 16000, 2, 129, 131, false, NULL, 0},
      {"paged T=203 at 61 Hk=1", 203, 1, 61, 0, 4, 6, true, NULL, 0},
      {"sparse T=96 at 700 Hk=1, varied selections", 96, 1, 700, 2, 8, 9, true, NULL, 0},
      /* a batched verify: 20 sequences of 9 rows, each its own table and positions 1000 + 61 b
         .. (the one-row kernel; under tile the row-tiled kernel's groups: a tile of 8 rows and
         one of 1 each) */
      {"paged 20 sequences x 9 rows at 1000.. Hk=2", 180, 2, 1000, 0, 18, 367, true, NULL, 20},
      {"sparse 20 sequences x 9 rows at 1000.. Hk=1, varied selections", 180, 1, 1000, 2, 18, 367, false, NULL, 20}};
  for (int i = 0; i < 9; i++) m31[i].op = m31_att_op(&h, &m31[i], i);
  /* one decode row at a 2k context, 4 kv heads of 16 q heads (the small model's shape), and a
     batch-1 verify's 9 rows (3 splits each: clusters of 3, rows taken last first) */
  m31_att_case m31d[3] = {{"m31 decode attention paged T=1 at 2047 Hk=4", 1, 4, 2047, 0, 17, 20, false, NULL, 0},
                          {"m31 decode attention sparse T=1 at 2047 Hk=4, varied selections", 1, 4, 2047, 2, 17,
                           20, false, NULL, 0},
                          {"m31 verify attention sparse T=9 at 2040 Hk=4, varied selections", 9, 4, 2040, 2, 17,
                           20, false, NULL, 0}};
  for (int i = 0; i < 3; i++) m31d[i].op = m31_att_op(&h, &m31d[i], 9 + i);
  h3_plan *plan = load_plan_linear_form(b, h.m, "skinny", "hand-made ops"); /* owns h.m */
  if (!plan) return;
  check_cases(b, cases, n, "");
  check_moe_gemm_forms(b, gemm, 2);
  check_markov_forms(b, markov, 2);
  check_cases(b, accept, 1, "");
  check_nvfp4_forms(b, nvfp4, 9);
  check_sol_forms(b, sol, 5, all_attention);
  check_m31_attention(b, m31, 9, all_attention);
  check_m31_decode_splits(b, m31d, 3, all_attention);
  if (!a128v || !a333v) {
    printf("FAIL hand-made attention with a v view: cannot build the op\n");
    failed++;
  }
  const char *impls[3] = {"reference", "cudnn", "flash"};
  for (int i = 0; i < (all_attention ? 3 : 1); i++) {
    h3_diag d;
    h3_diag_init(&d);
    if (h3_backend_set_option(b, "attention", impls[i], &d) != H3_OK) {
      printf("FAIL attention %s: cannot select it\n", impls[i]);
      failed++;
    }
    char tag[64];
    snprintf(tag, sizeof tag, "attention D=128 segments (%s)", impls[i]);
    if (a128) check_op(b, a128, tag, -1, NULL);
    snprintf(tag, sizeof tag, "attention D=128 T=333 (%s)", impls[i]);
    if (a333) check_op(b, a333, tag, -1, NULL);
    snprintf(tag, sizeof tag, "attention D=128 segments v view (%s)", impls[i]);
    if (a128v) check_op(b, a128v, tag, -1, NULL);
    snprintf(tag, sizeof tag, "attention D=128 T=333 v view (%s)", impls[i]);
    if (a333v) check_op(b, a333v, tag, -1, NULL);
    snprintf(tag, sizeof tag, "attention D=64 (%s; flash falls back to cudnn)", impls[i]);
    if (a64) check_op(b, a64, tag, -1, NULL);
    report(&d); /* fallback warnings, if any */
    h3_diag_free(&d);
  }
  check_sage_forms(b, sage, n_sage, all_attention); /* last: a form new to a GPU may hang */
  h3_plan_free(plan);
}

/* The skinny linear's streaming form (H3_LINEAR_FORM=stream while its plan loads: linears of
 * one row, K a multiple of 256) at decode-sized weights, odd N with a bias, 17000 columns to f32
 * (the lm_head's shape class) and each way of cutting a row into chunks. */
static void check_stream_linears(h3_backend *b) {
  hand h;
  h.m = h3_module_new("gpu_ops_stream", "test");
  h.g = h3_module_add_graph(h.m, "g", H3_GRAPH_FUNCTION, (h3_span){0});
  h.bld = (h3_builder){h.m, &h.g->body, NULL, {0}};
  /* chunks a row pair (C) and segments a chunk (G): 6 / 4, 4 / 4, 1 / 2, 1 / 1, 3 / 1 (one
   * row: its pair's second row read twice, never stored), 18 / 4 (three rounds of the
   * finisher's 8 loads) */
  enum { NS = 6 };
  static const linear_shape sh[NS] = {{1, 9216, 6144, false, false}, {1, 999, 4096, false, true},
                                      {1, 17000, 512, true, false},  {1, 600, 256, true, true},
                                      {1, 1, 768, false, true},      {1, 6144, 18432, false, false}};
  static char tag[NS][64];
  hand_case cases[NS];
  for (int i = 0; i < NS; i++) cases[i] = linear_case(&h, "stream", 't', i, sh[i], tag[i]);
  h3_plan *plan = load_plan_linear_form(b, h.m, "stream", "stream linears"); /* owns h.m */
  if (!plan) return;
  check_cases(b, cases, NS, "");
  check_cases(b, cases, NS, "second launch"); /* the tickets back at 0 after the first */
  h3_plan_free(plan);
}

/* ---- 3. random weights on the GPU ---------------------------------------------------------- */
static void check_weights(h3_backend *b, const char *dir, const char *file) {
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = load(dir, file, H3_TIER_LOSSLESS, false, &d);
  h3_weights *w = m ? h3_weights_random(m, SEED, &d) : NULL;
  if (!w) {
    printf("FAIL weights %s: cannot build the module or its host weights\n", file);
    failed++;
    report(&d);
  }
  for (int i = 0; w && i < m->n_params; i++) {
    const h3_param *p = m->params[i];
    size_t bytes = w->w[i].bytes;
    gpu_buf g = {0};
    void *host = malloc(bytes ? bytes : 1);
    bool guards = false;
    bool ok = host && gpu_buf_alloc(b, &g, bytes, &d) && gpu_buf_poison(b, &g, &d) &&
              b->ext->init_param(b, g.p, p, SEED, 0, h3_weights_tensor_count(p), &d) == H3_OK &&
              gpu_buf_download(b, &g, host, &guards, &d) && guards &&
              memcmp(host, w->w[i].data, bytes) == 0;
    if (ok) {
      passed++;
    } else {
      printf("FAIL weights %s: parameter %s differs from h3_weights_random\n", file, p->name);
      failed++;
      report(&d);
    }
    gpu_buf_free(b, &g);
    free(host);
  }
  h3_weights_free(w);
  h3_module_free(m);
  h3_diag_free(&d);
}

int main(int argc, char **argv) {
  const char *dir = H3_SOURCE_DIR "/models", *backend = "cuda";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--backend") && i + 1 < argc) backend = argv[++i];
    else dir = argv[i];
  }
  bool cuda = !strcmp(backend, "cuda");
  if (cuda) gpu_require();
  gpu_rng_seed(&rng, 7);
  h3_diag d;
  h3_diag_init(&d);
  h3_backend_options bo = {.threads = 1, .seed = SEED};
  h3_backend *b = h3_backend_create(backend, &bo, &d);
  if (b && cuda) h3_backend_set_option(b, "attention", "cudnn", &d);
  if (!b || d.errors) {
    h3_diag_print(&d, stderr);
    printf("0 passed, 1 failed\n");
    return 1;
  }
  printf("device: %s\n", h3_backend_device_name(b));
  check_model(b, dir, "minimax_h3.g", H3_TIER_LOSSLESS, false);
  check_model(b, dir, "minimax_h3.g", H3_TIER_EXACT, false);
  check_model(b, dir, "minimax_h3.g", H3_TIER_LOSSLESS, true);
  check_model(b, dir, "minimax_h3.g", H3_TIER_HIGH, false); /* Cache-DiT */
  check_model(b, dir, "minimax_m3_1.g", H3_TIER_LOSSLESS, false);
  char all_ops[4200]; /* beside MODELS_DIR in the checkout the binary runs in */
  snprintf(all_ops, sizeof all_ops, "%s/../tests/codegen/all_ops.ir", dir);
  check_ir_file(b, access(all_ops, R_OK) == 0 ? all_ops : H3_SOURCE_DIR "/tests/codegen/all_ops.ir");
  check_hand(b, cuda);
  check_stream_linears(b);
  if (b->ext && b->ext->init_param) { /* weights made on the device */
    check_weights(b, dir, "minimax_h3.g");
    check_weights(b, dir, "minimax_m3_1.g");
  }
  check_coverage(b->ops->name);
  h3_backend_free(b);
  h3_diag_free(&d);
  printf("gpu_ops: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
