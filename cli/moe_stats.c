/* moe_stats.c: h3exec --moe-stats (contract in moe_stats.h). */
#include "moe_stats.h"

#include "h3/op_registry.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  int64_t rows, experts; /* the group: a call's row count and its E */
  int64_t calls, sum, min, max;
} group;

struct moe_stats {
  h3_backend *b;
  group *g;
  int n, cap;
  int32_t *ids; /* the host copy of the current call's ids */
  size_t ids_cap;
  unsigned char *seen; /* by expert */
  int64_t seen_cap;
};

moe_stats *moe_stats_new(h3_backend *b, h3_diag *d) {
  moe_stats *x = calloc(1, sizeof *x);
  if (!x) h3_diag_error(d, (h3_span){0}, H3_HINT_OOM, "--moe-stats: out of memory");
  else x->b = b;
  return x;
}

void moe_stats_free(moe_stats *x) {
  if (!x) return;
  free(x->g);
  free(x->ids);
  free(x->seen);
  free(x);
}

void moe_stats_reset(void *ctx) { ((moe_stats *)ctx)->n = 0; }

static group *group_of(moe_stats *x, int64_t rows, int64_t experts) {
  for (int i = 0; i < x->n; i++)
    if (x->g[i].rows == rows && x->g[i].experts == experts) return &x->g[i];
  if (x->n == x->cap) {
    int cap = 2 * x->cap + 4;
    group *g = realloc(x->g, (size_t)cap * sizeof *g);
    if (!g) return NULL;
    x->g = g, x->cap = cap;
  }
  x->g[x->n] = (group){rows, experts, 0, 0, INT64_MAX, 0};
  return &x->g[x->n++];
}

h3_status moe_stats_observe(void *ctx, const h3_op *op, const h3_tensor *in, int n_in,
                            const h3_tensor *out, int n_out, h3_diag *d) {
  (void)out, (void)n_out;
  moe_stats *x = ctx;
  if (op->code != H3_OP_MOE || n_in < 4 || in[3].type.dtype != H3_I32 || in[1].type.rank != 3) return H3_OK;
  const int64_t rows = in[3].type.dims[0];
  const int64_t experts = in[1].type.dims[0] * h3_op_attr_int(op, "ranks", 1); /* ids are global */
  const size_t n = (size_t)h3_type_numel(&in[3].type);
  if (n > x->ids_cap) {
    int32_t *ids = realloc(x->ids, n * sizeof *ids);
    if (!ids) goto oom;
    x->ids = ids, x->ids_cap = n;
  }
  if (experts > x->seen_cap) {
    unsigned char *seen = realloc(x->seen, (size_t)experts);
    if (!seen) goto oom;
    x->seen = seen, x->seen_cap = experts;
  }
  if (n && x->b->ops->download(x->b, x->ids, in[3].data, n * sizeof *x->ids, d) != H3_OK) return H3_ERR;
  memset(x->seen, 0, (size_t)experts);
  int64_t touched = 0;
  for (size_t i = 0; i < n; i++) {
    const int32_t e = x->ids[i];
    if (e >= 0 && e < experts && !x->seen[e]) x->seen[e] = 1, touched++;
  }
  group *g = group_of(x, rows, experts);
  if (!g) goto oom;
  g->calls++, g->sum += touched;
  if (touched < g->min) g->min = touched;
  if (touched > g->max) g->max = touched;
  return H3_OK;
oom:
  h3_diag_error(d, op->span, H3_HINT_OOM, "--moe-stats: out of memory");
  return H3_ERR;
}

void moe_stats_print(FILE *out, const moe_stats *x) {
  fprintf(out, "=== moe experts touched (--moe-stats: distinct experts a moe call's rows name) ===\n");
  if (!x->n) {
    fprintf(out, "  (no moe op ran)\n");
    return;
  }
  fprintf(out, "  %8s %8s %10s %6s %6s %8s\n", "rows", "calls", "mean", "min", "max", "experts");
  for (int i = 0; i < x->n; i++) {
    const group *g = &x->g[i];
    fprintf(out, "  %8lld %8lld %10.2f %6lld %6lld %8lld\n", (long long)g->rows, (long long)g->calls,
            (double)g->sum / (double)g->calls, (long long)g->min, (long long)g->max, (long long)g->experts);
  }
}
