/* stream_find.c: which values of a module stream under a device budget (h3_stream_find) and
 * what stays resident besides them (h3_stream_fixed_weight_bytes): pure functions of the IR
 * (runtime/stream.h has the rule).
 */
#include "stream.h"

#include "h3/op_registry.h"

#include <stdlib.h>
#include <string.h>

/* The loop whose counter op indexes by: op is `index(V, %i) {offset}` directly in the
 * loop's body, %i its counter; NULL otherwise. */
static const h3_op *counter_loop(const h3_op *op) {
  if (op->code != H3_OP_INDEX || op->n_operands != 2) return NULL;
  const h3_op *loop = op->parent ? op->parent->parent : NULL;
  if (!loop || loop->code != H3_OP_LOOP || op->parent != &loop->regions[0] ||
      loop->regions[0].n_args < 1 || op->operands[1] != loop->regions[0].args[0])
    return NULL;
  return loop;
}

/* A value that may stream: a stacked parameter, or a result of the only load-time op on a
 * parameter (no sharing between graphs). */
static bool streamable(const h3_value *v) {
  if (v->type.rank < 2 || v->type.dims[0] < 1) return false;
  if (v->kind == H3_VALUE_PARAM) return true;
  if (v->kind != H3_VALUE_RESULT || !v->def || !h3_op_is_load_time(v->def)) return false;
  const h3_value *p = v->def->operands[0];
  return p->kind == H3_VALUE_PARAM && p->uses == 1;
}

typedef struct {
  const h3_value **vals; /* candidates, by first sight */
  int *index_uses;       /* counter-index uses per candidate (-1: one reads outside the stack) */
  int n, cap;
  bool oom;
} scan;

static int scan_slot(scan *c, const h3_value *v) {
  for (int i = 0; i < c->n; i++)
    if (c->vals[i] == v) return i;
  if (c->n == c->cap) {
    int cap = c->cap ? 2 * c->cap : 64;
    const h3_value **nv = realloc(c->vals, (size_t)cap * sizeof *nv);
    if (nv) c->vals = nv;
    int *nu = nv ? realloc(c->index_uses, (size_t)cap * sizeof *nu) : NULL;
    if (!nu) {
      c->oom = true;
      return -1;
    }
    c->index_uses = nu;
    c->cap = cap;
  }
  c->vals[c->n] = v;
  c->index_uses[c->n] = 0;
  return c->n++;
}

/* The rows [first, first + count) the loop around index op reads. */
static void loop_rows(const h3_op *op, const h3_op *loop, int64_t *first, int64_t *count) {
  *first = h3_op_attr_int(op, "offset", 0);
  *count = h3_op_attr_int(loop, "count", 0);
}

static int scan_visit(h3_op *op, void *ctx) {
  scan *c = ctx;
  const h3_op *loop = counter_loop(op);
  if (!loop || !streamable(op->operands[0])) return 0;
  int i = scan_slot(c, op->operands[0]);
  if (i < 0) return 1;
  int64_t first, count;
  loop_rows(op, loop, &first, &count);
  bool inside = first >= 0 && count >= 0 && first + count <= op->operands[0]->type.dims[0];
  c->index_uses[i] = c->index_uses[i] < 0 || !inside ? -1 : c->index_uses[i] + 1;
  return 0;
}

/* Adds the loop around index op (its rows); false when out of memory, or when the loop
 * reads another block of some streamed value than of the others (*mixed). */
static bool add_loop(h3_stream_set *s, const h3_op *op, const h3_op *loop, bool *mixed) {
  int64_t first, count;
  loop_rows(op, loop, &first, &count);
  for (int i = 0; i < s->n_loops; i++)
    if (s->loops[i].op == loop) {
      *mixed = s->loops[i].first != first;
      return !*mixed;
    }
  h3_stream_loop *nl = realloc(s->loops, (size_t)(s->n_loops + 1) * sizeof *nl);
  if (!nl) return false;
  s->loops = nl;
  s->loops[s->n_loops++] = (h3_stream_loop){loop, first, count};
  return true;
}

typedef struct {
  h3_stream_set *s;
  bool failed, mixed;
} loops_ctx;

static int loops_visit(h3_op *op, void *ctx) {
  loops_ctx *c = ctx;
  const h3_op *loop = counter_loop(op);
  if (loop && h3_stream_set_index(c->s, op->operands[0]) >= 0 &&
      !add_loop(c->s, op, loop, &c->mixed))
    c->failed = true;
  return c->failed;
}

h3_status h3_stream_find(const h3_module *m, h3_stream_set *out, h3_diag *d) {
  memset(out, 0, sizeof *out);
  scan c = {0};
  h3_module_walk((h3_module *)m, scan_visit, &c);
  /* of the values read only by counter indexes, the stack height with the most bytes */
  int64_t *rows = calloc((size_t)c.n + 1, sizeof *rows), best = 0, best_bytes = 0;
  if (!rows) c.oom = true;
  for (int i = 0; rows && i < c.n; i++)
    rows[i] = c.index_uses[i] == c.vals[i]->uses ? c.vals[i]->type.dims[0] : -1;
  for (int i = 0; rows && i < c.n; i++) {
    int64_t bytes = 0;
    for (int j = 0; j < c.n; j++)
      if (rows[j] == rows[i]) bytes += h3_type_bytes(&c.vals[j]->type);
    if (rows[i] > 0 && bytes > best_bytes) best = rows[i], best_bytes = bytes;
  }
  h3_status st = c.oom ? H3_ERR : H3_OK;
  out->v = st == H3_OK && best ? calloc((size_t)c.n, sizeof *out->v) : NULL;
  if (best && !out->v) st = H3_ERR;
  for (int i = 0; st == H3_OK && i < c.n; i++) {
    if (rows[i] != best) continue;
    h3_stream_value *sv = &out->v[out->n++];
    sv->v = c.vals[i];
    sv->row_bytes = h3_type_bytes(&c.vals[i]->type) / best;
    sv->offset = out->block_bytes;
    out->block_bytes += (sv->row_bytes + 255) & ~(int64_t)255;
  }
  out->layers = out->n ? best : 0;
  free(c.vals);
  free(c.index_uses);
  free(rows);
  loops_ctx lc = {out, false, false};
  if (st == H3_OK && out->n) h3_module_walk((h3_module *)m, loops_visit, &lc);
  if (lc.mixed) { /* a loop reading two blocks at once: nothing streams */
    h3_stream_set_free(out);
    return H3_OK;
  }
  if (st != H3_OK || lc.failed) {
    h3_stream_set_free(out);
    h3_diag_error(d, (h3_span){0}, H3_HINT_OOM, "out of memory planning the weight streaming");
    return H3_ERR;
  }
  return H3_OK;
}

void h3_stream_set_free(h3_stream_set *s) {
  free(s->loops);
  free(s->v);
  memset(s, 0, sizeof *s);
}

int h3_stream_set_index(const h3_stream_set *s, const h3_value *v) {
  for (int i = 0; i < s->n; i++)
    if (s->v[i].v == v) return i;
  return -1;
}

typedef struct {
  const h3_stream_set *s;
  const h3_op **seen; /* load-time ops counted (one per parameter and rotate) */
  int n;
  int64_t bytes;
} fixed_ctx;

static int fixed_visit(h3_op *op, void *ctx) {
  fixed_ctx *c = ctx;
  if (!h3_op_is_load_time(op)) return 0;
  for (int i = 0; i < c->n; i++)
    if (c->seen[i]->operands[0] == op->operands[0] &&
        h3_op_attr_int(c->seen[i], "rotate", 0) == h3_op_attr_int(op, "rotate", 0))
      return 0;
  if (c->seen) c->seen[c->n++] = op;
  for (int i = 0; i < op->n_results; i++)
    if (h3_stream_set_index(c->s, op->results[i]) < 0)
      c->bytes += h3_type_bytes(&op->results[i]->type);
  return 0;
}

typedef struct {
  const h3_value *p;
  int n;
} loadtime_ctx;

static int loadtime_visit(h3_op *op, void *ctx) {
  loadtime_ctx *c = ctx;
  if (h3_op_is_load_time(op) && op->operands[0] == c->p) c->n++;
  return 0;
}

int64_t h3_stream_fixed_weight_bytes(const h3_module *m, const h3_stream_set *s) {
  int n_ops = 0;
  for (int i = 0; i < m->n_params; i++)
    n_ops += m->params[i]->value ? m->params[i]->value->uses : 0;
  fixed_ctx c = {s, calloc((size_t)n_ops + 1, sizeof(h3_op *)), 0, 0};
  h3_module_walk((h3_module *)m, fixed_visit, &c);
  free(c.seen);
  for (int i = 0; i < m->n_params; i++) {
    const h3_value *v = m->params[i]->value;
    if (!v || h3_stream_set_index(s, v) >= 0) continue;
    loadtime_ctx lc = {v, 0};
    h3_module_walk((h3_module *)m, loadtime_visit, &lc);
    if (lc.n == 0 || lc.n != v->uses) c.bytes += h3_type_bytes(&v->type); /* not released */
  }
  return c.bytes;
}
