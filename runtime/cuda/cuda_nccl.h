/* cuda_nccl.h: the NCCL communicator of a cuda backend that is one rank of a run over several
 * GPUs (h3exec --backend cuda --gpus N, one process per GPU; docs/parallel.md), and the three
 * exchanges the collective ops are made of (cuda_collective.c).
 *
 * libnccl.so.2 is opened with dlopen on first use, so a machine without NCCL fails only a
 * run over several GPUs, with a hint; it must be NCCL 2.9 or newer (its calls may be captured
 * into CUDA graphs). Every exchange is queued on the caller's stream and returns at once; the
 * ranks must queue the same exchanges in the same order (they run one plan, so they do).
 * A failing NCCL call is reported with NCCL's message and marks the communicator failed, so
 * that it is aborted (ncclCommAbort: no waiting for the other ranks) instead of destroyed.
 */
#ifndef H3_CUDA_NCCL_H
#define H3_CUDA_NCCL_H

#include "h3/cuda_backend.h"

#include <cuda_runtime_api.h>
#include <stdbool.h>

typedef struct cu_nccl cu_nccl;

/* A fresh unique id of a communicator (rank 0 makes it and hands it to the others). */
h3_status cu_nccl_unique_id(h3_rank_id *id, h3_diag *d);
/* Joins the communicator of `ranks` ranks that share id as rank `rank` on the current device
 * (ncclCommInitRank: returns when every rank has joined). NULL after reporting. */
cu_nccl *cu_nccl_join(int ranks, int rank, const h3_rank_id *id, h3_diag *d);
/* Destroys the communicator, or aborts it when a call failed or `failed` is set. */
void cu_nccl_free(cu_nccl *c, bool failed);

/* recv [N * bytes] = the N ranks' send [bytes] in rank order (ncclAllGather). */
h3_status cu_nccl_all_gather(cu_nccl *c, const void *send, void *recv, size_t bytes, cudaStream_t st,
                             h3_diag *d);
/* recv chunk j [bytes] = rank j's send chunk r (this rank's), for j < N: N ncclSend / ncclRecv
 * pairs in one group. */
h3_status cu_nccl_all_to_all(cu_nccl *c, const void *send, void *recv, size_t bytes, cudaStream_t st,
                             h3_diag *d);
/* recv[i] = the sum over the ranks of send[i], i < count (ncclAllReduce, ncclSum, in NCCL's
 * order of addition). dtype: f32, f64, i32, i64, i8 or u8; false from cu_nccl_reduces for
 * another. */
h3_status cu_nccl_all_reduce(cu_nccl *c, const void *send, void *recv, size_t count, h3_dtype dtype,
                             cudaStream_t st, h3_diag *d);
bool cu_nccl_reduces(h3_dtype dtype);

#endif
