/* cuda_backend.c: the `cuda` backend's function table: device detection and creation,
 * the caching device allocator, host/device copies, synchronisation, CUDA-event timing,
 * run_op dispatch, and the public queries of include/h3/cuda_backend.h.
 *
 * Memory: every allocation is a cu_block from cudaMalloc (256-byte aligned). A released
 * block is kept and handed out again to a request of at most its size and at least half
 * of it, so loops that allocate and release staging buffers every iteration never call
 * cudaMalloc / cudaFree again (cudaFree would synchronise the device). While a graph call
 * is being captured, released blocks are held by that CUDA graph (they may be re-used only
 * inside the same capture) until the graph is destroyed.
 * Timing: the first work queued after an idle point records a start event on the stream,
 * sync records the stop event; their distance is added to the GPU busy time.
 */
#include "cuda_internal.h"
#include "cuda_nccl.h"
#include "h3/weights.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const h3_span no_span = {0};

/* The op run last and the own kernel launched last (cu_note_queued). */
static const h3_op *queued_op;
static const char *queued_kernel;

void cu_note_queued(const h3_op *op, const char *kernel) {
  if (op) queued_op = op, queued_kernel = NULL;
  else queued_kernel = kernel;
}

/* Errors of a kernel that faulted while it ran, reported by whichever call comes next. */
static bool kernel_fault(cudaError_t e) {
  return e == cudaErrorIllegalAddress || e == cudaErrorLaunchFailure ||
         e == cudaErrorMisalignedAddress || e == cudaErrorIllegalInstruction ||
         e == cudaErrorHardwareStackError || e == cudaErrorInvalidPc || e == cudaErrorAssert ||
         e == cudaErrorInvalidAddressSpace || e == cudaErrorLaunchTimeout;
}

h3_status cu_fail(h3_diag *d, cudaError_t e, const char *call, const char *what) {
  if (kernel_fault(e)) {
    const h3_op *op = queued_op;
    h3_diag_error(d, op ? op->span : no_span,
                  "kernels run asynchronously, so an earlier op may have faulted: H3_CUDA_SYNC=1 "
                  "waits after every op and names the one; run with --backend cpu to compare",
                  "cuda: a kernel faulted (%s: %s), seen at %s; the last op queued: %s (%s%s)",
                  cudaGetErrorName(e), cudaGetErrorString(e), what,
                  op ? h3_opcode_name(op->code) : "none yet",
                  queued_kernel ? "kernel " : "a library kernel (cuBLASLt / cuDNN) or a copy",
                  queued_kernel ? queued_kernel : "");
    return H3_ERR;
  }
  h3_diag_error(d, no_span,
                e == cudaErrorMemoryAllocation ? "use a smaller config or free GPU memory"
                                               : "run with --backend cpu to compare",
                "cuda: %s: %s failed: %s: %s", what, call, cudaGetErrorName(e),
                cudaGetErrorString(e));
  return H3_ERR;
}

h3_status cu_op_error(h3_diag *d, const h3_op *op, const char *hint, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  h3_diag_error(d, op ? op->span : no_span, hint, "cuda: %s: %s",
                op ? h3_opcode_name(op->code) : "op", msg);
  return H3_ERR;
}

/* ---- device detection ---------------------------------------------------------------- */
bool h3_cuda_available(char *why, size_t why_len) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n <= 0) {
    if (why)
      snprintf(why, why_len, "%s", e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device found");
    cudaGetLastError(); /* clear the error so that later calls do not see it */
    return false;
  }
  return true;
}

/* ---- allocator ---------------------------------------------------------------------------- */
static int block_of(const cu_state *s, const void *p) {
  for (int i = s->n_blocks - 1; i >= 0; i--)
    if (s->blocks[i].p == p) return i;
  return -1;
}

void *cu_alloc(cu_state *s, size_t bytes) {
  size_t want = (bytes + 511) & ~(size_t)511;
  if (!want) want = 512;
  const void *holder = cu_graph_holder(s);
  int best = -1;
  for (int i = 0; i < s->n_blocks; i++) {
    cu_block *bl = &s->blocks[i];
    bool usable = bl->state == CU_BLOCK_FREE || (holder && bl->state == CU_BLOCK_HELD &&
                                                 bl->holder == holder);
    if (!usable || bl->bytes < want || bl->bytes / 2 > want) continue;
    if (best < 0 || bl->bytes < s->blocks[best].bytes) best = i;
  }
  if (best >= 0) {
    s->blocks[best].state = CU_BLOCK_USED;
    s->blocks[best].holder = NULL;
    return s->blocks[best].p;
  }
  if (s->n_blocks == s->cap_blocks) {
    int cap = s->cap_blocks ? s->cap_blocks * 2 : 256;
    cu_block *nb = realloc(s->blocks, (size_t)cap * sizeof *nb);
    if (!nb) return NULL;
    s->blocks = nb;
    s->cap_blocks = cap;
  }
  void *p = NULL;
  if (cudaMalloc(&p, want) != cudaSuccess) {
    cudaGetLastError();
    if (cu_graph_capturing(s)) return NULL;
    cu_trim(s); /* give the cached free blocks back and try once more */
    if (cudaMalloc(&p, want) != cudaSuccess) {
      cudaGetLastError();
      return NULL;
    }
  }
  s->blocks[s->n_blocks++] = (cu_block){p, want, CU_BLOCK_USED, NULL};
  s->bytes_held += want;
  if (s->bytes_held > s->peak_held) s->peak_held = s->bytes_held;
  return p;
}

void cu_trim(cu_state *s) {
  cudaStreamSynchronize(s->stream);
  int j = 0;
  for (int i = 0; i < s->n_blocks; i++) {
    if (s->blocks[i].state == CU_BLOCK_FREE) {
      cudaFree(s->blocks[i].p);
      s->bytes_held -= s->blocks[i].bytes;
    } else {
      s->blocks[j++] = s->blocks[i];
    }
  }
  s->n_blocks = j;
}

void cu_release(cu_state *s, void *p) {
  if (!p) return;
  int i = block_of(s, p);
  if (i < 0) return;
  const void *holder = cu_graph_holder(s);
  s->blocks[i].state = s->side.open ? CU_BLOCK_PENDING : holder ? CU_BLOCK_HELD : CU_BLOCK_FREE;
  s->blocks[i].holder = holder;
}

/* ---- timing -------------------------------------------------------------------------------- */
void cu_mark_busy(cu_state *s) {
  if (s->busy || cu_graph_capturing(s)) return;
  if (cudaEventRecord(s->ev_start, s->stream) == cudaSuccess) s->busy = true;
  else cudaGetLastError();
}

double cu_host_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the table ------------------------------------------------------------------------------ */
static void *cuda_alloc(h3_backend *b, size_t bytes) { return cu_alloc(b->ctx, bytes); }
static void cuda_release(h3_backend *b, void *p) { cu_release(b->ctx, p); }

static h3_status cuda_upload(h3_backend *b, void *dst, const void *src, size_t bytes, h3_diag *d) {
  cu_state *s = b->ctx;
  if (!bytes) return H3_OK;
  if (cu_graph_capturing(s)) {
    /* the copy node reads its source at every replay: give it a pinned copy of its own */
    const void *pinned = cu_graph_stash(s, src, bytes, d);
    if (!pinned) return H3_ERR;
    CU_CHECK(d, cudaMemcpyAsync(dst, pinned, bytes, cudaMemcpyHostToDevice, s->stream),
             "upload during graph capture");
    return H3_OK;
  }
  cu_mark_busy(s);
  CU_CHECK(d, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s->stream), "upload");
  return H3_OK;
}

/* Waits for the stream; an open busy interval (cu_mark_busy) is closed and its length added
 * to gpu_seconds. */
static h3_status cuda_sync(h3_backend *b, h3_diag *d) {
  cu_state *s = b->ctx;
  if (cu_graph_capturing(s)) return H3_OK; /* nothing runs until the capture ends */
  if (s->busy) {
    s->busy = false;
    CU_CHECK(d, cudaEventRecord(s->ev_stop, s->stream), "sync");
    CU_CHECK(d, cudaEventSynchronize(s->ev_stop), "sync (a kernel failed)");
    float ms = 0;
    CU_CHECK(d, cudaEventElapsedTime(&ms, s->ev_start, s->ev_stop), "sync");
    s->gpu_seconds += ms * 1e-3;
  }
  CU_CHECK(d, cudaStreamSynchronize(s->stream), "sync (a kernel failed)");
  return H3_OK;
}

/* Copies device -> host and waits for it: a sync point, so it also closes the busy interval
 * (cuda_sync); left open, the next run's busy time would start here and count the host's
 * time in between (and another backend's work) as GPU time. */
static h3_status cuda_download(h3_backend *b, void *dst, const void *src, size_t bytes,
                               h3_diag *d) {
  cu_state *s = b->ctx;
  if (!bytes) return H3_OK;
  if (cu_graph_capturing(s)) {
    h3_diag_error(d, no_span,
                  "load the module with h3_cuda_load_plan (it keeps graphs that read the device "
                  "on the host out of capture), or turn the CUDA graphs off (H3_CUDA_GRAPHS=0)",
                  "cuda: a download was asked for while a graph call is being captured");
    return H3_ERR;
  }
  cu_mark_busy(s);
  CU_CHECK(d, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s->stream), "download");
  return cuda_sync(b, d);
}

static h3_status cuda_copy(h3_backend *b, void *dst, const void *src, size_t bytes, h3_diag *d) {
  cu_state *s = b->ctx;
  if (!bytes || dst == src) return H3_OK;
  cu_mark_busy(s);
  const char *sd = dst, *ss = src;
  bool overlap = sd < ss + bytes && ss < sd + bytes;
  if (!overlap) {
    CU_CHECK(d, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s->stream), "copy");
    return H3_OK;
  }
  void *tmp = cu_alloc(s, bytes);
  if (!tmp) {
    h3_diag_error(d, no_span, CU_HINT_DEVICE_OOM, "cuda: out of memory for a %zu-byte overlapping copy",
                  bytes);
    return H3_ERR;
  }
  cudaError_t e = cudaMemcpyAsync(tmp, src, bytes, cudaMemcpyDeviceToDevice, s->stream);
  if (e == cudaSuccess) e = cudaMemcpyAsync(dst, tmp, bytes, cudaMemcpyDeviceToDevice, s->stream);
  cu_release(s, tmp);
  if (e != cudaSuccess) return cu_fail(d, e, "cudaMemcpyAsync", "overlapping copy");
  return H3_OK;
}

static h3_status cuda_run_op(h3_backend *b, const h3_op *op, const h3_tensor *in, int n_in,
                             const h3_tensor *out, int n_out, h3_diag *d) {
  cu_state *s = b->ctx;
  cu_op *o = cu_op_get(s, op, d);
  if (!o) return H3_ERR;
  cu_mark_busy(s);
  cu_note_queued(op, NULL);
  h3_status st = cu_op_run(s, o, in, n_in, out, n_out, d);
  cudaError_t e = st == H3_OK && s->sync_each_op ? cudaStreamSynchronize(s->stream) : cudaSuccess;
  if (kernel_fault(e)) {
    h3_diag_error(d, op->span, "run with --backend cpu to compare",
                  "cuda: %s faulted (%s: %s; found by H3_CUDA_SYNC=1, which waits after every op)%s%s",
                  h3_opcode_name(op->code), cudaGetErrorName(e), cudaGetErrorString(e),
                  queued_kernel ? " in kernel " : " in a library kernel (cuBLASLt / cuDNN) or a copy",
                  queued_kernel ? queued_kernel : "");
    return H3_ERR;
  }
  if (e != cudaSuccess) return cu_fail(d, e, "cudaStreamSynchronize", "the op's end (H3_CUDA_SYNC=1)");
  return st;
}

static double cuda_now(h3_backend *b) {
  (void)b;
  return cu_host_seconds();
}

static void cuda_destroy(h3_backend *b) {
  cu_state *s = b->ctx;
  if (s) {
    /* work still queued (a rank that failed mid-step) may wait on the other ranks: abort the
       communicator first, which ends its kernels; an idle one is destroyed */
    if (s->nccl) cu_nccl_free(s->nccl, cudaStreamQuery(s->stream) != cudaSuccess);
    cu_side_free(s);
    cudaStreamSynchronize(s->stream);
    cu_graphs_free(s);
    cu_stream_free(s);
    cu_marks_free(s);
    cu_cudnn_free(s);
    cu_gemm_shutdown(s);
    cu_kernels_free(s);
    for (int i = 0; i < s->n_blocks; i++) cudaFree(s->blocks[i].p);
    free(s->blocks);
    if (s->ev_start) cudaEventDestroy(s->ev_start);
    if (s->ev_stop) cudaEventDestroy(s->ev_stop);
    if (s->stream) cudaStreamDestroy(s->stream);
    h3_arena_free(&s->arena);
    free(s);
  }
  free(b);
}

static const char *cuda_device_name(h3_backend *b) { return h3_cuda_device_name(b); }

/* The ops this backend runs: the rule cu_op_get prepares them by. */
static bool cuda_supports_op(h3_backend *b, const h3_op *op) {
  (void)b;
  return cu_op_kind_of(op) != CU_OP_UNSUPPORTED;
}

static h3_status cuda_load_plan(h3_backend *b, h3_plan *p, h3_diag *d) {
  for (int t = 0; t < p->n_tus; t++)
    if (!p->tus[t].cubin) {
      if (h3_plan_compile_kernels(p, d) != H3_OK) return H3_ERR;
      break;
    }
  return h3_cuda_load_plan(b, p, d);
}

static h3_status cuda_set_option(h3_backend *b, const char *key, const char *value, h3_diag *d) {
  if (key && !strcmp(key, "attention")) return h3_cuda_set_attention(b, value, d);
  h3_diag_error(d, (h3_span){0}, "the cuda backend's options: attention", "cuda: no option '%s'",
                key ? key : "");
  return H3_ERR;
}

static const char *cuda_option(h3_backend *b, const char *key) {
  return key && !strcmp(key, "attention") ? h3_cuda_attention(b) : NULL;
}

static double cuda_busy_seconds(h3_backend *b) { return h3_cuda_gpu_seconds(b); }

static void cuda_reset_busy(h3_backend *b) { h3_cuda_reset_gpu_seconds(b); }

static const h3_backend_ops cuda_ops = {
    .name = "cuda",
    .destroy = cuda_destroy,
    .alloc = cuda_alloc,
    .release = cuda_release,
    .upload = cuda_upload,
    .download = cuda_download,
    .copy = cuda_copy,
    .run_op = cuda_run_op,
    .sync = cuda_sync,
    .now = cuda_now,
    .device_name = cuda_device_name,
    .supports_op = cuda_supports_op,
    .load_plan = cuda_load_plan,
    .set_option = cuda_set_option,
    .option = cuda_option,
    .busy_seconds = cuda_busy_seconds,
    .reset_busy = cuda_reset_busy,
};

static void cu_graph_counts_ext(h3_backend *b, int64_t *captured, int64_t *replayed) {
  cu_graph_counts(b->ctx, captured, replayed);
}

static int cu_graph_uncaptured_ext(h3_backend *b, const h3_graph **graphs, const h3_op **why, int max) {
  return cu_graph_uncaptured(b->ctx, graphs, why, max);
}

static void cu_trim_ext(h3_backend *b) { cu_trim(b->ctx); }

static int64_t cu_memory_peak(h3_backend *b) { return (int64_t)((cu_state *)b->ctx)->peak_held; }

static void cu_gemm_tuning(h3_backend *b, int64_t *timed, int64_t *read, double *seconds) {
  const cu_state *s = b->ctx;
  *timed = s->tune_timed, *read = s->tune_read, *seconds = s->tune_seconds;
}

static const h3_backend_ext cuda_ext = {
    cu_init_param,       cu_graph_call_begin, cu_graph_call_end, cu_mark,
    cu_mark_seconds,     cu_marks_reset,      cu_graph_counts_ext, cu_host_alloc,
    cu_host_free,        cu_host_pin,         cu_host_unpin,     cu_ring_copy,
    cu_ring_wait,        cu_ring_stalls,      cu_trim_ext,       cu_memory_peak,
    cu_side_stream,      cu_graph_uncaptured_ext, cu_gemm_tuning};

/* ---- creation ------------------------------------------------------------------------------- */
static int attention_from_name(const char *name, cu_att_impl *out) {
  if (!name) name = H3_CUDA_ATTENTION_DEFAULT;
  if (!strcmp(name, "flash")) *out = CU_ATT_FLASH;
  else if (!strcmp(name, "cudnn")) *out = CU_ATT_CUDNN;
  else if (!strcmp(name, "reference")) *out = CU_ATT_REFERENCE;
  else return 0;
  return 1;
}

static h3_status device_setup(cu_state *s, h3_diag *d) {
  int n = 0;
  CU_CHECK(d, cudaGetDeviceCount(&n), "device detection");
  if (s->device < 0 || s->device >= n) {
    h3_diag_error(d, no_span, "pick a device index below the count",
                  "cuda: device %d does not exist (%d device%s found)", s->device, n,
                  n == 1 ? "" : "s");
    return H3_ERR;
  }
  CU_CHECK(d, cudaSetDevice(s->device), "device setup");
  struct cudaDeviceProp p;
  CU_CHECK(d, cudaGetDeviceProperties(&p, s->device), "device setup");
  if (p.major < 9) {
    h3_diag_error(d, no_span, "run on a Hopper GPU (H100, H200) or use --backend cpu",
                  "cuda: device %d (%s) is sm_%d%d; h3's kernels are built for %s", s->device,
                  p.name, p.major, p.minor, H3_TARGET_ARCH);
    return H3_ERR;
  }
  s->sm_count = p.multiProcessorCount;
  s->smem_optin = p.sharedMemPerBlockOptin;
  snprintf(s->device_name, sizeof s->device_name, "%.120s (sm_%d%d, %d SMs, %.1f GiB)", p.name,
           p.major, p.minor, p.multiProcessorCount, (double)p.totalGlobalMem / 1073741824.0);
  CU_CHECK(d, cudaStreamCreateWithFlags(&s->main_stream, cudaStreamNonBlocking), "device setup");
  s->stream = s->main_stream;
  CU_CHECK(d, cudaEventCreate(&s->ev_start), "device setup");
  CU_CHECK(d, cudaEventCreate(&s->ev_stop), "device setup");
  return H3_OK;
}

h3_backend *h3_backend_cuda_new(const h3_backend_options *o, const h3_cuda_options *co,
                                h3_diag *d) {
  char why[256];
  if (!h3_cuda_available(why, sizeof why)) {
    h3_diag_error(d, no_span, "use --backend cpu (or auto, which falls back to cpu)",
                  "cuda: no usable GPU: %s", why);
    return NULL;
  }
  cu_att_impl att;
  if (!attention_from_name(co ? co->attention : NULL, &att)) {
    h3_diag_error(d, no_span, "valid names: " H3_ATTENTION_NAMES,
                  "cuda: unknown attention implementation '%s'", co->attention);
    return NULL;
  }
  h3_backend *b = calloc(1, sizeof *b);
  cu_state *s = calloc(1, sizeof *s);
  if (!b || !s) {
    free(b), free(s);
    h3_diag_error(d, no_span, H3_HINT_OOM, "out of memory creating the cuda backend");
    return NULL;
  }
  b->ops = &cuda_ops;
  b->ext = &cuda_ext;
  b->ctx = s;
  b->seed = o ? o->seed : 0;
  s->b = b;
  s->device = co ? co->device : 0;
  s->ranks = 1;
  s->attention = att;
  const char *env = getenv("H3_CUDA_GRAPHS");
  s->no_graphs = (co && co->no_graphs) || (env && !strcmp(env, "0"));
  env = getenv("H3_CUDA_SYNC");
  s->sync_each_op = env && strcmp(env, "0");
  s->no_graphs |= s->sync_each_op; /* a wait inside a capture would end it */
  env = getenv("H3_SIDE_STREAM");
  s->side.off = env && !strcmp(env, "0");
  env = getenv("H3_PDL");
  s->no_pdl = env && !strcmp(env, "0");
  env = getenv("H3_FAULT_LAUNCH");
  s->fault_launch = env ? atoll(env) : 0;
  env = getenv("H3_FAULT_KERNEL");
  s->fault_kernel = env ? atoll(env) : 0;
  h3_arena_init(&s->arena);
  if (device_setup(s, d) != H3_OK || cu_gemm_init(s, d) != H3_OK) {
    cuda_destroy(b);
    return NULL;
  }
  s->side.sm_reserve = cu_env_count("H3_SIDE_SM_RESERVE", 0, s->sm_count / 2, CU_SIDE_SM_RESERVE);
  h3_kernel_cache_init(&s->cache, d);
  return b;
}

/* ---- public queries --------------------------------------------------------------------------- */
bool h3_backend_is_cuda(const h3_backend *b) { return b && b->ops == &cuda_ops; }

h3_status h3_cuda_set_attention(h3_backend *b, const char *name, h3_diag *d) {
  cu_att_impl att;
  if (!h3_backend_is_cuda(b) || !attention_from_name(name, &att)) {
    h3_diag_error(d, no_span, "valid names: " H3_ATTENTION_NAMES,
                  "cuda: unknown attention implementation '%s'", name ? name : "(null)");
    return H3_ERR;
  }
  cu_state *s = b->ctx;
  s->attention = att;
  s->attention_warned = false;
  return H3_OK;
}

const char *h3_cuda_attention(const h3_backend *b) {
  if (!h3_backend_is_cuda(b)) return NULL;
  const cu_state *s = b->ctx;
  return s->attention == CU_ATT_CUDNN ? "cudnn" : s->attention == CU_ATT_FLASH ? "flash" : "reference";
}

double h3_cuda_gpu_seconds(const h3_backend *b) {
  return h3_backend_is_cuda(b) ? ((const cu_state *)b->ctx)->gpu_seconds : 0.0;
}

void h3_cuda_reset_gpu_seconds(h3_backend *b) {
  if (h3_backend_is_cuda(b)) ((cu_state *)b->ctx)->gpu_seconds = 0.0;
}

const char *h3_cuda_device_name(const h3_backend *b) {
  return h3_backend_is_cuda(b) ? ((const cu_state *)b->ctx)->device_name : "";
}

void h3_cuda_graph_counts(const h3_backend *b, int64_t *captured, int64_t *replayed) {
  *captured = *replayed = 0;
  if (h3_backend_is_cuda(b)) cu_graph_counts(b->ctx, captured, replayed);
}

h3_status h3_cuda_nccl_id(h3_rank_id *id, h3_diag *d) { return cu_nccl_unique_id(id, d); }

h3_status h3_cuda_join_ranks(h3_backend *b, int ranks, int rank, const h3_rank_id *id, h3_diag *d) {
  if (!h3_backend_is_cuda(b) || ranks < 1 || rank < 0 || rank >= ranks) {
    h3_diag_error(d, no_span, NULL, "h3_cuda_join_ranks needs a cuda backend and 0 <= rank < ranks");
    return H3_ERR;
  }
  cu_state *s = b->ctx;
  if (s->nccl) {
    h3_diag_error(d, no_span, NULL, "cuda: the backend is already rank %d of %d", s->rank, s->ranks);
    return H3_ERR;
  }
  CU_CHECK(d, cudaSetDevice(s->device), "joining the ranks");
  if (!(s->nccl = cu_nccl_join(ranks, rank, id, d))) return H3_ERR;
  s->rank = rank, s->ranks = ranks;
  return H3_OK;
}

h3_status h3_cuda_random_param(h3_backend *b, void *dst, const h3_param *p, uint64_t seed,
                               h3_diag *d) {
  if (!h3_backend_is_cuda(b)) {
    h3_diag_error(d, no_span, NULL, "h3_cuda_random_param needs a cuda backend");
    return H3_ERR;
  }
  return cu_init_param(b, dst, p, seed, 0, h3_weights_tensor_count(p), d);
}
