// m31_moe.cu: MiniMax-M3.1's routing, mixture-of-experts and DSpark Markov head, the
// contracts of ops.def and of the CPU reference (runtime/cpu/ops_moe.c) with the same
// roundings (bf16 where the reference rounds, fp32 sums in another order than the
// reference's ascending one, covered by the tests' tolerance).
//   router_topk(h[T, H] H_T, w[E, H] W_T, bias[E] B_T) -> ids[T, k] I_T, wts[T, k] O_T
//     {k, scale} in two launches through an f32 scratch of scores s[T, E] (E <= 256):
//     1. H3_ROUTER_SCORE_NAME, grid (ceil(T / H3M_ROUTER_ROWS), E), H3M_ROUTER_THREADS
//        threads: s[t, e] = sigmoid(h_t · w_e) for the block's H3M_ROUTER_ROWS rows (w_e read
//        once per block; a decode step's few rows spread over E blocks);
//     2. H3_ROUTER_NAME, grid (T), 32 threads: the selection from s and the bias.
//   moe(h[T, H] H_T, gate_up[E, 2F, H] W_T, down[E, H, F] W_T, ids[T, k] I_T, wts[T, k] B_T)
//     -> out[T, H] O_T {alpha, limit} in three launches, expert-major so that each expert's
//     weights are read once per pass over its rows and an expert no row chose is not read:
//     1. act[t * k + s] = bf16(swigluoai(bf16(h_t · gate_e), bf16(h_t · up_e))) for the rows
//        t whose slot s chose e (its first such slot);
//     2. y[t * k + s] = bf16(act[t * k + s] · down_e);
//     3. H3_MOE_COMBINE_NAME, grid (T, ceil(H / 256)): out[t] = sum over the chosen experts
//        in ascending id order (each id once) of w * y (fp32, from 0).
//     act [T * k, F] and y [T * k, H] are bf16 scratch (their values are bf16 by the
//     contract). H3_MOE_ROUTE_NAME first lists each expert's rows once (int scratch counts
//     [E], lists [E, T]); steps 1 and 2 then read those lists, as
//       H3_MOE_MMA_NAME, H3_MOE_MMA_DOWN_NAME: tensor cores (bf16 h and weights, H and F
//         multiples of 128), a block of H3M_MMA_THREADS per 16 (32) outputs whose warps
//         split K, 16 rows per pass; or
//       H3_MOE_NAME, H3_MOE_DOWN_NAME: any types and widths, CUDA cores, a warp per 2
//         outputs and H3M_ROWS rows per pass, shuffle-tree sums (`vec`: rows of 8-element
//         multiples, vector loads).
//   H3_MARKOV_NAME (base[G, V] B_T, w1[V, r] W_T, w2[V, r] W_T, prev I_T) -> z[G, V] O_T,
//     draft[G] I_T: one block; dynamic shared: r floats.
// Every loop that holds a shuffle, an mma or a barrier runs the same number of times in every
// thread of a block (tests run these kernels on the host under tests/codegen/host_emu.h,
// where those are block-wide barriers).
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

#if defined(H3_MOE_NAME) || defined(H3_MOE_MMA_NAME)
// The rows that chose expert e, ascending, into rows[] as t * 16 + slot (the first slot of
// row t holding e); returns their count. Two passes: each thread counts a contiguous range
// of rows, thread 0 turns the counts into offsets, each thread writes its range. k <= 16.
__device__ int h3m_expert_rows(const I_T *ids, long long T, int k, long long e, int *rows) {
  __shared__ int counts[256];
  __shared__ int total;
  const int nt = blockDim.x < 256 ? blockDim.x : 256, me = threadIdx.x;
  const long long per = (T + nt - 1) / nt, t0 = me < nt ? me * per : T;
  const long long t1 = t0 + per < T ? t0 + per : T;
  int c = 0;
  for (long long t = t0; t < t1; t++)
    for (int s = 0; s < k; s++)
      if ((long long)ids[t * k + s] == e) {
        c++;
        break;
      }
  if (me < nt) counts[me] = c;
  __syncthreads();
  if (me == 0) {
    int run = 0;
    for (int i = 0; i < nt; i++) {
      const int n = counts[i];
      counts[i] = run;
      run += n;
    }
    total = run;
  }
  __syncthreads();
  int at = me < nt ? counts[me] : 0;
  for (long long t = t0; t < t1; t++)
    for (int s = 0; s < k; s++)
      if ((long long)ids[t * k + s] == e) {
        rows[at++] = (int)(t * 16 + s);
        break;
      }
  const int n = total;
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
// warp 0 adds the others' partial sums (h3_mma_reduce, in warp order) and writes.
#define H3M_MMA_CHUNKS(acc, rows_of, K) \
  h3_mma_rows<4>(rows_of, xrow16, xlive, wr, K, 128 * (threadIdx.x >> 5), 128 * H3M_MMA_WARPS, acc); \
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

// Grid (E, F / 16), H3M_MMA_THREADS threads: outputs o0 = 16 * blockIdx.y .. + 15 of expert
// e: n-tiles gate o0.., gate o0+8.., up o0.., up o0+8..; act[t * k + s, o] as H3_MOE_NAME.
extern "C" __global__ void __launch_bounds__(H3M_MMA_THREADS) H3_MOE_MMA_NAME(
    const h3_bf16 *__restrict__ h, const h3_bf16 *__restrict__ gu, const int *__restrict__ lists,
    const int *__restrict__ counts, h3_bf16 *__restrict__ act, long long T, long long H,
    long long F, int k, float alpha, float limit) {
  const long long e = blockIdx.x, o0 = (long long)blockIdx.y * 16;
  const int *rows = lists + e * T, n = counts[e];
  const int lane = threadIdx.x & 31, g = lane / 4, t = lane & 3;
  const h3_bf16 *g0 = gu + e * 2 * F * H;
  const h3_bf16 *wr[4] = {g0 + (o0 + g) * H, g0 + (o0 + 8 + g) * H, g0 + (F + o0 + g) * H,
                          g0 + (F + o0 + 8 + g) * H};
  for (int r0 = 0; r0 < n; r0 += 16) {
    H3M_MMA_ROWS(rows, r0, n, H3M_H_ROW)
    float acc[4][4];
    H3M_MMA_CHUNKS(acc, h, H);
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

// Grid (E, H / 32), H3M_MMA_THREADS threads: y[t * k + s, o] = bf16(act[t * k + s] ·
// down[e, o]) for o = 32 * blockIdx.y .. + 31 (4 n-tiles).
extern "C" __global__ void __launch_bounds__(H3M_MMA_THREADS) H3_MOE_MMA_DOWN_NAME(
    const h3_bf16 *__restrict__ down, const int *__restrict__ lists, const int *__restrict__ counts,
    const h3_bf16 *__restrict__ act, h3_bf16 *__restrict__ y, long long T, long long H, long long F,
    int k) {
  const long long e = blockIdx.x, o0 = (long long)blockIdx.y * 32;
  const int *rows = lists + e * T, n = counts[e];
  const int lane = threadIdx.x & 31, g = lane / 4, t = lane & 3;
  const h3_bf16 *wr[4];
#pragma unroll
  for (int j = 0; j < 4; j++) wr[j] = down + (e * H + o0 + 8 * j + g) * F;
  for (int r0 = 0; r0 < n; r0 += 16) {
    H3M_MMA_ROWS(rows, r0, n, H3M_ACT_ROW)
    float acc[4][4];
    H3M_MMA_CHUNKS(acc, act, F);
#pragma unroll
    for (int q = 0; q < 4; q++) {
      const int r = r0 + g + 8 * (q / 2);
      if (threadIdx.x >= 32 || r >= n) continue;
      const long long yrow = H3M_ACT_ROW(rows[r]);
#pragma unroll
      for (int j = 0; j < 4; j++) h3_st(y, yrow * H + o0 + 8 * j + 2 * t + q % 2, acc[j][q]);
    }
  }
}
#endif

#if defined(H3_MOE_NAME) || defined(H3_MOE_MMA_NAME)
// The chosen experts of row t in ascending id order, each id once (the reference's selection
// sort): order[r] is the slot of the r-th, -1 after the last. k <= 16.
__device__ __forceinline__ void h3m_expert_order(const I_T *ids, long long t, int k, int *order) {
  long long last = -1;
  for (int r = 0; r < k; r++) {
    int bi = -1;
    long long be = 0;
    for (int s = 0; s < k; s++) {
      const long long e = (long long)ids[t * k + s];
      if (e > last && (bi < 0 || e < be)) bi = s, be = e;
    }
    order[r] = bi;
    if (bi < 0) return;
    last = be;
  }
}

// Grid (T, ceil(H / 256)), 256 threads: out[t, o] = sum of w[t, s] * y[t * k + s, o] over the
// slots in ascending expert order.
extern "C" __global__ void __launch_bounds__(256) H3_MOE_COMBINE_NAME(
    const I_T *__restrict__ ids, const B_T *__restrict__ wts, const h3_bf16 *__restrict__ y,
    O_T *__restrict__ out, long long H, int k) {
  const long long t = blockIdx.x, o = (long long)blockIdx.y * blockDim.x + threadIdx.x;
  if (o >= H) return;
  int order[16];
  h3m_expert_order(ids, t, k, order);
  float acc = 0.0f;
  for (int r = 0; r < k && order[r] >= 0; r++) {
    const int slot = order[r];
    acc = __fadd_rn(acc, __fmul_rn((float)h3_ld(wts, t * k + slot), h3_ld(y, (t * k + slot) * H + o)));
  }
  h3_st(out, t * H + o, acc);
}
#endif

#ifdef H3_MARKOV_NAME
extern "C" __global__ void __launch_bounds__(256) H3_MARKOV_NAME(
    const B_T *__restrict__ base, const W_T *__restrict__ w1, const W_T *__restrict__ w2,
    const I_T *__restrict__ prev0, O_T *__restrict__ z, I_T *__restrict__ draft, int G,
    long long V, int r) {
  H3_DYN_SMEM(float, e); // [r] the previous token's w1 row
  __shared__ float best_v[256];
  __shared__ long long best_i[256];
  __shared__ long long prev;
  if (threadIdx.x == 0) {
    long long p = (long long)*prev0;
    prev = p < 0 ? 0 : (p >= V ? V - 1 : p); // the CPU reports an id outside [0, V)
  }
  __syncthreads();
  for (int kk = 0; kk < G; kk++) {
    for (int i = threadIdx.x; i < r; i += blockDim.x) e[i] = (float)h3_ld(w1, prev * r + i);
    __syncthreads();
    float bv = 0.0f;
    long long bi = -1;
    for (long long v = threadIdx.x; v < V; v += blockDim.x) {
      float s = 0.0f;
      for (int i = 0; i < r; i++) s = __fadd_rn(s, __fmul_rn((float)h3_ld(w2, v * r + i), e[i]));
      const float zv = __fadd_rn((float)h3_ld(base, kk * V + v), s);
      h3_st(z, kk * V + v, zv);
      if (bi < 0 || zv > bv) bv = zv, bi = v; // v ascending per thread: first max kept
    }
    best_v[threadIdx.x] = bv;
    best_i[threadIdx.x] = bi;
    __syncthreads();
    if (threadIdx.x == 0) { // the first index of the largest value over all threads
      long long b = -1;
      float m = 0.0f;
      for (int i = 0; i < (int)blockDim.x; i++) {
        const long long j = best_i[i];
        if (j < 0) continue;
        if (b < 0 || best_v[i] > m || (best_v[i] == m && j < b)) b = j, m = best_v[i];
      }
      draft[kk] = (I_T)b;
      prev = b;
    }
    __syncthreads();
  }
}
#endif
