/* region_index_tracked.c: a region index that outlives local rewrites
 * (region_index_tracked.h). */
#include "region_index_tracked.h"

#include <stdlib.h>

bool h3_tracked_index_build(h3_tracked_index *t, const h3_module *m, h3_region *r) {
  h3_tracked_index_free(t);
  t->region = r;
  t->ix = h3_region_index_build(m, r);
  t->n_ops = m->next_op_id;
  t->n_values = m->next_value_id;
  t->touched_op = calloc((size_t)t->n_ops + 1, 1);
  t->touched_value = calloc((size_t)t->n_values + 1, 1);
  t->stale = false;
  if (t->ix && t->touched_op && t->touched_value) return true;
  h3_tracked_index_free(t);
  return false;
}

void h3_tracked_index_free(h3_tracked_index *t) {
  h3_region_index_free(t->ix);
  free(t->touched_op);
  free(t->touched_value);
  *t = (h3_tracked_index){0};
}

int h3_tracked_index_pos(h3_tracked_index *t, const h3_op *op) {
  if (op->id < 0 || op->id >= t->n_ops || t->touched_op[op->id]) t->stale = true;
  return h3_region_index_pos(t->ix, op);
}

int h3_tracked_index_users(h3_tracked_index *t, const h3_value *v, h3_op *const **users) {
  if (v->id < 0 || v->id >= t->n_values || t->touched_value[v->id]) t->stale = true;
  return h3_region_index_users(t->ix, v, users);
}

void h3_tracked_index_touch_op(h3_tracked_index *t, const h3_op *op) {
  if (op->id >= 0 && op->id < t->n_ops) t->touched_op[op->id] = 1;
}

void h3_tracked_index_touch_value(h3_tracked_index *t, const h3_value *v) {
  if (v->id >= 0 && v->id < t->n_values) t->touched_value[v->id] = 1;
}
