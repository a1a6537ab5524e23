/* memory_plan_test.c: checks memory-plan against an independent oracle.
 *
 * The oracle is a memory simulator: it executes a planned graph in program order on an
 * arena of byte tags. Every op first checks that each planned operand's bytes still hold
 * the tag its value was written with, then writes a fresh tag over each result's bytes
 * (a view placed inside its source writes nothing: it reads the source's bytes; an
 * `index` view may read any row of its source). Loops run their body up to 3 times and
 * move the yield into the carried buffers as a parallel assignment, as the runtime does.
 * Branches of pass side-streams also run in the schedules of sim_region (the side run
 * moved past each main op of its window, and the window's main ops moved past each side
 * op). A plan that lets a write clobber a value still needed fails a check.
 *
 * Cases: a chain (reuse must bring the arena to two buffers, well below the sum of all
 * values), loop-carried aliasing, a copy-back slot and a swap of two slots, in-place
 * updates with and without a later reader, views, and 40 random graphs with loops,
 * views and in-place ops. With IR files as arguments, it checks their plans instead. Every
 * plan must also pass the plan reader's check of offsets (h3_plan_check_memory).
 */
#include "h3/op_registry.h"
#include "h3/passes.h"
#include "h3/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(c, ...)                                                                              \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                         \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static const h3_span sp = {0};

/* ---- the simulator ---------------------------------------------------------------------- */
typedef struct {
  int *bytes; /* tag per arena byte */
  int64_t arena;
  int *tag;         /* by value id: the tag its bytes must hold */
  int64_t *lo, *hi; /* by value id: the bytes a read checks */
  int next_tag;
  const char *what;
  int errors;
  int late, cut; /* the schedule of the branches (sim_region) */
} sim;

static bool planned(const h3_value *v) { return v->offset >= 0; }

static void sim_read(sim *s, const h3_value *v, const h3_op *op) {
  if (!planned(v)) return;
  for (int64_t b = s->lo[v->id]; b < s->hi[v->id]; b++)
    if (s->bytes[b] != s->tag[v->id]) {
      if (s->errors++ < 3)
        fprintf(stderr, "FAIL %s: %s reads value #%d at byte %lld: clobbered\n", s->what,
                h3_opcode_name(op->code), v->id, (long long)b);
      return;
    }
}

static void sim_write(sim *s, const h3_value *v) {
  if (!planned(v)) return;
  int64_t n = h3_type_bytes(&v->type);
  if (v->offset + n > s->arena) {
    if (s->errors++ < 3) fprintf(stderr, "FAIL %s: value #%d outside the arena\n", s->what, v->id);
    return;
  }
  int t = ++s->next_tag;
  for (int64_t b = v->offset; b < v->offset + n; b++) s->bytes[b] = t;
  s->tag[v->id] = t;
  s->lo[v->id] = v->offset;
  s->hi[v->id] = v->offset + n;
}

/* A view result inside its source's bytes reads the source's tag. */
static bool sim_view(sim *s, const h3_op *op) {
  const h3_value *src = op->operands[0], *res = op->results[0];
  if (!planned(src) || !planned(res)) return false;
  int64_t n = h3_type_bytes(&res->type);
  if (res->offset < s->lo[src->id] || res->offset + n > s->hi[src->id]) return false;
  s->tag[res->id] = s->tag[src->id];
  s->lo[res->id] = op->code == H3_OP_INDEX ? s->lo[src->id] : res->offset;
  s->hi[res->id] = op->code == H3_OP_INDEX ? s->hi[src->id] : res->offset + n;
  return true;
}

static void sim_region(sim *s, const h3_region *r);

static void sim_loop(sim *s, const h3_op *loop) {
  const h3_region *body = &loop->regions[0];
  for (int i = 0; i < loop->n_operands; i++) sim_read(s, loop->operands[i], loop);
  for (int k = 1; k < body->n_args; k++) sim_write(s, body->args[k]);
  int64_t count = h3_op_attr_int(loop, "count", 0);
  int iters = count < 3 ? (int)count : 3;
  for (int it = 0; it < iters; it++) {
    sim_write(s, body->args[0]);
    sim_region(s, body);
    const h3_op *y = body->last;
    for (int k = 0; k < y->n_operands; k++) sim_read(s, y->operands[k], y);
    for (int k = 1; k < body->n_args; k++)
      sim_write(s, it + 1 < iters ? body->args[k] : loop->results[k - 1]);
  }
}

static void sim_op(sim *s, const h3_op *op) {
  if (op->code == H3_OP_LOOP) {
    sim_loop(s, op);
    return;
  }
  for (int i = 0; i < op->n_operands; i++) sim_read(s, op->operands[i], op);
  if ((op->code == H3_OP_RESHAPE || op->code == H3_OP_SLICE || op->code == H3_OP_INDEX) &&
      sim_view(s, op))
    return;
  for (int i = 0; i < op->n_results; i++) sim_write(s, op->results[i]);
}

static bool is_side(const h3_op *op) { return op && h3_op_attr_int(op, "side", 0); }

/* The window of the branch whose side run starts at op: the run ends at *side_end (ns ops),
 * then nm main ops until *join, where the executor joins it (an op marked `join`, control
 * flow, the region's end). */
static void branch_window(const h3_op *op, const h3_op **side_end, const h3_op **join, int *ns, int *nm) {
  *ns = *nm = 0;
  for (*side_end = op; is_side(*side_end); *side_end = (*side_end)->next) ++*ns;
  for (*join = *side_end; !h3_op_attr_int(*join, "join", 0) && !h3_op_is_control_flow((*join)->code);
       *join = (*join)->next)
    ++*nm;
}

/* Runs ops [from, to) of a region in order (the yield is read by the loop). */
static void sim_span(sim *s, const h3_op *from, const h3_op *to) {
  for (const h3_op *op = from; op != to; op = op->next)
    if (op->code != H3_OP_YIELD) sim_op(s, op);
}

/* A region's ops in one schedule of its branches (pass side-streams: a run of `side` ops may
 * run beside the main ops that follow it up to its join). s->late = 0: program order; else
 * with c = s->cut, family s->late = 1: the side run after the first c main ops of its window,
 * family 2: the first c side ops, then the window's main ops, then the other side ops. Over
 * every c, a buffer that a side op and a main op of its window share while one of them still
 * needs it is clobbered in some schedule. */
static void sim_region(sim *s, const h3_region *r) {
  for (const h3_op *op = r->first; op;) {
    if (!s->late || !is_side(op)) {
      if (op->code != H3_OP_YIELD) sim_op(s, op);
      op = op->next;
      continue;
    }
    const h3_op *side_end, *join;
    int ns, nm;
    branch_window(op, &side_end, &join, &ns, &nm);
    const h3_op *cut = s->late == 1 ? side_end : op;
    for (int i = 0; i < (s->late == 1 ? nm : ns) && i < s->cut; i++) cut = cut->next;
    if (s->late == 1) {
      sim_span(s, side_end, cut);
      sim_span(s, op, side_end);
      sim_span(s, cut, join);
    } else {
      sim_span(s, op, cut);
      sim_span(s, side_end, join);
      sim_span(s, cut, side_end);
    }
    op = join;
  }
}

/* The most ops of a branch or of the main ops beside it in any region of r (0: no branch). */
static int widest_window(const h3_region *r) {
  int most = 0;
  for (const h3_op *op = r->first; op; op = op->next) {
    for (int i = 0; i < op->n_regions; i++) {
      int w = widest_window(&op->regions[i]);
      if (w > most) most = w;
    }
    if (!is_side(op) || is_side(op->prev)) continue;
    const h3_op *side_end, *join;
    int ns, nm;
    branch_window(op, &side_end, &join, &ns, &nm);
    if (ns > most) most = ns;
    if (nm > most) most = nm;
  }
  return most;
}

/* Plans m and runs the simulator over each graph. Returns graph 0's arena size. */
static int64_t plan_and_simulate(h3_module *m, const char *what) {
  h3_diag d;
  h3_diag_init(&d);
  h3_pass_options o = h3_pass_options_default();
  o.passes = "verify,memory-plan";
  o.verify_each = true;
  if (h3_pass_pipeline_run(m, &o, &d) != H3_OK) {
    h3_diag_print(&d, stderr);
    CHECK(0, "%s: memory-plan failed", what);
    h3_diag_free(&d);
    return -1;
  }
  if (h3_plan_check_memory(m, &d) != H3_OK) { /* the plan reader accepts every plan */
    h3_diag_print(&d, stderr);
    CHECK(0, "%s: the plan reader's check refuses the memory plan", what);
  }
  h3_diag_free(&d);
  int64_t arena0 = -1;
  for (int g = 0; g < m->n_graphs; g++) {
    const h3_attr *a = h3_graph_attr(m->graphs[g], "arena_bytes");
    const h3_attr *p = h3_graph_attr(m->graphs[g], "peak_bytes");
    CHECK(a && p && p->i <= a->i, "%s: arena_bytes/peak_bytes missing or peak > arena", what);
    if (!a) continue;
    if (g == 0) arena0 = a->i;
    const int widest = widest_window(&m->graphs[g]->body);
    for (int sched = 0; sched < 1 + 2 * (widest + 1); sched++) {
      sim s = {calloc((size_t)a->i + 1, sizeof(int)),
               a->i,
               calloc((size_t)m->next_value_id, sizeof(int)),
               calloc((size_t)m->next_value_id, sizeof(int64_t)),
               calloc((size_t)m->next_value_id, sizeof(int64_t)),
               0,
               what,
               0,
               sched ? 1 + (sched - 1) % 2 : 0,
               sched ? (sched - 1) / 2 : 0};
      if (!s.bytes || !s.tag || !s.lo || !s.hi) {
        CHECK(0, "out of memory");
        return -1;
      }
      sim_region(&s, &m->graphs[g]->body);
      for (int i = 0; i < m->graphs[g]->body.last->n_operands; i++)
        sim_read(&s, m->graphs[g]->body.last->operands[i], m->graphs[g]->body.last);
      failures += s.errors;
      free(s.bytes);
      free(s.tag);
      free(s.lo);
      free(s.hi);
    }
  }
  return arena0;
}

/* ---- building --------------------------------------------------------------------------- */
static h3_value *build(h3_builder *b, h3_opcode code, int n, h3_value **in, int n_attrs,
                       const h3_attr *attrs) {
  h3_diag d;
  h3_diag_init(&d);
  h3_op *op = h3_build_op(b, code, n, in, n_attrs, attrs, 0, &d);
  if (!op) h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  return op ? op->results[0] : NULL;
}

static h3_value *un(h3_builder *b, h3_opcode code, h3_value *x) {
  return build(b, code, 1, &x, 0, NULL);
}

static h3_value *bin(h3_builder *b, h3_opcode code, h3_value *x, h3_value *y) {
  h3_value *in[2] = {x, y};
  return build(b, code, 2, in, 0, NULL);
}

static void finish(h3_module *m, h3_graph *g, h3_builder *b, int n, h3_value **outs) {
  h3_build_op_typed(b, H3_OP_RETURN, n, outs, 0, NULL, 0, NULL, 0);
  for (int i = 0; i < n; i++) {
    char name[16];
    snprintf(name, sizeof name, "out%d", i);
    h3_graph_add_output(m, g, name);
  }
}

/* A loop with one carried value whose body is made by `body_fn`. */
typedef h3_value *(*body_fn)(h3_builder *b, h3_value *index, h3_value *carried, void *ctx);

static h3_op *make_loop(h3_builder *b, h3_value *init, int64_t count, body_fn fn, void *ctx) {
  h3_attr a = h3_attr_int(b->m, "count", count);
  h3_type t = init->type;
  h3_op *loop = h3_build_op_typed(b, H3_OP_LOOP, 1, &init, 1, &a, 1, &t, 1);
  h3_region *body = &loop->regions[0];
  h3_value *i = h3_region_add_arg(b->m, body, h3_type_make(H3_I32, 0, NULL), "i", sp);
  h3_value *c = h3_region_add_arg(b->m, body, t, "c", sp);
  h3_builder bb = {b->m, body, NULL, sp};
  h3_value *y = fn(&bb, i, c, ctx);
  h3_build_op_typed(&bb, H3_OP_YIELD, 1, &y, 0, NULL, 0, NULL, 0);
  return loop;
}

/* ---- fixed cases ------------------------------------------------------------------------ */
static void test_chain(void) {
  h3_module *m = h3_module_new("chain", "test");
  h3_graph *g = h3_module_add_graph(m, "g", H3_GRAPH_FUNCTION, sp);
  int64_t dims[2] = {64, 64}; /* 16 KiB of f32 */
  h3_value *v = h3_graph_add_input(m, g, "x", h3_type_make(H3_F32, 2, dims), sp);
  h3_builder b = {m, &g->body, NULL, sp};
  int64_t sum = 0;
  for (int i = 0; i < 10; i++) {
    v = un(&b, i % 2 ? H3_OP_EXP : H3_OP_NEG, v);
    sum += h3_type_bytes(&v->type);
  }
  finish(m, g, &b, 1, &v);
  int64_t arena = plan_and_simulate(m, "chain");
  /* each value dies when the next is written: two 16 KiB buffers suffice */
  CHECK(arena == 2 * 16384, "chain: arena %lld, expected %d", (long long)arena, 2 * 16384);
  CHECK(arena < sum, "chain: reuse did not lower the arena below the sum %lld", (long long)sum);
  CHECK(h3_graph_attr(g, "peak_bytes")->i == 2 * 16384, "chain: peak");
  h3_module_free(m);
}

static h3_value *body_exp_add(h3_builder *b, h3_value *i, h3_value *c, void *ctx) {
  (void)i;
  return bin(b, H3_OP_ADD, un(b, H3_OP_EXP, c), (h3_value *)ctx);
}

static void test_loop_carried(void) {
  h3_module *m = h3_module_new("loop", "test");
  h3_graph *g = h3_module_add_graph(m, "g", H3_GRAPH_FUNCTION, sp);
  int64_t dims[2] = {16, 32};
  h3_value *x = h3_graph_add_input(m, g, "x", h3_type_make(H3_F32, 2, dims), sp);
  h3_builder b = {m, &g->body, NULL, sp};
  h3_value *w = un(&b, H3_OP_NEG, x);
  h3_value *init = un(&b, H3_OP_EXP, x);
  h3_op *loop = make_loop(&b, init, 5, body_exp_add, w);
  h3_value *out = un(&b, H3_OP_TANH, loop->results[0]);
  finish(m, g, &b, 1, &out);
  plan_and_simulate(m, "loop-carried");
  h3_region *body = &loop->regions[0];
  h3_value *yielded = body->last->operands[0];
  int64_t off = loop->results[0]->offset;
  CHECK(off >= 0 && body->args[1]->offset == off && yielded->offset == off && init->offset == off,
        "loop slot: input %lld arg %lld yield %lld result %lld should share one buffer",
        (long long)init->offset, (long long)body->args[1]->offset, (long long)yielded->offset,
        (long long)off);
  CHECK(w->offset != off, "a value used in every iteration must not share the slot");
  h3_module_free(m);
}

/* loop(a, s) { a2 = exp(a); s2 = add(s, a); yield swap ? (s2, a2) : (a2, s2) }: a is
 * read after a2 is written, so a2 cannot take a's slot (copy-back); with `swap` the two
 * slots trade values every iteration (a parallel assignment). */
static void test_loop_two_slots(bool swap) {
  const char *what = swap ? "loop swapping two slots" : "loop with a copy-back slot";
  h3_module *m = h3_module_new("loop2", "test");
  h3_graph *g = h3_module_add_graph(m, "g", H3_GRAPH_FUNCTION, sp);
  int64_t dims[2] = {8, 32};
  h3_type t = h3_type_make(H3_F32, 2, dims);
  h3_value *x = h3_graph_add_input(m, g, "x", t, sp);
  h3_builder b = {m, &g->body, NULL, sp};
  h3_value *init[2] = {un(&b, H3_OP_EXP, x), un(&b, H3_OP_NEG, x)};
  h3_attr a = h3_attr_int(m, "count", 4);
  h3_type types[2] = {t, t};
  h3_op *loop = h3_build_op_typed(&b, H3_OP_LOOP, 2, init, 1, &a, 2, types, 1);
  h3_region *body = &loop->regions[0];
  h3_region_add_arg(m, body, h3_type_make(H3_I32, 0, NULL), "i", sp);
  h3_value *av = h3_region_add_arg(m, body, t, "a", sp),
           *sv = h3_region_add_arg(m, body, t, "s", sp);
  h3_builder bb = {m, body, NULL, sp};
  h3_value *a2 = un(&bb, H3_OP_EXP, av), *s2 = bin(&bb, H3_OP_ADD, sv, av);
  h3_value *y[2] = {swap ? s2 : a2, swap ? a2 : s2};
  h3_build_op_typed(&bb, H3_OP_YIELD, 2, y, 0, NULL, 0, NULL, 0);
  h3_value *out = bin(&b, H3_OP_MUL, loop->results[0], loop->results[1]);
  finish(m, g, &b, 1, &out);
  plan_and_simulate(m, what);
  CHECK(av->offset == loop->results[0]->offset && sv->offset == loop->results[1]->offset,
        "%s: region args and results share their slots", what);
  if (!swap) CHECK(a2->offset != av->offset, "%s: a2 must not overwrite a while s2 reads it", what);
  h3_module_free(m);
}

static void test_inplace_and_views(bool read_after) {
  h3_module *m = h3_module_new("inplace", "test");
  h3_graph *g = h3_module_add_graph(m, "g", H3_GRAPH_FUNCTION, sp);
  int64_t dims[2] = {8, 64}, row[1] = {64};
  h3_value *x = h3_graph_add_input(m, g, "x", h3_type_make(H3_F32, 2, dims), sp);
  h3_value *r = h3_graph_add_input(m, g, "r", h3_type_make(H3_F32, 1, row), sp);
  h3_value *i = h3_graph_add_input(m, g, "i", h3_type_make(H3_I32, 0, NULL), sp);
  h3_builder b = {m, &g->body, NULL, sp};
  h3_value *cache = un(&b, H3_OP_EXP, x);
  h3_value *in[3] = {cache, i, r};
  h3_value *upd = build(&b, H3_OP_SET_INDEX, 3, in, 0, NULL);
  h3_value *outs[2] = {upd, NULL};
  int n_out = 1;
  if (read_after) outs[n_out++] = un(&b, H3_OP_NEG, cache);
  /* views of upd: reshape, contiguous slice (rows 2..5), strided slice (cols 0..16) */
  int64_t shape[1] = {8 * 64};
  h3_attr rs = h3_attr_ints(m, "shape", 1, shape);
  h3_value *flat = build(&b, H3_OP_RESHAPE, 1, &upd, 1, &rs);
  h3_attr s0[3] = {h3_attr_int(m, "axis", 0), h3_attr_int(m, "start", 2), h3_attr_int(m, "len", 3)};
  h3_value *rows = build(&b, H3_OP_SLICE, 1, &upd, 3, s0);
  h3_attr s1[3] = {h3_attr_int(m, "axis", 1), h3_attr_int(m, "start", 0),
                   h3_attr_int(m, "len", 16)};
  h3_value *cols = build(&b, H3_OP_SLICE, 1, &upd, 3, s1);
  h3_value *f2 = un(&b, H3_OP_EXP, flat), *r2 = un(&b, H3_OP_EXP, rows),
           *c2 = un(&b, H3_OP_EXP, cols);
  h3_value *all[5] = {outs[0], f2, r2, c2, outs[1]};
  finish(m, g, &b, n_out + 3, all);
  const char *what = read_after ? "in-place with a later reader" : "in-place";
  plan_and_simulate(m, what);
  if (read_after)
    CHECK(upd->offset != cache->offset, "%s: the update must not overwrite a live cache", what);
  else
    CHECK(upd->offset == cache->offset, "%s: the update should reuse the dying cache", what);
  CHECK(flat->offset == upd->offset, "%s: reshape is a view", what);
  CHECK(rows->offset == upd->offset + 2 * 64 * 4, "%s: a row slice is a view at +512", what);
  CHECK(cols->offset % 256 == 0 &&
            (cols->offset >= upd->offset + 8 * 64 * 4 || cols->offset + 8 * 16 * 4 <= upd->offset),
        "%s: a column slice needs its own buffer", what);
  CHECK(x->offset == -1 && r->offset == -1, "%s: graph inputs are not in the arena", what);
  h3_module_free(m);
}

/* ---- random graphs ---------------------------------------------------------------------- */
static uint64_t rng = 0x2545f4914f6cdd1dull;
static int rnd(int n) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return (int)(((rng * 2685821657736338717ull) >> 33) % (uint64_t)n);
}

typedef struct {
  h3_value *pool[256];
  int n;
  h3_value *outer; /* a value of the enclosing region, read in every iteration */
} gen;

static h3_value *random_ops(h3_builder *b, gen *g, int count, h3_value *index);

static h3_value *random_body(h3_builder *b, h3_value *i, h3_value *c, void *ctx) {
  gen inner = {{c, ((gen *)ctx)->outer}, 2, NULL};
  return random_ops(b, &inner, 2 + rnd(5), i);
}

/* Appends `count` random ops reading recent pool values; returns the last value. */
static h3_value *random_ops(h3_builder *b, gen *g, int count, h3_value *index) {
  static const h3_opcode un_ops[] = {H3_OP_EXP, H3_OP_NEG, H3_OP_TANH};
  static const h3_opcode bin_ops[] = {H3_OP_ADD, H3_OP_MUL, H3_OP_SUB};
  for (int k = 0; k < count && g->n < 250; k++) {
    h3_value *a = g->pool[g->n - 1 - rnd(g->n < 6 ? g->n : 6)];
    h3_value *c = g->pool[g->n - 1 - rnd(g->n)];
    h3_value *v = NULL;
    int kind = rnd(10);
    if (kind < 4) {
      v = bin(b, bin_ops[rnd(3)], a, c);
    } else if (kind < 7) {
      v = un(b, un_ops[rnd(3)], a);
    } else if (kind == 7 && index) { /* a[i] = c[i] */
      h3_value *in2[2] = {c, index};
      h3_value *rowv = build(b, H3_OP_INDEX, 2, in2, 0, NULL);
      h3_value *in3[3] = {a, index, rowv};
      v = rowv ? build(b, H3_OP_SET_INDEX, 3, in3, 0, NULL) : NULL;
    } else if (kind == 8 && !index) {
      g->outer = a;
      v = make_loop(b, c, 1 + rnd(4), random_body, g)->results[0];
    } else {
      int64_t dims[3] = {2, a->type.dims[0] / 2, a->type.dims[1]};
      h3_attr rs = h3_attr_ints(b->m, "shape", 3, dims);
      h3_value *r3 = build(b, H3_OP_RESHAPE, 1, &a, 1, &rs);
      int64_t back[2] = {a->type.dims[0], a->type.dims[1]};
      h3_attr rb = h3_attr_ints(b->m, "shape", 2, back);
      v = r3 ? un(b, H3_OP_EXP, build(b, H3_OP_RESHAPE, 1, &r3, 1, &rb)) : NULL;
    }
    if (!v) return NULL;
    g->pool[g->n++] = v;
  }
  return g->pool[g->n - 1];
}

static void test_random(int seed) {
  char what[32];
  snprintf(what, sizeof what, "random graph %d", seed);
  h3_module *m = h3_module_new("random", "test");
  h3_graph *gr = h3_module_add_graph(m, "g", H3_GRAPH_FUNCTION, sp);
  int64_t dims[2] = {4 + 2 * rnd(4), 8 + 8 * rnd(4)};
  h3_value *x = h3_graph_add_input(m, gr, "x", h3_type_make(H3_F32, 2, dims), sp);
  h3_builder b = {m, &gr->body, NULL, sp};
  gen g = {{x}, 1, NULL};
  g.pool[g.n++] = un(&b, H3_OP_EXP, x);
  h3_value *last = random_ops(&b, &g, 10 + rnd(30), NULL);
  CHECK(last != NULL, "%s: build failed", what);
  if (!last) {
    h3_module_free(m);
    return;
  }
  h3_value *outs[2] = {last, g.pool[1 + rnd(g.n - 1)]};
  finish(m, gr, &b, 2, outs);
  plan_and_simulate(m, what);
  h3_module_free(m);
}

/* Runs the default pipeline on an IR text file, then the simulator on every graph. */
static void test_file(const char *path) {
  h3_diag d;
  h3_diag_init(&d);
  size_t len = 0;
  char *text = h3_read_file(path, &len, &d);
  h3_module *m = text ? h3_module_parse(path, text, len, &d) : NULL;
  h3_pass_options o = h3_pass_options_default();
  o.verify_each = true;
  o.disabled = "memory-plan"; /* plan_and_simulate runs it */
  if (!m || h3_pass_pipeline_run(m, &o, &d) != H3_OK) {
    h3_diag_print(&d, stderr);
    CHECK(0, "%s: could not read or optimise", path);
  } else {
    plan_and_simulate(m, path);
  }
  if (m) h3_module_free(m);
  free(text);
  h3_diag_free(&d);
}

/* With arguments: simulate the plans of those IR files (e.g. a model dumped by
 * `h3c opt`); without: the built-in cases. */
int main(int argc, char **argv) {
  if (argc > 1) {
    for (int i = 1; i < argc; i++) test_file(argv[i]);
    if (failures) fprintf(stderr, "%d failures\n", failures);
    return failures ? 1 : 0;
  }
  test_chain();
  test_loop_carried();
  test_loop_two_slots(false);
  test_loop_two_slots(true);
  test_inplace_and_views(false);
  test_inplace_and_views(true);
  for (int seed = 0; seed < 40; seed++) test_random(seed);
  if (failures) fprintf(stderr, "%d failures\n", failures);
  return failures ? 1 : 0;
}
