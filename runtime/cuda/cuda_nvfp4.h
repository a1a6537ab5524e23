/* cuda_nvfp4.h: the launch shape of linear_nvfp4's kernel (kernels/nvfp4_gemm.cu, launched by
 * cuda_nvfp4.c), plain C so that tests/m31's host emulation launches it the same way. The
 * shape depends on M, N, K alone (never on the device), so the fp32 sum order, hence y, is a
 * function of the inputs. */
#ifndef H3_CUDA_NVFP4_H
#define H3_CUDA_NVFP4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* the kernel file's block constants (H3N_THREADS, H3N_COLS, H3N_KC, H3N_RS: 16-byte slots per
 * staged row of x); ROWS: the most rows of a block (its _m4 kernel); SLOTS: the
 * blocks that run at once on the H200 the shapes are tuned for (132 SMs x 2); MAX_SPLITS: the
 * most K splits (their partials are added by one block) */
enum {
  CU_NVFP4_THREADS = 256, CU_NVFP4_COLS = 128, CU_NVFP4_ROWS = 64, CU_NVFP4_KC = 256, CU_NVFP4_RS = 36,
  CU_NVFP4_SLOTS = 264, CU_NVFP4_MAX_SPLITS = 16
};

/* grid (cols, splits, mblocks); mt: the kernel's m-tiles (1, 2 or 4: H3_NVFP4_NAME_m<mt>);
 * cps: K chunks per split; smem: dynamic shared bytes */
typedef struct {
  int64_t cols, splits, mblocks;
  int mt, cps;
  size_t smem;
} cu_nvfp4_shape;

/* The shape for x [M, K] against a weight [N, K] (M, N > 0, K a multiple of 16): one block
 * per 128 columns and 16 mt rows (mt the fewest m-tiles of 1, 2, 4 that hold M, else 4); up
 * to 64 rows the K splits that minimise the modelled time (the waves of SLOTS blocks times
 * the chunks per split, plus the partials' traffic), above that none. */
cu_nvfp4_shape cu_nvfp4_shape_of(int64_t M, int64_t N, int64_t K);

/* The skinny form (kernels/nvfp4_gemm.cu's H3_NVFP4_NAME_sk) applies to x [M, K] with 1 to
 * CU_NVFP4_SK_ROWS rows, K a multiple of CU_NVFP4_KC and `aligned` (x and the codes 16-byte,
 * the scales 4-byte aligned); it runs there unless H3_NVFP4_FORM=tiled. Grid (ceil(N / 16),
 * 1, 1) of CU_NVFP4_SK_THREADS threads, no scratch. */
enum { CU_NVFP4_SK_THREADS = 128, CU_NVFP4_SK_ROWS = 8 };
bool cu_nvfp4_skinny_applies(int64_t M, int64_t K, bool aligned);

/* The row-pair form (kernels/nvfp4_gemm.cu's H3_NVFP4_NAME_sx for up to 8 rows, _sx16 for 9 to
 * 16: two 16-row weight tiles a warp sharing x's registers) applies to x [M, K] with
 * CU_NVFP4_SX_MIN to CU_NVFP4_SX_ROWS rows (below 5 the skinny form was as fast or faster on an
 * H100 at the draft's shapes: 0.86-1.05 x it at 2 and 4 rows, 1.06-1.30 x at 8), K a multiple
 * of CU_NVFP4_KC and `aligned`; it runs there up to 8 rows (from 9 the warpgroup form below)
 * and at every row count with H3_NVFP4_FORM=rows (tiled or skinny: the skinny form up to 8
 * rows, the tiled kernels above). Grid (ceil(N / CU_NVFP4_SX_COLS), splits) of
 * CU_NVFP4_SK_THREADS threads, no dynamic shared memory. splits: of 1 to 16 (and at most ceil(chunks / 4)), the fewest that
 * minimise the waves of CU_NVFP4_SX_SLOTS blocks (132 SMs x 3) times the turns a warp runs.
 * splits > 1: partials [splits, M, N] f32 at byte cu_nvfp4_rows_part(M, N, K) of the scratch
 * (past the tiled kernels' partials and counters, which another form switch may run on the same
 * scratch) and the column groups' counters (u32, 0 before a launch and after it) at byte
 * cu_nvfp4_rows_counters(M, N, K). */
enum { CU_NVFP4_SX_MIN = 5, CU_NVFP4_SX_ROWS = 16, CU_NVFP4_SX_COLS = 32, CU_NVFP4_SX_SLOTS = 396 };
bool cu_nvfp4_rows_applies(int64_t M, int64_t K, bool aligned);
int64_t cu_nvfp4_rows_cols(int64_t N); /* its column groups: ceil(N / CU_NVFP4_SX_COLS) */
int64_t cu_nvfp4_rows_splits(int64_t N, int64_t K);
size_t cu_nvfp4_rows_part(int64_t M, int64_t N, int64_t K);
size_t cu_nvfp4_rows_counters(int64_t M, int64_t N, int64_t K);

/* The warpgroup form (kernels/nvfp4_gemm.cu's H3_NVFP4_NAME_wg for up to 8 rows, _wg16 for 9 to
 * 16: the weights dequantized into wgmma's A registers, x staged once a block in shared memory
 * as its B; sm_90a) runs where the row-pair form applies from CU_NVFP4_WG_MIN rows on (below,
 * the row-pair form; H3_NVFP4_FORM=wg: the warpgroup form at 5-16 rows, rows: the row-pair
 * form there). Grid (ceil(N / CU_NVFP4_WG_COLS), splits) of CU_NVFP4_SK_THREADS threads,
 * cu_nvfp4_wg_smem(M) bytes of dynamic shared memory. splits: of 1 to 16, every split
 * non-empty, the fewest that minimise the waves of CU_NVFP4_SX_SLOTS blocks times the chunks a
 * split. Its partials and counters take the row-pair form's places (both
 * sized for the larger of the two forms' splits; its column groups are fewer). */
enum { CU_NVFP4_WG_COLS = 64, CU_NVFP4_WG_MIN = 9 };
int64_t cu_nvfp4_wg_cols(int64_t N); /* its column groups: ceil(N / CU_NVFP4_WG_COLS) */
int64_t cu_nvfp4_wg_splits(int64_t N, int64_t K);
size_t cu_nvfp4_wg_smem(int64_t M);

/* The dequantized form applies to x [M, K] with more than CU_NVFP4_DQ_ROWS rows, K a multiple
 * of CU_NVFP4_KC and `aligned` (x, the codes and y 16-byte, the scales 4-byte aligned; y bf16
 * or f32): the weight dequantized into scratch (kernels/nvfp4_gemm.cu's H3_NVFP4_NAME_dq),
 * then cuBLASLt's bf16 GEMM with alpha = g read from the device; it runs there unless
 * H3_NVFP4_FORM=tiled. */
enum { CU_NVFP4_DQ_ROWS = 64 };
bool cu_nvfp4_dequant_applies(int64_t M, int64_t K, bool aligned);
/* It dequantizes slabs of this many weight rows at a time through one buffer, a GEMM after
 * each: N split into the fewest slabs of at most CU_NVFP4_SLAB_BYTES of bf16 (at least 128
 * rows), as equal as multiples of 128 rows allow (the GEMMs' columns, hence their waves of
 * tiles, alike; the last slab at most N). */
#define CU_NVFP4_SLAB_BYTES (128ll << 20)
int64_t cu_nvfp4_slab_rows(int64_t N, int64_t K);

/* The device scratch, 0 from the allocation on: for the dequantized form's shapes, a slab of
 * w_b [slab rows, K] bf16, then the GEMMs' beta (one f32 0, read from the device); with K
 * splits (at most CU_NVFP4_ROWS rows), partials [splits, M, N] f32, then the column groups'
 * counters (u32); where the row-pair form applies with splits, its partials and counters after
 * those (so that neither form's partials land on the other's counters); else 0 bytes. */
size_t cu_nvfp4_scratch_bytes(int64_t M, int64_t N, int64_t K);

#endif
