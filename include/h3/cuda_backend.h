/* cuda_backend.h: the `cuda` backend (runtime/cuda/): what a caller can ask of it beyond the
 * generic table of include/h3/backend.h.
 *
 * The backend runs every compute op of a plan on one GPU: codegen's NVRTC kernels (loaded
 * from CUBINs with cudaLibraryLoadData; no libcuda link), linears through cuBLASLt (bf16)
 * or h3's own fp32 GEMM kernel, attention through one of three implementations, and the
 * executor's graph calls captured once as CUDA graphs and replayed. Ops it does not run
 * yet (the M3.1 hand kernels: moe, router_topk, ...) are reported as unsupported on cuda.
 *
 * Kernels come from the plan (the table's load_plan, h3_backend_load_plan) by the op
 * attribute `kernel`, and the backend's own from kernels/ (include/h3/kernels.h); it emits
 * no code. Callers reach it through the backend table (include/h3/backend.h); what is
 * declared here is for its tests and benches.
 */
#ifndef H3_CUDA_BACKEND_H
#define H3_CUDA_BACKEND_H

#include "h3/backend.h"
#include "h3/plan.h"

#include <stdbool.h>

/* The default attention implementation (of H3_ATTENTION_NAMES). */
#define H3_CUDA_ATTENTION_DEFAULT "flash"

typedef struct {
  const char *attention; /* "cudnn" | "flash" | "reference"; NULL: H3_CUDA_ATTENTION_DEFAULT */
  bool no_graphs;        /* run graph calls op by op, no CUDA graphs (also H3_CUDA_GRAPHS=0) */
  int device;            /* CUDA device index */
} h3_cuda_options;

/* True when the CUDA runtime sees a usable device; otherwise writes why into `why`. */
bool h3_cuda_available(char *why, size_t why_len);

/* Creates the backend on co->device (co NULL: defaults). Without a usable GPU this is an
 * error that says what was found and suggests --backend cpu. */
h3_backend *h3_backend_cuda_new(const h3_backend_options *o, const h3_cuda_options *co,
                                h3_diag *d);
bool h3_backend_is_cuda(const h3_backend *b);

/* Loads every translation unit's CUBIN of p (h3_plan_compile_kernels must have filled
 * them; the table's load_plan does that first), registers its kernels by name with their launch rules, and prepares every linear
 * (cuBLASLt descriptors and algorithm) and attention op of p's module. Graphs whose run
 * reads device memory on the host (a `branch`, Cache-DiT), directly or through a call, are
 * marked here so that their calls are never captured as CUDA graphs. */
h3_status h3_cuda_load_plan(h3_backend *b, const h3_plan *p, h3_diag *d);
/* Forgets the backend's per-op records (GEMM descriptors, kernel bindings). They are keyed
 * by op address: call this after freeing a module whose ops ran on b, before running ops
 * of another module (h3_cuda_load_plan does it itself). */
void h3_cuda_forget_ops(h3_backend *b);

/* Selects the attention implementation by name (see H3_ATTENTION_NAMES). */
h3_status h3_cuda_set_attention(h3_backend *b, const char *name, h3_diag *d);
const char *h3_cuda_attention(const h3_backend *b);

/* Fills a parameter's device buffer (h3_type_bytes(&p->type) bytes at dst) on the GPU with
 * exactly the values h3_weights_random(m, seed) gives it on the host. */
h3_status h3_cuda_random_param(h3_backend *b, void *dst, const h3_param *p, uint64_t seed,
                               h3_diag *d);

/* GPU busy time (seconds) measured with CUDA events from the first work queued after an
 * idle point to the next sync, summed since creation or the last reset. */
double h3_cuda_gpu_seconds(const h3_backend *b);
void h3_cuda_reset_gpu_seconds(h3_backend *b);
/* "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)". */
const char *h3_cuda_device_name(const h3_backend *b);
/* Compiles every kernel source of the backend itself (utility, reference and flash
 * attention, generic linear) with NVRTC through the kernel cache: needs no GPU (CI). */
h3_status h3_cuda_compile_check(h3_diag *d);
/* Graph calls replayed from a CUDA graph / captured, since creation. */
void h3_cuda_graph_counts(const h3_backend *b, int64_t *captured, int64_t *replayed);

/* ---- several GPUs (h3exec --backend cuda --gpus N, one process per GPU; docs/parallel.md) ---- */
/* Rank 0: a fresh id (opens libnccl.so.2; an error with a hint when it is missing or older
 * than 2.9). */
h3_status h3_cuda_nccl_id(h3_rank_id *id, h3_diag *d);
/* Makes b (created on device `rank`) rank `rank` of the `ranks` ranks that share id: every
 * rank calls it (ncclCommInitRank returns when all have). The collective ops, and moe
 * {ranks}, then run with ranks = `ranks`; without it b is the one rank of ranks = 1 (they
 * run as device copies). The communicator is destroyed with b, aborted when a call failed. */
h3_status h3_cuda_join_ranks(h3_backend *b, int ranks, int rank, const h3_rank_id *id, h3_diag *d);

#endif
