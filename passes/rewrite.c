/* rewrite.c: the greedy fixpoint driver of pattern rewriting (rewrite.h).
 *
 * One round: collect every op of every graph in pre-order (nested regions included) into
 * a worklist; for each op not erased meanwhile, try the patterns whose root fits, highest
 * benefit first, and apply the first that matches. Ops created by a rewrite are appended
 * to the worklist of the running round. Rounds repeat until one applies nothing; a
 * pattern set that keeps rewriting for 64 rounds is reported as not converging.
 */
#include "h3/rewrite.h"
#include "pass_internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_ROUNDS 64
#define MAX_PATTERNS 64

struct h3_rewriter {
  h3_module *m;
  h3_pass_context *ctx;
  h3_op **list; /* the worklist of this round */
  int n, cap;
  unsigned char *erased; /* by op id */
  int erased_cap;
  bool oom;
};

h3_module *h3_rewriter_module(const h3_rewriter *rw) { return rw->m; }
h3_pass_context *h3_rewriter_context(const h3_rewriter *rw) { return rw->ctx; }

static int push_op(h3_op *op, void *ctx) {
  h3_rewriter *rw = ctx;
  if (h3_ops_push(&rw->list, &rw->n, &rw->cap, op)) return 0;
  rw->oom = true;
  return 1;
}

void h3_rewriter_notify_new(h3_rewriter *rw, h3_op *op) {
  push_op(op, rw);
  for (int i = 0; i < op->n_regions; i++) h3_region_walk(&op->regions[i], push_op, rw);
}

static int mark_erased(h3_op *op, void *ctx) {
  h3_rewriter *rw = ctx;
  if (op->id >= rw->erased_cap) {
    int cap = rw->erased_cap ? rw->erased_cap : 256;
    while (cap <= op->id) cap *= 2;
    unsigned char *e = realloc(rw->erased, (size_t)cap);
    if (!e) {
      rw->oom = true;
      return 1;
    }
    memset(e + rw->erased_cap, 0, (size_t)(cap - rw->erased_cap));
    rw->erased = e;
    rw->erased_cap = cap;
  }
  rw->erased[op->id] = 1;
  return 0;
}

void h3_rewriter_erase(h3_rewriter *rw, h3_op *op) {
  mark_erased(op, rw);
  for (int i = 0; i < op->n_regions; i++) h3_region_walk(&op->regions[i], mark_erased, rw);
  h3_op_erase(op);
}

static bool is_erased(const h3_rewriter *rw, const h3_op *op) {
  return op->id < rw->erased_cap && rw->erased[op->id];
}

h3_status h3_rewrite_greedy(h3_module *m, const h3_pattern *patterns, int n, void *state,
                            h3_pass_context *ctx, int *n_rewrites, h3_diag *d) {
  static const h3_span no_span = {0};
  if (n_rewrites) *n_rewrites = 0;
  if (n > MAX_PATTERNS) {
    h3_diag_error(d, no_span, "split the patterns over several passes",
                  "too many patterns for one rewrite driver (%d, at most %d)", n, MAX_PATTERNS);
    return H3_ERR;
  }
  /* pattern order: benefit descending, ties in array order (insertion sort is stable) */
  int order[MAX_PATTERNS];
  for (int i = 0; i < n; i++) {
    int j = i;
    while (j > 0 && patterns[order[j - 1]].benefit < patterns[i].benefit) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = i;
  }
  h3_rewriter rw = {.m = m, .ctx = ctx};
  h3_status st = H3_OK;
  const char *last_pattern = NULL;
  int rounds = 0;
  bool changed = true;
  while (changed && st == H3_OK) {
    if (rounds == MAX_ROUNDS) {
      h3_diag_error(d, no_span, "a rewrite must make its pattern stop matching",
                    "pattern rewriting did not reach a fixpoint after %d rounds "
                    "(pattern '%s' keeps applying)",
                    MAX_ROUNDS, last_pattern ? last_pattern : "?");
      st = H3_ERR;
      break;
    }
    rounds++;
    changed = false;
    rw.n = 0;
    for (int g = 0; g < m->n_graphs && !rw.oom; g++)
      h3_region_walk(&m->graphs[g]->body, push_op, &rw);
    for (int i = 0; i < rw.n && st == H3_OK && !rw.oom; i++) {
      h3_op *op = rw.list[i];
      if (is_erased(&rw, op)) continue;
      for (int k = 0; k < n; k++) {
        const h3_pattern *p = &patterns[order[k]];
        if (p->root != H3_OPCODE_INVALID && p->root != op->code) continue;
        if (!p->match(&rw, op, state)) continue;
        st = p->rewrite(&rw, op, state, d);
        last_pattern = p->name;
        changed = true;
        if (n_rewrites) (*n_rewrites)++;
        break;
      }
    }
  }
  if (rw.oom && st == H3_OK) {
    h3_diag_error(d, no_span, "free memory or use a smaller --config",
                  "out of memory while rewriting patterns");
    st = H3_ERR;
  }
  free(rw.list);
  free(rw.erased);
  return st;
}
