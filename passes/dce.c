/* dce.c: the `dce` pass: dead-code elimination.
 *
 * Removes every op whose results are all unused and that has no side effects
 * (h3_op_is_pure: a loop or fused op only when its whole body is pure, a call only when
 * the callee is). Regions are swept from their last op to their first, so a chain of
 * dead ops goes in one sweep; nested regions are swept too.
 *
 * Loops also lose their dead loop-carried values: slot k of loop(carried...) is dead when
 * result k is unused and region argument k+1 feeds nothing but slot k's own update chain
 * (a counter nobody reads). A loop with dead slots is rebuilt without them: same
 * attributes, the live carried inputs, the index argument and the live arguments, the
 * body ops that still matter, a yield of the live values. Sweeps repeat until nothing
 * changes.
 */
#include "h3/rewrite.h"

#include "pass_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  h3_module *m;
  int removed, pruned;
  bool oom;
} dce_state;

/* ---- loop-carried slots ----------------------------------------------------------------- */
typedef struct {
  unsigned char *live_op; /* by op id: the body op (ancestor in the body) is needed */
  h3_value **stack;
  int n, cap;
  bool oom;
} mark_state;

static void mark_push(mark_state *s, h3_value *v) {
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 64;
    h3_value **st = realloc(s->stack, (size_t)cap * sizeof *st);
    if (!st) {
      s->oom = true;
      return;
    }
    s->stack = st;
    s->cap = cap;
  }
  s->stack[s->n++] = v;
}

static int push_operands(h3_op *op, void *ctx) {
  mark_state *s = ctx;
  for (int i = 0; i < op->n_operands; i++) mark_push(s, op->operands[i]);
  return 0;
}

/* Marks the body ops and carried slots that results in use (live[k] set on entry)
 * depend on. live has loop->n_results entries. */
static void mark_live(const h3_module *m, h3_op *loop, bool *live, mark_state *s) {
  h3_region *body = &loop->regions[0];
  h3_op *yield = body->last;
  for (int k = 0; k < loop->n_results; k++)
    if (live[k]) mark_push(s, yield->operands[k]);
  for (h3_op *op = body->first; op; op = op->next)
    if (op != yield && !h3_op_is_pure(m, op)) {
      s->live_op[op->id] = 1;
      push_operands(op, s);
      for (int r = 0; r < op->n_regions; r++) h3_region_walk(&op->regions[r], push_operands, s);
    }
  while (s->n > 0 && !s->oom) {
    h3_value *v = s->stack[--s->n];
    if (v->kind == H3_VALUE_REGION_ARG && v->region == body) {
      int k = v->index - 1; /* argument 0 is the loop index */
      if (k >= 0 && !live[k]) {
        live[k] = true;
        mark_push(s, yield->operands[k]);
      }
      continue;
    }
    if (v->kind != H3_VALUE_RESULT) continue;
    h3_op *anc = h3_op_ancestor_in(v->def, body);
    if (!anc || s->live_op[anc->id]) continue;
    s->live_op[anc->id] = 1;
    push_operands(anc, s);
    for (int r = 0; r < anc->n_regions; r++) h3_region_walk(&anc->regions[r], push_operands, s);
  }
}

/* Rebuilds `loop` keeping the slots with live[k]; erases the body ops not marked. */
static void rebuild_loop(dce_state *st, h3_op *loop, const bool *live,
                         const unsigned char *live_op) {
  h3_module *m = st->m;
  h3_region *body = &loop->regions[0];
  int n = loop->n_results, n_live = 0;
  h3_value **carried = malloc((size_t)(n + 1) * sizeof *carried);
  h3_value **yielded = malloc((size_t)(n + 1) * sizeof *yielded);
  h3_type *types = malloc((size_t)(n + 1) * sizeof *types);
  if (!carried || !yielded || !types) {
    st->oom = true;
    goto done;
  }
  for (int k = 0; k < n; k++)
    if (live[k]) {
      carried[n_live] = loop->operands[k];
      yielded[n_live] = body->last->operands[k];
      types[n_live] = loop->results[k]->type;
      n_live++;
    }
  h3_builder b = {m, loop->parent, loop, loop->span};
  h3_op *nl = h3_build_op_typed(&b, H3_OP_LOOP, n_live, carried, loop->n_attrs, loop->attrs, n_live,
                                types, 1);
  if (!nl) {
    st->oom = true;
    goto done;
  }
  h3_region *nb = &nl->regions[0];
  /* the body: old yield and unmarked ops go (last first), the rest moves over */
  h3_op_erase(body->last);
  for (h3_op *op = body->last, *prev; op; op = prev) {
    prev = op->prev;
    if (!live_op[op->id]) {
      h3_op_erase(op);
      st->removed++;
    }
  }
  while (body->first) h3_op_move_before(body->first, nb, NULL);
  /* arguments: the index and the live slots, uses rewired */
  for (int i = 0; i <= n; i++) {
    if (i > 0 && !live[i - 1]) continue;
    h3_value *old = body->args[i];
    h3_value *nv = h3_region_add_arg(m, nb, old->type, old->name, old->span);
    if (!nv) {
      st->oom = true;
      goto done;
    }
    for (int k = 0; k < n_live; k++)
      if (yielded[k] == old) yielded[k] = nv;
    h3_value_replace_all_uses(m, old, nv);
  }
  h3_builder yb = {m, nb, NULL, body->last ? body->last->span : loop->span};
  if (!h3_build_op_typed(&yb, H3_OP_YIELD, n_live, yielded, 0, NULL, 0, NULL, 0)) {
    st->oom = true;
    goto done;
  }
  for (int k = 0, j = 0; k < n; k++)
    if (live[k]) {
      nl->results[j]->name = loop->results[k]->name;
      nl->results[j]->span = loop->results[k]->span;
      h3_value_replace_all_uses(m, loop->results[k], nl->results[j++]);
    }
  h3_op_erase(loop);
  st->pruned += n - n_live;
done:
  free(carried);
  free(yielded);
  free(types);
}

/* Drops the dead carried slots of loop; true when it changed anything. */
static bool prune_loop(dce_state *st, h3_op *loop) {
  int n = loop->n_results;
  h3_region *body = &loop->regions[0];
  if (n == 0 || !body->last || body->last->code != H3_OP_YIELD || body->last->n_operands != n ||
      body->n_args != n + 1)
    return false; /* malformed: the verifier reports it */
  bool *live = calloc((size_t)n, sizeof *live);
  mark_state s = {.live_op = calloc((size_t)st->m->next_op_id + 1, 1)};
  bool changed = false;
  if (!live || !s.live_op) {
    st->oom = true;
    goto done;
  }
  for (int k = 0; k < n; k++) live[k] = loop->results[k]->uses > 0;
  mark_live(st->m, loop, live, &s);
  if (s.oom) {
    st->oom = true;
    goto done;
  }
  for (int k = 0; k < n && !changed; k++) changed = !live[k];
  if (changed) rebuild_loop(st, loop, live, s.live_op);
done:
  free(live);
  free(s.live_op);
  free(s.stack);
  return changed;
}

/* ---- sweeping --------------------------------------------------------------------------- */
static bool all_results_unused(const h3_op *op) {
  for (int i = 0; i < op->n_results; i++)
    if (op->results[i]->uses > 0) return false;
  return true;
}

static bool sweep_region(dce_state *st, h3_region *r) {
  bool changed = false;
  for (h3_op *op = r->last, *prev; op && !st->oom; op = prev) {
    prev = op->prev;
    if (op->code == H3_OP_YIELD || op->code == H3_OP_RETURN) continue;
    if (all_results_unused(op) && h3_op_is_pure(st->m, op)) {
      h3_op_erase(op);
      st->removed++;
      changed = true;
      continue;
    }
    for (int i = 0; i < op->n_regions; i++) changed |= sweep_region(st, &op->regions[i]);
    if (op->code == H3_OP_LOOP && op->n_regions == 1) changed |= prune_loop(st, op);
  }
  return changed;
}

static h3_status dce_run(h3_module *m, h3_pass_context *ctx, h3_diag *d) {
  dce_state st = {.m = m};
  bool changed = true;
  while (changed && !st.oom) {
    changed = false;
    for (int g = 0; g < m->n_graphs; g++) changed |= sweep_region(&st, &m->graphs[g]->body);
  }
  if (st.oom) {
    static const h3_span no_span = {0};
    h3_diag_error(d, no_span, "free memory or use a smaller --config",
                  "out of memory in pass 'dce'");
    return H3_ERR;
  }
  h3_pass_report(ctx, "ops removed: %d, loop-carried values removed: %d", st.removed, st.pruned);
  return H3_OK;
}

const h3_pass h3_pass_dce = {
    .name = "dce",
    .description = "remove ops whose results are unused and dead loop-carried values",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = true,
    .requires = {NULL},
    .run = dce_run,
};
