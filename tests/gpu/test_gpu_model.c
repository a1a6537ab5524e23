/* test_gpu_model.c: the tiny MiniMax-H3 plan on the cuda backend, end to end.
 *
 * 1. lossless plan (kernels from the plan's CUBINs, h3_cuda_load_plan), weights made on the
 *    GPU, default inputs: the `step` graph and the `sample` program agree with the cpu
 *    backend (host weights from the same seed) within an NMSE limit (the GPU's GEMM and
 *    attention sum in other orders, so bf16 roundings differ and propagate);
 * 2. `sample` run twice with CUDA graphs (the second `step` call is captured, later ones
 *    replayed) gives bitwise the same outputs both times, and bitwise the same as a backend
 *    with CUDA graphs off;
 * 3. exact tier: the fused exact plan and the unfused plan (every *fusion* pass disabled)
 *    give bitwise equal `step` outputs on the GPU.
 *   test_gpu_model MODELS_DIR      (exit 77 without a GPU)
 */
#include "gpu_common.h"

#include "h3/cuda_backend.h"
#include "h3/frontend.h"
#include "h3/passes.h"
#include "h3/plan.h"
#include "h3/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SEED 4242u
#define STEP_LIMIT 1e-3
#define SAMPLE_LIMIT 1e-2


/* Builds the tiny H3 plan at `tier`; unfused: without the fusion passes. */
static h3_plan *make_plan(const char *dir, h3_tier tier, bool unfused, h3_diag *d) {
  char path[4096], disabled[512] = "";
  snprintf(path, sizeof path, "%s/minimax_h3.g", dir);
  h3_frontend_options fo = {.config = "tiny"};
  h3_module *m = h3_frontend_load(path, &fo, d);
  h3_pass_options po = h3_pass_options_default();
  po.tier = tier;
  for (int i = 0; unfused && i < h3_pass_count(); i++)
    if (strstr(h3_pass_at(i)->name, "fusion")) {
      if (disabled[0]) strncat(disabled, ",", sizeof disabled - strlen(disabled) - 1);
      strncat(disabled, h3_pass_at(i)->name, sizeof disabled - strlen(disabled) - 1);
    }
  if (disabled[0]) po.disabled = disabled;
  if (!m || h3_pass_pipeline_run(m, &po, d) != H3_OK) {
    h3_module_free(m);
    return NULL;
  }
  h3_plan_options plo = {.quality = tier};
  h3_plan *p = NULL;
  if (h3_plan_build(&p, m, &plo, d) != H3_OK || h3_plan_compile_kernels(p, d) != H3_OK) {
    h3_plan_free(p);
    return NULL;
  }
  return p;
}

static void free_out(h3_host_tensor *o, int n) {
  for (int i = 0; i < n; i++) free(o[i].data);
  memset(o, 0, (size_t)n * sizeof *o);
}

typedef struct {
  h3_backend *b;
  h3_weights *w;
  h3_runtime *rt;
} runner;

static bool runner_new_traced(runner *r, const h3_plan *p, const char *backend, bool graphs,
                              bool trace_device, h3_diag *d) {
  memset(r, 0, sizeof *r);
  h3_backend_options bo = {.threads = 2, .seed = SEED};
  if (!strcmp(backend, "cpu")) {
    r->b = h3_backend_cpu_new(&bo, d);
    r->w = r->b ? h3_weights_random(p->module, SEED, d) : NULL;
    if (!r->w) return false;
  } else {
    h3_cuda_options co = {.attention = "cudnn", .no_graphs = !graphs};
    r->b = h3_backend_cuda_new(&bo, &co, d);
    if (!r->b || h3_cuda_load_plan(r->b, p, d) != H3_OK) return false;
  }
  h3_runtime_options ro = {.weight_seed = SEED, .trace = trace_device, .trace_device = trace_device};
  r->rt = h3_runtime_new(p->module, r->b, r->w, &ro, d);
  return r->rt != NULL;
}

static bool runner_new(runner *r, const h3_plan *p, const char *backend, bool graphs, h3_diag *d) {
  return runner_new_traced(r, p, backend, graphs, false, d);
}


static void runner_free(runner *r) {
  h3_runtime_free(r->rt);
  h3_weights_free(r->w);
  h3_backend_free(r->b);
}

/* Runs graph `name` with default inputs; out gets g->n_outputs host tensors. */
static const h3_graph *run(runner *r, const h3_plan *p, const char *name, h3_host_tensor *out,
                           h3_diag *d) {
  const h3_graph *g = h3_module_graph(p->module, name);
  if (!g) return NULL;
  h3_host_tensor *in = calloc((size_t)g->n_inputs + 1, sizeof *in);
  h3_input_defaults defs = {.seed = SEED};
  bool ok = in && h3_inputs_fill_defaults(p->module, g, in, &defs, d) == H3_OK &&
            h3_runtime_run(r->rt, g, in, out, d) == H3_OK;
  h3_host_tensors_free(in, g->n_inputs);
  return ok ? g : NULL;
}

static void compare(const h3_graph *g, h3_host_tensor *a, h3_host_tensor *b, double limit,
                    const char *what) {
  for (int i = 0; i < g->n_outputs; i++) {
    gpu_cmp c = gpu_compare(&a[i].type, a[i].data, b[i].data);
    char msg[160];
    snprintf(msg, sizeof msg, "%s, output %s", what, g->output_names[i]);
    if (limit == 0) gpu_check(gpu_cmp_ok(&c, 0) && memcmp(a[i].data, b[i].data, a[i].bytes) == 0,
                          "%s: bitwise equal (nmse %.3g)", msg, c.nmse);
    else gpu_check(gpu_cmp_ok(&c, limit), "%s: nmse %.3g (limit %.0e)", msg, c.nmse, limit);
  }
}

/* The device-clock trace (ops back to back, device timestamps): the same outputs as
 * untraced, one event per executed op with a duration, and the ops' times add up to at most
 * the GPU busy time of the run. */
static void check_device_trace(const h3_plan *p, const h3_graph *g, h3_host_tensor *want,
                               h3_diag *d) {
  runner tr;
  h3_host_tensor out[8] = {0};
  if (!runner_new_traced(&tr, p, "cuda", false, true, d) || !run(&tr, p, "step", out, d)) {
    gpu_check(false, "running step with the device-clock trace");
    runner_free(&tr);
    return;
  }
  double busy0 = h3_cuda_gpu_seconds(tr.b);
  h3_runtime_reset_stats(tr.rt);
  bool ran = run(&tr, p, "step", out, d) != NULL;
  double busy = h3_cuda_gpu_seconds(tr.b) - busy0, ops = 0;
  const h3_trace_event *ev;
  size_t n = h3_runtime_trace(tr.rt, &ev), kernels = 0, bad = 0;
  for (size_t i = 0; i < n; i++) {
    if (!(ev[i].dur >= 0) || !(ev[i].ts >= 0)) bad++;
    if (!strcmp(ev[i].cat, "control") || !strcmp(ev[i].cat, "view")) continue;
    ops += ev[i].dur;
    kernels += ev[i].dur > 0;
  }
  gpu_check(ran, "step with the device-clock trace ran");
  if (ran) compare(g, out, want, 0, "step with the device-clock trace vs untraced");
  gpu_check(n > 10 && kernels > 10 && bad == 0 && ops > 0 && ops <= busy * 1.02 + 1e-5,
        "device-clock trace: %zu events, %zu timed ops, %zu bad; ops %.3f ms within busy %.3f ms",
        n, kernels, bad, ops * 1e3, busy * 1e3);
  free_out(out, g->n_outputs);
  runner_free(&tr);
}

/* The GPU busy time of a run counts that run's work only: a run after 200 ms of host idle
 * (the outputs of the run before downloaded) reports far less than the idle time. */
static void check_busy_time(runner *r, const h3_plan *p, h3_diag *d) {
  h3_host_tensor out[8] = {0};
  const h3_graph *g = run(r, p, "step", out, d);
  if (g) free_out(out, g->n_outputs);
  nanosleep(&(struct timespec){0, 200000000}, NULL);
  h3_cuda_reset_gpu_seconds(r->b);
  g = g ? run(r, p, "step", out, d) : NULL;
  double busy = h3_cuda_gpu_seconds(r->b);
  gpu_check(g && busy > 0 && busy < 0.1, "busy time of a step after 200 ms idle: %.3f ms (< 100)",
        busy * 1e3);
  if (g) free_out(out, g->n_outputs);
}

int main(int argc, char **argv) {
  gpu_require();
  const char *dir = argc > 1 ? argv[1] : H3_SOURCE_DIR "/models";
  h3_diag d;
  h3_diag_init(&d);
  h3_plan *lossless = make_plan(dir, H3_TIER_LOSSLESS, false, &d);
  h3_plan *exact = make_plan(dir, H3_TIER_EXACT, false, &d);
  h3_plan *unfused = make_plan(dir, H3_TIER_EXACT, true, &d);
  runner cpu, gpu, nog, ex, unf;
  memset(&nog, 0, sizeof nog);
  memset(&ex, 0, sizeof ex);
  memset(&unf, 0, sizeof unf);
  if (!lossless || !exact || !unfused || !runner_new(&cpu, lossless, "cpu", false, &d) ||
      !runner_new(&gpu, lossless, "cuda", true, &d)) {
    h3_diag_print(&d, stderr);
    printf("0 passed, 1 failed\n");
    return 1;
  }
  h3_host_tensor c_step[8] = {0}, g_step[8] = {0}, c_smp[8] = {0}, g_smp[8] = {0}, g_smp2[8] = {0};
  h3_host_tensor n_smp[8] = {0}, e_step[8] = {0}, u_step[8] = {0};
  const h3_graph *step = run(&cpu, lossless, "step", c_step, &d);
  const h3_graph *gstep = run(&gpu, lossless, "step", g_step, &d);
  if (step && gstep) compare(step, g_step, c_step, STEP_LIMIT, "step, cuda vs cpu");
  else gpu_check(false, "running step on both backends");
  if (gstep) check_device_trace(lossless, gstep, g_step, &d);
  if (gstep) check_busy_time(&gpu, lossless, &d);
  const h3_graph *smp = run(&cpu, lossless, "sample", c_smp, &d);
  const h3_graph *gsmp = run(&gpu, lossless, "sample", g_smp, &d);
  const h3_graph *gsmp2 = run(&gpu, lossless, "sample", g_smp2, &d);
  if (smp && gsmp && gsmp2) {
    compare(smp, g_smp, c_smp, SAMPLE_LIMIT, "sample, cuda vs cpu");
    compare(smp, g_smp2, g_smp, 0, "sample run twice with CUDA graphs");
    int64_t cap = 0, rep = 0;
    h3_cuda_graph_counts(gpu.b, &cap, &rep);
    gpu_check(cap >= 1 && rep >= 1, "CUDA graphs: %lld captured, %lld replayed", (long long)cap, (long long)rep);
    int64_t timed = -1, read = -1;
    double tune_s = -1;
    gpu_check(h3_backend_gemm_tuning(gpu.b, &timed, &read, &tune_s) && timed >= 0 && read >= 0 && tune_s >= 0 &&
                  (timed > 0 || tune_s == 0),
              "GEMM tuning counts: %lld timed (%g s), %lld read", (long long)timed, tune_s, (long long)read);
  } else {
    gpu_check(false, "running sample on both backends");
  }
  if (gsmp && runner_new(&nog, lossless, "cuda", false, &d) && run(&nog, lossless, "sample", n_smp, &d))
    compare(gsmp, n_smp, g_smp, 0, "sample with CUDA graphs off vs on");
  else gpu_check(false, "running sample without CUDA graphs");
  if (runner_new(&ex, exact, "cuda", true, &d) && runner_new(&unf, unfused, "cuda", true, &d)) {
    const h3_graph *ge = run(&ex, exact, "step", e_step, &d);
    const h3_graph *gu = run(&unf, unfused, "step", u_step, &d);
    if (ge && gu) compare(ge, e_step, u_step, 0, "exact tier: fused plan vs unfused plan (cuda)");
    else gpu_check(false, "running the exact and unfused plans");
  } else {
    gpu_check(false, "creating the exact-tier runtimes");
  }
  h3_diag_print(&d, stderr);
  int n = step ? step->n_outputs : 0, ns = smp ? smp->n_outputs : 0;
  free_out(c_step, n), free_out(g_step, n), free_out(e_step, n), free_out(u_step, n);
  free_out(c_smp, ns), free_out(g_smp, ns), free_out(g_smp2, ns), free_out(n_smp, ns);
  runner_free(&unf), runner_free(&ex), runner_free(&nog), runner_free(&gpu), runner_free(&cpu);
  h3_plan_free(unfused), h3_plan_free(exact), h3_plan_free(lossless);
  h3_diag_free(&d);
  printf("%d passed, %d failed\n", gpu_passed, gpu_failed);
  return gpu_failed ? 1 : 0;
}
