/* cuda_marks.c: device timestamps for the executor's device-clock trace (h3_backend_ext
 * mark / mark_seconds / marks_reset; runtime.h trace_device).
 *
 * A mark is a CUDA event recorded on the backend's stream after the work queued so far;
 * marks are numbered from 0 since the last reset and their events are kept in a pool that
 * only grows (created on first use, destroyed with the backend). No mark is taken inside a
 * graph capture (an event recorded there would become a graph node, timed at replay). */
#include "cuda_internal.h"

#include <stdlib.h>

int cu_mark(h3_backend *b) {
  cu_state *s = b->ctx;
  if (cu_graph_capturing(s)) return -1;
  if (s->n_marks == s->cap_marks) {
    int cap = s->cap_marks ? 2 * s->cap_marks : 1024;
    cudaEvent_t *ev = realloc(s->marks, (size_t)cap * sizeof *ev);
    if (!ev) return -1;
    s->marks = ev;
    for (int i = s->cap_marks; i < cap; i++)
      if (cudaEventCreate(&ev[i]) != cudaSuccess) {
        cudaGetLastError();
        s->cap_marks = i;
        return -1;
      }
    s->cap_marks = cap;
  }
  if (cudaEventRecord(s->marks[s->n_marks], s->stream) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  cu_mark_busy(s);
  return s->n_marks++;
}

double cu_mark_seconds(h3_backend *b, int a, int z) {
  cu_state *s = b->ctx;
  if (a < 0 || z < 0 || a >= s->n_marks || z >= s->n_marks) return -1;
  float ms = 0;
  if (cudaEventElapsedTime(&ms, s->marks[a], s->marks[z]) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return ms * 1e-3;
}

void cu_marks_reset(h3_backend *b) {
  cu_state *s = b->ctx;
  s->n_marks = 0;
}

void cu_marks_free(cu_state *s) {
  for (int i = 0; i < s->cap_marks; i++) cudaEventDestroy(s->marks[i]);
  free(s->marks);
  s->marks = NULL;
  s->n_marks = s->cap_marks = 0;
}
