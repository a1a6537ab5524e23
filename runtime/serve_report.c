/* serve_report.c: the serving engine's report (include/h3/serve.h): a human table and the
 * same figures as one JSON object. Percentiles are nearest-rank (h3_percentile). */
#include "h3/serve.h"

static double mean(const double *v, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += v[i];
  return n ? s / (double)n : 0;
}

static double pct(const double *v, int64_t n, double p) { return h3_percentile(v, (int)n, p); }

static double per_second(double x, double seconds) { return seconds > 0 ? x / seconds : 0; }

static void latency_row(FILE *out, const char *name, const double *v, int64_t n) {
  if (!n) {
    fprintf(out, "  %-6s %10s\n", name, "-");
    return;
  }
  fprintf(out, "  %-6s %10.2f %10.2f %10.2f %10.2f %10.2f\n", name, 1e3 * pct(v, n, 50),
          1e3 * pct(v, n, 90), 1e3 * pct(v, n, 99), 1e3 * mean(v, n), 1e3 * pct(v, n, 100));
}

/* Mean accepted draft tokens per request-round (n of gamma, before EOS / length cuts). */
static double mean_accepted(const h3_serve_stats *s) {
  int64_t n = 0, sum = 0;
  for (int64_t k = 0; k <= s->gamma; k++) n += s->accept_hist[k], sum += k * s->accept_hist[k];
  return n ? (double)sum / (double)n : 0;
}

/* The speculative lines: acceptance length (n + 1: draft tokens taken plus the target's
 * own) with its histogram, tokens per round, and the round's time split. */
static void spec_rows(FILE *out, const h3_serve_stats *s) {
  fprintf(out, "acceptance      %.2f tokens per request-round (gamma %lld); n+1:",
          1.0 + mean_accepted(s), (long long)s->gamma);
  for (int64_t k = 0; k <= s->gamma; k++)
    fprintf(out, " %lld:%lld", (long long)(k + 1), (long long)s->accept_hist[k]);
  fprintf(out, "\n");
  if (s->forced_acceptance)
    fprintf(out, "FORCED          acceptance forced to %lld by --spec-force-accept: BENCH ONLY, the "
                 "draft proposed the oracle's tokens and each round took them; the verify's own "
                 "acceptance agreed in %lld of %lld request-rounds\n",
            (long long)s->forced_acceptance, (long long)s->forced_agreed, (long long)s->spec_seq_rounds);
  double r = (double)s->spec_rounds;
  fprintf(out, "round time      draft %.3f ms, verify + draft commit %.3f ms, acceptance %.3f ms "
               "(mean per round)\n",
          1e3 * s->draft_seconds / r, 1e3 * s->verify_seconds / r, 1e3 * s->accept_seconds / r);
}

void h3_serve_report_print(FILE *out, const h3_serve_stats *s, const char *device) {
  fprintf(out, "=== serving ===\n");
  if (device) fprintf(out, "device          %s\n", device);
  fprintf(out, "requests        %lld: %lld completed, %lld failed\n", (long long)s->requests,
          (long long)s->completed, (long long)s->failed);
  fprintf(out, "concurrency     %lld rows per decode step; %s%s\n", (long long)s->concurrency,
          s->mixed ? "mixed steps (prefill chunks carry the running rows)" : "prefill first",
          s->speculative ? "; speculative (DSpark)" : "");
  fprintf(out, "warm-up         %.3f s before the start (kernels, GEMM tuning, graph capture)\n",
          s->warmup_seconds);
  fprintf(out, "duration        %.3f s (start to the last request's end)\n", s->seconds);
  fprintf(out, "tokens          %lld prompt, %lld output: %.1f output tokens/s, %.2f requests/s\n",
          (long long)s->prompt_tokens, (long long)s->output_tokens,
          per_second((double)s->output_tokens, s->seconds),
          per_second((double)s->completed, s->seconds));
  if (s->decode_steps)
    fprintf(out, "%-16s%lld %s, %.1f running rows per %s, %.3f ms per %s\n",
            s->speculative ? "rounds" : "decode", (long long)s->decode_steps,
            s->speculative ? "rounds" : "steps", (double)s->decode_rows / (double)s->decode_steps,
            s->speculative ? "round" : "step", 1e3 * s->decode_seconds / (double)s->decode_steps,
            s->speculative ? "round" : "step");
  if (s->speculative && s->spec_rounds) spec_rows(out, s);
  if (s->prefill_chunks || s->prefill_groups)
    fprintf(out, "prefill         %lld prompt rows: %lld chunks of %lld rows, %.3f ms per chunk\n",
            (long long)s->prefill_rows, (long long)s->prefill_chunks, (long long)s->chunk_rows,
            s->prefill_chunks ? 1e3 * s->prefill_seconds / (double)s->prefill_chunks : 0.0);
  if (s->prefill_groups)
    fprintf(out, "prefill groups  %lld groups of %lld one-chunk prompts, %.3f ms per group\n",
            (long long)s->prefill_groups, (long long)s->group_prompts,
            1e3 * s->group_seconds / (double)s->prefill_groups);
  double kib = (double)s->page_bytes / 1024.0;
  if (s->mixed_chunks)
    fprintf(out, "mixed steps     %lld chunks carried %lld decode rows (%.1f per chunk)\n",
            (long long)s->mixed_chunks, (long long)s->mixed_rows,
            (double)s->mixed_rows / (double)s->mixed_chunks);
  fprintf(out, "KV pool         %lld pages of %lld tokens (%.1f %s each), peak %lld in use (%.1f %%)\n",
          (long long)s->pool_pages, (long long)s->page_tokens, kib < 1024 ? kib : kib / 1024,
          kib < 1024 ? "KiB" : "MiB",
          (long long)s->pool_peak_pages,
          s->pool_pages ? 100.0 * (double)s->pool_peak_pages / (double)s->pool_pages : 0.0);
  fprintf(out, "latency (ms)    %10s %10s %10s %10s %10s\n", "p50", "p90", "p99", "mean", "max");
  latency_row(out, "TTFT", s->ttft, s->n_ttft);
  latency_row(out, "TPOT", s->tpot, s->n_tpot);
  latency_row(out, "ITL", s->itl, s->n_itl);
}

static void latency_json(FILE *out, const char *name, const double *v, int64_t n) {
  if (!n) {
    fprintf(out, ", \"%s\": null", name);
    return;
  }
  fprintf(out, ", \"%s\": {\"p50\": %.4f, \"p90\": %.4f, \"p99\": %.4f, \"mean\": %.4f, \"max\": %.4f}",
          name, 1e3 * pct(v, n, 50), 1e3 * pct(v, n, 90), 1e3 * pct(v, n, 99), 1e3 * mean(v, n),
          1e3 * pct(v, n, 100));
}

void h3_serve_report_json(FILE *out, const h3_serve_stats *s, const char *device) {
  fprintf(out, "{\"engine\": \"h3\", \"device\": \"%s\", \"concurrency\": %lld, \"requests\": %lld, "
               "\"completed\": %lld, \"failed\": %lld, \"prompt_tokens\": %lld, "
               "\"output_tokens\": %lld, \"duration_s\": %.6f, \"output_tok_s\": %.3f, "
               "\"request_s\": %.4f, \"decode_steps\": %lld, \"mean_decode_rows\": %.3f, "
               "\"chunk_rows\": %lld, \"prefill_chunks\": %lld, \"prefill_groups\": %lld, \"group_prompts\": %lld, "
               "\"group_s\": %.6f, \"mixed_chunks\": %lld, \"mixed_rows\": %lld, "
               "\"warmup_s\": %.3f, \"schedule\": \"%s\", \"decode_s\": %.6f, \"prefill_s\": %.6f",
          device ? device : "", (long long)s->concurrency, (long long)s->requests,
          (long long)s->completed, (long long)s->failed, (long long)s->prompt_tokens,
          (long long)s->output_tokens, s->seconds, per_second((double)s->output_tokens, s->seconds),
          per_second((double)s->completed, s->seconds), (long long)s->decode_steps,
          s->decode_steps ? (double)s->decode_rows / (double)s->decode_steps : 0.0,
          (long long)s->chunk_rows, (long long)s->prefill_chunks, (long long)s->prefill_groups,
          (long long)s->group_prompts, s->group_seconds, (long long)s->mixed_chunks,
          (long long)s->mixed_rows, s->warmup_seconds, s->mixed ? "mixed" : "prefill-first", s->decode_seconds,
          s->prefill_seconds);
  if (s->speculative && s->accept_hist) {
    fprintf(out, ", \"speculative\": {\"method\": \"dspark\", \"gamma\": %lld, \"rounds\": %lld, "
                 "\"request_rounds\": %lld, \"mean_acceptance_length\": %.4f, \"accepted_hist\": [",
            (long long)s->gamma, (long long)s->spec_rounds, (long long)s->spec_seq_rounds,
            1.0 + mean_accepted(s));
    for (int64_t k = 0; k <= s->gamma; k++)
      fprintf(out, "%s%lld", k ? ", " : "", (long long)s->accept_hist[k]);
    fprintf(out, "], \"draft_s\": %.6f, \"verify_s\": %.6f, \"accept_s\": %.6f, "
                 "\"forced_acceptance\": %lld, \"forced_agreed_request_rounds\": %lld}",
            s->draft_seconds, s->verify_seconds, s->accept_seconds,
            (long long)s->forced_acceptance, (long long)s->forced_agreed);
  }
  latency_json(out, "ttft_ms", s->ttft, s->n_ttft);
  latency_json(out, "tpot_ms", s->tpot, s->n_tpot);
  latency_json(out, "itl_ms", s->itl, s->n_itl);
  fprintf(out, ", \"kv_pool\": {\"pages\": %lld, \"peak_pages\": %lld, \"page_tokens\": %lld, "
               "\"page_bytes\": %lld}}\n",
          (long long)s->pool_pages, (long long)s->pool_peak_pages, (long long)s->page_tokens,
          (long long)s->page_bytes);
}
