/* cuda_flash.c: the host side of h3's flash-attention forward kernel (kernels/flash_attention.cu,
 * bf16, head_dim 128, non-causal, sm_90a): which segments it takes, the kernel compiled and
 * configured on first use (225 KiB of dynamic shared memory, one block per SM), the TMA
 * tensor maps of q, k, v (cu_tile_map, also moe's: cuTensorMapEncodeTiled through
 * cudaGetDriverEntryPointByVersion, no libcuda link; 2D [len, H·128] with their own row
 * strides, so q/k/v can be the views of a packed qkv; cu_tile_map_rows: boxes of other
 * heights, sol's 64-key tiles; cu_byte_map: sage's int8 and e4m3 codes), and the launch: one block of 384 threads per (128 query rows, head).
 */
#include "cuda_internal.h"

#include <cuda.h> /* CUtensorMap and its enums only: the encoder comes from the runtime */
#include <pthread.h>

bool cu_flash_supports(const cu_att_seg *a) {
  return a->dtype == H3_BF16 && a->dim == 128 && !a->causal && a->len < 2147483647 &&
         a->q_stride % 8 == 0 && a->k_stride % 8 == 0 && a->v_stride % 8 == 0 &&
         a->q_stride >= a->hq * 128 && a->k_stride >= a->hk * 128 && a->v_stride >= a->hk * 128 &&
         a->o_stride % 2 == 0 &&
         ((uintptr_t)a->q | (uintptr_t)a->k | (uintptr_t)a->v) % 16 == 0 &&
         (uintptr_t)a->o % 4 == 0;
}

/* Shared memory: 1024 bytes of alignment slack, Q [128][128], 3 stages of K and V [128][128]. */
enum { FLASH_SMEM = 1024 + 128 * 128 * 2 + 3 * 2 * 128 * 128 * 2 };

static const char *const flash_name = "h3cu_flash_fwd";

/* The kernel, compiled and configured on first use. */
static cu_kernel *flash_kernel(cu_state *s, h3_diag *d) {
  cu_kernel *k = cu_kernel_find(s, flash_name);
  if (k) {
    if (!k->fn) h3_diag_error(d, (h3_span){0}, CU_HINT_EARLIER, "cuda: %s failed to load earlier", k->name);
    return k->fn ? k : NULL;
  }
  if (cu_compile_tu(s, NULL, "flash_attention.cu", false, 1, &flash_name, &k, d) != H3_OK)
    return NULL;
  cudaError_t e = (size_t)FLASH_SMEM > s->smem_optin
                      ? cudaErrorInvalidValue
                      : cudaKernelSetAttributeForDevice(
                            k->fn, cudaFuncAttributeMaxDynamicSharedMemorySize, FLASH_SMEM, s->device);
  if (e != cudaSuccess) {
    cu_fail(d, e, "cudaKernelSetAttributeForDevice (dynamic shared memory)", k->name);
    k->fn = NULL;
    return NULL;
  }
  return k;
}

/* ---- tensor maps ------------------------------------------------------------------------ */
typedef CUresult (*encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                    const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                    const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                    CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* the driver's cuTensorMapEncodeTiled, looked up once per process */
static pthread_once_t encoder_once = PTHREAD_ONCE_INIT;
static encode_tiled_fn encoder;
static cudaError_t encoder_error;
static enum cudaDriverEntryPointQueryResult encoder_query;

static void encoder_lookup(void) {
  void *fn = NULL;
  encoder_error = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                   cudaEnableDefault, &encoder_query);
  if (encoder_error == cudaSuccess && encoder_query == cudaDriverEntryPointSuccess)
    encoder = (encode_tiled_fn)fn;
}

/* cuTensorMapEncodeTiled of a 2D matrix of `esize`-byte elements (type), boxes of box[0]
 * columns x box[1] rows, 128-byte swizzled (errors as cu_tile_map's) */
static h3_status encode_2d(CUtensorMap *m, CUtensorMapDataType type, int64_t esize, const void *base, int64_t cols,
                           int64_t stride, int64_t rows, const cuuint32_t box[2], const char *who, const char *what,
                           const char *fix, h3_diag *d) {
  pthread_once(&encoder_once, encoder_lookup);
  if (!encoder) {
    h3_diag_error(d, (h3_span){0}, fix, "cuda: %s: the driver has no cuTensorMapEncodeTiled (%s, query "
                  "result %d); update the NVIDIA driver", who, cudaGetErrorName(encoder_error),
                  (int)encoder_query);
    return H3_ERR;
  }
  cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)(stride * esize)};
  cuuint32_t steps[2] = {1, 1};
  CUresult r = encoder(m, type, 2, (void *)base, dims, strides, box, steps, CU_TENSOR_MAP_INTERLEAVE_NONE,
                       CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r == CUDA_SUCCESS) return H3_OK;
  h3_diag_error(d, (h3_span){0}, fix,
                "cuda: %s: cuTensorMapEncodeTiled failed (error %d) for %s: %lld rows of %lld "
                "columns, row stride %lld", who, (int)r, what, (long long)rows, (long long)cols,
                (long long)stride);
  return H3_ERR;
}

h3_status cu_tile_map_rows(CUtensorMap *m, const void *base, int64_t cols, int64_t stride, int64_t rows,
                           int box_rows, const char *who, const char *what, const char *fix, h3_diag *d) {
  const cuuint32_t box[2] = {64, (cuuint32_t)box_rows};
  return encode_2d(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, cols, stride, rows, box, who, what, fix, d);
}

h3_status cu_tile_map(CUtensorMap *m, const void *base, int64_t cols, int64_t stride, int64_t rows,
                      const char *who, const char *what, const char *fix, h3_diag *d) {
  return cu_tile_map_rows(m, base, cols, stride, rows, 128, who, what, fix, d);
}

h3_status cu_byte_map(CUtensorMap *m, const void *base, int64_t cols, int64_t rows, const char *who,
                      const char *what, const char *fix, h3_diag *d) {
  static const cuuint32_t box[2] = {128, 128};
  return encode_2d(m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, base, cols, cols, rows, box, who, what, fix, d);
}

h3_status cu_flash_run(cu_state *s, const cu_att_seg *a, h3_diag *d) {
  cu_kernel *k = flash_kernel(s, d);
  if (!k) return H3_ERR;
  CUtensorMap tq, tk, tv;
  static const char *const who = "flash attention", *const fix = "run this attention with --attention cudnn or reference";
  if (cu_tile_map(&tq, a->q, a->hq * 128, a->q_stride, a->len, who, "q", fix, d) != H3_OK ||
      cu_tile_map(&tk, a->k, a->hk * 128, a->k_stride, a->len, who, "k", fix, d) != H3_OK ||
      cu_tile_map(&tv, a->v, a->hk * 128, a->v_stride, a->len, who, "v", fix, d) != H3_OK)
    return H3_ERR;
  void *o = a->o;
  int len = (int)a->len, group = (int)(a->hq / a->hk);
  long long os = a->o_stride;
  float c = a->scale * 1.4426950408889634f;
  void *args[] = {&tq, &tk, &tv, &o, &len, &group, &os, &c};
  int64_t grid[3] = {(a->len + 127) / 128, a->hq, 1}, block[3] = {384, 1, 1};
  return cu_launch(s, k, grid, block, FLASH_SMEM, args, d);
}
