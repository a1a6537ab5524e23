/* backend.c: choosing a backend by name (h3exec --backend cpu|cuda|auto), and the calls
 * through its table that callers use (include/h3/backend.h).
 *
 * `cuda` needs a usable GPU (h3_cuda_available); without one it is an error that says
 * why and suggests --backend cpu. `auto` takes cuda when a GPU is usable, else cpu.
 */
#include "h3/backend.h"
#include "h3/cuda_backend.h"

#include <stdlib.h>
#include <string.h>

h3_backend *h3_backend_create(const char *name, const h3_backend_options *o, h3_diag *d) {
  h3_span none = {0};
  char why[256] = "";
  if (name && strcmp(name, "cpu") == 0) return h3_backend_cpu_new(o, d);
  if (!name || strcmp(name, "auto") == 0)
    return h3_cuda_available(why, sizeof why) ? h3_backend_cuda_new(o, NULL, d)
                                              : h3_backend_cpu_new(o, d);
  if (strcmp(name, "cuda") == 0) {
    if (h3_cuda_available(why, sizeof why)) return h3_backend_cuda_new(o, NULL, d);
    h3_diag_error(d, none, "use --backend cpu (or auto)",
                  "CUDA backend not available in this build/no GPU found (%s)", why);
    return NULL;
  }
  h3_diag_error(d, none, "valid backends: cpu, cuda, auto", "unknown backend '%s'", name);
  return NULL;
}

void h3_backend_free(h3_backend *b) {
  if (b) b->ops->destroy(b);
}

const char *h3_backend_device_name(h3_backend *b) { return b->ops->device_name(b); }

bool h3_backend_supports_op(h3_backend *b, const h3_op *op) { return b->ops->supports_op(b, op); }

h3_status h3_backend_load_plan(h3_backend *b, h3_plan *p, h3_diag *d) {
  return b->ops->load_plan(b, p, d);
}

h3_status h3_backend_set_option(h3_backend *b, const char *key, const char *value, h3_diag *d) {
  return b->ops->set_option(b, key, value, d);
}

const char *h3_backend_option(h3_backend *b, const char *key) { return b->ops->option(b, key); }

double h3_backend_busy_seconds(h3_backend *b) { return b->ops->busy_seconds(b); }

void h3_backend_reset_busy(h3_backend *b) { b->ops->reset_busy(b); }

bool h3_backend_graph_counts(h3_backend *b, int64_t *captured, int64_t *replayed) {
  *captured = *replayed = 0;
  if (!b->ext || !b->ext->graph_counts) return false;
  b->ext->graph_counts(b, captured, replayed);
  return true;
}

bool h3_backend_gemm_tuning(h3_backend *b, int64_t *timed, int64_t *read, double *seconds) {
  *timed = *read = 0, *seconds = 0;
  if (!b->ext || !b->ext->gemm_tuning) return false;
  b->ext->gemm_tuning(b, timed, read, seconds);
  return true;
}

int h3_backend_graph_uncaptured(h3_backend *b, const h3_graph **graphs, const h3_op **why, int max) {
  if (!b->ext || !b->ext->graph_uncaptured) return 0;
  return b->ext->graph_uncaptured(b, graphs, why, max);
}

int64_t h3_backend_memory_peak(h3_backend *b) {
  return b->ext && b->ext->memory_peak ? b->ext->memory_peak(b) : -1;
}

static h3_status not_cuda(h3_diag *d) {
  h3_diag_error(d, (h3_span){0}, "run the parallel plan with --backend cuda, or as threads with "
                "--backend cpu --gpus N", "ranks as processes run on the cuda backend only");
  return H3_ERR;
}

h3_backend *h3_backend_create_rank(const char *name, const h3_backend_options *o, int rank, h3_diag *d) {
  if (!name || strcmp(name, "cuda")) return not_cuda(d), NULL;
  h3_cuda_options co = {.device = rank};
  return h3_backend_cuda_new(o, &co, d);
}

h3_status h3_backend_rank_id(h3_backend *b, h3_rank_id *id, h3_diag *d) {
  return h3_backend_is_cuda(b) ? h3_cuda_nccl_id(id, d) : not_cuda(d);
}

h3_status h3_backend_join_ranks(h3_backend *b, int ranks, int rank, const h3_rank_id *id, h3_diag *d) {
  return h3_backend_is_cuda(b) ? h3_cuda_join_ranks(b, ranks, rank, id, d) : not_cuda(d);
}
