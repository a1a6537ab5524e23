/* index_topk_early.c: the `index-topk-early` pass: a one-row step's index_topk reads the
 * index cache as it was before the step's write of the row's own position.
 *
 * Pattern "topk-before-write" (root index_topk):
 *   %c2 = kv_write(%c, %k, %slot)  or  %c2 = rms_norm_rope_write(%c, %x, %w, %cos, %sin, %slot)
 *   ..
 *   %sel = index_topk(%iq, %c2, %pos, %pt) {block, topk}        iq [1, Hi, D]: one row
 * where %slot is the row's own position in its table (the model's kv_slots at one row:
 *   %slot = add(mul(gather(reshape(%pt), add(Z, div(%pos, P))), P), mod(%pos, P))
 * with P the cache's page, Z a row offset that is zero at one row (iota(n = 1) times or over
 * constants), either order of every add and mul) becomes
 *   %sel = index_topk(%iq, %c, %pos, %pt)                       moved right before the write
 * Why it is the same: index_topk scores the row's blocks before its current one and gives the
 * current block (the one holding %pos) +inf without using its score; the write puts one row
 * at %pos, which lies in that block. So the selection does not depend on the written row,
 * provided the table names each physical page once (no two logical pages of the row share
 * one, as every table h3's graphs and the serving engine build): bitwise the same at every
 * --quality on that condition.
 * Why: in M3.1's decode the indexer's k chain (its GEMV, split-K reduce and the norm + rope
 * + write) no longer precedes top-k, which then waits for the q chain alone; side-streams can
 * run the k chain on the other stream (it sinks the write below the branch's join, so that
 * the read and the in-place write never run at once). Opt-in (--enable-pass): on an H100 the
 * step took 15 us longer with it (the k chain's GEMV and reduce then follow the qkv GEMV on
 * the main stream, which becomes the longer side by ~7 us a layer, and the write follows the
 * attention); the H200, whose indexer branch ran ~20 us past the qkv side, is not measured.
 *
 * Legality: the index_topk has one row (iq's first dim and pos's element count are 1) and its
 * table one row; the write's result 0 is the index_topk's cache and updates operand 0 in
 * place; the slot pattern matches with the index_topk's own %pos and, through reshapes, its
 * own %pt; iq, pos and pt are available at the write (the index_topk moves there, before the
 * write, so that the write stays the cache's last reader and updates it in place).
 */
#include "h3/op_registry.h"
#include "h3/rewrite.h"

#include "pass_internal.h"

#include <string.h>

typedef struct {
  int n_sites;
  h3_op *write; /* the match just found */
} te_state;

/* v through its reshapes (views of the same elements in the same order). */
static const h3_value *strip_reshapes(const h3_value *v) {
  for (const h3_op *r; (r = h3_value_def_of(v, H3_OP_RESHAPE));) v = r->operands[0];
  return v;
}

/* Whether v is an integer constant equal to want. */
static bool const_is(const h3_value *v, int64_t want) {
  int64_t c;
  return h3_value_const_int(v, &c) && c == want;
}

/* Whether v is zero: iota(n = 1), a constant 0, or a product or quotient (by a positive
 * constant) of a zero (the row offset iota(n = T) / (T / R) * pt_len at T = 1). */
static bool is_zero(const h3_value *v, int depth) {
  if (depth > 4) return false;
  const h3_op *o = v->kind == H3_VALUE_RESULT ? v->def : NULL;
  if (!o) return false;
  if (o->code == H3_OP_IOTA) return h3_op_attr_int(o, "n", 0) == 1;
  if (o->code == H3_OP_CONST) return const_is(v, 0);
  if (o->code == H3_OP_MUL)
    return is_zero(o->operands[0], depth + 1) || is_zero(o->operands[1], depth + 1);
  int64_t c;
  if (o->code == H3_OP_DIV)
    return h3_value_const_int(o->operands[1], &c) && c > 0 && is_zero(o->operands[0], depth + 1);
  return false;
}

/* The operand of the binary op o other than the one for which pred holds, or NULL. */
typedef bool (*value_pred)(const h3_value *v, const void *arg);
static const h3_value *other_than(const h3_op *o, value_pred pred, const void *arg) {
  if (!o || o->n_operands != 2) return NULL;
  if (pred(o->operands[0], arg)) return o->operands[1];
  if (pred(o->operands[1], arg)) return o->operands[0];
  return NULL;
}

typedef struct {
  const h3_value *pos;
  int64_t page;
} pos_page;

static bool is_page(const h3_value *v, const void *arg) { return const_is(v, ((const pos_page *)arg)->page); }

/* v = op(pos, page) for op mod or div. */
static bool is_pos_by_page(const h3_value *v, h3_opcode code, const pos_page *pp) {
  const h3_op *o = h3_value_def_of(v, code);
  return o && o->operands[0] == pp->pos && is_page(o->operands[1], pp);
}
static bool is_pos_mod_page(const h3_value *v, const void *arg) { return is_pos_by_page(v, H3_OP_MOD, arg); }
static bool is_pos_div_page(const h3_value *v, const void *arg) { return is_pos_by_page(v, H3_OP_DIV, arg); }

/* Whether slot is the one row's own position pos in table pt, pages of `page` rows. */
static bool own_slot(const h3_value *slot, const h3_value *pos, const h3_value *pt, int64_t page) {
  const pos_page pp = {pos, page};
  const h3_value *scaled = other_than(h3_value_def_of(slot, H3_OP_ADD), is_pos_mod_page, &pp);
  const h3_value *entry = scaled ? other_than(h3_value_def_of(scaled, H3_OP_MUL), is_page, &pp) : NULL;
  const h3_op *g = entry ? h3_value_def_of(entry, H3_OP_GATHER) : NULL;
  if (!g || strip_reshapes(g->operands[0]) != strip_reshapes(pt)) return false;
  const h3_value *offset = other_than(h3_value_def_of(g->operands[1], H3_OP_ADD), is_pos_div_page, &pp);
  return offset ? is_zero(offset, 0) : is_pos_div_page(g->operands[1], &pp);
}

static bool match(h3_rewriter *rw, h3_op *topk, void *state) {
  te_state *s = state;
  (void)rw;
  const h3_value *iq = topk->operands[0], *c2 = topk->operands[1], *pos = topk->operands[2],
                 *pt = topk->operands[3];
  h3_op *w = c2->kind == H3_VALUE_RESULT ? c2->def : NULL;
  if (!w || (w->code != H3_OP_KV_WRITE && w->code != H3_OP_RMS_NORM_ROPE_WRITE) ||
      w->results[0] != c2 || h3_op_inplace_operand(w, 0) != 0 || w->parent != topk->parent)
    return false;
  const int slot_at = w->code == H3_OP_KV_WRITE ? 2 : 5;
  if (w->n_operands <= slot_at || iq->type.rank < 1 || iq->type.dims[0] != 1 ||
      h3_type_numel(&pos->type) != 1 || (pt->type.rank == 2 && pt->type.dims[0] != 1) ||
      c2->type.rank < 2)
    return false;
  if (!own_slot(w->operands[slot_at], pos, pt, c2->type.dims[1])) return false;
  for (int i = 0; i < topk->n_operands; i++)
    if (i != 1 && !h3_value_dominates(topk->operands[i], w)) return false;
  s->write = w;
  return true;
}

static h3_status rewrite(h3_rewriter *rw, h3_op *topk, void *state, h3_diag *d) {
  te_state *s = state;
  (void)rw, (void)d;
  h3_op_set_operand(topk, 1, s->write->operands[0]);
  h3_op_move_before(topk, topk->parent, s->write);
  s->n_sites++;
  return H3_OK;
}

static const h3_pattern te_patterns[] = {
    {.name = "topk-before-write", .root = H3_OP_INDEX_TOPK, .benefit = 1, .match = match, .rewrite = rewrite},
};

static h3_status te_run(h3_module *m, h3_pass_context *ctx, h3_diag *d) {
  te_state s;
  memset(&s, 0, sizeof s);
  h3_status st = h3_rewrite_greedy(m, te_patterns, 1, &s, ctx, NULL, d);
  if (st == H3_OK) h3_pass_report(ctx, "index_topk sites reading the cache before the write: %d", s.n_sites);
  return st;
}

const h3_pass h3_pass_index_topk_early = {
    .name = "index-topk-early",
    .description = "a one-row index_topk reads the index cache before the step's write of the "
                   "row's own position (a block it never scores): M3.1 decode's top-k no longer "
                   "waits for the indexer's k chain; bitwise neutral where a page table names "
                   "each page once",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = false, /* --enable-pass: +15 us a batch-1 step on an H100 */
    .requires = {NULL},
    .run = te_run,
};
