/* memory_plan.c: the `memory-plan` pass: one activation arena per graph, with buffer
 * reuse driven by liveness.
 *
 * Which values get a place: every op result and loop region argument of the graph's
 * top-level region and of its loop bodies (fused regions are kernel-internal: their
 * values stay at offset -1, as do parameters and graph inputs).
 *
 * Time: ops are numbered in a pre-order walk; a loop takes one number before its body
 * (start s) and one after (end e). An op at number p reads its operands at 2p and writes
 * its results at 2p (so a result never shares memory with an operand it reads), except
 * the in-place ops, which write at 2p+1. A loop's region arguments are written at 2s+1,
 * its results at 2e+1. A use inside a loop body of a value defined outside that loop
 * lasts until the loop's end, 2e (the body runs again). A value lives from its write to
 * its last read.
 *
 * Buffers (classes of values sharing memory, each member at a fixed byte delta):
 *   - views alias their source: reshape and index always (index: the runtime adds the
 *     dynamic row offset (i + offset) * row_bytes to the value's offset, which is the
 *     indexed tensor's base), slice when the slice is contiguous (all dims before the
 *     axis are 1; delta = start * inner bytes). A view of a parameter or graph input
 *     lives outside the arena: offset -1, like its source.
 *   - loop slot k: region argument k+1 and result k always share one buffer B_k; the
 *     yield operand k and the carried input k join B_k when their lifetimes do not
 *     overlap it. Where they do not join, the runtime copies: the carried input into B_k
 *     before the first iteration ("copy-in"), the yield operand into B_k after each
 *     iteration ("copy-back"); B_k is then reserved from 2s (copy-in) or for the whole
 *     loop (copy-back), so no other value lives there. The copies of one loop entry or one
 *     yield form a parallel assignment: when a source lies in another slot's B_j (a swap),
 *     the runtime must read every source before it writes any B_k.
 *   - in-place ops (kv_write, set_index, scatter_rows, residual_norm_modulate): result 0
 *     joins operand 0's buffer when operand 0 dies at the op and no other operand shares
 *     that buffer; otherwise the result has its own buffer, disjoint from every operand,
 *     and the runtime copies operand 0 into it first (residual_norm_modulate writes every
 *     element of result 0, so it needs no copy). Other results are written at 2p.
 *   - donated inputs (an output named like the input: h3_graph_donated_output, the KV
 *     caches) take part like values written before the first op; their class lives in
 *     the input's own buffer, not in the arena: every member gets offset
 *     h3_offset_of_input(j) ("at input J"), and an in-place op over a view of the input
 *     writes the input itself. A row update (y = kv_write(index(X, i), ..) whose only
 *     reader of X after it is set_index(X, i, y)) puts y in X's row although X is live;
 *     set_index may join even when the row it writes already lives in operand 0 (the
 *     runtime skips the copy of a row onto itself).
 *   - calls: a result of a donated callee output is written like an in-place op's result
 *     0 over the argument of that input (joined when the argument dies at the call; else
 *     the runtime copies the argument into the result first and passes that).
 *   - load-time ops (h3_op_is_load_time: the int8 weight quantization) get no place: the
 *     runtime computes them once at load and keeps their results with the weights, so
 *     views of them (index) live outside the arena too.
 * Placement: buffers in decreasing size, each at the lowest 256-byte aligned offset where
 * it overlaps no placed buffer that is live at the same time (greedy by size).
 * Results: value->offset, graph attrs `arena_bytes` (arena size) and `peak_bytes` (the
 * most bytes of buffers live at one time), and a report line per graph.
 */
#include "h3/op_registry.h"
#include "h3/rewrite.h"

#include "pass_internal.h"

#include <stdlib.h>
#include <string.h>

#define ALIGN 256

typedef struct {
  h3_value *v;
  int cls;       /* the buffer (a slot index: the class's first member) */
  int next;      /* next member of the class, -1 */
  int64_t delta; /* byte offset of the value in its buffer */
  int64_t start, end;
  bool view; /* placed inside its source: needs no memory of its own */
  int donor; /* the graph input index of a donated input's slot, else -1 */
} slot;

typedef struct {
  h3_module *m;
  int64_t *op_pos, *op_end; /* by op id */
  int *slot_of;             /* by value id, -1 = not planned */
  slot *slots;
  int n_slots, cap_slots;
  h3_op **loops, **inplace, **calls; /* in walk order */
  int n_loops, n_inplace, n_calls;
  int64_t t;
  bool oom;
} planner;

/* ---- slots and classes ------------------------------------------------------------------ */
static int add_slot(planner *p, h3_value *v, int64_t start, int64_t end) {
  if (p->n_slots == p->cap_slots) {
    int cap = p->cap_slots ? 2 * p->cap_slots : 64;
    slot *s = realloc(p->slots, (size_t)cap * sizeof *s);
    if (!s) {
      p->oom = true;
      return -1;
    }
    p->slots = s;
    p->cap_slots = cap;
  }
  int i = p->n_slots++;
  p->slots[i] = (slot){v, i, -1, 0, start, end, false, -1};
  p->slot_of[v->id] = i;
  return i;
}

static int slot_of(const planner *p, const h3_value *v) {
  return v->id >= 0 && v->id < p->m->next_value_id ? p->slot_of[v->id] : -1;
}

static bool classes_overlap(const planner *p, int a, int b) {
  for (int i = p->slots[a].cls; i >= 0; i = p->slots[i].next)
    for (int j = p->slots[b].cls; j >= 0; j = p->slots[j].next)
      if (p->slots[i].start <= p->slots[j].end && p->slots[j].start <= p->slots[i].end) return true;
  return false;
}

/* Puts slot b's class into slot a's so that b sits `off` bytes after a. Unless `force`,
 * refuses (returns false) when the two classes are live at the same time. Already in
 * one class: true when b already sits there. */
static bool merge(planner *p, int a, int b, int64_t off, bool force) {
  slot *s = p->slots;
  if (s[a].cls == s[b].cls) return s[b].delta == s[a].delta + off;
  if (!force && classes_overlap(p, a, b)) return false;
  int ca = s[a].cls, cb = s[b].cls;
  int64_t shift = s[a].delta + off - s[b].delta, min = 0;
  int tail = ca;
  while (s[tail].next >= 0) tail = s[tail].next;
  for (int i = cb; i >= 0; i = s[i].next) {
    s[i].cls = ca;
    s[i].delta += shift;
    if (s[i].delta < min) min = s[i].delta;
  }
  s[tail].next = cb;
  if (min < 0)
    for (int i = ca; i >= 0; i = s[i].next) s[i].delta -= min;
  return true;
}

/* ---- timeline --------------------------------------------------------------------------- */
/* Byte offset of a view's result inside its source, or -1 when the view is not a
 * contiguous part of it (a slice across an outer dim). */
static int64_t view_delta(const h3_op *op) {
  if (op->code != H3_OP_SLICE) return 0;
  const h3_type *x = &op->operands[0]->type;
  int64_t axis = h3_op_attr_int(op, "axis", 0), start = h3_op_attr_int(op, "start", 0);
  if (axis < 0 || axis >= x->rank) return -1;
  for (int d = 0; d < axis; d++)
    if (x->dims[d] != 1) return -1;
  int64_t inner = (int64_t)h3_dtype_size(x->dtype);
  for (int d = (int)axis + 1; d < x->rank; d++) inner *= x->dims[d];
  return start * inner;
}

/* The graph a call op runs, when it has donated inputs (else NULL). */
static const h3_graph *called(const planner *p, const h3_op *op) {
  if (op->code != H3_OP_CALL) return NULL;
  const h3_graph *g = h3_module_graph(p->m, h3_op_attr_string(op, "callee", ""));
  for (int i = 0; g && i < g->n_inputs; i++)
    if (h3_graph_donated_output(g, i) >= 0) return g;
  return NULL;
}

/* The input of g whose updated value is output r, or -1. */
static int donated_input(const h3_graph *g, int r) {
  for (int i = 0; i < g->n_inputs; i++)
    if (h3_graph_donated_output(g, i) == r) return i;
  return -1;
}

static bool push_op(planner *p, h3_op ***list, int *n, h3_op *op) {
  h3_op **l = realloc(*list, (size_t)(*n + 1) * sizeof *l);
  if (!l) {
    p->oom = true;
    return false;
  }
  *list = l;
  l[(*n)++] = op;
  return true;
}

static void walk_defs(planner *p, h3_region *r) {
  for (h3_op *op = r->first; op && !p->oom; op = op->next) {
    if (op->code == H3_OP_LOOP && op->n_regions == 1) {
      int64_t s = p->t++;
      p->op_pos[op->id] = s;
      h3_region *body = &op->regions[0];
      for (int i = 0; i < body->n_args; i++) add_slot(p, body->args[i], 2 * s + 1, 2 * s + 1);
      walk_defs(p, body);
      int64_t e = p->t++;
      p->op_end[op->id] = e;
      if (body->n_args > 0 && slot_of(p, body->args[0]) >= 0) /* the index: whole loop */
        p->slots[slot_of(p, body->args[0])].end = 2 * e;
      for (int i = 0; i < op->n_results; i++) add_slot(p, op->results[i], 2 * e + 1, 2 * e + 1);
      push_op(p, &p->loops, &p->n_loops, op);
      continue;
    }
    if (h3_op_is_load_time(op)) continue; /* the runtime keeps its results with the weights */
    int64_t pos = p->t++;
    p->op_pos[op->id] = p->op_end[op->id] = pos;
    const h3_graph *callee = called(p, op);
    int64_t w = 2 * pos + (h3_op_is_inplace(op->code) || callee ? 1 : 0);
    if (h3_op_is_view(op->code) && op->n_operands > 0 && op->n_results == 1) {
      int src = slot_of(p, op->operands[0]);
      int64_t delta = view_delta(op);
      bool outside = op->operands[0]->kind == H3_VALUE_PARAM || src < 0; /* (not a donated input) */
      if (delta >= 0 && outside) continue; /* a view of memory outside the arena */
      int res = add_slot(p, op->results[0], w, w);
      if (delta >= 0 && res >= 0) {
        merge(p, src, res, delta, true);
        p->slots[res].view = true;
      }
      continue;
    }
    /* only result 0 of an in-place op updates operand 0; its other results (Plan B's
       normalised output) are written like any op's, never over an operand; a call's
       results of donated outputs are written like result 0 of an in-place op */
    for (int i = 0; i < op->n_results; i++) {
      bool over = callee ? donated_input(callee, i) >= 0 : i == 0;
      add_slot(p, op->results[i], over ? w : 2 * pos, over ? w : 2 * pos);
    }
    if (h3_op_is_inplace(op->code)) push_op(p, &p->inplace, &p->n_inplace, op);
    if (callee) push_op(p, &p->calls, &p->n_calls, op);
  }
}

/* Read time of v by op: its position, or the end of the loop of v's region holding op. */
static int64_t use_time(const planner *p, const h3_value *v, h3_op *op) {
  h3_op *anc = h3_op_ancestor_in(op, h3_value_def_region(v));
  if (anc && anc != op && anc->code == H3_OP_LOOP) return 2 * p->op_end[anc->id];
  return 2 * p->op_pos[(anc ? anc : op)->id];
}

static void walk_uses(planner *p, h3_region *r) {
  for (h3_op *op = r->first; op; op = op->next) {
    for (int i = 0; i < op->n_operands; i++) {
      int s = slot_of(p, op->operands[i]);
      if (s < 0) continue;
      int64_t t = use_time(p, op->operands[i], op);
      if (t > p->slots[s].end) p->slots[s].end = t;
    }
    if (op->code == H3_OP_LOOP && op->n_regions == 1) walk_uses(p, &op->regions[0]);
  }
}

/* ---- sharing ---------------------------------------------------------------------------- */
static void share_loop(planner *p, h3_op *loop) {
  h3_region *body = &loop->regions[0];
  h3_op *yield = body->last;
  int64_t s = p->op_pos[loop->id], e = p->op_end[loop->id];
  for (int k = 0; k < loop->n_results && k + 1 < body->n_args; k++) {
    int arg = slot_of(p, body->args[k + 1]), res = slot_of(p, loop->results[k]);
    if (arg < 0 || res < 0) continue;
    merge(p, arg, res, 0, true);
    int y = yield && k < yield->n_operands ? slot_of(p, yield->operands[k]) : -1;
    if ((y < 0 || !merge(p, arg, y, 0, false)) && p->slots[arg].end < 2 * e)
      p->slots[arg].end = 2 * e; /* copy-back: B_k is reserved for the whole body */
    int c = k < loop->n_operands ? slot_of(p, loop->operands[k]) : -1;
    if (c < 0 || !merge(p, arg, c, 0, false)) p->slots[arg].start = 2 * s; /* copy-in */
  }
}

/* Whether op (in place, result y over operand 0 = index(X, I) {offset o}) is a row update:
 * X's only uses in op's region are that index and set_index(X, I, y) {offset o}, which
 * puts the updated row back. y may then live in X's row although X is still live: the only
 * later reader of X writes that row with y itself. */
static bool row_update(const h3_op *op) {
  const h3_op *ix = op->operands[0]->def;
  if (!ix || ix->code != H3_OP_INDEX || ix->n_operands != 2 || ix->parent != op->parent) return false;
  const h3_value *x = ix->operands[0], *i = ix->operands[1], *y = op->results[0];
  int64_t o = h3_op_attr_int(ix, "offset", 0);
  bool put_back = false;
  for (const h3_op *u = op->parent->first; u; u = u->next)
    for (int k = 0; k < u->n_operands; k++) {
      if (u->operands[k] != x || u == ix) continue;
      if (u->code == H3_OP_SET_INDEX && k == 0 && u->n_operands == 3 && u->operands[1] == i &&
          u->operands[2] == y && h3_op_attr_int(u, "offset", 0) == o)
        put_back = true;
      else
        return false;
    }
  return put_back;
}

/* Whether an operand of op other than operand j sits in slot x's buffer. set_index's row
 * (operand 2) does not count: it is a whole row of operand 0, equal to or disjoint from the
 * one it writes. */
static bool shares_buffer(const planner *p, const h3_op *op, int j, int x) {
  for (int i = 0; i < op->n_operands; i++) {
    int o = slot_of(p, op->operands[i]);
    if (i != j && o >= 0 && p->slots[o].cls == p->slots[x].cls &&
        !(op->code == H3_OP_SET_INDEX && i == 2))
      return true;
  }
  return false;
}

/* The result is written at 2p+1 so that it can join operand 0's buffer when operand 0
 * dies at the op. When it does not join, the runtime copies operand 0 into the result
 * before it reads the other operands: the result must then be live from 2p, so that no
 * operand read at 2p shares its memory. */
static void share_inplace(planner *p, h3_op *op) {
  if (op->n_operands == 0 || op->n_results == 0) return;
  int x = slot_of(p, op->operands[0]), y = slot_of(p, op->results[0]);
  if (y < 0) return;
  bool joined = false;
  if (x >= 0) {
    bool shared = shares_buffer(p, op, 0, x);
    joined = !shared && merge(p, x, y, 0, false);
    if (!joined && !shared && row_update(op)) joined = merge(p, x, y, 0, true);
  }
  if (!joined) p->slots[y].start = 2 * p->op_pos[op->id];
}

/* A call's result r of a donated callee output joins the argument of that input when the
 * argument dies at the call and no other argument shares its buffer; otherwise the result
 * is live from the call's start (the runtime copies the argument into it first). */
static void share_call(planner *p, h3_op *op) {
  const h3_graph *g = called(p, op);
  for (int r = 0; g && r < op->n_results; r++) {
    int j = donated_input(g, r), y = slot_of(p, op->results[r]);
    if (j < 0 || j >= op->n_operands || y < 0) continue;
    int x = slot_of(p, op->operands[j]);
    if (x < 0 || shares_buffer(p, op, j, x) || !merge(p, x, y, 0, false))
      p->slots[y].start = 2 * p->op_pos[op->id];
  }
}

/* ---- placement -------------------------------------------------------------------------- */
typedef struct {
  int cls;
  int64_t size, first, offset;
} buffer;

static int by_size(const void *a, const void *b) {
  const buffer *x = a, *y = b;
  if (x->size != y->size) return x->size > y->size ? -1 : 1;
  if (x->first != y->first) return x->first < y->first ? -1 : 1;
  return (x->cls > y->cls) - (x->cls < y->cls);
}

static int64_t align_up(int64_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

typedef struct {
  int64_t lo, hi;
} range;

static int by_lo(const void *a, const void *b) {
  const range *x = a, *y = b;
  return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Lowest aligned offset for buffer i that avoids the placed buffers [0, i) live with it;
 * `taken` has room for i ranges. */
static int64_t place(const planner *p, const buffer *b, int i, range *taken) {
  int n = 0;
  for (int j = 0; j < i; j++)
    if (classes_overlap(p, b[i].cls, b[j].cls))
      taken[n++] = (range){b[j].offset, b[j].offset + align_up(b[j].size)};
  qsort(taken, (size_t)n, sizeof *taken, by_lo);
  int64_t off = 0, size = align_up(b[i].size);
  for (int j = 0; j < n && taken[j].lo < off + size; j++)
    if (taken[j].hi > off) off = taken[j].hi;
  return off;
}

typedef struct {
  int64_t t, d;
} event;

static int by_time(const void *a, const void *b) {
  const event *x = a, *y = b;
  if (x->t != y->t) return x->t < y->t ? -1 : 1;
  return (x->d > y->d) - (x->d < y->d); /* ends (negative) first */
}

/* Most bytes of buffers live at one time; a buffer counts once while any member lives. */
static int64_t peak_bytes(const planner *p, const buffer *b, int n) {
  event *ev = malloc((size_t)(2 * p->n_slots + 1) * sizeof *ev);
  if (!ev) return -1;
  int ne = 0;
  for (int i = 0; i < n; i++) {
    /* union of the members' intervals, emitted as disjoint runs */
    int64_t cover_start = -1, cover_end = -2;
    for (;;) {
      int64_t best = -1;
      for (int s = b[i].cls; s >= 0; s = p->slots[s].next)
        if (p->slots[s].start > cover_end && (best < 0 || p->slots[s].start < best))
          best = p->slots[s].start;
      if (best < 0) break;
      cover_start = best;
      cover_end = best - 1;
      for (bool grew = true; grew;) {
        grew = false;
        for (int s = b[i].cls; s >= 0; s = p->slots[s].next)
          if (p->slots[s].start <= cover_end + 1 && p->slots[s].end > cover_end) {
            cover_end = p->slots[s].end;
            grew = true;
          }
      }
      ev[ne++] = (event){cover_start, b[i].size};
      ev[ne++] = (event){cover_end + 1, -b[i].size};
    }
  }
  qsort(ev, (size_t)ne, sizeof *ev, by_time);
  int64_t live = 0, peak = 0;
  for (int i = 0; i < ne; i++) {
    live += ev[i].d;
    if (live > peak) peak = live;
  }
  free(ev);
  return peak;
}

/* The donated input whose buffer class c lives in, or -1. Members of such a class sit at
 * the input's own delta (views of its rows, in-place results over them, loop slots); a
 * class where a non-view member would sit elsewhere cannot be placed (-2: offsets "at input
 * J" carry no delta). */
static int class_donor(const planner *p, int c) {
  int donor = -1;
  int64_t at = 0;
  for (int s = c; s >= 0; s = p->slots[s].next)
    if (p->slots[s].donor >= 0) donor = p->slots[s].donor, at = p->slots[s].delta;
  for (int s = c; donor >= 0 && s >= 0; s = p->slots[s].next)
    if (!p->slots[s].view && p->slots[s].delta != at) return -2;
  return donor;
}

/* ---- one graph -------------------------------------------------------------------------- */
static int reset_offsets(h3_op *op, void *ctx) {
  (void)ctx;
  for (int i = 0; i < op->n_results; i++) op->results[i]->offset = -1;
  for (int r = 0; r < op->n_regions; r++)
    for (int a = 0; a < op->regions[r].n_args; a++) op->regions[r].args[a]->offset = -1;
  return 0;
}

static h3_status plan_graph(h3_module *m, h3_graph *g, h3_pass_context *ctx, h3_diag *d) {
  planner p = {.m = m};
  buffer *bufs = NULL;
  range *taken = NULL;
  h3_status st = H3_OK;
  p.op_pos = calloc((size_t)m->next_op_id + 1, sizeof *p.op_pos);
  p.op_end = calloc((size_t)m->next_op_id + 1, sizeof *p.op_end);
  p.slot_of = malloc(((size_t)m->next_value_id + 1) * sizeof *p.slot_of);
  if (!p.op_pos || !p.op_end || !p.slot_of) goto oom;
  for (int i = 0; i <= m->next_value_id; i++) p.slot_of[i] = -1;
  h3_region_walk(&g->body, reset_offsets, NULL);
  for (int i = 0; i < g->n_inputs; i++) { /* donated inputs: written before the first op */
    g->inputs[i]->offset = -1;
    int s = h3_graph_donated_output(g, i) >= 0 ? add_slot(&p, g->inputs[i], -1, -1) : -1;
    if (s >= 0) p.slots[s].donor = i;
  }

  walk_defs(&p, &g->body);
  if (p.oom) goto oom;
  walk_uses(&p, &g->body);
  for (int i = 0; i < p.n_loops; i++) share_loop(&p, p.loops[i]);
  for (int i = 0; i < p.n_inplace; i++) share_inplace(&p, p.inplace[i]);
  for (int i = 0; i < p.n_calls; i++) share_call(&p, p.calls[i]);

  int n = 0;
  int64_t sum = 0;
  bufs = malloc((size_t)(p.n_slots + 1) * sizeof *bufs);
  if (!bufs) goto oom;
  for (int i = 0; i < p.n_slots; i++) {
    if (!p.slots[i].view) sum += h3_type_bytes(&p.slots[i].v->type);
    if (p.slots[i].cls != i) continue;
    int donor = class_donor(&p, i);
    if (donor == -2) {
      h3_diag_error(d, g->span, "update the input through index() rows or whole, not slices",
                    "memory-plan: graph '%s': a value updated in place sits at another offset "
                    "of a donated input than the input itself", g->name);
      st = H3_ERR;
      goto done;
    }
    if (donor >= 0) { /* lives in the donated input's own buffer */
      for (int s = i; s >= 0; s = p.slots[s].next)
        if (s != slot_of(&p, g->inputs[donor])) p.slots[s].v->offset = h3_offset_of_input(donor);
      continue;
    }
    buffer b = {i, 0, p.slots[i].start, 0};
    for (int s = i; s >= 0; s = p.slots[s].next) {
      int64_t top = p.slots[s].delta + h3_type_bytes(&p.slots[s].v->type);
      if (top > b.size) b.size = top;
      if (p.slots[s].start < b.first) b.first = p.slots[s].start;
    }
    bufs[n++] = b;
  }
  qsort(bufs, (size_t)n, sizeof *bufs, by_size);
  taken = malloc((size_t)(n + 1) * sizeof *taken);
  if (!taken) goto oom;
  int64_t arena = 0;
  for (int i = 0; i < n; i++) {
    bufs[i].offset = place(&p, bufs, i, taken);
    if (bufs[i].offset + align_up(bufs[i].size) > arena)
      arena = bufs[i].offset + align_up(bufs[i].size);
    for (int s = bufs[i].cls; s >= 0; s = p.slots[s].next)
      p.slots[s].v->offset = bufs[i].offset + p.slots[s].delta;
  }
  int64_t peak = peak_bytes(&p, bufs, n);
  if (peak < 0) goto oom;
  h3_graph_set_attr(m, g, h3_attr_int(m, "arena_bytes", arena));
  h3_graph_set_attr(m, g, h3_attr_int(m, "peak_bytes", peak));
  h3_pass_report(ctx,
                 "graph %s: arena %lld B, peak %lld B, buffers %d, values %d, "
                 "%lld B without reuse",
                 g->name, (long long)arena, (long long)peak, n, p.n_slots, (long long)sum);
  goto done;
oom:
  h3_diag_error(d, g->span, "free memory or use a smaller --config",
                "out of memory while planning the memory of graph '%s'", g->name);
  st = H3_ERR;
done:
  free(p.op_pos);
  free(p.op_end);
  free(p.slot_of);
  free(p.slots);
  free(p.loops);
  free(p.inplace);
  free(p.calls);
  free(bufs);
  free(taken);
  return st;
}

static h3_status memory_plan_run(h3_module *m, h3_pass_context *ctx, h3_diag *d) {
  for (int g = 0; g < m->n_graphs; g++)
    if (plan_graph(m, m->graphs[g], ctx, d) != H3_OK) return H3_ERR;
  return H3_OK;
}

const h3_pass h3_pass_memory_plan = {
    .name = "memory-plan",
    .description = "assign every activation a 256-byte aligned offset in one arena per graph, "
                   "reusing buffers by liveness",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = true,
    .requires = {NULL},
    .run = memory_plan_run,
};
