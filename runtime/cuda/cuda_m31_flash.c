/* cuda_m31_flash.c: the launch of MiniMax-M3.1's paged / sparse attention for many rows of one
 * sequence on warpgroup MMA (kernels/m31_flash.cu, sm_90a) on the cuda backend.
 * cu_m31_run_att_tile (cuda_m31_msa_tile.c) hands it the ops whose shape it takes
 * (cu_m31_flash_fits): bf16 q, caches and result, head_dim 128, 16 q heads per kv head,
 * page == 128 (== the sparse block), i32 positions / page table / selections, 1 to 16 selected
 * blocks per row, a positive scale, 16-byte aligned q and caches, grid and TMA row coordinates
 * below 2^31, and the opt-in shared memory of one block per SM. H3_M31_ATTENTION=tile (read at
 * every run; a CUDA graph keeps the kernel it captured) leaves them to the row-tiled mma.sync
 * kernel instead, to compare.
 * The tensor maps of the caches (2D [P * 128, Hk * 128], cu_tile_map) are encoded on the host at
 * every launch from the device pointers and passed by value; nothing is allocated, nothing read
 * back (capture-safe), no scratch: each block builds its list of key tiles in shared memory.
 * One launch: ceil(T / 8) * Hk blocks of 384 threads.
 */
#include "cuda_m31.h"

#include <cuda.h> /* CUtensorMap only: the encoder comes from the runtime (cu_tile_map) */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* m31_flash.cu's shapes: dynamic shared memory (1024 bytes of alignment slack, Q [128][128],
 * 3 stages of K and V [128][128] bf16), a bound on its static shared memory (mbarriers, the
 * rows' positions and tile lists: 1280 bytes), H3MF_MAX_TOPK, rows per block, threads. */
enum {
  FLASH_SMEM = 1024 + 128 * 128 * 2 + 3 * 2 * 128 * 128 * 2, FLASH_STATIC_SMEM = 1536,
  FLASH_MAX_TOPK = 16, FLASH_ROWS = 8, FLASH_THREADS = 384
};

static bool is_sparse(const h3_op *op) { return op->code == H3_OP_SPARSE_ATTENTION; }
/* operands: q, kc, vc, then (sel,) pos, page table */
static const h3_tensor *pos_of(const h3_op *op, const h3_tensor *in) {
  return &in[is_sparse(op) ? 4 : 3];
}
static const h3_tensor *pt_of(const h3_op *op, const h3_tensor *in) {
  return &in[is_sparse(op) ? 5 : 4];
}

bool cu_m31_flash_fits(const cu_state *s, const h3_op *op, const h3_tensor *in,
                       const h3_tensor *out) {
  if (cu_env_form("H3_M31_ATTENTION", (const char *const[]){"flash", "tile", NULL}) == 1) return false;
  const h3_type *qt = &in[0].type, *ct = &in[1].type;
  if (qt->rank != 3 || ct->rank != 4) return false;
  const long long T = qt->dims[0], P = ct->dims[0], Hk = ct->dims[2];
  const long long topk = is_sparse(op) ? in[3].type.dims[in[3].type.rank - 1] : 1;
  const double scale = h3_op_attr_float(op, "scale", 1.0);
  const uintptr_t al = (uintptr_t)in[0].data | (uintptr_t)in[1].data | (uintptr_t)in[2].data;
  return qt->dtype == H3_BF16 && ct->dtype == H3_BF16 && in[2].type.dtype == H3_BF16 &&
         out[0].type.dtype == H3_BF16 && qt->dims[2] == 128 && ct->dims[3] == 128 &&
         ct->dims[1] == 128 && h3_op_attr_int(op, "page", 128) == 128 &&
         qt->dims[1] == 16 * Hk && pos_of(op, in)->type.dtype == H3_I32 &&
         pt_of(op, in)->type.dtype == H3_I32 && (!is_sparse(op) || in[3].type.dtype == H3_I32) &&
         topk >= 1 && topk <= FLASH_MAX_TOPK && scale > 0 && isfinite(scale) && T > 0 &&
         (T + FLASH_ROWS - 1) / FLASH_ROWS * Hk < INT32_MAX && P * 128 < INT32_MAX &&
         al % 16 == 0 && (uintptr_t)out[0].data % 4 == 0 &&
         s->smem_optin >= (size_t)(FLASH_SMEM + FLASH_STATIC_SMEM);
}

h3_status cu_m31_run_flash(cu_state *s, const h3_op *op, const h3_tensor *in,
                           const h3_tensor *out, h3_diag *d) {
  static const char *const name = "h3cu_m31_flash";
  cu_kernel *k;
  if (cu_m31_kernels_sm90a(s, op, "m31_flash.cu", NULL, 1, &name, &k, d) != H3_OK ||
      cu_m31_smem(s, op, k, FLASH_SMEM, d) != H3_OK)
    return H3_ERR;
  const h3_type *ct = &in[1].type;
  const long long P = ct->dims[0], Hk = ct->dims[2], T = in[0].type.dims[0];
  static const char *const who = "M3.1 flash attention";
  static const char *const fix = "run it with H3_M31_ATTENTION=tile";
  CUtensorMap tk, tv; /* the caches as [P * 128, Hk * 128] */
  if (cu_tile_map(&tk, in[1].data, Hk * 128, Hk * 128, P * 128, who, "the k cache", fix, d) !=
          H3_OK ||
      cu_tile_map(&tv, in[2].data, Hk * 128, Hk * 128, P * 128, who, "the v cache", fix, d) !=
          H3_OK)
    return H3_ERR;
  const void *q = in[0].data, *pos = pos_of(op, in)->data, *pt = pt_of(op, in)->data;
  const void *sel = is_sparse(op) ? in[3].data : NULL;
  void *o = out[0].data;
  int kind = is_sparse(op) ? 2 : 0, Ti = (int)T, Hki = (int)Hk;
  int topk = is_sparse(op) ? (int)in[3].type.dims[in[3].type.rank - 1] : 0;
  float c = (float)h3_op_attr_float(op, "scale", 1.0) * 1.4426950408889634f;
  void *args[] = {&tk, &tv, &q, &pos, &pt, &sel, &o, &kind, &Ti, &Hki, &topk, &c};
  int64_t grid[3] = {(T + FLASH_ROWS - 1) / FLASH_ROWS * Hk, 1, 1};
  int64_t block[3] = {FLASH_THREADS, 1, 1};
  return cu_launch(s, k, grid, block, FLASH_SMEM, args, d);
}
