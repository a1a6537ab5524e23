/* legality.c: the questions rewrites ask before they change the IR (rewrite.h): use
 * counts, shapes, aliasing, purity, dominance and the users of a value.
 *
 * Everything here reads the IR only. Use lists are not stored in the IR, so the user
 * queries scan the region where the value is defined (nested regions included); that is
 * linear in the region's size, which is small for h3 graphs (loops stay loops).
 */
#include "h3/rewrite.h"

#include "h3/op_registry.h"

#include <stdlib.h>
#include <string.h>

bool h3_value_has_one_use(const h3_value *v) { return v->uses == 1; }

bool h3_values_same_shape(const h3_value *a, const h3_value *b) {
  return h3_type_same_shape(&a->type, &b->type);
}

/* ---- purity ----------------------------------------------------------------------------- */
static bool region_is_pure(const h3_module *m, const h3_region *r, int depth);

static bool op_is_pure(const h3_module *m, const h3_op *op, int depth) {
  if (op->code == H3_OP_YIELD || op->code == H3_OP_RETURN) return false;
  if (depth > 64) return false; /* a call chain this deep: be conservative */
  for (int i = 0; i < op->n_regions; i++)
    if (!region_is_pure(m, &op->regions[i], depth + 1)) return false;
  if (op->code == H3_OP_CALL) {
    const h3_graph *g = h3_module_graph(m, h3_op_attr_string(op, "callee", ""));
    if (!g) return false;
    return region_is_pure(m, &g->body, depth + 1);
  }
  return true;
}

/* A region is pure when its ops are; its terminator only passes values on. */
static bool region_is_pure(const h3_module *m, const h3_region *r, int depth) {
  for (const h3_op *op = r->first; op; op = op->next) {
    if (op->code == H3_OP_YIELD || op->code == H3_OP_RETURN) continue;
    if (!op_is_pure(m, op, depth)) return false;
  }
  return true;
}

bool h3_op_is_pure(const h3_module *m, const h3_op *op) { return op_is_pure(m, op, 0); }

/* ---- regions and dominance -------------------------------------------------------------- */
bool h3_op_before(const h3_op *a, const h3_op *b) {
  if (a == b) return false;
  for (const h3_op *o = a->next; o; o = o->next)
    if (o == b) return true;
  return false;
}

/* The outermost region enclosing op (a graph body). */
static const h3_region *root_region(const h3_op *op) {
  const h3_region *r = op->parent;
  while (r && r->parent) r = r->parent->parent;
  return r;
}

h3_op *h3_value_def_of(const h3_value *v, h3_opcode code) {
  return v && v->kind == H3_VALUE_RESULT && v->def && v->def->code == code ? v->def : NULL;
}

bool h3_value_dominates(const h3_value *v, const h3_op *op) {
  if (v->kind == H3_VALUE_PARAM) return true;
  const h3_region *r = h3_value_def_region(v);
  if (!r) return false;
  if (v->kind == H3_VALUE_INPUT) return root_region(op) == r;
  h3_op *anc = h3_op_ancestor_in((h3_op *)op, r);
  if (!anc) return false;
  if (v->kind == H3_VALUE_REGION_ARG) return true;
  return h3_op_before(v->def, anc);
}

bool h3_insertion_point_ok(const h3_op *before, int n, h3_value *const *operands) {
  for (int i = 0; i < n; i++)
    if (!h3_value_dominates(operands[i], before)) return false;
  return true;
}

/* ---- users ------------------------------------------------------------------------------ */
typedef struct {
  const h3_value *v;
  h3_op **users;
  int cap, n;
} user_scan;

static int scan_op(h3_op *op, void *ctx) {
  user_scan *s = ctx;
  for (int i = 0; i < op->n_operands; i++)
    if (op->operands[i] == s->v) {
      if (s->n < s->cap) s->users[s->n] = op;
      s->n++;
    }
  return 0;
}

int h3_value_users(const h3_module *m, const h3_value *v, h3_op **users, int cap) {
  user_scan s = {v, users, cap, 0};
  h3_region *r = h3_value_def_region(v);
  if (r) {
    h3_region_walk(r, scan_op, &s);
  } else {
    for (int g = 0; g < m->n_graphs; g++) h3_region_walk(&m->graphs[g]->body, scan_op, &s);
  }
  return s.n;
}

/* ---- aliasing --------------------------------------------------------------------------- */
bool h3_value_is_aliased(const h3_value *v) {
  if (v->kind == H3_VALUE_REGION_ARG && v->region && v->region->parent &&
      v->region->parent->code == H3_OP_LOOP)
    return true;
  if (v->kind == H3_VALUE_RESULT && v->def && v->def->code == H3_OP_LOOP) return true;
  h3_region *r = h3_value_def_region(v);
  if (!r) return false;
  /* scan the uses: yield of a loop body, return, the updated operand of an in-place op */
  if (v->uses <= 0) return false;
  enum { cap = 16 };
  h3_op *users[cap];
  user_scan s = {v, users, cap, 0};
  h3_region_walk(r, scan_op, &s);
  for (int i = 0; i < s.n && i < cap; i++) {
    const h3_op *u = users[i];
    if (u->code == H3_OP_RETURN) return true;
    if (u->code == H3_OP_YIELD && u->parent && u->parent->parent &&
        u->parent->parent->code == H3_OP_LOOP)
      return true;
    for (int r = 0; r < u->n_results; r++) {
      const int j = h3_op_inplace_operand(u, r);
      if (j >= 0 && u->operands[j] == v) return true;
    }
  }
  if (s.n > cap) return true; /* too many users to inspect cheaply: assume aliased */
  return false;
}

/* ---- region index ----------------------------------------------------------------------- */
struct h3_region_index {
  int n_op_ids, n_value_ids;
  int *pos;        /* by op id, -1 outside the region */
  int *user_start; /* by value id, n_value_ids + 1 entries (CSR) */
  h3_op **users;
};

typedef struct {
  h3_region_index *ix;
  h3_op *holder; /* the op of the indexed region that holds the walked ops */
  int *fill;     /* next free slot per value id; NULL while counting */
} index_walk;

static int index_visit(h3_op *op, void *ctx) {
  index_walk *w = ctx;
  h3_region_index *ix = w->ix;
  for (int i = 0; i < op->n_operands; i++) {
    int id = op->operands[i]->id;
    if (id < 0 || id >= ix->n_value_ids) continue;
    if (w->fill)
      ix->users[w->fill[id]++] = w->holder;
    else
      ix->user_start[id + 1]++;
  }
  return 0;
}

static void index_pass(index_walk *w, h3_region *r) {
  for (h3_op *op = r->first; op; op = op->next) {
    w->holder = op;
    index_visit(op, w);
    for (int i = 0; i < op->n_regions; i++) h3_region_walk(&op->regions[i], index_visit, w);
  }
}

h3_region_index *h3_region_index_build(const h3_module *m, h3_region *r) {
  h3_region_index *ix = calloc(1, sizeof *ix);
  if (!ix) return NULL;
  ix->n_op_ids = m->next_op_id;
  ix->n_value_ids = m->next_value_id;
  ix->pos = malloc((size_t)(ix->n_op_ids + 1) * sizeof *ix->pos);
  ix->user_start = calloc((size_t)ix->n_value_ids + 1, sizeof *ix->user_start);
  int *fill = malloc((size_t)(ix->n_value_ids + 1) * sizeof *fill);
  if (!ix->pos || !ix->user_start || !fill) goto fail;
  for (int i = 0; i < ix->n_op_ids; i++) ix->pos[i] = -1;
  int p = 0;
  for (h3_op *op = r->first; op; op = op->next)
    if (op->id >= 0 && op->id < ix->n_op_ids) ix->pos[op->id] = p++;
  index_walk w = {ix, NULL, NULL};
  index_pass(&w, r);
  for (int i = 0; i < ix->n_value_ids; i++) ix->user_start[i + 1] += ix->user_start[i];
  ix->users = malloc((size_t)(ix->user_start[ix->n_value_ids] + 1) * sizeof *ix->users);
  if (!ix->users) goto fail;
  memcpy(fill, ix->user_start, (size_t)ix->n_value_ids * sizeof *fill);
  w.fill = fill;
  index_pass(&w, r);
  free(fill);
  return ix;
fail:
  free(fill);
  h3_region_index_free(ix);
  return NULL;
}

void h3_region_index_free(h3_region_index *ix) {
  if (!ix) return;
  free(ix->pos);
  free(ix->user_start);
  free(ix->users);
  free(ix);
}

int h3_region_index_pos(const h3_region_index *ix, const h3_op *op) {
  if (op->id < 0 || op->id >= ix->n_op_ids) return -1;
  return ix->pos[op->id];
}

int h3_region_index_users(const h3_region_index *ix, const h3_value *v, h3_op *const **users) {
  if (v->id < 0 || v->id >= ix->n_value_ids) {
    *users = NULL;
    return 0;
  }
  *users = ix->users + ix->user_start[v->id];
  return ix->user_start[v->id + 1] - ix->user_start[v->id];
}
