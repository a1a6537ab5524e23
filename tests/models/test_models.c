/* test_models.c: compiles every config preset of models/minimax_h3.g and models/minimax_m3_1.g
 * through the front end, verifies the IR and checks the result against the specs:
 *   - the config values equal the spec tables;
 *   - the weight set (names expanded from the stacked IR parameters) equals the spec's weight
 *     tables exactly: same names, dtypes and shapes, nothing missing, nothing extra;
 *   - the parameter totals equal the spec's stated totals, computed here from the spec
 *     formulas (spec_weights.c), not from the compiler;
 *   - the graphs and programs exist with the spec's boundary names and types;
 *   - block stacks are single loop ops (`trunk`, `dense_stack`, `sparse_stack`; the last-row
 *     prefill graphs' `last_stack` of one turn), so a graph has the same number of ops in every
 *     config (no unrolled copies).
 * Usage: test_models [models-folder] (default: H3_SOURCE_DIR/models).
 */
#include "h3/frontend.h"
#include "h3/ir.h"
#include "spec_weights.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
static const char *models_dir = H3_SOURCE_DIR "/models";

#define CHECK(cond, ...)                                                   \
  do {                                                                     \
    if (!(cond)) {                                                         \
      failures++;                                                          \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                 \
      fprintf(stderr, __VA_ARGS__);                                        \
      fputc('\n', stderr);                                                 \
    }                                                                      \
  } while (0)

/* ---- loading ----------------------------------------------------------------------------------- */
static h3_module *load(const char *model, const char *preset) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.g", models_dir, model);
  h3_frontend_options opt = {.config = preset, .n_overrides = 0, .overrides = NULL};
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = h3_frontend_load(path, &opt, &d);
  if (m && h3_verify_module(m, &d) != H3_OK) {
    h3_module_free(m);
    m = NULL;
  }
  if (!m) {
    h3_diag_print(&d, stderr);
    CHECK(0, "%s --config %s does not compile and verify", path, preset);
  }
  h3_diag_free(&d);
  return m;
}

/* ---- config ------------------------------------------------------------------------------------ */
static void check_keys(const h3_module *m, const char *what, const spec_key *k, int n) {
  for (int i = 0; i < n; i++) {
    int64_t got = h3_module_config(m, k[i].key, -1);
    CHECK(got == k[i].value, "%s: config key %s = %lld, spec says %lld", what, k[i].key,
          (long long)got, (long long)k[i].value);
  }
}

/* ---- weights ----------------------------------------------------------------------------------- */
/* Writes pattern with "{}" -> group index and "{e}" -> inner index into buf. */
static void expand_name(char *buf, size_t cap, const char *pat, int64_t gi, int64_t ei) {
  size_t n = 0;
  for (const char *p = pat; *p && n + 1 < cap;) {
    int w = 0;
    if (strncmp(p, "{}", 2) == 0) {
      w = snprintf(buf + n, cap - n, "%lld", (long long)gi);
      p += 2;
    } else if (strncmp(p, "{e}", 3) == 0) {
      w = snprintf(buf + n, cap - n, "%lld", (long long)ei);
      p += 3;
    } else {
      buf[n++] = *p++;
    }
    if (w > 0) n += (size_t)w < cap - n ? (size_t)w : cap - n - 1;
  }
  buf[n] = 0;
}

/* The module's parameters expanded into checkpoint weights (one per group member). */
static void module_weights(const h3_module *m, spec_weights *out) {
  for (int i = 0; i < m->n_params; i++) {
    const h3_param *p = m->params[i];
    int gd = p->group_dims, rank = p->type.rank - gd;
    CHECK(gd >= 0 && gd <= 2 && (rank == 1 || rank == 2), "param %s: %d group dims, member rank %d",
          p->name, gd, rank);
    if (gd < 0 || gd > 2 || rank < 1 || rank > 2) continue;
    int64_t n0 = gd >= 1 ? p->type.dims[0] : 1, n1 = gd >= 2 ? p->type.dims[1] : 1;
    int64_t d0 = p->type.dims[gd], d1 = rank == 2 ? p->type.dims[gd + 1] : -1;
    for (int64_t g = 0; g < n0; g++)
      for (int64_t e = 0; e < n1; e++) {
        char name[256];
        expand_name(name, sizeof name, p->name, p->group_base + g, e);
        spec_weights_add(out, p->type.dtype, d0, d1, "%s", name);
      }
  }
}

static void shape_text(char *buf, size_t cap, const spec_weight *w) {
  if (w->rank == 1)
    snprintf(buf, cap, "%s[%lld]", h3_dtype_name(w->dtype), (long long)w->dims[0]);
  else
    snprintf(buf, cap, "%s[%lld, %lld]", h3_dtype_name(w->dtype), (long long)w->dims[0],
             (long long)w->dims[1]);
}

/* Both lists sorted; reports every difference (the first 20). */
static void compare_weights(const char *what, spec_weights *want, spec_weights *got) {
  CHECK(!want->oom && !got->oom, "%s: out of memory building weight lists", what);
  spec_weights_sort(want);
  spec_weights_sort(got);
  int i = 0, j = 0, shown = 0;
  while (i < want->n || j < got->n) {
    int c = i >= want->n ? 1 : j >= got->n ? -1 : strcmp(want->v[i].name, got->v[j].name);
    char a[64], b[64];
    if (c < 0) {
      if (shown++ < 20) CHECK(0, "%s: spec weight %s is missing", what, want->v[i].name);
      else failures++;
      i++;
    } else if (c > 0) {
      if (shown++ < 20) CHECK(0, "%s: weight %s is not in the spec", what, got->v[j].name);
      else failures++;
      j++;
    } else {
      shape_text(a, sizeof a, &want->v[i]);
      shape_text(b, sizeof b, &got->v[j]);
      if (strcmp(a, b) != 0) {
        if (shown++ < 20) CHECK(0, "%s: weight %s is %s, spec says %s", what, got->v[j].name, b, a);
        else failures++;
      }
      i++;
      j++;
    }
  }
}

typedef struct {
  int64_t params, bytes;
} totals;

static totals weights_total(const spec_weights *w, const char *prefix) {
  totals t = {0, 0};
  for (int i = 0; i < w->n; i++) {
    if (prefix && strncmp(w->v[i].name, prefix, strlen(prefix)) != 0) continue;
    int64_t n = w->v[i].dims[0] * (w->v[i].rank == 2 ? w->v[i].dims[1] : 1);
    t.params += n;
    t.bytes += n * (int64_t)h3_dtype_size(w->v[i].dtype);
  }
  return t;
}

/* The compiler's own totals, straight from the stacked IR parameters. */
static totals module_total(const h3_module *m, const char *prefix) {
  totals t = {0, 0};
  for (int i = 0; i < m->n_params; i++) {
    const h3_param *p = m->params[i];
    if (prefix && strncmp(p->name, prefix, strlen(prefix)) != 0) continue;
    t.params += h3_type_numel(&p->type);
    t.bytes += h3_type_bytes(&p->type);
  }
  return t;
}

/* ---- graphs ------------------------------------------------------------------------------------ */
static int count_ops_region(const h3_region *r) {
  int n = 0;
  for (const h3_op *op = r->first; op; op = op->next) {
    n++;
    for (int k = 0; k < op->n_regions; k++) n += count_ops_region(&op->regions[k]);
  }
  return n;
}

static const h3_graph *graph(const h3_module *m, const char *what, const char *name,
                             h3_graph_kind kind) {
  const h3_graph *g = h3_module_graph(m, name);
  CHECK(g != NULL, "%s: no graph '%s'", what, name);
  if (g) CHECK(g->kind == kind, "%s: '%s' has the wrong kind", what, name);
  return g;
}

/* The top-level loop op of g labelled `label`; checks it is the only one with that label. */
static const h3_op *loop(const char *what, const h3_graph *g, const char *label, int64_t count) {
  const h3_op *found = NULL;
  int n = 0;
  if (!g) return NULL;
  for (const h3_op *op = g->body.first; op; op = op->next) {
    if (op->code != H3_OP_LOOP) continue;
    const char *l = h3_op_attr_string(op, "label", "");
    if (strcmp(l, label) == 0) {
      found = op;
      n++;
    }
  }
  CHECK(n == 1, "%s: graph %s has %d top-level loops labelled '%s', expected 1", what, g->name, n,
        label);
  if (found)
    CHECK(h3_op_attr_int(found, "count", -1) == count, "%s: loop %s runs %lld times, expected %lld",
          what, label, (long long)h3_op_attr_int(found, "count", -1), (long long)count);
  return found;
}

/* Whether region r (recursively) holds a call to callee. */
static int calls(const h3_region *r, const char *callee) {
  for (const h3_op *op = r->first; op; op = op->next) {
    if (op->code == H3_OP_CALL && strcmp(h3_op_attr_string(op, "callee", ""), callee) == 0) return 1;
    for (int k = 0; k < op->n_regions; k++)
      if (calls(&op->regions[k], callee)) return 1;
  }
  return 0;
}

/* Checks input i (or output i when out) of g: name and "dtype[dims]" text. */
static void io(const char *what, const h3_graph *g, int out, int i, const char *name,
               const char *type_fmt, ...) __attribute__((format(printf, 6, 7)));
static void io(const char *what, const h3_graph *g, int out, int i, const char *name,
               const char *type_fmt, ...) {
  if (!g) return;
  int n = out ? g->n_outputs : g->n_inputs;
  CHECK(i < n, "%s: %s has no %s %d (%s)", what, g->name, out ? "output" : "input", i, name);
  if (i >= n) return;
  const char *got_name = out ? g->output_names[i] : g->inputs[i]->name;
  CHECK(got_name && strcmp(got_name, name) == 0, "%s: %s %s %d is '%s', expected '%s'", what,
        g->name, out ? "output" : "input", i, got_name ? got_name : "(null)", name);
  char want[128];
  va_list ap;
  va_start(ap, type_fmt);
  vsnprintf(want, sizeof want, type_fmt, ap);
  va_end(ap);
  h3_strbuf b;
  h3_strbuf_init(&b);
  const h3_type *t = NULL;
  if (out) {
    /* output types are the operand types of the body's return */
    const h3_op *ret = g->body.last;
    if (ret && ret->code == H3_OP_RETURN && i < ret->n_operands) t = &ret->operands[i]->type;
  } else {
    t = &g->inputs[i]->type;
  }
  if (t) h3_type_print(&b, t);
  CHECK(t && b.data && strcmp(b.data, want) == 0, "%s: %s %s '%s' is %s, expected %s", what,
        g->name, out ? "output" : "input", name, b.data ? b.data : "?", want);
  h3_strbuf_free(&b);
}

/* ---- MiniMax-H3 -------------------------------------------------------------------------------- */
static int h3_ops[2][3]; /* op counts of text, step, sample per preset */

static void test_h3(const char *preset, int slot) {
  const spec_h3 *c = spec_h3_config(preset);
  char what[64];
  snprintf(what, sizeof what, "minimax_h3 --config %s", preset);
  h3_module *m = load("minimax_h3", preset);
  if (!m) return;
  spec_key keys[64];
  check_keys(m, what, keys, spec_h3_keys(c, keys, 64));

  spec_weights want = {0}, got = {0};
  spec_h3_weights(c, &want);
  module_weights(m, &got);
  compare_weights(what, &want, &got);
  totals ts = weights_total(&want, NULL), tm = module_total(m, NULL);
  CHECK(ts.params == tm.params && ts.bytes == tm.bytes,
        "%s: %lld params / %lld bytes, the spec formulas give %lld / %lld", what,
        (long long)tm.params, (long long)tm.bytes, (long long)ts.params, (long long)ts.bytes);
  printf("%s: %lld parameters, %lld bytes (%.2f GiB)\n", what, (long long)tm.params,
         (long long)tm.bytes, (double)tm.bytes / 1073741824.0);
  if (strcmp(preset, "full") == 0) {
    /* §1: 33.12 B parameters, 61.73 GiB; a block's 4 GEMMs 385.35 M, its AdaLN 260.2 M */
    CHECK(llround((double)ts.params / 1e7) == 3312, "%s: %lld params, spec says 33.12 B", what,
          (long long)ts.params);
    CHECK(llround((double)ts.bytes / 1073741824.0 * 100) == 6173, "%s: %lld bytes, spec says 61.73 GiB",
          what, (long long)ts.bytes);
    int64_t aw = c->heads * c->head_dim;
    int64_t gemm = 3 * aw * c->dim + c->dim * aw + 2 * c->ffn * c->dim + c->dim * c->ffn;
    int64_t adaln = 18 * c->dim * c->time_embed + 18 * c->dim;
    CHECK(llround((double)gemm / 1e4) == 38535, "%s: block GEMMs %lld, spec 385.35 M", what, (long long)gemm);
    CHECK(llround((double)adaln / 1e5) == 2602, "%s: block AdaLN %lld, spec 260.2 M", what, (long long)adaln);
  }
  spec_weights_free(&want);
  spec_weights_free(&got);

  int64_t L = c->text_rows, Na = c->audio_rows, Nv = c->video_rows, S = c->packed_rows;
  const h3_graph *text = graph(m, what, "text", H3_GRAPH_FUNCTION);
  const h3_graph *step = graph(m, what, "step", H3_GRAPH_FUNCTION);
  const h3_graph *sample = graph(m, what, "sample", H3_GRAPH_PROGRAM);
  io(what, text, 0, 0, "text_states", "bf16[%lld, %lld]", (long long)L, (long long)c->text_dim);
  io(what, text, 1, 0, "text", "bf16[%lld, %lld]", (long long)L, (long long)c->dim);
  io(what, step, 0, 0, "text", "bf16[%lld, %lld]", (long long)L, (long long)c->dim);
  io(what, step, 0, 1, "video", "f32[%lld, %lld]", (long long)Nv, (long long)c->video_width);
  io(what, step, 0, 2, "audio", "f32[%lld, %lld]", (long long)Na, (long long)c->audio_width);
  io(what, step, 0, 3, "t", "f32[%lld]", (long long)c->slots);
  io(what, step, 0, 4, "tag", "i32[%lld]", (long long)S);
  io(what, step, 0, 5, "slot", "i32[%lld]", (long long)S);
  io(what, step, 0, 6, "pos", "f32[%lld, 3]", (long long)S);
  io(what, step, 1, 0, "v_video", "f32[%lld, %lld]", (long long)Nv, (long long)c->video_width);
  io(what, step, 1, 1, "v_audio", "f32[%lld, %lld]", (long long)Na, (long long)c->audio_width);
  io(what, sample, 0, 0, "text_states", "bf16[%lld, %lld]", (long long)L, (long long)c->text_dim);
  io(what, sample, 1, 0, "video", "f32[%lld, %lld]", (long long)Nv, (long long)c->video_width);
  io(what, sample, 1, 1, "audio", "f32[%lld, %lld]", (long long)Na, (long long)c->audio_width);
  CHECK(!step || step->n_inputs == 7, "%s: step takes 7 inputs (§3)", what);

  loop(what, text, "refine", c->refiner_layers);
  loop(what, step, "trunk", c->layers);
  const h3_op *denoise = loop(what, sample, "denoise", 49);
  if (denoise) CHECK(calls(&denoise->regions[0], "step"), "%s: the denoise loop does not call step", what);
  if (sample) CHECK(calls(&sample->body, "text"), "%s: sample does not call text", what);
  const h3_graph *gs[3] = {text, step, sample};
  for (int i = 0; i < 3; i++) h3_ops[slot][i] = gs[i] ? count_ops_region(&gs[i]->body) : -1;
  h3_module_free(m);
}

/* ---- MiniMax-M3.1 ------------------------------------------------------------------------------- */
#define M31_GRAPHS 7
static const char *m31_graphs[M31_GRAPHS] = {"prefill", "decode", "verify", "draft",
                                             "draft_commit", "draft_prefill", "generate"};
static int m31_ops[3][M31_GRAPHS];

static void test_m31(const char *preset, int slot) {
  const spec_m31 *c = spec_m31_config(preset);
  char what[64];
  snprintf(what, sizeof what, "minimax_m3_1 --config %s", preset);
  h3_module *m = load("minimax_m3_1", preset);
  if (!m) return;
  spec_key keys[64];
  check_keys(m, what, keys, spec_m31_keys(c, keys, 64));

  spec_weights want = {0}, got = {0};
  spec_m31_weights(c, &want);
  module_weights(m, &got);
  compare_weights(what, &want, &got);
  totals all = weights_total(&want, NULL), draft = weights_total(&want, "dspark.");
  totals target = {all.params - draft.params, all.bytes - draft.bytes};
  CHECK(target.params == c->target_params && target.bytes == c->target_bytes,
        "%s: spec formulas give target %lld params / %lld bytes, §2 says %lld / %lld", what,
        (long long)target.params, (long long)target.bytes, (long long)c->target_params,
        (long long)c->target_bytes);
  CHECK(draft.params == c->draft_params && draft.bytes == c->draft_bytes,
        "%s: spec formulas give draft %lld params / %lld bytes, §2 says %lld / %lld", what,
        (long long)draft.params, (long long)draft.bytes, (long long)c->draft_params,
        (long long)c->draft_bytes);
  totals mall = module_total(m, NULL), mdraft = module_total(m, "dspark.");
  CHECK(mall.params - mdraft.params == c->target_params && mdraft.params == c->draft_params,
        "%s: compiled target %lld + draft %lld params, §2 says %lld + %lld", what,
        (long long)(mall.params - mdraft.params), (long long)mdraft.params,
        (long long)c->target_params, (long long)c->draft_params);
  CHECK(mall.bytes - mdraft.bytes == c->target_bytes && mdraft.bytes == c->draft_bytes,
        "%s: compiled target %lld + draft %lld bytes, §2 says %lld + %lld", what,
        (long long)(mall.bytes - mdraft.bytes), (long long)mdraft.bytes,
        (long long)c->target_bytes, (long long)c->draft_bytes);
  printf("%s: target %lld + draft %lld parameters\n", what, (long long)(mall.params - mdraft.params),
         (long long)mdraft.params);
  spec_weights_free(&want);
  spec_weights_free(&got);

  const h3_graph *g[M31_GRAPHS];
  for (int i = 0; i < M31_GRAPHS; i++)
    g[i] = graph(m, what, m31_graphs[i], i == M31_GRAPHS - 1 ? H3_GRAPH_PROGRAM : H3_GRAPH_FUNCTION);
  long long V = c->vocab, H = c->dim, nl = c->n_layers, ns = c->n_layers - c->n_dense;
  long long pages = (c->max_ctx + 16 + c->page - 1) / c->page + 1, pg = c->page;
  long long nkv = c->kv_heads, d = c->head_dim, vr = c->gamma + 1;
  const char *kv_fmt = "bf16[%lld, %lld, %lld, %lld, %lld]";
  for (int i = 0; i < 3; i++) { /* prefill, decode, verify: (tokens, pos0, caches) */
    io(what, g[i], 0, 1, "pos0", "i32[]");
    io(what, g[i], 0, 2, "k_cache", kv_fmt, nl, pages, pg, nkv, d);
    io(what, g[i], 0, 3, "v_cache", kv_fmt, nl, pages, pg, nkv, d);
    io(what, g[i], 0, 4, "ik_cache", "bf16[%lld, %lld, %lld, %lld]", ns, pages, pg,
       (long long)c->index_dim);
    CHECK(!g[i] || g[i]->n_outputs >= 4, "%s: %s returns logits and three caches", what, m31_graphs[i]);
    loop(what, g[i], "dense_stack", c->n_dense);
    loop(what, g[i], "sparse_stack", ns);
  }
  io(what, g[0], 1, 0, "logits", "f32[1, %lld]", V);
  io(what, g[1], 0, 0, "tokens", "i32[1]");
  io(what, g[1], 1, 0, "logits", "f32[1, %lld]", V);
  io(what, g[2], 0, 0, "tokens", "i32[%lld]", vr);
  io(what, g[2], 1, 0, "logits", "f32[%lld, %lld]", vr, V);
  io(what, g[2], 1, 1, "captured", "bf16[%lld, %lld]", vr, 3 * H);
  io(what, g[3], 0, 0, "bonus", "i32[1]");
  io(what, g[3], 0, 1, "ctx_len", "i32[]");
  io(what, g[3], 0, 2, "kd_cache", "bf16[%lld, %lld, %lld, %lld]", pages, pg, nkv, d);
  io(what, g[3], 1, 0, "draft", "i32[%lld]", (long long)c->gamma);
  io(what, g[3], 1, 1, "z", "f32[%lld, %lld]", (long long)c->gamma, V);
  io(what, g[4], 0, 0, "captured", "bf16[%lld, %lld]", vr, 3 * H);
  io(what, g[4], 1, 0, "kd_cache", "bf16[%lld, %lld, %lld, %lld]", pages, pg, nkv, d);
  io(what, g[4], 1, 1, "vd_cache", "bf16[%lld, %lld, %lld, %lld]", pages, pg, nkv, d);
  const h3_graph *gen = g[M31_GRAPHS - 1];
  if (gen) {
    int64_t new_tokens = h3_module_config(m, "max_new_tokens", -1);
    const h3_op *dl = loop(what, gen, "decode_loop", new_tokens - 1);
    if (dl) CHECK(calls(&dl->regions[0], "decode_next"), "%s: decode_loop does not call decode_next", what);
    CHECK(calls(&gen->body, "prefill_seq"), "%s: generate does not call prefill_seq", what);
    io(what, gen, 1, 0, "tokens", "i32[%lld]", (long long)new_tokens);
  }
  /* the graphs that read a prompt's last row only: every sparse layer but the last in the
     stack, the last one (over that row) in a one-turn stack of its own */
  static const char *const last_row[4] = {"prefill_seq", "serve_prefill", "serve_prefill_group",
                                          "serve_mixed"};
  for (int i = 0; i < 4; i++) {
    const h3_graph *lg = graph(m, what, last_row[i], H3_GRAPH_FUNCTION);
    loop(what, lg, "dense_stack", c->n_dense);
    loop(what, lg, "sparse_stack", ns - 1);
    loop(what, lg, "last_stack", 1);
  }
  for (int i = 0; i < M31_GRAPHS; i++) m31_ops[slot][i] = g[i] ? count_ops_region(&g[i]->body) : -1;
  h3_module_free(m);
}

int main(int argc, char **argv) {
  if (argc > 1) models_dir = argv[1];
  const char *h3_presets[2] = {"tiny", "full"};
  for (int i = 0; i < 2; i++) test_h3(h3_presets[i], i);
  /* one loop op per stack: the same op count whatever the layer counts */
  const char *h3_names[3] = {"text", "step", "sample"};
  for (int i = 0; i < 3; i++)
    CHECK(h3_ops[0][i] == h3_ops[1][i], "minimax_h3: graph %s has %d ops in tiny but %d in full",
          h3_names[i], h3_ops[0][i], h3_ops[1][i]);

  const char *m31_presets[3] = {"tiny", "small", "full"};
  for (int i = 0; i < 3; i++) test_m31(m31_presets[i], i);
  for (int i = 0; i < M31_GRAPHS; i++)
    for (int s = 1; s < 3; s++)
      CHECK(m31_ops[0][i] == m31_ops[s][i], "minimax_m3_1: graph %s has %d ops in tiny but %d in %s",
            m31_graphs[i], m31_ops[0][i], m31_ops[s][i], m31_presets[s]);

  if (failures) {
    fprintf(stderr, "test_models: %d failure(s)\n", failures);
    return 1;
  }
  printf("test_models: all checks passed\n");
  return 0;
}
