/* side_streams.c: the `side-streams` pass: an independent chain of small ops runs on a
 * second stream beside the main chain (the M3.1 decode step's indexer beside the qkv
 * projection, its shared expert beside router + moe).
 *
 * Contract with the executor and the memory plan (docs/passes.md, include/h3/mem_classes.h):
 *   - ops carrying `side = 1` form one contiguous run of a region: the side branch. At its
 *     first op the side stream waits for everything queued before it (the fork); every
 *     later op without `side` runs on the main stream, beside the branch.
 *   - the first op of the region after the run that reads a value of the branch carries
 *     `join = 1`: the main stream waits for the branch before it. The executor also joins
 *     before a loop, call or branch and at the end of the region.
 *   - the memory plan keeps every value live at some time of the window (from the run's
 *     first op to the join) live over the whole window, so no two ops that may run at once
 *     share a buffer.
 *   - every `linear` of at most MAX_ROWS rows in the window, on either stream, carries
 *     `beside = 1`: it runs while the other stream has work. A library GEMM sizes its grid
 *     to the whole card, and one that holds every SM leaves the other stream's kernels
 *     waiting for its last blocks (the batch-1 step: the indexer's chain stalled behind the
 *     qkv GEMV; the router behind the shared expert's gate_up GEMV, ending ~13 µs after it
 *     on an H200 and an H100 alike, about its whole time alone); a backend gives such a
 *     GEMM fewer SMs (cuda: H3_SIDE_SM_RESERVE).
 * Every op still computes what it computed: the pass only reorders (a topological order)
 * and marks, so the results are bitwise the same at every tier on the cpu backend, and on
 * cuda with one stream or two; `beside` may give a cuda GEMM another algorithm (another
 * rounding of its sums), as a tuning may.
 *
 * Which chain (per region: graph bodies and loop bodies of at most MAX_REGION_OPS ops; a
 * decode layer's body has ~60): for an op J with operands made by
 * ops of the region, chain E_i is the set of ops that only operand i of J depends on (its
 * ancestors that no other operand of J depends on). E_i is a candidate when every value it
 * makes is read only inside E_i, by J or after J; it holds a kernel and only side-eligible
 * ops (no loop, call, branch, collective or op whose kernels share state between ops; work
 * of at most MAX_ROWS rows: batch-sized work that leaves the card's memory system or SMs
 * idle, not a prefill's GEMMs); and it updates in place no buffer that a main op after its
 * last input (up to J) reads. A main op there that updates in place a buffer E_i reads (E_i
 * reads it first: a reader of the update would depend on it) moves right after J, after the
 * join, when no op up to J reads its results (M3.1 decode: the index cache's write, once
 * index-topk-early gives top-k the cache before it); else E_i is no candidate. E_i then
 * moves after the last op it depends on (how far after: below), and the main work of its
 * window is every other op between there and J but those that wait after J. Its worth is
 * the cost model's min(cost(E_i), cost(main work)); a region takes the worthiest candidate
 * (the cheaper chain on a tie, so the side never becomes the long path) while it reaches
 * MIN_OVERLAP_US, then the next whose window overlaps none taken. The branch goes no
 * earlier than needed: its window is the main ops back from J until they hold
 * WINDOW_KERNELS kernels and model COVER x the chain's cost (or all of them back to the
 * chain's inputs), so a chain of the region's inputs joined near its end does not hold
 * every buffer of the region apart.
 * Cost model (µs): 4 per kernel (a dependent launch's latency in a captured graph) plus the
 * bytes it reads and writes at 3.3 TB/s (the tensors an in-place op updates not counted; a
 * gather reads the rows it writes).
 */
#include "h3/op_registry.h"

#include "pass_internal.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_ROWS = 64 };        /* a side op's rows at the most (a decode batch) */
enum { MAX_REGION_OPS = 2048 }; /* larger regions are left alone: the analysis is quadratic */
#define MIN_OVERLAP_US 12.0 /* less modelled overlap is not worth a fork and a join */
enum { WINDOW_KERNELS = 8 };   /* a window's main kernels beyond these ... */
#define COVER 2.0              /* ... only while they model less than this x the chain */
#define LAUNCH_US 4.0       /* per kernel */
#define BYTES_PER_US 3.3e6  /* the H200's copy bandwidth, bytes per µs */

typedef struct {
  h3_op **ops; /* the region's ops but its terminator, in order */
  int n;
  int *pos;           /* by op id: index in ops, -1 outside the region */
  unsigned char *anc; /* n x n: anc[a * n + b] = b is an ancestor of a (or a itself) */
  int *producers;     /* per op: in-region producers of its operands (nested uses too) */
  int *n_prod, *prod_at;
} region_view;

typedef struct {
  h3_module *m;
  int n_branches;
  bool oom;
} ss_state;

/* ---- the region's dependence graph --------------------------------------------------- */
static int producer_of(const region_view *rv, const h3_value *v) {
  if (v->kind != H3_VALUE_RESULT || !v->def) return -1;
  return v->def->id >= 0 ? rv->pos[v->def->id] : -1;
}

typedef struct {
  region_view *rv;
  int at;     /* the top-level op whose nested ops are walked */
  int count;  /* producers found */
  int *out;   /* NULL: count only */
} prod_walk;

static int collect_producers(h3_op *op, void *ctx) {
  prod_walk *w = ctx;
  for (int i = 0; i < op->n_operands; i++) {
    int p = producer_of(w->rv, op->operands[i]);
    if (p < 0 || p == w->at) continue;
    if (w->out) w->out[w->count] = p;
    w->count++;
  }
  return 0;
}

static void walk_op_uses(region_view *rv, int k, prod_walk *w) {
  h3_op *op = rv->ops[k];
  collect_producers(op, w);
  for (int r = 0; r < op->n_regions; r++) h3_region_walk(&op->regions[r], collect_producers, w);
}

static void view_free(region_view *rv) {
  free(rv->ops);
  free(rv->pos);
  free(rv->anc);
  free(rv->producers);
  free(rv->n_prod);
  free(rv->prod_at);
  memset(rv, 0, sizeof *rv);
}

static bool view_build(region_view *rv, h3_module *m, h3_region *r) {
  memset(rv, 0, sizeof *rv);
  int n = 0;
  for (h3_op *op = r->first; op; op = op->next)
    if (op->code != H3_OP_YIELD && op->code != H3_OP_RETURN) n++;
  rv->n = n;
  rv->ops = malloc((size_t)(n + 1) * sizeof *rv->ops);
  rv->pos = malloc(((size_t)m->next_op_id + 1) * sizeof *rv->pos);
  rv->anc = calloc((size_t)n * (size_t)n + 1, 1);
  rv->n_prod = calloc((size_t)n + 1, sizeof *rv->n_prod);
  rv->prod_at = calloc((size_t)n + 1, sizeof *rv->prod_at);
  if (!rv->ops || !rv->pos || !rv->anc || !rv->n_prod || !rv->prod_at) return false;
  for (int i = 0; i <= m->next_op_id; i++) rv->pos[i] = -1;
  int k = 0;
  for (h3_op *op = r->first; op; op = op->next)
    if (op->code != H3_OP_YIELD && op->code != H3_OP_RETURN) {
      rv->ops[k] = op;
      rv->pos[op->id] = k++;
    }
  int total = 0;
  for (k = 0; k < n; k++) {
    prod_walk w = {rv, k, 0, NULL};
    walk_op_uses(rv, k, &w);
    rv->prod_at[k] = total;
    rv->n_prod[k] = w.count;
    total += w.count;
  }
  rv->producers = malloc((size_t)total * sizeof *rv->producers + 1);
  if (!rv->producers) return false;
  for (k = 0; k < n; k++) {
    prod_walk w = {rv, k, 0, rv->producers + rv->prod_at[k]};
    walk_op_uses(rv, k, &w);
  }
  /* ancestors: producers come earlier (SSA order), so one forward sweep closes them */
  for (k = 0; k < n; k++) {
    unsigned char *a = rv->anc + (size_t)k * n;
    a[k] = 1;
    for (int j = 0; j < rv->n_prod[k]; j++) {
      const unsigned char *b = rv->anc + (size_t)rv->producers[rv->prod_at[k] + j] * n;
      for (int x = 0; x < n; x++) a[x] |= b[x];
    }
  }
  return true;
}

/* ---- eligibility and cost --------------------------------------------------------------- */
static bool is_kernel(const h3_op *op) { return !h3_op_is_view(op->code) && !h3_op_is_load_time(op); }

/* Ops whose kernels keep state shared between ops of the same kind, so that two of them
 * must never run at once: the split argmax / sample_tokens (per-kernel device arrays) and
 * the int8 GEMMs (one accumulator buffer in the cuda backend). */
static bool shares_kernel_state(h3_opcode c) {
  return c == H3_OP_ARGMAX || c == H3_OP_SAMPLE_TOKENS || c == H3_OP_LINEAR_INT8 || c == H3_OP_MATMUL_I8;
}

/* Whether op updates operand i in place (a tensor it updates, not one it reads). */
static bool updated_operand(const h3_op *op, int i) {
  for (int r = 0; r < op->n_results; r++)
    if (h3_op_inplace_operand(op, r) == i) return true;
  return false;
}

static bool side_eligible(const h3_op *op) {
  if (h3_op_is_control_flow(op->code) || h3_op_is_collective(op->code) || h3_op_is_load_time(op) ||
      shares_kernel_state(op->code))
    return false;
  if (!is_kernel(op)) return true;
  /* the rows of its work: its results', or an in-place op's update (operand 1), not the
     tensors it updates */
  bool inplace = h3_op_is_inplace(op->code);
  for (int i = 0; i < op->n_results + (inplace ? 1 : 0); i++) {
    const h3_value *v = i < op->n_results ? op->results[i] : op->n_operands > 1 ? op->operands[1] : NULL;
    if (!v || (i < op->n_results && h3_op_inplace_operand(op, i) >= 0)) continue;
    if (v->type.rank >= 2 && v->type.dims[0] > MAX_ROWS) return false;
  }
  return true;
}

static double op_cost_us(const h3_op *op) {
  if (!is_kernel(op)) return 0;
  double bytes = 0;
  if (op->code == H3_OP_GATHER) /* reads the rows it writes */
    return LAUNCH_US + 2.0 * (double)h3_type_bytes(&op->results[0]->type) / BYTES_PER_US;
  for (int i = 0; i < op->n_operands; i++)
    if (!updated_operand(op, i)) bytes += (double)h3_type_bytes(&op->operands[i]->type);
  for (int r = 0; r < op->n_results; r++)
    if (h3_op_inplace_operand(op, r) < 0) bytes += (double)h3_type_bytes(&op->results[r]->type);
  return LAUNCH_US + bytes / BYTES_PER_US;
}

/* Whether op updates in place a buffer that other reads (an operand of other rooted there). */
static bool updates_read_of(const h3_op *op, const h3_op *other) {
  for (int r = 0; r < op->n_results; r++) {
    const int j = h3_op_inplace_operand(op, r);
    const h3_value *root = j >= 0 ? h3_value_root(op->operands[j]) : NULL;
    for (int i = 0; root && i < other->n_operands; i++)
      if (h3_value_root(other->operands[i]) == root) return true;
  }
  return false;
}

/* The main ops of (lo, j) that update in place a buffer a side op reads, into sink (room
 * for n, cleared here): each waits below J, after the join, where the side ops have read
 * the buffer (their reads come before the update in program order: a side op reading the
 * update would depend on it). False when a main op and a side op clash otherwise (a side op
 * updates what a main op reads) or an op up to J reads a result of one that must wait. */
static bool sink_clashes(const region_view *rv, const unsigned char *side, int lo, int j, unsigned char *sink) {
  memset(sink, 0, (size_t)rv->n);
  for (int k = lo + 1; k < j; k++) {
    if (side[k]) continue;
    for (int s = 0; s < rv->n; s++) {
      if (!side[s]) continue;
      if (updates_read_of(rv->ops[s], rv->ops[k])) return false;
      if (updates_read_of(rv->ops[k], rv->ops[s])) sink[k] = 1;
    }
    for (int x = k + 1; sink[k] && x <= j; x++)
      for (int t = 0; t < rv->n_prod[x]; t++)
        if (rv->producers[rv->prod_at[x] + t] == k) return false;
  }
  return true;
}

/* ---- one join ----------------------------------------------------------------------------- */
typedef struct {
  unsigned char *side; /* by index: in the branch */
  unsigned char *sink; /* by index: a main op that moves right after J (sink_clashes) */
  int after;           /* the branch goes right after this index (-1: region start) */
  double benefit, cost;
} candidate;

/* Chain i of join j into c (c->side has room for n); false when it is no candidate. */
static bool chain_of(const region_view *rv, int j, int operand, candidate *c) {
  int n = rv->n;
  const h3_op *J = rv->ops[j];
  int p = producer_of(rv, J->operands[operand]);
  if (p < 0) return false;
  const unsigned char *mine = rv->anc + (size_t)p * n;
  memset(c->side, 0, (size_t)n);
  int kernels = 0;
  for (int x = 0; x < n; x++) {
    if (!mine[x]) continue;
    bool shared = false;
    for (int o = 0; o < J->n_operands && !shared; o++) {
      int q = producer_of(rv, J->operands[o]);
      if (o != operand && q >= 0 && rv->anc[(size_t)q * n + x]) shared = true;
    }
    if (shared) continue;
    if (!side_eligible(rv->ops[x]) || h3_op_attr(rv->ops[x], "side")) return false;
    c->side[x] = 1;
    kernels += is_kernel(rv->ops[x]);
  }
  if (!kernels) return false;
  /* the chain's outside producers come before its new place */
  int after = -1;
  for (int k = 0; k < n; k++)
    for (int t = 0; c->side[k] && t < rv->n_prod[k]; t++) {
      int q = rv->producers[rv->prod_at[k] + t];
      if (!c->side[q] && q > after) after = q;
    }
  if (after >= j) return false;
  /* in-place clashes over every main op a side op may move past, not just the window's: such
     an op waits after J when nothing before J needs it, else there is no branch */
  if (!sink_clashes(rv, c->side, after, j, c->sink)) return false;
  /* every reader of the chain's values is in it, is J, comes after J or waits after it */
  for (int k = 0; k < j; k++)
    for (int t = 0; !c->side[k] && !c->sink[k] && t < rv->n_prod[k]; t++)
      if (c->side[rv->producers[rv->prod_at[k] + t]]) return false;
  double side_cost = 0, reach = 0; /* reach: the modelled cost of the main ops walked so far */
  for (int k = 0; k < n; k++)
    if (c->side[k]) side_cost += op_cost_us(rv->ops[k]);
  /* the window: from J back over the main ops until they hold WINDOW_KERNELS kernels and
     cover the chain COVER times, or back to the chain's inputs; the branch goes right after
     the main op before them (a longer window only keeps more values live) */
  int first = j, main_kernels = 0;
  for (int k = j - 1; k > after && (main_kernels < WINDOW_KERNELS || reach < COVER * side_cost); k--)
    if (!c->side[k] && !c->sink[k]) {
      reach += op_cost_us(rv->ops[k]);
      main_kernels += is_kernel(rv->ops[k]);
      first = k;
    }
  after = first - 1;
  while (after >= 0 && (c->side[after] || c->sink[after])) after--; /* a sunk op leaves */
  /* the window's cost summed again in program order: candidates are compared by it, and a
     tie must not depend on the order of a floating-point sum */
  double main_cost = 0;
  for (int k = first; k < j; k++)
    if (!c->side[k] && !c->sink[k]) main_cost += op_cost_us(rv->ops[k]);
  if (!main_kernels) return false;
  c->after = after;
  c->cost = side_cost;
  c->benefit = side_cost < main_cost ? side_cost : main_cost;
  return true;
}

/* The rows of a linear's result (all its dims but the last). */
static long long linear_rows(const h3_op *op) {
  const h3_type *y = &op->results[0]->type;
  long long n = y->rank > 0 && y->dims[y->rank - 1] > 0 ? y->dims[y->rank - 1] : 1;
  return (long long)h3_type_numel(y) / n;
}

/* Moves the branch right after index `after` and the sunk ops right after J (in their
 * order), marks the branch and the join, and marks `beside` the linears of the window (the
 * branch's first op up to the join), the branch's and the main stream's. */
static void apply(ss_state *s, region_view *rv, h3_region *r, const candidate *c, int j) {
  h3_op *below = rv->ops[j]->next;
  for (int k = 0; k < rv->n; k++)
    if (c->sink[k]) h3_op_move_before(rv->ops[k], r, below);
  h3_op *before = c->after >= 0 ? rv->ops[c->after]->next : r->first, *first = NULL;
  for (int k = 0; k < rv->n; k++) {
    if (!c->side[k]) continue;
    h3_op *op = rv->ops[k];
    if (op != before)
      h3_op_move_before(op, r, before);
    else
      before = op->next;
    h3_op_set_attr(s->m, op, h3_attr_int(s->m, "side", 1));
    if (!first) first = op;
  }
  h3_op_set_attr(s->m, rv->ops[j], h3_attr_int(s->m, "join", 1));
  for (h3_op *op = first; op && op != rv->ops[j]; op = op->next)
    if (op->code == H3_OP_LINEAR && linear_rows(op) <= MAX_ROWS)
      h3_op_set_attr(s->m, op, h3_attr_int(s->m, "beside", 1));
  s->n_branches++;
}

/* Windows [first side op, join] of the branches already marked in the region, as index
 * pairs into w (room for n pairs); returns their count. */
static int windows_of(const region_view *rv, int *w) {
  int n = 0;
  for (int k = 0; k < rv->n; k++) {
    if (!h3_op_attr(rv->ops[k], "side") || (k > 0 && h3_op_attr(rv->ops[k - 1], "side"))) continue;
    int end = k;
    while (end < rv->n && !h3_op_attr(rv->ops[end], "join")) end++;
    w[2 * n] = k;
    w[2 * n + 1] = end;
    n++;
  }
  return n;
}

/* Marks the best branch of region r whose window overlaps none marked before; false when
 * there is none (or memory ran out: s->oom). */
static bool branch_once(ss_state *s, h3_region *r) {
  region_view rv;
  candidate best = {0}, cur = {0};
  int *win = NULL;
  bool built = view_build(&rv, s->m, r);
  if (built) {
    best.side = malloc((size_t)rv.n + 1);
    cur.side = malloc((size_t)rv.n + 1);
    best.sink = malloc((size_t)rv.n + 1);
    cur.sink = malloc((size_t)rv.n + 1);
    win = malloc((size_t)(2 * rv.n + 2) * sizeof *win);
  }
  if (!built || !best.side || !cur.side || !best.sink || !cur.sink || !win) {
    s->oom = true;
    free(best.side);
    free(cur.side);
    free(best.sink);
    free(cur.sink);
    free(win);
    view_free(&rv);
    return false;
  }
  int n_win = windows_of(&rv, win), best_j = -1;
  for (int j = 0; j < rv.n; j++) {
    const h3_op *J = rv.ops[j];
    if (!is_kernel(J) || !side_eligible(J) || h3_op_attr(J, "side") || h3_op_attr(J, "join")) continue;
    for (int o = 0; o < J->n_operands; o++) {
      if (!chain_of(&rv, j, o, &cur) || cur.benefit < MIN_OVERLAP_US) continue;
      bool clear = true;
      for (int w = 0; w < n_win && clear; w++) clear = j < win[2 * w] || cur.after >= win[2 * w + 1];
      if (!clear) continue;
      if (best_j >= 0 && (cur.benefit < best.benefit || (cur.benefit == best.benefit && cur.cost >= best.cost)))
        continue;
      unsigned char *t = best.side, *u = best.sink;
      best = cur;
      cur.side = t, cur.sink = u;
      best_j = j;
    }
  }
  if (best_j >= 0) apply(s, &rv, r, &best, best_j);
  free(best.side);
  free(cur.side);
  free(best.sink);
  free(cur.sink);
  free(win);
  view_free(&rv);
  return best_j >= 0;
}

static void run_region(ss_state *s, h3_region *r) {
  int n = 0;
  for (h3_op *op = r->first; op; op = op->next, n++)
    if (op->code == H3_OP_LOOP)
      for (int i = 0; i < op->n_regions; i++) run_region(s, &op->regions[i]);
  if (n > MAX_REGION_OPS) return;
  while (!s->oom && branch_once(s, r)) {
  }
}

static h3_status ss_run(h3_module *m, h3_pass_context *ctx, h3_diag *d) {
  ss_state s = {m, 0, false};
  for (int g = 0; g < m->n_graphs && !s.oom; g++) run_region(&s, &m->graphs[g]->body);
  if (s.oom) {
    h3_diag_error(d, (h3_span){0}, H3_HINT_OOM, "side-streams: out of memory");
    return H3_ERR;
  }
  h3_pass_report(ctx, "side-stream branches: %d", s.n_branches);
  return H3_OK;
}

const h3_pass h3_pass_side_streams = {
    .name = "side-streams",
    .description = "run an independent chain of small ops (<= 64 rows; M3.1 decode: the "
                   "indexer beside qkv, the shared expert beside router + moe) on a second "
                   "stream: reordered after its inputs, `side`/`join` marks, `beside` on the "
                   "window's linears (either stream); bitwise neutral on the cpu",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = true,
    .requires = {NULL},
    .run = ss_run,
};
