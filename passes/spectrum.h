/* spectrum.h: what the step-skipping passes (spectrum, cache-dit) and their tests share;
 * private to passes/ and tests/spectrum/ (docs/step-skipping.md).
 *
 * - Options: the `--spectrum` and Cache-DiT option texts, parsed with defaults
 *   (docs/models/accelerations.md §6.4, §7).
 * - Spectrum math (spectrum_math.c): the static schedule of real and forecast steps, the
 *   Chebyshev basis over tau(i) = 2i/tau_steps - 1, the fp64 Cholesky solve of
 *   (G + lam I) a = x, and the per-step coefficient rows the two Spectrum ops read.
 * - IR helpers (spectrum_ir.c): finding the sampling loop's call of the graph that holds
 *   the `trunk` loop, cloning graphs and regions with a value map, dead-op sweeps.
 */
#ifndef H3_PASSES_SPECTRUM_H
#define H3_PASSES_SPECTRUM_H

#include "h3/ir.h"
#include "h3/passes.h"

#include <stdbool.h>

/* ---- options ---------------------------------------------------------------------------- */
#define H3_SPECTRUM_MAX_DEGREE 8
#define H3_SPECTRUM_MAX_TAYLOR 3

typedef struct {
  int warmup;       /* steps [0, warmup) are real; >= 1 */
  double window;    /* starting window (>= 1 after floor) */
  double flex;      /* window growth per real step, rounded to 3 decimals */
  double w;         /* blend: (1 - w) Taylor + w Chebyshev, in [0, 1] */
  int m;            /* Chebyshev degree, 0 .. H3_SPECTRUM_MAX_DEGREE */
  double lam;       /* ridge lambda >= 0 (not scaled by the number of real steps) */
  int taylor;       /* Taylor order 1 .. H3_SPECTRUM_MAX_TAYLOR (used when w < 1) */
  int tau_steps;    /* tau(i) = 2 i / tau_steps - 1; >= 1 */
} h3_spectrum_options;

/* warmup 5, window 2.0, flex 0.75, w 1.0, m 4, lam 0.1, taylor 1, tau_steps 50. */
h3_spectrum_options h3_spectrum_options_default(void);
/* Parses "WARMUP:WINDOW:FLEX" and/or "key=value,..." (keys warmup, window, flex, w, m, lam,
 * taylor, tau_steps) over the defaults; NULL or "" keeps them. `where` names the flag in
 * messages ("--spectrum"). H3_ERR with a message naming the key and its range. */
h3_status h3_spectrum_options_parse(const char *text, const char *where, h3_spectrum_options *o,
                                    h3_diag *d);

typedef struct {
  int warmup;          /* no cached step before this step index (default 4) */
  double threshold;    /* reuse when d < threshold (default 0.04) */
  int max_consecutive; /* at most this many cached steps in a row (default 1) */
} h3_cache_dit_options;

h3_cache_dit_options h3_cache_dit_options_default(void);
/* "key=value,..." with keys warmup, threshold, max_consecutive. */
h3_status h3_cache_dit_options_parse(const char *text, h3_cache_dit_options *o, h3_diag *d);

/* ---- Spectrum math (spectrum_math.c) --------------------------------------------------- */
/* The public rule (§6.4): real[i] for i in [0, n). Returns the number of real steps. */
int h3_spectrum_schedule(const h3_spectrum_options *o, int n, bool *real);
/* "0-4, 6, 8, 11" into b for the steps with real[i] == want. */
void h3_spectrum_steps_text(h3_strbuf *b, const bool *real, int n, bool want);

double h3_spectrum_tau(int i, int tau_steps);
/* Chebyshev T_0..T_m at tau into x[0..m]. */
void h3_spectrum_basis(int m, double tau, double *x);
/* Solves (G + lam I) a = x for a symmetric p x p G (row-major) by Cholesky in fp64.
 * Returns 0, or -1 when G + lam I is not positive definite. */
int h3_spectrum_solve(int p, const double *g, double lam, const double *x, double *a);

/* The coefficient rows of a whole schedule. For a real step i: upd[i*P + j] = x_j(tau_i)
 * (P = m + 1). For a forecast step i: fc[i*(P+Q) + j] = w * a_j for j < P, with
 * a = (G_i + lam I)^-1 x(tau_i) and G_i the sum of x x^T over the real steps before i,
 * and (1 - w) * t_q for the q-th most recent real feature (Q = taylor + 1 when w < 1,
 * else 0; t from the Taylor rule of §6.2 over the last real steps, the order lowered
 * while fewer real steps exist). Rows of the other kind are zero. Returns 0, or -1 with
 * *bad_step set when a forecast step has no real step before it or its system is
 * singular. upd has n*P doubles, fc n*(P+Q). */
int h3_spectrum_coefficients(const h3_spectrum_options *o, int n, const bool *real, double *upd,
                             double *fc, int *bad_step);
/* Q of the options: taylor + 1 when w < 1, else 0. */
int h3_spectrum_hist_len(const h3_spectrum_options *o);

/* ---- IR helpers (spectrum_ir.c) --------------------------------------------------------- */
/* Where a step-skipping pass works: the program `prog`, its sampling loop `loop` (a
 * top-level loop of the program), the one `call` in the loop's body of graph `step`,
 * and `trunk`, the top-level loop of `step` labelled "trunk". */
typedef struct {
  h3_graph *prog;
  h3_op *loop;
  h3_op *call;
  h3_graph *step;
  h3_op *trunk;
} h3_skip_site;

/* Finds the site. Returns 1 when found, 0 when the module has no program loop calling a
 * graph with a `trunk` loop (nothing to do), -1 after reporting an ambiguous or
 * malformed site to d (`pass` names the pass in messages). */
int h3_skip_site_find(h3_module *m, const char *pass, h3_skip_site *s, h3_diag *d);

/* A value map old -> new by value id (ids below the size given at creation). */
typedef struct {
  h3_value **to;
  int n;
} h3_value_map;

h3_status h3_value_map_init(h3_value_map *vm, const h3_module *m);
void h3_value_map_free(h3_value_map *vm);
void h3_value_map_set(h3_value_map *vm, const h3_value *from, h3_value *to);
/* The mapped value, or v itself when unmapped (values of enclosing scopes, parameters). */
h3_value *h3_value_map_get(const h3_value_map *vm, h3_value *v);

/* Clones op (with its regions, mapping operands through vm and recording its results and
 * region args in vm) at the builder's insertion point. NULL when out of memory. */
h3_op *h3_op_clone(h3_builder *b, h3_value_map *vm, const h3_op *op);
/* Clones every op of src (its terminator included) into dst, whose args the caller has
 * already mapped. H3_ERR when out of memory. */
h3_status h3_region_clone_into(h3_module *m, h3_value_map *vm, const h3_region *src,
                               h3_region *dst);
/* Clones the ops of a loop body `src` into dst, the body of a new loop whose arguments
 * the caller has made (arg 0 the counter) and mapped in vm (args 1..). The new body sees
 * the counter shifted by `shift`: an index/set_index of the counter gets offset += shift,
 * any other use reads counter + shift. `hook` (may be NULL) sees every op first and sets
 * *handled when it built the op's replacement itself (mapping its results in vm). */
typedef h3_status (*h3_body_hook)(void *ctx, h3_builder *b, h3_value_map *vm, const h3_op *op,
                                  bool *handled);
h3_status h3_loop_body_clone(h3_module *m, h3_value_map *vm, const h3_region *src, h3_region *dst,
                             int64_t shift, h3_body_hook hook, void *hook_ctx, h3_diag *d);
/* Splits `loop` (count n) at iteration `at`, 0 < at < n: loop keeps iterations [0, at) and
 * a new loop `label` right after it runs [at, n) on loop's results, its body a clone of
 * loop's with the counter shifted by `at`; loop's former uses read the new loop's results.
 * Returns the new loop, NULL when out of memory (reported to d). */
h3_op *h3_loop_split(h3_module *m, h3_op *loop, int64_t at, const char *label, h3_diag *d);
/* A new graph `name`: same kind, inputs (mapped in vm), body and outputs as g. */
h3_graph *h3_graph_clone(h3_module *m, h3_value_map *vm, const h3_graph *g, const char *name);
/* Erases the pure ops of g whose results are unused, last to first, until none is left. */
void h3_graph_sweep_dead(h3_module *m, h3_graph *g);
/* Removes g from the module's graph list when no call or branch names it. */
void h3_graph_drop_if_unused(h3_module *m, const h3_graph *g);
/* A graph name not yet used: base, or base.1, base.2, ... (arena copy). */
const char *h3_graph_fresh_name(h3_module *m, const char *base);

/* Reports "PASS: out of memory while rewriting the IR". */
h3_status h3_skip_oom(h3_diag *d, const char *pass);

#endif
