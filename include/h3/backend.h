/* backend.h: the interface between the graph executor and a device.
 *
 * A backend is a table of functions plus a context: it allocates and frees device memory,
 * copies bytes to and from the host, runs one compute op of the IR on tensors that live in
 * its memory, synchronises and tells the time. The executor (runtime/exec.c) owns control
 * flow (loop, call, return, yield) and the memory plan; the backend only ever sees compute
 * ops and `fused` ops (whose region it runs as one unit, following the op's `tier`).
 *
 * Contract of run_op: `in` holds the op's operands in order, `out` its results in order;
 * every tensor's type is the type the backend must read or write (for the CPU backend
 * these are the IR types, except inside a lossless fused region where intermediates are
 * widened to f32). Output buffer 0 may alias the first operand for the in-place ops
 * (kv_write, set_index, scatter_rows, residual_norm_modulate) and any operand for the view
 * ops (reshape, slice, index); every other output is disjoint from the inputs. Errors a user can cause (an
 * index out of range in a loaded inputs file, ...) are reported through `d` with H3_ERR.
 *
 * The `cpu` backend is the reference: fp32 math with one rounding to each op's result
 * dtype, reductions in ascending order, identical for every row (batch invariant), and the
 * same results with any number of threads.
 */
#ifndef H3_BACKEND_H
#define H3_BACKEND_H

#include "h3/ir.h"
#include "h3/plan.h"

#include <stdbool.h>

/* Attention implementations a backend may offer (option "attention"); cuda's default is the
 * first. */
#define H3_ATTENTION_NAMES "flash, cudnn, reference"

/* A tensor in backend memory: `data` is a host pointer for cpu, a device pointer for cuda.
 * Row-major and contiguous. */
typedef struct {
  h3_type type;
  void *data;
} h3_tensor;

typedef struct h3_backend h3_backend;

typedef struct {
  const char *name; /* "cpu", "cuda" */
  /* The backend's memory is the host's (cpu): the executor hands a weight store's buffers
   * to run_op as they are instead of copying them into memory of its own (the store outlives
   * the runtime, h3_runtime_new). */
  bool host_memory;
  void (*destroy)(h3_backend *b);
  /* Device memory, 64-byte aligned, uninitialised; NULL when out of memory. */
  void *(*alloc)(h3_backend *b, size_t bytes);
  void (*release)(h3_backend *b, void *p);
  /* Host -> device, device -> host, device -> device (ranges may overlap for copy). */
  h3_status (*upload)(h3_backend *b, void *dst, const void *src, size_t bytes, h3_diag *d);
  h3_status (*download)(h3_backend *b, void *dst, const void *src, size_t bytes, h3_diag *d);
  h3_status (*copy)(h3_backend *b, void *dst, const void *src, size_t bytes, h3_diag *d);
  /* Runs one compute or fused op. */
  h3_status (*run_op)(h3_backend *b, const h3_op *op, const h3_tensor *in, int n_in,
                      const h3_tensor *out, int n_out, h3_diag *d);
  /* Waits for all queued work. */
  h3_status (*sync)(h3_backend *b, h3_diag *d);
  /* Monotonic seconds (after sync, differences are elapsed wall time). */
  double (*now)(h3_backend *b);
  /* What runs the work: "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)"; cpu: "2 threads". */
  const char *(*device_name)(h3_backend *b);
  /* Whether run_op runs this compute or fused op (its exec kind and dtypes); an op it does
   * not support fails in run_op with a message that says so. */
  bool (*supports_op)(h3_backend *b, const h3_op *op);
  /* Prepares the ops of a plan's module before they run (cuda: compiles the plan's kernels
   * through the cache when not yet done, loads them, GEMM descriptors, graph marks) and
   * checks that every op is supported. Ops of a module run without a loaded plan only where
   * they need no plan kernel (cpu: all). */
  h3_status (*load_plan)(h3_backend *b, h3_plan *p, h3_diag *d);
  /* Tuning by name: "attention" (H3_ATTENTION_NAMES). An unknown key or value is an error
   * that lists the accepted ones. */
  h3_status (*set_option)(h3_backend *b, const char *key, const char *value, h3_diag *d);
  /* An option's current value; NULL when the backend has no option by that name. */
  const char *(*option)(h3_backend *b, const char *key);
  /* Device busy seconds since creation or the last reset_busy; negative when the backend
   * does not measure it (cpu). */
  double (*busy_seconds)(h3_backend *b);
  void (*reset_busy)(h3_backend *b);
} h3_backend_ops;

typedef struct h3_comm h3_comm;

typedef struct {
  int threads;   /* worker threads for the heavy ops (cpu); <= 0 means 2 */
  uint64_t seed; /* the request seed: `randn` draws from it */
  /* The ranks of a parallel plan (include/h3/comm.h; cpu only, cuda joins NCCL through
     h3_cuda_join_ranks): this backend is rank `rank` of `comm`, shared with the other ranks'
     backends. NULL: one rank (rank 0), where the ops of ops.def's "several ranks" run only
     with ranks = 1. */
  h3_comm *comm;
  int rank;
} h3_backend_options;

/* Optional capabilities of a backend (h3_backend.ext; NULL for cpu), used by the executor
 * when present:
 *   init_param: fills members [first, first + count) of a plain (not NVFP4) parameter (its
 *     expanded tensors, h3_weights_tensor_count; dst holds those members) without host
 *     data: random weights made on the device, bitwise equal to h3_weights_random with the
 *     same seed. The executor quantizes NVFP4 parameters on the host and uploads them.
 *   call_begin / call_end: bracket one graph call (key: the callee graph; in: its inputs).
 *     call_begin may set *replayed = 1: the backend replayed the work it recorded for key
 *     with these same input buffers, so the executor skips running the callee (whose value
 *     buffers are those of the recorded run). Otherwise the executor runs the callee and
 *     then calls call_end (also after an error, with the status it got).
 *   mark / mark_seconds / marks_reset: device timestamps for a trace that does not sync
 *     after each op. mark queues a timestamp after the work queued so far and returns its
 *     index (0, 1, ... since the last marks_reset), or -1 when it cannot (inside a graph
 *     capture, or out of memory). After a sync, mark_seconds(a, b) is the device time
 *     from mark a to mark b (negative when either is unknown).
 *   graph_counts: how many graph calls were recorded and replayed (h3_backend_graph_counts).
 *   gemm_tuning: the GEMM shapes whose algorithm this process timed, the GEMMs that read their
 *     choice from the kernel cache, and the host seconds the timing took
 *     (h3_backend_gemm_tuning).
 *   graph_uncaptured: the graphs called so far whose calls are never recorded, because
 *     running them reads the device on the host, each with the op that does
 *     (h3_backend_graph_uncaptured).
 *   Weight streaming (h3exec --device-memory, runtime/stream.c; without these hooks the
 *   executor copies with upload, synchronously: the cpu emulation of the ring):
 *   host_alloc / host_free: page-locked host memory, for copies behind the compute; NULL
 *     when out of memory. host_pin / host_unpin: page-lock host memory in place (the weight
 *     store read from the file), so it is copied from where it was read, once; false when
 *     it cannot (the caller copies into host_alloc memory instead).
 *   ring_copy: queues dst (device) <- src (page-locked host) on the copy stream, after the
 *     work queued so far on the compute stream (which holds the last reader of ring slot
 *     `slot`), and notes the copy as the slot's fill. ring_wait: the compute stream waits
 *     for the slot's last fill. Both may be captured into a CUDA graph (the copy stream
 *     forks from and joins the capturing stream through these events).
 *   ring_stalls: after a sync, how long the compute stream stood still in the ring_waits
 *     queued since the last call (device seconds) and how many were timed: those outside a
 *     CUDA graph capture (a replayed graph times nothing).
 *   trim: gives back device memory the backend caches but does not use.
 *   memory_peak: the most device bytes the backend has held at once since creation.
 *   side_stream: a second stream for the ops the pass side-streams marks `side` (without
 *     it the executor runs them in order on the one stream). H3_SIDE_FORK: the side stream
 *     waits for the work queued so far, and work queued next goes to it; H3_SIDE_MAIN: work
 *     queued next goes to the main stream (nothing waits); H3_SIDE_JOIN: the main stream
 *     waits for the side stream's work, and work queued next goes to the main stream.
 *     Buffers released while the side stream may still run are not handed out again
 *     before the join. Captured into a CUDA graph, fork and join become its edges. */
typedef enum { H3_SIDE_FORK, H3_SIDE_MAIN, H3_SIDE_JOIN } h3_side_cmd;
typedef struct {
  h3_status (*init_param)(h3_backend *b, void *dst, const h3_param *p, uint64_t seed,
                          int64_t first, int64_t count, h3_diag *d);
  h3_status (*call_begin)(h3_backend *b, const void *key, const h3_tensor *in, int n_in,
                          int *replayed, h3_diag *d);
  h3_status (*call_end)(h3_backend *b, const void *key, h3_status st, h3_diag *d);
  int (*mark)(h3_backend *b);
  double (*mark_seconds)(h3_backend *b, int a, int z);
  void (*marks_reset)(h3_backend *b);
  /* graph_counts: calls recorded (CUDA graphs captured) and replayed since creation. */
  void (*graph_counts)(h3_backend *b, int64_t *captured, int64_t *replayed);
  void *(*host_alloc)(h3_backend *b, size_t bytes);
  void (*host_free)(h3_backend *b, void *p);
  bool (*host_pin)(h3_backend *b, void *p, size_t bytes);
  void (*host_unpin)(h3_backend *b, void *p);
  h3_status (*ring_copy)(h3_backend *b, int slot, void *dst, const void *src, size_t bytes,
                         h3_diag *d);
  h3_status (*ring_wait)(h3_backend *b, int slot, h3_diag *d);
  void (*ring_stalls)(h3_backend *b, double *seconds, int64_t *waits);
  void (*trim)(h3_backend *b);
  int64_t (*memory_peak)(h3_backend *b);
  h3_status (*side_stream)(h3_backend *b, h3_side_cmd cmd, h3_diag *d);
  int (*graph_uncaptured)(h3_backend *b, const h3_graph **graphs, const h3_op **why, int max);
  void (*gemm_tuning)(h3_backend *b, int64_t *timed, int64_t *read, double *seconds);
} h3_backend_ext;

struct h3_backend {
  const h3_backend_ops *ops;
  void *ctx;                 /* the backend's own state */
  uint64_t seed;             /* request seed (randn), may be changed between runs */
  const h3_backend_ext *ext; /* optional capabilities, NULL when none */
};

/* Creates a backend by name: "cpu", "cuda" or "auto" (cuda when a GPU is usable, else cpu).
 * "cuda" without a usable GPU or CUDA backend is an error that says so. */
h3_backend *h3_backend_create(const char *name, const h3_backend_options *o, h3_diag *d);
h3_backend *h3_backend_cpu_new(const h3_backend_options *o, h3_diag *d);
void h3_backend_free(h3_backend *b);

/* The table's entries, for callers (h3exec, tests, benches): each one calls the backend's. */
const char *h3_backend_device_name(h3_backend *b);
bool h3_backend_supports_op(h3_backend *b, const h3_op *op);
h3_status h3_backend_load_plan(h3_backend *b, h3_plan *p, h3_diag *d);
h3_status h3_backend_set_option(h3_backend *b, const char *key, const char *value, h3_diag *d);
const char *h3_backend_option(h3_backend *b, const char *key);
double h3_backend_busy_seconds(h3_backend *b);
void h3_backend_reset_busy(h3_backend *b);
/* Graph calls recorded and replayed since the backend was created; false (both 0) when the
 * backend does not record calls. */
bool h3_backend_graph_counts(h3_backend *b, int64_t *captured, int64_t *replayed);
/* The backend's GEMM tuning so far (h3_backend_ext.gemm_tuning); false (and zeros) when it
 * has none. */
bool h3_backend_gemm_tuning(h3_backend *b, int64_t *timed, int64_t *read, double *seconds);
/* The graphs called so far that the backend never records (CUDA graphs) because running
 * them reads the device on the host: graphs[k] and why[k], the op of graphs[k] that reads it
 * (a call, where a callee does), for k < min(returned, max). 0 for a backend that records
 * no calls. */
int h3_backend_graph_uncaptured(h3_backend *b, const h3_graph **graphs, const h3_op **why, int max);
/* The most device bytes the backend has held at once since creation; -1 when it does not
 * say (cpu). */
int64_t h3_backend_memory_peak(h3_backend *b);

/* The CPU reference of one op on host tensors, without a backend object: what the cpu
 * backend's run_op does, with `threads` workers (1 = on the calling thread). `seed` feeds
 * randn. Used by the op tests and by other backends' tests as the oracle. */
h3_status h3_cpu_run_op(const h3_op *op, const h3_tensor *in, int n_in, const h3_tensor *out,
                        int n_out, int threads, uint64_t seed, h3_diag *d);

/* ---- ranks as processes (h3exec --backend cuda --gpus N: one process per GPU; docs/parallel.md) ---- */
/* What rank 0 hands to the other ranks so that they join one communicator (cuda: the bytes of
 * an NCCL unique id, ncclUniqueId). */
typedef struct {
  char bytes[128];
} h3_rank_id;
/* Backend `name` for rank `rank` of a run in processes: cuda on device `rank` (the only one
 * that runs ranks as processes; another name is an error). */
h3_backend *h3_backend_create_rank(const char *name, const h3_backend_options *o, int rank, h3_diag *d);
/* Rank 0, once its backend exists: a fresh id for the others (h3_cuda_nccl_id). */
h3_status h3_backend_rank_id(h3_backend *b, h3_rank_id *id, h3_diag *d);
/* Every rank: joins the communicator of `ranks` ranks that share id (h3_cuda_join_ranks). */
h3_status h3_backend_join_ranks(h3_backend *b, int ranks, int rank, const h3_rank_id *id, h3_diag *d);

#endif
