/* pass_manager.c: runs a resolved list of passes on a module.
 *
 * Owns the default options, the pass context (tier, report lines) and the per-pass
 * services of the pipeline: wall-clock timing and op counts for --time-passes, the module
 * dump of --print-ir-after (`# ---- IR after NAME ----` then the module text), the
 * verifier after every pass with verify_each, and the reports (`--report`, or
 * `--report=a,b` for those passes') that passes leave with h3_pass_report.
 */
#include "pass_internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_PIPELINE 64

static const h3_span no_span = {0};

/* ---- options ---------------------------------------------------------------------------- */
h3_pass_options h3_pass_options_default(void) {
  h3_pass_options o = {0};
  o.tier = H3_TIER_LOSSLESS;
#ifndef NDEBUG
  o.verify_each = true;
#endif
  return o;
}

/* Whether name is in the comma list (blanks around names ignored; "all" matches all). */
static bool name_in_list(const char *list, const char *name) {
  if (!list) return false;
  size_t n = strlen(name);
  const char *p = list;
  for (;;) {
    while (*p == ' ' || *p == '\t') p++;
    const char *end = strchr(p, ',');
    if (!end) end = p + strlen(p);
    const char *b = end;
    while (b > p && (b[-1] == ' ' || b[-1] == '\t')) b--;
    if ((size_t)(b - p) == n && strncmp(p, name, n) == 0) return true;
    if ((size_t)(b - p) == 3 && strncmp(p, "all", 3) == 0) return true;
    if (!*end) return false;
    p = end + 1;
  }
}

/* ---- context ---------------------------------------------------------------------------- */
h3_tier h3_pass_tier(const h3_pass_context *ctx) { return ctx->options->tier; }

const h3_pass_options *h3_pass_options_of(const h3_pass_context *ctx) { return ctx->options; }

void h3_pass_report(h3_pass_context *ctx, const char *fmt, ...) {
  const char *name = ctx->pass ? ctx->pass->name : "pass";
  if (ctx->options->report_passes && !name_in_list(ctx->options->report_passes, name)) return;
  h3_strbuf_printf(&ctx->reports, "# %s: ", name);
  va_list ap;
  va_start(ap, fmt);
  h3_strbuf_vprintf(&ctx->reports, fmt, ap);
  va_end(ap);
  h3_strbuf_append(&ctx->reports, "\n");
}

/* ---- op counts -------------------------------------------------------------------------- */
static int count_op(h3_op *op, void *ctx) {
  (void)op;
  (*(int *)ctx)++;
  return 0;
}

int h3_pass_count_ops(const h3_module *m) {
  int n = 0;
  h3_module_walk((h3_module *)m, count_op, &n);
  return n;
}

/* ---- running ---------------------------------------------------------------------------- */
static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static void print_module(FILE *out, const h3_module *m, const char *pass_name) {
  h3_strbuf b;
  h3_strbuf_init(&b);
  h3_module_print(&b, m);
  fprintf(out, "# ---- IR after %s ----\n%s", pass_name, b.data ? b.data : "");
  if (b.len > 0 && b.data[b.len - 1] != '\n') fputc('\n', out);
  h3_strbuf_free(&b);
}

/* Runs p on m with ctx; then the verifier (verify_each) and the dump (print_ir_after). */
static h3_status run_pass(h3_module *m, const h3_pass *p, h3_pass_context *ctx, double *ms,
                          int *ops_before, int *ops_after, h3_diag *d) {
  const h3_pass_options *o = ctx->options;
  FILE *out = o->dump ? o->dump : stderr;
  ctx->pass = p;
  *ops_before = h3_pass_count_ops(m);
  double t0 = now_ms();
  h3_status st = p->run(m, ctx, d);
  *ms = now_ms() - t0;
  *ops_after = h3_pass_count_ops(m);
  if (st == H3_OK && m->oom) {
    h3_diag_error(d, no_span, "free memory or use a smaller --config", "out of memory in pass '%s'",
                  p->name);
    st = H3_ERR;
  }
  if (st == H3_OK && o->verify_each && p != &h3_pass_verify && h3_verify_module(m, d) != H3_OK) {
    h3_diag_error(d, no_span, "this is a bug in the pass; --print-ir-after shows its output",
                  "the IR is invalid after pass '%s'", p->name);
    st = H3_ERR;
  }
  if (name_in_list(o->print_ir_after, p->name)) print_module(out, m, p->name);
  ctx->pass = NULL;
  return st;
}

static void print_reports(FILE *out, const h3_pass_context *ctx) {
  if (ctx->reports.len > 0 && ctx->reports.data) fputs(ctx->reports.data, out);
}

h3_status h3_pass_run_one(h3_module *m, const h3_pass *p, const h3_pass_options *o, h3_diag *d) {
  h3_pass_context ctx = {.options = o};
  h3_strbuf_init(&ctx.reports);
  double ms;
  int before, after;
  h3_status st = run_pass(m, p, &ctx, &ms, &before, &after, d);
  if (o->report || o->time_passes) print_reports(o->dump ? o->dump : stderr, &ctx);
  h3_strbuf_free(&ctx.reports);
  return st;
}

h3_status h3_pass_pipeline_run(h3_module *m, const h3_pass_options *o, h3_diag *d) {
  const h3_pass *list[MAX_PIPELINE];
  int n = 0;
  if (h3_pass_pipeline_resolve(o, list, MAX_PIPELINE, &n, d) != H3_OK) return H3_ERR;
  FILE *out = o->dump ? o->dump : stderr;
  h3_pass_context ctx = {.options = o};
  h3_strbuf_init(&ctx.reports);
  double ms[MAX_PIPELINE];
  int before[MAX_PIPELINE], after[MAX_PIPELINE];
  h3_status st = H3_OK;
  int ran = 0;
  for (; ran < n && st == H3_OK; ran++)
    st = run_pass(m, list[ran], &ctx, &ms[ran], &before[ran], &after[ran], d);
  if (o->time_passes) {
    double total = 0;
    fprintf(out, "# ---- pass timing (quality %s) ----\n", h3_tier_name(o->tier));
    fprintf(out, "# %-24s %10s %11s %10s\n", "pass", "wall ms", "ops before", "ops after");
    for (int i = 0; i < ran; i++) {
      fprintf(out, "# %-24s %10.3f %11d %10d\n", list[i]->name, ms[i], before[i], after[i]);
      total += ms[i];
    }
    fprintf(out, "# %-24s %10.3f\n", "total", total);
  }
  if (o->time_passes || o->report) print_reports(out, &ctx);
  h3_strbuf_free(&ctx.reports);
  return st;
}
