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
// Every barrier runs as often in every thread of a block (tests/m31/test_skinny_emu.cpp runs
// these kernels on the host under tests/codegen/host_emu.h).
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
