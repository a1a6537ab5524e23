/* passes.h: the pass manager of h3: the pass registry, pipeline options and the pipeline
 * runner (the quality tiers are the IR's, include/h3/ir.h).
 *
 * A pass is a record (name, description, minimum tier, default-pipeline flag, required
 * passes, run function) in the one table of passes/registry.c. The pipeline that
 * `--quality T` picks is every registered pass with in_default_pipeline and
 * min_tier <= T in table order (`verify` is the first), then `verify` again on the
 * result; `--enable-pass a,b` adds opt-in passes (in_default_pipeline false) to it, at
 * their table places. `--passes a,b,c` runs exactly those passes in that order instead (no
 * implicit verify). `--disable-pass` removes passes from either list. A pass whose
 * `requires` entries did not run before it is an error (never auto-added): the message
 * names the missing pass and where to put it.
 *
 * Passes see the options through an opaque h3_pass_context: the tier, a dump stream and
 * a report sink for one-line summaries (memory plan sizes, fusion counts) that
 * `--time-passes` and `--report` print after the run.
 */
#ifndef H3_PASSES_H
#define H3_PASSES_H

#include "h3/ir.h"
#include <stdbool.h>
#include <stdio.h>

/* ---- passes ----------------------------------------------------------------------------- */
typedef struct h3_pass_context h3_pass_context;

#define H3_PASS_MAX_REQUIRES 4

typedef struct h3_pass {
  const char *name;        /* "elementwise-fusion": lowercase words joined by '-' */
  const char *description; /* one line for `h3c passes` */
  h3_tier min_tier;        /* runs only when --quality >= min_tier */
  bool in_default_pipeline;
  /* passes that must have run before this one; NULL-terminated (or full) */
  const char *requires[H3_PASS_MAX_REQUIRES];
  /* Transforms m. Errors the user can cause are reported to d and return H3_ERR. */
  h3_status (*run)(h3_module *m, h3_pass_context *ctx, h3_diag *d);
} h3_pass;

int h3_pass_count(void);
const h3_pass *h3_pass_at(int i); /* table order; NULL when out of range */
const h3_pass *h3_pass_find(const char *name);

/* ---- options ---------------------------------------------------------------------------- */
/* The opt-in passes that `--int8` enables (h3_pass_options.enable): the lowering, row
 * splitting, quantization inside the producing kernels and dequantization inside the
 * consumers (docs/int8.md). */
#define H3_INT8_PASSES                                                                      \
  "int8-lowering,row-split,int8-fuse-quant,int8-fuse-group-quant,int8-dequant-split,"       \
  "int8-resid-dequant,int8-qk-norm-rope"

typedef struct {
  h3_tier tier;               /* --quality, default lossless */
  const char *passes;         /* --passes a,b,c: exactly these, in this order (NULL: pipeline) */
  const char *disabled;       /* --disable-pass a,b (NULL: none) */
  const char *print_ir_after; /* --print-ir-after=NAME[,NAME]|all (NULL: none) */
  bool time_passes;           /* --time-passes: timing table, then the pass reports */
  bool report;                /* --report: the pass reports only */
  const char *report_passes;  /* --report=A,B: only these passes' reports (NULL: all) */
  bool verify_each;           /* run h3_verify_module after every pass (tests, debug builds) */
  FILE *dump;                 /* where --print-ir-after, --time-passes and --report write;
                                 NULL = stderr */
  /* --enable-pass a,b: opt-in passes (in_default_pipeline false) that the default
     pipeline runs anyway, at their table place; accelerator flags add theirs (--int8 adds
     H3_INT8_PASSES, --spectrum `spectrum`). NULL = none. Ignored with `passes`. */
  const char *enable;
  /* --int8[=KEY=VALUE,...]: the option text the int8 passes read (include/h3/int8.h);
     "" = the defaults; NULL = the flag was not given (the passes use the defaults). */
  const char *int8;
  /* --spectrum[=...] and --spectrum-*: the option text of the `spectrum` pass
     (passes/spectrum.h); NULL = defaults. --cache-dit-*: the text of `cache-dit`. */
  const char *spectrum;
  const char *cache_dit;
  /* --attention sage|sol[,KEY=VALUE...]: the backend and its keys, as attention-backend
     reads them (passes/attention_backend.c); NULL = the flag was not given. */
  const char *attention;
  /* --gpus N: the rank count of a parallel plan (sequence-parallel, tensor-parallel;
     docs/parallel.md); 0 = the flag was not given. */
  int gpus;
} h3_pass_options;

/* The defaults: lossless, the default pipeline, nothing printed, verify_each in debug
 * builds (NDEBUG not defined). */
h3_pass_options h3_pass_options_default(void);

/* Resolves the options into the ordered list of passes to run (at most cap entries; the
 * closing verify of the default pipeline is included). Checks every name
 * (unknown names are errors with a nearest-name hint), tier gates of explicitly listed
 * passes, `requires`, and that only verify follows memory-plan (its offsets hold for the IR
 * it planned). Returns H3_OK and sets *n, or H3_ERR with messages in d. */
h3_status h3_pass_pipeline_resolve(const h3_pass_options *o, const h3_pass **out, int cap, int *n,
                                   h3_diag *d);
/* Checks that every pass of list[0..n) finds its `requires` earlier in the list, and that
 * only verify follows memory-plan. */
h3_status h3_pass_list_check(const h3_pass *const *list, int n, h3_diag *d);
/* Resolves the options and runs the passes on m, stopping at the first failing pass. */
h3_status h3_pass_pipeline_run(h3_module *m, const h3_pass_options *o, h3_diag *d);
/* Runs one pass on m under the given options (no requires check): for tests and tools. */
h3_status h3_pass_run_one(h3_module *m, const h3_pass *p, const h3_pass_options *o, h3_diag *d);

/* ---- what a pass sees ------------------------------------------------------------------- */
h3_tier h3_pass_tier(const h3_pass_context *ctx);
/* The options of the pipeline that runs the pass (opt-in passes read their flag here). */
const h3_pass_options *h3_pass_options_of(const h3_pass_context *ctx);
/* Records a one-line report ("graph step: arena 1.50 MiB, peak 1.25 MiB"); the pass
 * manager prints it under --time-passes / --report, prefixed with the pass name. */
void h3_pass_report(h3_pass_context *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Nearest registered pass name to s by edit distance, or NULL when none is close (the
 * unknown-pass hint then lists the names that contain s). */
const char *h3_pass_nearest_name(const char *s);

/* Counts every op of m, nested regions included (the --time-passes columns). */
int h3_pass_count_ops(const h3_module *m);

#endif
