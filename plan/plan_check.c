/* plan_check.c: the reader's checks of what the executor trusts in a plan: the memory plan
 * (every value's offset) and the kernels' launch fields.
 *
 * Memory: the classes and lifetimes of mem_classes.h are built again from the plan's IR (the
 * planner's own code, so every plan h3c writes passes) and each graph's offsets are checked
 * against them:
 *   - a value the planner gives no place (parameters, inputs, load-time results, views of
 *     memory outside the arena) has none (offset -1); values inside fused regions are not
 *     looked at (the kernel's own: the executor never gives them memory);
 *   - a value with a place is left out (-1: the runtime gives it a buffer of its own), in
 *     its class's donated input ("at input J", only for that input's class), or in the
 *     arena at base + delta, one base per class, a multiple of H3_MEM_ALIGN, with
 *     offset + bytes <= arena_bytes (64-bit checked: a sum past INT64_MAX fails too);
 *   - no two classes that are live at the same time use the same arena bytes: a sweep
 *     over time with a max segment tree over the classes' byte ranges, O(n log n).
 * A class's live time is the union of all its members' intervals and its bytes span its
 * placed members: what the planner reserved for it, or less.
 * Launch: grid, block and dynamic shared bytes, which the cuda backend passes to
 * cudaLaunchKernel as they are, within CUDA's limits on sm_90 and matching what the
 * kernel's source declares (its __launch_bounds__, its extern __shared__ array).
 */
#include "plan_internal.h"
#include "h3/mem_classes.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECOMPILE "recompile the plan with h3c"
#define MAX_SHARED_BYTES (227 * 1024) /* per block on sm_90, with the opt-in */

/* ---- launch fields ------------------------------------------------------------------------ */
/* The thread count of `__launch_bounds__(N[, M]) NAME(` in src, or 0 when it declares none. */
static int64_t launch_bounds(const char *src, const char *name) {
  static const char key[] = "__launch_bounds__(";
  size_t nl = strlen(name);
  for (const char *at = strstr(src, key); at; at = strstr(at + 1, key)) {
    char *end;
    long long n = strtoll(at + sizeof key - 1, &end, 10);
    const char *close = strchr(end, ')');
    if (!close) return 0;
    for (close++; *close == ' '; close++) {
    }
    if (strncmp(close, name, nl) == 0 && close[nl] == '(') return n;
  }
  return 0;
}

const char *plan_check_launch(const h3_kernel *k, char *msg, size_t len) {
  static const int64_t grid_max[3] = {2147483647, 65535, 65535}, block_max[3] = {1024, 1024, 64};
  for (int i = 0; i < 3; i++)
    if (k->grid[i] < 1 || k->grid[i] > grid_max[i]) {
      snprintf(msg, len, "grid %c is %lld; CUDA allows 1 to %lld", "xyz"[i], (long long)k->grid[i],
               (long long)grid_max[i]);
      return "grid";
    }
  int64_t threads = 1;
  for (int i = 0; i < 3; i++) {
    if (k->block[i] < 1 || k->block[i] > block_max[i]) {
      snprintf(msg, len, "block %c is %lld; CUDA allows 1 to %lld", "xyz"[i],
               (long long)k->block[i], (long long)block_max[i]);
      return "block";
    }
    threads *= k->block[i]; /* at most 1024 * 1024 * 64 */
  }
  if (threads > 1024) {
    snprintf(msg, len, "the block has %lld threads; CUDA allows at most 1024", (long long)threads);
    return "block";
  }
  int64_t bounds = launch_bounds(k->source, k->name);
  if (bounds > 0 && threads != bounds) {
    snprintf(msg, len, "the block has %lld threads but the kernel is written for %lld "
             "(__launch_bounds__ in its source)", (long long)threads, (long long)bounds);
    return "block";
  }
  if (k->shared_bytes < 0 || k->shared_bytes > MAX_SHARED_BYTES) {
    snprintf(msg, len, "shared_bytes is %lld; a block has 0 to %d bytes of shared memory",
             (long long)k->shared_bytes, MAX_SHARED_BYTES);
    return "shared_bytes";
  }
  if (k->shared_bytes > 0 && !strstr(k->source, "extern __shared__")) {
    snprintf(msg, len, "shared_bytes is %lld but the kernel declares no dynamic shared memory "
             "(extern __shared__)", (long long)k->shared_bytes);
    return "shared_bytes";
  }
  return NULL;
}

/* ---- memory plan: offsets ----------------------------------------------------------------- */
typedef struct {
  h3_graph *g;
  h3_mem_classes c;
  int64_t arena;
  int64_t *base, *top; /* by class head: placed base (-1: none placed yet), end of its bytes */
  int *first;          /* by class head: the slot that set base */
  h3_diag *d;
  bool bad;
} checker;

static const char *vname(const h3_value *v) { return v->name ? v->name : "?"; }

/* Reports the first problem, at v's span (the graph's when v is NULL); returns 1. */
__attribute__((format(printf, 3, 4))) static int fail(checker *k, const h3_value *v,
                                                      const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  h3_diag_verror(k->d, v ? v->span : k->g->span, RECOMPILE, fmt, ap);
  va_end(ap);
  k->bad = true;
  return 1;
}

/* One value against its class; nonzero on the first problem. */
static int check_value(checker *k, h3_value *v) {
  int s = h3_mem_slot_of(&k->c, v);
  int64_t o = v->offset;
  if (o == -1) return 0; /* no place, or a buffer of its own */
  if (s < 0 || k->c.slots[s].donor >= 0)
    return fail(k, v, "value %%%s is at %s %lld, but the memory plan gives it no place", vname(v),
                o >= 0 ? "offset" : "input", (long long)(o >= 0 ? o : h3_offset_input(o)));
  const h3_mem_slot *sl = &k->c.slots[s];
  int donor = h3_mem_class_donor(&k->c, sl->cls);
  if (donor == -2)
    return fail(k, v, "value %%%s: an in-place update sits at another offset of a donated input "
                "than the input itself", vname(v));
  if (o <= -2 && h3_offset_input(o) != donor)
    return fail(k, v, "value %%%s is at input %d, but the memory plan does not put it in that "
                "input's buffer", vname(v), h3_offset_input(o));
  if (o <= -2) return 0;
  if (donor >= 0)
    return fail(k, v, "value %%%s at offset %lld belongs in donated input %d's buffer (at input %d)",
                vname(v), (long long)o, donor, donor);
  int64_t base = o - sl->delta, bytes = h3_type_bytes(&v->type), top;
  if (k->base[sl->cls] < 0) {
    if (base < 0 || base % H3_MEM_ALIGN != 0) {
      if (sl->delta == 0)
        return fail(k, v, "value %%%s at offset %lld is not %d-byte aligned", vname(v), (long long)o,
                    H3_MEM_ALIGN);
      return fail(k, v, "value %%%s at offset %lld lies %lld bytes into a buffer that would start at "
                  "%lld, not a multiple of %d", vname(v), (long long)o, (long long)sl->delta,
                  (long long)base, H3_MEM_ALIGN);
    }
    k->base[sl->cls] = base;
    k->first[sl->cls] = s;
  } else if (base != k->base[sl->cls]) {
    const h3_mem_slot *f = &k->c.slots[k->first[sl->cls]];
    return fail(k, v, "value %%%s at offset %lld should be at %lld: it shares a buffer with %%%s "
                "(at offset %lld)", vname(v), (long long)o, (long long)(k->base[sl->cls] + sl->delta),
                vname(f->v), (long long)f->v->offset);
  }
  if (__builtin_add_overflow(o, bytes, &top) || top > k->arena)
    return fail(k, v, "value %%%s at offset %lld (%lld bytes) does not fit the %lld-byte arena of "
                "graph '%s'", vname(v), (long long)o, (long long)bytes, (long long)k->arena, k->g->name);
  if (top > k->top[sl->cls]) k->top[sl->cls] = top;
  return 0;
}

/* The results and region arguments of op. Values inside a fused region are the kernel's
 * own: the executor never gives them memory, so their offsets are not looked at. */
static int check_op_values(h3_op *op, void *ctx) {
  checker *k = ctx;
  if (op->parent && op->parent->parent && op->parent->parent->code == H3_OP_FUSED) return 0;
  for (int i = 0; i < op->n_results; i++)
    if (check_value(k, op->results[i])) return 1;
  for (int r = 0; r < op->n_regions && op->code != H3_OP_FUSED; r++)
    for (int a = 0; a < op->regions[r].n_args; a++)
      if (check_value(k, op->regions[r].args[a])) return 1;
  return 0;
}

/* ---- memory plan: overlap ----------------------------------------------------------------- */
typedef struct {
  int64_t lo, hi; /* arena bytes [lo, hi) */
  int64_t t0, t1; /* live from t0 to t1, both included */
  int cls;
} run;

typedef struct {
  int64_t t;
  int run; /* >= 0: starts; ~run: ends (at t1 + 1) */
} event;

static int by_start(const void *a, const void *b) {
  const h3_mem_slot *x = *(const h3_mem_slot *const *)a, *y = *(const h3_mem_slot *const *)b;
  return (x->start > y->start) - (x->start < y->start);
}

static int by_lo(const void *a, const void *b) {
  const run *x = a, *y = b;
  return (x->lo > y->lo) - (x->lo < y->lo);
}

static int by_time(const void *a, const void *b) {
  const event *x = a, *y = b;
  if (x->t != y->t) return x->t < y->t ? -1 : 1;
  return (x->run >= 0) - (y->run >= 0); /* ends first: [a, t - 1] and [t, b] do not meet */
}

/* A placed member of class cls live at time t, preferably one whose bytes meet [lo, hi). */
static const h3_value *member_at(const checker *k, int cls, int64_t t, int64_t lo, int64_t hi) {
  const h3_value *any = k->c.slots[cls].v;
  for (int s = cls; s >= 0; s = k->c.slots[s].next) {
    const h3_mem_slot *m = &k->c.slots[s];
    if (m->v->offset < 0 || m->start > t || m->end < t) continue;
    if (m->v->offset < hi && lo < m->v->offset + h3_type_bytes(&m->v->type)) return m->v;
    any = m->v;
  }
  return any;
}

/* The live runs of every placed class: its members' intervals merged (touching ones too). */
static run *class_runs(checker *k, int *n_out) {
  int n = 0, ns = k->c.n_slots;
  run *runs = malloc((size_t)(ns + 1) * sizeof *runs);
  const h3_mem_slot **members = malloc((size_t)(ns + 1) * sizeof *members);
  if (!runs || !members) {
    free(runs), free(members);
    return NULL;
  }
  for (int c = 0; c < ns; c++) {
    if (k->c.slots[c].cls != c || k->base[c] < 0 || k->top[c] <= k->base[c]) continue;
    int m = 0;
    for (int s = c; s >= 0; s = k->c.slots[s].next) members[m++] = &k->c.slots[s];
    qsort(members, (size_t)m, sizeof *members, by_start);
    for (int i = 0; i < m; i++) {
      if (i > 0 && members[i]->start <= runs[n - 1].t1 + 1) {
        if (members[i]->end > runs[n - 1].t1) runs[n - 1].t1 = members[i]->end;
        continue;
      }
      runs[n++] = (run){k->base[c], k->top[c], members[i]->start, members[i]->end, c};
    }
  }
  free(members);
  *n_out = n;
  return runs;
}

/* Whether two runs that meet in time meet in bytes: events in time order; on each start,
 * the most `hi` among the live runs with lo < this hi (a max segment tree over the runs in
 * lo order) must not pass this lo. Reports the first such pair. */
static void check_overlap(checker *k) {
  int n = 0;
  run *runs = class_runs(k, &n);
  int size = 1;
  while (size < n) size *= 2;
  event *ev = runs ? malloc((size_t)(2 * n + 1) * sizeof *ev) : NULL;
  int64_t *hi = ev ? malloc((size_t)(2 * size) * sizeof *hi) : NULL;
  int *who = hi ? malloc((size_t)(2 * size) * sizeof *who) : NULL;
  if (!who) {
    free(runs), free(ev), free(hi);
    fail(k, NULL, "out of memory checking the memory plan of graph '%s'", k->g->name);
    return;
  }
  qsort(runs, (size_t)n, sizeof *runs, by_lo);
  for (int i = 0; i < n; i++) {
    ev[2 * i] = (event){runs[i].t0, i};
    ev[2 * i + 1] = (event){runs[i].t1 + 1, ~i};
  }
  qsort(ev, (size_t)(2 * n), sizeof *ev, by_time);
  for (int i = 0; i < 2 * size; i++) hi[i] = INT64_MIN, who[i] = -1;
  for (int e = 0; e < 2 * n && !k->bad; e++) {
    int r = ev[e].run >= 0 ? ev[e].run : ~ev[e].run;
    if (ev[e].run >= 0) {
      int lo_n = 0, top = n; /* runs [0, lo_n) have lo < runs[r].hi */
      while (lo_n < top) {
        int mid = (lo_n + top) / 2;
        if (runs[mid].lo < runs[r].hi) lo_n = mid + 1;
        else top = mid;
      }
      int64_t best = INT64_MIN;
      int q = -1;
      for (int a = size, b = size + lo_n; a < b; a /= 2, b /= 2) {
        if (a & 1) {
          if (hi[a] > best) best = hi[a], q = who[a];
          a++;
        }
        if (b & 1) {
          b--;
          if (hi[b] > best) best = hi[b], q = who[b];
        }
      }
      if (q >= 0 && best > runs[r].lo) {
        int64_t t = runs[r].t0;
        const h3_value *a = member_at(k, runs[r].cls, t, runs[q].lo, runs[q].hi);
        const h3_value *b = member_at(k, runs[q].cls, t, runs[r].lo, runs[r].hi);
        fail(k, a, "value %%%s (offset %lld, %lld bytes) and %%%s (offset %lld, %lld bytes) are live "
             "at the same time in overlapping arena bytes", vname(a), (long long)a->offset,
             (long long)h3_type_bytes(&a->type), vname(b), (long long)b->offset,
             (long long)h3_type_bytes(&b->type));
        h3_diag_note(k->d, b->span, "value %%%s is defined here", vname(b));
      }
    }
    int i = size + r;
    hi[i] = ev[e].run >= 0 ? runs[r].hi : INT64_MIN;
    who[i] = r;
    for (i /= 2; i >= 1; i /= 2) {
      int w = hi[2 * i] >= hi[2 * i + 1] ? 2 * i : 2 * i + 1;
      hi[i] = hi[w], who[i] = who[w];
    }
  }
  free(runs), free(ev), free(hi), free(who);
}

/* ---- memory plan: one graph --------------------------------------------------------------- */
static void check_graph(h3_module *m, h3_graph *g, h3_diag *d) {
  checker k = {.g = g, .d = d};
  const h3_attr *a = h3_graph_attr(g, "arena_bytes");
  k.arena = a && a->kind == H3_ATTR_INT ? a->i : 0;
  if (k.arena < 0) {
    fail(&k, NULL, "graph '%s': arena_bytes %lld is negative", g->name, (long long)k.arena);
    return;
  }
  if (h3_mem_classes_build(&k.c, m, g) != H3_OK) {
    fail(&k, NULL, "out of memory checking the memory plan of graph '%s'", g->name);
    return;
  }
  int ns = k.c.n_slots;
  k.base = malloc((size_t)(ns + 1) * sizeof *k.base);
  k.top = malloc((size_t)(ns + 1) * sizeof *k.top);
  k.first = malloc((size_t)(ns + 1) * sizeof *k.first);
  if (!k.base || !k.top || !k.first) {
    fail(&k, NULL, "out of memory checking the memory plan of graph '%s'", g->name);
  } else {
    for (int i = 0; i < ns; i++) k.base[i] = -1, k.top[i] = 0, k.first[i] = -1;
    for (int i = 0; i < g->n_inputs && !k.bad; i++) check_value(&k, g->inputs[i]);
    if (!k.bad) h3_region_walk(&g->body, check_op_values, &k);
    if (!k.bad) check_overlap(&k);
  }
  free(k.base), free(k.top), free(k.first);
  h3_mem_classes_free(&k.c);
}

h3_status h3_plan_check_memory(h3_module *m, h3_diag *d) {
  int before = d->errors;
  for (int i = 0; i < m->n_graphs && d->errors == before; i++) check_graph(m, m->graphs[i], d);
  return d->errors == before ? H3_OK : H3_ERR;
}
