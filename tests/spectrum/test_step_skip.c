/* test_step_skip.c: the step-skipping passes end to end on the CPU backend
 * (docs/step-skipping.md; docs/models/accelerations.md §9 items 7-10).
 *
 * A small hand-written program (the module of spectrum_small.ir with N steps: a `trunk`
 * of two blocks h + sin(h) over 4 rows [text | audio | video video]; every step writes
 * its audio and video rows into histories) runs as compiled by the default pipeline and
 * with each pass:
 *   spectrum (defaults 5/2.0/0.75): real steps bitwise equal to the plain program; on
 *     forecast steps the audio rows equal the last real step's bitwise, and the video
 *     rows equal the fp64 batch ridge forecast over the plain program's real features;
 *   cache-dit: threshold 0 is bitwise equal to the plain program; with a huge threshold
 *     (warm-up 2, at most 1 in a row) exactly steps 2, 4, 6, ... are cached: full steps
 *     bitwise equal to the plain program, cached ones equal an fp64 emulation of
 *     H = H1 + (H_full - H1 of the last full step).
 * Then tiny MiniMax-H3 with --spectrum (front end + passes + runtime): the program
 * records the 14 real steps of 49, the latents are finite and near the plain ones.
 */
#include "h3/frontend.h"
#include "h3/passes.h"
#include "h3/runtime.h"
#include "spectrum.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/check.h"

enum { N = 12 };

static const char *module_text(void) {
  static char buf[4096];
  snprintf(buf, sizeof buf,
           "module @t config \"test\" {\n"
           "  config { text_rows = 1, audio_rows = 1, video_rows = 2 }\n"
           "  graph @step(%%x0: f32[4, 2], %%t: f32[]) -> (audio: f32[1, 2], video: f32[2, 2]) {\n"
           "    %%e = mul(%%x0, %%t) : f32[4, 2]\n"
           "    %%x = loop(%%e) {count = 2, label = \"trunk\"} : f32[4, 2] {\n"
           "    ^(%%i: i32[], %%h: f32[4, 2]):\n"
           "      %%s = sin(%%h) : f32[4, 2]\n"
           "      %%a = add(%%h, %%s) : f32[4, 2]\n"
           "      yield %%a\n"
           "    }\n"
           "    %%au = slice(%%x) {axis = 0, start = 1, len = 1} : f32[1, 2]\n"
           "    %%vi = slice(%%x) {axis = 0, start = 2, len = 2} : f32[2, 2]\n"
           "    return %%au, %%vi\n"
           "  }\n"
           "  program @sample(%%x0: f32[4, 2]) -> (ha: f32[%d, 1, 2], hv: f32[%d, 2, 2]) {\n"
           "    %%ha0 = const() {value = 0.0, dtype = f32, shape = [%d, 1, 2]} : f32[%d, 1, 2]\n"
           "    %%hv0 = const() {value = 0.0, dtype = f32, shape = [%d, 2, 2]} : f32[%d, 2, 2]\n"
           "    %%tab = iota() {n = %d, dtype = f32} : f32[%d]\n"
           "    %%ha, %%hv = loop(%%ha0, %%hv0) {count = %d, label = \"denoise\"} : f32[%d, 1, 2], "
           "f32[%d, 2, 2] {\n"
           "    ^(%%k: i32[], %%a: f32[%d, 1, 2], %%b: f32[%d, 2, 2]):\n"
           "      %%t = index(%%tab, %%k) {offset = 1} : f32[]\n"
           "      %%kf = cast(%%k) {dtype = f32} : f32[]\n"
           "      %%t2 = mul(%%t, %%t) : f32[]\n"
           "      %%tt = div(%%kf, %%t2) : f32[]\n"
           "      %%au, %%vi = call(%%x0, %%tt) {callee = \"step\"} : f32[1, 2], f32[2, 2]\n"
           "      %%a2 = set_index(%%a, %%k, %%au) : f32[%d, 1, 2]\n"
           "      %%b2 = set_index(%%b, %%k, %%vi) : f32[%d, 2, 2]\n"
           "      yield %%a2, %%b2\n"
           "    }\n"
           "    return %%ha, %%hv\n"
           "  }\n"
           "}\n",
           N, N, N, N, N, N, N + 1, N + 1, N, N, N, N, N, N, N);
  return buf;
}

/* t of step k in the program above: k / (k + 1)^2 */
static double step_t(int k) { return (double)k / ((double)(k + 1) * (k + 1)); }

static const float x0_data[8] = {0.9f, -1.3f, 0.4f, 2.1f, -0.7f, 1.6f, 1.1f, -2.4f};

/* Parses the module, runs the pipeline with the given options, runs `sample`; out gets
 * ha [N, 1, 2] then hv [N, 2, 2]: 2N + 4N floats. */
static void run_small(const h3_pass_options *po, float *out) {
  h3_diag d;
  h3_diag_init(&d);
  const char *text = module_text();
  h3_module *m = h3_module_parse("t.ir", text, strlen(text), &d);
  h3_status st = m ? h3_pass_pipeline_run(m, po, &d) : H3_ERR;
  h3_backend_options bo = {.threads = 2, .seed = 0};
  h3_backend *b = st == H3_OK ? h3_backend_create("cpu", &bo, &d) : NULL;
  h3_weights *w = b ? h3_weights_random(m, 0, &d) : NULL;
  h3_runtime *rt = w ? h3_runtime_new(m, b, w, NULL, &d) : NULL;
  const h3_graph *g = m ? h3_module_graph(m, "sample") : NULL;
  h3_host_tensor res[2] = {{0}};
  if (rt && g) {
    h3_host_tensor in[1] = {{"x0", g->inputs[0]->type, (void *)x0_data, sizeof x0_data}};
    st = h3_runtime_run(rt, g, in, res, &d);
  } else {
    st = H3_ERR;
  }
  h3_diag_print(&d, stderr);
  CHECK(st == H3_OK, "compiling or running the small program failed");
  if (st == H3_OK) {
    memcpy(out, res[0].data, 2 * N * sizeof(float));
    memcpy(out + 2 * N, res[1].data, 4 * N * sizeof(float));
  }
  free(res[0].data), free(res[1].data);
  h3_runtime_free(rt);
  h3_weights_free(w);
  h3_backend_free(b);
  h3_module_free(m);
  h3_diag_free(&d);
}

static void test_spectrum_small(const float *base) {
  static float got[6 * N];
  h3_pass_options po = h3_pass_options_default();
  po.enable = "spectrum";
  po.spectrum = "";
  run_small(&po, got);
  h3_spectrum_options o = h3_spectrum_options_default();
  bool real[N];
  h3_spectrum_schedule(&o, N, real); /* real 0-4, 6, 8, 11 */
  const float *ha = got, *hv = got + 2 * N, *bha = base, *bhv = base + 2 * N;
  int last = -1, differs = 0;
  double worst = 0;
  for (int i = 0; i < N; i++) {
    if (real[i]) {
      CHECK(memcmp(ha + 2 * i, bha + 2 * i, 8) == 0 && memcmp(hv + 4 * i, bhv + 4 * i, 16) == 0,
            "real step %d differs from the plain program", i);
      last = i;
      continue;
    }
    CHECK(last >= 0 && memcmp(ha + 2 * i, ha + 2 * last, 8) == 0,
          "forecast step %d: audio rows are not the held rows of step %d", i, last);
    /* the fp64 ridge forecast from the plain program's real video rows */
    double feat[N * 4], want[4];
    for (int j = 0; j < N * 4; j++) feat[j] = bhv[j];
    for (int e = 0; e < 4; e++) {
      double a[9], xs[9], g[81] = {0}, xj[9];
      h3_spectrum_basis(o.m, h3_spectrum_tau(i, o.tau_steps), xs);
      double rsum[9] = {0};
      for (int j = 0; j < i; j++) {
        if (!real[j]) continue;
        h3_spectrum_basis(o.m, h3_spectrum_tau(j, o.tau_steps), xj);
        for (int r = 0; r < 5; r++) {
          rsum[r] += xj[r] * feat[j * 4 + e];
          for (int c = 0; c < 5; c++) g[r * 5 + c] += xj[r] * xj[c];
        }
      }
      CHECK(h3_spectrum_solve(5, g, o.lam, xs, a) == 0, "solve at step %d", i);
      want[e] = 0;
      for (int r = 0; r < 5; r++) want[e] += a[r] * rsum[r];
      double err = fabs(hv[4 * i + e] - want[e]) / (1.0 + fabs(want[e]));
      if (err > worst) worst = err;
      differs += fabs(hv[4 * i + e] - bhv[4 * i + e]) > 1e-6;
    }
  }
  CHECK(worst < 1e-5, "forecast rows vs the fp64 ridge forecast: worst error %g", worst);
  CHECK(differs > 0, "the forecast rows equal the real computation everywhere");
}

/* fp64 emulation of Cache-DiT with every eligible step cached (warm-up 2, 1 in a row). */
static void emulate_cached(double *ha, double *hv, bool *cached) {
  double rm[8] = {0};
  int run = 0;
  for (int k = 0; k < N; k++) {
    double h0[8], h1[8], h[8];
    for (int i = 0; i < 8; i++) {
      h0[i] = (double)(float)((double)x0_data[i] * step_t(k));
      h1[i] = h0[i] + sin(h0[i]);
    }
    cached[k] = k >= 2 && run < 1;
    for (int i = 0; i < 8; i++) h[i] = cached[k] ? h1[i] + rm[i] : h1[i] + sin(h1[i]);
    if (cached[k]) {
      run++;
    } else {
      run = 0;
      for (int i = 0; i < 8; i++) rm[i] = h[i] - h1[i];
    }
    for (int i = 0; i < 2; i++) ha[2 * k + i] = h[2 + i];
    for (int i = 0; i < 4; i++) hv[4 * k + i] = h[4 + i];
  }
}

static void test_cache_dit_small(const float *base) {
  static float got[6 * N];
  h3_pass_options po = h3_pass_options_default();
  po.tier = H3_TIER_HIGH;
  po.cache_dit = "threshold=0";
  run_small(&po, got);
  CHECK(memcmp(got, base, sizeof got) == 0, "threshold 0 is not bitwise equal to no caching");
  po.cache_dit = "warmup=2,threshold=1000,max_consecutive=1";
  run_small(&po, got);
  double ha[2 * N], hv[4 * N], worst = 0;
  bool cached[N];
  emulate_cached(ha, hv, cached);
  int n_cached = 0, moved = 0;
  for (int k = 0; k < N; k++) {
    if (!cached[k]) {
      CHECK(memcmp(got + 2 * k, base + 2 * k, 8) == 0 &&
                memcmp(got + 2 * N + 4 * k, base + 2 * N + 4 * k, 16) == 0,
            "full step %d differs from the plain program", k);
      continue;
    }
    n_cached++;
    for (int i = 0; i < 2; i++) worst = fmax(worst, fabs(got[2 * k + i] - ha[2 * k + i]));
    for (int i = 0; i < 4; i++) {
      worst = fmax(worst, fabs(got[2 * N + 4 * k + i] - hv[4 * k + i]));
      moved += got[2 * N + 4 * k + i] != base[2 * N + 4 * k + i];
    }
  }
  CHECK(n_cached == 5, "cached steps: %d (2, 4, 6, 8, 10 expected)", n_cached);
  CHECK(worst < 1e-5, "cached steps vs the fp64 emulation: worst error %g", worst);
  CHECK(moved > 0, "cached steps equal the full computation");
}

/* ---- tiny MiniMax-H3 ---------------------------------------------------------------------- */
static void run_h3(const char *models, const h3_pass_options *po, h3_host_tensor *out,
                   h3_module **mod) {
  char path[1024];
  snprintf(path, sizeof path, "%s/minimax_h3.g", models);
  h3_frontend_options fo = {"tiny", 0, NULL};
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = h3_frontend_load(path, &fo, &d);
  h3_status st = m ? h3_pass_pipeline_run(m, po, &d) : H3_ERR;
  h3_backend_options bo = {.threads = 2, .seed = 3};
  h3_backend *b = st == H3_OK ? h3_backend_create("cpu", &bo, &d) : NULL;
  h3_weights *w = b ? h3_weights_random(m, 3, &d) : NULL;
  h3_runtime *rt = w ? h3_runtime_new(m, b, w, NULL, &d) : NULL;
  const h3_graph *g = m ? h3_module_graph(m, "sample") : NULL;
  h3_host_tensor in[8] = {{0}};
  h3_input_defaults defs = {5, 0};
  st = rt && g && g->n_inputs <= 8 && h3_inputs_fill_defaults(m, g, in, &defs, &d) == H3_OK
           ? h3_runtime_run(rt, g, in, out, &d)
           : H3_ERR;
  h3_diag_print(&d, stderr);
  CHECK(st == H3_OK, "tiny H3 failed");
  for (int i = 0; g && i < g->n_inputs; i++) free(in[i].data);
  h3_runtime_free(rt);
  h3_weights_free(w);
  h3_backend_free(b);
  h3_diag_free(&d);
  *mod = m;
}

static void test_h3_tiny(const char *models) {
  h3_host_tensor base[2] = {{0}}, sp[2] = {{0}};
  h3_module *mb = NULL, *ms = NULL;
  h3_pass_options po = h3_pass_options_default();
  run_h3(models, &po, base, &mb);
  po.enable = "spectrum";
  po.spectrum = "";
  run_h3(models, &po, sp, &ms);
  const h3_graph *prog = ms ? h3_module_graph(ms, "sample") : NULL;
  const h3_attr *a = prog ? h3_graph_attr(prog, "spectrum_real") : NULL;
  static const int64_t want[14] = {0, 1, 2, 3, 4, 6, 8, 11, 15, 20, 25, 31, 38, 46};
  CHECK(a && a->n == 14 && memcmp(a->ints, want, sizeof want) == 0, "spectrum_real of tiny H3");
  for (int i = 0; i < 2 && base[i].data && sp[i].data; i++) {
    int64_t n = (int64_t)(base[i].bytes / 4);
    double num = 0, den = 0;
    int finite = 1;
    for (int64_t k = 0; k < n; k++) {
      double x = ((float *)base[i].data)[k], y = ((float *)sp[i].data)[k];
      finite &= isfinite(y);
      num += (x - y) * (x - y), den += x * x;
    }
    printf("tiny H3 --spectrum: %s relative L2 vs no skipping %.4f\n", base[i].name, sqrt(num / den));
    CHECK(finite && sqrt(num / den) < 0.5 && num > 0, "%s: rel L2 %g", base[i].name,
          sqrt(num / den));
  }
  for (int i = 0; i < 2; i++) free(base[i].data), free(sp[i].data);
  h3_module_free(mb);
  h3_module_free(ms);
}

int main(int argc, char **argv) {
  static float base[6 * N];
  h3_pass_options po = h3_pass_options_default();
  run_small(&po, base);
  test_spectrum_small(base);
  test_cache_dit_small(base);
  if (argc > 1) test_h3_tiny(argv[1]);
  printf("test_step_skip: %d checks, %d failures\n", checks, failures);
  return failures ? 1 : 0;
}
