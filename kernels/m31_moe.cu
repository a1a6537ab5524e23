// m31_moe.cu: MiniMax-M3.1's routing, mixture-of-experts and DSpark Markov head, the
// contracts of ops.def and of the CPU reference (runtime/cpu/ops_moe.c) with the same
// roundings (bf16 where the reference rounds, fp32 sums in another order than the
// reference's ascending one, covered by the tests' tolerance).
//   router_topk(h[T, H] H_T, w[E, H] W_T, bias[E] B_T) -> ids[T, k] I_T, wts[T, k] O_T
//     {k, scale}, E <= 256. The selection is the reference's: k rounds of the largest s + bias
//     (ties and NaNs as its scan: lower id first), the chosen ids ascending with weights
//     s / sum(s) * scale (sum in ascending id order).
//     k <= H3M_RF_KMAX: H3_ROUTER_FUSED_NAME, one launch, grid (ceil(T / rows), S, ceil(E /
//       (8 epw))), H3M_RF_THREADS threads, rows * H3M_RF_SEG floats of dynamic shared memory
//       (rows <= H3M_RF_ROWS, epw <= H3M_RF_EPW: the launcher's choice). Block (x, g, z) takes
//       rows x rows .. of K segment g (H3M_RF_SEG elements; S = ceil(H / H3M_RF_SEG)); warp w
//       its experts (8 z + w) epw ..; it writes the segment's partial logits into part[S, T, E]
//       f32. The last block of each row group (counter cnt[x]) adds them in segment order,
//       takes sigmoid and selects its rows (a warp per row).
//       cnt: u32 [gridDim.x], 0 before the launch and again after it. The logit of (t, e)
//       has one sum order whatever the launch shape (a row's bits do not depend on the batch):
//       sigma_0 + sigma_1 + ... over the segments, sigma_g the butterfly of h3m_warp_sum (lanes
//       xor 16, 8, 4, 2, 1) over 32 lane sums, lane j's over the elements g H3M_RF_SEG +
//       256 c + 8 j + q (c < 4, q < 8, below H) ascending, each product rounded, then added.
//     k > H3M_RF_KMAX (no moe takes so many): two launches through an f32 scratch of scores
//     s[T, E]:
//     1. H3_ROUTER_SCORE_NAME, grid (ceil(T / H3M_ROUTER_ROWS), E), H3M_ROUTER_THREADS
//        threads: s[t, e] = sigmoid(h_t · w_e) for the block's H3M_ROUTER_ROWS rows;
//     2. H3_ROUTER_NAME, grid (T), 32 threads: the selection from s and the bias.
//   moe(h[T, H] H_T, gate_up[E, 2F, H] W_T, down[E, H, F] W_T, ids[T, k] I_T, wts[T, k] B_T)
//     -> out[T, H] O_T {alpha, limit} in three launches, expert-major so that each expert's
//     weights are read once per pass over its rows and an expert no row chose is not read:
//     1. act[t * k + s] = bf16(swigluoai(bf16(h_t · gate_e), bf16(h_t · up_e))) for the rows
//        t whose slot s chose e (its first such slot);
//     2. y[t * k + s] = bf16(act[t * k + s] · down_e);
//     3. H3_MOE_COMBINE_NAME, grid (T, any; the launcher: ceil(H / 2048)), 256 threads, 8
//        outputs per thread: out[t] = sum over the chosen experts in ascending id order (each id
//        once) of w * y (fp32, from 0).
//     act [T * k, F] and y [T * k, H] are bf16 scratch (their values are bf16 by the
//     contract). H3_MOE_ROUTE_NAME, grid (E), 256 threads, first lists each expert's rows once
//     (int scratch counts [E], lists [E, T]); steps 1 and 2 then
//     read those lists, as
//       H3_MOE_MMA_NAME, H3_MOE_MMA_DOWN_NAME: tensor cores (bf16 h and weights, H and F
//         multiples of 128), a block of H3M_MMA_THREADS per 16 (32) outputs whose warps
//         split K, 16 rows per pass (at T == 1 without lists: a block per slot and no route
//         launch, h3m_mma_rows_of); or
//       H3_MOE_NAME, H3_MOE_DOWN_NAME: any types and widths, CUDA cores, a warp per 2
//         outputs and H3M_ROWS rows per pass, shuffle-tree sums (`vec`: rows of 8-element
//         multiples, vector loads).
//   markov_draft(base[S G, V] B_T, w1[V, r] W_T, w2[V, r] W_T, prev[S] I_T) -> z[S G, V] O_T,
//     draft[S G] I_T in 2 G + 1 launches through an f32 scratch (e [S, r], then the block
//     bests part_v [S, nblk] f32 and part_i [S, nblk] int, nblk = ceil(V / 256): the step's
//     grid), the G steps of every chain in lock step: H3_MARKOV_PICK_NAME (kk = 0: e from
//     prev) then, for kk = 0 .. G - 1, H3_MARKOV_STEP_NAME (kk: z rows and block bests over all
//     of V, w2 streamed once a pass of 8 sequences; or H3_MARKOV_MMA_NAME, the same on tensor
//     cores, once a pass of 64, not bitwise) and H3_MARKOV_PICK_NAME (kk + 1: draft[kk], e for
//     step kk + 1).
// Every loop that holds a shuffle, an mma or a barrier runs the same number of times in every
// thread of a block (tests run these kernels on the host under tests/codegen/host_emu.h,
// where those are block-wide barriers and the blocks of a launch run one at a time).
// Macros the user defines in front: H_T, W_T, B_T, I_T, O_T and the name of each kernel it
// wants (one pair of steps 1 and 2 with the combine); a kernel whose name is not defined is
// not compiled.

#define H3M_ROWS 8            // rows of one expert per pass over its weight rows
#define H3M_OUT_PER_BLOCK 16  // output rows per block of the expert GEMVs (2 per warp)
#define H3M_ROUTER_THREADS 128
#define H3M_ROUTER_ROWS 8     // rows of h per router score block
#define H3M_MMA_WARPS 4       // warps of a tensor-core moe block, each a quarter of K
#define H3M_MMA_THREADS (32 * H3M_MMA_WARPS)

__device__ __forceinline__ float h3m_warp_sum(float v) {
#pragma unroll
  for (int s = 16; s > 0; s >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, s));
  return v;
}

// row[i .. i + 7] widened, zeros from index n on
template <typename T>
__device__ __forceinline__ void h3m_ld8z(const T *row, long long i, long long n, float *f) {
  if (i + 8 <= n) {
    h3_ld8(row, i, f);
    return;
  }
#pragma unroll
  for (int q = 0; q < 8; q++) f[q] = i + q < n ? (float)h3_ld(row, i + q) : 0.0f;
}

// 4 floats of shared memory at p (16-byte aligned) in one access
__device__ __forceinline__ void h3m_lds4(const float *p, float *f) {
#ifdef __CUDA_ARCH__
  const float4 v = *reinterpret_cast<const float4 *>(p);
  f[0] = v.x, f[1] = v.y, f[2] = v.z, f[3] = v.w;
#else
  for (int q = 0; q < 4; q++) f[q] = p[q];
#endif
}
__device__ __forceinline__ void h3m_sts4(float *p, const float *f) {
#ifdef __CUDA_ARCH__
  *reinterpret_cast<float4 *>(p) = make_float4(f[0], f[1], f[2], f[3]);
#else
  for (int q = 0; q < 4; q++) p[q] = f[q];
#endif
}

#ifdef H3_ROUTER_FUSED_NAME
#define H3M_RF_THREADS 256      // 8 warps
#define H3M_RF_ROWS 16          // most rows per block (a lane's tile: rows x experts)
#define H3M_RF_EPW 4            // most experts per warp
#define H3M_RF_SEG 1024         // elements of a K segment: 4 chunks of 32 lanes x 8
#define H3M_RF_KMAX 16          // most experts per row

// The sums over the warp's lanes of its 64 values v (lane tile entries), as h3m_warp_sum adds
// each (the same pairs: lanes xor 16, 8, 4, 2, 1), by halving: at each step a lane keeps half
// of its values and adds its partner's of that half. Afterwards v[0], v[1] of lane l are the
// sums of entries 2 l and 2 l + 1.
template <int N> __device__ __forceinline__ void h3m_rf_halve_step(float *v) {
  const int off = N / 4; // 64 values: lanes xor 16; 32: 8; ... 4: 1
  const bool up = (threadIdx.x & off) != 0;
#pragma unroll
  for (int i = 0; i < N / 2; i++) {
    const float send = up ? v[i] : v[i + N / 2], keep = up ? v[i + N / 2] : v[i];
    v[i] = __fadd_rn(keep, __shfl_xor_sync(0xffffffffu, send, off));
  }
}
__device__ __forceinline__ void h3m_rf_halve(float *v) {
  h3m_rf_halve_step<64>(v);
  h3m_rf_halve_step<32>(v);
  h3m_rf_halve_step<16>(v);
  h3m_rf_halve_step<8>(v);
  h3m_rf_halve_step<4>(v);
}

// The position of the lowest set bit of v, 1-based (0 for v == 0)
__device__ __forceinline__ int h3m_ffs(unsigned v) {
#ifdef __CUDA_ARCH__
  return __ffs((int)v);
#else
  return __builtin_ffs((int)v);
#endif
}

// One row's experts as the reference selects them, by a warp (every lane calls it; the
// selection is written where live): s[E] the scores, v[E] = s + bias in shared memory, lane l
// holding experts l + 32 i and a bit per chosen one (tk, bit i). Round r takes the reference's
// scan result: the lowest unchosen id fu when v[fu] is NaN (no value is larger than a NaN
// there), else the largest non-NaN v of the unchosen, the lowest id among equals (a butterfly
// over the lanes' bests); fu is then the lowest unchosen id again (a butterfly minimum). Writes
// ids[0..k-1] ascending and wts[0..k-1] = s / sum * scale, the sum in ascending id order (k <=
// H3M_RF_KMAX). The rounds are
// one rolled loop and the winners a bit per lane, not an unrolled array: this runs in the one
// block that finishes after the others (h3_last_block), alone on the step's critical path,
// with its code cold (ncu at a batch-1 decode: half of the router's stalls wait for
// instructions; 13000 instructions of code before this form, 6264 with it).
__device__ void h3m_rf_select(const float *s, const float *v, int E, int k, float scale, bool live,
                              I_T *ids, O_T *wts) {
  const int lane = threadIdx.x & 31;
  float vv[8]; // E <= 256
#pragma unroll
  for (int i = 0; i < 8; i++) vv[i] = live && lane + 32 * i < E ? v[lane + 32 * i] : 0.0f;
  unsigned tk = 0u; // bit i: expert lane + 32 i chosen
  int fu = 0;       // the lowest unchosen id
#pragma unroll 1
  for (int r = 0; r < k; r++) {
    float bv = 0.0f;
    int bi = -1;
#pragma unroll
    for (int i = 0; i < 8; i++) {
      const int e = lane + 32 * i;
      const bool taken = e >= E || vv[i] != vv[i] || (tk >> i & 1u);
      if (!taken && (bi < 0 || vv[i] > bv)) bi = e, bv = vv[i];
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, off);
      if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi))) bv = ov, bi = oi;
    }
    int fnan = 0; // v[fu] is NaN (its lane's word)
#pragma unroll
    for (int i = 0; i < 8; i++) fnan |= fu >> 5 == i && vv[i] != vv[i];
    fnan = __shfl_sync(0xffffffffu, fnan, fu & 31);
    const int w = fnan || bi < 0 ? fu : bi;
    if (lane == (w & 31)) tk |= 1u << (w >> 5);
    const unsigned free8 = ~tk & 0xffu; // this lane's unchosen slots
    int low = free8 ? lane + 32 * (h3m_ffs(free8) - 1) : 256 + lane;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const int o = __shfl_xor_sync(0xffffffffu, low, off);
      low = o < low ? o : low;
    }
    fu = low;
  }
  float sum = 0.0f, mine = 0.0f; // lane r: the r-th id ascending and its score
  int myid = 0, r = 0;
  unsigned m[8];
#pragma unroll
  for (int i = 0; i < 8; i++) { // ids 32 i .. 32 i + 31 ascending: slot i of lanes 0 .. 31
    m[i] = __ballot_sync(0xffffffffu, tk >> i & 1u);
    for (unsigned b = m[i]; b; b &= b - 1u, r++) {
      const int e = 32 * i + h3m_ffs(b) - 1;
      const float se = live ? s[e] : 0.0f;
      sum = __fadd_rn(sum, se);
      if (lane == r) mine = se, myid = e;
    }
  }
  if (live && lane < k) {
    ids[lane] = (I_T)myid;
    h3_st(wts, lane, __fmul_rn(__fdiv_rn(mine, sum), scale));
  }
}

// Weights w[e, i .. i + 7] widened (zeros from H on), or zeros when !live
__device__ __forceinline__ void h3m_rf_ldw(const W_T *w, int e, bool live, long long i, long long H,
                                           float *f) {
  if (live) {
    h3m_ld8z(w + e * H, i, H, f);
    return;
  }
#pragma unroll
  for (int q = 0; q < 8; q++) f[q] = 0.0f;
}

// The warp's tile of the block's rows r < nr and experts e0 + e, e < ne <= EPW, over K segment
// k0 (nc chunks of 256): acc[r * H3M_RF_EPW + e] (the caller zeroed acc; entries of dead
// experts stay zeros, of dead rows untouched).
// Stages the rows into hs first (a barrier: every thread of the block calls it with the same
// EPW). The weights of the first CH chunks are loaded before the staging, so that both are in
// flight at once: EPW = 1 (few rows, latency-bound) all 4 chunks, EPW = H3M_RF_EPW (many rows:
// other blocks hide the latency) one chunk at a time. h is read after h3_pdl_wait, the
// weights before it: the kernel may be launched programmatically after the one writing h.
template <int EPW>
__device__ __forceinline__ void h3m_rf_tile(const H_T *h, const W_T *w, float *hs, long long t0, int nr,
                                            long long k0, int nc, long long H, int e0, int ne, float *acc) {
  constexpr int CH = EPW == 1 ? 4 : 1;
  const int lane = threadIdx.x & 31;
  float wv[CH][EPW][8];
#pragma unroll
  for (int cc = 0; cc < CH; cc++)
#pragma unroll
    for (int e = 0; e < EPW; e++)
      h3m_rf_ldw(w, e0 + e, e < ne && cc < nc, k0 + 256 * cc + 8 * lane, H, wv[cc][e]);
  h3_pdl_wait();
  for (int it = threadIdx.x; it < nr * 128; it += H3M_RF_THREADS) { // 8 elements each
    const int r = it >> 7, m = it & 127;
    float x[8];
    h3m_ld8z(h + (t0 + r) * H, k0 + 8 * m, H, x);
    float *d = hs + r * H3M_RF_SEG + (m >> 5) * 256 + (m & 31) * 4;
    h3m_sts4(d, x);
    h3m_sts4(d + 128, x + 4);
  }
  __syncthreads();
  for (int c0 = 0; c0 < nc; c0 += CH) {
    if (c0 > 0)
#pragma unroll
      for (int cc = 0; cc < CH; cc++)
#pragma unroll
        for (int e = 0; e < EPW; e++)
          h3m_rf_ldw(w, e0 + e, e < ne && c0 + cc < nc, k0 + 256 * (c0 + cc) + 8 * lane, H, wv[cc][e]);
#pragma unroll
    for (int cc = 0; cc < CH; cc++) {
      if (c0 + cc >= nc) break;
      const float *hc = hs + (c0 + cc) * 256 + lane * 4;
#pragma unroll
      for (int r = 0; r < H3M_RF_ROWS; r++) {
        if (r >= nr) break;
        float x[8];
        h3m_lds4(hc + r * H3M_RF_SEG, x);
        h3m_lds4(hc + r * H3M_RF_SEG + 128, x + 4);
#pragma unroll
        for (int e = 0; e < EPW; e++) // e >= ne: zeros, never stored
#pragma unroll
          for (int q = 0; q < 8; q++)
            acc[r * H3M_RF_EPW + e] = __fadd_rn(acc[r * H3M_RF_EPW + e], __fmul_rn(x[q], wv[cc][e][q]));
      }
    }
  }
}

// The header's H3_ROUTER_FUSED_NAME. A lane's tile: acc[r][e] for the block's rows r < nr and
// the warp's experts e < ne; the block's rows of the segment sit in shared memory as fp32, each
// 256-element chunk permuted so that lane j reads its 8 elements as two 16-byte words at 16 j
// and 512 + 16 j (no bank conflicts); the last block reuses that memory for the scores. h is
// not __restrict__: the wait in h3m_rf_tile must order its loads (h3_pdl_wait).
extern "C" __global__ void __launch_bounds__(H3M_RF_THREADS, 2) H3_ROUTER_FUSED_NAME(
    const H_T *h, const W_T *__restrict__ w, const B_T *__restrict__ bias,
    float *__restrict__ part, unsigned *__restrict__ cnt, I_T *__restrict__ ids, O_T *__restrict__ wts,
    long long T, long long H, int E, int k,
    float scale, int rows, int epw) {
  H3_DYN_SMEM(float, hs); // [rows][H3M_RF_SEG]; the last block: scores [nr][E], s + bias [nr][E]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long t0 = (long long)blockIdx.x * rows, k0 = (long long)blockIdx.y * H3M_RF_SEG;
  const int nr = T - t0 < rows ? (int)(T - t0) : rows;
  const int e0 = ((int)blockIdx.z * 8 + warp) * epw;
  const int ne = E - e0 < 0 ? 0 : (E - e0 < epw ? E - e0 : epw);
  float acc[H3M_RF_ROWS * H3M_RF_EPW]; // [r][e]
#pragma unroll
  for (int i = 0; i < H3M_RF_ROWS * H3M_RF_EPW; i++) acc[i] = 0.0f;
  const long long left = (H - k0 + 255) / 256;
  const int nc = left < 4 ? (int)left : 4; // the segment's chunks
  if (epw == 1) h3m_rf_tile<1>(h, w, hs, t0, nr, k0, nc, H, e0, ne, acc);
  else h3m_rf_tile<H3M_RF_EPW>(h, w, hs, t0, nr, k0, nc, H, e0, ne, acc);
  if (rows == 1 && epw == 1) { // one entry (a decode row): h3m_rf_halve's pairs for it, alone
    const float v = h3m_warp_sum(acc[0]);
    if (lane == 0 && nr > 0 && ne > 0) part[((long long)blockIdx.y * T + t0) * E + e0] = v;
  } else {
    h3m_rf_halve(acc);
#pragma unroll
    for (int i = 0; i < 2; i++) {
      const int r = (2 * lane + i) / H3M_RF_EPW, e = (2 * lane + i) % H3M_RF_EPW;
      if (r < nr && e < ne) part[((long long)blockIdx.y * T + t0 + r) * E + e0 + e] = acc[i];
    }
  }
  // the bias of this thread's first cell, read before the ticket: one round trip less in the
  // last block's chain (which runs beside the shared expert's weight stream)
  const int me = (int)threadIdx.x;
  const float bias0 = me < nr * E ? (float)h3_ld(bias, me % E) : 0.0f;
  if (!h3_last_block(cnt + blockIdx.x, gridDim.y * gridDim.z)) return;
  // the row group's logits (segments in order: the partials read 8 at a time, then added),
  // scores and selection
  const long long S = gridDim.y;
  float *sc = hs, *sv = hs + nr * E;
  for (int cell = me; cell < nr * E; cell += H3M_RF_THREADS) {
    const float *p = part + t0 * E + cell;
    float x = 0.0f;
    for (long long g0 = 0; g0 < S; g0 += 8) {
      float y[8];
#pragma unroll
      for (int i = 0; i < 8; i++) y[i] = g0 + i < S ? h3_ldcg(p + (g0 + i) * T * E) : 0.0f;
#pragma unroll
      for (int i = 0; i < 8; i++)
        if (g0 + i < S) x = g0 + i == 0 ? y[i] : __fadd_rn(x, y[i]);
    }
    sc[cell] = h3_sigmoid(x);
    sv[cell] = __fadd_rn(sc[cell], cell == me ? bias0 : (float)h3_ld(bias, cell % E));
  }
  __syncthreads();
  for (int p = 0; p < (nr + 7) / 8; p++) { // warp w: rows w, w + 8, ... (past nr: row 0, unwritten)
    const int r = 8 * p + warp < nr ? 8 * p + warp : 0;
    h3m_rf_select(sc + r * E, sv + r * E, E, k, scale, 8 * p + warp < nr, ids + (t0 + r) * k,
                  wts + (t0 + r) * k);
  }
}
#endif

#ifdef H3_ROUTER_SCORE_NAME
extern "C" __global__ void __launch_bounds__(H3M_ROUTER_THREADS) H3_ROUTER_SCORE_NAME(
    const H_T *__restrict__ h, const W_T *__restrict__ w, float *__restrict__ s, long long T,
    long long H, int E) {
  __shared__ float part[H3M_ROUTER_THREADS / 32][H3M_ROUTER_ROWS];
  const long long t0 = (long long)blockIdx.x * H3M_ROUTER_ROWS, e = blockIdx.y;
  const int nr = T - t0 < H3M_ROUTER_ROWS ? (int)(T - t0) : H3M_ROUTER_ROWS;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const W_T *we = w + e * H;
  float acc[H3M_ROUTER_ROWS];
#pragma unroll
  for (int r = 0; r < H3M_ROUTER_ROWS; r++) acc[r] = 0.0f;
  if (H % 8 == 0) { // 8 consecutive elements per thread and step (vector loads when aligned);
    // unrolled so that the steps' loads are in flight together (H = 6144: 6 steps)
#pragma unroll 6
    for (long long i = 8ll * threadIdx.x; i < H; i += 8ll * H3M_ROUTER_THREADS) {
      float wv[8];
      h3_ld8(we, i, wv);
#pragma unroll
      for (int r = 0; r < H3M_ROUTER_ROWS; r++) {
        if (r >= nr) break;
        float hv[8];
        h3_ld8(h, (t0 + r) * H + i, hv);
#pragma unroll
        for (int q = 0; q < 8; q++) acc[r] = __fadd_rn(acc[r], __fmul_rn(hv[q], wv[q]));
      }
    }
  } else {
    for (long long i = threadIdx.x; i < H; i += H3M_ROUTER_THREADS) {
      const float wv = (float)h3_ld(we, i);
      for (int r = 0; r < nr; r++) acc[r] = __fadd_rn(acc[r], __fmul_rn((float)h3_ld(h, (t0 + r) * H + i), wv));
    }
  }
#pragma unroll
  for (int r = 0; r < H3M_ROUTER_ROWS; r++) {
    const float v = h3m_warp_sum(acc[r]);
    if (lane == 0) part[warp][r] = v;
  }
  __syncthreads();
  if ((int)threadIdx.x < nr) {
    float v = 0.0f;
    for (int q = 0; q < H3M_ROUTER_THREADS / 32; q++) v = __fadd_rn(v, part[q][threadIdx.x]);
    s[(t0 + threadIdx.x) * E + e] = h3_sigmoid(v);
  }
}
#endif

#ifdef H3_ROUTER_NAME
extern "C" __global__ void __launch_bounds__(32) H3_ROUTER_NAME(
    const float *__restrict__ scores, const B_T *__restrict__ bias, I_T *__restrict__ ids,
    O_T *__restrict__ wts, int E, int k, float scale) {
  __shared__ float s[256], sb[256];
  const long long t = blockIdx.x;
  for (int e = threadIdx.x; e < E; e += 32) s[e] = scores[t * E + e], sb[e] = (float)h3_ld(bias, e);
  __syncthreads();
  if (threadIdx.x != 0) return;
  // selection as the reference: k rounds of the largest s + bias (ties: lower id), then the
  // chosen ids ascending with weights s / sum(s) * scale (sum in ascending id order)
  unsigned long long taken[4] = {0, 0, 0, 0}; // E <= 256
  for (int r = 0; r < k; r++) {
    int bi = -1;
    float bv = 0.0f;
    for (int e = 0; e < E; e++) {
      if (taken[e >> 6] >> (e & 63) & 1ull) continue;
      float v = __fadd_rn(s[e], sb[e]);
      if (bi < 0 || v > bv) bi = e, bv = v;
    }
    if (bi < 0) break;
    taken[bi >> 6] |= 1ull << (bi & 63);
  }
  float sum = 0.0f;
  for (int e = 0; e < E; e++)
    if (taken[e >> 6] >> (e & 63) & 1ull) sum = __fadd_rn(sum, s[e]);
  int n = 0;
  for (int e = 0; e < E; e++) {
    if (!(taken[e >> 6] >> (e & 63) & 1ull)) continue;
    ids[t * k + n] = (I_T)e;
    h3_st(wts, t * k + n, __fmul_rn(__fdiv_rn(s[e], sum), scale));
    n++;
  }
}
#endif

#ifdef H3_MOE_ROUTE_NAME
// The rows that chose expert e, ascending, into rows[] as t * 16 + slot (the first slot of
// row t holding e); returns their count. Two passes: each thread counts a contiguous range
// of rows, an exclusive scan of the counts (shuffles in each warp, then over the warps' sums)
// gives its first entry, each thread writes its range. k <= 16, blockDim.x a multiple of 32.
__device__ int h3m_expert_rows(const I_T *ids, long long T, int k, long long e, int *rows) {
  __shared__ int wsum[32];
  const int nt = blockDim.x, me = threadIdx.x, lane = me & 31, warp = me >> 5, nw = nt >> 5;
  const long long per = (T + nt - 1) / nt, t0 = me * per < T ? me * per : T;
  const long long t1 = t0 + per < T ? t0 + per : T;
  int c = 0;
  for (long long t = t0; t < t1; t++)
    for (int s = 0; s < k; s++)
      if ((long long)ids[t * k + s] == e) {
        c++;
        break;
      }
  int incl = c; // inclusive scan over the warp
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int v = __shfl_sync(0xffffffffu, incl, lane >= d ? lane - d : lane);
    if (lane >= d) incl += v;
  }
  if (lane == 31) wsum[warp] = incl;
  __syncthreads();
  // every warp scans the warps' sums alike (shuffles in every thread): lane l's x sums warps
  // 0..l, so that this warp's first entry is lane warp - 1's, the total lane 31's (nw <= 32)
  int x = lane < nw ? wsum[lane] : 0;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int u = __shfl_sync(0xffffffffu, x, lane >= d ? lane - d : lane);
    if (lane >= d) x += u;
  }
  const int before = __shfl_sync(0xffffffffu, x, warp > 0 ? warp - 1 : 0);
  const int n = __shfl_sync(0xffffffffu, x, 31);
  int at = (warp > 0 ? before : 0) + incl - c;
  for (long long t = t0; t < t1; t++)
    for (int s = 0; s < k; s++)
      if ((long long)ids[t * k + s] == e) {
        rows[at++] = (int)(t * 16 + s);
        break;
      }
  __syncthreads();
  return n;
}

// Grid (E), 256 threads: the rows that chose expert e (ascending, as t * 16 + slot) into
// lists[e * T ..] and their count into counts[e], once for both product steps.
extern "C" __global__ void __launch_bounds__(256) H3_MOE_ROUTE_NAME(
    const I_T *__restrict__ ids, int *__restrict__ lists, int *__restrict__ counts, long long T,
    int k) {
  const long long e = blockIdx.x;
  const int n = h3m_expert_rows(ids, T, k, e, lists + e * T);
  if (threadIdx.x == 0) counts[e] = n;
}

#endif

#ifdef H3_MOE_NAME
// acc[r][j] = sum over i < K of x_r[i] * w[j][i] for the nr (<= H3M_ROWS, the same in every
// thread of the block) rows x_r = x + xrow[r] * K and the NW weight rows w[j], summed over
// the whole warp for r < nr (every lane returns the totals). live: this lane's warp has real
// output rows (else its loads are skipped and it returns zeros, still taking part in the
// shuffles).
template <int NW, typename XT>
__device__ __forceinline__ void h3m_rows_dot(const XT *x, const long long *xrow, int nr,
                                             const W_T *const *w, long long K, bool live,
                                             bool vec, float acc[H3M_ROWS][NW]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int r = 0; r < H3M_ROWS; r++)
#pragma unroll
    for (int j = 0; j < NW; j++) acc[r][j] = 0.0f;
  if (live && vec) {
#pragma unroll 2
    for (long long i = (long long)lane * 8; i < K; i += 256) {
      float wv[NW][8];
#pragma unroll
      for (int j = 0; j < NW; j++) h3_ld8(w[j], i, wv[j]);
#pragma unroll
      for (int r = 0; r < H3M_ROWS; r++) {
        if (r >= nr) break;
        float xv[8];
        h3_ld8(x, xrow[r] * K + i, xv);
#pragma unroll
        for (int j = 0; j < NW; j++)
#pragma unroll
          for (int q = 0; q < 8; q++) acc[r][j] = __fadd_rn(acc[r][j], __fmul_rn(xv[q], wv[j][q]));
      }
    }
  } else if (live) {
    for (long long i = lane; i < K; i += 32)
      for (int r = 0; r < nr; r++) {
        const float xv = (float)h3_ld(x, xrow[r] * K + i);
#pragma unroll
        for (int j = 0; j < NW; j++)
          acc[r][j] = __fadd_rn(acc[r][j], __fmul_rn(xv, (float)h3_ld(w[j], i)));
      }
  }
#pragma unroll
  for (int r = 0; r < H3M_ROWS; r++) {
    if (r >= nr) break;
#pragma unroll
    for (int j = 0; j < NW; j++) acc[r][j] = h3m_warp_sum(acc[r][j]);
  }
}

// Grid (E, ceil(F / 16)), 256 threads: warp w computes outputs o = 16 * blockIdx.y + 2w + {0, 1}
// of expert e = blockIdx.x for its rows, H3M_ROWS at a time (the gate and up rows of both
// outputs in one pass): act[t * k + s, o].
extern "C" __global__ void __launch_bounds__(256) H3_MOE_NAME(
    const H_T *__restrict__ h, const W_T *__restrict__ gu, const int *__restrict__ lists,
    const int *__restrict__ counts, h3_bf16 *__restrict__ act, long long T, long long H,
    long long F, int k, float alpha, float limit, int vec) {
  const long long e = blockIdx.x;
  const int *rows = lists + e * T, n = counts[e];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const W_T *g0 = gu + e * 2 * F * H;
  for (int r0 = 0; r0 < n; r0 += H3M_ROWS) {
    const int nr = n - r0 < H3M_ROWS ? n - r0 : H3M_ROWS;
    long long xrow[H3M_ROWS];
#pragma unroll
    for (int r = 0; r < H3M_ROWS; r++) xrow[r] = r < nr ? rows[r0 + r] / 16 : 0;
    const long long o0 = (long long)blockIdx.y * H3M_OUT_PER_BLOCK + warp * 2;
    const long long oa = o0 < F ? o0 : 0, ob = o0 + 1 < F ? o0 + 1 : oa;
    const W_T *wr[4] = {g0 + oa * H, g0 + (F + oa) * H, g0 + ob * H, g0 + (F + ob) * H};
    float acc[H3M_ROWS][4];
    h3m_rows_dot<4>(h, xrow, nr, wr, H, o0 < F, vec != 0, acc);
    for (int j = 0; j < 2; j++) {
      const long long o = o0 + j;
      if (o >= F || lane >= nr) continue;
#pragma unroll
      for (int r = 0; r < H3M_ROWS; r++) {
        if (r != lane) continue;
        const int ts = rows[r0 + r];
        h3_st(act, (long long)(ts / 16 * k + ts % 16) * F + o,
              h3_swigluoai(h3_rbf16(acc[r][2 * j]), h3_rbf16(acc[r][2 * j + 1]), alpha, limit));
      }
    }
  }
}

// Grid (E, ceil(H / 16)), 256 threads: y[t * k + s, o] = bf16(act[t * k + s] · down[e, o]),
// warp w for outputs o = 16 * blockIdx.y + 2w + {0, 1} in one pass.
extern "C" __global__ void __launch_bounds__(256) H3_MOE_DOWN_NAME(
    const W_T *__restrict__ down, const int *__restrict__ lists, const int *__restrict__ counts,
    const h3_bf16 *__restrict__ act, h3_bf16 *__restrict__ y, long long T, long long H,
    long long F, int k, int vec) {
  const long long e = blockIdx.x;
  const int *rows = lists + e * T, n = counts[e];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int r0 = 0; r0 < n; r0 += H3M_ROWS) {
    const int nr = n - r0 < H3M_ROWS ? n - r0 : H3M_ROWS;
    long long xrow[H3M_ROWS];
#pragma unroll
    for (int r = 0; r < H3M_ROWS; r++) {
      const int ts = r < nr ? rows[r0 + r] : 0;
      xrow[r] = (long long)ts / 16 * k + ts % 16; // the row of act
    }
    const long long o0 = (long long)blockIdx.y * H3M_OUT_PER_BLOCK + warp * 2;
    const long long oa = o0 < H ? o0 : 0, ob = o0 + 1 < H ? o0 + 1 : oa;
    const W_T *wr[2] = {down + (e * H + oa) * F, down + (e * H + ob) * F};
    float acc[H3M_ROWS][2];
    h3m_rows_dot<2>(act, xrow, nr, wr, F, o0 < H, vec != 0, acc);
    for (int j = 0; j < 2; j++) {
      const long long o = o0 + j;
      if (o >= H || lane >= nr) continue;
#pragma unroll
      for (int r = 0; r < H3M_ROWS; r++)
        if (r == lane) h3_st(y, xrow[r] * H + o, acc[r][j]);
    }
  }
}

#endif

#ifdef H3_MOE_MMA_NAME
// Tensor-core forms (bf16 h and weights, H and F multiples of 128): a block of
// H3M_MMA_WARPS warps per group of outputs, 16 rows of an expert per pass (M of m16n8k16;
// rows past the expert's count are zeros), 8 outputs per n-tile, h3_mma_rows of the prelude.
// Warp w takes the 128-wide K chunks w, w + H3M_MMA_WARPS, ... (more loads in flight than
// one warp per block could hold: a decode step has few experts and few outputs per expert);
// warp 0 adds the others' partial sums (h3_mma_reduce, in warp order) and writes. PDL: the
// rows come from the grid before (h3_mma_rows' PDL_WAIT).
#define H3M_MMA_CHUNKS(acc, rows_of, K, PDL) \
  h3_mma_rows<4, PDL>(rows_of, xrow16, xlive, wr, K, 128 * (threadIdx.x >> 5), 128 * H3M_MMA_WARPS, acc); \
  h3_mma_reduce<4, H3M_MMA_WARPS>(acc)

// The rows of x this lane feeds to the mma (g and g + 8 of the pass's 16, g = lane / 4):
// their row of x (via xrow_of) and whether they exist.
#define H3M_MMA_ROWS(rows, r0, n, xrow_of)                                             \
  long long xrow16[2];                                                                 \
  bool xlive[2];                                                                       \
  for (int q = 0; q < 2; q++) {                                                        \
    const int r = r0 + (threadIdx.x & 31) / 4 + 8 * q;                                 \
    xlive[q] = r < n;                                                                  \
    xrow16[q] = xlive[q] ? xrow_of(rows[r]) : 0;                                       \
  }

#define H3M_H_ROW(ts) ((long long)(ts) / 16)
#define H3M_ACT_ROW(ts) ((long long)(ts) / 16 * k + (ts) % 16)

// The block's expert e and its rows (count n, entries t * 16 + slot). With lists: expert
// blockIdx.x, its route (H3_MOE_ROUTE_NAME's). Without (lists == nullptr; one row, T == 1):
// slot blockIdx.x of the row, a grid of k blocks along x instead of E, no route launch: the
// block takes the slot's expert when the slot is the row's first naming it and it is one of
// the E (an id < 0 or >= E, or a repeat, leaves the block without rows), the one entry
// `slot` (row 0) held in *one: the same rows and sums as the route's, so the same bits.
__device__ __forceinline__ const int *h3m_mma_rows_of(const int *lists, const int *counts, const I_T *ids,
                                                      long long T, long long E, int *one, long long *e, int *n) {
  if (lists) {
    *e = blockIdx.x, *n = counts[blockIdx.x];
    return lists + (long long)blockIdx.x * T;
  }
  const int slot = (int)blockIdx.x;
  *e = (long long)ids[slot], *one = slot, *n = *e >= 0 && *e < E;
  for (int s = 0; s < slot; s++)
    if ((long long)ids[s] == *e) *n = 0;
  return one;
}

// Grid (E, F / 16) (without lists: (k, F / 16)), H3M_MMA_THREADS threads: outputs o0 = 16 *
// blockIdx.y .. + 15 of expert e (h3m_mma_rows_of): n-tiles gate o0.., gate o0+8.., up o0..,
// up o0+8..; act[t * k + s, o] as H3_MOE_NAME. Each block lets H3_MOE_MMA_DOWN_NAME (launched
// programmatically after it) start as soon as all of this grid's blocks have started: the
// down blocks then prefetch their first weights in the slots this grid's last blocks free.
extern "C" __global__ void __launch_bounds__(H3M_MMA_THREADS) H3_MOE_MMA_NAME(
    const h3_bf16 *__restrict__ h, const h3_bf16 *__restrict__ gu, const int *__restrict__ lists,
    const int *__restrict__ counts, const I_T *__restrict__ ids, h3_bf16 *__restrict__ act, long long T,
    long long H, long long F, long long E, int k, float alpha, float limit) {
  h3_pdl_launch_dependents();
  const long long o0 = (long long)blockIdx.y * 16;
  long long e;
  int n, one;
  const int *rows = h3m_mma_rows_of(lists, counts, ids, T, E, &one, &e, &n);
  const int lane = threadIdx.x & 31, g = lane / 4, t = lane & 3;
  const h3_bf16 *g0 = gu + e * 2 * F * H;
  const h3_bf16 *wr[4] = {g0 + (o0 + g) * H, g0 + (o0 + 8 + g) * H, g0 + (F + o0 + g) * H,
                          g0 + (F + o0 + 8 + g) * H};
  for (int r0 = 0; r0 < n; r0 += 16) {
    H3M_MMA_ROWS(rows, r0, n, H3M_H_ROW)
    float acc[4][4];
    H3M_MMA_CHUNKS(acc, h, H, false);
#pragma unroll
    for (int q = 0; q < 4; q++) { // (row g + 8 (q / 2), output 2t + q % 2) of n-tiles 0, 1
      const int r = r0 + g + 8 * (q / 2);
      if (threadIdx.x >= 32 || r >= n) continue;
      const int ts = rows[r];
#pragma unroll
      for (int half = 0; half < 2; half++) {
        const long long o = o0 + 8 * half + 2 * t + q % 2;
        h3_st(act, H3M_ACT_ROW(ts) * F + o,
              h3_swigluoai(h3_rbf16(acc[half][q]), h3_rbf16(acc[2 + half][q]), alpha, limit));
      }
    }
  }
}

// Grid (E, H / 32) (without lists: (k, H / 32)), H3M_MMA_THREADS threads: y[t * k + s, o] =
// bf16(act[t * k + s] · down[e, o]) for o = 32 * blockIdx.y .. + 31 (4 n-tiles). May be
// launched programmatically after H3_MOE_MMA_NAME (cu_launch_pdl): it reads act only after
// h3_pdl_wait (in its first chunk, once that chunk's weights are on their way) and writes y
// after that; the ids and lists it reads before come from kernels before that grid. act is
// not __restrict__: the wait must order its loads (h3_pdl_wait).
extern "C" __global__ void __launch_bounds__(H3M_MMA_THREADS) H3_MOE_MMA_DOWN_NAME(
    const h3_bf16 *__restrict__ down, const int *__restrict__ lists, const int *__restrict__ counts,
    const I_T *__restrict__ ids, const h3_bf16 *act, h3_bf16 *__restrict__ y, long long T,
    long long H, long long F, long long E, int k) {
  const long long o0 = (long long)blockIdx.y * 32;
  long long e;
  int n, one;
  const int *rows = h3m_mma_rows_of(lists, counts, ids, T, E, &one, &e, &n);
  const int lane = threadIdx.x & 31, g = lane / 4, t = lane & 3;
  const h3_bf16 *wr[4];
#pragma unroll
  for (int j = 0; j < 4; j++) wr[j] = down + (e * H + o0 + 8 * j + g) * F;
  for (int r0 = 0; r0 < n; r0 += 16) {
    H3M_MMA_ROWS(rows, r0, n, H3M_ACT_ROW)
    float acc[4][4];
    H3M_MMA_CHUNKS(acc, act, F, true);
#pragma unroll
    for (int q = 0; q < 4; q++) {
      const int r = r0 + g + 8 * (q / 2);
      if (threadIdx.x >= 32 || r >= n) continue;
      const long long yrow = H3M_ACT_ROW(rows[r]);
#pragma unroll
      for (int j = 0; j < 4; j++) h3_st(y, yrow * H + o0 + 8 * j + 2 * t + q % 2, acc[j][q]);
    }
  }
  h3_pdl_wait(); // a block without rows too: no block of this grid ends before the grid before it
}
#endif

#if defined(H3_MOE_COMBINE_NAME) || defined(H3_MOE_COMBINE_AT_NAME)
// out[t, o .. o + 7] (the outputs below H): the chosen experts of row t in ascending id order,
// each id once with its first slot's weight (the reference's selection sort), w * y summed
// from 0; slot s's y is row t * k + s of y, or row at[t * k + s] when `at` is given (the
// cuBLASLt form's expert-ordered rows; set for the slots the lists hold). PRE (k <= 4): the
// slots' ids, weights and y are loaded first, in one round (with `at`: y after the ids); else
// (k <= 16) each round of the sort reads the ids again and then its term.
#define H3M_Y_ROW(slot) ((long long)(at ? at[slot] : (slot)))
template <bool PRE>
__device__ __forceinline__ void h3m_combine8(const I_T *ids, const B_T *wts, const h3_bf16 *y,
                                             const int *at, O_T *out, long long t, long long H,
                                             int k, long long o) {
  constexpr int KM = PRE ? 4 : 1;
  int ev[KM]; // the slots' experts (< E <= 2^31), -1 past k (ids are >= 0)
  float wv[KM], yv[KM][8];
  if (PRE)
#pragma unroll
    for (int s = 0; s < KM; s++) {
      ev[s] = s < k ? (int)ids[t * k + s] : -1;
      wv[s] = s < k ? (float)h3_ld(wts, t * k + s) : 0.0f;
      // without `at` every slot's y row exists: read with the ids, not after them (one round
      // trip); `at` is set only for the slots its lists hold
      if (s < k && (!at || ev[s] >= 0)) h3m_ld8z(y + H3M_Y_ROW(t * k + s) * H, o, H, yv[s]);
    }
  float acc[8];
#pragma unroll
  for (int q = 0; q < 8; q++) acc[q] = 0.0f;
  int last = -1;
  for (int r = 0; r < k; r++) {
    int bi = -1, be = 0;
    if (PRE) {
#pragma unroll
      for (int s = 0; s < KM; s++)
        if (ev[s] > last && (bi < 0 || ev[s] < be)) bi = s, be = ev[s];
    } else {
      for (int s = 0; s < k; s++) {
        const int e = (int)ids[t * k + s];
        if (e > last && (bi < 0 || e < be)) bi = s, be = e;
      }
    }
    if (bi < 0) break;
    last = be;
    float wb = 0.0f, yb[8];
    if (PRE) {
#pragma unroll
      for (int s = 0; s < KM; s++)
        if (s == bi) {
          wb = wv[s];
#pragma unroll
          for (int q = 0; q < 8; q++) yb[q] = yv[s][q];
        }
    } else {
      wb = (float)h3_ld(wts, t * k + bi);
      h3m_ld8z(y + H3M_Y_ROW(t * k + bi) * H, o, H, yb);
    }
#pragma unroll
    for (int q = 0; q < 8; q++) acc[q] = __fadd_rn(acc[q], __fmul_rn(wb, yb[q]));
  }
  if (o + 8 <= H) {
    h3_st8(out, t * H + o, acc);
    return;
  }
#pragma unroll
  for (int q = 0; q < 8; q++)
    if (o + q < H) h3_st(out, t * H + o + q, acc[q]);
}

#endif

#if defined(H3_MOE_COMBINE_NAME) || defined(H3_MOE_COMBINE_AT_NAME)
// A combine block's outputs: row blockIdx.x, 8 outputs per thread at 8 (blockIdx.y *
// blockDim.x + threadIdx.x) and every 8 gridDim.y * blockDim.x after.
__device__ __forceinline__ void h3m_combine_block(const I_T *ids, const B_T *wts, const h3_bf16 *y,
                                                  const int *at, O_T *out, long long H, int k) {
  const long long t = blockIdx.x, step = 8ll * gridDim.y * blockDim.x;
  const long long o0 = 8 * ((long long)blockIdx.y * blockDim.x + threadIdx.x);
  if (k <= 4)
    for (long long o = o0; o < H; o += step) h3m_combine8<true>(ids, wts, y, at, out, t, H, k, o);
  else
    for (long long o = o0; o < H; o += step) h3m_combine8<false>(ids, wts, y, at, out, t, H, k, o);
}
#endif

#ifdef H3_MOE_COMBINE_NAME
// Grid (T, any), 256 threads: out[t, o] = sum of w[t, s] * y[t * k + s, o] over the slots in
// ascending expert order; a thread takes 8 outputs at 8 (blockIdx.y * blockDim.x +
// threadIdx.x) and every 8 gridDim.y * blockDim.x after. k <= 16.
extern "C" __global__ void __launch_bounds__(256) H3_MOE_COMBINE_NAME(
    const I_T *__restrict__ ids, const B_T *__restrict__ wts, const h3_bf16 *__restrict__ y,
    O_T *__restrict__ out, long long H, int k) {
  h3m_combine_block(ids, wts, y, nullptr, out, H, k);
}
#endif

#ifdef H3_MOE_COMBINE_AT_NAME
// H3_MOE_COMBINE_NAME with slot s of row t read from y row at[t * k + s].
extern "C" __global__ void __launch_bounds__(256) H3_MOE_COMBINE_AT_NAME(
    const I_T *__restrict__ ids, const B_T *__restrict__ wts, const h3_bf16 *__restrict__ y,
    const int *__restrict__ at, O_T *__restrict__ out, long long H, int k) {
  h3m_combine_block(ids, wts, y, at, out, H, k);
}
#endif

#ifdef H3_MOE_GATHER_NAME
// The cuBLASLt form's gather (bf16 h, H a multiple of 8, 16-byte aligned rows). Grid (E,
// any), 256 threads: block (e, g) copies the rows of expert e (its list: t * 16 + s entries,
// counts[e] of them) to xs[off + i] for i = g, g + gridDim.y, .., off = the counts of the
// experts before e, and sets at[t * k + s] = off + i.
extern "C" __global__ void __launch_bounds__(256) H3_MOE_GATHER_NAME(
    const h3_bf16 *__restrict__ h, const int *__restrict__ lists, const int *__restrict__ counts,
    h3_bf16 *__restrict__ xs, int *__restrict__ at, long long T, long long H, int k) {
  const long long e = blockIdx.x;
  long long off = 0;
  for (long long q = 0; q < e; q++) off += counts[q];
  const int n = counts[e];
  for (long long i = blockIdx.y; i < n; i += gridDim.y) {
    const int entry = lists[e * T + i];
    const long long t = entry / 16, s = entry % 16;
    if (threadIdx.x == 0) at[t * k + s] = (int)(off + i);
    const uint4 *src = reinterpret_cast<const uint4 *>(h + t * H);
    uint4 *dst = reinterpret_cast<uint4 *>(xs + (off + i) * H);
    for (long long c = threadIdx.x; c < H / 8; c += blockDim.x) dst[c] = src[c];
  }
}
#endif

#ifdef H3_MOE_SWIGLU_NAME
// The cuBLASLt form's activation: act[r, f] = bf16(swigluoai(u[r, f], u[r, F + f])) for the
// n rows r of u [n, 2 F] (gate | up, bf16 from the GEMM), 2 outputs per thread and step (F
// even). Grid-stride.
extern "C" __global__ void __launch_bounds__(256) H3_MOE_SWIGLU_NAME(
    const h3_bf16 *__restrict__ u, h3_bf16 *__restrict__ act, long long n, long long F,
    float alpha, float limit) {
  const long long pairs = n * F / 2;
  for (long long i = blockIdx.x * 256ll + threadIdx.x; i < pairs; i += 256ll * gridDim.x) {
    const long long r = 2 * i / F, f = 2 * i % F;
    const h3_bf16 *g = u + r * 2 * F + f;
    h3_st2(act + r * F + f, h3_swigluoai(h3_w(g[0]), h3_w(g[F]), alpha, limit),
           h3_swigluoai(h3_w(g[1]), h3_w(g[F + 1]), alpha, limit));
  }
}
#endif

#if defined(H3_MARKOV_STEP_NAME) || defined(H3_MARKOV_MMA_NAME) || defined(H3_MARKOV_PICK_NAME)
#define H3M_MK_ROWS 256 // vocabulary rows per step block (either form)
#define H3M_MK_SEQS 64  // sequences per pass of the tensor-core step (4 m-tiles of 16)
#define H3M_MKF_SQ 8    // sequences per pass of the fp32 step: a thread's sums
#define H3M_MK_CB 128   // bytes of each w2 row a stage holds
#define H3M_MK_RS 144   // a staged row's stride in bytes (36 words: the 8 lanes of a quarter
                        // warp reading 16 bytes of consecutive rows hit distinct banks, and
                        // the 8 rows x 4 words of an mma B fragment 32 distinct banks)

// (v, i) beats (bv, bi): the larger value, on a tie the lower index; a NaN or index -1 never
// wins. Without NaNs every merge order gives the first argmax.
__device__ __forceinline__ bool h3m_mk_beats(float v, int i, float bv, int bi) {
  return i >= 0 && v == v && (bi < 0 || v > bv || (v == bv && i < bi));
}
// The best of lanes that differ in the bits below 2 FIRST (16: the whole warp), in every one.
template <int FIRST = 16> __device__ __forceinline__ void h3m_mk_warp_best(float &v, int &i) {
#pragma unroll
  for (int o = FIRST; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, i, o);
    if (h3m_mk_beats(ov, oi, v, i)) v = ov, i = oi;
  }
}
// The best of a sequence's 8 warp bests (sv, si: the warps in order) into part_v / part_i[at]
__device__ __forceinline__ void h3m_mk_block_best(const float *sv, const int *si, float *part_v, int *part_i,
                                                  long long at) {
  float bv = sv[0];
  int bi = si[0];
  for (int w = 1; w < 8; w++)
    if (h3m_mk_beats(sv[w], si[w], bv, bi)) bv = sv[w], bi = si[w];
  part_v[at] = bv, part_i[at] = bi;
}
// w2[v0 + row, c CB / sizeof(T) ..] for rows < nrows into stage st (a row every RS bytes):
// cp.async of 16-byte pieces when rows are 16-byte vectors (vec), else element copies
template <typename T>
__device__ __forceinline__ void h3m_mk_stage(unsigned char *st, const T *w2, long long v0, int nrows, int r,
                                              int c, bool vec) {
  const int ke = H3M_MK_CB / (int)sizeof(T), n = r - c * ke < ke ? r - c * ke : ke;
  if (vec) {
    const int pieces = n * (int)sizeof(T) / 16;
    for (int j = threadIdx.x; j < nrows * (H3M_MK_CB / 16); j += blockDim.x) {
      const int row = j / (H3M_MK_CB / 16), p = j % (H3M_MK_CB / 16);
      if (p < pieces)
        h3_cp16(reinterpret_cast<uint4 *>(st + row * H3M_MK_RS + 16 * p),
                reinterpret_cast<const unsigned char *>(w2 + (v0 + row) * r + c * ke) + 16 * p);
    }
  } else {
    for (int j = threadIdx.x; j < nrows * ke; j += blockDim.x) {
      const int row = j / ke, i = j % ke;
      if (i < n) reinterpret_cast<T *>(st + row * H3M_MK_RS)[i] = w2[(v0 + row) * r + c * ke + i];
    }
  }
  h3_cp_commit();
}
// Stage c of nc ready to read: stage c + 1 (if any) issued into the other buffer of the two at
// sm, then stage c waited for and made visible to the block (a barrier). Returns stage c.
template <typename T>
__device__ __forceinline__ const unsigned char *h3m_mk_ready(unsigned char *sm, const T *w2, long long v0, int nrows,
                                                             int r, int c, int nc, bool vec) {
  if (c + 1 < nc) {
    h3m_mk_stage(sm + ((c + 1) & 1) * H3M_MK_ROWS * H3M_MK_RS, w2, v0, nrows, r, c + 1, vec);
    h3_cp_wait_pending<1>();
  } else {
    h3_cp_wait_pending<0>();
  }
  __syncthreads();
  return sm + (c & 1) * H3M_MK_ROWS * H3M_MK_RS;
}
#endif

#ifdef H3_MARKOV_STEP_NAME
// Step kk of every chain: z[s G + kk, v] = base[s G + kk, v] + sum_i w2[v, i] e[s, i] (i
// ascending, each product and sum rounded: the reference's chain, bitwise), and each block's
// best (value, v) per sequence into part_v / part_i [S, gridDim.x]. grid ceil(V / 256), 256
// threads: thread t owns vocabulary row 256 blockIdx.x + t and its sums for H3M_MKF_SQ
// sequences a pass. w2 streams through two stages of CB bytes a row (cp.async: stage c + 1
// in flight while stage c is summed), so a block reads its 256 rows once a pass at the
// card's bandwidth. Dynamic shared: the two stages [2][256][RS bytes], then e of min(S, SQ)
// sequences [., r] f32. e [S, r] f32 is H3_MARKOV_PICK_NAME's.
extern "C" __global__ void __launch_bounds__(256) H3_MARKOV_STEP_NAME(
    const B_T *__restrict__ base, const W_T *__restrict__ w2, const float *__restrict__ e,
    O_T *__restrict__ z, float *__restrict__ part_v, int *__restrict__ part_i, int kk, int G,
    long long V, int r, int S) {
  H3_DYN_SMEM(unsigned char, sm);
  float *es = reinterpret_cast<float *>(sm + 2 * H3M_MK_ROWS * H3M_MK_RS);
  __shared__ float sv[H3M_MKF_SQ][8]; // each sequence's best of each warp's 32 rows
  __shared__ int si[H3M_MKF_SQ][8];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, t = threadIdx.x;
  const long long v0 = (long long)blockIdx.x * H3M_MK_ROWS;
  const int nrows = (int)(V - v0 < H3M_MK_ROWS ? V - v0 : H3M_MK_ROWS);
  const int ke = H3M_MK_CB / (int)sizeof(W_T), nc = (r + ke - 1) / ke;
  const bool vec = (long long)r * sizeof(W_T) % 16 == 0 && reinterpret_cast<unsigned long long>(w2) % 16 == 0;
  for (int s0 = 0; s0 < S; s0 += H3M_MKF_SQ) {
    const int ns = S - s0 < H3M_MKF_SQ ? S - s0 : H3M_MKF_SQ;
    __syncthreads(); // the last pass's stages, e and bests are read
    h3m_mk_stage(sm, w2, v0, nrows, r, 0, vec);
    for (int j = t; j < ns * r; j += blockDim.x) es[j] = e[(long long)s0 * r + j];
    float acc[H3M_MKF_SQ], bz[H3M_MKF_SQ]; // the sums; base, loaded while w2 streams
#pragma unroll
    for (int q = 0; q < H3M_MKF_SQ; q++) {
      acc[q] = 0.0f, bz[q] = 0.0f;
      if (q < ns && t < nrows) bz[q] = (float)h3_ld(base, ((long long)(s0 + q) * G + kk) * V + v0 + t);
    }
    for (int c = 0; c < nc; c++) {
      const W_T *wr = reinterpret_cast<const W_T *>(h3m_mk_ready(sm, w2, v0, nrows, r, c, nc, vec) + t * H3M_MK_RS);
      const int i0 = c * ke, n = r - i0 < ke ? r - i0 : ke;
      int i = t < nrows ? 0 : n;
      for (; i + 8 <= n; i += 8) {
        float w[8];
        h3_ld8(wr, i, w);
#pragma unroll
        for (int q = 0; q < H3M_MKF_SQ; q++) {
          if (q >= ns) break; // block-uniform
          float ev[8];
          h3_ld8(es + q * r, i0 + i, ev);
#pragma unroll
          for (int k = 0; k < 8; k++) acc[q] = __fadd_rn(acc[q], __fmul_rn(w[k], ev[k]));
        }
      }
      for (; i < n; i++) {
        const float w = (float)h3_w(wr[i]);
#pragma unroll
        for (int q = 0; q < H3M_MKF_SQ; q++) {
          if (q >= ns) break; // block-uniform
          acc[q] = __fadd_rn(acc[q], __fmul_rn(w, es[q * r + i0 + i]));
        }
      }
      __syncthreads(); // stage c is read: the next iteration refills it
    }
#pragma unroll
    for (int q = 0; q < H3M_MKF_SQ; q++) {
      if (q >= ns) break; // block-uniform
      float bv = 0.0f;
      int bi = -1;
      if (t < nrows) {
        const float zv = __fadd_rn(bz[q], acc[q]);
        h3_st(z, ((long long)(s0 + q) * G + kk) * V + v0 + t, zv);
        if (h3m_mk_beats(zv, (int)(v0 + t), bv, bi)) bv = zv, bi = (int)(v0 + t);
      }
      h3m_mk_warp_best(bv, bi);
      if (lane == 0) sv[q][warp] = bv, si[q][warp] = bi;
    }
    __syncthreads();
    if (t < ns) h3m_mk_block_best(sv[t], si[t], part_v, part_i, (long long)(s0 + t) * gridDim.x + blockIdx.x);
  }
}
#endif

#ifdef H3_MARKOV_MMA_NAME
// H3_MARKOV_STEP_NAME's step on tensor cores (the launcher's choice with H3_MARKOV_FORM=mma,
// bf16 w2 and r % 16 == 0): the same grid, threads, z and block bests, but z - base are mma.sync
// m16n8k16 products (e rounded to bf16, exact: it holds bf16 weights of w1; fp32 accumulate, K
// ascending in steps of 16) summed in the tensor cores' order: within fp32 rounding of the
// reference's chain, NOT bitwise, so a draft may differ where two tokens' z are that close (the
// draft only proposes; the verify decides and the outputs stay bitwise). w2 streams through
// H3_MARKOV_STEP_NAME's two stages (h3m_mk_stage); a pass takes 64 sequences (4 m-tiles), e of
// the pass in shared memory as bf16 rows at a stride of ws = r + 8 elements (r / 2 + 4 words, 4 x
// an odd number: the 8 rows of an ldmatrix phase hit distinct banks; rows past S zeros up to
// the m-tile). Warp w takes vocabulary rows 32 w .. 32 w + 31 of the block as 4 n-tiles of 8
// (B[k][n] = w2[v0 + 32 w + 8 j + n][k]: two words of a staged row per lane and k-step).
// Dynamic shared: the two stages [2][256][RS bytes], then e [64][ws] bf16.
extern "C" __global__ void __launch_bounds__(256) H3_MARKOV_MMA_NAME(
    const B_T *__restrict__ base, const h3_bf16 *__restrict__ w2, const float *__restrict__ e,
    O_T *__restrict__ z, float *__restrict__ part_v, int *__restrict__ part_i, int kk, int G,
    long long V, int r, int ws, int S) {
  H3_DYN_SMEM(unsigned char, sm);
  h3_bf16 *es = reinterpret_cast<h3_bf16 *>(sm + 2 * H3M_MK_ROWS * H3M_MK_RS);
  __shared__ float sv[H3M_MK_SEQS][8]; // each sequence's best of each warp's 32 rows
  __shared__ int si[H3M_MK_SEQS][8];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const long long v0 = (long long)blockIdx.x * H3M_MK_ROWS;
  const int nrows = (int)(V - v0 < H3M_MK_ROWS ? V - v0 : H3M_MK_ROWS);
  const int ke = H3M_MK_CB / 2, nc = (r + ke - 1) / ke;
  const bool vec = r % 8 == 0 && reinterpret_cast<unsigned long long>(w2) % 16 == 0;
  // lane 8 i + j's ldmatrix row: sequence j + 8 (i & 1) of the m-tile, k from 8 (i >> 1)
  const h3_bf16 *ea = es + (lane & 15) * ws + 8 * (lane >> 4);
  for (int s0 = 0; s0 < S; s0 += H3M_MK_SEQS) {
    const int ns = S - s0 < H3M_MK_SEQS ? S - s0 : H3M_MK_SEQS, nm = (ns + 15) / 16;
    __syncthreads(); // the last pass's stages, e and bests are read
    h3m_mk_stage(sm, w2, v0, nrows, r, 0, vec);
    for (int j = threadIdx.x; j < 16 * nm * r / 8; j += blockDim.x) {
      const int q = 8 * j / r, i = 8 * j % r;
      float f[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
      if (q < ns) h3_ld8(e, (long long)(s0 + q) * r + i, f);
      h3_pbf8(f, es + q * ws + i);
    }
    float acc[4][4][4]; // [m-tile][n-tile][fragment]
#pragma unroll
    for (int m = 0; m < 4; m++)
#pragma unroll
      for (int j = 0; j < 4; j++) acc[m][j][0] = acc[m][j][1] = acc[m][j][2] = acc[m][j][3] = 0.0f;
    for (int c = 0; c < nc; c++) {
      // this lane's B words in stage c: row 32 warp + 8 j + g, words t (k 2t, 2t + 1) and t + 4
      const unsigned *wb = reinterpret_cast<const unsigned *>(h3m_mk_ready(sm, w2, v0, nrows, r, c, nc, vec) +
                                                              (32 * warp + g) * H3M_MK_RS) + t;
      const int n = r - c * ke < ke ? r - c * ke : ke;
      for (int k = 0; k < n; k += 16) {
        unsigned b[4][2];
#pragma unroll
        for (int j = 0; j < 4; j++) {
          b[j][0] = wb[8 * j * (H3M_MK_RS / 4) + k / 2];
          b[j][1] = wb[8 * j * (H3M_MK_RS / 4) + k / 2 + 4];
        }
#pragma unroll
        for (int m = 0; m < 4; m++) {
          if (m >= nm) break; // block-uniform
          unsigned a[4];
          h3_ldsm4(a, ea + 16 * m * ws + c * ke + k);
#pragma unroll
          for (int j = 0; j < 4; j++) h3_mma_bf16(acc[m][j], a, b[j]);
        }
      }
      __syncthreads(); // stage c is read: the next iteration refills it
    }
    // acc[m][j] of lane 4 g + t: sequences 16 m + g (0, 1) and + 8 (2, 3), rows 32 warp + 8 j
    // + 2 t + c
#pragma unroll
    for (int m = 0; m < 4; m++) {
      if (m >= nm) break; // block-uniform
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int q = 16 * m + 8 * h + g;
        float bv = 0.0f;
        int bi = -1;
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
          for (int c = 0; c < 2; c++) {
            const int v = 32 * warp + 8 * j + 2 * t + c;
            if (q < ns && v < nrows) {
              const long long zi = ((long long)(s0 + q) * G + kk) * V + v0 + v;
              const float zv = __fadd_rn((float)h3_ld(base, zi), acc[m][j][2 * h + c]);
              h3_st(z, zi, zv);
              if (h3m_mk_beats(zv, (int)(v0 + v), bv, bi)) bv = zv, bi = (int)(v0 + v);
            }
          }
        h3m_mk_warp_best<2>(bv, bi); // the 4 lanes of sequence q
        if (t == 0) sv[q][warp] = bv, si[q][warp] = bi;
      }
    }
    __syncthreads();
    const int q = threadIdx.x;
    if (q < ns) h3m_mk_block_best(sv[q], si[q], part_v, part_i, (long long)(s0 + q) * gridDim.x + blockIdx.x);
  }
}
#endif

#ifdef H3_MARKOV_PICK_NAME
// Between the steps of sequence s's chain (grid S, 256 threads): kk == 0 starts it at
// prev[s] (clamped into [0, V): the CPU reports such an id); kk > 0 merges step kk - 1's
// nblk block bests into draft[s G + kk - 1] (the first argmax; 0 when every value is NaN)
// and continues from it. While kk < G it writes e[s] = fp32(w1[prev]) for step kk.
extern "C" __global__ void __launch_bounds__(256) H3_MARKOV_PICK_NAME(
    const W_T *__restrict__ w1, const I_T *__restrict__ prev0, const float *__restrict__ part_v,
    const int *__restrict__ part_i, float *__restrict__ e, I_T *__restrict__ draft, int kk, int G,
    long long V, int r, int nblk) {
  __shared__ float sv[8];
  __shared__ int si[8];
  __shared__ long long prev;
  const long long s = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (kk == 0) {
    if (threadIdx.x == 0) {
      const long long p = (long long)prev0[s];
      prev = p < 0 ? 0 : (p >= V ? V - 1 : p);
    }
  } else {
    float bv = 0.0f;
    int bi = -1;
    for (int b = threadIdx.x; b < nblk; b += blockDim.x)
      if (h3m_mk_beats(part_v[s * nblk + b], part_i[s * nblk + b], bv, bi))
        bv = part_v[s * nblk + b], bi = part_i[s * nblk + b];
    h3m_mk_warp_best(bv, bi);
    if (lane == 0) sv[warp] = bv, si[warp] = bi;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < (int)blockDim.x / 32; w++)
        if (h3m_mk_beats(sv[w], si[w], bv, bi)) bv = sv[w], bi = si[w];
      prev = bi < 0 ? 0 : bi;
      draft[s * G + kk - 1] = (I_T)prev;
    }
  }
  __syncthreads();
  if (kk < G)
    for (int i = threadIdx.x; i < r; i += blockDim.x) e[s * r + i] = (float)h3_ld(w1, prev * r + i);
}
#endif

#ifdef H3_SPEC_ACCEPT_NAME
// The better of two (score, index) candidates: the larger score, the lower index on a tie;
// NaN scores (and index -1) never win. *sec collects the largest losing score.
__device__ __forceinline__ void h3m_acc_merge(float &bv, long long &bi, float &sec, float v, long long i) {
  if (i < 0 || v != v) return;
  if (bi < 0 || v > bv || (v == bv && i < bi)) {
    if (bi >= 0) sec = fmaxf(sec, bv);
    bv = v, bi = i;
  } else {
    sec = fmaxf(sec, v);
  }
}
// Another merge's result (best v at index i, -1: none; its largest other score s) into (bv, bi,
// sec): the same as merging every candidate it saw.
__device__ __forceinline__ void h3m_acc_merge_part(float &bv, long long &bi, float &sec, float v, float s,
                                                   long long i) {
  h3m_acc_merge(bv, bi, sec, v, i);
  if (i >= 0) sec = fmaxf(sec, s);
}

// Every thread's (bv, bi, sec) merged into thread 0's (the block's 256 threads: a shuffle tree
// in each warp, then the 8 warps' results by thread 0; the same result as any merge order).
// wv, ws, wi: 8 entries of shared memory; every thread must call it (a barrier inside).
__device__ __forceinline__ void h3m_acc_block_merge(float &bv, long long &bi, float &sec, float *wv, float *ws,
                                                    long long *wi) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o), os = __shfl_xor_sync(0xffffffffu, sec, o);
    const long long oi = __shfl_xor_sync(0xffffffffu, bi, o);
    h3m_acc_merge_part(bv, bi, sec, ov, os, oi);
  }
  if (lane == 0) wv[warp] = bv, ws[warp] = sec, wi[warp] = bi;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < (int)blockDim.x / 32; w++) h3m_acc_merge_part(bv, bi, sec, wv[w], ws[w], wi[w]);
}

// H3_SPEC_TOP2_NAME: the greedy rows' argmax in pieces, before H3_SPEC_ACCEPT_NAME (a decision
//   over V = 200064 logits by one block of 256 threads read ~4 GB/s: 1.1-1.7 ms a batch-1 round).
//   Grid (nc, S(G+1)), 256 threads, nc = ceil(V / H3M_ACC_CHUNK): block (c, r) merges logits
//   v = c H3M_ACC_CHUNK .. + H3M_ACC_CHUNK - 1 of row r (h3m_acc_merge: the first best, the
//   largest other score; NaN never wins) into part_v / part_s / part_i [r nc + c] (best, second,
//   index; -1: no number there). Rows of sampled sequences (temperature > 0) are skipped: the
//   accept kernel scans them itself. Best, lowest index among equal bests and second are the
//   same in any merge order, so the accept kernel's result is bitwise that of one scan.
#define H3M_ACC_CHUNK 4096
extern "C" __global__ void __launch_bounds__(256) H3_SPEC_TOP2_NAME(
    const float *__restrict__ x, const float *__restrict__ temp, float *__restrict__ part_v,
    float *__restrict__ part_s, int *__restrict__ part_i, int G, long long V) {
  __shared__ float pv[8], ps[8];
  __shared__ long long pi[8];
  const long long r = blockIdx.y, v0 = (long long)blockIdx.x * H3M_ACC_CHUNK;
  if (temp[r / (G + 1)] > 0.0f) return; // sampled: not read
  const float *row = x + r * V;
  float vals[H3M_ACC_CHUNK / 256];
#pragma unroll
  for (int j = 0; j < H3M_ACC_CHUNK / 256; j++) { // every load in flight before the merges
    const long long v = v0 + threadIdx.x + 256 * j;
    vals[j] = v < V ? row[v] : 0.0f;
  }
  float bv = 0.0f, sec = -H3_RNG_INF;
  long long bi = -1;
#pragma unroll
  for (int j = 0; j < H3M_ACC_CHUNK / 256; j++) {
    const long long v = v0 + threadIdx.x + 256 * j;
    if (v < V) h3m_acc_merge(bv, bi, sec, vals[j], v);
  }
  h3m_acc_block_merge(bv, bi, sec, pv, ps, pi);
  if (threadIdx.x == 0) {
    const long long at = r * gridDim.x + blockIdx.x;
    part_v[at] = bv, part_s[at] = sec, part_i[at] = (int)bi;
  }
}

// H3_SPEC_ACCEPT_NAME (logits f32[S(G+1), V], draft I_T[S G], temperature f32[S], seed I_T[S],
//   pos I_T[S]; part_v / part_s / part_i: H3_SPEC_TOP2_NAME's nc pieces a row) -> n I_T[S],
//   tokens I_T[S, G+1], margin f32[S, G+1]: spec_accept (ops.def), block s = sequence s (256
//   threads). Each decision: greedy, the row's nc pieces merged; sampled, the row's scores
//   (h3_rng_sample_score) over the threads (v = thread, thread + 256, ...); each thread's
//   first best and second, merged over the block (h3m_acc_block_merge; ties: lowest index); sampling
//   adds p(d) = exp(x_d / T - m) / sum_v exp(x_v / T - m), m and the sum over the threads'
//   partials in thread order (so p(d) may differ from the CPU's v-ascending sum in its last
//   bits: a draft whose u lies that close to p(d) can be decided the other way).
extern "C" __global__ void __launch_bounds__(256) H3_SPEC_ACCEPT_NAME(
    const float *__restrict__ x, const I_T *__restrict__ draft, const float *__restrict__ temp,
    const I_T *__restrict__ seedp, const I_T *__restrict__ posp, const float *__restrict__ top_v,
    const float *__restrict__ top_s, const int *__restrict__ top_i, I_T *__restrict__ n_out,
    I_T *__restrict__ tok, float *__restrict__ margin, int G, long long V, int nc) {
  __shared__ float part_v[256], part_s[256];
  __shared__ long long part_i[256];
  __shared__ float m_sh, p_sh;
  __shared__ long long win_sh;
  __shared__ float mg_sh;
  const long long s = blockIdx.x;
  const float t = temp[s];
  const bool greedy = !(t > 0.0f);
  const unsigned sd = (unsigned)seedp[s], p0 = (unsigned)posp[s];
  for (int i = threadIdx.x; i <= G; i += blockDim.x) {
    tok[s * (G + 1) + i] = (I_T)-1;
    margin[s * (G + 1) + i] = __int_as_float(0x7fc00000);
  }
  int n = 0;
  for (;; n++) { // the same decisions in every thread: the loop's trips are uniform
    const float *row = x + (s * (G + 1) + n) * V;
    const unsigned P = p0 + 1u + (unsigned)n;
    long long dn = n < G ? (long long)draft[s * G + n] : -1;
    if (dn >= V) dn = -1;
    long long skip = -1;
    if (!greedy && n < G) { // p(d_n+1) against u
      float m = -H3_RNG_INF;
      for (long long v = threadIdx.x; v < V; v += blockDim.x) m = fmaxf(m, __fdiv_rn(row[v], t));
      part_v[threadIdx.x] = m;
      __syncthreads();
      if (threadIdx.x == 0) {
        float mm = -H3_RNG_INF;
        for (int i = 0; i < (int)blockDim.x; i++) mm = fmaxf(mm, part_v[i]);
        m_sh = mm;
      }
      __syncthreads();
      float sum = 0.0f;
      for (long long v = threadIdx.x; v < V; v += blockDim.x) {
        const float e = expf(__fadd_rn(__fdiv_rn(row[v], t), -m_sh));
        if (e == e) sum = __fadd_rn(sum, e);
      }
      part_s[threadIdx.x] = sum;
      __syncthreads();
      if (threadIdx.x == 0) {
        float tot = 0.0f;
        for (int i = 0; i < (int)blockDim.x; i++) tot = __fadd_rn(tot, part_s[i]);
        float pd = dn >= 0 ? __fdiv_rn(expf(__fadd_rn(__fdiv_rn(row[dn], t), -m_sh)), tot) : 0.0f;
        p_sh = pd == pd ? pd : 0.0f;
      }
      __syncthreads();
      const float u = h3_rng_uniform(sd, H3_RNG_ACCEPT_STREAM, (unsigned long long)P << 32);
      const bool acc = dn >= 0 && u < p_sh;
      __syncthreads();
      if (acc) {
        if (threadIdx.x == 0) tok[s * (G + 1) + n] = (I_T)dn;
        continue;
      }
      skip = dn;
    }
    float bv = 0.0f, sec = -H3_RNG_INF;
    long long bi = -1;
    if (greedy) { // the row's pieces (H3_SPEC_TOP2_NAME)
      const long long r0 = (s * (G + 1) + n) * nc;
      for (int c = threadIdx.x; c < nc; c += blockDim.x)
        h3m_acc_merge_part(bv, bi, sec, top_v[r0 + c], top_s[r0 + c], top_i[r0 + c]);
    } else {
      for (long long v = threadIdx.x; v < V; v += blockDim.x) {
        if (v == skip) continue;
        h3m_acc_merge(bv, bi, sec, h3_rng_sample_score(row[v], t, sd, P, (unsigned)v), v);
      }
    }
    h3m_acc_block_merge(bv, bi, sec, part_v, part_s, part_i);
    if (threadIdx.x == 0) {
      win_sh = bi < 0 ? 0 : bi;
      mg_sh = h3_rng_sample_margin(bi < 0 ? __int_as_float(0x7fc00000) : bv, sec);
    }
    __syncthreads();
    const long long tn = win_sh;
    if (greedy && threadIdx.x == 0) margin[s * (G + 1) + n] = mg_sh;
    if (greedy && n < G && dn == tn) {
      if (threadIdx.x == 0) tok[s * (G + 1) + n] = (I_T)dn;
      __syncthreads();
      continue;
    }
    if (threadIdx.x == 0) tok[s * (G + 1) + n] = (I_T)tn;
    break;
  }
  if (threadIdx.x == 0) n_out[s] = (I_T)n;
}
#endif
