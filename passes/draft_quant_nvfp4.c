/* draft_quant_nvfp4.c: the `draft-quant-nvfp4` pass (`h3c compile --draft-quant nvfp4`,
 * docs/nvfp4.md; docs/models/minimax_m3_1.md §6): weight-only NVFP4 (W4A16) for the four
 * linears of the DSpark draft that §6 quantizes. The draft's qkv_proj, its norms, the Markov
 * head and the whole target stay bf16.
 *
 * Each weight W (bf16[.., N, K], K % 16 == 0) of the list below is replaced by three
 * parameters of the same group (include/h3/nvfp4.h, names per §6's storage table):
 *   W_packed u8[.., N, K/2], W_scale u8[.., N, K/16], W_global_scale f32[.., 1]
 * e.g. dspark.fc.weight -> dspark.fc.weight_packed, .weight_scale, .weight_global_scale;
 * each records W's name and keeps its init (h3_param.quant, quant_source), so the weight
 * store makes them from the bf16 weight when the file has only that, or random weights
 * (runtime/weights_nvfp4.c). Every use of W must be the weight of a bias-free linear over
 * bf16 x, directly or through `index(@W, %i)`; each such linear becomes
 *   %p = index(@W_packed, %i); %s = index(@W_scale, %i); %g = index(@W_global_scale, %i)
 *   %y = linear_nvfp4(%x, %p, %s, %g) {dtype of the linear}
 * and W leaves the module. A model without these weights (not M3.1) or a use the rewrite
 * cannot take is an error: the flag must not be silently ignored.
 */
#include "h3/op_registry.h"
#include "h3/rewrite.h"

#include "h3/nvfp4.h"
#include "pass_internal.h"

#include <stdlib.h>
#include <string.h>

/* The draft's quantized weights (docs/models/minimax_m3_1.md §5.4, §6). */
static const char *const draft_weights[] = {
    "dspark.fc.weight",
    "dspark.layers.{}.self_attn.o_proj.weight",
    "dspark.layers.{}.mlp.gate_up_proj.weight",
    "dspark.layers.{}.mlp.down_proj.weight",
};
enum { N_DRAFT = sizeof draft_weights / sizeof draft_weights[0] };

#define MAX_ROW_USERS 16 /* linears reading one index(@W, %i) */

static const char *const suffix[3] = {"_packed", "_scale", "_global_scale"};

typedef struct {
  h3_module *m;
  h3_diag *d;
  h3_op **uses; /* the ops reading the weight (linear or index), all graphs */
  int n, cap;
  bool oom;
} ctx;

static void collect(ctx *c, h3_region *r, const h3_value *w) {
  for (h3_op *op = r->first; op && !c->oom; op = op->next) {
    for (int i = 0; i < op->n_operands; i++)
      if (op->operands[i] == w) {
        if (!h3_ops_push(&c->uses, &c->n, &c->cap, op)) c->oom = true;
        break;
      }
    for (int i = 0; i < op->n_regions; i++) collect(c, &op->regions[i], w);
  }
}

/* NULL when `lin` (reading weight value wv) can become linear_nvfp4, else why not. */
static const char *linear_blocker(const h3_op *lin, const h3_value *wv) {
  if (lin->code != H3_OP_LINEAR) return "it is read by an op other than linear";
  if (lin->operands[1] != wv || lin->operands[0] == wv) return "it is not the linear's weight";
  if (lin->n_operands > 2) return "the linear has a bias (linear_nvfp4 takes none)";
  if (lin->operands[0]->type.dtype != H3_BF16) return "the linear's input is not bf16";
  return NULL;
}

/* Checks every use of param p; NULL when all can be rewritten, else why not. */
static const char *uses_blocker(ctx *c, const h3_param *p) {
  int64_t k = p->type.dims[p->type.rank - 1];
  if (p->type.dtype != H3_BF16 || p->type.rank - p->group_dims != 2)
    return "it is not a bf16 matrix";
  if (k % H3_NVFP4_BLOCK != 0) return "its K is not a multiple of 16";
  for (int i = 0; i < c->n; i++) {
    const h3_op *op = c->uses[i];
    if (op->code == H3_OP_INDEX && op->operands[0] == p->value && p->group_dims == 1) {
      const h3_value *row = op->results[0];
      h3_op *users[MAX_ROW_USERS];
      int nu = h3_value_users(c->m, row, users, MAX_ROW_USERS);
      if (nu > MAX_ROW_USERS) return "a row of it is read by too many linears";
      for (int j = 0; j < nu; j++) {
        const char *why = linear_blocker(users[j], row);
        if (why) return why;
      }
      continue;
    }
    if (p->group_dims != 0) return "a row of the stack is used other than through index";
    const char *why = linear_blocker(op, p->value);
    if (why) return why;
  }
  return NULL;
}

static h3_op *build(ctx *c, h3_op *before, h3_opcode code, int n, h3_value **ops, int na,
                    const h3_attr *attrs) {
  h3_builder b = {c->m, before->parent, before, before->span};
  h3_op *op = h3_build_op(&b, code, n, ops, na, attrs, 0, c->d);
  if (!op) h3_diag_note(c->d, before->span, "while quantizing a draft linear to NVFP4 (a bug)");
  return op;
}

/* linear(x, w) -> linear_nvfp4(x, q[0], q[1], q[2]) with the linear's dtype. */
static h3_status rewrite_linear(ctx *c, h3_op *lin, h3_value *const q[3]) {
  h3_value *ops[4] = {lin->operands[0], q[0], q[1], q[2]};
  const h3_attr *dt = h3_op_attr(lin, "dtype");
  h3_op *y = build(c, lin, H3_OP_LINEAR_NVFP4, 4, ops, dt ? 1 : 0, dt);
  if (!y) return H3_ERR;
  y->results[0]->name = lin->results[0]->name;
  h3_value_replace_all_uses(c->m, lin->results[0], y->results[0]);
  h3_op_erase(lin);
  return H3_OK;
}

static h3_status rewrite_use(ctx *c, h3_op *op, h3_param *const np[3]) {
  h3_value *q[3];
  if (op->code != H3_OP_INDEX) {
    for (int i = 0; i < 3; i++) q[i] = np[i]->value;
    return rewrite_linear(c, op, q);
  }
  const h3_attr *off = h3_op_attr(op, "offset");
  for (int i = 0; i < 3; i++) {
    h3_value *ops[2] = {np[i]->value, op->operands[1]};
    h3_op *ix = build(c, op, H3_OP_INDEX, 2, ops, off ? 1 : 0, off);
    if (!ix) return H3_ERR;
    q[i] = ix->results[0];
  }
  h3_op *users[MAX_ROW_USERS];
  int nu = h3_value_users(c->m, op->results[0], users, MAX_ROW_USERS); /* checked: fits */
  for (int j = 0; j < nu; j++)
    if (rewrite_linear(c, users[j], q) != H3_OK) return H3_ERR;
  h3_op_erase(op);
  return H3_OK;
}

/* The three parameters standing for p (appended to the module). */
static h3_status add_params(ctx *c, const h3_param *p, h3_param *np[3]) {
  int r = p->type.rank;
  int64_t n = p->type.dims[r - 2], k = p->type.dims[r - 1];
  int64_t last[3][2] = {{n, k / 2}, {n, k / H3_NVFP4_BLOCK}, {1, 0}};
  h3_dtype dt[3] = {H3_U8, H3_U8, H3_F32};
  for (int i = 0; i < 3; i++) {
    h3_type t = p->type;
    t.dtype = dt[i];
    t.rank = i == 2 ? r - 1 : r;
    t.dims[r - 2] = last[i][0];
    if (i < 2) t.dims[r - 1] = last[i][1];
    h3_strbuf name;
    h3_strbuf_init(&name);
    h3_strbuf_printf(&name, "%s%s", p->name, suffix[i]);
    np[i] = name.oom ? NULL : h3_module_add_param(c->m, name.data, t, p->span);
    h3_strbuf_free(&name);
    if (!np[i]) return H3_ERR;
    np[i]->group = p->group;
    np[i]->group_dims = p->group_dims;
    np[i]->group_base = p->group_base;
    np[i]->init = p->init;
    np[i]->init_scale = p->init_scale;
    np[i]->init_value = p->init_value;
    np[i]->quant = (h3_param_quant)(H3_QUANT_NVFP4_PACKED + i);
    np[i]->quant_source = p->name;
  }
  return H3_OK;
}

static void remove_param(h3_module *m, const h3_param *p) {
  for (int i = 0; i < m->n_params; i++)
    if (m->params[i] == p) {
      memmove(&m->params[i], &m->params[i + 1], (size_t)(m->n_params - i - 1) * sizeof *m->params);
      m->n_params--;
      return;
    }
}

static h3_status quantize_param(ctx *c, h3_param *p, int64_t *bf16_bytes, int64_t *q_bytes) {
  c->n = 0;
  for (int g = 0; g < c->m->n_graphs && !c->oom; g++) collect(c, &c->m->graphs[g]->body, p->value);
  if (c->oom) return H3_ERR;
  const char *why = c->n ? uses_blocker(c, p) : "no graph reads it";
  if (why) {
    h3_diag_error(c->d, p->span, "compile with --draft-quant bf16, or change the model",
                  "--draft-quant nvfp4: cannot quantize '%s': %s", p->name, why);
    return H3_ERR;
  }
  h3_param *np[3];
  if (add_params(c, p, np) != H3_OK) return H3_ERR;
  for (int i = 0; i < c->n; i++)
    if (rewrite_use(c, c->uses[i], np) != H3_OK) return H3_ERR;
  *bf16_bytes += h3_type_bytes(&p->type);
  for (int i = 0; i < 3; i++) *q_bytes += h3_type_bytes(&np[i]->type);
  remove_param(c->m, p);
  return H3_OK;
}

static h3_status draft_quant_run(h3_module *m, h3_pass_context *pc, h3_diag *d) {
  ctx c = {.m = m, .d = d};
  int64_t bf16_bytes = 0, q_bytes = 0;
  h3_status st = H3_OK;
  int done = 0;
  const char *missing = NULL;
  for (int i = 0; i < N_DRAFT && st == H3_OK; i++) {
    h3_param *p = h3_module_param(m, draft_weights[i]);
    if (!p) {
      if (!missing) missing = draft_weights[i];
      continue;
    }
    st = quantize_param(&c, p, &bf16_bytes, &q_bytes);
    done += st == H3_OK;
  }
  free(c.uses);
  if (st == H3_OK && missing) {
    h3_diag_error(d, (h3_span){0}, "--draft-quant applies to MiniMax-M3.1 (models/minimax_m3_1.g)",
                  "--draft-quant nvfp4: model '%s' lacks %d of the %d DSpark draft weights it "
                  "quantizes (the first: '%s')",
                  m->model ? m->model : "?", N_DRAFT - done, N_DRAFT, missing);
    st = H3_ERR;
  }
  if (c.oom) {
    h3_diag_error(d, (h3_span){0}, "free memory or use a smaller --config",
                  "out of memory in draft-quant-nvfp4");
    st = H3_ERR;
  }
  if (st == H3_OK)
    h3_pass_report(pc, "%d draft weights quantized to NVFP4: %lld B bf16 -> %lld B (codes, e4m3 "
                       "scales, global scales)",
                   done, (long long)bf16_bytes, (long long)q_bytes);
  return st;
}

const h3_pass h3_pass_draft_quant_nvfp4 = {
    .name = "draft-quant-nvfp4",
    .description = "--draft-quant nvfp4 (h3c compile enables it for a model with the draft unless "
                   "--draft-quant bf16): the DSpark draft's fc, o_proj, gate_up_proj and "
                   "down_proj become W4A16 linear_nvfp4 ops over NVFP4 weights",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = false,
    .requires = {NULL},
    .run = draft_quant_run,
};
