/* cuda_internal.h: what the files of the cuda backend share (not part of the public API).
 *
 * One cu_state per backend: the device and its stream, the caching device allocator, the
 * loaded kernels (by name) and the per-op execution records (by op pointer), cuBLASLt and
 * cuDNN handles with their one fixed workspace, the attention choice, CUDA-event timing
 * and the CUDA graphs of captured graph calls. Every CUDA, cuBLASLt and cuDNN call is
 * checked; a failure becomes an h3_diag error naming the call and the CUDA message.
 *
 * Files: cuda_backend.c (table, memory, copies, timing, run_op dispatch), cuda_kernels.c
 * (NVRTC libraries, kernel registry, plan loading, codegen kernels and views),
 * cuda_util.c (the backend's own small kernels: row index copy, generic linear, weight
 * fill), cuda_gemm.c (cuBLASLt), cuda_attention.c (the attention interface and the
 * reference kernel), cuda_flash.c (flash attention with wgmma; TMA tensor maps),
 * cuda_cudnn.c (cuDNN fused SDPA through the backend graph API), cuda_graph.c (capture and
 * replay), cuda_weights.c (random weights on the device), cuda_stream.c (pinned host memory
 * and the copy stream of weight streaming), cuda_int8.c (linear_int8:
 * cuBLASLt int8 GEMM and the fixed dequantization epilogue).
 */
#ifndef H3_CUDA_INTERNAL_H
#define H3_CUDA_INTERNAL_H

#include "h3/kernel.h"
#include "h3/kernels.h"
#include "h3/cuda_backend.h"
#include "h3/op_registry.h"

#include <cuda_runtime_api.h>
#include <stdbool.h>

#define CU_ARG_OUT 1000 /* kernel argument codes: j = operand j, CU_ARG_OUT + j = result j */
#define CU_ARG_SEED (-1)
#define CU_WORKSPACE_BYTES ((size_t)32 << 20) /* cuBLASLt / cuDNN workspace, fixed */
/* SMs a GEMM marked `beside` (pass side-streams: it runs while the other stream has work)
 * leaves free by default: cuBLASLt picks its algorithm for the card's SMs less these */
#define CU_SIDE_SM_RESERVE 16
#define CU_INT8_ACC_MAX_BYTES ((size_t)1 << 30) /* int32 accumulators of one int8 GEMM chunk */

/* Hints of the backend's errors: device memory, a kernel whose load failed before, the
 * limits of a hand kernel, shared memory. */
#define CU_HINT_DEVICE_OOM \
  "free device memory, or compile a smaller plan (another --config, smaller --set sizes)"
#define CU_HINT_EARLIER "the first error above says why it failed"
#define CU_HINT_UNSUPPORTED \
  "the cuda kernel does not take this shape or dtype: change the model or config, or run with --backend cpu"
#define CU_HINT_SMEM "run on a GPU with more shared memory per block, such as the H200 that h3 targets"

/* A kernel loaded from a CUBIN, with its launch rule. */
typedef struct {
  char *name;
  cudaKernel_t fn;
  int64_t grid[3], block[3], shared;
  bool inplace;
  int n_args;
  int *args; /* argument codes, see CU_ARG_* */
} cu_kernel;

typedef enum {
  CU_OP_KERNEL,      /* a codegen kernel */
  CU_OP_VIEW,        /* reshape, contiguous slice: copy unless the planner aliased it */
  CU_OP_INDEX,       /* index: row i + offset of x, i on the device */
  CU_OP_LINEAR,      /* cuBLASLt or the backend's own GEMM */
  CU_OP_LINEAR_INT8, /* linear_int8: int8 GEMM + dequantization; matmul_i8: the GEMM
                        alone (cuda_int8.c) */
  CU_OP_ATTENTION,   /* attention through the selected implementation */
  CU_OP_HOST,        /* sigma_schedule: computed on the host, uploaded */
  CU_OP_M31,         /* an M3.1 hand kernel (cuda_m31.c: routing, MoE, paged / sparse
                        attention, block selection, the Markov head) */
  CU_OP_SAGE,        /* sage_attention (cuda_sage.c) */
  CU_OP_SOL,         /* sol_attention (cuda_sol.c) */
  CU_OP_COLLECTIVE,  /* shard, all_gather, all_to_all, all_reduce (cuda_collective.c) */
  CU_OP_UNSUPPORTED, /* not on cuda yet */
} cu_op_kind;

typedef struct cu_gemm cu_gemm; /* cuda_gemm.c */
typedef struct cu_int8 cu_int8; /* cuda_int8.c */

typedef struct {
  const h3_op *op;
  cu_op_kind kind;
  cu_kernel *k;  /* KERNEL; the generic linear kernel for LINEAR without cuBLASLt */
  cu_gemm *gemm; /* LINEAR through cuBLASLt */
  unsigned char skinny; /* LINEAR's form: CU_LINEAR_SKINNY or _STREAM (cuda_skinny_gemm.c), else 0 */
  cu_int8 *int8; /* LINEAR_INT8 */
  int64_t view_offset; /* VIEW: byte offset of the result in its source */
  void *scratch;       /* M31, SAGE, SOL, COLLECTIVE, skinny LINEAR: device scratch of
                          cu_m31_scratch_bytes, cu_sage_scratch_bytes, cu_sol_scratch_bytes,
                          cu_collective_scratch_bytes or cu_skinny_op_scratch_bytes (owned) */
  bool failed;         /* preparing it failed (reported once) */
} cu_op;

/* One block of the caching allocator. */
/* HELD: released during a graph capture, kept for the record (cuda_graph.c); PENDING:
 * released while the side stream may still run (cuda_side.c), handed out after the join */
typedef enum { CU_BLOCK_FREE, CU_BLOCK_USED, CU_BLOCK_HELD, CU_BLOCK_PENDING } cu_block_state;
typedef struct {
  void *p;
  size_t bytes;
  cu_block_state state;
  const void *holder; /* HELD: the captured graph that uses it */
} cu_block;

typedef enum { CU_ATT_CUDNN, CU_ATT_FLASH, CU_ATT_REFERENCE } cu_att_impl;

typedef struct cu_graphs cu_graphs; /* cuda_graph.c */
typedef struct cu_nccl cu_nccl;     /* cuda_nccl.c */
typedef struct cu_cudnn cu_cudnn;   /* cuda_cudnn.c */

typedef struct cu_state {
  h3_backend *b;
  int device;
  char device_name[192];
  int sm_count;
  size_t smem_optin; /* max dynamic shared memory per block */
  cudaStream_t stream; /* where work is queued now: main_stream, or side.stream in a branch */
  cudaStream_t main_stream;
  h3_kernel_cache cache;
  h3_arena arena; /* emitted kernels' strings */
  /* kernels by name (open addressing, power-of-two capacity) */
  cu_kernel **kmap;
  size_t kmap_cap, kmap_n;
  cudaLibrary_t *libs;
  void **lib_images; /* our copy of each library's CUBIN, kept while it is loaded */
  int n_libs, cap_libs;
  /* op records by op pointer */
  cu_op **omap;
  size_t omap_cap, omap_n;
  /* memory */
  cu_block *blocks;
  int n_blocks, cap_blocks;
  size_t bytes_held, peak_held; /* cudaMalloc'd now, and the most at once */
  /* libraries */
  void *lt; /* cublasLtHandle_t */
  /* cuBLASLt's tuning in this process (cuda_gemm_tune.c): GEMM shapes timed, GEMMs that read
     their pick from the kernel cache, and the host seconds the timing took */
  int64_t tune_timed, tune_read;
  double tune_seconds;
  void *workspace; /* the current stream's: main_workspace, or side.workspace in a branch */
  void *main_workspace;
  void *i8_acc; /* int32 accumulators of linear_int8, sized when the ops are prepared */
  size_t i8_acc_bytes;
  cu_cudnn *cudnn;
  cu_att_impl attention;
  bool attention_warned;
  /* timing */
  cudaEvent_t ev_start, ev_stop;
  bool busy;
  double gpu_seconds;
  /* weight streaming (cuda_stream.c): the copy stream and, per ring slot, the event the
     copies wait for (the slot's readers done) and the one the compute waits for (filled) */
  cudaStream_t copy_stream;
  cudaEvent_t *ring_freed, *ring_filled;
  int n_ring;
  /* timing events around the ring_waits queued outside a capture: pairs [2i, 2i + 1] */
  cudaEvent_t *stall_ev;
  int n_stall, cap_stall;
  /* the side stream of pass side-streams (cuda_side.c): made at the first fork */
  struct {
    cudaStream_t stream;
    cudaEvent_t fork, join;
    void *workspace; /* cuBLASLt / cuDNN workspace of the side stream's ops */
    bool open;       /* forked and not yet joined */
    bool off;        /* H3_SIDE_STREAM=0: every op on the main stream, in the plan's order */
    int sm_reserve;  /* SMs a `beside` GEMM leaves to the other stream (H3_SIDE_SM_RESERVE) */
  } side;
  /* graphs */
  cu_graphs *graphs;
  bool no_graphs;
  bool no_pdl; /* H3_PDL=0: cu_launch_pdl launches as cu_launch does */
  /* device marks of a device-clock trace (cuda_marks.c) */
  cudaEvent_t *marks;
  int n_marks, cap_marks;
  /* faults: H3_CUDA_SYNC=1 waits after every op, CUDA graphs off (a kernel fault then names
     its op); the
     test switches H3_FAULT_LAUNCH=N / H3_FAULT_KERNEL=N fail the Nth launch of an own kernel
     (cu_launch) or run a trapping kernel in its place (0: off); launches counts them */
  bool sync_each_op;
  long long fault_launch, fault_kernel, launches;
  /* the ranks of a parallel plan (h3_cuda_join_ranks): this backend is rank `rank` of
     `ranks` through nccl; without it rank 0 of 1 and nccl NULL */
  int rank, ranks;
  cu_nccl *nccl;
} cu_state;

/* ---- checks (cuda_backend.c) ----------------------------------------------------------- */
/* Reports a failed CUDA call: "cuda: <what>: <call> failed: <error name>: <message>". A
 * kernel fault (illegal address, launch failure, trap, ...) surfaces at a later call of the
 * stream: the report then names the op and the own kernel queued last (cu_note_queued) and
 * how to find the one that faulted. */
h3_status cu_fail(h3_diag *d, cudaError_t e, const char *call, const char *what);
/* Notes the op being run (kernel NULL) or the own kernel being launched, for cu_fail's report
 * of a kernel fault (the process's one device stream). */
void cu_note_queued(const h3_op *op, const char *kernel);
#define CU_CHECK(d, call, what)                                                          \
  do {                                                                                   \
    cudaError_t cu_e_ = (call);                                                          \
    if (cu_e_ != cudaSuccess) return cu_fail((d), cu_e_, #call, (what));                 \
  } while (0)
/* Reports an error at op's span: "cuda: <op name>: <message>". */
h3_status cu_op_error(h3_diag *d, const h3_op *op, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Marks the stream busy (starts the GPU timer) before queuing work. */
void cu_mark_busy(cu_state *s);
/* Allocation through the caching allocator (cuda_backend.c). */
void *cu_alloc(cu_state *s, size_t bytes);
void cu_release(cu_state *s, void *p);
/* Waits for the stream and gives the cached free blocks back to CUDA (cudaFree). */
void cu_trim(cu_state *s);

/* ---- the side stream (cuda_side.c; h3_backend_ext.side_stream) ------------------------- */
h3_status cu_side_stream(h3_backend *b, h3_side_cmd cmd, h3_diag *d);
void cu_side_free(cu_state *s);

/* ---- weight streaming (cuda_stream.c; h3_backend_ext's streaming hooks) ---------------- */
void *cu_host_alloc(h3_backend *b, size_t bytes);
void cu_host_free(h3_backend *b, void *p);
bool cu_host_pin(h3_backend *b, void *p, size_t bytes);
void cu_host_unpin(h3_backend *b, void *p);
h3_status cu_ring_copy(h3_backend *b, int slot, void *dst, const void *src, size_t bytes,
                       h3_diag *d);
h3_status cu_ring_wait(h3_backend *b, int slot, h3_diag *d);
void cu_ring_stalls(h3_backend *b, double *seconds, int64_t *waits);
void cu_stream_free(cu_state *s);

/* ---- kernels (cuda_kernels.c) --------------------------------------------------------- */
/* Compiles kernels/<file> (include/h3/kernels.h) behind the prelude and `defines` (macro
 * lines the file takes, or NULL) with NVRTC through the kernel cache, loads the CUBIN and
 * registers the kernels named in `names` with their launch rules left zero. exact: the
 * exact tier's options (-fmad=false); else the lossless ones for sm_90a (wgmma). */
h3_status cu_compile_tu(cu_state *s, const char *defines, const char *file, bool exact, int n,
                        const char *const *names, cu_kernel **out, h3_diag *d);
cu_kernel *cu_kernel_find(cu_state *s, const char *name);
/* Launches a kernel with explicit geometry and an argument array. */
h3_status cu_launch(cu_state *s, const cu_kernel *k, const int64_t grid[3],
                    const int64_t block[3], int64_t shared, void **args, h3_diag *d);
/* The same in clusters of `cluster` blocks along x (1..8, dividing grid[0]; 1: no clusters). */
h3_status cu_launch_cluster(cu_state *s, const cu_kernel *k, const int64_t grid[3],
                            const int64_t block[3], int64_t shared, int cluster, void **args,
                            h3_diag *d);
/* The same launched programmatically after the stream's previous kernel (programmatic
 * dependent launch, sm_90): it may start once every block of that kernel has called
 * h3_pdl_launch_dependents (kernels/prelude.cuh) or exited, and must h3_pdl_wait before it
 * reads what that kernel writes, in every block. A plain launch under H3_PDL=0. */
h3_status cu_launch_pdl(cu_state *s, const cu_kernel *k, const int64_t grid[3], const int64_t block[3],
                        int64_t shared, void **args, h3_diag *d);
/* How this backend runs op: the exec kind (h3_exec_classify) refined by what the backend
 * implements; CU_OP_UNSUPPORTED for control flow and for ops it has no implementation of. */
cu_op_kind cu_op_kind_of(const h3_op *op);
/* The record of op (prepared on first use). */
cu_op *cu_op_get(cu_state *s, const h3_op *op, h3_diag *d);
h3_status cu_op_run(cu_state *s, cu_op *o, const h3_tensor *in, int n_in, const h3_tensor *out,
                    int n_out, h3_diag *d);
void cu_kernels_free(cu_state *s);

/* ---- the backend's own kernels (cuda_util.c) -------------------------------------------- */
/* The macro lines that instantiate kernels/linear_generic.cu as kernel `name` for one dtype
 * combination (bias: H3_DTYPE_COUNT for none): what cu_linear_generic compiles. */
void cu_linear_defines(char *buf, size_t len, const char *name, h3_dtype x, h3_dtype w,
                       h3_dtype bias, h3_dtype y);
/* Queues h3cu_trap (one warp that executes `trap`: a kernel fault; H3_FAULT_KERNEL). */
h3_status cu_launch_trap(cu_state *s, h3_diag *d);
h3_status cu_index_copy(cu_state *s, const h3_op *op, const h3_tensor *x, const h3_tensor *i,
                        const h3_tensor *out, h3_diag *d);
/* y[m, n] = sum_k x[m, k] * w[n, k] (+ bias[n]) with fp32 products and sums, k ascending,
 * one rounding: bitwise the CPU reference for every dtype combination. */
h3_status cu_linear_generic(cu_state *s, const h3_op *op, const h3_tensor *in, int n_in,
                            const h3_tensor *out, h3_diag *d);
/* y[i] = x[i], i < n, between bf16, f16 and f32 (xt, yt), one RNE rounding. */
h3_status cu_convert(cu_state *s, const void *x, h3_dtype xt, void *y, h3_dtype yt, int64_t n,
                     h3_diag *d);
/* local[i] = ids[i] - base when that lies in [0, E), else -1 (i32 ids, i < n): moe {ranks}'s
 * ids of this rank's experts (the moe kernels skip a slot of id -1). */
h3_status cu_rank_ids(cu_state *s, const void *ids, void *local, int64_t n, int64_t base, int64_t E,
                      h3_diag *d);
/* dst[i] = h3_rng_init_value(kind, scale, seed, stream, i) rounded to dtype, i < n. */
h3_status cu_fill_random(cu_state *s, void *dst, h3_dtype dtype, int64_t n, int kind,
                         float scale, uint64_t seed, uint32_t stream, h3_diag *d);

/* The form that environment variable `var` names: its index in `forms` (NULL-terminated), or
 * -1 when unset, empty or none of them (then a warning on stderr, once per variable:
 * cuda_env.c). Read where the form is picked (at every run of an op for most). */
int cu_env_form(const char *var, const char *const *forms);
/* The count that environment variable `var` holds, lo..hi; `dflt` when unset or empty, and
 * when out of range or not a number (then a warning, once per variable: cuda_env.c). */
int cu_env_count(const char *var, int lo, int hi, int dflt);

/* ---- the skinny linear (cuda_skinny_gemm.c: kernels/skinny_gemm.cu) --------------------- */
/* Which form runs linear op (decided when the op is prepared): x and w bf16, y bf16 or f32 (a
 * bias of y's dtype), then cu_skinny_form_of (cuda_skinny_gemm.h) with H3_LINEAR_FORM; any
 * other linear CU_LINEAR_LIBRARY (cuBLASLt). */
int cu_skinny_takes(const h3_op *op);
/* The device scratch of that form (cuda_skinny_gemm.h) for op. */
size_t cu_skinny_op_scratch_bytes(const h3_op *op, int form);
/* Runs op in that form (the backend's own GEMM where x or w is not 16-byte aligned). */
h3_status cu_skinny_run(cu_state *s, const h3_op *op, int form, void *scratch, const h3_tensor *in, int n_in,
                        const h3_tensor *out, h3_diag *d);

/* ---- M3.1's hand kernels (cuda_m31.c) ---------------------------------------------------- */
/* Whether op is one of them: router_topk, moe, markov_draft, index_topk, paged_attention,
 * block_attention, sparse_attention. */
bool cu_m31_runs(const h3_op *op);
/* Device scratch the op needs while it runs (bytes; 0: none), allocated when it is prepared. */
size_t cu_m31_scratch_bytes(const h3_op *op);
h3_status cu_m31_run(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in,
                     const h3_tensor *out, h3_diag *d);
/* Macro lines that instantiate kernels/<file> (m31_moe.cu, m31_msa.cu, m31_msa_tile.cu,
 * m31_moe_gemm.cu or m31_moe_wgmma.cu) with the model's dtypes (bf16 activations and
 * weights, f32 router and outputs, i32 ids): the compile check's. NULL for another file. */
const char *cu_m31_check_defines(const char *file);

/* ---- cuBLASLt (cuda_gemm.c) ------------------------------------------------------------- */
h3_status cu_gemm_init(cu_state *s, h3_diag *d);
void cu_gemm_shutdown(cu_state *s);
/* Prepares op's GEMM when cuBLASLt can run it (bf16 operands); *out NULL otherwise. */
h3_status cu_gemm_prepare(cu_state *s, const h3_op *op, cu_gemm **out, h3_diag *d);
h3_status cu_gemm_run(cu_state *s, cu_gemm *g, const h3_tensor *in, int n_in,
                      const h3_tensor *out, h3_diag *d);
void cu_gemm_free(cu_gemm *g);

/* ---- linear_int8 (cuda_int8.c) ----------------------------------------------------------- */
/* The macro lines that instantiate kernels/int8_gemm.cu as the own int8 GEMM `gemm_name` and
 * dequantization kernel `dq_name` for one (bias dtype or H3_DTYPE_COUNT, y dtype)
 * combination: what cu_int8_prepare compiles. */
void cu_int8_defines(char *buf, size_t len, const char *gemm_name, const char *dq_name,
                     h3_dtype bias, h3_dtype y);
/* Descriptors, algorithms, kernels and accumulator space of a linear_int8 op, or of a
 * matmul_i8 op (its int32 result is written chunk by chunk in place: no scratch). */
h3_status cu_int8_prepare(cu_state *s, const h3_op *op, cu_int8 **out, h3_diag *d);
h3_status cu_int8_run(cu_state *s, cu_int8 *g, const h3_tensor *in, int n_in,
                      const h3_tensor *out, h3_diag *d);
/* The op's int32 accumulators alone, chunk by chunk as cu_int8_run computes them, into
 * acc (device, [M, N] row-major int32): for tests (matmul_i8: what cu_int8_run writes). */
h3_status cu_int8_accumulators(cu_state *s, cu_int8 *g, const h3_tensor *in, int32_t *acc,
                               h3_diag *d);
/* Whether the op's GEMMs go through cuBLASLt (else the backend's own int8 kernel). */
bool cu_int8_uses_cublaslt(const cu_int8 *g);
void cu_int8_free(cu_int8 *g);

/* ---- attention (cuda_attention.c, cuda_flash.c, cuda_cudnn.c) -------------------------- */
/* One segment of self-attention: rows [0, len) of q/k/v/o, row strides in elements (head h
 * of row t at ptr + t*stride + h*dim; v may be a view into a wider row: v_stride >= hk*dim). */
typedef struct {
  const void *q, *k, *v;
  void *o;
  int64_t len, hq, hk, dim;
  int64_t q_stride, k_stride, v_stride, o_stride;
  float scale;
  bool causal;
  h3_dtype dtype;
} cu_att_seg;

h3_status cu_attention_run(cu_state *s, const h3_op *op, const h3_tensor *in,
                           const h3_tensor *out, h3_diag *d);
/* The segments of an attention-like op of T rows (its `segments` boundaries inside (0, T),
 * ascending; 0 and T implied), one per call: start with i = 0 and *lo = *hi = 0; each call
 * that returns true sets [*lo, *hi) to the next non-empty segment. */
bool cu_next_segment(const h3_op *op, int64_t T, int *i, int64_t *lo, int64_t *hi);
/* One segment of an op on bf16 q[T, Hq, D], k and v [T, Hk, D] -> o[T, Hq, D] (packed rows):
 * rows [0, len) at the segment's first row; v's rows v_stride elements apart (Hk*D, or the
 * row length of the 2D tensor an op's v_view reads v from, v then pointing at its column). */
typedef struct {
  const void *q, *k, *v;
  void *o;
  long long len, v_stride;
} cu_qkv_seg;
/* Runs fn(s, op, ctx, segment, d) on each segment of such an op in order; stops at an error. */
h3_status cu_qkv_segments(cu_state *s, const h3_op *op, const h3_tensor *in, const h3_tensor *out,
                          h3_status (*fn)(cu_state *, const h3_op *, void *, const cu_qkv_seg *, h3_diag *),
                          void *ctx, h3_diag *d);
h3_status cu_attention_reference(cu_state *s, const cu_att_seg *a, h3_diag *d);
bool cu_flash_supports(const cu_att_seg *a);
h3_status cu_flash_run(cu_state *s, const cu_att_seg *a, h3_diag *d);
/* A TMA tensor map (cuda.h's CUtensorMap) of rows [0, rows) x columns [0, cols) of a bf16
 * matrix at base with row stride `stride` elements, read in boxes of 64 columns x 128 rows,
 * 128-byte swizzled (the shared-memory tiles of flash_attention.cu and m31_moe_wgmma.cu),
 * through the driver's cuTensorMapEncodeTiled (looked up once per process; cuda_flash.c).
 * Errors name `who` and the matrix `what`, with `fix` as the hint. */
typedef struct CUtensorMap_st CUtensorMap;
h3_status cu_tile_map(CUtensorMap *m, const void *base, int64_t cols, int64_t stride, int64_t rows,
                      const char *who, const char *what, const char *fix, h3_diag *d);
/* cu_tile_map with boxes of 64 columns x box_rows rows (<= 256; kernels/sol_attention.cu's
 * 64-key tiles and chunks of kvs) */
h3_status cu_tile_map_rows(CUtensorMap *m, const void *base, int64_t cols, int64_t stride, int64_t rows,
                           int box_rows, const char *who, const char *what, const char *fix, h3_diag *d);
/* The same for a dense byte matrix (row stride cols, a multiple of 16) read in boxes of 128
 * columns x 128 rows (kernels/sage_attention.cu's wgmma forms: int8 and e4m3 codes). */
h3_status cu_byte_map(CUtensorMap *m, const void *base, int64_t cols, int64_t rows, const char *who,
                      const char *what, const char *fix, h3_diag *d);
bool cu_cudnn_supports(const cu_att_seg *a);
/* Builds (once per shape) and runs cuDNN's fused SDPA. When cuDNN cannot build a plan for
 * the shape it warns (once) and sets *fallback: nothing ran, the caller runs another one. */
h3_status cu_cudnn_run(cu_state *s, const cu_att_seg *a, bool *fallback, h3_diag *d);
void cu_cudnn_free(cu_state *s);

/* ---- sage_attention (cuda_sage.c) -------------------------------------------------------- */
/* Whether the backend runs op (bf16 q, k, v and result, head_dim 128, Hq % Hk == 0). */
bool cu_sage_supports(const h3_op *op);
/* The device scratch such an op needs (the quantized q, k, v and their scales; 0 for another). */
size_t cu_sage_scratch_bytes(const h3_op *op);
h3_status cu_sage_run(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in,
                      const h3_tensor *out, h3_diag *d);

/* ---- sol_attention (cuda_sol.c) --------------------------------------------------------- */
/* Whether the backend runs op (bf16 q, k, v and result, head_dim 128, Hq % Hk == 0, thresh
 * diag or exact). */
bool cu_sol_supports(const h3_op *op);
/* The device scratch such an op needs (centroids, moments, the selection; 0 for another). */
size_t cu_sol_scratch_bytes(const h3_op *op);
h3_status cu_sol_run(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in,
                     const h3_tensor *out, h3_diag *d);

/* ---- graphs (cuda_graph.c) ----------------------------------------------------------------- */
h3_status cu_graph_call_begin(h3_backend *b, const void *key, const h3_tensor *in, int n_in,
                              int *replayed, h3_diag *d);
h3_status cu_graph_call_end(h3_backend *b, const void *key, h3_status st, h3_diag *d);
bool cu_graph_capturing(const cu_state *s);
/* Host bytes that a captured copy reads at replay: a pinned copy owned by the graph. */
void *cu_graph_stash(cu_state *s, const void *src, size_t bytes, h3_diag *d);
const void *cu_graph_holder(const cu_state *s); /* the graph being captured, or NULL */
/* the host's monotonic clock, seconds */
double cu_host_seconds(void);
void cu_graph_counts(const cu_state *s, int64_t *captured, int64_t *replayed);
/* flags[i] (m->n_graphs entries): whether running m->graphs[i] makes the executor read
 * device memory on the host (a branch's cond, an index by a row that is not a loop
 * counter, moe in its cuBLASLt form), in the graph itself or in a graph it calls,
 * transitively; why[i] (why NULL: not wanted) the graph's first op, in its order, that
 * reads (a call, where a callee does), NULL where none. */
void cu_graph_host_reads(const h3_module *m, bool *flags, const h3_op **why);
/* The graphs called since their plan was loaded whose calls are never captured because they
 * read the device on the host, up to max of them: graphs[k] and the op why[k] that reads
 * (cu_graph_host_reads). Returns how many there are. */
int cu_graph_uncaptured(const cu_state *s, const h3_graph **graphs, const h3_op **why, int max);
/* Starts the graph records of m's graphs afresh and marks those of cu_graph_host_reads:
 * their calls are never captured (h3_cuda_load_plan). */
h3_status cu_graph_mark_plan(cu_state *s, const h3_module *m, h3_diag *d);
void cu_graphs_free(cu_state *s);

/* ---- weights (cuda_weights.c) ------------------------------------------------------------- */
h3_status cu_init_param(h3_backend *b, void *dst, const h3_param *p, uint64_t seed, int64_t first,
                        int64_t count, h3_diag *d);

/* ---- device marks (cuda_marks.c): h3_backend_ext.mark, mark_seconds, marks_reset ------- */
int cu_mark(h3_backend *b);
double cu_mark_seconds(h3_backend *b, int a, int z);
void cu_marks_reset(h3_backend *b);
void cu_marks_free(cu_state *s);

#endif
