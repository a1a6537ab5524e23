/* report.c: h3exec's closing report, in the style of trtexec.
 *
 * Sections: what ran (plan, model, config, graph, backend, weights, seed); what was on or
 * off (quality tier, fused groups by tier, norm+modulate sites, the memory plan of every
 * graph, device bytes);
 * latency over the measured iterations (min / median / mean / p90 / p99, nearest-rank
 * percentiles); the per-op profile (op kind, executions, total ms, share of the op time),
 * sorted by time. Pure formatting: every number comes from the h3_report.
 */
#include "h3/op_registry.h"
#include "h3/residency.h"
#include "h3/runtime.h"
#include "h3/int8.h"

#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double h3_percentile(const double *v, int n, double p) {
  if (n <= 0) return 0.0;
  double *s = malloc((size_t)n * sizeof *s);
  if (!s) return v[0];
  memcpy(s, v, (size_t)n * sizeof *s);
  qsort(s, (size_t)n, sizeof *s, cmp_double);
  int rank = (int)((p / 100.0) * n + 0.999999999); /* nearest rank: ceil(p/100 * n) */
  if (rank < 1) rank = 1;
  if (rank > n) rank = n;
  double r = s[rank - 1];
  free(s);
  return r;
}

typedef struct {
  int exact, lossless, other;
} fused_count;

static int count_fused(h3_op *op, void *ctx) {
  fused_count *c = ctx;
  if (op->code == H3_OP_FUSED) {
    switch (h3_op_attr_tier(op, "tier", H3_TIER_HIGH)) {
    case H3_TIER_EXACT: c->exact++; break;
    case H3_TIER_LOSSLESS: c->lossless++; break;
    default: c->other++; break;
    }
  }
  return 0;
}

static void bytes_text(char *buf, size_t n, double bytes) { h3_size_text((int64_t)bytes, buf, n); }

/* The --device-memory lines (docs/streaming.md): the residency plan, and the copy time per
 * pass of the streamed loop (per step) with how much of it the compute can hide. */
static void print_streaming(FILE *out, const h3_report *r) {
  const h3_streaming *s = r->streaming;
  char a[32], b[32], c[32], e[32], f[32];
  if (r->device_memory <= 0) return;
  if (!s || s->ring_slots == 0) {
    fprintf(out, "  streaming        : off (--device-memory %s holds every weight",
            h3_size_text(r->device_memory, a, sizeof a));
    if (s && s->min_budget > 0)
      fprintf(out, ": %s planned; the smallest budget that runs: %s (%lld bytes)",
              h3_size_text(s->device_bytes, b, sizeof b), h3_size_text(s->min_budget, f, sizeof f),
              (long long)s->min_budget);
    fprintf(out, ")\n");
    return;
  }
  int64_t streamed = s->layers - s->resident_blocks;
  fprintf(out,
          "  streaming        : budget %s: resident %s (fixed %s + %lld of %lld blocks) + ring "
          "%lld x %s; smallest budget %s (%lld bytes)\n",
          h3_size_text(s->budget, a, sizeof a), h3_size_text(s->device_bytes, b, sizeof b),
          h3_size_text(s->fixed_bytes, c, sizeof c), (long long)s->resident_blocks,
          (long long)s->layers, (long long)s->ring_slots, h3_size_text(s->block_bytes, e, sizeof e),
          h3_size_text(s->min_budget, f, sizeof f), (long long)s->min_budget);
  double copy = s->block_copy_seconds * (double)streamed;
  fprintf(out,
          "  streamed         : %s per step (%lld blocks); copy %.1f ms per step (%.2f ms a block, "
          "%.1f GB/s, timed at load)\n",
          h3_size_text(s->streamed_bytes, a, sizeof a), (long long)streamed, copy * 1e3,
          s->block_copy_seconds * 1e3,
          s->block_copy_seconds > 0 ? (double)s->block_bytes / s->block_copy_seconds * 1e-9 : 0.0);
  if (s->stall_waits < 0) return;
  if (s->stall_waits == 0) {
    fprintf(out, "  copies hidden    : not timed here (CUDA graph replays time nothing: run with "
                 "H3_CUDA_GRAPHS=0, or compare with the resident run's time)\n");
    return;
  }
  double exposed = s->stall_seconds / (double)s->stall_waits * (double)streamed;
  fprintf(out,
          "  copies hidden    : %.1f %% (the compute waited %.2f ms per step for blocks: %.3f ms "
          "a wait over %lld waits timed outside CUDA graphs)\n",
          copy > 0 ? 100.0 * (1.0 - exposed / copy) : 100.0, exposed * 1e3,
          s->stall_seconds / (double)s->stall_waits * 1e3, (long long)s->stall_waits);
}

/* The --int8 line: weight bytes before and after (include/h3/int8.h). */
static void print_int8(FILE *out, const h3_module *m) {
  h3_int8_summary s;
  h3_int8_summarize(m, &s);
  if (!s.n_gemms) {
    fprintf(out, "  int8             : off (compile with --int8 to lower the linears)\n");
    return;
  }
  char a[32], b[32], c[32];
  bytes_text(a, sizeof a, (double)s.bf16_bytes);
  bytes_text(b, sizeof b, (double)s.int8_bytes);
  bytes_text(c, sizeof c, (double)s.scale_bytes);
  fprintf(out,
          "  int8             : weights: %s bf16 \u2192 %s (int8 for %lld layers) + %s fp32 "
          "scales; %d GEMMs (%d in row chunks), rotate %d\n",
          a, b, (long long)s.n_layers, c, s.n_gemms, s.n_split, s.rotate);
}

/* Step skipping (docs/step-skipping.md): Spectrum's real steps (program attributes
 * `spectrum_real`, `spectrum_steps` set by the pass) and Cache-DiT's settings. */
static int print_decide(h3_op *op, void *ctx) {
  if (op->code != H3_OP_CACHE_DIT_DECIDE) return 0;
  fprintf(ctx, "  cache-dit        : block 0 always runs; blocks 1.. reuse the cached residual "
               "when d < %g (from step %lld, at most %lld in a row)\n",
          h3_op_attr_float(op, "threshold", 0), (long long)h3_op_attr_int(op, "warmup", 0),
          (long long)h3_op_attr_int(op, "max_consecutive", 0));
  return 1;
}

/* Prints a sorted list of step numbers as ranges: " 0-4, 6, 8". */
static void print_ranges(FILE *out, const int64_t *v, size_t n) {
  for (size_t j = 0; j < n;) {
    size_t e = j;
    while (e + 1 < n && v[e + 1] == v[e] + 1) e++;
    fprintf(out, "%s %lld", j ? "," : "", (long long)v[j]);
    if (e > j) fprintf(out, "%s%lld", e == j + 1 ? ", " : "-", (long long)v[e]);
    j = e + 1;
  }
}

/* Cache-DiT's decisions in the last run: the steps whose branch ran the whole stack (the
 * else callee) and those that reused the cached residual. */
static void print_cache_dit_steps(FILE *out, const h3_report *r) {
  int64_t *real = malloc((r->n_branches + 1) * sizeof *real);
  int64_t *cached = malloc((r->n_branches + 1) * sizeof *cached);
  size_t nr = 0, nc = 0;
  for (size_t i = 0; real && cached && i < r->n_branches; i++) {
    if (r->branches[i].iteration < 0) continue;
    if (r->branches[i].then) cached[nc++] = r->branches[i].iteration;
    else real[nr++] = r->branches[i].iteration;
  }
  if (nr + nc > 0) {
    fprintf(out, "  cache-dit steps  : last run: %zu of %zu steps ran every block:", nr, nr + nc);
    print_ranges(out, real, nr);
    fprintf(out, "; cached:");
    print_ranges(out, cached, nc);
    fprintf(out, "%s\n", nc ? "" : " none");
  }
  free(real);
  free(cached);
}

static void print_step_skip(FILE *out, const h3_module *m) {
  bool any = false;
  for (int i = 0; i < m->n_graphs; i++) {
    const h3_attr *a = h3_graph_attr(m->graphs[i], "spectrum_real");
    const h3_attr *n = h3_graph_attr(m->graphs[i], "spectrum_steps");
    if (!a || a->kind != H3_ATTR_INTS) continue;
    any = true;
    fprintf(out, "  spectrum         : %d of %lld steps real:", a->n,
            n && n->kind == H3_ATTR_INT ? (long long)n->i : -1LL);
    print_ranges(out, a->ints, (size_t)a->n);
    fprintf(out, "; the others forecast\n");
  }
  if (!h3_module_walk((h3_module *)m, print_decide, out) && !any)
    fprintf(out, "  step skipping    : off (--spectrum, or Cache-DiT at --quality high)\n");
}

/* norm-modulate-fusion's ops, [Plan A exact, Plan A lossless, Plan B exact, Plan B lossless]. */
static int count_normmod(h3_op *op, void *ctx) {
  int *c = ctx;
  if (op->code != H3_OP_NORM_MODULATE && op->code != H3_OP_RESIDUAL_NORM_MODULATE) return 0;
  int lossless = h3_op_attr_tier(op, "tier", H3_TIER_EXACT) == H3_TIER_LOSSLESS;
  c[(op->code == H3_OP_RESIDUAL_NORM_MODULATE ? 2 : 0) + lossless]++;
  return 0;
}

static void print_normmod(FILE *out, const h3_module *m) {
  int c[4] = {0, 0, 0, 0};
  h3_module_walk((h3_module *)m, count_normmod, c);
  if (c[0] + c[1] + c[2] + c[3] == 0) {
    fprintf(out, "  norm+modulate    : off (no RMSNorm + AdaLN site fused)\n");
    return;
  }
  fprintf(out, "  norm+modulate    : %d Plan A, %d Plan B (%d exact: every bf16 rounding kept; "
               "%d lossless: one fp32 pass)\n",
          c[0] + c[1], c[2] + c[3], c[0] + c[2], c[1] + c[3]);
}

static void print_on_off(FILE *out, const h3_report *r) {
  fused_count fc = {0};
  h3_module_walk((h3_module *)r->module, count_fused, &fc);
  fprintf(out, "=== what is on ===\n");
  fprintf(out, "  quality tier     : %s\n", r->quality ? r->quality : "(not recorded)");
  if (r->passes) fprintf(out, "  passes           : %s\n", r->passes);
  int n = fc.exact + fc.lossless + fc.other;
  if (n)
    fprintf(
        out,
        "  fused groups     : %d (%d exact: every bf16 rounding kept; %d lossless: fp32 inside)\n",
        n, fc.exact, fc.lossless);
  else
    fprintf(out, "  fused groups     : off (no fused ops in the plan)\n");
  print_normmod(out, r->module);
  print_int8(out, r->module);
  print_step_skip(out, r->module);
  print_cache_dit_steps(out, r);
  for (int i = 0; i < r->module->n_graphs; i++) {
    const h3_graph *g = r->module->graphs[i];
    const h3_attr *a = h3_graph_attr(g, "arena_bytes"), *p = h3_graph_attr(g, "peak_bytes");
    char ab[32], pb[32];
    if (a && a->kind == H3_ATTR_INT) {
      bytes_text(ab, sizeof ab, (double)a->i);
      bytes_text(pb, sizeof pb, p && p->kind == H3_ATTR_INT ? (double)p->i : 0.0);
      fprintf(out, "  memory plan      : %-10s arena %s (peak live %s)\n", g->name, ab, pb);
    } else {
      fprintf(out, "  memory plan      : %-10s off (every value allocated on its own)\n", g->name);
    }
  }
  char wb[32], xb[32];
  bytes_text(wb, sizeof wb, (double)r->weight_bytes);
  bytes_text(xb, sizeof xb, (double)r->activation_bytes);
  fprintf(out, "  device memory    : weights %s, activations %s\n", wb, xb);
  if (r->memory_peak >= 0) {
    bytes_text(wb, sizeof wb, (double)r->memory_peak);
    fprintf(out, "  device peak      : %s (%lld bytes, held by the backend at once)\n", wb,
            (long long)r->memory_peak);
  }
  print_streaming(out, r);
  fprintf(out, "  attention        : %s\n", r->attention ? r->attention : "?");
  for (int i = 0; i < r->module->n_graphs; i++) { /* set by attention-backend (--attention) */
    const h3_attr *a = h3_graph_attr(r->module->graphs[i], "attention_schedule");
    if (a && a->kind == H3_ATTR_STRING) fprintf(out, "  attention plan   : %s\n", a->s);
  }
}

typedef struct {
  int code;
  h3_op_stat s;
} op_row;

static int cmp_row(const void *a, const void *b) {
  const op_row *x = a, *y = b;
  if (x->s.seconds != y->s.seconds) return x->s.seconds > y->s.seconds ? -1 : 1;
  return x->code - y->code;
}

void h3_report_print_ops(FILE *out, const h3_op_stat *stats, const char *what, const char *clock) {
  op_row rows[H3_OPCODE_COUNT];
  int n = 0;
  double total = 0.0;
  for (int c = 0; c < H3_OPCODE_COUNT; c++) {
    if (!stats || stats[c].count == 0) continue;
    rows[n].code = c;
    rows[n++].s = stats[c];
    total += stats[c].seconds;
  }
  qsort(rows, (size_t)n, sizeof rows[0], cmp_row);
  fprintf(out, "=== per-op profile (%s; %s) ===\n", what, clock ? clock : "host time");
  fprintf(out, "  %-20s %10s %12s %8s\n", "op", "count", "total ms", "%");
  for (int i = 0; i < n; i++)
    fprintf(out, "  %-20s %10lld %12.3f %7.1f%%\n", h3_opcode_name((h3_opcode)rows[i].code),
            (long long)rows[i].s.count, rows[i].s.seconds * 1e3,
            total > 0 ? 100.0 * rows[i].s.seconds / total : 0.0);
  fprintf(out, "  %-20s %10s %12.3f %7.1f%%\n", "total", "", total * 1e3, total > 0 ? 100.0 : 0.0);
}

void h3_report_print_gemm_tuning(FILE *out, int64_t timed, int64_t read, double seconds, const char *lead) {
  if (timed > 0)
    fprintf(out, "%sGEMM tuning: %lld shapes timed in this process (%.1f s), %lld choices read from the kernel cache; "
                 "a process that times shapes can run slower than a later one on the same choices: "
                 "compare the runs after it\n",
            lead, (long long)timed, seconds, (long long)read);
  else if (timed == 0 && read > 0)
    fprintf(out, "%sGEMM tuning: %lld choices read from the kernel cache\n", lead, (long long)read);
}

void h3_report_print_uncaptured(FILE *out, h3_backend *b, const char *lead) {
  enum { MOST = 16 };
  const h3_graph *g[MOST];
  const h3_op *why[MOST];
  int n = h3_backend_graph_uncaptured(b, g, why, MOST);
  for (int k = 0; k < n && k < MOST; k++) {
    const h3_op *op = why[k];
    const char *callee = op && op->code == H3_OP_CALL ? h3_op_attr_string(op, "callee", NULL) : NULL;
    fprintf(out, "%snot captured: %s (", lead, g[k]->name);
    if (!op) fprintf(out, "it reads the device on the host)\n");
    else {
      if (callee) fprintf(out, "its call of '%s'", callee);
      else fprintf(out, "%s", h3_opcode_name(op->code));
      if (op->span.file) fprintf(out, " at %s:%d:%d", op->span.file, op->span.line, op->span.col);
      fprintf(out, " reads the device on the host)\n");
    }
  }
  if (n > MOST) fprintf(out, "%s(and %d more graphs not captured)\n", lead, n - MOST);
}

void h3_report_print(FILE *out, const h3_report *r) {
  fprintf(out, "=== h3exec ===\n");
  fprintf(out, "  plan             : %s (model %s, config %s)\n", r->plan_file ? r->plan_file : "?",
          r->module->model ? r->module->model : "?", r->module->config ? r->module->config : "?");
  fprintf(out, "  ran              : %s on %s, %s\n", r->graph, r->backend,
          r->device ? r->device : "?");
  if (r->ranks > 1)
    fprintf(out, "  ranks            : %d (--gpus %d: %s; outputs and this report from rank 0)\n",
            r->ranks, r->ranks,
            r->backend && !strcmp(r->backend, "cuda")
                ? "one process per GPU, collectives through NCCL"
                : "threads of this process, collectives emulated");
  fprintf(out, "  weights          : %s, seed %llu\n", r->weights, (unsigned long long)r->seed);
  fprintf(out, "  iterations       : %d warm-up, %d measured\n", r->warmup, r->iterations);
  print_on_off(out, r);
  int n = r->iterations;
  double sum = 0.0, mn = 0.0;
  for (int i = 0; i < n; i++) {
    sum += r->latency[i];
    if (i == 0 || r->latency[i] < mn) mn = r->latency[i];
  }
  fprintf(out, "=== latency (ms, wall time per iteration) ===\n");
  if (n > 0)
    fprintf(out, "  min %.3f  median %.3f  mean %.3f  p90 %.3f  p99 %.3f  (total %.3f s)\n",
            mn * 1e3, h3_percentile(r->latency, n, 50) * 1e3, sum / n * 1e3,
            h3_percentile(r->latency, n, 90) * 1e3, h3_percentile(r->latency, n, 99) * 1e3, sum);
  if (n > 0 && r->gpu_seconds >= 0)
    fprintf(out, "  GPU compute time: mean %.3f ms per iteration (CUDA events)\n",
            r->gpu_seconds / n * 1e3);
  if (r->graphs_captured >= 0)
    fprintf(out, "  CUDA graphs: %lld graph calls captured, %lld replayed (since start; warm-up included)\n",
            (long long)r->graphs_captured, (long long)r->graphs_replayed);
  if (r->device_backend) h3_report_print_uncaptured(out, r->device_backend, "    ");
  h3_report_print_gemm_tuning(out, r->gemm_timed, r->gemm_read, r->gemm_tune_seconds, "  ");
  h3_report_print_ops(out, r->stats, "measured iterations", r->op_clock);
}
