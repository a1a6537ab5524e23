/* kernel.h: what a kernel is between the plan's writer (codegen) and its reader (runtime),
 * and how the CUDA backend runs each op. Part of libh3_plan (plan/).
 *
 * Execution kinds: h3_exec_classify() says how the CUDA backend executes an op (a kernel
 * of the plan, a library call, a view, host code, a hand-written kernel of the backend, or
 * control flow). Codegen emits a kernel exactly for the ops classified H3_EXEC_KERNEL and
 * a library-call record for the library / host / deferred ones; the runtime prepares each
 * op by the same rule, so the two sides cannot disagree.
 *
 * Kernels: a kernel has a deterministic `extern "C"` name `h3_<op>_<first 10 hex of
 * sha256>` (the hash taken over the source with the name written as `h3_<op>`), a launch
 * rule computed from the shapes, and an argument list. Calling convention (every kernel):
 * the op's operands in order (device pointers, `const T *`), then its results in order
 * (`T *`), then for `randn` the request seed as `unsigned long long`; `args` spells this
 * out ("in0", "out0", "seed"). An `inplace` kernel (set_index, scatter_rows, kv_write)
 * writes only the rows it changes: before the launch, the runtime copies operand 0 into
 * result 0 when the memory plan gave them different buffers.
 *
 * Tiers: an exact kernel rounds every intermediate value to its IR dtype and is compiled
 * with -fmad=false; a lossless kernel keeps fp32 through a fused region and rounds only the
 * outputs. Arithmetic always uses the _rn intrinsics; --use_fast_math is never used.
 *
 * Compile and cache: h3_nvrtc_compile() compiles one translation unit (the prelude of
 * kernels/prelude.cuh + many kernels) to a CUBIN for sm_90, through the cache
 *   key = sha256(source, sorted options, arch, NVRTC version, H3_VERSION)
 *   file = <dir>/<key>.cubin = header line with the payload's sha256 + payload
 * dir = $H3_KERNEL_CACHE_DIR, else $XDG_CACHE_HOME/h3/kernels, else ~/.cache/h3/kernels;
 * H3_KERNEL_CACHE=0 disables it. A corrupt entry is recompiled and replaced (warning).
 */
#ifndef H3_KERNEL_H
#define H3_KERNEL_H

#include "h3/ir.h"
#include <stdbool.h>
#include <stddef.h>

#define H3_TARGET_ARCH "sm_90"

/* How the CUDA backend runs an op. */
typedef enum {
  H3_EXEC_CONTROL,  /* loop, call, yield, return: the executor's control flow */
  H3_EXEC_VIEW,     /* reshape, index, contiguous slice: a pointer into the source */
  H3_EXEC_KERNEL,   /* a kernel of the plan (emitted by codegen) */
  H3_EXEC_LIBRARY,  /* a library call: linear -> cuBLASLt, attention ops -> attention */
  H3_EXEC_HOST,     /* computed on the host and uploaded (sigma_schedule) */
  H3_EXEC_DEFERRED, /* a hand-written kernel of the backend, not emitted by codegen (moe,
                       router_topk, the sparse-attention ops: kernels/m31_*.cu) */
} h3_exec_kind;

h3_exec_kind h3_exec_classify(const h3_op *op);
const char *h3_exec_kind_name(h3_exec_kind k); /* "kernel", "library", ... */
/* The library or deferred kind recorded in the plan: "cublaslt", "attention", "host",
 * "deferred"; NULL for other exec kinds. */
const char *h3_exec_library_kind(const h3_op *op);
/* True when a slice reads a contiguous range of its source (every dim before the axis
 * is 1, the memory planner's rule): then it is a view, else a copy kernel. */
bool h3_exec_slice_is_contiguous(const h3_op *op);

#define H3_KERNEL_MAX_ARGS 64
/* The most results of one op the executor runs (runtime/exec.c); passes that make ops with
 * many results (elementwise-fusion) stay within it. */
#define H3_EXEC_MAX_RESULTS 8

typedef struct {
  const char *name;   /* "h3_rms_norm_0123456789" */
  const char *op;     /* the op it implements: "rms_norm", "fused", ... */
  h3_tier tier;       /* H3_TIER_EXACT or H3_TIER_LOSSLESS */
  char *source;       /* the kernel's CUDA C (the translation unit adds the prelude) */
  char sha256[65];    /* of source */
  int64_t grid[3];    /* launch rule: blocks */
  int64_t block[3];   /* threads per block */
  int64_t shared_bytes;
  bool inplace;       /* writes only changed rows of out0 (= a copy of in0) */
  int n_args;
  const char **args;  /* "in0", "in1", ..., "out0", ..., "seed" */
} h3_kernel;

/* Checks that `name` is `h3_<op>_<10 hex>` with the hex equal to the start of
 * sha256(source with every occurrence of name replaced by "h3_<op>"). */
bool h3_kernel_name_matches(const char *name, const char *op, const char *source);

/* The CUDA C type that holds one element of dtype t in kernels ("h3_bf16", "float", ...;
 * the prelude's typedefs). */
const char *h3_kernel_ctype(h3_dtype t);

/* ---- NVRTC and the kernel cache ------------------------------------------------------ */
typedef struct {
  bool enabled;
  char dir[4096];
} h3_kernel_cache;

/* Resolves the cache folder from the environment (see the header comment); creates it
 * when missing. A folder that cannot be created disables the cache with a warning. */
void h3_kernel_cache_init(h3_kernel_cache *c, h3_diag *d);

typedef struct {
  const char *label;          /* for messages: "translation unit 3 (12 kernels)" */
  const char *source;         /* full NVRTC source */
  int n_options;
  const char *const *options; /* without -arch and include paths (added here) */
  /* results */
  unsigned char *cubin; /* malloc'd */
  size_t cubin_len;
  bool cache_hit;
  char key[65];
} h3_nvrtc_job;

/* The NVRTC options of a translation unit of each kernel tier (n set to their count):
 * exact: -fmad=false; lossless: sm_90a (wgmma). */
const char *const *h3_nvrtc_tier_options(h3_tier tier, int *n);

/* Compiles jobs (each through the cache) on up to `threads` threads (<= 0: 2). All jobs
 * are attempted; a failing one reports its source with line numbers and the NVRTC log. */
h3_status h3_nvrtc_compile(h3_nvrtc_job *jobs, int n, const h3_kernel_cache *cache,
                           int threads, h3_diag *d);
void h3_nvrtc_job_free(h3_nvrtc_job *job);

/* "13.0" (the loaded libnvrtc), or "unavailable". */
const char *h3_nvrtc_version(void);
/* The CUDA toolkit include folder NVRTC needs for <cuda_bf16.h>: $CUDA_HOME/include,
 * $CUDA_PATH/include, /usr/local/cuda/include, or next to libnvrtc; NULL if none found. */
const char *h3_cuda_include_dir(void);

#endif
