/* norm_modulate_fusion.c: the `norm-modulate-fusion` pass: RMSNorm + indexed AdaLN
 * modulate (docs/models/accelerations.md §3, Plan A / Plan B) as one op each.
 *
 * Plan A (pattern "norm-modulate", root rms_norm): the chain
 *   %h = rms_norm(%x, %gamma)                      bf16[T, H]
 *   %c = add(1.0, gather(%scale, %idx))            bf16 (either operand order)
 *   %p = mul(%h, %c)                               bf16 (either order)
 *   %y = add(%p, gather(%shift, %idx))             bf16 (either order)
 * becomes %y = norm_modulate(%x, %gamma, %scale, %shift, %idx) {modulate = "bf16"}. The
 * final layer's form, where the modulate runs in fp32 on the bf16 norm output and rounds
 * once (cast f32 of %h, 1.0 f32 + cast f32 of the scale gather, mul, add of the cast shift
 * gather, cast bf16), becomes the same op with modulate = "f32".
 * Plan B (pattern "residual-norm-modulate", tried first): when %x itself is the gated
 * residual add %x = add(%res, mul(gather(%gate, %idx), %update)) of the same region, the
 * add is absorbed: %x, %y = residual_norm_modulate(%res, %update, %gate, %gamma, %scale,
 * %shift, %idx); every other use of the old %x reads result 0 (residual', updated in
 * place by the memory planner when %res dies there).
 *
 * Legality (the match decides everything): every op of the chain is in the norm's region
 * and is the single user of the value before it (h, c, p, the fp32 casts and, for Plan B,
 * the gated product); the dispatch contract of §3 rule 4 holds: x bf16[T, H] with
 * H % 8 == 0, gamma bf16[H], tables bf16[G, H], one idx i32[T] for every gather; for
 * Plan B the other users of %x come after the chain's last op (the fused op is placed
 * there), and %update is neither %res nor a view of it (update must not alias residual).
 * Anything else stays unfused (the fallback is the unfused chain in every tier).
 *
 * Loops: the trunk's norm1 reads the loop-carried x (a region argument), whose gated add
 * is the previous iteration's last op, across the back edge. This pass keeps Plan A for
 * norm1 and Plan B for norm2 (which absorbs gate_msa inside the body); block l's trailing
 * gate_mlp add stays a separate (elementwise-fused) op, which by §3 rule 2 gives the same
 * bits as absorbing it. The tier attribute picks the kernels: "exact" at --quality exact
 * (every rounding of the unfused chain, bitwise equal to it), "lossless" above (one fp32
 * pass, one rounding; admitted by §2 rule 4, see tests/normmod). The pass must run before
 * elementwise-fusion, which would otherwise take the modulate's elementwise ops.
 */
#include "h3/op_registry.h"
#include "h3/rewrite.h"

#include "pass_internal.h"

#include <string.h>

#define MAX_CHAIN 8

typedef struct {
  h3_tier tier;
  int n_plan_a, n_plan_b;
  bool oom;
  /* the match just found */
  bool plan_b, mod_f32;
  h3_op *root;                  /* the chain's last op: the fused op goes before it */
  h3_op *chain[MAX_CHAIN];      /* erased after the rewrite, in this order */
  int n_chain;
  h3_op *producers[MAX_CHAIN];  /* gathers, consts, casts: erased when left unused */
  int n_producers;
  h3_value *x, *gamma, *scale, *shift, *idx;
  h3_op *res_add;               /* Plan B */
  h3_value *residual, *update, *gate;
} nm_state;

/* ---- small matchers ------------------------------------------------------------------- */
static bool in_region(const h3_value *v, const h3_region *r) {
  return v->kind == H3_VALUE_RESULT && v->def && v->def->parent == r;
}

static bool is_type(const h3_value *v, h3_dtype dt, const h3_type *shape) {
  return v->type.dtype == dt && h3_type_same_shape(&v->type, shape);
}

/* The single op that uses v, when v has one use by an op of region r (not nested). */
static h3_op *only_user(const h3_module *m, const h3_value *v, const h3_region *r) {
  h3_op *u = NULL;
  if (v->uses != 1 || h3_value_users(m, v, &u, 1) != 1 || !u || u->parent != r) return NULL;
  return u;
}

/* The other operand of a binary op, given one of them. */
static h3_value *other_operand(const h3_op *op, const h3_value *v) {
  if (op->n_operands != 2) return NULL;
  return op->operands[0] == v ? op->operands[1] : op->operands[1] == v ? op->operands[0] : NULL;
}

/* v = const 1.0 of dtype dt, a scalar. */
static bool is_one(const h3_value *v, h3_dtype dt) {
  const h3_op *c = v->kind == H3_VALUE_RESULT ? v->def : NULL;
  return c && c->code == H3_OP_CONST && v->type.dtype == dt && v->type.rank == 0 &&
         h3_op_attr_float(c, "value", 0.0) == 1.0;
}

static void add_producer(nm_state *s, h3_op *op) {
  if (s->n_producers < MAX_CHAIN) s->producers[s->n_producers++] = op;
}

/* v = gather(table bf16[G, H], idx i32[T]) of type bf16 `shape` in region r (or, in the fp32
 * form, a single-use cast to f32 of such a gather). *idx must match when set. */
static h3_value *match_gather(nm_state *s, h3_value *v, bool f32, const h3_type *shape,
                              const h3_region *r, h3_value **idx) {
  if (f32) {
    if (!in_region(v, r) || v->def->code != H3_OP_CAST || v->uses != 1 ||
        !is_type(v, H3_F32, shape))
      return NULL;
    add_producer(s, v->def);
    v = v->def->operands[0];
  }
  if (!in_region(v, r) || v->def->code != H3_OP_GATHER || !is_type(v, H3_BF16, shape))
    return NULL;
  h3_value *table = v->def->operands[0], *ix = v->def->operands[1];
  if (table->type.dtype != H3_BF16 || table->type.rank != 2 ||
      table->type.dims[1] != shape->dims[1] || ix->type.dtype != H3_I32 || ix->type.rank != 1)
    return NULL;
  if (*idx && *idx != ix) return NULL;
  *idx = ix;
  add_producer(s, v->def);
  return table;
}

/* Is v (through views) the value `base`? */
static bool views_of(const h3_value *v, const h3_value *base) {
  for (int n = 0; v && n < 64; n++) {
    if (v == base) return true;
    if (v->kind != H3_VALUE_RESULT || !v->def || !h3_op_is_view(v->def->code)) return false;
    v = v->def->operands[0];
  }
  return true; /* a view chain this long: assume it aliases */
}

/* ---- the chains -------------------------------------------------------------------------- */
/* The modulate chain after rms_norm op `norm` (Plan A). Fills s; false when it does not
 * match or is not legal. */
static bool match_modulate(const h3_module *m, h3_op *norm, nm_state *s) {
  s->n_chain = s->n_producers = 0;
  s->idx = NULL;
  h3_region *r = norm->parent;
  h3_value *h = norm->results[0], *x = norm->operands[0];
  const h3_type *t = &x->type;
  if (t->dtype != H3_BF16 || t->rank != 2 || t->dims[1] % 8 != 0 || t->dims[1] < 8 ||
      !is_type(h, H3_BF16, t) || norm->operands[1]->type.dtype != H3_BF16)
    return false;
  h3_op *u = only_user(m, h, r);
  if (!u) return false;
  s->mod_f32 = u->code == H3_OP_CAST;
  h3_dtype md = s->mod_f32 ? H3_F32 : H3_BF16;
  h3_op *mul = u;
  h3_value *hm = h;
  if (s->mod_f32) { /* h' = cast f32 (h) */
    if (!is_type(u->results[0], H3_F32, t)) return false;
    hm = u->results[0];
    mul = only_user(m, hm, r);
    if (!mul) return false;
  }
  if (mul->code != H3_OP_MUL || !is_type(mul->results[0], md, t)) return false;
  h3_value *c = other_operand(mul, hm);
  if (!c || !in_region(c, r) || c->uses != 1 || c->def->code != H3_OP_ADD ||
      !is_type(c, md, t))
    return false;
  h3_op *cadd = c->def;
  h3_value *one = cadd->operands[0], *sv = cadd->operands[1];
  if (!is_one(one, md)) {
    one = cadd->operands[1];
    sv = cadd->operands[0];
  }
  if (!is_one(one, md)) return false;
  add_producer(s, one->def);
  s->scale = match_gather(s, sv, s->mod_f32, t, r, &s->idx);
  if (!s->scale) return false;
  h3_op *madd = only_user(m, mul->results[0], r);
  if (!madd || madd->code != H3_OP_ADD || !is_type(madd->results[0], md, t)) return false;
  h3_value *shv = other_operand(madd, mul->results[0]);
  s->shift = shv ? match_gather(s, shv, s->mod_f32, t, r, &s->idx) : NULL;
  if (!s->shift || s->shift->type.dims[0] != s->scale->type.dims[0]) return false;
  if (s->idx->type.dims[0] != t->dims[0]) return false;
  h3_op *root = madd;
  if (s->mod_f32) { /* y = cast bf16 (p + shift) */
    root = only_user(m, madd->results[0], r);
    if (!root || root->code != H3_OP_CAST || !is_type(root->results[0], H3_BF16, t)) return false;
    s->chain[s->n_chain++] = root;
  }
  s->chain[s->n_chain++] = madd;
  s->chain[s->n_chain++] = mul;
  if (s->mod_f32) s->chain[s->n_chain++] = u;
  s->chain[s->n_chain++] = cadd;
  s->chain[s->n_chain++] = norm;
  s->root = root;
  s->x = x;
  s->gamma = norm->operands[1];
  return true;
}

/* Plan B's gated residual add producing the norm's input, on top of a Plan A match. */
static bool match_residual(nm_state *s) {
  h3_value *x = s->x;
  h3_region *r = s->root->parent;
  if (!in_region(x, r) || x->def->code != H3_OP_ADD || x->def->n_operands != 2) return false;
  h3_op *add = x->def;
  for (int side = 0; side < 2; side++) {
    h3_value *res = add->operands[side], *q = add->operands[1 - side];
    if (!is_type(res, H3_BF16, &x->type) || !in_region(q, r) || q->uses != 1 ||
        q->def->code != H3_OP_MUL || !is_type(q, H3_BF16, &x->type))
      continue;
    for (int g = 0; g < 2; g++) {
      int n_prod = s->n_producers;
      h3_value *idx = s->idx;
      h3_value *gate = match_gather(s, q->def->operands[g], false, &x->type, r, &idx);
      h3_value *upd = q->def->operands[1 - g];
      if (!gate || !is_type(upd, H3_BF16, &x->type) || views_of(upd, res) || views_of(res, upd)) {
        s->n_producers = n_prod;
        continue;
      }
      s->res_add = add;
      s->residual = res;
      s->update = upd;
      s->gate = gate;
      return true;
    }
  }
  return false;
}

/* Every user of the old norm input other than the norm comes after the root. */
static bool users_after_root(nm_state *s, const h3_module *m) {
  h3_region *r = s->root->parent;
  h3_region_index *ix = h3_region_index_build(m, r);
  if (!ix) {
    s->oom = true;
    return false;
  }
  h3_op *const *users;
  int n = h3_region_index_users(ix, s->x, &users);
  int root_pos = h3_region_index_pos(ix, s->root);
  bool ok = true;
  for (int i = 0; i < n && ok; i++)
    if (users[i] != s->chain[s->n_chain - 1]) ok = h3_region_index_pos(ix, users[i]) > root_pos;
  h3_region_index_free(ix);
  return ok;
}

static bool match_plan_a(h3_rewriter *rw, h3_op *op, void *state) {
  nm_state *s = state;
  s->plan_b = false;
  return match_modulate(h3_rewriter_module(rw), op, s);
}

static bool match_plan_b(h3_rewriter *rw, h3_op *op, void *state) {
  nm_state *s = state;
  const h3_module *m = h3_rewriter_module(rw);
  s->plan_b = true;
  return match_modulate(m, op, s) && match_residual(s) && users_after_root(s, m);
}

/* ---- the rewrite ------------------------------------------------------------------------- */
static void erase_if_dead(h3_rewriter *rw, h3_op *op) {
  for (int i = 0; i < op->n_results; i++)
    if (op->results[i]->uses) return;
  h3_rewriter_erase(rw, op);
}

static h3_status rewrite(h3_rewriter *rw, h3_op *op, void *state, h3_diag *d) {
  (void)op;
  nm_state *s = state;
  h3_module *m = h3_rewriter_module(rw);
  h3_op *norm = s->chain[s->n_chain - 1];
  h3_builder b = {m, s->root->parent, s->root, norm->span};
  h3_attr attrs[4];
  int na = 0;
  attrs[na++] = h3_attr_float(m, "eps", h3_op_attr_float(norm, "eps", 1e-5));
  if (h3_op_attr(norm, "offset"))
    attrs[na++] = h3_attr_float(m, "offset", h3_op_attr_float(norm, "offset", 0.0));
  attrs[na++] = h3_attr_tier(m, "tier", s->tier == H3_TIER_EXACT ? H3_TIER_EXACT : H3_TIER_LOSSLESS);
  attrs[na++] = h3_attr_string(m, "modulate", s->mod_f32 ? "f32" : "bf16");
  h3_value *a_in[5] = {s->x, s->gamma, s->scale, s->shift, s->idx};
  h3_value *b_in[7] = {s->residual, s->update, s->gate, s->gamma, s->scale, s->shift, s->idx};
  h3_op *f = s->plan_b ? h3_build_op(&b, H3_OP_RESIDUAL_NORM_MODULATE, 7, b_in, na, attrs, 0, d)
                       : h3_build_op(&b, H3_OP_NORM_MODULATE, 5, a_in, na, attrs, 0, d);
  if (!f) return H3_ERR; /* inference failed: the match checked every type, so only OOM */
  h3_value_replace_all_uses(m, s->root->results[0], f->results[s->plan_b ? 1 : 0]);
  for (int i = 0; i < s->n_chain; i++) h3_rewriter_erase(rw, s->chain[i]);
  if (s->plan_b) {
    h3_value_replace_all_uses(m, s->x, f->results[0]);
    h3_value *prod = s->res_add->operands[0] == s->residual ? s->res_add->operands[1]
                                                            : s->res_add->operands[0];
    h3_rewriter_erase(rw, s->res_add);
    h3_rewriter_erase(rw, prod->def);
    s->n_plan_b++;
  } else {
    s->n_plan_a++;
  }
  for (int i = 0; i < s->n_producers; i++) erase_if_dead(rw, s->producers[i]);
  h3_rewriter_notify_new(rw, f);
  return H3_OK;
}

static const h3_pattern nm_patterns[] = {
    {.name = "residual-norm-modulate",
     .root = H3_OP_RMS_NORM,
     .benefit = 2,
     .match = match_plan_b,
     .rewrite = rewrite},
    {.name = "norm-modulate",
     .root = H3_OP_RMS_NORM,
     .benefit = 1,
     .match = match_plan_a,
     .rewrite = rewrite},
};

static h3_status nm_run(h3_module *m, h3_pass_context *ctx, h3_diag *d) {
  nm_state s;
  memset(&s, 0, sizeof s);
  s.tier = h3_pass_tier(ctx);
  h3_status st = h3_rewrite_greedy(m, nm_patterns, 2, &s, ctx, NULL, d);
  if (st == H3_OK && s.oom) {
    static const h3_span no_span = {0};
    h3_diag_error(d, no_span, "free memory or use a smaller --config",
                  "out of memory in pass 'norm-modulate-fusion'");
    st = H3_ERR;
  }
  if (st == H3_OK)
    h3_pass_report(ctx, "fused sites: %d Plan A, %d Plan B (tier %s)", s.n_plan_a, s.n_plan_b,
                   h3_tier_name(s.tier == H3_TIER_EXACT ? H3_TIER_EXACT : H3_TIER_LOSSLESS));
  return st;
}

const h3_pass h3_pass_norm_modulate_fusion = {
    .name = "norm-modulate-fusion",
    .description = "fuse rms_norm + indexed AdaLN modulate (Plan A) and the gated residual add "
                   "before it (Plan B); exact keeps every rounding, lossless rounds once",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = true,
    .requires = {NULL},
    .run = nm_run,
};
