/* elementwise_fusion.c: the `elementwise-fusion` pass (the worked example of
 * docs/writing-a-pass.md).
 *
 * Groups connected elementwise ops of one region, together with the `gather`, `slice` and
 * generator (`const`, `iota`) ops that feed them, into `fused` ops: one kernel each.
 *
 *   %a = mul(%x, %s)                     %y = fused(%x, %s, %b) {name = "mul_add_silu",
 *   %c = add(%a, %b)          ==>                                tier = lossless} {
 *   %y = silu(%c)                          ^(%x', %s', %b'): mul, add, silu ... yield %y'
 *                                        }
 * Rules of a group (checked by the match, so a rewrite never fails):
 *   - every member is in the same region (loop bodies are separate regions: a group never
 *     spans a loop boundary) and outside any fused region;
 *   - compute members are elementwise ops whose result has the shape of the seed's result
 *     (the kernel's iteration space); their other operands may broadcast;
 *   - a `gather` joins as a producer whose table and indices come from outside the group,
 *     its result of the group's shape; a gather of a 1-D table (its result has its indices'
 *     shape) may also take its indices from a member and join as their consumer: the kernel
 *     computes each index where it reads it (M3.1's page slot from the position: no kernel
 *     of its own for the page index), from integer ops only (float_in_chain);
 *   - generators are copied into the group's region (free to recompute); the original
 *     stays outside while other ops still use it;
 *   - a `slice` (any axis, contiguous or not) feeding a member is copied into the region
 *     too, reading its operand (produced outside the group) as a region argument: the
 *     kernel reads the source at computed indices instead of a sliced copy. A slice is a
 *     view (no rounding), so this is bitwise neutral in every tier. The original stays
 *     outside only while other ops still use it (else no copy kernel remains);
 *   - the group stays convex: no path leaves the group and comes back, so the fused op can
 *     be placed without a cycle (ops between the members that depend on them move after
 *     the fused op);
 *   - a group has at least two ops and at most FUSION_MAX_MEMBERS compute members (a longer
 *     chain becomes several groups: one kernel's source, and codegen's walk of its
 *     expressions, stay bounded); a member result used outside the group is an output;
 *   - the fused op is one the executor and a kernel launch take: at most
 *     H3_EXEC_MAX_RESULTS outputs, inputs + outputs + a seed within H3_KERNEL_MAX_ARGS (a
 *     group with more is grown again with half the members).
 * The `tier` attribute tells codegen the rounding rule: "exact" at --quality exact (every
 * op of the region rounds to its result dtype, bitwise equal to the unfused ops),
 * "lossless" above (float intermediates stay fp32; only the outputs round). The `name`
 * attribute lists the member ops; codegen gives the kernel its deterministic name.
 */
#include "h3/kernel.h"
#include "h3/op_registry.h"
#include "h3/rewrite.h"

#include "pass_internal.h"

#include "region_index_tracked.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the match found, for the rewrite that follows it. */
typedef struct {
  h3_module *m;
  h3_tier tier;
  int n_groups;
  h3_tracked_index ix; /* of the current group's region, kept across rewrites */
  unsigned char *mark; /* by op id: MEMBER, GENERATOR or SLICE (the last two copied) */
  unsigned char *seen; /* by op id: convexity scratch, all 0 between uses */
  int mark_cap;
  h3_op **members, **gens, **slices, **queue;
  int *marked; /* ids of the ops marked by the current match (cleared by the next) */
  int max_members; /* of the group being grown: FUSION_MAX_MEMBERS, less to fit group_fits */
  int n_members, n_gens, n_slices, n_marked, list_cap;
  bool oom;
} fusion_state;

enum { MEMBER = 1, GENERATOR = 2, SLICE = 3 };
#define FUSION_MAX_MEMBERS 1024

static bool is_generator(const h3_op *op) {
  return op->code == H3_OP_CONST || op->code == H3_OP_IOTA;
}

/* An elementwise op with one result that computes from its operands. */
static bool is_compute(const h3_op *op) {
  return h3_op_is_elementwise(op->code) && !is_generator(op) && op->n_results == 1;
}

static bool in_fused_region(const h3_op *op) {
  return op->parent && op->parent->parent && op->parent->parent->code == H3_OP_FUSED;
}

/* ---- scratch ---------------------------------------------------------------------------- */
static bool grow(void **p, int old_n, int n, size_t elem, bool zero) {
  unsigned char *q = realloc(*p, (size_t)n * elem);
  if (!q) return false;
  if (zero) memset(q + (size_t)old_n * elem, 0, (size_t)(n - old_n) * elem);
  *p = q;
  return true;
}

/* Scratch for every op id of the module (growing as ops are created), marks and seen
 * flags 0 for ids not marked by the current match. */
static bool reserve(fusion_state *s) {
  int ops = s->m->next_op_id + 1;
  if (ops > s->mark_cap) {
    int cap = ops > 2 * s->mark_cap ? ops : 2 * s->mark_cap;
    if (!grow((void **)&s->mark, s->mark_cap, cap, 1, true) ||
        !grow((void **)&s->seen, s->mark_cap, cap, 1, true))
      return false;
    s->mark_cap = cap;
  }
  if (ops > s->list_cap) {
    int cap = ops > 2 * s->list_cap ? ops : 2 * s->list_cap;
    if (!grow((void **)&s->members, 0, cap, sizeof *s->members, false) ||
        !grow((void **)&s->gens, 0, cap, sizeof *s->gens, false) ||
        !grow((void **)&s->queue, 0, cap, sizeof *s->queue, false) ||
        !grow((void **)&s->slices, 0, cap, sizeof *s->slices, false) ||
        !grow((void **)&s->marked, 0, cap, sizeof *s->marked, false))
      return false;
    s->list_cap = cap;
  }
  return true;
}

static void set_mark(fusion_state *s, const h3_op *op, unsigned char kind) {
  if (!s->mark[op->id]) s->marked[s->n_marked++] = op->id;
  s->mark[op->id] = kind;
}

static void clear_marks(fusion_state *s) {
  for (int i = 0; i < s->n_marked; i++) s->mark[s->marked[i]] = 0;
  s->n_marked = 0;
}

/* ---- legality --------------------------------------------------------------------------- */
/* True when no path runs from a member through non-members back to a member. Paths only
 * go forward in the region, so the walk stops at the last member's position. */
static bool group_is_convex(fusion_state *s) {
  int last = -1, n_queue = 0;
  for (int i = 0; i < s->n_members; i++) {
    int p = h3_tracked_index_pos(&s->ix, s->members[i]);
    if (p > last) last = p;
  }
  for (int i = 0; i < s->n_members; i++) s->queue[n_queue++] = s->members[i];
  bool convex = true;
  for (int q = 0; q < n_queue && convex; q++) {
    h3_op *op = s->queue[q];
    for (int r = 0; r < op->n_results && convex; r++) {
      h3_op *const *users;
      int n = h3_tracked_index_users(&s->ix, op->results[r], &users);
      for (int u = 0; u < n; u++) {
        h3_op *user = users[u];
        bool member = s->mark[user->id] == MEMBER;
        if (member && s->mark[op->id] != MEMBER) { /* left and came back */
          convex = false;
          break;
        }
        if (member || s->seen[user->id] || h3_tracked_index_pos(&s->ix, user) > last) continue;
        s->seen[user->id] = 1;
        s->queue[n_queue++] = user;
      }
    }
  }
  for (int q = s->n_members; q < n_queue; q++) s->seen[s->queue[q]->id] = 0;
  return convex;
}

/* Whether gather g's operand k may be a member's result: the indices (k = 1) of a 1-D table,
 * read at the gather's own index (its result has the indices' shape). A gather reads its
 * other operands at computed rows: they stay outside. */
static bool gather_takes_member(const h3_op *g, int k) {
  return k == 1 && g->n_operands == 2 && g->operands[0]->type.rank == 1;
}

/* An index computed in the group must be the unfused graph's: at --quality lossless the
 * group keeps float intermediates unrounded, and an index from such a chain could name
 * another row. So the indices a gather takes from the group come from integer ops only:
 * float_in_chain says whether member value v is a float op's result or depends on one
 * through members, feeds_index whether v reaches such indices through members (both give
 * true past CHAIN_DEPTH: a refusal, never a wrong group). */
#define CHAIN_DEPTH 16
static bool float_in_chain(const fusion_state *s, const h3_value *v, int depth) {
  if (v->kind != H3_VALUE_RESULT || !v->def || s->mark[v->def->id] != MEMBER) return false;
  if (h3_dtype_is_float(v->type.dtype) || depth > CHAIN_DEPTH) return true;
  for (int k = 0; k < v->def->n_operands; k++)
    if (float_in_chain(s, v->def->operands[k], depth + 1)) return true;
  return false;
}

static bool feeds_index(const fusion_state *s, const h3_value *v, int depth) {
  if (depth > CHAIN_DEPTH) return true;
  for (int i = 0; i < s->n_members; i++) {
    const h3_op *m = s->members[i];
    for (int k = 0; k < m->n_operands; k++)
      if (m->operands[k] == v &&
          (m->code == H3_OP_GATHER ? k == 1 : feeds_index(s, m->results[0], depth + 1)))
        return true;
  }
  return false;
}

/* Tries to add op to the group; `as_producer` says it feeds a member. */
static bool try_add(fusion_state *s, h3_op *op, bool as_producer, const h3_type *shape) {
  if (op->parent != s->ix.region || s->mark[op->id] || s->n_members >= s->max_members) return false;
  bool gather = op->code == H3_OP_GATHER;
  if (gather ? !as_producer && !gather_takes_member(op, 1) : !is_compute(op)) return false;
  if (!h3_type_same_shape(&op->results[0]->type, shape)) return false;
  for (int i = 0; i < s->n_members; i++) {
    const h3_op *m = s->members[i];
    if (gather) {
      for (int k = 0; k < op->n_operands; k++)
        if (op->operands[k]->kind == H3_VALUE_RESULT && op->operands[k]->def == m && !gather_takes_member(op, k))
          return false;
    } else if (m->code == H3_OP_GATHER) {
      for (int k = 0; k < m->n_operands; k++)
        if (m->operands[k] == op->results[0] && !gather_takes_member(m, k)) return false;
    }
  }
  for (int i = 0; i < s->n_slices; i++) /* a copied slice reads its source at other indices */
    if (s->slices[i]->operands[0] == op->results[0]) return false;
  if (gather ? float_in_chain(s, op->operands[1], 0)
             : h3_dtype_is_float(op->results[0]->type.dtype) && feeds_index(s, op->results[0], 0))
    return false;
  set_mark(s, op, MEMBER);
  s->members[s->n_members++] = op;
  if (group_is_convex(s)) return true;
  s->mark[op->id] = 0;
  s->n_members--;
  return false;
}

/* A slice feeding a member joins as a copy when its source is not a member's result (the
 * kernel reads the source at computed indices: it must come from outside the group) and
 * not a generator's (the copy reads the source as a region argument). */
static bool try_add_slice(fusion_state *s, h3_op *op) {
  const h3_value *src = op->operands[0];
  if (src->kind == H3_VALUE_RESULT && src->def->parent == s->ix.region &&
      (s->mark[src->def->id] == MEMBER || is_generator(src->def)))
    return false;
  set_mark(s, op, SLICE);
  s->slices[s->n_slices++] = op;
  return true;
}

/* ---- the pattern ------------------------------------------------------------------------ */
static bool group_has_output(fusion_state *s) {
  for (int i = 0; i < s->n_members; i++) {
    const h3_value *v = s->members[i]->results[0];
    h3_op *const *users;
    int n = h3_tracked_index_users(&s->ix, v, &users);
    for (int u = 0; u < n; u++)
      if (s->mark[users[u]->id] != MEMBER) return true;
  }
  return false;
}

/* The group grown from the seed `op`, breadth first over producers and consumers; true when
 * it is worth a fused op. */
static bool grow_group(fusion_state *s, h3_op *op) {
  clear_marks(s);
  const h3_type *shape = &op->results[0]->type;
  s->n_members = s->n_gens = s->n_slices = 0;
  set_mark(s, op, MEMBER);
  s->members[s->n_members++] = op;
  for (int i = 0; i < s->n_members; i++) {
    h3_op *member = s->members[i];
    const bool gather = member->code == H3_OP_GATHER;
    if (gather && !gather_takes_member(member, 1)) continue; /* such gathers do not grow the group */
    for (int k = 0; k < member->n_operands; k++) {
      h3_value *v = member->operands[k];
      if (gather && !gather_takes_member(member, k)) continue; /* the table stays outside */
      if (v->kind != H3_VALUE_RESULT || v->def->parent != s->ix.region || s->mark[v->def->id])
        continue;
      if (is_generator(v->def)) {
        set_mark(s, v->def, GENERATOR);
        s->gens[s->n_gens++] = v->def;
      } else if (v->def->code == H3_OP_SLICE) {
        try_add_slice(s, v->def);
      } else {
        try_add(s, v->def, true, shape);
      }
    }
    h3_op *const *users;
    int n = h3_tracked_index_users(&s->ix, member->results[0], &users);
    for (int u = 0; u < n; u++) try_add(s, users[u], false, shape);
  }
  return s->n_members + s->n_gens + s->n_slices >= 2 && group_has_output(s);
}

static int group_fits(fusion_state *s);

/* The group of the seed `op` that one op can hold: grown with FUSION_MAX_MEMBERS, and while
 * its inputs or outputs are too many (group_fits), grown again with half the members (a
 * prefix of the same search: each member left the group convex when it joined). */
static bool grow_fitting(fusion_state *s, h3_op *op) {
  s->max_members = FUSION_MAX_MEMBERS;
  bool found = grow_group(s, op);
  while (found) {
    int fits = group_fits(s);
    if (fits < 0) s->oom = true;
    if (fits != 0) return fits > 0;
    s->max_members = s->n_members / 2;
    found = s->max_members >= 1 && grow_group(s, op);
  }
  return false;
}

/* Match: the group of the seed `op`, found with the index kept across rewrites; when the
 * search read an entry a rewrite changed, found again with a fresh index. */
static bool fusion_match(h3_rewriter *rw, h3_op *op, void *state) {
  fusion_state *s = state;
  (void)rw;
  if (s->oom || !is_compute(op) || in_fused_region(op) || !op->parent) return false;
  if (!reserve(s)) {
    s->oom = true;
    return false;
  }
  bool fresh = !(s->ix.region == op->parent && s->ix.ix);
  for (;;) {
    if (fresh && !h3_tracked_index_build(&s->ix, s->m, op->parent)) {
      s->oom = true;
      return false;
    }
    s->ix.stale = false;
    bool found = grow_fitting(s, op);
    if (s->oom) return false;
    if (!s->ix.stale || fresh) return found;
    fresh = true;
  }
}

static int by_position(const void *a, const void *b, void *ix) {
  int pa = h3_tracked_index_pos(ix, *(h3_op *const *)a);
  int pb = h3_tracked_index_pos(ix, *(h3_op *const *)b);
  return (pa > pb) - (pa < pb);
}

/* Sorts ops (few) by their position in the indexed region. */
static void sort_by_position(h3_op **ops, int n, h3_tracked_index *ix) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && by_position(&ops[j - 1], &ops[j], ix) > 0; j--) {
      h3_op *t = ops[j];
      ops[j] = ops[j - 1];
      ops[j - 1] = t;
    }
}

/* "mul_add_silu": the member op names in order, at most four, then "_etc". */
static void group_name(const fusion_state *s, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = 0;
  for (int i = 0; i < s->n_members && i < 4; i++)
    used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? "_" : "",
                             h3_opcode_name(s->members[i]->code));
  if (s->n_members > 4) snprintf(buf + used, len - used, "_etc");
}

static int value_index(h3_value *const *list, int n, const h3_value *v) {
  for (int i = 0; i < n; i++)
    if (list[i] == v) return i;
  return -1;
}

static int op_index(h3_op *const *list, int n, const h3_op *op) {
  for (int i = 0; i < n; i++)
    if (list[i] == op) return i;
  return -1;
}

static int visit_uses_marked(h3_op *op, void *marked) {
  for (int k = 0; k < op->n_operands; k++)
    if (((const unsigned char *)marked)[op->operands[k]->id]) return 1;
  return 0;
}

/* True when op, or an op nested in its regions, uses a value whose id is marked. */
static bool uses_marked(h3_op *op, unsigned char *marked) {
  if (visit_uses_marked(op, marked)) return true;
  for (int i = 0; i < op->n_regions; i++)
    if (h3_region_walk(&op->regions[i], visit_uses_marked, marked)) return true;
  return false;
}

/* The most inputs plus outputs the group can have (the size of group_io's lists). */
static int io_cap(const fusion_state *s) {
  int cap = s->n_slices;
  for (int i = 0; i < s->n_members; i++) cap += s->members[i]->n_operands + 1;
  return cap;
}

/* The fused op's operands and results: inputs, the operands defined outside the group
 * (generators and slices are copied, not passed) and the sources of the copied slices;
 * outputs, the member results with a user outside the group (lists of io_cap entries). */
static void group_io(fusion_state *s, h3_value **inputs, int *n_in, h3_value **outputs, int *n_out) {
  *n_in = *n_out = 0;
  for (int i = 0; i < s->n_members; i++)
    for (int k = 0; k < s->members[i]->n_operands; k++) {
      h3_value *v = s->members[i]->operands[k];
      bool inside = v->kind == H3_VALUE_RESULT && v->def->parent == s->ix.region && s->mark[v->def->id];
      if (!inside && value_index(inputs, *n_in, v) < 0) inputs[(*n_in)++] = v;
    }
  for (int i = 0; i < s->n_slices; i++)
    if (value_index(inputs, *n_in, s->slices[i]->operands[0]) < 0)
      inputs[(*n_in)++] = s->slices[i]->operands[0];
  for (int i = 0; i < s->n_members; i++) {
    h3_value *v = s->members[i]->results[0];
    h3_op *const *users;
    int n = h3_tracked_index_users(&s->ix, v, &users);
    for (int u = 0; u < n; u++)
      if (s->mark[users[u]->id] != MEMBER) {
        outputs[(*n_out)++] = v;
        break;
      }
  }
}

/* Whether the executor and a kernel launch take the group as one op: at most
 * H3_EXEC_MAX_RESULTS outputs, and inputs + outputs + a seed within H3_KERNEL_MAX_ARGS.
 * -1 when out of memory. */
static int group_fits(fusion_state *s) {
  int cap = io_cap(s), n_in, n_out;
  h3_value **io = malloc((size_t)(2 * cap + 1) * sizeof *io);
  if (!io) return -1;
  group_io(s, io, &n_in, io + cap, &n_out);
  free(io);
  return n_out <= H3_EXEC_MAX_RESULTS && n_in + n_out + 1 <= H3_KERNEL_MAX_ARGS;
}

/* Marks in the index what the rewrite below changes: the members (nested in the fused op),
 * the generators and slices (copied, perhaps erased), the ops that move after it, and the
 * users of the members' results and of the group's inputs. */
static void touch_group(fusion_state *s, h3_value *const *inputs, int n_in, h3_op *const *moved,
                        int n_moved) {
  h3_op **lists[3] = {s->members, s->gens, s->slices};
  int counts[3] = {s->n_members, s->n_gens, s->n_slices};
  for (int l = 0; l < 3; l++)
    for (int i = 0; i < counts[l]; i++) {
      h3_tracked_index_touch_op(&s->ix, lists[l][i]);
      h3_tracked_index_touch_value(&s->ix, lists[l][i]->results[0]);
    }
  for (int i = 0; i < n_in; i++) h3_tracked_index_touch_value(&s->ix, inputs[i]);
  for (int i = 0; i < n_moved; i++) h3_tracked_index_touch_op(&s->ix, moved[i]);
}

/* Rewrite: outline the group found by the match into one fused op placed where the last
 * member was; ops between the members that depend on them move after it. */
static h3_status fusion_rewrite(h3_rewriter *rw, h3_op *seed, void *state, h3_diag *d) {
  fusion_state *s = state;
  h3_module *m = s->m;
  h3_region *r = seed->parent;
  sort_by_position(s->members, s->n_members, &s->ix);
  sort_by_position(s->gens, s->n_gens, &s->ix);
  sort_by_position(s->slices, s->n_slices, &s->ix);
  int cap = io_cap(s);
  h3_value **inputs = malloc((size_t)cap * sizeof *inputs);
  h3_value **outputs = malloc((size_t)cap * sizeof *outputs);
  h3_type *out_types = malloc((size_t)cap * sizeof *out_types);
  h3_op **moved = malloc((size_t)s->list_cap * sizeof *moved);
  unsigned char *tainted = calloc((size_t)m->next_value_id + 1, 1);
  h3_status st = H3_OK;
  if (!inputs || !outputs || !out_types || !moved || !tainted) goto oom;

  int n_in, n_out, n_moved = 0;
  group_io(s, inputs, &n_in, outputs, &n_out);
  for (int k = 0; k < n_out; k++) out_types[k] = outputs[k]->type;
  for (int i = 0; i < s->n_members; i++) tainted[s->members[i]->results[0]->id] = 1;
  /* ops between the first and the last member that depend on a member move after */
  h3_op *last = s->members[s->n_members - 1];
  for (h3_op *op = s->members[0]; op != last; op = op->next) {
    if (s->mark[op->id] == MEMBER) continue;
    if (!uses_marked(op, tainted)) continue;
    moved[n_moved++] = op;
    for (int k = 0; k < op->n_results; k++) tainted[op->results[k]->id] = 1;
  }

  touch_group(s, inputs, n_in, moved, n_moved);

  char name[128];
  group_name(s, name, sizeof name);
  h3_attr attrs[2] = {
      h3_attr_string(m, "name", name),
      h3_attr_tier(m, "tier", s->tier == H3_TIER_EXACT ? H3_TIER_EXACT : H3_TIER_LOSSLESS),
  };
  h3_builder b = {m, r, last->next, last->span};
  h3_op *fused = h3_build_op_typed(&b, H3_OP_FUSED, n_in, inputs, 2, attrs, n_out, out_types, 1);
  if (!fused) goto oom;
  for (int k = 0; k < n_out; k++) { /* outside, the outputs keep their names */
    fused->results[k]->name = outputs[k]->name;
    fused->results[k]->span = outputs[k]->span;
    h3_value_replace_all_uses(m, outputs[k], fused->results[k]);
  }
  h3_op *anchor = fused->next;
  for (int i = 0; i < n_moved; i++) h3_op_move_before(moved[i], r, anchor);

  /* the region: arguments for the inputs, generator copies, the members, the yield */
  h3_region *body = &fused->regions[0];
  h3_value **args = malloc((size_t)(n_in + 1) * sizeof *args);
  h3_value **gen_copies = malloc((size_t)(s->n_gens + s->n_slices + 1) * sizeof *gen_copies);
  if (!args || !gen_copies) {
    free(args);
    free(gen_copies);
    goto oom;
  }
  h3_value **slice_copies = gen_copies + s->n_gens;
  bool ok = true;
  for (int i = 0; i < n_in && ok; i++)
    ok = (args[i] = h3_region_add_arg(m, body, inputs[i]->type, inputs[i]->name,
                                      inputs[i]->span)) != NULL;
  h3_builder bb = {m, body, NULL, seed->span};
  for (int g = 0; g < s->n_gens && ok; g++) {
    h3_op *gen = s->gens[g];
    bb.span = gen->span;
    h3_op *copy = h3_build_op_typed(&bb, gen->code, 0, NULL, gen->n_attrs, gen->attrs, 1,
                                    &gen->results[0]->type, 0);
    ok = copy != NULL;
    if (ok) gen_copies[g] = copy->results[0];
  }
  for (int i = 0; i < s->n_slices && ok; i++) {
    h3_op *sl = s->slices[i];
    h3_value *src = args[value_index(inputs, n_in, sl->operands[0])];
    bb.span = sl->span;
    h3_op *copy = h3_build_op_typed(&bb, H3_OP_SLICE, 1, &src, sl->n_attrs, sl->attrs, 1,
                                    &sl->results[0]->type, 0);
    ok = copy != NULL;
    if (ok) slice_copies[i] = copy->results[0];
  }
  for (int i = 0; i < s->n_members && ok; i++) {
    h3_op *op = s->members[i];
    h3_op_move_before(op, body, NULL);
    for (int k = 0; k < op->n_operands; k++) {
      h3_value *v = op->operands[k];
      int j;
      if (v->kind == H3_VALUE_RESULT && v->def == fused)
        h3_op_set_operand(op, k, outputs[v->index]);
      else if ((j = value_index(inputs, n_in, v)) >= 0)
        h3_op_set_operand(op, k, args[j]);
      else if (v->kind == H3_VALUE_RESULT && s->mark[v->def->id] == GENERATOR)
        h3_op_set_operand(op, k, gen_copies[op_index(s->gens, s->n_gens, v->def)]);
      else if (v->kind == H3_VALUE_RESULT && s->mark[v->def->id] == SLICE)
        h3_op_set_operand(op, k, slice_copies[op_index(s->slices, s->n_slices, v->def)]);
    }
  }
  bb.span = last->span;
  if (ok) ok = h3_build_op_typed(&bb, H3_OP_YIELD, n_out, outputs, 0, NULL, 0, NULL, 0) != NULL;
  for (int g = 0; g < s->n_gens && ok; g++)
    if (s->gens[g]->results[0]->uses == 0) h3_rewriter_erase(rw, s->gens[g]);
  for (int g = 0; g < s->n_slices && ok; g++) /* no copy kernel stays for a slice */
    if (s->slices[g]->results[0]->uses == 0) h3_rewriter_erase(rw, s->slices[g]);
  free(args);
  free(gen_copies);
  if (!ok) goto oom;
  h3_rewriter_notify_new(rw, fused);
  s->n_groups++;
  goto done;
oom:
  h3_diag_error(d, seed->span, "free memory or use a smaller --config",
                "out of memory while fusing elementwise ops");
  st = H3_ERR;
done:
  if (st != H3_OK) h3_tracked_index_free(&s->ix);
  free(inputs);
  free(outputs);
  free(out_types);
  free(moved);
  free(tainted);
  return st;
}

static const h3_pattern fusion_patterns[] = {
    {.name = "elementwise-group",
     .root = H3_OPCODE_INVALID, /* any op: the match picks elementwise seeds */
     .benefit = 1,
     .match = fusion_match,
     .rewrite = fusion_rewrite},
};

static h3_status fusion_run(h3_module *m, h3_pass_context *ctx, h3_diag *d) {
  fusion_state s = {.m = m, .tier = h3_pass_tier(ctx)};
  h3_status st = h3_rewrite_greedy(m, fusion_patterns, 1, &s, ctx, NULL, d);
  if (st == H3_OK && s.oom) {
    static const h3_span no_span = {0};
    h3_diag_error(d, no_span, "free memory or use a smaller --config",
                  "out of memory in pass 'elementwise-fusion'");
    st = H3_ERR;
  }
  if (st == H3_OK)
    h3_pass_report(ctx, "fused groups: %d (tier %s)", s.n_groups,
                   h3_tier_name(s.tier == H3_TIER_EXACT ? H3_TIER_EXACT : H3_TIER_LOSSLESS));
  h3_tracked_index_free(&s.ix);
  free(s.marked);
  free(s.mark);
  free(s.seen);
  free(s.members);
  free(s.gens);
  free(s.slices);
  free(s.queue);
  return st;
}

const h3_pass h3_pass_elementwise_fusion = {
    .name = "elementwise-fusion",
    .description = "group connected elementwise ops (and gather/slice/const producers) into "
                   "fused kernels; exact keeps every rounding, lossless rounds only the outputs",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = true,
    .requires = {NULL},
    .run = fusion_run,
};
