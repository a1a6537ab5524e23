/* rewrite.h: pattern rewriting for h3 passes: pattern records, the greedy fixpoint
 * driver, and the legality helpers every fusion asks before it changes the IR.
 *
 * A pattern is a record {name, root opcode (or any), match, rewrite, benefit}. The driver
 * (passes/rewrite.c) visits every op of every region of the module in pre-order, tries
 * the patterns whose root fits, highest benefit first, and applies the first one that
 * matches; it repeats rounds until a round changes nothing (the fixpoint). `match` only
 * looks (and may save what it found in the caller's `state`); `rewrite` changes the IR
 * and runs right after a successful match on the same op. Rewrites erase ops through
 * h3_rewriter_erase and announce the ops they create with h3_rewriter_notify_new, so the
 * driver never visits an erased op and does visit new ones in the same round.
 *
 * The legality helpers (passes/legality.c) answer the questions fusions share: does a
 * value have one use, do two values have the same shape, may the value alias another
 * buffer (loop-carried, graph output, updated in place), is an op free of side effects,
 * is a value available (dominating) at an insertion point, who uses a value.
 */
#ifndef H3_REWRITE_H
#define H3_REWRITE_H

#include "h3/passes.h"

typedef struct h3_rewriter h3_rewriter;

typedef struct h3_pattern {
  const char *name;
  h3_opcode root; /* the op kind the pattern starts from; H3_OPCODE_INVALID = any op */
  int benefit;    /* tried highest first; ties in array order */
  /* Match and legality check on `op`; must not change the IR. */
  bool (*match)(h3_rewriter *rw, h3_op *op, void *state);
  /* Rewrites the match just found on `op`; H3_ERR (with a message in d) stops the driver. */
  h3_status (*rewrite)(h3_rewriter *rw, h3_op *op, void *state, h3_diag *d);
} h3_pattern;

/* Applies patterns[0..n) to m until nothing matches. `state` is handed to every match
 * and rewrite. *n_rewrites (may be NULL) receives the number of rewrites applied.
 * Reports an error when the patterns do not reach a fixpoint within 64 rounds. */
h3_status h3_rewrite_greedy(h3_module *m, const h3_pattern *patterns, int n, void *state,
                            h3_pass_context *ctx, int *n_rewrites, h3_diag *d);

h3_module *h3_rewriter_module(const h3_rewriter *rw);
h3_pass_context *h3_rewriter_context(const h3_rewriter *rw);
/* Queues a newly created op (and the ops of its regions) for a visit in this round. */
void h3_rewriter_notify_new(h3_rewriter *rw, h3_op *op);
/* Erases op (its results must be unused) and forgets it and its nested ops. */
void h3_rewriter_erase(h3_rewriter *rw, h3_op *op);

/* ---- legality helpers ------------------------------------------------------------------- */
bool h3_value_has_one_use(const h3_value *v);
bool h3_values_same_shape(const h3_value *a, const h3_value *b); /* rank and dims */
/* True when the op has no effect beyond its results: every op but the terminators
 * (yield, return); a loop or fused op when every op of its body is; a call when the
 * callee's body is. In-place ops are functional in the IR, so they are pure. */
bool h3_op_is_pure(const h3_module *m, const h3_op *op);
/* True when v's buffer may be shared with another value, so a rewrite must not assume it
 * owns it: v is a loop's region argument or result, is yielded by a loop body, is
 * returned by its graph, or is the operand an in-place op updates (h3_op_inplace_operand). */
bool h3_value_is_aliased(const h3_value *v);
/* The op that defines v when it is an op of kind `code`, else NULL (also for v NULL). */
h3_op *h3_value_def_of(const h3_value *v, h3_opcode code);

/* True when a comes strictly before b in their common region (both must be in it). */
bool h3_op_before(const h3_op *a, const h3_op *b);
/* True when v is available at op: v is a parameter, a graph input of op's graph, an
 * argument of a region enclosing op, or the result of an op that comes before op's
 * ancestor in the def's region. */
bool h3_value_dominates(const h3_value *v, const h3_op *op);
/* True when every operand is available right before `before`, so an op using them may be
 * inserted there. */
bool h3_insertion_point_ok(const h3_op *before, int n, h3_value *const *operands);
/* Collects the ops that use v (once per operand occurrence; nested ops as themselves) by
 * scanning v's defining region (every graph for a parameter). Returns the number of uses;
 * stores at most cap of them in users (users may be NULL when cap is 0). */
int h3_value_users(const h3_module *m, const h3_value *v, h3_op **users, int cap);

/* ---- region index: a snapshot of one region for many queries ---------------------------- */
/* Positions of the region's ops (0, 1, ... in order) and, for every value, the ops of the
 * region that use it: a use inside a nested region counts as a use by the op of this
 * region that holds it. Valid until the IR changes. */
typedef struct h3_region_index h3_region_index;

/* NULL when out of memory. */
h3_region_index *h3_region_index_build(const h3_module *m, h3_region *r);
void h3_region_index_free(h3_region_index *ix);
/* Position of op in the region; -1 when op is not one of its ops. */
int h3_region_index_pos(const h3_region_index *ix, const h3_op *op);
/* Users of v in the region, one entry per operand occurrence (in region order). */
int h3_region_index_users(const h3_region_index *ix, const h3_value *v, h3_op *const **users);

#endif
