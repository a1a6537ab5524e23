/* region_index_tracked.h: a region index (include/h3/rewrite.h) that outlives local rewrites
 * (private to passes/). A pattern that rewrites one small part of a large region at a time
 * would otherwise rebuild the whole index after every rewrite (quadratic in the region's
 * size). Instead the rewrite marks what it changes (touch): ops it moves, erases or nests,
 * values whose users change; a later query that reads a touched op's position or a touched
 * value's users, or an op or value created after the build, sets `stale`: the answer may be
 * wrong and the caller rebuilds and asks again. Untouched entries stay exact: positions only
 * need their order, which moving or removing other ops keeps. */
#ifndef H3_PASSES_REGION_INDEX_TRACKED_H
#define H3_PASSES_REGION_INDEX_TRACKED_H

#include "h3/rewrite.h"

#include <stdbool.h>

typedef struct {
  h3_region *region;   /* the indexed region; NULL before the first build */
  h3_region_index *ix; /* NULL before the first build or after a failed one */
  int n_ops, n_values; /* op and value ids at the build */
  unsigned char *touched_op, *touched_value; /* by id, since the build */
  bool stale; /* a query read a touched or new entry (cleared by the caller) */
} h3_tracked_index;

/* (Re)builds the index of r; every touch cleared. False when out of memory. */
bool h3_tracked_index_build(h3_tracked_index *t, const h3_module *m, h3_region *r);
void h3_tracked_index_free(h3_tracked_index *t);
/* h3_region_index_pos / _users, setting t->stale when the entry may be out of date. */
int h3_tracked_index_pos(h3_tracked_index *t, const h3_op *op);
int h3_tracked_index_users(h3_tracked_index *t, const h3_value *v, h3_op *const **users);
/* What a rewrite changed: an op moved, erased or nested elsewhere; a value whose users
 * change (an operand of a moved or nested op, a result whose uses are replaced). */
void h3_tracked_index_touch_op(h3_tracked_index *t, const h3_op *op);
void h3_tracked_index_touch_value(h3_tracked_index *t, const h3_value *v);

#endif
