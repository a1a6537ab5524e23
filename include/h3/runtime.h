/* runtime.h: running a module's graphs and programs on a backend.
 *
 * h3_runtime binds a module (usually the optimised IR of a plan), a backend and a weight
 * store: weights are uploaded once; each graph gets one activation arena of its
 * `arena_bytes` graph attribute, and every value with a planned `offset` lives there
 * (values with offset -1 get their own allocation, reused across loop iterations).
 * The executor interprets control ops itself: `loop` (count iterations of the region,
 * carried values through region args and the yield), `call` (runs the callee graph with the
 * caller's tensors as inputs and copies its returned values into the call's results) and
 * `return`; every other op is the backend's (run_op). A program (the H3 `sample` sampler,
 * the M3.1 `generate` decode loop) is just such a graph, so passes can rewrite the loop.
 *
 * Besides outputs, a run records per-op statistics (count and time per opcode), optionally
 * one trace event per op execution (Chrome trace, --profile), and reports progress over
 * the iterations of the top-level loops of the graph that was run.
 */
#ifndef H3_RUNTIME_H
#define H3_RUNTIME_H

#include "h3/backend.h"
#include "h3/weights.h"

#include <stdbool.h>
#include <stdio.h>

typedef struct h3_runtime h3_runtime;

/* Called after each iteration of a top-level loop of the graph being run. */
typedef void (*h3_progress_fn)(void *ctx, const char *label, int64_t done, int64_t total);

typedef struct {
  bool trace;              /* record one event per op execution (h3_runtime_trace) */
  h3_progress_fn progress; /* NULL: none */
  void *progress_ctx;
  uint64_t weight_seed; /* random weights made on the device when no store is given */
  /* > 0: the device bytes the run may hold (h3exec --device-memory). When the weights do not
   * fit, the blocks of the largest loop over stacked weights (the H3 trunk) beyond those
   * that fit stream from host memory through a ring of device slots (docs/streaming.md);
   * a budget that cannot hold the rest and one block is an error naming the smallest that
   * runs. Results are bitwise those of the resident run. */
  int64_t device_memory;
  /* with trace: time ops by device timestamps (h3_backend_ext.mark) without a sync after
   * each op, so ops run back to back as in an untraced run; each op's time is then from
   * its launch point in the stream to its end. Backends without marks (cpu) sync after
   * each op as without this flag. Events inside a CUDA graph capture are dropped. */
  bool trace_device;
  /* A debugging and measuring hook (h3exec --dump-ops, --moe-stats): called after each executed
   * compute or fused op with its operands and results in backend memory (in[0 .. n_in),
   * out[0 .. n_out), as run_op saw them; out in its final place). While set,
   * callees run op by op: recorded work (h3_backend_ext.call_begin) is neither recorded nor
   * replayed. A status other than H3_OK stops the run with the hook's report in `d`. */
  h3_status (*observe)(void *ctx, const h3_op *op, const h3_tensor *in, int n_in,
                       const h3_tensor *out, int n_out, h3_diag *d);
  void *observe_ctx;
  /* optional, beside observe: called by h3_runtime_reset_stats (after a warm-up), so that
   * what the hook counted covers the same runs as the statistics */
  void (*observe_reset)(void *ctx);
} h3_runtime_options;

/* One executed op (or call / loop, cat "control"); times in seconds since the runtime
 * was created. */
typedef struct {
  const char *name; /* op name, or the kernel / callee name */
  const char *cat;  /* pattern kind: "elementwise", "matmul", ..., "control" */
  double ts, dur;
  int depth; /* nesting: 0 for ops of the graph that was run */
} h3_trace_event;

typedef struct {
  int64_t count;
  double seconds;
} h3_op_stat;

/* Uploads the weights (which must belong to m; a backend whose memory is the host's uses
 * the store's buffers as they are, h3_backend_ops.host_memory) and prepares per-graph
 * state. With w NULL
 * the backend makes random weights itself (h3_backend_ext.init_param, from
 * o->weight_seed; bitwise equal to h3_weights_random; NVFP4 parameters are quantized on
 * the host, h3_weights_random_nvfp4). The module, backend and weights
 * must outlive the runtime. NULL after reporting. */
h3_runtime *h3_runtime_new(const h3_module *m, h3_backend *b, const h3_weights *w,
                           const h3_runtime_options *o, h3_diag *d);
void h3_runtime_free(h3_runtime *rt);

/* Runs graph g with host inputs in[0 .. g->n_inputs) (types equal to the input types)
 * and fills out[0 .. g->n_outputs) with malloc'd host tensors named by the graph's output
 * names (free with h3_host_tensors_free). On error nothing is left in `out`. */
h3_status h3_runtime_run(h3_runtime *rt, const h3_graph *g, const h3_host_tensor *in,
                         h3_host_tensor *out, h3_diag *d);

/* ---- device-resident calls (the serving engine keeps its state on the backend) ----------- */
/* A zeroed buffer of type t in backend memory, kept by the caller across calls (KV caches,
 * page tables, token rows); counted as activation memory until h3_runtime_buffer_free. */
h3_status h3_runtime_buffer(h3_runtime *rt, const h3_type *t, h3_tensor *out, h3_diag *d);
void h3_runtime_buffer_free(h3_runtime *rt, h3_tensor *t);
/* Host <-> buffer copies of the whole tensor (h3_type_bytes of its type). */
h3_status h3_runtime_upload(h3_runtime *rt, const h3_tensor *dst, const void *src, h3_diag *d);
h3_status h3_runtime_download(h3_runtime *rt, void *dst, const h3_tensor *src, h3_diag *d);
/* Runs graph g on backend tensors args[0 .. g->n_inputs) (types equal to the inputs'). A
 * donated input (the graph returns it updated under its name) is updated in the caller's
 * buffer, and its result entry is that buffer; every other results[0 .. g->n_outputs) entry
 * points into the graph's own memory and stays valid until g runs again. Work is queued on
 * the backend (no sync): read results with h3_runtime_download. As for a call inside a
 * program, a backend that records calls (CUDA graphs) replays g when it is called again
 * with the same argument buffers, so keep them. */
h3_status h3_runtime_call(h3_runtime *rt, const h3_graph *g, const h3_tensor *args,
                          h3_tensor *results, h3_diag *d);

/* Per-opcode statistics since creation or the last reset, indexed by h3_opcode. A reset
 * also drops the trace events recorded so far (h3exec resets after the warm-up runs). */
const h3_op_stat *h3_runtime_op_stats(const h3_runtime *rt);
void h3_runtime_reset_stats(h3_runtime *rt);
/* Trace events recorded so far (options.trace). */
size_t h3_runtime_trace(const h3_runtime *rt, const h3_trace_event **events);
/* One executed `branch` (Cache-DiT's reuse decision): the iteration of the top-level loop
 * of the run it happened in (-1 outside one) and the callee taken (then: cond != 0). */
typedef struct {
  const h3_op *op;
  int64_t iteration;
  bool then;
} h3_branch_event;
/* The branches of the last h3_runtime_run, in execution order. */
size_t h3_runtime_branches(const h3_runtime *rt, const h3_branch_event **events);
/* Device bytes held: weights, arenas and unplanned values. */
size_t h3_runtime_weight_bytes(const h3_runtime *rt);
size_t h3_runtime_activation_bytes(const h3_runtime *rt);

/* The weight streaming of a run with device_memory (docs/streaming.md): false (all zero)
 * when nothing streams. Sizes in bytes. */
typedef struct {
  int64_t budget;          /* device_memory */
  int64_t fixed_bytes;     /* resident besides the blocks: other weights, arenas, reserve */
  int64_t layers;          /* blocks of the streamed loop */
  int64_t block_bytes;     /* one block's streamed weights (a ring slot) */
  int64_t resident_blocks; /* blocks kept on the device: [0, resident_blocks) */
  int64_t ring_slots;
  int64_t device_bytes;    /* planned: fixed + (resident_blocks + ring_slots) * block */
  int64_t streamed_bytes;  /* copied per pass of the loop (per denoising step) */
  int64_t min_budget;      /* the smallest budget that runs */
  double block_copy_seconds; /* one block's copy, timed when the run started */
  int64_t peak_device_bytes; /* the backend's peak so far; -1 when it does not say */
  /* how long the compute waited for blocks, over the waits the backend timed (cuda: those
     outside CUDA graphs; 0 waits: none timed; -1: the backend does not time them) */
  double stall_seconds;
  int64_t stall_waits;
} h3_streaming;
/* Whether module m can run on backend b under a device-memory budget (the residency plan of
 * h3_runtime_new, without loading anything): an error naming the smallest budget when not.
 * For callers that check before reading a weights file. */
h3_status h3_runtime_check_budget(const h3_module *m, h3_backend *b, int64_t budget, h3_diag *d);
/* After a run: the streaming so far; false when nothing streams (then only the plan's fields
 * are set: budget, fixed_bytes, layers, block_bytes, device_bytes (all resident), min_budget;
 * all zero without device_memory). */
bool h3_runtime_streaming(h3_runtime *rt, h3_streaming *out);

/* Writes events as a Chrome / Perfetto trace (JSON object with "traceEvents": complete
 * events "ph": "X" with name, cat, ts and dur in microseconds), atomically. */
h3_status h3_trace_write_file(const h3_trace_event *ev, size_t n, const char *path, h3_diag *d);

/* ---- default inputs (runtime/inputs.c) ---------------------------------------------------- */
typedef struct {
  uint64_t seed;
  int64_t prompt_len; /* > 0: the M3.1 prompt length asked for (must fit the input) */
} h3_input_defaults;

/* Fills every input of g whose data is NULL: H3 packed-row metadata `tag`, `slot`, `pos`
 * from the config's row counts (docs/models/minimax_h3.md §2 with this project's position rule),
 * token ids (i32 inputs named `prompt`, `tokens` or `ids`) uniform in [0, vocab) from
 * Philox stream "input.<name>", KV caches (`*_cache`) zero, other float inputs standard
 * normal from the same kind of stream (rounded to the input dtype), other integer inputs
 * zero. Reports what it cannot fill. `in` has g->n_inputs entries (h3_inputs_load_file
 * with H3_INPUTS_ALLOW_MISSING, or zeroed). */
h3_status h3_inputs_fill_defaults(const h3_module *m, const h3_graph *g, h3_host_tensor *in,
                                  const h3_input_defaults *o, h3_diag *d);

/* ---- the closing report (runtime/report.c) ------------------------------------------------ */
typedef struct {
  const char *plan_file, *graph, *backend, *weights, *quality;
  const char *passes; /* the passes that built the plan, comma-separated, or NULL */
  uint64_t seed;
  int warmup, iterations;
  const double *latency; /* seconds, one per measured iteration */
  const h3_op_stat *stats;
  const h3_module *module;
  size_t weight_bytes, activation_bytes;
  const char *device;    /* the backend's device in words, or NULL */
  int ranks;             /* ranks of a parallel plan (h3exec --gpus N); 0 or 1: one */
  const char *attention; /* attention implementation, or NULL */
  double gpu_seconds;    /* device busy time over the measured iterations; < 0: n/a */
  /* what the per-op times measure: "device timestamps", "host time" (ops synchronous) or
     "host time to launch (the device runs behind; --profile times the device)" */
  const char *op_clock;
  int64_t graphs_captured, graphs_replayed; /* graph calls recorded / replayed; < 0: n/a */
  /* GEMM shapes whose algorithm the backend timed in this process, GEMMs that read their
     choice from the kernel cache, and the seconds the timing took (h3_backend_gemm_tuning);
     gemm_timed < 0: n/a */
  int64_t gemm_timed, gemm_read;
  double gemm_tune_seconds;
  h3_backend *device_backend; /* names the graphs it never records (h3_report_print_uncaptured), or NULL */
  /* the branches of the last run (Cache-DiT: which steps ran the whole stack), or none */
  const h3_branch_event *branches;
  size_t n_branches;
  int64_t memory_peak;   /* the backend's peak device bytes (h3_backend_memory_peak); < 0: n/a */
  int64_t device_memory; /* the budget given (h3_runtime_options.device_memory); 0: none */
  const h3_streaming *streaming; /* the weight streaming, or NULL when nothing streams */
} h3_report;

/* trtexec-style summary: configuration, what is on/off (tier, fused groups by tier,
 * memory plan per graph), latency min / median / mean / p90 / p99, per-op table. */
void h3_report_print(FILE *out, const h3_report *r);
/* The GEMM tuning line of the latency section (h3_report.gemm_*): the shapes timed in this
 * process with the advice to compare later runs, or the GEMMs' choices read from the kernel cache;
 * nothing when timed < 0 (no tuning) or when nothing was tuned. Each line starts with lead. */
void h3_report_print_gemm_tuning(FILE *out, int64_t timed, int64_t read, double seconds, const char *lead);
/* One line per graph called so far that b never records as a CUDA graph because running it
 * reads the device on the host, each led by `lead`: "not captured: NAME (OP at FILE:LINE:COL
 * reads the device on the host)"; nothing for a backend that records no calls. */
void h3_report_print_uncaptured(FILE *out, h3_backend *b, const char *lead);
/* The per-op table alone: op kind, executions, total ms, share (stats by opcode; `what` the
 * runs it covers, `clock` how the ops were timed). */
void h3_report_print_ops(FILE *out, const h3_op_stat *stats, const char *what, const char *clock);
/* Percentile p in [0, 100] of n values (nearest rank on a sorted copy); 0 when n == 0. */
double h3_percentile(const double *v, int n, double p);

#endif
