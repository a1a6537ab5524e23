/* cuda_collective.h: shard, all_gather, all_to_all and all_reduce on the cuda backend
 * (cuda_collective.c; docs/parallel.md). */
#ifndef H3_CUDA_COLLECTIVE_H
#define H3_CUDA_COLLECTIVE_H

#include "cuda_internal.h"

/* Whether the backend runs op (all_reduce: f32, f64, i32, i64, i8 or u8 to the same dtype, or
 * between bf16, f16 and f32 through an fp32 sum; the other three: any dtype). */
bool cu_collective_supports(const h3_op *op);
/* The device scratch op needs while it runs (0: none). */
size_t cu_collective_scratch_bytes(const h3_op *op);
/* Runs op as rank s->rank of s->ranks (its `ranks` must be s->ranks). */
h3_status cu_collective_run(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in,
                            const h3_tensor *out, h3_diag *d);

#endif
