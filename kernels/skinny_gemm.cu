// skinny_gemm.cu: linear of few rows (M <= 16) on CUDA cores, bound by the weight's bandwidth:
//   H3_SKINNY_NAME_m<MR> (x[M, K] bf16, w[N, K] bf16, bias[N] O_T or null, y[M, N] O_T,
//                         part f32[S, M, N], cnt u32[grid.x], M, N, K, cpb, kr)
//   y[m, n] = round(sum_k x[m, k] w[n, k] + bias[n]): fp32 sums, the bias added in fp32, one
//   rounding to O_T (runtime/cuda/cuda_gemm.c's contract for cuBLASLt's BIAS epilogue).
// Five kernels, MR = 1, 2, 4, 8, 16: the fewest of those rows that hold M (a row past M reads
// row M - 1 of x and is never stored). Launch (runtime/cuda/cuda_skinny_gemm.c picks cpb, kr
// and S from M, N, K alone, cuda_skinny_gemm.h, so that the sum order, hence every bit of y,
// depends on the inputs only): grid (ceil(N / cpb), S = ceil(K / kr)), H3S_THREADS threads,
// dynamic shared memory M * kr * 2 bytes. Requires K % 8 == 0 and x, w 16-byte aligned.
// Block (bx, s) stages x[0 .. M, s kr .. s kr + kr) into shared memory (cp.async, one barrier),
// then warp w computes the column pairs n = bx cpb + 2 (w + 8 i) (cpb a multiple of 16) over
// those k: lane l owns the 8 k at 8 l + 256 j of the range, H3S_U such 16-byte loads per
// weight row per iteration (2 H3S_U independent loads in flight per lane), each product
// added by fma in k order into the lane's fp32 sums, then the warp's 32 lane sums added by a
// fixed butterfly of shuffles.
// S == 1: y written directly. S > 1: fp32 partials part[s, M, N], then the last block of each
// column group (counter cnt[bx], u32, 0 before the launch and again after it) adds them in
// split order s = 0, 1, ... (never atomics on floats), adds the bias and writes y.
// The streaming form H3_SKINNY_NAME_st (one row of x, K a multiple of 256; below): work units
// of 1 KB of the weight handed out grid-stride, partials added by a ticket's last drawer.
// Every barrier and shuffle runs as often in every thread of a block
// (tests/m31/test_skinny_emu.cpp runs these kernels on the host under tests/codegen/host_emu.h).
// Macros the user defines in front: H3_SKINNY_NAME and O_T (y's and the bias's element type).

#define H3S_THREADS 256 // 8 warps
#define H3S_U 4         // 16-byte loads per weight row and lane per iteration

// 16 bytes of the weight, streamed: read once, kept out of L1
H3_DI uint4 h3s_ldw(const h3_bf16 *p) {
#ifdef __CUDA_ARCH__
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
#else
  return *reinterpret_cast<const uint4 *>(p);
#endif
}

// the 8 bf16 of v as fp32 (exact: a bf16 is the high half of its fp32)
H3_DI void h3s_f8(uint4 v, float *f) {
  const unsigned u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    f[2 * i] = __int_as_float((int)(u[i] << 16));
    f[2 * i + 1] = __int_as_float((int)(u[i] & 0xffff0000u));
  }
}

template <int MR>
__device__ void h3s_gemm(const h3_bf16 *x, const h3_bf16 *w, const O_T *bias, O_T *y, float *part,
                         unsigned *cnt, long long M, long long N, long long K, int cpb, int kr) {
  H3_DYN_SMEM(uint4, xs); // x[M, kn] of the block's k range, 8 bf16 per slot
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long kb = (long long)blockIdx.y * kr;
  const int kn = (int)(K - kb < kr ? K - kb : kr), ks = kn / 8; // k and slots of a row
  for (int i = threadIdx.x; i < M * ks; i += H3S_THREADS)
    h3_cp16(xs + i, x + (i / ks) * K + kb + 8 * (i % ks));
  h3_cp_commit();
  h3_cp_wait();
  __syncthreads();
  const long long c0 = (long long)blockIdx.x * cpb;
  const bool whole = gridDim.y == 1;
  // cpb / 16 pairs per warp in every block, so that every lane shuffles as often
  for (int pair = warp; 2 * pair < cpb; pair += H3S_THREADS / 32) {
    const long long n0 = c0 + 2 * pair;
    // the pair's weight rows (past N: row N - 1, never stored)
    const h3_bf16 *wr[2] = {w + (n0 < N ? n0 : N - 1) * K + kb, w + (n0 + 1 < N ? n0 + 1 : N - 1) * K + kb};
    float acc[MR][2];
#pragma unroll
    for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = 0.0f;
    for (int j0 = lane; j0 < ks; j0 += 32 * H3S_U) { // slot j0 + 32 u of each row
      uint4 wv[H3S_U][2];
#pragma unroll
      for (int u = 0; u < H3S_U; u++)
#pragma unroll
        for (int c = 0; c < 2; c++)
          if (j0 + 32 * u < ks) wv[u][c] = h3s_ldw(wr[c] + 8 * (j0 + 32 * u));
#pragma unroll
      for (int u = 0; u < H3S_U; u++) {
        const int j = j0 + 32 * u;
        if (j >= ks) break;
        float wf[2][8];
        h3s_f8(wv[u][0], wf[0]);
        h3s_f8(wv[u][1], wf[1]);
#pragma unroll
        for (int r = 0; r < MR; r++) {
          float xf[8];
          h3s_f8(xs[(r < M ? r : M - 1) * ks + j], xf);
#pragma unroll
          for (int e = 0; e < 8; e++) {
            acc[r][0] = __fmaf_rn(xf[e], wf[0][e], acc[r][0]);
            acc[r][1] = __fmaf_rn(xf[e], wf[1][e], acc[r][1]);
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < MR; r++)
#pragma unroll
      for (int c = 0; c < 2; c++) {
        float v = acc[r][c];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
        const long long n = n0 + c;
        if (lane != 2 * r + c || r >= M || n >= N) continue; // lane 2 r + c stores
        if (!whole) part[((long long)blockIdx.y * M + r) * N + n] = v;
        else h3_st(y, r * N + n, bias ? __fadd_rn(v, h3_w(bias[n])) : v);
      }
  }
  if (whole || !h3_last_block(cnt + blockIdx.x, gridDim.y)) return;
  const long long S = gridDim.y;
  for (int i = threadIdx.x; i < M * cpb; i += H3S_THREADS) {
    const long long r = i / cpb, n = c0 + i % cpb;
    if (n >= N) continue;
    const float *p = part + r * N + n;
    float sum = 0.0f;
    for (long long s = 0; s < S; s++) sum = __fadd_rn(sum, h3_ldcg(p + s * M * N));
    h3_st(y, r * N + n, bias ? __fadd_rn(sum, h3_w(bias[n])) : sum);
  }
}

#define H3S_CAT2(a, b) a##b
#define H3S_CAT(a, b) H3S_CAT2(a, b)
#define H3S_KERNEL(MR)                                                                               \
  extern "C" __global__ void __launch_bounds__(H3S_THREADS) H3S_CAT(H3_SKINNY_NAME, _m##MR)(        \
      const h3_bf16 *x, const h3_bf16 *w, const O_T *bias, O_T *y, float *part, unsigned *cnt,      \
      long long M, long long N, long long K, int cpb, int kr) {                                     \
    h3s_gemm<MR>(x, w, bias, y, part, cnt, M, N, K, cpb, kr);                                       \
  }
H3S_KERNEL(1)
H3S_KERNEL(2)
H3S_KERNEL(4)
H3S_KERNEL(8)
H3S_KERNEL(16)

// ---- the streaming form (M = 1) ----------------------------------------------------------------
// H3_SKINNY_NAME_st (x[1, K], w[N, K], bias[N] or null, y[1, N], part f32[S, N], cnt u32[P],
// N, K): y as above for one row of x, K a multiple of 256 (S = K / 256 segments), x and w
// 16-byte aligned; P = ceil(N / 2) row pairs. Work unit u = (pair p = u / S, segment s = u %
// S): rows 2p and 2p + 1 (row N - 1 read twice for odd N, never stored) over k = 256 s ..
// 256 s + 255, 1 KB of the weight: warp v of block b takes units 8 b + v + 8 i gridDim.x,
// H3S_SU of them per turn (every warp of a block as many turns; units past the last compute
// zeros), x read through the read-only cache (no staging, no barrier before the first load).
// A unit's two sums: lane l's 8 products at k = 256 s + 8 l added by fma in k order, then the
// warp's butterfly; lane 0 writes them to part[s, 2p .. 2p + 1], fences, and draws a ticket
// of cnt[p] (0 before the launch and after it). The drawer of a pair's S-th ticket lists it
// in shared memory; in the block's next turn, after that turn's loads are issued, a thread
// per listed row adds its S partials in segment order from 0 (then the bias), writes y and
// resets cnt[p]. The sums do not depend on the grid: any grid gives y's bits (the launcher's:
// 2 blocks an SM, all resident, 102 registers a thread).
#define H3S_SU 4 // units per warp and turn (their 8 16-byte weight loads in flight per lane)

// 16 bytes of x (read by every warp of every block: the read-only cache)
H3_DI uint4 h3s_ldx(const h3_bf16 *p) {
#ifdef __CUDA_ARCH__
  return __ldg(reinterpret_cast<const uint4 *>(p));
#else
  return *reinterpret_cast<const uint4 *>(p);
#endif
}

H3_DI unsigned h3s_ticket(unsigned *c) {
#ifdef __CUDA_ARCH__
  return atomicAdd(c, 1u);
#else
  return (*c)++;
#endif
}

// The rows listed by the block's last turn (done[warp][j]: a pair whose last ticket the warp
// drew, -1 none): thread 2 e + r completes row 2 p + r of entry e.
H3_DI void h3s_complete(const long long (*done)[H3S_SU], const O_T *bias, O_T *y, const float *part, unsigned *cnt,
                        long long N, long long S) {
  const int t = threadIdx.x;
  if (t >= 2 * 8 * H3S_SU) return;
  const long long p = done[(t >> 1) / H3S_SU][(t >> 1) % H3S_SU], n = p < 0 ? 0 : 2 * p + (t & 1);
  if (p < 0 || n >= N) return;
  h3_fence_gpu(); // the other blocks' partials, after the drawer's ticket
  const float *q = part + n;
  float sum = 0.0f;
  long long s = 0;
  for (; s + 8 <= S; s += 8) { // 8 loads in flight, added in order
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = h3_ldcg(q + (s + i) * N);
#pragma unroll
    for (int i = 0; i < 8; i++) sum = __fadd_rn(sum, v[i]);
  }
  for (; s < S; s++) sum = __fadd_rn(sum, h3_ldcg(q + s * N));
  h3_st(y, n, bias ? __fadd_rn(sum, h3_w(bias[n])) : sum);
  if ((t & 1) == 0) cnt[p] = 0u;
}

extern "C" __global__ void __launch_bounds__(H3S_THREADS, 2) H3S_CAT(H3_SKINNY_NAME, _st)(
    const h3_bf16 *x, const h3_bf16 *w, const O_T *bias, O_T *y, float *part, unsigned *cnt, long long N,
    long long K) {
  __shared__ long long done[H3S_THREADS / 32][H3S_SU];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long S = K / 256, P = (N + 1) / 2, units = P * S, step = 8ll * gridDim.x;
  if (lane == 0)
#pragma unroll
    for (int j = 0; j < H3S_SU; j++) done[warp][j] = -1;
  __syncthreads();
  for (long long base = 8ll * blockIdx.x;; base += H3S_SU * step) {
    const bool more = base < units; // the same in every thread of the block
    uint4 wv[H3S_SU][2], xv[H3S_SU];
#pragma unroll
    for (int j = 0; j < H3S_SU; j++) {
      const long long u = base + warp + j * step, p = u / S, s = u % S;
      wv[j][0] = wv[j][1] = xv[j] = uint4{0u, 0u, 0u, 0u};
      if (more && u < units) {
        const long long r0 = 2 * p, r1 = 2 * p + 1 < N ? 2 * p + 1 : N - 1;
        wv[j][0] = h3s_ldw(w + r0 * K + 256 * s + 8 * lane);
        wv[j][1] = h3s_ldw(w + r1 * K + 256 * s + 8 * lane);
        xv[j] = h3s_ldx(x + 256 * s + 8 * lane);
      }
    }
    h3s_complete(done, bias, y, part, cnt, N, S); // the last turn's rows, under these loads
    __syncthreads();                              // the list read before it is written again
    if (!more) break;
    float a[H3S_SU][2];
#pragma unroll
    for (int j = 0; j < H3S_SU; j++) {
      float xf[8], w0[8], w1[8];
      h3s_f8(xv[j], xf);
      h3s_f8(wv[j][0], w0);
      h3s_f8(wv[j][1], w1);
      a[j][0] = a[j][1] = 0.0f;
#pragma unroll
      for (int e = 0; e < 8; e++) {
        a[j][0] = __fmaf_rn(xf[e], w0[e], a[j][0]);
        a[j][1] = __fmaf_rn(xf[e], w1[e], a[j][1]);
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        a[j][0] = __fadd_rn(a[j][0], __shfl_xor_sync(0xffffffffu, a[j][0], o));
        a[j][1] = __fadd_rn(a[j][1], __shfl_xor_sync(0xffffffffu, a[j][1], o));
      }
    }
    if (lane == 0) {
#pragma unroll
      for (int j = 0; j < H3S_SU; j++) {
        const long long u = base + warp + j * step, p = u / S, s = u % S;
        if (u >= units) continue;
        part[s * N + 2 * p] = a[j][0];
        if (2 * p + 1 < N) part[s * N + 2 * p + 1] = a[j][1];
      }
      h3_fence_gpu(); // the partials before the tickets
#pragma unroll
      for (int j = 0; j < H3S_SU; j++) {
        const long long u = base + warp + j * step;
        done[warp][j] = u < units && h3s_ticket(cnt + u / S) == (unsigned)(S - 1) ? u / S : -1;
      }
    }
    __syncthreads(); // the list written before the next turn completes it
  }
}
