// m31_moe_gemm.cu: steps 1 and 2 of MiniMax-M3.1's moe (kernels/m31_moe.cu states the op and
// its scratch) as tiled grouped GEMMs on tensor cores, for many rows per expert (prefill). bf16
// h and weights; H and F multiples of 128. They read the route kernel's scratch (counts[E],
// lists[e * T ..] of t * 16 + slot) and write the same act [T * k, F] and y [T * k, H] (bf16)
// with the same roundings as H3_MOE_MMA_NAME / H3_MOE_MMA_DOWN_NAME:
//   H3_MOE_GEMM_NAME (h[T, H], gate_up[E, 2F, H], lists, counts) -> act {k, E, alpha, limit}:
//     act[t * k + s, o] = bf16(swigluoai(bf16(h_t · gate_e[o]), bf16(h_t · up_e[o]))).
//     Grid (slots, F / 64): a tile of 128 rows of expert e × the 64 gate outputs o0 = 64 *
//     blockIdx.y .. and their 64 up outputs (B rows 0..63 gate, 64..127 up).
//   H3_MOE_GEMM_DOWN_NAME (down[E, H, F], lists, counts, act) -> y {k, E}:
//     y[t * k + s, o] = bf16(act[t * k + s] · down_e[o]). Grid (slots, H / 128): 128 rows ×
//     outputs o0 = 128 * blockIdx.y .. + 127 (B row r is output o0 + r).
// Scheduling: blockIdx.x is a slot of the experts' m-tiles, expert-major (expert e has
// ceil(counts[e] / 128) of them: h3_moe_tile); a block past the last exits. slots >= sum of
// those (the launcher's bound: min(ceil(T * k / 128) + E, E * ceil(T / 128))). Blocks run x
// fastest, so the m-tiles of one expert that share a weight tile run together (one read from
// memory).
// Rows past the expert's count are zeros and are not written.
// Block: 256 threads, 8 warps as 2 (rows: 64 each) × 4 (B rows: n-tiles j = 0..3 of warp wn
// at B rows (j / 2) * 64 + 16 wn + 8 (j % 2), so a thread holds gate j and up j + 2 of the
// same outputs). mma.sync m16n8k16, fp32 accumulators (64 per thread). Two blocks per SM
// (__launch_bounds__: at most 128 registers; 2 × 96 KiB of shared memory).
// Dynamic shared memory H3G_SMEM bytes: H3G_STAGES stages of A [128][64] then B [128][64] bf16
// (K step 64, a 128-byte row per tile row; its 16-byte chunk c stored at chunk c ^ (row & 7),
// so the 8 rows of an ldmatrix phase and the 8 threads of a cp.async row hit distinct banks),
// filled by cp.async H3G_STAGES - 1 k-steps ahead of the mma.
// Every loop holding an ldmatrix, an mma or a barrier runs the same number of times in every
// thread of a block (tests run these kernels under tests/codegen/host_emu.h).
// Macros the user defines in front: the name of each kernel it wants.

#define H3G_BM 128 // rows per tile
#define H3G_BN 128 // B rows (outputs) per tile
#define H3G_BK 64  // k per stage
#define H3G_STAGES 3
#define H3G_THREADS 256
#define H3G_STAGE_ELEMS ((H3G_BM + H3G_BN) * H3G_BK)
#define H3G_SMEM (H3G_STAGES * H3G_STAGE_ELEMS * 2)

// One stage: this thread's 16-byte chunk (tid % 8) of tile rows tid / 8 + 32 i of A (xa[i],
// skipped where null: those rows were zeroed) and of B (wb[i]), at k0.
H3_DI void h3g_load(h3_bf16 *st, const h3_bf16 *const *xa, const h3_bf16 *const *wb, long long k0,
                    int at) {
#pragma unroll
  for (int i = 0; i < 4; i++) {
    if (xa[i]) h3_cp16(reinterpret_cast<uint4 *>(st + at + 32 * i * H3G_BK), xa[i] + k0);
    h3_cp16(reinterpret_cast<uint4 *>(st + H3G_BM * H3G_BK + at + 32 * i * H3G_BK), wb[i] + k0);
  }
}

// acc[mi][j] += A · B^T over K (a multiple of 64) for this warp's 4 m16 tiles (rows 64 wm + 16
// mi ..) and 4 n8 tiles j; xa[i], wb[i]: this thread's loads (h3g_load) at k = 0.
H3_DI void h3g_mainloop(const h3_bf16 *const *xa, const h3_bf16 *const *wb, long long K, h3_bf16 *smem,
                        float acc[4][4][4]) {
  const int tid = threadIdx.x, lane = tid & 31, wm = tid >> 7, wn = (tid >> 5) & 3;
  const int lr = tid >> 3, at = lr * H3G_BK + (((tid & 7) ^ (lr & 7)) * 8);
  const int nk = (int)(K / H3G_BK);
#pragma unroll
  for (int mi = 0; mi < 4; mi++)
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
      for (int q = 0; q < 4; q++) acc[mi][j][q] = 0.0f;
  const uint4 z = {0u, 0u, 0u, 0u};
  for (int s = 0; s < H3G_STAGES; s++)
#pragma unroll
    for (int i = 0; i < 4; i++)
      if (!xa[i]) *reinterpret_cast<uint4 *>(smem + s * H3G_STAGE_ELEMS + at + 32 * i * H3G_BK) = z;
#pragma unroll
  for (int s = 0; s < H3G_STAGES - 1; s++) {
    if (s < nk) h3g_load(smem + s * H3G_STAGE_ELEMS, xa, wb, (long long)s * H3G_BK, at);
    h3_cp_commit();
  }
  // ldmatrix rows of this lane: A (matrices rows 0-7 / 8-15 × k 0-7 / 8-15 of an m16 tile),
  // B (rows 0-7 / 8-15 of an n-tile pair × k 0-7 / 8-15)
  const int ar = 64 * wm + (lane & 15), ac = lane >> 4;
  const int br = 16 * wn + (lane & 7) + ((lane >> 4) << 3), bc = (lane >> 3) & 1;
  for (int kt = 0; kt < nk; kt++) {
    h3_cp_wait_pending<H3G_STAGES - 2>();
    __syncthreads(); // stage kt is in; every warp is done with the stage loaded next
    const int nx = kt + H3G_STAGES - 1;
    if (nx < nk) h3g_load(smem + (nx % H3G_STAGES) * H3G_STAGE_ELEMS, xa, wb, (long long)nx * H3G_BK, at);
    h3_cp_commit();
    const h3_bf16 *sa = smem + (kt % H3G_STAGES) * H3G_STAGE_ELEMS, *sb = sa + H3G_BM * H3G_BK;
#pragma unroll
    for (int kk = 0; kk < H3G_BK / 16; kk++) {
      unsigned b[4][2];
#pragma unroll
      for (int jp = 0; jp < 2; jp++) {
        const int r = 64 * jp + br, c = 2 * kk + bc;
        unsigned f[4];
        h3_ldsm4(f, sb + r * H3G_BK + ((c ^ (r & 7)) * 8));
        b[2 * jp][0] = f[0], b[2 * jp][1] = f[1], b[2 * jp + 1][0] = f[2], b[2 * jp + 1][1] = f[3];
      }
#pragma unroll
      for (int mi = 0; mi < 4; mi++) {
        const int r = ar + 16 * mi, c = 2 * kk + ac;
        unsigned a[4];
        h3_ldsm4(a, sa + r * H3G_BK + ((c ^ (r & 7)) * 8));
#pragma unroll
        for (int j = 0; j < 4; j++) h3_mma_bf16(acc[mi][j], a, b[j]);
      }
    }
  }
}

// This block's tile (returns when its slot has none): rows of its expert e from m0 of the
// list (n in all) and acc of this thread, the products of A rows xs + xrow_of(list entry) * K
// and B rows ws + wrow_of(r) * K (r: the tile's B row).
#define H3G_TILE(xs, K, xrow_of, ws, wrow_of)                                              \
  H3_DYN_SMEM(h3_bf16, smem);                                                               \
  int e, m0;                                                                                \
  if (!h3_moe_tile(counts, E, blockIdx.x, H3G_BM, &e, &m0)) return;                        \
  const int *rows = lists + (long long)e * T, n = counts[e];                                \
  const h3_bf16 *xa[4], *wb[4]; /* this thread's loads: tile rows tid / 8 + 32 i */         \
  for (int i = 0; i < 4; i++) {                                                             \
    const int r = (threadIdx.x >> 3) + 32 * i, c8 = (threadIdx.x & 7) * 8;                  \
    xa[i] = m0 + r < n ? xs + xrow_of(rows[m0 + r]) * K + c8 : nullptr;                     \
    wb[i] = ws + (wrow_of(r)) * K + c8;                                                     \
  }                                                                                         \
  float acc[4][4][4];                                                                       \
  h3g_mainloop(xa, wb, K, smem, acc);

#define H3G_H_ROW(ts) ((long long)(ts) / 16)
#define H3G_ACT_ROW(ts) h3_moe_row(ts, k)

// Where this thread's accumulator row g + 8 half of m16 tile mi goes: row t * k + s (list
// entry t * 16 + s) of out [T * k, ld], at column o0 + 16 wn + 2t (its first n-tile's); null
// past the expert's count.
H3_DI h3_bf16 *h3g_out(h3_bf16 *out, long long ld, const int *rows, int m0, int n, int k, long long o0,
                       int mi, int half) {
  const int lane = threadIdx.x & 31, wm = threadIdx.x >> 7, wn = (threadIdx.x >> 5) & 3;
  const int r = m0 + 64 * wm + 16 * mi + lane / 4 + 8 * half;
  return r < n ? out + H3G_ACT_ROW(rows[r]) * ld + o0 + 16 * wn + 2 * (lane & 3) : nullptr;
}

#ifdef H3_MOE_GEMM_NAME
#define H3G_GU_ROW(r) ((long long)e * 2 * F + ((r) < 64 ? o0 + (r) : F + o0 + (r) - 64))
extern "C" __global__ void __launch_bounds__(H3G_THREADS, 2)
    H3_MOE_GEMM_NAME(H3_MOE_GEMM_PARAMS) {
  const long long o0 = (long long)blockIdx.y * 64;
  H3G_TILE(h, H, H3G_H_ROW, gu, H3G_GU_ROW)
#pragma unroll
  for (int mi = 0; mi < 4; mi++)
#pragma unroll
    for (int half = 0; half < 2; half++) {
      h3_bf16 *ar = h3g_out(act, F, rows, m0, n, k, o0, mi, half);
      if (!ar) continue;
#pragma unroll
      for (int j = 0; j < 2; j++) { // gate n-tile j, up n-tile j + 2: outputs 8 j + 2t, + 1
        const float *g = acc[mi][j] + 2 * half, *u = acc[mi][j + 2] + 2 * half;
        h3_moe_act2(ar + 8 * j, g[0], g[1], u[0], u[1], alpha, limit);
      }
    }
}
#undef H3G_GU_ROW
#endif

#ifdef H3_MOE_GEMM_DOWN_NAME
#define H3G_DOWN_ROW(r) ((long long)e * H + o0 + (r))
extern "C" __global__ void __launch_bounds__(H3G_THREADS, 2)
    H3_MOE_GEMM_DOWN_NAME(H3_MOE_GEMM_DOWN_PARAMS) {
  const long long o0 = (long long)blockIdx.y * H3G_BN;
  H3G_TILE(act, F, H3G_ACT_ROW, down, H3G_DOWN_ROW)
#pragma unroll
  for (int mi = 0; mi < 4; mi++)
#pragma unroll
    for (int half = 0; half < 2; half++) {
      h3_bf16 *yr = h3g_out(y, H, rows, m0, n, k, o0, mi, half);
      if (!yr) continue;
#pragma unroll
      for (int j = 0; j < 4; j++)
        h3_st2(yr + 64 * (j / 2) + 8 * (j % 2), acc[mi][j][2 * half], acc[mi][j][2 * half + 1]);
    }
}
#undef H3G_DOWN_ROW
#endif
