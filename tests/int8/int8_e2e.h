/* int8_e2e.h: what the end-to-end int8 tests share (test_int8_e2e.c, test_int8_fuse_e2e.c):
 * a check counter, the small H3 they compile (tiny config with widths 256 so that the
 * 209-layer rule applies, one block, 4 steps), a CPU run of one graph with random weights
 * and default inputs (seed 7), output comparisons, and same_graph: one graph of two pass
 * lists, bitwise equal. Test-only, header-only. */
#ifndef H3_TESTS_INT8_E2E_H
#define H3_TESTS_INT8_E2E_H

#include "h3/frontend.h"
#include "h3/int8.h"
#include "h3/passes.h"
#include "h3/runtime.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/case_data.h"
#include "../common/check.h"
#include "../common/tiny_h3.h"

static h3_config_override sets[] = {{"dim", 256},  {"heads", 2},          {"head_dim", 128},
                                    {"ffn", 256},  {"text_dim", 256},     {"layers", 1},
                                    {"steps", 4}};

/* The small H3 after the pipeline of `tier`, with --int8=int8 and the opt-in passes
 * `enable` (NULL: none). */
static h3_module *small_h3(const char *int8, h3_tier tier, const char *enable) {
  h3_frontend_options fo = {"tiny", (int)(sizeof sets / sizeof sets[0]), sets};
  h3_pass_options o = h3_pass_options_default();
  o.tier = tier;
  o.int8 = int8;
  o.enable = enable;
  return minimax_h3_load(&fo, &o);
}


typedef struct {
  h3_host_tensor *out;
  int n;
  size_t weight_bytes;
} run_result;

/* Runs graph `name` of m on the CPU with random weights (seed 7) and default inputs. */
static run_result run(const h3_module *m, const char *name) {
  run_result r = {0};
  h3_diag d;
  h3_diag_init(&d);
  const h3_graph *g = h3_module_graph(m, name);
  h3_backend_options bo = {.threads = 2, .seed = 7};
  h3_backend *b = h3_backend_cpu_new(&bo, &d);
  h3_weights *w = h3_weights_random(m, 7, &d);
  h3_host_tensor *in = calloc((size_t)g->n_inputs + 1, sizeof *in);
  h3_input_defaults defs = {7, 0};
  h3_runtime *rt = NULL;
  if (b && w && in && h3_inputs_fill_defaults(m, g, in, &defs, &d) == H3_OK)
    rt = h3_runtime_new(m, b, w, NULL, &d);
  r.out = calloc((size_t)g->n_outputs + 1, sizeof *r.out);
  if (rt && r.out && h3_runtime_run(rt, g, in, r.out, &d) == H3_OK) {
    r.n = g->n_outputs;
    r.weight_bytes = h3_runtime_weight_bytes(rt);
  }
  if (!r.n) h3_diag_print(&d, stderr);
  CHECK(r.n > 0, "running '%s' failed", name);
  h3_runtime_free(rt);
  if (in) h3_host_tensors_free(in, g->n_inputs);
  h3_weights_free(w);
  h3_backend_free(b);
  h3_diag_free(&d);
  return r;
}

static void result_free(run_result *r, const h3_module *m, const char *name) {
  if (r->out) h3_host_tensors_free(r->out, h3_module_graph(m, name)->n_outputs);
  r->out = NULL;
}

/* Relative L2 of output i of a against b (f32 outputs). */
static double rel_l2(const run_result *a, const run_result *b, int i) {
  const float *x = a->out[i].data, *y = b->out[i].data;
  int64_t n = h3_type_numel(&a->out[i].type);
  double num = 0, den = 0;
  for (int64_t k = 0; k < n; k++) {
    num += ((double)x[k] - y[k]) * ((double)x[k] - y[k]);
    den += (double)y[k] * y[k];
  }
  return den > 0 ? sqrt(num / den) : INFINITY;
}

static bool same_bits(const run_result *a, const run_result *b) {
  if (!a->n || a->n != b->n) return false;
  for (int i = 0; i < a->n; i++)
    if (a->out[i].bytes != b->out[i].bytes || memcmp(a->out[i].data, b->out[i].data, a->out[i].bytes))
      return false;
  return true;
}

/* graph `name` of the plans compiled with `a` and `b` passes: bitwise equal outputs. */
static inline void same_graph(const char *int8, h3_tier tier, const char *a, const char *b,
                       const char *name) {
  h3_module *ma = small_h3(int8, tier, a), *mb = small_h3(int8, tier, b);
  CHECK(ma && mb, "compile --int8=%s", int8);
  if (ma && mb) {
    run_result ra = run(ma, name), rb = run(mb, name);
    CHECK(ra.n > 0 && same_bits(&ra, &rb), "%s at %s, --int8=%s: [%s] and [%s] differ", name,
          h3_tier_name(tier), int8, a, b);
    printf("  %s, --quality %s, --int8=%s: [%s] == [%s] bitwise\n", name, h3_tier_name(tier), int8,
           a, b);
    result_free(&ra, ma, name);
    result_free(&rb, mb, name);
  }
  h3_module_free(ma);
  h3_module_free(mb);
}

#endif
