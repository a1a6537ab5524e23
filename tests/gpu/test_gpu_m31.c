/* test_gpu_m31.c: MiniMax-M3.1 at the small config on the cuda backend (every real width,
 * 4 layers, 32 experts; weights made on the GPU), the paging and extend properties that the
 * CPU backend checks bitwise at the tiny config (docs/models/minimax_m3_1.md §8), here
 * between the cuda backend's own code paths:
 * 1. verify == decode: the logits of the 9 verify rows (one extend at positions P..P+8 of a
 *    P-token prefill) against 9 DECODE steps over the same tokens;
 * 2. chunked prefill: the prompt in chunks of 1 (DECODE steps), of 9 (verify) and of a page
 *    (128, a plan with gamma = 127) instead of one prefill: the prompt's last logits and the
 *    next DECODE step's logits;
 * 3. scrambled pages: decode_batch with two rows of the same sequence, one through its pages
 *    as prefilled, one through a copy of them in scrambled physical pages: bitwise equal
 *    logits and cache rows;
 * 4. MSA == dense below 2048 positions (ops at the model's widths: 64 q heads, 4 kv heads,
 *    head_dim 128, page 128): index_topk selects every causal block, and sparse_attention over
 *    them equals paged_attention (decode rows and extend rows, scrambled pages), each also
 *    against the CPU reference.
 * Logits of different code paths (GEMMs of other row counts sum in other orders) are compared
 * by NMSE (LOGIT_LIMIT) and by their argmax, which must agree unless the top-2 margin is
 * below MARGIN (issue 17's rule for tokens). The GEMMs keep cuBLASLt's first heuristic pick
 * (H3_GEMM_TUNE=0 unless set): the tuner picks by timing, which can differ from run to run,
 * and the last verify row passed in some runs and failed in others (NMSE 0.041, the same
 * argmax: an expert near-tie flipping with the sums' order).
 *   test_gpu_m31 MODELS_DIR        (exit 77 without a GPU)
 */
#include "gpu_common.h"

#include "h3/cuda_backend.h"
#include "h3/frontend.h"
#include "h3/passes.h"
#include "h3/plan.h"
#include "h3/runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEED 20261202u
#define P 200             /* prompt length: two pages, the second partly filled */
#define VERIFY_ROWS 9     /* gamma 8 */
#define PAGE 128
#define LOGIT_LIMIT 1e-3  /* NMSE of fp32 logits between code paths */
#define MARGIN 0.05


/* ---- the model on cuda ---------------------------------------------------------------- */
typedef struct {
  h3_plan *plan;
  h3_backend *b;
  h3_runtime *rt;
  int64_t vocab, pt_len;
} model;

static int64_t config(const h3_module *m, const char *key) {
  for (int i = 0; i < m->n_config; i++)
    if (!strcmp(m->config_entries[i].key, key)) return m->config_entries[i].value;
  return -1;
}

/* The small config with a 4096-token context, two sequences and the given gamma. */
static bool model_new(model *x, const char *dir, int gamma, h3_diag *d) {
  memset(x, 0, sizeof *x);
  char path[4096];
  snprintf(path, sizeof path, "%s/minimax_m3_1.g", dir);
  h3_config_override ov[] = {{"prompt_len", P}, {"max_ctx", 4096}, {"seqs", 2}, {"gamma", gamma},
                             {"max_new_tokens", 2}};
  h3_frontend_options fo = {.config = "small", .n_overrides = 5, .overrides = ov};
  h3_module *m = h3_frontend_load(path, &fo, d);
  h3_pass_options po = h3_pass_options_default();
  po.tier = H3_TIER_LOSSLESS;
  if (!m || h3_pass_pipeline_run(m, &po, d) != H3_OK) {
    h3_module_free(m);
    return false;
  }
  h3_plan_options plo = {.quality = H3_TIER_LOSSLESS};
  if (h3_plan_build(&x->plan, m, &plo, d) != H3_OK || h3_plan_compile_kernels(x->plan, d) != H3_OK)
    return false;
  h3_backend_options bo = {.threads = 2, .seed = SEED};
  h3_cuda_options co = {.attention = "flash"};
  x->b = h3_backend_cuda_new(&bo, &co, d);
  if (!x->b || h3_cuda_load_plan(x->b, x->plan, d) != H3_OK) return false;
  h3_runtime_options ro = {.weight_seed = SEED};
  x->rt = h3_runtime_new(x->plan->module, x->b, NULL, &ro, d);
  const h3_graph *db = h3_module_graph(x->plan->module, "decode_batch");
  x->vocab = config(x->plan->module, "vocab");
  x->pt_len = db ? db->inputs[2]->type.dims[1] : 0; /* page_table [seqs, pt_len] */
  return x->rt != NULL && x->vocab > 0 && x->pt_len > 0;
}

static void model_free(model *x) {
  h3_runtime_free(x->rt);
  h3_backend_free(x->b);
  h3_plan_free(x->plan);
}

/* The three caches, host copies (k, v, ik). */
typedef struct {
  void *t[3];
  h3_type type[3]; /* [layers, pages, page, ...] */
  size_t bytes[3];
} caches;

static const char *const cache_names[3] = {"k_cache", "v_cache", "ik_cache"};

static void caches_free(caches *c) {
  for (int i = 0; i < 3; i++) free(c->t[i]);
  memset(c, 0, sizeof *c);
}

/* Zeroed caches of g's types. */
static bool caches_zero(const h3_graph *g, caches *c) {
  memset(c, 0, sizeof *c);
  for (int i = 0; i < g->n_inputs; i++)
    for (int j = 0; j < 3; j++)
      if (!strcmp(g->inputs[i]->name, cache_names[j])) {
        c->type[j] = g->inputs[i]->type;
        c->bytes[j] = (size_t)h3_type_bytes(&c->type[j]);
        c->t[j] = calloc(1, c->bytes[j]);
      }
  return c->t[0] && c->t[1] && c->t[2];
}

static bool caches_copy(const caches *a, caches *c) {
  for (int j = 0; j < 3; j++) {
    c->type[j] = a->type[j], c->bytes[j] = a->bytes[j];
    c->t[j] = malloc(a->bytes[j]);
    if (!c->t[j]) return false;
    memcpy(c->t[j], a->t[j], a->bytes[j]);
  }
  return true;
}

/* Runs graph `name` with the named inputs (data borrowed; caches from c) and returns its
 * output `want` (malloc'd, NULL on failure); the caches in c are replaced by the outputs. */
static void *call(model *x, const char *name, caches *c, int n, const char *const *names,
                  void *const *data, const char *want, h3_diag *d) {
  const h3_graph *g = h3_module_graph(x->plan->module, name);
  h3_host_tensor in[16] = {{0}}, out[16] = {{0}};
  if (!g || g->n_inputs > 16 || g->n_outputs > 16) return NULL;
  for (int i = 0; i < g->n_inputs; i++) {
    in[i] = (h3_host_tensor){g->inputs[i]->name, g->inputs[i]->type, NULL,
                             (size_t)h3_type_bytes(&g->inputs[i]->type)};
    for (int j = 0; j < n; j++)
      if (!strcmp(names[j], in[i].name)) in[i].data = data[j];
    for (int j = 0; j < 3; j++)
      if (!strcmp(cache_names[j], in[i].name)) in[i].data = c->t[j];
    if (!in[i].data) {
      h3_diag_error(d, (h3_span){0}, NULL, "test: graph %s input %s not given", name, in[i].name);
      return NULL;
    }
  }
  if (h3_runtime_run(x->rt, g, in, out, d) != H3_OK) return NULL;
  void *r = NULL;
  for (int i = 0; i < g->n_outputs; i++) {
    int cj = -1;
    for (int j = 0; j < 3; j++)
      if (!strcmp(cache_names[j], g->output_names[i])) cj = j;
    if (cj >= 0) {
      free(c->t[cj]);
      c->t[cj] = out[i].data;
    } else if (!r && !strcmp(g->output_names[i], want)) {
      r = out[i].data;
    } else {
      free(out[i].data);
    }
  }
  return r;
}

/* DECODE of one token at `pos`: its logits [V]. */
static float *decode(model *x, caches *c, int32_t token, int32_t pos, h3_diag *d) {
  const char *names[2] = {"tokens", "pos0"};
  void *data[2] = {&token, &pos};
  return call(x, "decode", c, 2, names, data, "logits", d);
}

/* verify (extend) of the plan's verify rows at pos0: logits [rows, V]. */
static float *extend(model *x, caches *c, const int32_t *tokens, int32_t pos0, h3_diag *d) {
  const char *names[2] = {"tokens", "pos0"};
  void *data[2] = {(void *)tokens, &pos0};
  return call(x, "verify", c, 2, names, data, "logits", d);
}

/* ---- logits comparisons ---------------------------------------------------------------- */
static int64_t argmax(const float *v, int64_t n) {
  int64_t b = 0;
  for (int64_t i = 1; i < n; i++)
    if (v[i] > v[b]) b = i;
  return b;
}

static double top2_margin(const float *v, int64_t n) {
  float a = -INFINITY, b = -INFINITY;
  for (int64_t i = 0; i < n; i++)
    if (v[i] > a) b = a, a = v[i];
    else if (v[i] > b) b = v[i];
  return (double)a - (double)b;
}

/* got vs want (fp32 logits [V]): NMSE within LOGIT_LIMIT, the same argmax unless want's
 * top-2 margin is below MARGIN. */
static void check_logits(const model *x, const float *got, const float *want, const char *what) {
  if (!got || !want) {
    gpu_check(false, "%s: a run failed", what);
    return;
  }
  h3_type t = h3_type_make(H3_F32, 1, (int64_t[]){x->vocab});
  gpu_cmp c = gpu_compare(&t, got, want);
  int64_t ag = argmax(got, x->vocab), aw = argmax(want, x->vocab);
  double m = top2_margin(want, x->vocab);
  gpu_check(gpu_cmp_ok(&c, LOGIT_LIMIT) && (ag == aw || m < MARGIN),
        "%s: logits nmse %.3g (limit %g), argmax %lld vs %lld (top-2 margin %.3g)", what, c.nmse,
        LOGIT_LIMIT, (long long)ag, (long long)aw, m);
}

/* ---- 1 and 2: extend, decode and chunks ---------------------------------------------------- */
typedef struct {
  int32_t prompt[P];
  float *prefill_logits; /* [V] of position P - 1 */
  caches after_prefill;
  int32_t next[VERIFY_ROWS]; /* greedy tokens at P .. P + 8 */
  float *decode_logits[VERIFY_ROWS];
} reference;

static bool reference_run(model *x, reference *r, h3_diag *d) {
  gpu_rng g;
  gpu_rng_seed(&g, SEED);
  for (int i = 0; i < P; i++) r->prompt[i] = (int32_t)gpu_uniform(&g, 0, (double)x->vocab);
  if (!caches_zero(h3_module_graph(x->plan->module, "prefill"), &r->after_prefill)) return false;
  const char *names[2] = {"tokens", "pos0"};
  int32_t pos0 = 0;
  void *data[2] = {r->prompt, &pos0};
  r->prefill_logits = call(x, "prefill", &r->after_prefill, 2, names, data, "logits", d);
  if (!r->prefill_logits) return false;
  caches c;
  if (!caches_copy(&r->after_prefill, &c)) return false;
  int32_t tok = (int32_t)argmax(r->prefill_logits, x->vocab);
  for (int i = 0; i < VERIFY_ROWS; i++) {
    r->next[i] = tok;
    r->decode_logits[i] = decode(x, &c, tok, P + i, d);
    if (!r->decode_logits[i]) break;
    tok = (int32_t)argmax(r->decode_logits[i], x->vocab);
  }
  caches_free(&c);
  return r->decode_logits[VERIFY_ROWS - 1] != NULL;
}

static void check_verify_rows(model *x, const reference *r, h3_diag *d) {
  caches c;
  float *v = caches_copy(&r->after_prefill, &c) ? extend(x, &c, r->next, P, d) : NULL;
  for (int i = 0; i < VERIFY_ROWS; i++) {
    char what[96];
    snprintf(what, sizeof what, "verify row %d vs DECODE at position %d", i, P + i);
    check_logits(x, v ? v + (size_t)i * (size_t)x->vocab : NULL, r->decode_logits[i], what);
  }
  free(v);
  caches_free(&c);
}

/* The prompt through model y's verify graph in chunks of its rows (the last chunk padded
 * with token 1 past the prompt), then one DECODE of the first new token; both logits
 * checked against the one-prefill reference. */
static void check_chunks(model *y, const model *x, const reference *r, const char *tag, h3_diag *d) {
  const h3_graph *g = h3_module_graph(y->plan->module, "verify");
  caches c;
  if (!g || !caches_zero(g, &c)) {
    gpu_check(false, "%s: setup", tag);
    return;
  }
  int rows = (int)g->inputs[0]->type.dims[0];
  int32_t *tok = malloc((size_t)rows * sizeof *tok);
  float *last = NULL;
  for (int c0 = 0; tok && c0 < P; c0 += rows) {
    for (int i = 0; i < rows; i++) tok[i] = c0 + i < P ? r->prompt[c0 + i] : 1;
    float *v = extend(y, &c, tok, c0, d);
    if (!v) break;
    if (P - 1 < c0 + rows) {
      last = malloc((size_t)y->vocab * sizeof *last);
      if (last) memcpy(last, v + (size_t)(P - 1 - c0) * (size_t)y->vocab, (size_t)y->vocab * sizeof *last);
    }
    free(v);
  }
  char what[128];
  snprintf(what, sizeof what, "%s: the prompt's last logits vs one prefill", tag);
  check_logits(x, last, r->prefill_logits, what);
  float *n = last ? decode(y, &c, r->next[0], P, d) : NULL;
  snprintf(what, sizeof what, "%s: the next DECODE vs after one prefill", tag);
  check_logits(x, n, r->decode_logits[0], what);
  free(n), free(last), free(tok);
  caches_free(&c);
}

/* Chunks of one row: P DECODE steps from empty caches. */
static void check_decode_chunks(model *x, const reference *r, h3_diag *d) {
  caches c;
  if (!caches_zero(h3_module_graph(x->plan->module, "decode"), &c)) {
    gpu_check(false, "chunks of 1: setup");
    return;
  }
  float *last = NULL;
  for (int i = 0; i < P; i++) {
    free(last);
    if (!(last = decode(x, &c, r->prompt[i], i, d))) break;
  }
  check_logits(x, last, r->prefill_logits, "chunks of 1 (DECODE): the prompt's last logits vs one prefill");
  float *n = last ? decode(x, &c, r->next[0], P, d) : NULL;
  check_logits(x, n, r->decode_logits[0], "chunks of 1 (DECODE): the next DECODE vs after one prefill");
  free(n), free(last);
  caches_free(&c);
}

/* ---- 3: scrambled pages ------------------------------------------------------------------- */
/* Bytes of one cache position (a row of a page) and their offset for (layer, page, slot). */
static size_t row_bytes(const h3_type *t) {
  size_t n = 2;
  for (int i = 3; i < t->rank; i++) n *= (size_t)t->dims[i];
  return n;
}

static size_t row_at(const h3_type *t, int64_t layer, int64_t page, int64_t slot) {
  return (((size_t)layer * (size_t)t->dims[1] + (size_t)page) * (size_t)t->dims[2] + (size_t)slot) *
         row_bytes(t);
}

/* Copies physical page `from` of every layer of the three caches to page `to`. */
static void copy_page(caches *c, int64_t from, int64_t to) {
  for (int j = 0; j < 3; j++)
    for (int64_t l = 0; l < c->type[j].dims[0]; l++)
      memcpy((char *)c->t[j] + row_at(&c->type[j], l, to, 0),
             (char *)c->t[j] + row_at(&c->type[j], l, from, 0), row_bytes(&c->type[j]) * PAGE);
}

/* decode_batch with row 0 through the prefilled pages (logical p at physical p + 1) and row 1
 * through a copy of them at scrambled physical pages of the second sequence's range. */
static void check_scrambled(model *x, const reference *r, h3_diag *d) {
  const int64_t L = x->pt_len, used = (P + PAGE - 1) / PAGE;
  caches c;
  int32_t *table = malloc((size_t)(2 * L) * sizeof *table);
  if (!table || !caches_copy(&r->after_prefill, &c)) {
    gpu_check(false, "scrambled pages: setup");
    free(table);
    return;
  }
  /* row 1: logical p at pages 2L - 3p (descending, every third), then the rest unused ones */
  int64_t n = 0;
  for (int64_t p = 0; p < L; p++) table[p] = (int32_t)(p + 1);
  for (int64_t p = 0; p < used; p++) table[L + n++] = (int32_t)(2 * L - 3 * p);
  for (int64_t q = L + 1; q <= 2 * L && n < L; q++) {
    bool taken = false;
    for (int64_t p = 0; p < used; p++) taken |= table[L + p] == q;
    if (!taken) table[L + n++] = (int32_t)q;
  }
  for (int64_t p = 0; p < used; p++) copy_page(&c, p + 1, table[L + p]);
  int32_t tokens[2] = {r->next[0], r->next[0]}, pos[2] = {P, P};
  const char *names[3] = {"tokens", "pos", "page_table"};
  void *data[3] = {tokens, pos, table};
  float *lg = call(x, "decode_batch", &c, 3, names, data, "logits", d);
  size_t V = (size_t)x->vocab;
  gpu_check(lg && !memcmp(lg, lg + V, V * sizeof *lg),
        "scrambled pages: decode_batch row through scrambled pages equals the row through the "
        "prefilled ones, bitwise");
  check_logits(x, lg, r->decode_logits[0], "scrambled pages: decode_batch row 0 vs DECODE");
  bool same = lg != NULL;
  const int64_t page1 = P / PAGE, slot = P % PAGE;
  for (int j = 0; same && j < 3; j++)
    for (int64_t l = 0; l < c.type[j].dims[0]; l++)
      same &= !memcmp((char *)c.t[j] + row_at(&c.type[j], l, table[page1], slot),
                      (char *)c.t[j] + row_at(&c.type[j], l, table[L + page1], slot),
                      row_bytes(&c.type[j]));
  gpu_check(same, "scrambled pages: the new K, V and index-key rows are written alike (bitwise)");
  free(lg), free(table);
  caches_free(&c);
}

/* ---- 4: MSA == dense attention below 2048 positions (ops) ------------------------------------ */
#define HQ 64
#define HK 4
#define HD 128
#define NPG 20 /* physical pages: 16 logical ones scrambled among 1 .. 19 */
#define TOPK 16

typedef struct {
  h3_module *m;
  h3_graph *g;
  h3_builder bld;
} hand;

static h3_value *in_of(hand *h, const char *name, h3_dtype dt, int rank, const int64_t *dims) {
  return h3_graph_add_input(h->m, h->g, name, h3_type_make(dt, rank, dims), (h3_span){0});
}

/* Runs op on the backend with host operands `in` into host results `out` (malloc'd). */
static bool run_on(h3_backend *b, const h3_op *op, void *const *in, void **out, h3_diag *d) {
  gpu_buf bi[8] = {0}, bo[2] = {0};
  h3_tensor ti[8], to[2];
  bool ok = op->n_operands <= 8 && op->n_results <= 2;
  for (int i = 0; ok && i < op->n_operands; i++) {
    ok = gpu_buf_alloc(b, &bi[i], (size_t)h3_type_bytes(&op->operands[i]->type), d) &&
         gpu_buf_upload(b, &bi[i], in[i], d);
    ti[i] = (h3_tensor){op->operands[i]->type, bi[i].p};
  }
  for (int i = 0; ok && i < op->n_results; i++) {
    ok = gpu_buf_alloc(b, &bo[i], (size_t)h3_type_bytes(&op->results[i]->type), d) &&
         gpu_buf_poison(b, &bo[i], d);
    to[i] = (h3_tensor){op->results[i]->type, bo[i].p};
  }
  ok = ok && b->ops->run_op(b, op, ti, op->n_operands, to, op->n_results, d) == H3_OK &&
       b->ops->sync(b, d) == H3_OK;
  for (int i = 0; ok && i < op->n_results; i++) {
    bool guards = false;
    out[i] = malloc(bo[i].bytes);
    ok = out[i] && gpu_buf_download(b, &bo[i], out[i], &guards, d) && guards;
  }
  for (int i = 0; i < 8; i++) gpu_buf_free(b, &bi[i]);
  for (int i = 0; i < 2; i++) gpu_buf_free(b, &bo[i]);
  return ok;
}

/* T rows at positions pos0 .. pos0 + T - 1 (all below 2048) of one sequence whose 16
 * logical pages are scrambled over physical pages 1 .. 19. */
static void check_msa_dense(h3_backend *b, int T, int pos0) {
  h3_diag d;
  h3_diag_init(&d);
  hand h = {h3_module_new("m31_msa", "test"), NULL, {0}};
  h.g = h3_module_add_graph(h.m, "g", H3_GRAPH_FUNCTION, (h3_span){0});
  h.bld = (h3_builder){h.m, &h.g->body, NULL, {0}};
  h3_value *v[7] = {
      in_of(&h, "q", H3_BF16, 3, (int64_t[]){T, HQ, HD}),
      in_of(&h, "kc", H3_BF16, 4, (int64_t[]){NPG, PAGE, HK, HD}),
      in_of(&h, "vc", H3_BF16, 4, (int64_t[]){NPG, PAGE, HK, HD}),
      in_of(&h, "pos", H3_I32, 1, (int64_t[]){T}),
      in_of(&h, "pt", H3_I32, 1, (int64_t[]){TOPK}),
      in_of(&h, "iq", H3_BF16, 3, (int64_t[]){T, HK, HD}),
      in_of(&h, "ikc", H3_BF16, 3, (int64_t[]){NPG, PAGE, HD}),
  };
  h3_attr pa[2] = {h3_attr_float(h.m, "scale", 1.0 / sqrt(HD)), h3_attr_int(h.m, "page", PAGE)};
  h3_attr ta[2] = {h3_attr_int(h.m, "block", PAGE), h3_attr_int(h.m, "topk", TOPK)};
  const h3_op *topk = h3_build_op(&h.bld, H3_OP_INDEX_TOPK, 4, (h3_value *[]){v[5], v[6], v[3], v[4]}, 2, ta, 0, &d);
  const h3_op *dense = h3_build_op(&h.bld, H3_OP_PAGED_ATTENTION, 5, (h3_value *[]){v[0], v[1], v[2], v[3], v[4]}, 2, pa, 0, &d);
  const h3_op *sparse = topk ? h3_build_op(&h.bld, H3_OP_SPARSE_ATTENTION, 6,
                                           (h3_value *[]){v[0], v[1], v[2], topk->results[0], v[3], v[4]}, 2, pa, 0, &d)
                             : NULL;
  h3_plan *plan = topk && dense && sparse ? gpu_plan_load(b, h.m, H3_TIER_LOSSLESS) : NULL;
  if (!plan) {
    if (!topk || !dense || !sparse) h3_module_free(h.m);
    gpu_check(false, "MSA == dense T=%d at %d: cannot build or load the ops", T, pos0);
    h3_diag_print(&d, stderr);
    h3_diag_free(&d);
    return;
  }
  gpu_rng g;
  gpu_rng_seed(&g, SEED + (uint64_t)T);
  void *in[7] = {0};
  for (int i = 0; i < 7; i++)
    if (i != 3 && i != 4) in[i] = gpu_host_random(&g, &v[i]->type, -2.0, 2.0, 0);
  int32_t *pos = malloc((size_t)T * sizeof *pos), pt[TOPK];
  for (int t = 0; t < T; t++) pos[t] = pos0 + t;
  for (int p = 0; p < TOPK; p++) pt[p] = (int32_t)(1 + (7 * p + 3) % (NPG - 1)); /* 7 is coprime to 19 */
  in[3] = pos, in[4] = pt;
  void *sel = NULL, *od = NULL, *os = NULL, *ref = NULL;
  void *tin[4] = {in[5], in[6], in[3], in[4]};
  bool ok = run_on(b, topk, tin, &sel, &d);
  bool every = ok;
  for (int t = 0; ok && t < T; t++)
    for (int hh = 0; hh < HK; hh++)
      for (int s = 0; s < TOPK; s++)
        every &= ((int32_t *)sel)[((size_t)t * HK + (size_t)hh) * TOPK + (size_t)s] == (s <= pos[t] / PAGE ? s : -1);
  gpu_check(every, "index_topk T=%d at %d: every causal block, ascending, -1 padded", T, pos0);
  void *sin[6] = {in[0], in[1], in[2], sel, in[3], in[4]};
  ok = ok && run_on(b, dense, in, &od, &d) && run_on(b, sparse, sin, &os, &d);
  size_t obytes = (size_t)h3_type_bytes(&dense->results[0]->type);
  ref = malloc(obytes);
  h3_tensor hin[5], hout[1] = {{dense->results[0]->type, ref}};
  for (int i = 0; i < 5; i++) hin[i] = (h3_tensor){v[i]->type, in[i]};
  ok = ok && ref && h3_cpu_run_op(dense, hin, 5, hout, 1, 2, SEED, &d) == H3_OK;
  if (!ok) {
    gpu_check(false, "MSA == dense T=%d at %d: a run failed", T, pos0);
  } else {
    const h3_type *ot = &dense->results[0]->type;
    gpu_cmp sd = gpu_compare(ot, os, od), sr = gpu_compare(ot, os, ref), dr = gpu_compare(ot, od, ref);
    double lim = gpu_nmse_limit(H3_BF16);
    gpu_check(gpu_cmp_ok(&sd, lim) && gpu_cmp_ok(&sr, lim) && gpu_cmp_ok(&dr, lim),
          "MSA == dense T=%d at positions %d..%d: nmse sparse vs paged %.3g, sparse vs cpu %.3g, "
          "paged vs cpu %.3g (limit %.3g)", T, pos0, pos0 + T - 1, sd.nmse, sr.nmse, dr.nmse, lim);
  }
  h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  for (int i = 0; i < 7; i++)
    if (i != 4) free(in[i]);
  free(sel), free(od), free(os), free(ref);
  h3_plan_free(plan);
}

int main(int argc, char **argv) {
  gpu_require();
  /* cuBLASLt's first heuristic algorithm for every GEMM, not the tuner's fastest by timing:
   * the logits of two code paths differ by their sums' order, which must be the same in every
   * run, so that an expert near-tie flips (or not) the same way each time */
  setenv("H3_GEMM_TUNE", "0", 0);
  const char *dir = argc > 1 ? argv[1] : H3_SOURCE_DIR "/models";
  h3_diag d;
  h3_diag_init(&d);
  {
    h3_backend_options bo = {.threads = 2, .seed = SEED};
    h3_cuda_options co = {.attention = "flash"};
    h3_backend *b = h3_backend_cuda_new(&bo, &co, &d);
    if (b) {
      check_msa_dense(b, 1, 2047);
      check_msa_dense(b, 1, 1000);
      check_msa_dense(b, 64, 1984);
      check_msa_dense(b, 64, 100);
    } else {
      gpu_check(false, "a cuda backend for the attention ops");
    }
    h3_backend_free(b);
  }
  model x, y;
  reference r;
  memset(&r, 0, sizeof r);
  memset(&y, 0, sizeof y);
  if (!model_new(&x, dir, VERIFY_ROWS - 1, &d) || !reference_run(&x, &r, &d)) {
    gpu_check(false, "the small plan (prompt %d) on cuda: prefill and %d DECODE steps", P, VERIFY_ROWS);
  } else {
    check_verify_rows(&x, &r, &d);
    check_scrambled(&x, &r, &d);
    check_chunks(&x, &x, &r, "chunks of 9 (verify)", &d);
    check_decode_chunks(&x, &r, &d);
    if (model_new(&y, dir, PAGE - 1, &d)) check_chunks(&y, &x, &r, "chunks of a page (verify, 128 rows)", &d);
    else gpu_check(false, "the small plan with 128 verify rows");
  }
  h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  free(r.prefill_logits);
  for (int i = 0; i < VERIFY_ROWS; i++) free(r.decode_logits[i]);
  caches_free(&r.after_prefill);
  model_free(&y), model_free(&x);
  printf("%d passed, %d failed\n", gpu_passed, gpu_failed);
  return gpu_failed ? 1 : 0;
}
