/* attention_schedule.c: the static (step, block) schedule of the `attention-backend` pass
 * (attention_schedule.h; docs/models/accelerations.md §5). Steps before dense_steps run the
 * dense backend in every block; from dense_steps on, blocks before dense_layers run the dense
 * backend and the others sol. Both stay loops: the sampling loop (or Spectrum's segment
 * holding step dense_steps) is split into [.., dense_steps) and [dense_steps, ..), the
 * later step loops call clones `G.sol` of the step graphs, and in those a trunk loop holding
 * block dense_layers is split there into a dense-backend loop and a `.sol` loop.
 */
#include "h3/rewrite.h"

#include "attention_schedule.h"
#include "pass_internal.h"
#include "spectrum.h"

#include <string.h>

enum { MAX_GRAPHS = 64 };

typedef struct {
  h3_module *m;
  const h3_att_options *o;
  h3_diag *d;
  h3_att_result *r;
  const h3_graph *from[MAX_GRAPHS]; /* graphs reaching the stack -> their `.sol` clone */
  h3_graph *to[MAX_GRAPHS];
  const h3_graph *dense_done[MAX_GRAPHS]; /* graphs already given the dense backend */
  int n_to, n_dense;
} sched;

/* The block that iteration 0 of trunk loop `t` runs: the offset of its counter's index. */
static int64_t first_block(const h3_op *t) {
  const h3_region *r = &t->regions[0];
  for (const h3_op *op = r->first; op; op = op->next)
    if ((op->code == H3_OP_INDEX || op->code == H3_OP_SET_INDEX) && op->operands[1] == r->args[0])
      return h3_op_attr_int(op, "offset", 0);
  return 0;
}

/* The number of blocks of the stack: the end of the furthest trunk loop in region r. */
static int64_t blocks(const h3_region *r) {
  int64_t n = 0;
  for (const h3_op *op = r->first; op; op = op->next) {
    int64_t e = h3_loop_is_trunk(op) ? first_block(op) + h3_op_attr_int(op, "count", 0) : 0;
    for (int i = 0; i < op->n_regions; i++) {
      int64_t inner = blocks(&op->regions[i]);
      e = inner > e ? inner : e;
    }
    n = e > n ? e : n;
  }
  return n;
}

/* The attention ops of region r (nested regions too) become `kind`. */
static h3_status set_region(sched *s, h3_region *r, h3_att_kind kind) {
  for (h3_op *op = r->first; op; op = op->next) {
    for (int i = 0; i < op->n_regions; i++)
      if (set_region(s, &op->regions[i], kind) != H3_OK) return H3_ERR;
    if (op->code != H3_OP_ATTENTION) continue;
    if (h3_att_set_kind(s->m, op, kind, s->o, s->d) != H3_OK) return H3_ERR;
    s->r->count[kind]++;
  }
  return H3_OK;
}

/* The trunk loops of region r (at any depth) get the dense backend (sol = false) or, for
 * the later steps (sol = true), the dense backend before block dense_layers and sol from it. */
static h3_status trunks(sched *s, h3_region *r, bool sol) {
  for (h3_op *op = r->first; op; op = op->next) {
    if (!h3_loop_is_trunk(op)) {
      for (int i = 0; i < op->n_regions; i++)
        if (trunks(s, &op->regions[i], sol) != H3_OK) return H3_ERR;
      continue;
    }
    int64_t a = first_block(op), n = h3_op_attr_int(op, "count", 0), cut = s->o->dense_layers - a;
    h3_op *rest = NULL;
    if (sol && cut > 0 && cut < n) {
      const char *l = h3_arena_printf(&s->m->arena, "%s.sol", h3_op_attr_string(op, "label", ""));
      if (!l || !(rest = h3_loop_split(s->m, op, cut, l, s->d))) return H3_ERR;
    }
    if (set_region(s, &op->regions[0], !sol || cut > 0 ? s->o->dense : H3_ATT_SOL) != H3_OK)
      return H3_ERR;
    if (!rest) continue;
    if (set_region(s, &rest->regions[0], H3_ATT_SOL) != H3_OK) return H3_ERR;
    op = rest;
  }
  return H3_OK;
}

static h3_graph *callee_of(const sched *s, const h3_op *op, const char *key) {
  return op->code == H3_OP_CALL || op->code == H3_OP_BRANCH
             ? h3_module_graph(s->m, h3_op_attr_string(op, key, ""))
             : NULL;
}

static h3_status too_many(sched *s) {
  h3_diag_error(s->d, (h3_span){0}, "call the block stack from fewer graphs",
                "attention-backend: more than %d graphs reach the block stack", MAX_GRAPHS);
  return H3_ERR;
}

static const char *const CALLEE_KEYS[] = {"callee", "then_callee", "else_callee"};

/* Whether region r (or a graph it calls) holds a trunk loop. */
static bool reaches(const sched *s, const h3_region *r, int depth) {
  for (const h3_op *op = r->first; op && depth < 16; op = op->next) {
    if (h3_loop_is_trunk(op)) return true;
    for (int i = 0; i < op->n_regions; i++)
      if (reaches(s, &op->regions[i], depth)) return true;
    for (int k = 0; k < 3; k++) {
      h3_graph *g = callee_of(s, op, CALLEE_KEYS[k]);
      if (g && reaches(s, &g->body, depth + 1)) return true;
    }
  }
  return false;
}

static h3_graph *variant(sched *s, const h3_graph *g);

/* The callees of region r's ops that reach the stack: given the dense backend in place
 * (sol = false, once per graph) or replaced by their `.sol` clones (sol = true). */
static h3_status callees(sched *s, h3_region *r, bool sol) {
  for (h3_op *op = r->first; op; op = op->next) {
    for (int i = 0; i < op->n_regions; i++)
      if (callees(s, &op->regions[i], sol) != H3_OK) return H3_ERR;
    for (int k = 0; k < 3; k++) {
      h3_graph *g = callee_of(s, op, CALLEE_KEYS[k]);
      if (!g || !reaches(s, &g->body, 0)) continue;
      if (sol) {
        h3_graph *v = variant(s, g);
        if (!v) return H3_ERR;
        h3_op_set_attr(s->m, op, h3_attr_string(s->m, CALLEE_KEYS[k], v->name));
        continue;
      }
      bool done = false;
      for (int i = 0; i < s->n_dense; i++) done |= s->dense_done[i] == g;
      if (done) continue;
      if (s->n_dense == MAX_GRAPHS) return too_many(s);
      s->dense_done[s->n_dense++] = g;
      if (trunks(s, &g->body, false) != H3_OK || callees(s, &g->body, false) != H3_OK) return H3_ERR;
    }
  }
  return H3_OK;
}

/* The `.sol` clone of g (made once): its trunk loops split, its callees' clones called. */
static h3_graph *variant(sched *s, const h3_graph *g) {
  for (int i = 0; i < s->n_to; i++)
    if (s->from[i] == g) return s->to[i];
  h3_value_map vm;
  char name[200];
  snprintf(name, sizeof name, "%s.sol", g->name);
  if (s->n_to == MAX_GRAPHS) return too_many(s), NULL;
  if (h3_value_map_init(&vm, s->m) != H3_OK) return h3_skip_oom(s->d, "attention-backend"), NULL;
  h3_graph *v = h3_graph_clone(s->m, &vm, g, h3_graph_fresh_name(s->m, name));
  h3_value_map_free(&vm);
  if (!v) return h3_skip_oom(s->d, "attention-backend"), NULL;
  s->from[s->n_to] = g;
  s->to[s->n_to++] = v;
  return trunks(s, &v->body, true) == H3_OK && callees(s, &v->body, true) == H3_OK ? v : NULL;
}

static bool calls(const h3_op *loop) {
  for (const h3_op *op = loop->regions[0].first; op; op = op->next)
    if (op->code == H3_OP_CALL || op->code == H3_OP_BRANCH) return true;
  return false;
}

static int64_t step_count(const h3_graph *p) {
  int64_t n = 0;
  for (const h3_op *op = p->body.first; op; op = op->next)
    if (op->code == H3_OP_LOOP && calls(op)) n += h3_op_attr_int(op, "count", 0);
  return n;
}

/* Splits the step loops of program p at dense_steps, then points the later ones at the
 * `.sol` clones (made from the graphs as they are) and gives the earlier ones' graphs the
 * dense backend in place. */
static h3_status program(sched *s, h3_graph *p) {
  int64_t step = 0, ds = s->o->dense_steps;
  for (h3_op *op = p->body.first; op; op = op->next) {
    if (op->code != H3_OP_LOOP || !calls(op)) continue;
    int64_t n = h3_op_attr_int(op, "count", 0);
    if (step < ds && ds < step + n) {
      const char *l = h3_arena_printf(&s->m->arena, "%s.sol", h3_op_attr_string(op, "label", "loop"));
      if (!l || !h3_loop_split(s->m, op, ds - step, l, s->d)) return H3_ERR;
      n = ds - step;
    }
    step += n;
  }
  for (int sol = 1; sol >= 0; sol--) {
    step = 0;
    for (h3_op *op = p->body.first; op; op = op->next) {
      if (op->code != H3_OP_LOOP || !calls(op)) continue;
      if ((step >= ds) == sol && callees(s, &op->regions[0], sol) != H3_OK) return H3_ERR;
      step += h3_op_attr_int(op, "count", 0);
    }
  }
  return H3_OK;
}

/* Every trunk loop of the module's first n graphs in place, as trunks() with `sol`. */
static h3_status every_graph(sched *s, int n, bool sol) {
  for (int i = 0; i < n; i++)
    if (trunks(s, &s->m->graphs[i]->body, sol) != H3_OK) return H3_ERR;
  return H3_OK;
}

h3_status h3_att_schedule(h3_module *m, const h3_att_options *o, h3_att_result *r, h3_diag *d) {
  sched s = {.m = m, .o = o, .d = d, .r = r};
  *r = (h3_att_result){.steps = -1};
  int n_graphs = m->n_graphs;
  h3_graph *prog = NULL;
  for (int i = 0; i < n_graphs; i++) {
    int64_t b = blocks(&m->graphs[i]->body);
    r->layers = b > r->layers ? b : r->layers;
    if (m->graphs[i]->kind == H3_GRAPH_PROGRAM && reaches(&s, &m->graphs[i]->body, 0))
      prog = m->graphs[i];
  }
  if (prog) r->steps = step_count(prog);
  if (!o->sol) return every_graph(&s, n_graphs, false); /* sage: the same at every step */
  if (r->layers == 0) return H3_OK; /* no stack: the pass reports it */
  if (o->dense_layers > r->layers) {
    h3_diag_error(d, (h3_span){0}, "give dense_layers at most the number of blocks",
                  "--attention sol: dense_layers=%lld but the block stack has %lld blocks",
                  (long long)o->dense_layers, (long long)r->layers);
    return H3_ERR;
  }
  if (prog && o->dense_steps > r->steps) {
    h3_diag_error(d, prog->span, "give dense_steps at most the number of sampling steps",
                  "--attention sol: dense_steps=%lld but program '%s' samples %lld steps",
                  (long long)o->dense_steps, prog->name, (long long)r->steps);
    return H3_ERR;
  }
  /* The same at every step (sol from step 0, or no block after dense_layers): in place. */
  if (o->dense_steps == 0 || o->dense_layers == r->layers) return every_graph(&s, n_graphs, true);
  if (!prog) {
    h3_diag_error(d, (h3_span){0}, "give dense_steps=0 for sol at every step of a module without "
                                   "a sampling program",
                  "--attention sol: dense_steps=%lld needs a program loop that calls the block "
                  "stack", (long long)o->dense_steps);
    return H3_ERR;
  }
  if (program(&s, prog) != H3_OK) return H3_ERR;
  for (int i = 0; i < s.n_to; i++) h3_graph_drop_if_unused(m, s.from[i]);
  return m->oom ? h3_skip_oom(d, "attention-backend") : H3_OK;
}
