/* tiny_h3.h: the tiny MiniMax-H3 (models/minimax_h3.g, config "tiny") run through the pass
 * pipeline, for the end-to-end tests of one pass: load the model with any config and pass
 * options, or compile the tiny config at a tier with some passes disabled (e.g. the pass
 * under test: the unfused plan), run its graphs on the CPU and
 * compare two plans' outputs bitwise; MiniMax-M3.1 (models/minimax_m3_1.g) compiled the same
 * way for the same comparisons.
 * Header-only; needs H3_SOURCE_DIR. */
#ifndef H3_TESTS_TINY_H3_H
#define H3_TESTS_TINY_H3_H

#include "h3/frontend.h"
#include "h3/passes.h"
#include "h3/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* models/minimax_h3.g loaded with *fo (a config and its overrides) and run through the
 * pipeline of *po. NULL after printing the diagnostics. */
static inline h3_module *minimax_h3_load(const h3_frontend_options *fo,
                                          const h3_pass_options *po) {
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = h3_frontend_load(H3_SOURCE_DIR "/models/minimax_h3.g", fo, &d);
  if (m && h3_pass_pipeline_run(m, po, &d) != H3_OK) {
    h3_module_free(m);
    m = NULL;
  }
  if (!m) h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  return m;
}

/* The tiny H3 after the default pipeline of `tier` without the passes in `disabled` (a
 * comma list, NULL: none), verified after each pass. NULL after printing the diagnostics. */
static inline h3_module *tiny_h3_compile(h3_tier tier, const char *disabled) {
  h3_frontend_options fo = {"tiny", 0, NULL};
  h3_pass_options po = h3_pass_options_default();
  po.tier = tier;
  po.disabled = disabled;
  po.verify_each = true;
  return minimax_h3_load(&fo, &po);
}

/* models/minimax_m3_1.g at `config` after the default pipeline with the opt-in passes in
 * `enabled` and without the passes in `disabled` (comma lists, NULL: none), verified after
 * each pass. NULL after printing the diagnostics. */
static inline h3_module *m31_compile_enabling(const char *config, const char *enabled,
                                              const char *disabled) {
  h3_frontend_options fo = {config, 0, NULL};
  h3_pass_options po = h3_pass_options_default();
  po.enable = enabled;
  po.disabled = disabled;
  po.verify_each = true;
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = h3_frontend_load(H3_SOURCE_DIR "/models/minimax_m3_1.g", &fo, &d);
  if (m && h3_pass_pipeline_run(m, &po, &d) != H3_OK) {
    h3_module_free(m);
    m = NULL;
  }
  if (!m) h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  return m;
}

/* The same without opt-in passes. */
static inline h3_module *m31_compile(const char *config, const char *disabled) {
  return m31_compile_enabling(config, NULL, disabled);
}

/* Runs graph `name` of m on the CPU backend (2 threads) with random weights of `seed` and
 * the default inputs of seed 5; out gets the graph's outputs (free with
 * tiny_h3_outputs_free). False after printing the diagnostics. */
static inline bool tiny_h3_run(const h3_module *m, const char *name, uint64_t seed,
                               h3_host_tensor *out) {
  h3_diag d;
  h3_diag_init(&d);
  const h3_graph *g = h3_module_graph(m, name);
  h3_backend_options bo = {.threads = 2, .seed = seed};
  h3_backend *b = h3_backend_create("cpu", &bo, &d);
  h3_weights *w = b ? h3_weights_random(m, seed, &d) : NULL;
  h3_runtime *rt = w ? h3_runtime_new(m, b, w, NULL, &d) : NULL;
  h3_host_tensor *in = g ? calloc((size_t)g->n_inputs + 1, sizeof *in) : NULL;
  h3_input_defaults defs = {5, 0};
  bool ok = rt && in && h3_inputs_fill_defaults(m, g, in, &defs, &d) == H3_OK &&
            h3_runtime_run(rt, g, in, out, &d) == H3_OK;
  if (!ok) h3_diag_print(&d, stderr);
  if (in) h3_host_tensors_free(in, g->n_inputs);
  h3_runtime_free(rt);
  h3_weights_free(w);
  h3_backend_free(b);
  h3_diag_free(&d);
  return ok;
}

static inline void tiny_h3_outputs_free(h3_host_tensor *o, int n) {
  for (int i = 0; i < n; i++) free(o[i].data);
}

/* Runs graph `name` of both modules (any model: tiny_h3_run only needs the module) with the
 * same weights and inputs; returns the number of problems (a run failed, an output differs
 * in a byte, an output is all zero), each printed to stderr with `label`. */
static inline int tiny_h3_differences(const h3_module *a, const h3_module *b, const char *name,
                                      const char *label) {
  const h3_graph *g = h3_module_graph(a, name);
  int n = g ? g->n_outputs : 0;
  h3_host_tensor *x = calloc((size_t)n + 1, sizeof *x), *y = calloc((size_t)n + 1, sizeof *y);
  bool ran_a = g && x && y && tiny_h3_run(a, name, 33, x);
  bool ran_b = ran_a && tiny_h3_run(b, name, 33, y);
  if (!ran_b)
    fprintf(stderr, "%s %s: the %s plan did not run\n", label, name, ran_a ? "second" : "first");
  int bad = ran_b ? 0 : 1;
  for (int i = 0; ran_b && i < n; i++) {
    if (x[i].bytes != y[i].bytes || memcmp(x[i].data, y[i].data, x[i].bytes) != 0) {
      fprintf(stderr, "%s %s output %s: the two plans differ\n", label, name, x[i].name);
      bad++;
    }
    bool nonzero = false;
    for (size_t k = 0; k < x[i].bytes && !nonzero; k++) nonzero = ((unsigned char *)x[i].data)[k];
    if (!nonzero) {
      fprintf(stderr, "%s %s output %s is all zero\n", label, name, x[i].name);
      bad++;
    }
  }
  if (ran_a) tiny_h3_outputs_free(x, n);
  if (ran_b) tiny_h3_outputs_free(y, n);
  free(x);
  free(y);
  return bad;
}

#endif
