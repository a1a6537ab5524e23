/* mem_classes.c: the memory plan's slots, lifetimes and classes (mem_classes.h): which
 * values get a place, when each is live, and which share a buffer at which delta. Built
 * the same way for the `memory-plan` pass, which places the classes, and for the plan
 * reader's check of a plan's offsets (plan_check.c).
 */
#include "h3/mem_classes.h"
#include "h3/op_registry.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  h3_mem_classes *c;
  h3_module *m;
  int64_t *op_pos, *op_end; /* by op id */
  int cap_slots;
  h3_op **loops, **inplace, **calls; /* in walk order */
  int n_loops, n_inplace, n_calls;
  int64_t t;
  bool oom;
} builder;

/* ---- slots and classes ------------------------------------------------------------------ */
static int add_slot(builder *p, h3_value *v, int64_t start, int64_t end) {
  h3_mem_classes *c = p->c;
  if (c->n_slots == p->cap_slots) {
    int cap = p->cap_slots ? 2 * p->cap_slots : 64;
    h3_mem_slot *s = realloc(c->slots, (size_t)cap * sizeof *s);
    if (!s) {
      p->oom = true;
      return -1;
    }
    c->slots = s;
    p->cap_slots = cap;
  }
  int i = c->n_slots++;
  c->slots[i] = (h3_mem_slot){v, i, -1, 0, start, end, false, -1};
  c->slot_of[v->id] = i;
  return i;
}

int h3_mem_slot_of(const h3_mem_classes *c, const h3_value *v) {
  return v->id >= 0 && v->id < c->n_ids ? c->slot_of[v->id] : -1;
}

static int slot_of(const builder *p, const h3_value *v) { return h3_mem_slot_of(p->c, v); }

bool h3_mem_classes_overlap(const h3_mem_classes *c, int a, int b) {
  const h3_mem_slot *s = c->slots;
  for (int i = s[a].cls; i >= 0; i = s[i].next)
    for (int j = s[b].cls; j >= 0; j = s[j].next)
      if (s[i].start <= s[j].end && s[j].start <= s[i].end) return true;
  return false;
}

/* Puts slot b's class into slot a's so that b sits `off` bytes after a. Unless `force`,
 * refuses (returns false) when the two classes are live at the same time. Already in
 * one class: true when b already sits there. */
static bool merge(builder *p, int a, int b, int64_t off, bool force) {
  h3_mem_slot *s = p->c->slots;
  if (s[a].cls == s[b].cls) return s[b].delta == s[a].delta + off;
  if (!force && h3_mem_classes_overlap(p->c, a, b)) return false;
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
static const h3_graph *called(const builder *p, const h3_op *op) {
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

static bool push_op(builder *p, h3_op ***list, int *n, h3_op *op) {
  h3_op **l = realloc(*list, (size_t)(*n + 1) * sizeof *l);
  if (!l) {
    p->oom = true;
    return false;
  }
  *list = l;
  l[(*n)++] = op;
  return true;
}

static void walk_defs(builder *p, h3_region *r) {
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
        p->c->slots[slot_of(p, body->args[0])].end = 2 * e;
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
        p->c->slots[res].view = true;
      }
      continue;
    }
    /* an in-place op's results over operands (h3_op_inplace_operand: result 0 over operand
       0, rms_norm_rope_write's v cache); its other results (Plan B's normalised output) are
       written like any op's, never over an operand; a call's results of donated outputs are
       written like those */
    for (int i = 0; i < op->n_results; i++) {
      bool over = callee ? donated_input(callee, i) >= 0 : h3_op_inplace_operand(op, i) >= 0;
      add_slot(p, op->results[i], over ? w : 2 * pos, over ? w : 2 * pos);
    }
    if (h3_op_is_inplace(op->code)) push_op(p, &p->inplace, &p->n_inplace, op);
    if (callee) push_op(p, &p->calls, &p->n_calls, op);
  }
}

/* Read time of v by op: its position, or the end of the loop of v's region holding op. */
static int64_t use_time(const builder *p, const h3_value *v, h3_op *op) {
  h3_op *anc = h3_op_ancestor_in(op, h3_value_def_region(v));
  if (anc && anc != op && anc->code == H3_OP_LOOP) return 2 * p->op_end[anc->id];
  return 2 * p->op_pos[(anc ? anc : op)->id];
}

static void walk_uses(builder *p, h3_region *r) {
  for (h3_op *op = r->first; op; op = op->next) {
    for (int i = 0; i < op->n_operands; i++) {
      int s = slot_of(p, op->operands[i]);
      if (s < 0) continue;
      int64_t t = use_time(p, op->operands[i], op);
      if (t > p->c->slots[s].end) p->c->slots[s].end = t;
    }
    if (op->code == H3_OP_LOOP && op->n_regions == 1) walk_uses(p, &op->regions[0]);
  }
}

/* ---- side-stream windows ------------------------------------------------------------------ */
/* A run of ops marked `side` (pass side-streams) may run beside the main ops up to where the
 * executor joins it (runtime/exec.c): before the region's next op marked `join` or of control
 * flow (loop, call, branch, yield, return). Every slot live at some time of that window
 * [2 * first side op, 2 * J] lives over all of it, so no two ops that may run at once share a
 * buffer. J's in-place results (written at 2 J + 1, after the join) stay outside it, so they
 * may take the buffer of an operand that dies at J (share_inplace). */
static void widen_window(builder *p, int64_t lo, int64_t hi) {
  for (int i = 0; i < p->c->n_slots; i++) {
    h3_mem_slot *sl = &p->c->slots[i];
    if (sl->start > hi || sl->end < lo) continue;
    if (sl->start > lo) sl->start = lo;
    if (sl->end < hi) sl->end = hi;
  }
}

static void side_windows(builder *p, h3_region *r) {
  for (h3_op *op = r->first; op; op = op->next) {
    if (op->code == H3_OP_LOOP && op->n_regions == 1) side_windows(p, &op->regions[0]);
    if (!h3_op_attr(op, "side") || (op->prev && h3_op_attr(op->prev, "side"))) continue;
    h3_op *end = op;
    while (end->next && !h3_op_attr(end, "join") && !h3_op_is_control_flow(end->code)) end = end->next;
    const bool joined = h3_op_attr(end, "join") || h3_op_is_control_flow(end->code);
    widen_window(p, 2 * p->op_pos[op->id], joined ? 2 * p->op_pos[end->id] : 2 * p->op_pos[end->id] + 1);
  }
}

/* ---- sharing ---------------------------------------------------------------------------- */
static void share_loop(builder *p, h3_op *loop) {
  h3_region *body = &loop->regions[0];
  h3_op *yield = body->last;
  int64_t s = p->op_pos[loop->id], e = p->op_end[loop->id];
  for (int k = 0; k < loop->n_results && k + 1 < body->n_args; k++) {
    int arg = slot_of(p, body->args[k + 1]), res = slot_of(p, loop->results[k]);
    if (arg < 0 || res < 0) continue;
    merge(p, arg, res, 0, true);
    int y = yield && k < yield->n_operands ? slot_of(p, yield->operands[k]) : -1;
    if ((y < 0 || !merge(p, arg, y, 0, false)) && p->c->slots[arg].end < 2 * e)
      p->c->slots[arg].end = 2 * e; /* copy-back: B_k is reserved for the whole body */
    int c = k < loop->n_operands ? slot_of(p, loop->operands[k]) : -1;
    if (c < 0 || !merge(p, arg, c, 0, false)) p->c->slots[arg].start = 2 * s; /* copy-in */
  }
}

/* Whether op (in place, result y = result r over operand j = index(X, I) {offset o}) is a row
 * update: X's only uses in op's region are that index and set_index(X, I, y) {offset o},
 * which puts the updated row back. y may then live in X's row although X is still live: the
 * only later reader of X writes that row with y itself. */
static bool row_update(const h3_op *op, int j, int r) {
  const h3_op *ix = op->operands[j]->def;
  if (!ix || ix->code != H3_OP_INDEX || ix->n_operands != 2 || ix->parent != op->parent) return false;
  const h3_value *x = ix->operands[0], *i = ix->operands[1], *y = op->results[r];
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
static bool shares_buffer(const builder *p, const h3_op *op, int j, int x) {
  for (int i = 0; i < op->n_operands; i++) {
    int o = slot_of(p, op->operands[i]);
    if (i != j && o >= 0 && p->c->slots[o].cls == p->c->slots[x].cls &&
        !(op->code == H3_OP_SET_INDEX && i == 2))
      return true;
  }
  return false;
}

/* Each in-place result is written at 2p+1 so that it can join its operand's buffer when
 * that operand dies at the op. When it does not join, the runtime copies the operand into
 * the result before it reads the other operands: the result must then be live from 2p, so
 * that no operand read at 2p shares its memory. */
static void share_inplace(builder *p, h3_op *op) {
  for (int r = 0; r < op->n_results; r++) {
    int j = h3_op_inplace_operand(op, r);
    int x = j >= 0 ? slot_of(p, op->operands[j]) : -1, y = slot_of(p, op->results[r]);
    if (j < 0 || y < 0) continue;
    bool joined = false;
    if (x >= 0) {
      bool shared = shares_buffer(p, op, j, x);
      joined = !shared && merge(p, x, y, 0, false);
      if (!joined && !shared && row_update(op, j, r)) joined = merge(p, x, y, 0, true);
    }
    if (!joined) p->c->slots[y].start = 2 * p->op_pos[op->id];
  }
}

/* A call's result r of a donated callee output joins the argument of that input when the
 * argument dies at the call and no other argument shares its buffer; otherwise the result
 * is live from the call's start (the runtime copies the argument into it first). */
static void share_call(builder *p, h3_op *op) {
  const h3_graph *g = called(p, op);
  for (int r = 0; g && r < op->n_results; r++) {
    int j = donated_input(g, r), y = slot_of(p, op->results[r]);
    if (j < 0 || j >= op->n_operands || y < 0) continue;
    int x = slot_of(p, op->operands[j]);
    if (x < 0 || shares_buffer(p, op, j, x) || !merge(p, x, y, 0, false))
      p->c->slots[y].start = 2 * p->op_pos[op->id];
  }
}


int h3_mem_class_donor(const h3_mem_classes *c, int cls) {
  const h3_mem_slot *sl = c->slots;
  int donor = -1;
  int64_t at = 0;
  for (int s = cls; s >= 0; s = sl[s].next)
    if (sl[s].donor >= 0) donor = sl[s].donor, at = sl[s].delta;
  for (int s = cls; donor >= 0 && s >= 0; s = sl[s].next)
    if (!sl[s].view && sl[s].delta != at) return -2;
  return donor;
}

/* ---- one graph -------------------------------------------------------------------------- */
void h3_mem_classes_free(h3_mem_classes *c) {
  free(c->slots);
  free(c->slot_of);
  memset(c, 0, sizeof *c);
}

h3_status h3_mem_classes_build(h3_mem_classes *c, h3_module *m, h3_graph *g) {
  memset(c, 0, sizeof *c);
  builder p = {.c = c, .m = m};
  c->n_ids = m->next_value_id;
  p.op_pos = calloc((size_t)m->next_op_id + 1, sizeof *p.op_pos);
  p.op_end = calloc((size_t)m->next_op_id + 1, sizeof *p.op_end);
  c->slot_of = malloc(((size_t)m->next_value_id + 1) * sizeof *c->slot_of);
  p.oom = !p.op_pos || !p.op_end || !c->slot_of;
  for (int i = 0; !p.oom && i <= m->next_value_id; i++) c->slot_of[i] = -1;
  for (int i = 0; !p.oom && i < g->n_inputs; i++) { /* donated: written before the first op */
    int s = h3_graph_donated_output(g, i) >= 0 ? add_slot(&p, g->inputs[i], -1, -1) : -1;
    if (s >= 0) c->slots[s].donor = i;
  }
  if (!p.oom) walk_defs(&p, &g->body);
  if (!p.oom) {
    walk_uses(&p, &g->body);
    side_windows(&p, &g->body);
    for (int i = 0; i < p.n_loops; i++) share_loop(&p, p.loops[i]);
    for (int i = 0; i < p.n_inplace; i++) share_inplace(&p, p.inplace[i]);
    for (int i = 0; i < p.n_calls; i++) share_call(&p, p.calls[i]);
  }
  free(p.op_pos);
  free(p.op_end);
  free(p.loops);
  free(p.inplace);
  free(p.calls);
  if (p.oom) h3_mem_classes_free(c);
  return p.oom ? H3_ERR : H3_OK;
}
