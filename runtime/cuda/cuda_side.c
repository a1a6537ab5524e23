/* cuda_side.c: the side stream of pass side-streams (h3_backend_ext.side_stream).
 *
 * s->stream and s->workspace are where every op queues its work and which cuBLASLt /
 * cuDNN workspace it uses; a branch points them at the side stream and its own workspace
 * (two GEMMs running at once must not share one), the join points them back at
 * main_stream / main_workspace. Fork and join are an event recorded on one stream and
 * waited for on the other: inside a graph capture they become the graph's edges (the side
 * stream joins the capture at the fork and leaves it at the join), outside one they order
 * the two streams on the device. While a branch is open, blocks released (cu_release)
 * are PENDING: the other stream may still read them, so cu_alloc hands them out again
 * only after the join. H3_SIDE_STREAM=0 keeps every op on the main stream (to compare).
 */
#include "cuda_internal.h"

static h3_status side_setup(cu_state *s, h3_diag *d) {
  if (s->side.stream) return H3_OK;
  CU_CHECK(d, cudaStreamCreateWithFlags(&s->side.stream, cudaStreamNonBlocking), "side stream");
  CU_CHECK(d, cudaEventCreateWithFlags(&s->side.fork, cudaEventDisableTiming), "side stream");
  CU_CHECK(d, cudaEventCreateWithFlags(&s->side.join, cudaEventDisableTiming), "side stream");
  s->side.workspace = cu_alloc(s, CU_WORKSPACE_BYTES);
  if (!s->side.workspace) {
    h3_diag_error(d, (h3_span){0}, CU_HINT_DEVICE_OOM,
                  "cuda: out of memory for the side stream's %zu-byte GEMM workspace", CU_WORKSPACE_BYTES);
    return H3_ERR;
  }
  return H3_OK;
}

static void to_main(cu_state *s) {
  s->stream = s->main_stream;
  s->workspace = s->main_workspace;
}

/* The blocks released during the branch go where a release outside it would have put them. */
static void settle_pending(cu_state *s) {
  const void *holder = cu_graph_holder(s);
  for (int i = 0; i < s->n_blocks; i++)
    if (s->blocks[i].state == CU_BLOCK_PENDING) {
      s->blocks[i].state = holder ? CU_BLOCK_HELD : CU_BLOCK_FREE;
      s->blocks[i].holder = holder;
    }
}

h3_status cu_side_stream(h3_backend *b, h3_side_cmd cmd, h3_diag *d) {
  cu_state *s = b->ctx;
  if (s->side.off) return H3_OK;
  switch (cmd) {
  case H3_SIDE_FORK:
    if (side_setup(s, d) != H3_OK) return H3_ERR;
    to_main(s);
    CU_CHECK(d, cudaEventRecord(s->side.fork, s->main_stream), "side stream fork");
    CU_CHECK(d, cudaStreamWaitEvent(s->side.stream, s->side.fork, 0), "side stream fork");
    s->stream = s->side.stream;
    s->workspace = s->side.workspace;
    s->side.open = true;
    return H3_OK;
  case H3_SIDE_MAIN:
    to_main(s);
    return H3_OK;
  case H3_SIDE_JOIN:
    to_main(s);
    if (!s->side.open) return H3_OK;
    s->side.open = false;
    settle_pending(s);
    CU_CHECK(d, cudaEventRecord(s->side.join, s->side.stream), "side stream join");
    CU_CHECK(d, cudaStreamWaitEvent(s->main_stream, s->side.join, 0), "side stream join");
    return H3_OK;
  }
  return H3_OK;
}

void cu_side_free(cu_state *s) {
  to_main(s);
  if (s->side.stream) {
    cudaStreamSynchronize(s->side.stream);
    cudaStreamDestroy(s->side.stream);
  }
  if (s->side.fork) cudaEventDestroy(s->side.fork);
  if (s->side.join) cudaEventDestroy(s->side.join);
  s->side.stream = NULL;
  s->side.fork = s->side.join = NULL;
  s->side.open = false;
}
