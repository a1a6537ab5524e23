/* cuda_skinny_gemm.h: the launch shape of the skinny linear (kernels/skinny_gemm.cu, launched
 * by cuda_skinny_gemm.c), plain C so that tests/m31's host emulation launches it the same way.
 * The shape depends on M, N, K alone (never on the device), so the fp32 sum order, hence y,
 * is a function of the inputs. */
#ifndef H3_CUDA_SKINNY_GEMM_H
#define H3_CUDA_SKINNY_GEMM_H

#include <stddef.h>
#include <stdint.h>

/* THREADS: the kernel file's H3S_THREADS; MAX_ROWS: the most rows of x it takes (its _m16
 * kernel); KG: the k of one warp-wide 16-byte load per lane, the unit of the K splits;
 * XSMEM: the most shared bytes of staged x per block (two blocks fit an SM); SLOTS: the
 * blocks wanted at once (the H200's 132 SMs x 2); MAX_SPLITS: the most K splits taken for
 * parallelism alone (more only where x's rows would not fit XSMEM) */
enum {
  CU_SKINNY_THREADS = 256, CU_SKINNY_MAX_ROWS = 16, CU_SKINNY_KG = 256, CU_SKINNY_XSMEM = 98304,
  CU_SKINNY_SLOTS = 264, CU_SKINNY_MAX_SPLITS = 16
};

/* grid (cols, splits); mr: the kernel's rows (H3_SKINNY_NAME_m<mr>); cpb: columns per block;
 * kr: k per split; smem: dynamic shared bytes */
typedef struct {
  int64_t cols, splits;
  int mr, cpb, kr;
  size_t smem;
} cu_skinny_shape;

/* The shape for x [M, K] against w [N, K] (0 < M <= 16, N > 0, K > 0 a multiple of 8): mr
 * the fewest of 1, 2, 4, 8, 16 rows that hold M; cpb 64 columns per block, halved (to 16)
 * while that gives fewer than SLOTS blocks; then K split into ranges of whole KG, as many as
 * make SLOTS blocks (at most MAX_SPLITS, at most one per KG), but at least as many as keep
 * M x kr bf16 of x within XSMEM. */
cu_skinny_shape cu_skinny_shape_of(int64_t M, int64_t N, int64_t K);

/* The device scratch of those splits: partials [splits, M, N] f32, then the column groups'
 * counters (u32, 0 from the allocation on); 0 bytes without splits. */
size_t cu_skinny_scratch_bytes(int64_t M, int64_t N, int64_t K);

/* The streaming form (H3_SKINNY_NAME_st, one row of x, K a multiple of 256): the blocks per SM
 * its grid asks for (all resident: it hands its units out grid-stride). */
enum { CU_SKINNY_STREAM_BLOCKS_PER_SM = 2 };
/* Its chunks of a row: K / 256 segments in chunks of 4, 2 or 1 (the most that divide them). */
int64_t cu_skinny_stream_chunks(int64_t K);
/* Its scratch: partials [chunks, N] f32, then the row pairs' tickets (u32 [ceil(N / 2)], 0
 * from the allocation on). */
size_t cu_skinny_stream_scratch_bytes(int64_t N, int64_t K);
/* Its grid: a block per 8 units (a unit: a row pair's chunk), at most sms x BLOCKS_PER_SM (the
 * sums do not depend on it). */
int64_t cu_skinny_stream_blocks(int64_t N, int64_t K, int sms);

/* The forms of a linear (cu_skinny_takes) and the one for x [M, K] against w [N, K] of bf16
 * types, `forced` H3_LINEAR_FORM's index (-1 unset, 0 skinny, 1 stream, 2 library):
 * CU_LINEAR_SKINNY with skinny for 1 to CU_SKINNY_MAX_ROWS rows, K a multiple of 8;
 * CU_LINEAR_STREAM with stream for one row, K a multiple of 256; else CU_LINEAR_LIBRARY
 * (cuBLASLt; unset, every linear: on the H200 cuBLASLt read the decode's one-row weights at
 * 0.80-1.07 x a plain read's rate and the lm_head at 0.97 x, the streaming form 0.70-0.98 x
 * and 0.95 x). */
enum { CU_LINEAR_LIBRARY = 0, CU_LINEAR_SKINNY = 1, CU_LINEAR_STREAM = 2 };
int cu_skinny_form_of(int64_t M, int64_t N, int64_t K, int forced);

/* The macro lines that instantiate kernels/skinny_gemm.cu for the compile check. */
#define CU_SKINNY_CHECK_DEFINES "#define H3_SKINNY_NAME h3cu_skinny_check\n#define O_T h3_bf16\n"

#endif
