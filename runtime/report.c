/* report.c: h3exec's closing report, in the style of trtexec.
 *
 * Sections: what ran (plan, model, config, graph, backend, weights, seed); what was on or
 * off (quality tier, fused groups by tier, the memory plan of every graph, device bytes);
 * latency over the measured iterations (min / median / mean / p90 / p99, nearest-rank
 * percentiles); the per-op profile (op kind, executions, total ms, share of the op time),
 * sorted by time. Pure formatting: every number comes from the h3_report.
 */
#include "h3/op_registry.h"
#include "h3/runtime.h"

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
    const char *t = h3_op_attr_string(op, "tier", "");
    if (strcmp(t, "exact") == 0)
      c->exact++;
    else if (strcmp(t, "lossless") == 0)
      c->lossless++;
    else
      c->other++;
  }
  return 0;
}

static void bytes_text(char *buf, size_t n, double bytes) {
  if (bytes >= 1024.0 * 1024 * 1024)
    snprintf(buf, n, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
  else if (bytes >= 1024.0 * 1024)
    snprintf(buf, n, "%.2f MiB", bytes / (1024.0 * 1024));
  else if (bytes >= 1024.0)
    snprintf(buf, n, "%.1f KiB", bytes / 1024.0);
  else
    snprintf(buf, n, "%.0f B", bytes);
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
  fprintf(out, "  attention        : %s\n", r->attention ? r->attention : "reference (cpu)");
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

static void print_ops(FILE *out, const h3_report *r) {
  op_row rows[H3_OPCODE_COUNT];
  int n = 0;
  double total = 0.0;
  for (int c = 0; c < H3_OPCODE_COUNT; c++) {
    if (!r->stats || r->stats[c].count == 0) continue;
    rows[n].code = c;
    rows[n++].s = r->stats[c];
    total += r->stats[c].seconds;
  }
  qsort(rows, (size_t)n, sizeof rows[0], cmp_row);
  fprintf(out, "=== per-op profile (measured iterations) ===\n");
  fprintf(out, "  %-20s %10s %12s %8s\n", "op", "count", "total ms", "%");
  for (int i = 0; i < n; i++)
    fprintf(out, "  %-20s %10lld %12.3f %7.1f%%\n", h3_opcode_name((h3_opcode)rows[i].code),
            (long long)rows[i].s.count, rows[i].s.seconds * 1e3,
            total > 0 ? 100.0 * rows[i].s.seconds / total : 0.0);
  fprintf(out, "  %-20s %10s %12.3f %7.1f%%\n", "total", "", total * 1e3, total > 0 ? 100.0 : 0.0);
}

void h3_report_print(FILE *out, const h3_report *r) {
  fprintf(out, "=== h3exec ===\n");
  fprintf(out, "  plan             : %s (model %s, config %s)\n", r->plan_file ? r->plan_file : "?",
          r->module->model ? r->module->model : "?", r->module->config ? r->module->config : "?");
  if (r->device)
    fprintf(out, "  ran              : %s on %s, %s\n", r->graph, r->backend, r->device);
  else
    fprintf(out, "  ran              : %s on %s (%d threads)\n", r->graph, r->backend, r->threads);
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
  print_ops(out, r);
}
