/* cuda_m31_router_shape.h: the launch shape of router_topk's one-launch form
 * (H3_ROUTER_FUSED_NAME of kernels/m31_moe.cu, k <= ROUTER_KMAX; each constant equals that
 * file's H3M_RF_*), shared by the launcher (cuda_m31_moe.c) and its host emulation test. Blocks
 * of ROUTER_THREADS threads over `rows` rows, one K segment of ROUTER_SEG elements and 8 epw
 * experts; up to ROUTER_DECODE_ROWS rows the decode shape of h3cu_router_shape. Plain C, no
 * CUDA headers. */
#ifndef H3_CUDA_M31_ROUTER_SHAPE_H
#define H3_CUDA_M31_ROUTER_SHAPE_H

enum {
  ROUTER_THREADS = 256, ROUTER_ROWS = 16, ROUTER_EPW = 4, ROUTER_SEG = 1024, ROUTER_KMAX = 16,
  ROUTER_DECODE_ROWS = 64
};

/* The block shape for T rows. Up to ROUTER_DECODE_ROWS rows (decode, latency-bound): one
 * expert per warp, whose 4 chunks of weights a lane loads at once, and at most 4 rows per
 * block, so that many blocks read the router's weights together (T = 1: 24 blocks of 32 KiB at
 * E = 32, H = 6144; T = 64: 384 blocks). More rows (compute-bound): 4 experts per warp and
 * T / 16 rows per block, from 4 to ROUTER_ROWS (a lane's tile of rows x experts loads 2 (rows +
 * experts) 16-byte words per 8 rows x experts products; T = 2048: 768 blocks of 16 rows). */
static inline void h3cu_router_shape(long long T, int *rows, int *epw) {
  long long r = T / 16;
  *rows = T <= 4 ? (int)T : (T <= ROUTER_DECODE_ROWS || r < 4 ? 4 : (r > ROUTER_ROWS ? ROUTER_ROWS : (int)r));
  *epw = T <= ROUTER_DECODE_ROWS ? 1 : ROUTER_EPW;
}

#endif
