/* block_bench.c: the time of ONE H3 block at full dimensions on the cuda backend, run by the
 * real executor from compiled plans, and its per-op profile against the bandwidth floor.
 *
 *   block_bench PLAN_A PLAN_B [--iters N] [--warmup N] [--attention NAME] [--profile N]
 *                             [--seed N] [--bandwidth TBPS] [--backend cuda|cpu]
 * PLAN_A and PLAN_B are the same model compiled with two different `layers` values
 * (h3c compile models/minimax_h3.g --config full --set layers=1 / --set layers=3). Each
 * plan's graph `step` (embed, time embedding, RoPE tables, the `trunk` loop of `layers`
 * blocks, final layer, outputs downloaded) runs `warmup` times, then `iters` times, each
 * run bracketed by the backend's CUDA-event busy time (h3_backend_busy_seconds); the two plans
 * run in alternation (A, B, A, B, ...) so the GPU's clock drift under load weighs on both.
 * What is timed:
 *   block = median over the runs of (step(PLAN_B) - step(PLAN_A)) / (layers_B - layers_A)
 * so everything outside the trunk (embedding, final layer, input upload, output download)
 * cancels and what remains is one iteration of the trunk loop exactly as the executor runs
 * it: the AdaLN projection, both norms and modulations, the four GEMMs, q/k norm, RoPE,
 * attention (live rows [0, used) and pad rows [used, S) as two segments), the slices and
 * the gated residuals. Random weights (made on the GPU), default inputs (h3exec's).
 * Printed: "h3bench NAME MS" lines (step_a, step_b, block; read by bench/block_peers.py).
 *
 * --profile N: PLAN_A is run N more times with the executor's per-op trace (device
 * timestamps, h3_runtime_options.trace_device: the ops run back to back as untraced and each
 * op's time runs from the end of the work queued before it to its own end; --sync-trace
 * syncs after every op instead, so each op's time is its own plus one launch and sync,
 * ~10 us, with the GPU idle in between) and the ops of
 * the trunk loop are printed in order with their median time, the bytes they must move
 * (operands + results from the IR types; a copied slice moves its result twice; views 0),
 * the bandwidth that gives, the floor at --bandwidth TB/s (default 4.1, the copy rate
 * measured on the H200), and TFLOP/s for linear and attention; then the totals per class.
 * H3_INT8_MAX_ROWS in the environment re-decides the row splits of --int8 plans at load,
 * as for h3exec (docs/int8.md section 3).
 * --backend cpu runs the same on the cpu backend with wall times (for tiny plans: a check of
 * the driver itself on a machine without a GPU). Exit 77 without a GPU for cuda.
 */
#include "gpu_common.h"

#include "h3/codegen.h"
#include "h3/cuda_backend.h"
#include "h3/int8.h"
#include "h3/op_registry.h"
#include "h3/plan.h"
#include "h3/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  int iters, warmup, profile;
  bool sync_trace; /* --sync-trace: the profile syncs after each op (else device timestamps) */
  const char *attention, *backend;
  uint64_t seed;
  double tbps;
} opts;

/* One plan loaded on a fresh cuda backend with random weights, ready to run `step`. */
typedef struct {
  h3_plan *plan;
  h3_backend *b;
  h3_weights *w; /* cpu only: the cuda backend makes random weights itself */
  h3_runtime *rt;
  const h3_graph *g;
  h3_host_tensor *in, *out;
  int64_t layers;
} setup;

static void setup_free(setup *s) {
  if (s->out) h3_host_tensors_free(s->out, s->g ? s->g->n_outputs : 0);
  if (s->in) h3_host_tensors_free(s->in, s->g ? s->g->n_inputs : 0);
  h3_runtime_free(s->rt);
  h3_weights_free(s->w);
  h3_backend_free(s->b);
  h3_plan_free(s->plan);
  memset(s, 0, sizeof *s);
}

static h3_status setup_new(setup *s, const char *path, const opts *o, bool trace, h3_diag *d) {
  memset(s, 0, sizeof *s);
  s->plan = h3_plan_read_file(path, d);
  bool int8_env = false; /* H3_INT8_MAX_ROWS re-decides the int8 row splits, as in h3exec */
  if (!s->plan || h3_int8_apply_env(s->plan->module, &int8_env, d) != H3_OK) return H3_ERR;
  const h3_module *m = s->plan->module;
  s->layers = h3_module_config(m, "layers", -1);
  s->g = h3_module_graph(m, "step");
  if (!s->g || s->layers < 1) {
    h3_diag_error(d, (h3_span){0}, "compile models/minimax_h3.g with --set layers=N",
                  "%s: not an H3 plan (needs graph 'step' and config key 'layers')", path);
    return H3_ERR;
  }
  h3_backend_options bo = {.threads = 2, .seed = o->seed};
  bool cuda = strcmp(o->backend, "cpu") != 0;
  if (cuda) {
    h3_cuda_options co = {.attention = o->attention};
    s->b = h3_backend_cuda_new(&bo, &co, d);
    if (!s->b || h3_backend_load_plan(s->b, s->plan, d) != H3_OK)
      return H3_ERR;
  } else {
    s->b = h3_backend_cpu_new(&bo, d);
    s->w = s->b ? h3_weights_random(m, o->seed, d) : NULL;
    if (!s->w) return H3_ERR;
  }
  s->in = calloc((size_t)s->g->n_inputs + 1, sizeof *s->in);
  s->out = calloc((size_t)s->g->n_outputs + 1, sizeof *s->out);
  if (!s->in || !s->out) {
    h3_diag_error(d, (h3_span){0}, H3_HINT_OOM, "block_bench: out of memory");
    return H3_ERR;
  }
  h3_input_defaults defs = {o->seed, 0};
  if (h3_inputs_fill_defaults(m, s->g, s->in, &defs, d) != H3_OK) return H3_ERR;
  h3_runtime_options ro = {.trace = trace, .weight_seed = o->seed, .trace_device = !o->sync_trace};
  s->rt = h3_runtime_new(m, s->b, s->w, &ro, d);
  return s->rt ? H3_OK : H3_ERR;
}

/* One run of `step`; *ms = its GPU busy time (cuda), its wall time (cpu). */
static h3_status run_step(setup *s, double *ms, h3_diag *d) {
  for (int i = 0; i < s->g->n_outputs; i++) {
    free(s->out[i].data);
    s->out[i].data = NULL;
  }
  bool cuda = h3_backend_is_cuda(s->b);
  h3_backend_reset_busy(s->b);
  double t0 = s->b->ops->now(s->b);
  if (h3_runtime_run(s->rt, s->g, s->in, s->out, d) != H3_OK) return H3_ERR;
  *ms = (cuda ? h3_backend_busy_seconds(s->b) : s->b->ops->now(s->b) - t0) * 1e3;
  return H3_OK;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n ? v[n / 2] : 0;
}

/* The two plans' `step` timed in alternation (A, B, A, B, ... after `warmup` runs of each),
 * so that the GPU's clock and temperature drift weigh on both alike: med/lo/hi[i] are plan
 * i's median / min / max GPU milliseconds, layers[i] its trunk length, and *block the median
 * over the iterations of (B - A) / (layers B - layers A). */
static h3_status time_plans(const char *const paths[2], const opts *o, double med[2], double lo[2],
                            double hi[2], int64_t layers[2], double *block, h3_diag *d) {
  setup s[2];
  memset(s, 0, sizeof s);
  double *ms = calloc(3 * ((size_t)o->iters + 1), sizeof *ms), *diff = ms ? ms + 2 * (o->iters + 1) : NULL;
  h3_status st = ms ? H3_OK : H3_ERR;
  for (int i = 0; st == H3_OK && i < 2; i++) st = setup_new(&s[i], paths[i], o, false, d);
  for (int i = 0; st == H3_OK && i < 2; i++)
    for (int it = 0; st == H3_OK && it < o->warmup; it++) {
      double t;
      st = run_step(&s[i], &t, d);
    }
  if (st == H3_OK && s[1].layers == s[0].layers) {
    h3_diag_error(d, (h3_span){0}, "compile the two plans with different --set layers=N",
                  "block_bench: both plans have %lld layers", (long long)s[0].layers);
    st = H3_ERR;
  }
  for (int it = 0; st == H3_OK && it < o->iters; it++) {
    for (int i = 0; st == H3_OK && i < 2; i++) st = run_step(&s[i], &ms[i * (o->iters + 1) + it], d);
    if (st == H3_OK)
      diff[it] = (ms[(o->iters + 1) + it] - ms[it]) / (double)(s[1].layers - s[0].layers);
  }
  for (int i = 0; st == H3_OK && i < 2; i++) {
    double *v = ms + i * (o->iters + 1);
    med[i] = median(v, o->iters);
    lo[i] = v[0];
    hi[i] = v[o->iters - 1];
    layers[i] = s[i].layers;
  }
  if (st == H3_OK) *block = median(diff, o->iters);
  free(ms);
  for (int i = 0; i < 2; i++) setup_free(&s[i]);
  return st;
}

/* ---- the per-op profile of the trunk ------------------------------------------------------- */
static const h3_op *trunk_loop(const h3_graph *g) {
  for (const h3_op *op = g->body.first; op; op = op->next)
    if (op->code == H3_OP_LOOP && !strcmp(h3_op_attr_string(op, "label", ""), "trunk")) return op;
  return NULL;
}

static const char *event_name(const h3_op *op) {
  return h3_op_attr_string(op, "kernel", h3_opcode_name(op->code));
}

/* Bytes op must move through device memory at least. */
static double op_bytes(const h3_op *op) {
  if (op->code == H3_OP_INDEX || op->code == H3_OP_RESHAPE) return 0;
  if (op->code == H3_OP_SLICE)
    return h3_exec_slice_is_contiguous(op) ? 0 : 2.0 * (double)h3_type_bytes(&op->results[0]->type);
  double b = 0;
  for (int i = 0; i < op->n_operands; i++) b += (double)h3_type_bytes(&op->operands[i]->type);
  for (int i = 0; i < op->n_results; i++) b += (double)h3_type_bytes(&op->results[i]->type);
  return b;
}

static double op_flops(const h3_op *op) {
  if (op->code == H3_OP_LINEAR || op->code == H3_OP_LINEAR_INT8 || op->code == H3_OP_MATMUL_I8) {
    const h3_type *x = &op->operands[0]->type, *y = &op->results[0]->type;
    double m = 1;
    for (int i = 0; i < x->rank - 1; i++) m *= (double)x->dims[i];
    return 2.0 * m * (double)x->dims[x->rank - 1] * (double)y->dims[y->rank - 1];
  }
  if (op->code == H3_OP_ATTENTION) {
    const h3_type *q = &op->operands[0]->type;
    int64_t T = q->dims[0], lo = 0;
    double hd = (double)q->dims[1] * (double)q->dims[2], f = 0;
    const h3_attr *seg = h3_op_attr(op, "segments");
    int nb = seg && seg->kind == H3_ATTR_INTS ? seg->n : 0;
    for (int i = 0; i <= nb; i++) {
      int64_t h = i < nb ? seg->ints[i] : T;
      if (h > T) h = T;
      if (h > lo) f += 4.0 * (double)(h - lo) * (double)(h - lo) * hd;
      if (h > lo) lo = h;
    }
    return f;
  }
  return 0;
}

static void type_text(char *buf, size_t n, const h3_type *t) {
  int w = snprintf(buf, n, "%s[", h3_dtype_name(t->dtype));
  for (int i = 0; i < t->rank && w > 0 && (size_t)w < n; i++)
    w += snprintf(buf + w, n - (size_t)w, "%s%lld", i ? "," : "", (long long)t->dims[i]);
  if (w > 0 && (size_t)w < n) snprintf(buf + w, n - (size_t)w, "]");
}

static h3_status profile(const char *path, const opts *o, double block_ms, h3_diag *d) {
  setup s;
  if (setup_new(&s, path, o, true, d) != H3_OK) {
    setup_free(&s);
    return H3_ERR;
  }
  const h3_op *loop = trunk_loop(s.g);
  int n_ops = 0;
  for (const h3_op *op = loop ? loop->regions[0].first : NULL; op; op = op->next)
    if (op->code != H3_OP_YIELD) n_ops++;
  double *t = calloc((size_t)n_ops * (size_t)o->profile + 1, sizeof *t);
  double trunk_ms = 0, ms;
  h3_status st = loop && t ? H3_OK : H3_ERR;
  if (!loop)
    h3_diag_error(d, (h3_span){0},
                  "give a plan of models/minimax_h3.g (its graph 'step' runs the loop 'trunk')",
                  "%s: graph 'step' has no loop 'trunk'", path);
  if (st == H3_OK) st = run_step(&s, &ms, d); /* warm-up: loads kernels, builds plans */
  for (int it = 0; st == H3_OK && it < o->profile; it++) {
    h3_runtime_reset_stats(s.rt);
    if ((st = run_step(&s, &ms, d)) != H3_OK) break;
    const h3_trace_event *ev;
    size_t n = h3_runtime_trace(s.rt, &ev), lo = n, e;
    for (e = 0; e < n; e++)
      if (!strcmp(ev[e].cat, "control") && !strcmp(ev[e].name, "trunk")) break;
    if (e == n) {
      h3_diag_error(d, (h3_span){0}, NULL, "block_bench: no trace event for the trunk loop");
      st = H3_ERR;
      break;
    }
    trunk_ms += ev[e].dur * 1e3 / o->profile;
    for (size_t j = 0; j < e; j++)
      if (ev[j].ts >= ev[e].ts) {
        lo = j;
        break;
      }
    /* the loop's events come in op order; match them by name */
    int k = 0;
    for (const h3_op *op = loop->regions[0].first; op && st == H3_OK; op = op->next) {
      if (op->code == H3_OP_YIELD) continue;
      while (lo < e && strcmp(ev[lo].name, event_name(op)) != 0) lo++;
      if (lo == e) {
        h3_diag_error(d, op->span, NULL, "block_bench: no trace event for op %s", event_name(op));
        st = H3_ERR;
        break;
      }
      t[(size_t)k * (size_t)o->profile + (size_t)it] = ev[lo++].dur * 1e3;
      k++;
    }
  }
  if (st == H3_OK) {
    printf("\n== per-op profile of one block (plan %s, %d traced runs, median ms per op;\n"
           "   floor = bytes / %.2f TB/s; %s) ==\n",
           path, o->profile, o->tbps,
           o->sync_trace || strcmp(o->backend, "cuda") != 0
               ? "each op's time includes one launch and sync"
               : "device timestamps, ops back to back as untraced: each op's time runs from the "
                 "end of the work queued before it to its own end");
    printf("%-3s %-12s %-30s %-22s %9s %9s %8s %7s %8s\n", "#", "op", "kernel", "result", "ms",
           "MB", "GB/s", "floor", "TFLOP/s");
    double sum[3] = {0}, floor_other = 0, sum_all = 0;
    bool int8 = false, split = false; /* split: matmul_i8, the dequantization in the consumers */
    int k = 0;
    for (const h3_op *op = loop->regions[0].first; op; op = op->next) {
      if (op->code == H3_OP_YIELD) continue;
      double m = median(t + (size_t)k * (size_t)o->profile, o->profile), by = op_bytes(op),
             fl = op_flops(op), fl_ms = by / (o->tbps * 1e9);
      char ty[64];
      type_text(ty, sizeof ty, &op->results[0]->type);
      const char *kn = h3_op_attr_string(op, "kernel", "-");
      printf("%-3d %-12s %-30.30s %-22.22s %9.3f %9.1f %8.0f %7.3f", k, h3_opcode_name(op->code), kn, ty,
             m, by / 1e6, m > 0 ? by / (m * 1e6) : 0, fl_ms);
      if (fl > 0) printf(" %8.1f", fl / (m * 1e9));
      printf("\n");
      /* the big GEMMs: bf16 linears, or int8 ones with their activation quantization */
      bool gemm = op->code == H3_OP_LINEAR || op->code == H3_OP_LINEAR_INT8 || op->code == H3_OP_MATMUL_I8;
      int cls = gemm && fl > 1e12                                                      ? 0
                : op->code == H3_OP_QUANTIZE_ROWS                                      ? 0
                : op->code == H3_OP_ATTENTION                                          ? 1
                                                                                       : 2;
      sum[cls] += m;
      int8 |= op->code == H3_OP_LINEAR_INT8;
      split |= op->code == H3_OP_MATMUL_I8;
      if (cls == 2) floor_other += fl_ms;
      sum_all += m;
      k++;
    }
    printf("totals: big GEMMs%s %.3f ms, attention %.3f ms, everything else %.3f ms (floor %.3f ms)\n",
           split  ? " (int8: matmul_i8 with quantize_rows; dequantization in the consumers)"
           : int8 ? " (int8: with quantize_rows and the fused dequantization)"
                  : "",
           sum[0], sum[1],
           sum[2], floor_other);
    printf("        sum of ops %.3f ms; traced trunk loop %.3f ms (%lld block(s): %.3f ms per block); "
           "untraced block %.3f ms\n",
           sum_all, trunk_ms, (long long)s.layers, trunk_ms / (double)s.layers, block_ms);
    printf("h3bench profile_gemm %.4f\nh3bench profile_attention %.4f\nh3bench profile_other %.4f\n",
           sum[0], sum[1], sum[2]);
  }
  free(t);
  setup_free(&s);
  return st;
}

static int usage(void) {
  fprintf(stderr, "usage: block_bench PLAN_A PLAN_B [--iters N] [--warmup N] [--attention NAME]\n"
                  "                   [--profile N [--sync-trace]] [--seed N] [--bandwidth TBPS]\n"
                  "                   [--backend cuda|cpu]\n"
                  "  PLAN_A, PLAN_B: models/minimax_h3.g compiled with two `layers` values\n");
  return 2;
}

int main(int argc, char **argv) {
  opts o = {5, 2, 0, false, H3_CUDA_ATTENTION_DEFAULT, "cuda", 7, 4.1};
  const char *plans[2] = {NULL, NULL};
  int np = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-' && np < 2) plans[np++] = a;
    else if (i + 1 < argc && !strcmp(a, "--iters")) o.iters = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(a, "--warmup")) o.warmup = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(a, "--profile")) o.profile = atoi(argv[++i]);
    else if (!strcmp(a, "--sync-trace")) o.sync_trace = true;
    else if (i + 1 < argc && !strcmp(a, "--attention")) o.attention = argv[++i];
    else if (i + 1 < argc && !strcmp(a, "--backend")) o.backend = argv[++i];
    else if (i + 1 < argc && !strcmp(a, "--seed")) o.seed = strtoull(argv[++i], NULL, 10);
    else if (i + 1 < argc && !strcmp(a, "--bandwidth")) o.tbps = atof(argv[++i]);
    else return usage();
  }
  if (np != 2 || o.iters < 1 || o.warmup < 0 || o.profile < 0 || !(o.tbps > 0) ||
      (strcmp(o.backend, "cuda") != 0 && strcmp(o.backend, "cpu") != 0))
    return usage();
  if (strcmp(o.backend, "cuda") == 0) gpu_require();
  h3_diag d;
  h3_diag_init(&d);
  double med[2] = {0}, lo[2], hi[2], block = 0;
  int64_t layers[2] = {0};
  h3_status st = time_plans(plans, &o, med, lo, hi, layers, &block, &d);
  for (int i = 0; i < 2 && st == H3_OK; i++)
    printf("step with %lld layer(s): median %.3f ms (min %.3f, max %.3f; %d runs after %d warm-up, "
           "alternating with the other plan)\n",
           (long long)layers[i], med[i], lo[i], hi[i], o.iters, o.warmup);
  if (st == H3_OK) {
    printf("one block (%s, attention %s): %.3f ms = median over the runs of (step[%lld] - step[%lld]) / %lld\n",
           o.backend, strcmp(o.backend, "cpu") ? o.attention : "reference", block,
           (long long)layers[1], (long long)layers[0], (long long)(layers[1] - layers[0]));
    printf("h3bench step_a %.4f\nh3bench step_b %.4f\nh3bench block %.4f\n", med[0], med[1], block);
  }
  if (st == H3_OK && o.profile > 0) st = profile(plans[0], &o, block, &d);
  h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  return st == H3_OK ? 0 : 1;
}
