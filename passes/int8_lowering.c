/* int8_lowering.c: the `int8-lowering` pass (`--int8`, docs/models/accelerations.md §4.1): lowers
 * bf16 linears to int8 x int8 -> int32 GEMMs with per-row activation scales and
 * per-output-channel weight scales.
 *
 * A linear(x, w, bias?) is lowered when x and w are bf16, w is a parameter or a row of a
 * stacked parameter (`index(@W, %i)`, the block loops), its K is a multiple of
 * H3_INT8_GROUP = 256 (the AdaLN projections, K = 2688, stay bf16) and K <= 131071
 * (int32 accumulation). fp32-island linears (f32 weights) are never lowered. On H3 this is
 * exactly the 209 layers of the spec: qkv, out_proj, fc1, fc2 of the 50 + 2 blocks and
 * condition_proj. The rewrite, per lowered linear:
 *
 *   graph top:  %W.q, %W.s = quantize_rows(@W) {rotate}   // load-time: the weight
 *               quantization per output channel, once per (graph, parameter)
 *   in place:   %wq = index(%W.q, %i); %ws = index(%W.s, %i)  // when w was index(@W, %i)
 *               %xq, %xs = quantize_rows(%x) {rotate}      // shared by linears of one x
 *               %y = linear_int8(%xq, %xs, %wq, %ws, bias?)  // fixed epilogue
 *
 * The activation quantizer is a separate op right before the GEMM so that fusions can
 * later absorb it into its producer (norm+modulate for qkv and fc1, SwiGLU for fc2), and
 * the dequantization is the GEMM's epilogue. rotate comes from `--int8=rotate=256` and is
 * the same on both quantizers of a GEMM (x R (W R)^T = x W^T). The pass reports the
 * lowered count with the weight bytes before and after, and why the others stay bf16.
 */
#include "h3/int8.h"
#include "h3/op_registry.h"
#include "h3/rewrite.h"

#include "pass_internal.h"

#include <stdlib.h>
#include <string.h>

enum { KEEP_DTYPE, KEEP_K, KEEP_WEIGHT, KEEP_BIG_K, KEEP_COUNT };

typedef struct {
  const void *key; /* the weight parameter, the index op or the activation value */
  h3_value *q, *s;
} entry;

typedef struct {
  entry *e;
  int n, cap;
} table;

typedef struct {
  const h3_value **v;
  int n;
} value_set;

typedef struct {
  h3_module *m;
  h3_diag *d;
  h3_int8_options o;
  h3_graph *g;
  table weights, rows, acts; /* per graph */
  h3_op **linears;
  int n_linears, cap_linears;
  bool oom;
  /* statistics */
  int lowered_ops;
  int64_t lowered_layers, kept[KEEP_COUNT];
  /* parameters counted so far: a weight read by linears of several graphs (e.g. after
     spectrum splits `step`) is one set of layers and bytes */
  value_set lowered, kept_params;
  int64_t bf16_bytes, int8_bytes, scale_bytes;
} lowering;

static void *grow(void *p, int *cap, int n, size_t size, bool *oom) {
  if (n < *cap) return p;
  int c = *cap ? 2 * *cap : 16;
  void *q = realloc(p, (size_t)c * size);
  if (!q) {
    *oom = true;
    return NULL;
  }
  *cap = c;
  return q;
}

/* True when p is not in s yet (and adds it); false when seen or out of memory. */
static bool first_sight(lowering *L, value_set *s, const h3_value *p) {
  for (int i = 0; i < s->n; i++)
    if (s->v[i] == p) return false;
  const h3_value **v = realloc(s->v, (size_t)(s->n + 1) * sizeof *v);
  if (!v) {
    L->oom = true;
    return false;
  }
  s->v = v;
  s->v[s->n++] = p;
  return true;
}

static entry *table_find(const table *t, const void *key) {
  for (int i = 0; i < t->n; i++)
    if (t->e[i].key == key) return &t->e[i];
  return NULL;
}

static bool table_add(lowering *L, table *t, const void *key, h3_value *q, h3_value *s) {
  entry *e = grow(t->e, &t->cap, t->n, sizeof *e, &L->oom);
  if (!e) return false;
  t->e = e;
  t->e[t->n++] = (entry){key, q, s};
  return true;
}

/* ---- which linears ------------------------------------------------------------------------ */
static void collect(lowering *L, h3_region *r) {
  for (h3_op *op = r->first; op && !L->oom; op = op->next) {
    if (op->code == H3_OP_LINEAR) {
      h3_op **l = grow(L->linears, &L->cap_linears, L->n_linears, sizeof *l, &L->oom);
      if (!l) return;
      L->linears = l;
      L->linears[L->n_linears++] = op;
    } else if (op->code == H3_OP_LOOP) {
      for (int i = 0; i < op->n_regions; i++) collect(L, &op->regions[i]);
    }
  }
}

/* The weight's parameter (w itself, or the stack w indexes a row of) and that index op. */
static const h3_value *weight_param(const h3_value *w, h3_op **index_op) {
  *index_op = NULL;
  if (w->kind == H3_VALUE_PARAM) return w->type.rank == 2 ? w : NULL;
  if (w->kind != H3_VALUE_RESULT || !w->def || w->def->code != H3_OP_INDEX) return NULL;
  const h3_value *p = w->def->operands[0];
  if (p->kind != H3_VALUE_PARAM || p->type.rank != 3) return NULL;
  *index_op = w->def;
  return p;
}

/* Weight matrices one linear stands for: the group members of its stacked parameter. */
static int64_t layers_of(const h3_value *p) {
  int64_t n = 1;
  if (p && p->param)
    for (int i = 0; i < p->param->group_dims && i < p->type.rank - 2; i++) n *= p->type.dims[i];
  return n;
}

/* -1 when lowered, else the KEEP_ reason. */
static int classify(const h3_op *op, const h3_value **param, h3_op **index_op) {
  const h3_value *x = op->operands[0], *w = op->operands[1];
  *param = weight_param(w, index_op);
  int64_t k = x->type.dims[x->type.rank - 1];
  if (x->type.dtype != H3_BF16 || w->type.dtype != H3_BF16) return KEEP_DTYPE;
  if (k % H3_INT8_GROUP != 0) return KEEP_K;
  if (!*param) return KEEP_WEIGHT;
  if (k > 131071) return KEEP_BIG_K;
  return -1;
}

/* ---- the rewrite ---------------------------------------------------------------------------- */
/* "blocks.{}.attn.qkv_proj.weight" -> "blocks.attn.qkv_proj.weight" + suffix. */
static const char *derived_name(h3_module *m, const char *base, const char *suffix) {
  if (!base) return NULL;
  h3_strbuf b;
  h3_strbuf_init(&b);
  for (const char *p = base; *p;) {
    if (p[0] == '{') {
      const char *close = strchr(p, '}');
      if (close) {
        p = close + 1 + (close[1] == '.');
        continue;
      }
    }
    h3_strbuf_appendn(&b, p++, 1);
  }
  h3_strbuf_append(&b, suffix);
  char *s = b.data && !b.oom ? h3_arena_strdup(&m->arena, b.data) : NULL;
  h3_strbuf_free(&b);
  return s;
}

static h3_op *build(lowering *L, h3_region *r, h3_op *before, h3_span span, h3_opcode code,
                    int n, h3_value **operands, int n_attrs, const h3_attr *attrs) {
  h3_builder b = {L->m, r, before, span};
  h3_op *op = h3_build_op(&b, code, n, operands, n_attrs, attrs, 0, L->d);
  if (!op) h3_diag_note(L->d, span, "while lowering a linear to int8 (a bug in int8-lowering)");
  return op;
}

/* quantize_rows(v) {rotate} before `before` in r; names its results after `name`. */
static h3_op *quantize(lowering *L, h3_region *r, h3_op *before, h3_span span, h3_value *v,
                       const char *name) {
  h3_attr rot = h3_attr_int(L->m, "rotate", L->o.rotate);
  h3_op *q = build(L, r, before, span, H3_OP_QUANTIZE_ROWS, 1, &v, L->o.rotate ? 1 : 0, &rot);
  if (q && name) {
    q->results[0]->name = derived_name(L->m, name, ".q");
    q->results[1]->name = derived_name(L->m, name, ".s");
  }
  return q;
}

/* The int8 weight and its scales for linear op: from the graph-top quantizer of the
 * parameter, through a matching pair of index ops when the weight was a row of a stack. */
static h3_status weight_operands(lowering *L, h3_op *op, const h3_value *param, h3_op *index_op,
                                 h3_value **wq, h3_value **ws) {
  entry *e = table_find(&L->weights, param);
  if (!e) {
    h3_op *top = L->g->body.first;
    while (top && h3_op_is_load_time(top)) top = top->next;
    const char *name = param->param ? param->param->name : param->name;
    h3_op *q = quantize(L, &L->g->body, top, op->span, (h3_value *)param, name);
    if (!q || !table_add(L, &L->weights, param, q->results[0], q->results[1])) return H3_ERR;
    e = &L->weights.e[L->weights.n - 1];
    if (first_sight(L, &L->lowered, param)) {
      L->lowered_layers += layers_of(param);
      L->bf16_bytes += h3_type_bytes(&param->type);
      L->int8_bytes += h3_type_bytes(&q->results[0]->type);
      L->scale_bytes += h3_type_bytes(&q->results[1]->type);
    }
  }
  if (!index_op) {
    *wq = e->q;
    *ws = e->s;
    return H3_OK;
  }
  entry *r = table_find(&L->rows, index_op);
  if (!r) {
    const h3_attr *off = h3_op_attr(index_op, "offset");
    h3_value *ops_q[2] = {e->q, index_op->operands[1]}, *ops_s[2] = {e->s, index_op->operands[1]};
    h3_region *r0 = index_op->parent;
    h3_op *iq = build(L, r0, index_op, index_op->span, H3_OP_INDEX, 2, ops_q, off ? 1 : 0, off);
    h3_op *is = iq ? build(L, r0, index_op, index_op->span, H3_OP_INDEX, 2, ops_s, off ? 1 : 0, off)
                   : NULL;
    if (!is || !table_add(L, &L->rows, index_op, iq->results[0], is->results[0])) return H3_ERR;
    r = &L->rows.e[L->rows.n - 1];
  }
  *wq = r->q;
  *ws = r->s;
  return H3_OK;
}

static h3_status lower(lowering *L, h3_op *op, const h3_value *param, h3_op *index_op) {
  h3_value *wq, *ws, *x = op->operands[0];
  if (weight_operands(L, op, param, index_op, &wq, &ws) != H3_OK) return H3_ERR;
  entry *a = table_find(&L->acts, x);
  if (a && !h3_value_dominates(a->q, op)) a = NULL;
  if (!a) {
    h3_op *q = quantize(L, op->parent, op, op->span, x, x->name);
    if (!q || !table_add(L, &L->acts, x, q->results[0], q->results[1])) return H3_ERR;
    a = &L->acts.e[L->acts.n - 1];
  }
  h3_value *ops[5] = {a->q, a->s, wq, ws, op->n_operands > 2 ? op->operands[2] : NULL};
  h3_dtype od = op->results[0]->type.dtype;
  h3_attr dt = h3_attr_dtype(L->m, "dtype", od);
  h3_op *g = build(L, op->parent, op, op->span, H3_OP_LINEAR_INT8, op->n_operands > 2 ? 5 : 4, ops,
                   od != H3_BF16 ? 1 : 0, &dt);
  if (!g) return H3_ERR;
  g->results[0]->name = op->results[0]->name;
  h3_value_replace_all_uses(L->m, op->results[0], g->results[0]);
  h3_op_erase(op);
  if (index_op && index_op->results[0]->uses == 0) h3_op_erase(index_op);
  L->lowered_ops++;
  return L->oom ? H3_ERR : H3_OK;
}

static h3_status lower_graph(lowering *L, h3_graph *g) {
  L->g = g;
  L->weights.n = L->rows.n = L->acts.n = 0;
  L->n_linears = 0;
  collect(L, &g->body);
  for (int i = 0; i < L->n_linears && !L->oom; i++) {
    h3_op *op = L->linears[i], *index_op;
    const h3_value *param;
    int why = classify(op, &param, &index_op);
    if (why >= 0) {
      if (!param || first_sight(L, &L->kept_params, param)) L->kept[why] += layers_of(param);
      continue;
    }
    if (lower(L, op, param, index_op) != H3_OK) return H3_ERR;
  }
  return H3_OK;
}

static double gib(int64_t b) { return (double)b / (1024.0 * 1024.0 * 1024.0); }

static h3_status int8_lowering_run(h3_module *m, h3_pass_context *ctx, h3_diag *d) {
  lowering L = {.m = m, .d = d};
  if (h3_int8_options_parse(h3_pass_options_of(ctx)->int8, &L.o, d) != H3_OK) return H3_ERR;
  h3_status st = H3_OK;
  for (int g = 0; g < m->n_graphs && st == H3_OK && !L.oom; g++) st = lower_graph(&L, m->graphs[g]);
  if (L.oom) {
    h3_diag_error(d, (h3_span){0}, "free memory or use a smaller --config",
                  "out of memory in int8-lowering");
    st = H3_ERR;
  }
  if (st == H3_OK) {
    h3_pass_report(ctx,
                   "%d linears lowered to int8 (%lld layers, rotate %d): weights %lld B bf16 "
                   "(%.2f GiB) -> %lld B int8 (%.2f GiB) + %lld B fp32 scales",
                   L.lowered_ops, (long long)L.lowered_layers, L.o.rotate,
                   (long long)L.bf16_bytes, gib(L.bf16_bytes), (long long)L.int8_bytes,
                   gib(L.int8_bytes), (long long)L.scale_bytes);
    h3_pass_report(ctx,
                   "kept (layers): K %% %d != 0: %lld, other dtypes (fp32 islands): %lld, "
                   "computed weight: %lld, K > 131071: %lld",
                   H3_INT8_GROUP, (long long)L.kept[KEEP_K], (long long)L.kept[KEEP_DTYPE],
                   (long long)L.kept[KEEP_WEIGHT], (long long)L.kept[KEEP_BIG_K]);
  }
  free(L.weights.e);
  free(L.rows.e);
  free(L.acts.e);
  free(L.linears);
  free(L.lowered.v);
  free(L.kept_params.v);
  return st;
}

const h3_pass h3_pass_int8_lowering = {
    .name = "int8-lowering",
    .description = "--int8: lower bf16 linears with K % 256 == 0 to int8 GEMMs (per-row "
                   "activation and per-channel weight scales, weights quantized at load)",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = false,
    .requires = {NULL},
    .run = int8_lowering_run,
};
