/* memory_plan.c: the `memory-plan` pass: one activation arena per graph, with buffer
 * reuse driven by liveness.
 *
 * Which values get a place, when each is live and which share a buffer (views, loop
 * slots, in-place ops, donated inputs, calls) are the rules of include/h3/mem_classes.h
 * (plan/mem_classes.c), which the plan reader checks plans against.
 * Placement: buffers in decreasing size, each at the lowest H3_MEM_ALIGN (256-byte) aligned
 * offset where it overlaps no placed buffer that is live at the same time (greedy by size).
 * A class in a donated input's buffer gets offset h3_offset_of_input(j) for every member.
 * Results: value->offset, graph attrs `arena_bytes` (arena size) and `peak_bytes` (the
 * most bytes of buffers live at one time), and a report line per graph.
 */
#include "h3/mem_classes.h"

#include "pass_internal.h"

#include <stdlib.h>
#include <string.h>

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

static int64_t align_up(int64_t n) { return (n + H3_MEM_ALIGN - 1) / H3_MEM_ALIGN * H3_MEM_ALIGN; }

typedef struct {
  int64_t lo, hi;
} range;

static int by_lo(const void *a, const void *b) {
  const range *x = a, *y = b;
  return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Lowest aligned offset for buffer i that avoids the placed buffers [0, i) live with it;
 * `taken` has room for i ranges. */
static int64_t place(const h3_mem_classes *p, const buffer *b, int i, range *taken) {
  int n = 0;
  for (int j = 0; j < i; j++)
    if (h3_mem_classes_overlap(p, b[i].cls, b[j].cls))
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
static int64_t peak_bytes(const h3_mem_classes *p, const buffer *b, int n) {
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

/* ---- one graph -------------------------------------------------------------------------- */
static int reset_offsets(h3_op *op, void *ctx) {
  (void)ctx;
  for (int i = 0; i < op->n_results; i++) op->results[i]->offset = -1;
  for (int r = 0; r < op->n_regions; r++)
    for (int a = 0; a < op->regions[r].n_args; a++) op->regions[r].args[a]->offset = -1;
  return 0;
}

static h3_status plan_graph(h3_module *m, h3_graph *g, h3_pass_context *ctx, h3_diag *d) {
  h3_mem_classes p = {0};
  buffer *bufs = NULL;
  range *taken = NULL;
  h3_status st = H3_OK;
  h3_region_walk(&g->body, reset_offsets, NULL);
  for (int i = 0; i < g->n_inputs; i++) g->inputs[i]->offset = -1;
  if (h3_mem_classes_build(&p, m, g) != H3_OK) goto oom;

  int n = 0;
  int64_t sum = 0;
  bufs = malloc((size_t)(p.n_slots + 1) * sizeof *bufs);
  if (!bufs) goto oom;
  for (int i = 0; i < p.n_slots; i++) {
    if (!p.slots[i].view) sum += h3_type_bytes(&p.slots[i].v->type);
    if (p.slots[i].cls != i) continue;
    int donor = h3_mem_class_donor(&p, i);
    if (donor == -2) {
      h3_diag_error(d, g->span, "update the input through index() rows or whole, not slices",
                    "memory-plan: graph '%s': a value updated in place sits at another offset "
                    "of a donated input than the input itself", g->name);
      st = H3_ERR;
      goto done;
    }
    if (donor >= 0) { /* lives in the donated input's own buffer */
      for (int s = i; s >= 0; s = p.slots[s].next)
        if (s != h3_mem_slot_of(&p, g->inputs[donor])) p.slots[s].v->offset = h3_offset_of_input(donor);
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
  h3_mem_classes_free(&p);
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
