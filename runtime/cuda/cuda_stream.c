/* cuda_stream.c: the cuda side of weight streaming (runtime/stream.h, h3_backend_ext's
 * streaming hooks): page-locked host memory, and copies of ring slots on a copy stream of
 * their own, ordered against the compute stream by two events per slot.
 *
 * ring_copy(slot): `freed[slot]` is recorded on the compute stream (after the work queued so
 * far: the slot's last reader), the copy stream waits for it, copies, and records
 * `filled[slot]`; ring_wait(slot): the compute stream waits for `filled[slot]`. In a CUDA
 * graph capture the first wait forks the copy stream into the capture and every copy is
 * joined back by its ring_wait (the executor waits for every copy it queues within the
 * pass), so the captured step holds the copies as memcpy nodes from the same pinned host
 * addresses and replays them. Copies run at the PCIe / C2C rate (~55 GB/s on the H200)
 * beside the GEMMs. Outside a capture each ring_wait is bracketed by two timing events on the
 * compute stream: their distance is how long the compute waited for the copy (ring_stalls).
 */
#include "cuda_internal.h"

#include <stdlib.h>

void *cu_host_alloc(h3_backend *b, size_t bytes) {
  (void)b;
  void *p = NULL;
  if (cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault) != cudaSuccess) {
    cudaGetLastError();
    return NULL;
  }
  return p;
}

void cu_host_free(h3_backend *b, void *p) {
  (void)b;
  if (p) cudaFreeHost(p);
}

bool cu_host_pin(h3_backend *b, void *p, size_t bytes) {
  (void)b;
  if (cudaHostRegister(p, bytes, cudaHostRegisterDefault) == cudaSuccess) return true;
  cudaGetLastError();
  return false;
}

void cu_host_unpin(h3_backend *b, void *p) {
  (void)b;
  if (p && cudaHostUnregister(p) != cudaSuccess) cudaGetLastError();
}

/* The copy stream and the events of slots [0, slot]. */
static h3_status ring_ready(cu_state *s, int slot, h3_diag *d) {
  if (!s->copy_stream)
    CU_CHECK(d, cudaStreamCreateWithFlags(&s->copy_stream, cudaStreamNonBlocking),
             "weight streaming setup");
  if (slot < s->n_ring) return H3_OK;
  int n = slot + 1;
  cudaEvent_t *f = realloc(s->ring_freed, (size_t)n * sizeof *f);
  if (f) s->ring_freed = f;
  cudaEvent_t *g = f ? realloc(s->ring_filled, (size_t)n * sizeof *g) : NULL;
  if (!g) {
    h3_diag_error(d, (h3_span){0}, H3_HINT_OOM, "cuda: out of memory for the weight streaming's events");
    return H3_ERR;
  }
  s->ring_filled = g;
  for (; s->n_ring < n; s->n_ring++) {
    CU_CHECK(d, cudaEventCreateWithFlags(&s->ring_freed[s->n_ring], cudaEventDisableTiming),
             "weight streaming setup");
    cudaError_t e = cudaEventCreateWithFlags(&s->ring_filled[s->n_ring], cudaEventDisableTiming);
    if (e != cudaSuccess) {
      cudaEventDestroy(s->ring_freed[s->n_ring]);
      return cu_fail(d, e, "cudaEventCreateWithFlags", "weight streaming setup");
    }
  }
  return H3_OK;
}

h3_status cu_ring_copy(h3_backend *b, int slot, void *dst, const void *src, size_t bytes,
                       h3_diag *d) {
  cu_state *s = b->ctx;
  if (ring_ready(s, slot, d) != H3_OK) return H3_ERR;
  cu_mark_busy(s);
  CU_CHECK(d, cudaEventRecord(s->ring_freed[slot], s->stream), "ring slot freed");
  CU_CHECK(d, cudaStreamWaitEvent(s->copy_stream, s->ring_freed[slot], 0), "ring slot freed");
  CU_CHECK(d, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s->copy_stream),
           "streaming a weight block");
  CU_CHECK(d, cudaEventRecord(s->ring_filled[slot], s->copy_stream), "ring slot filled");
  return H3_OK;
}

/* Timed waits kept until ring_stalls reads them; later ones are not timed. */
#define STALL_PAIRS_MAX 16384

/* A pair of timing events for the next timed wait; NULL when none can be made (the wait is
 * then not timed). */
static cudaEvent_t *stall_pair(cu_state *s) {
  if (s->n_stall == STALL_PAIRS_MAX) return NULL;
  if (s->n_stall == s->cap_stall) {
    int cap = s->cap_stall ? 2 * s->cap_stall : 256;
    cudaEvent_t *e = realloc(s->stall_ev, (size_t)cap * 2 * sizeof *e);
    if (!e) return NULL;
    s->stall_ev = e;
    for (; s->cap_stall < cap; s->cap_stall++) {
      cudaEvent_t *p = &e[2 * s->cap_stall];
      if (cudaEventCreate(&p[0]) != cudaSuccess) break;
      if (cudaEventCreate(&p[1]) != cudaSuccess) {
        cudaEventDestroy(p[0]);
        break;
      }
    }
    cudaGetLastError();
    if (s->n_stall == s->cap_stall) return NULL;
  }
  return &s->stall_ev[2 * s->n_stall++];
}

h3_status cu_ring_wait(h3_backend *b, int slot, h3_diag *d) {
  cu_state *s = b->ctx;
  if (ring_ready(s, slot, d) != H3_OK) return H3_ERR;
  cudaEvent_t *t = cu_graph_capturing(s) ? NULL : stall_pair(s);
  if (t) CU_CHECK(d, cudaEventRecord(t[0], s->stream), "ring slot wait");
  CU_CHECK(d, cudaStreamWaitEvent(s->stream, s->ring_filled[slot], 0), "ring slot wait");
  if (t) CU_CHECK(d, cudaEventRecord(t[1], s->stream), "ring slot wait");
  return H3_OK;
}

void cu_ring_stalls(h3_backend *b, double *seconds, int64_t *waits) {
  cu_state *s = b->ctx;
  *seconds = 0;
  *waits = 0;
  for (int i = 0; i < s->n_stall; i++) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, s->stall_ev[2 * i], s->stall_ev[2 * i + 1]) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    *seconds += ms * 1e-3;
    (*waits)++;
  }
  s->n_stall = 0;
}

void cu_stream_free(cu_state *s) {
  if (s->copy_stream) cudaStreamSynchronize(s->copy_stream);
  for (int i = 0; i < s->n_ring; i++) {
    cudaEventDestroy(s->ring_freed[i]);
    cudaEventDestroy(s->ring_filled[i]);
  }
  for (int i = 0; i < 2 * s->cap_stall; i++) cudaEventDestroy(s->stall_ev[i]);
  free(s->stall_ev);
  s->stall_ev = NULL;
  s->n_stall = s->cap_stall = 0;
  free(s->ring_freed);
  free(s->ring_filled);
  s->ring_freed = s->ring_filled = NULL;
  s->n_ring = 0;
  if (s->copy_stream) cudaStreamDestroy(s->copy_stream);
  s->copy_stream = NULL;
}
