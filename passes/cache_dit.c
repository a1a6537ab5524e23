/* cache_dit.c: the `cache-dit` pass (default pipeline at --quality high): Cache-DiT with
 * DBCache Fn = 1, Bn = 0 (docs/models/accelerations.md §7, docs/step-skipping.md).
 *
 * The step graph G (the graph with the `trunk` loop that the sampling loop calls) is
 * cloned into G_cache, where the trunk becomes
 *     H1  = loop(H0) {count = 1, label = "trunk.front"}          block 0, always run
 *     rf  = H1 - H0                                               R_F (the trunk's dtype)
 *     use = cache_dit_decide(rf, rf_prev, step, n) {warmup, threshold, max_consecutive}
 *     H, rm', rf_prev', n' = branch(use, H1, rf, rm, rf_prev, n, captures...)
 *                              {then_callee = G_cached, else_callee = G_rest}
 * G_rest runs blocks 1 .. L-1 (the trunk body with the counter shifted by 1) and returns
 * (H, H - H1, rf, 0); G_cached returns (H1 + rm, rm, rf_prev, n + 1). G_cache takes the
 * state rf_prev, rm, n and the step index as extra inputs and returns the new state; the
 * sampling loop carries it (zeros and 0 at entry) and passes its counter as the step.
 * With threshold 0 no step is cached and every op of the full path is the original one,
 * so the result is bitwise equal to the program without caching. The decision reads a
 * scalar on the host (`branch`), so the plan runs on the cpu backend (docs).
 */
#include "h3/rewrite.h"

#include "pass_internal.h"
#include "spectrum.h"

#include <stdlib.h>
#include <string.h>

static const char PASS[] = "cache-dit";

typedef struct {
  h3_module *m;
  h3_diag *d;
  const h3_skip_site *s;
  h3_cache_dit_options o;
  h3_type x;             /* the trunk's hidden state */
  int n_cap;
  h3_value **cap;        /* values of G the trunk body reads from outside it */
  h3_graph *rest, *cached, *gc;
} cd_ctx;

static h3_value *op1(cd_ctx *c, h3_builder *b, h3_opcode code, int n, h3_value **ops, int na,
                     const h3_attr *a, const char *name) {
  h3_op *op = h3_build_op(b, code, n, ops, na, a, 0, c->d);
  if (!op) return NULL;
  op->results[0]->name = name;
  return op->results[0];
}

static h3_value *i32_const(cd_ctx *c, h3_builder *b, double v) {
  h3_attr a[2] = {h3_attr_float(c->m, "value", v), h3_attr_dtype(c->m, "dtype", H3_I32)};
  return op1(c, b, H3_OP_CONST, 0, NULL, 2, a, NULL);
}

/* ---- captures: values from outside the trunk that its body reads ---------------------------- */
static int collect(h3_op *op, void *p) {
  cd_ctx *c = p;
  for (int i = 0; i < op->n_operands; i++) {
    h3_value *v = op->operands[i];
    /* values of G's body and G's inputs; not parameters, not values of the trunk body */
    if (v->kind == H3_VALUE_PARAM || h3_value_def_region(v) != &c->s->step->body) continue;
    bool seen = false;
    for (int j = 0; j < c->n_cap && !seen; j++) seen = c->cap[j] == v;
    if (seen) continue;
    h3_value **cap = realloc(c->cap, (size_t)(c->n_cap + 1) * sizeof *cap);
    if (!cap) return 1;
    c->cap = cap;
    c->cap[c->n_cap++] = v;
  }
  return 0;
}

/* The branch graphs' inputs: H1, rf, rm, rf_prev, n, captures... */
static h3_graph *branch_graph(cd_ctx *c, const char *base, h3_value **in) {
  char name[200];
  snprintf(name, sizeof name, "%s_%s", c->s->step->name, base);
  h3_graph *g = h3_module_add_graph(c->m, h3_graph_fresh_name(c->m, name), H3_GRAPH_FUNCTION,
                                    c->s->trunk->span);
  if (!g) return NULL;
  static const char *const names[5] = {"h1", "rf", "rm", "rf_prev", "n_cached"};
  h3_type i32 = h3_type_make(H3_I32, 0, NULL);
  for (int i = 0; i < 5 + c->n_cap; i++) {
    const char *nm = i < 5 ? names[i] : c->cap[i - 5]->name;
    h3_type t = i < 4 ? c->x : i == 4 ? i32 : c->cap[i - 5]->type;
    if (!(in[i] = h3_graph_add_input(c->m, g, nm, t, c->s->trunk->span))) return NULL;
  }
  static const char *const outs[4] = {"hidden", "rm", "rf_prev", "n_cached"};
  for (int i = 0; i < 4; i++) h3_graph_add_output(c->m, g, outs[i]);
  return g;
}

static h3_status ret4(cd_ctx *c, h3_graph *g, h3_value **v) {
  for (int i = 0; i < 4; i++)
    if (!v[i]) return H3_ERR;
  h3_builder b = {.m = c->m, .region = &g->body, .span = c->s->trunk->span};
  return h3_build_op_typed(&b, H3_OP_RETURN, 4, v, 0, NULL, 0, NULL, 0) ? H3_OK
                                                                         : h3_skip_oom(c->d, PASS);
}

/* G_rest: blocks 1 .. L-1 on H1. */
static h3_status make_rest(cd_ctx *c) {
  h3_value *in[64];
  const h3_op *t = c->s->trunk;
  if (!(c->rest = branch_graph(c, "rest", in))) return h3_skip_oom(c->d, PASS);
  h3_builder b = {.m = c->m, .region = &c->rest->body, .span = t->span};
  int64_t layers = h3_op_attr_int(t, "count", 0);
  h3_attr la[2] = {h3_attr_int(c->m, "count", layers - 1), h3_attr_string(c->m, "label", "trunk.rest")};
  h3_op *loop = h3_build_op_typed(&b, H3_OP_LOOP, 1, in, 2, la, 1, &c->x, 1);
  h3_value_map vm = {0};
  if (!loop || h3_value_map_init(&vm, c->m) != H3_OK) return h3_skip_oom(c->d, PASS);
  const h3_region *body = &t->regions[0];
  h3_region *r = &loop->regions[0];
  h3_value *k = h3_region_add_arg(c->m, r, body->args[0]->type, body->args[0]->name, t->span);
  h3_value *x = h3_region_add_arg(c->m, r, c->x, body->args[1]->name, t->span);
  h3_status st = k && x ? H3_OK : h3_skip_oom(c->d, PASS);
  if (st == H3_OK) {
    h3_value_map_set(&vm, body->args[1], x);
    for (int i = 0; i < c->n_cap; i++) h3_value_map_set(&vm, c->cap[i], in[5 + i]);
    st = h3_loop_body_clone(c->m, &vm, body, r, 1, NULL, NULL, c->d);
  }
  h3_value_map_free(&vm);
  if (st != H3_OK) return st;
  h3_value *h = loop->results[0];
  h->name = "hidden";
  h3_value *sub[2] = {h, in[0]};
  h3_value *out[4] = {h, op1(c, &b, H3_OP_SUB, 2, sub, 0, NULL, "rm"), in[1], i32_const(c, &b, 0)};
  return ret4(c, c->rest, out);
}

/* G_cached: H1 + rm, the state unchanged but one more cached step. */
static h3_status make_cached(cd_ctx *c) {
  h3_value *in[64];
  if (!(c->cached = branch_graph(c, "cached", in))) return h3_skip_oom(c->d, PASS);
  h3_builder b = {.m = c->m, .region = &c->cached->body, .span = c->s->trunk->span};
  h3_value *add[2] = {in[0], in[2]};
  h3_value *one = i32_const(c, &b, 1);
  h3_value *inc[2] = {in[4], one};
  h3_value *out[4] = {op1(c, &b, H3_OP_ADD, 2, add, 0, NULL, "hidden"), in[2], in[3],
                      one ? op1(c, &b, H3_OP_ADD, 2, inc, 0, NULL, "n_cached") : NULL};
  return ret4(c, c->cached, out);
}

/* G_cache: the clone of G with the trunk split at block 0 and the branch. */
static h3_status make_step(cd_ctx *c) {
  h3_module *m = c->m;
  h3_value_map vm;
  char name[200];
  snprintf(name, sizeof name, "%s_cache", c->s->step->name);
  if (h3_value_map_init(&vm, m) != H3_OK) return h3_skip_oom(c->d, PASS);
  c->gc = h3_graph_clone(m, &vm, c->s->step, h3_graph_fresh_name(m, name));
  h3_op *t = c->gc ? h3_value_map_get(&vm, c->s->trunk->results[0])->def : NULL;
  h3_value *cap[64];
  for (int i = 0; t && i < c->n_cap; i++) cap[i] = h3_value_map_get(&vm, c->cap[i]);
  h3_value_map_free(&vm);
  if (!t) return h3_skip_oom(c->d, PASS);
  h3_type i32 = h3_type_make(H3_I32, 0, NULL);
  h3_value *rf_prev = h3_graph_add_input(m, c->gc, "rf_prev", c->x, t->span);
  h3_value *rm = h3_graph_add_input(m, c->gc, "rm", c->x, t->span);
  h3_value *n = h3_graph_add_input(m, c->gc, "n_cached", i32, t->span);
  h3_value *step = h3_graph_add_input(m, c->gc, "step", i32, t->span);
  if (!rf_prev || !rm || !n || !step) return h3_skip_oom(c->d, PASS);
  /* block 0: the trunk itself, one iteration */
  h3_value *h0 = t->operands[0];
  h3_op_set_attr(m, t, h3_attr_int(m, "count", 1));
  h3_op_set_attr(m, t, h3_attr_string(m, "label", "trunk.front"));
  h3_builder b = {.m = m, .region = t->parent, .before = t->next, .span = t->span};
  h3_value *h1 = t->results[0];
  h3_value *sub[2] = {h1, h0};
  h3_value *rf = op1(c, &b, H3_OP_SUB, 2, sub, 0, NULL, "rf");
  h3_value *dops[4] = {rf, rf_prev, step, n};
  h3_attr da[3] = {h3_attr_int(m, "warmup", c->o.warmup),
                   h3_attr_float(m, "threshold", c->o.threshold),
                   h3_attr_int(m, "max_consecutive", c->o.max_consecutive)};
  h3_value *use = rf ? op1(c, &b, H3_OP_CACHE_DIT_DECIDE, 4, dops, 3, da, "use_cache") : NULL;
  if (!use) return H3_ERR;
  h3_value *bops[70] = {use, h1, rf, rm, rf_prev, n};
  for (int i = 0; i < c->n_cap; i++) bops[6 + i] = cap[i];
  h3_attr ba[2] = {h3_attr_string(m, "then_callee", c->cached->name),
                   h3_attr_string(m, "else_callee", c->rest->name)};
  h3_type bt[4] = {c->x, c->x, c->x, i32};
  h3_op *br = h3_build_op_typed(&b, H3_OP_BRANCH, 6 + c->n_cap, bops, 2, ba, 4, bt, 0);
  if (!br) return h3_skip_oom(c->d, PASS);
  static const char *const rn[4] = {"hidden", "rm", "rf_prev", "n_cached"};
  for (int i = 0; i < 4; i++) br->results[i]->name = rn[i];
  /* the rest of G reads the branch's hidden state instead of block 0's */
  h3_value_replace_all_uses(m, h1, br->results[0]);
  h3_op_set_operand(br, 1, h1);
  for (h3_op *o = t->next; o != br; o = o->next) /* rf read h1 too */
    for (int i = 0; i < o->n_operands; i++)
      if (o->operands[i] == br->results[0]) h3_op_set_operand(o, i, h1);
  /* return ..., rf_prev', rm', n' */
  h3_op *ret = c->gc->body.last;
  h3_value *rops[64];
  int nr = ret->n_operands;
  if (nr + 3 > 64) return h3_skip_oom(c->d, PASS);
  memcpy(rops, ret->operands, (size_t)nr * sizeof *rops);
  rops[nr] = br->results[2];
  rops[nr + 1] = br->results[1];
  rops[nr + 2] = br->results[3];
  h3_builder rb = {.m = m, .region = &c->gc->body, .span = ret->span};
  h3_op_erase(ret);
  if (!h3_build_op_typed(&rb, H3_OP_RETURN, nr + 3, rops, 0, NULL, 0, NULL, 0))
    return h3_skip_oom(c->d, PASS);
  h3_graph_add_output(m, c->gc, "rf_prev");
  h3_graph_add_output(m, c->gc, "rm");
  h3_graph_add_output(m, c->gc, "n_cached");
  return m->oom ? h3_skip_oom(c->d, PASS) : H3_OK;
}

/* The sampling loop: carries rf_prev, rm, n; calls G_cache with them and its counter. */
typedef struct {
  cd_ctx *c;
  h3_value **state; /* the body's 3 extra args */
  h3_value *k;
  h3_value *next[3];
  int nc;
} loop_hook;

static h3_status program_hook(void *ctx, h3_builder *b, h3_value_map *vm, const h3_op *op,
                              bool *handled) {
  loop_hook *h = ctx;
  cd_ctx *c = h->c;
  if (op == c->s->call) {
    *handled = true;
    h3_value *ops[64];
    h3_type types[16];
    if (op->n_operands + 4 > 64 || op->n_results + 3 > 16) return h3_skip_oom(c->d, PASS);
    for (int i = 0; i < op->n_operands; i++) ops[i] = h3_value_map_get(vm, op->operands[i]);
    for (int i = 0; i < 3; i++) ops[op->n_operands + i] = h->state[i];
    ops[op->n_operands + 3] = h->k;
    for (int i = 0; i < op->n_results; i++) types[i] = op->results[i]->type;
    types[op->n_results] = types[op->n_results + 1] = c->x;
    types[op->n_results + 2] = h3_type_make(H3_I32, 0, NULL);
    h3_attr a = h3_attr_string(c->m, "callee", c->gc->name);
    h3_op *nc = h3_build_op_typed(b, H3_OP_CALL, op->n_operands + 4, ops, 1, &a,
                                  op->n_results + 3, types, 0);
    if (!nc) return h3_skip_oom(c->d, PASS);
    for (int i = 0; i < op->n_results; i++) {
      nc->results[i]->name = op->results[i]->name;
      h3_value_map_set(vm, op->results[i], nc->results[i]);
    }
    static const char *const rn[3] = {"rf_prev", "rm", "n_cached"};
    for (int i = 0; i < 3; i++) (h->next[i] = nc->results[op->n_results + i])->name = rn[i];
    return H3_OK;
  }
  if (op->code != H3_OP_YIELD) return H3_OK;
  *handled = true;
  h3_value *ys[64];
  for (int i = 0; i < h->nc; i++) ys[i] = h3_value_map_get(vm, op->operands[i]);
  for (int i = 0; i < 3; i++) ys[h->nc + i] = h->next[i];
  return h3_build_op_typed(b, H3_OP_YIELD, h->nc + 3, ys, 0, NULL, 0, NULL, 0)
             ? H3_OK
             : h3_skip_oom(c->d, PASS);
}

static h3_status rewrite_loop(cd_ctx *c) {
  h3_module *m = c->m;
  h3_op *loop = c->s->loop;
  int nc = loop->n_operands;
  if (nc + 3 > 64) return h3_skip_oom(c->d, PASS);
  h3_builder b = {.m = m, .region = loop->parent, .before = loop, .span = loop->span};
  h3_value *init[64];
  h3_type types[64];
  for (int i = 0; i < nc; i++) init[i] = loop->operands[i];
  h3_attr za[3] = {h3_attr_float(m, "value", 0.0), h3_attr_dtype(m, "dtype", c->x.dtype),
                   h3_attr_ints(m, "shape", c->x.rank, c->x.dims)};
  init[nc] = op1(c, &b, H3_OP_CONST, 0, NULL, 3, za, "rf_prev");
  init[nc + 1] = op1(c, &b, H3_OP_CONST, 0, NULL, 3, za, "rm");
  init[nc + 2] = i32_const(c, &b, 0);
  if (!init[nc] || !init[nc + 1] || !init[nc + 2]) return H3_ERR;
  init[nc + 2]->name = "n_cached";
  for (int i = 0; i < nc + 3; i++) types[i] = init[i]->type;
  h3_op *nl = h3_build_op_typed(&b, H3_OP_LOOP, nc + 3, init, loop->n_attrs, loop->attrs, nc + 3,
                                types, 1);
  h3_value_map vm = {0};
  if (!nl || h3_value_map_init(&vm, m) != H3_OK) return h3_skip_oom(c->d, PASS);
  const h3_region *body = &loop->regions[0];
  h3_region *r = &nl->regions[0];
  bool ok = true;
  for (int i = 0; ok && i < nc + 4; i++) {
    const h3_value *src = i <= nc ? body->args[i] : init[i - 1];
    h3_value *a = h3_region_add_arg(m, r, i <= nc ? src->type : types[i - 1], src->name, loop->span);
    ok = a != NULL;
    if (ok && i >= 1 && i <= nc) h3_value_map_set(&vm, body->args[i], a);
  }
  h3_status st = ok ? H3_OK : h3_skip_oom(c->d, PASS);
  loop_hook h = {.c = c, .state = ok ? r->args + 1 + nc : NULL, .k = ok ? r->args[0] : NULL, .nc = nc};
  if (st == H3_OK) st = h3_loop_body_clone(m, &vm, body, r, 0, program_hook, &h, c->d);
  h3_value_map_free(&vm);
  if (st != H3_OK) return st;
  for (int i = 0; i < nc; i++) {
    nl->results[i]->name = loop->results[i]->name;
    h3_value_replace_all_uses(m, loop->results[i], nl->results[i]);
  }
  h3_op_erase(loop);
  return m->oom ? h3_skip_oom(c->d, PASS) : H3_OK;
}

static h3_status cache_dit_run(h3_module *m, h3_pass_context *ctx, h3_diag *d) {
  const h3_pass_options *po = h3_pass_options_of(ctx);
  h3_span none = {0};
  if (po->spectrum) {
    h3_diag_error(d, none, "drop --spectrum or --quality high",
                  "--spectrum cannot be combined with --quality high (Cache-DiT): both skip the "
                  "block stack; use one skip-step accelerator.");
    return H3_ERR;
  }
  cd_ctx c = {.m = m, .d = d, .o = h3_cache_dit_options_default()};
  if (h3_cache_dit_options_parse(po->cache_dit, &c.o, d) != H3_OK) return H3_ERR;
  h3_skip_site site;
  int found = h3_skip_site_find(m, PASS, &site, d);
  if (found <= 0) {
    if (found == 0) h3_pass_report(ctx, "no sampling loop calls a `trunk` graph: nothing cached");
    return found < 0 ? H3_ERR : H3_OK;
  }
  c.s = &site;
  c.x = site.trunk->results[0]->type;
  if (h3_op_attr_int(site.trunk, "count", 0) < 2) {
    h3_pass_report(ctx, "the trunk has fewer than 2 blocks: nothing cached");
    return H3_OK;
  }
  h3_status st = h3_region_walk(&site.trunk->regions[0], collect, &c) ? h3_skip_oom(d, PASS) : H3_OK;
  if (st == H3_OK && c.n_cap > 58) {
    h3_diag_error(d, site.trunk->span, "pass fewer values into the block stack",
                  "%s: the trunk reads %d values from outside", PASS, c.n_cap);
    st = H3_ERR;
  }
  if (st == H3_OK) st = make_rest(&c);
  if (st == H3_OK) st = make_cached(&c);
  if (st == H3_OK) st = make_step(&c);
  if (st == H3_OK) st = rewrite_loop(&c);
  if (st == H3_OK) {
    h3_graph_drop_if_unused(m, site.step);
    h3_pass_report(ctx,
                   "graph %s: block 0 always runs; blocks 1-%lld reuse their cached residual "
                   "when d < %g (from step %d, at most %d in a row)",
                   c.gc->name, (long long)h3_op_attr_int(site.trunk, "count", 0) - 1,
                   c.o.threshold, c.o.warmup, c.o.max_consecutive);
  }
  free(c.cap);
  return st;
}

const h3_pass h3_pass_cache_dit = {
    .name = "cache-dit",
    .description = "Cache-DiT (--quality high): block 0 always runs; blocks 1.. reuse the cached "
                   "residual when block 0's residual changed by less than the threshold "
                   "(docs/step-skipping.md)",
    .min_tier = H3_TIER_HIGH,
    .in_default_pipeline = true,
    .requires = {NULL},
    .run = cache_dit_run,
};
