/* case_data.h: what the op-case tests share (test-only, header-only): a seeded xorshift
 * generator whose state each test owns, non-zero random data of bf16 / f16 / f32, element
 * reads widened to double, the IR name of a dtype, IR text parsed (or expected to fail with
 * a message), the op of a graph by its result's name,
 * a walk over one graph's ops and whether an op sits in a fused group, and one op run on the
 * CPU backend (into given buffers, or into buffers it allocates). */
#ifndef H3_TESTS_CASE_DATA_H
#define H3_TESTS_CASE_DATA_H

#include "h3/backend.h"
#include "h3/bf16.h"
#include "h3/ir.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A uniform double in [lo, hi) from the xorshift state *rng. */
static inline double case_uniform(uint64_t *rng, double lo, double hi) {
  *rng ^= *rng << 13;
  *rng ^= *rng >> 7;
  *rng ^= *rng << 17;
  return lo + (hi - lo) * (double)(*rng >> 11) * 0x1p-53;
}

/* n random non-zero values of dtype t (bf16, f16 or f32; 16 bytes of slack after them):
 * |v| in [0.05, 2], sign random; scaled: times a per-64-element scale of 2^-6 .. 2^6 (rows of
 * very different norms). */
static inline void *case_random(uint64_t *rng, h3_dtype t, int64_t n, bool scaled) {
  void *p = malloc((size_t)(n ? n : 1) * h3_dtype_size(t) + 16);
  double scale = 1.0;
  for (int64_t i = 0; p && i < n; i++) {
    if (scaled && i % 64 == 0) scale = ldexp(1.0, (int)floor(case_uniform(rng, -6, 7)));
    double v = case_uniform(rng, 0.05, 2.0) * scale * (case_uniform(rng, 0, 1) < 0.5 ? -1 : 1);
    if (t == H3_BF16) ((uint16_t *)p)[i] = h3_f32_to_bf16((float)v);
    else if (t == H3_F16) ((uint16_t *)p)[i] = h3_f32_to_f16((float)v);
    else ((float *)p)[i] = (float)v;
  }
  return p;
}

/* Element i of p (bf16, f16 or f32) as a double. */
static inline double case_ld(const void *p, h3_dtype t, int64_t i) {
  if (t == H3_BF16) return h3_bf16_to_f32(((const uint16_t *)p)[i]);
  if (t == H3_F16) return h3_f16_to_f32(((const uint16_t *)p)[i]);
  return ((const float *)p)[i];
}

static inline const char *case_dtype(h3_dtype t) {
  return t == H3_BF16 ? "bf16" : t == H3_F16 ? "f16" : "f32";
}

/* The op of graph g whose first result is named `name`, or NULL. */
static inline h3_op *case_op(const h3_graph *g, const char *name) {
  for (h3_op *op = g->body.first; op; op = op->next)
    if (op->n_results && op->results[0]->name && strcmp(op->results[0]->name, name) == 0)
      return op;
  return NULL;
}

/* The module of IR text (named `file` in diagnostics); NULL after printing them. */
static inline h3_module *case_parse(const char *file, const char *text) {
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = h3_module_parse(file, text, strlen(text), &d);
  if (!m) h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  return m;
}

/* The module of the IR file at path; NULL after printing the diagnostics. */
static inline h3_module *case_load_ir(const char *path) {
  h3_diag d;
  h3_diag_init(&d);
  size_t len = 0;
  char *text = h3_read_file(path, &len, &d);
  h3_module *m = text ? h3_module_parse(path, text, len, &d) : NULL;
  if (!m) h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  free(text);
  return m;
}

/* True when IR text fails to parse with a diagnostic containing `want`; otherwise the
 * diagnostics are printed. */
static inline bool case_parse_fails_with(const char *file, const char *text, const char *want) {
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = h3_module_parse(file, text, strlen(text), &d);
  bool found = false;
  for (h3_diag_msg *msg = d.head; msg; msg = msg->next)
    if (msg->message && strstr(msg->message, want)) found = true;
  if (!found) h3_diag_print(&d, stderr);
  h3_module_free(m);
  h3_diag_free(&d);
  return !m && found;
}

/* Walks every op of graph `name` of m (nested regions too) with fn; nothing when m has no
 * such graph. */
static inline void case_walk_graph(const h3_module *m, const char *name, h3_op_visitor fn,
                                   void *ctx) {
  h3_graph *g = h3_module_graph(m, name);
  if (g) h3_region_walk(&g->body, fn, ctx);
}

/* True when op is inside the region of a fused group. */
static inline bool case_in_group(const h3_op *op) {
  return op->parent && op->parent->parent && op->parent->parent->code == H3_OP_FUSED;
}

/* Runs op (at most 10 operands, 4 results) on the CPU backend with `threads` threads:
 * in[i] holds operand i, out[r] receives result r; false after printing the diagnostics. */
static inline bool case_run_cpu(const h3_op *op, void *const *in, void *const *out, int threads) {
  h3_tensor ti[10], to[4];
  if (op->n_operands > 10 || op->n_results > 4) return false;
  for (int i = 0; i < op->n_operands; i++) ti[i] = (h3_tensor){op->operands[i]->type, in[i]};
  for (int r = 0; r < op->n_results; r++) to[r] = (h3_tensor){op->results[r]->type, out[r]};
  h3_diag d;
  h3_diag_init(&d);
  h3_status st = h3_cpu_run_op(op, ti, op->n_operands, to, op->n_results, threads, 7, &d);
  if (st != H3_OK) h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  return st == H3_OK;
}

/* case_run_cpu with the results allocated here: out[r] (for every result r) gets a zeroed
 * buffer of the result's bytes + 16, to free also after a failure. */
static inline bool case_cpu_results(const h3_op *op, void *const *in, void **out, int threads) {
  bool ok = op->n_results <= 4;
  for (int r = 0; ok && r < op->n_results; r++) {
    out[r] = calloc(1, (size_t)h3_type_bytes(&op->results[r]->type) + 16);
    ok = out[r] != NULL;
  }
  return ok && case_run_cpu(op, in, out, threads);
}

#endif
