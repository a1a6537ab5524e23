// gemv.cu: linear for few rows (a decode step's tokens): y[M, N] = x[M, K] · w[N, K]ᵀ
// (+ bias[N]) with x and w bf16, M <= 16, K a multiple of 128; fp32 sums (tensor cores, in
// another order than the CPU reference's ascending one: the lossless tier), + bias, one
// rounding to Y_T. Bandwidth-bound: each weight byte is read once, straight into mma
// fragments (h3_mma_rows of the prelude), and the block's warps split K so that many loads
// are in flight even when N is small.
//   H3_GEMV_NAME, grid (ceil(N / 32)), H3G_THREADS threads: block b computes outputs
//   32b .. 32b + 31 (4 n-tiles of m16n8k16; the M rows padded to 16 with zeros); warp w
//   takes the K chunks w, w + H3G_WARPS, ...; warp 0 adds the partial sums in warp order
//   (h3_mma_reduce), the bias, and stores. Outputs past N read weight row N - 1 and are not
//   stored.
// Macros the user defines in front: H3_GEMV_NAME, Y_T (the type of y and of bias; bias may be
// NULL at run time).
#define H3G_WARPS 8
#define H3G_THREADS (32 * H3G_WARPS)

extern "C" __global__ void __launch_bounds__(H3G_THREADS) H3_GEMV_NAME(
    const h3_bf16 *__restrict__ x, const h3_bf16 *__restrict__ w, const Y_T *__restrict__ bias,
    Y_T *__restrict__ y, long long M, long long N, long long K) {
  const long long n0 = (long long)blockIdx.x * 32;
  const int lane = threadIdx.x & 31, g = lane / 4, t = lane & 3;
  const h3_bf16 *wr[4];
#pragma unroll
  for (int j = 0; j < 4; j++) {
    const long long n = n0 + 8 * j + g;
    wr[j] = w + (n < N ? n : N - 1) * K;
  }
  const bool xlive[2] = {g < M, g + 8 < M};
  const long long xrow[2] = {xlive[0] ? g : 0, xlive[1] ? g + 8 : 0};
  float acc[4][4];
  h3_mma_rows<4>(x, xrow, xlive, wr, K, 128 * (threadIdx.x >> 5), 128 * H3G_WARPS, acc);
  h3_mma_reduce<4, H3G_WARPS>(acc);
  if (threadIdx.x >= 32) return;
#pragma unroll
  for (int q = 0; q < 4; q++) { // (row g + 8 (q / 2), output 2t + q % 2) of each n-tile
    const long long m = g + 8 * (q / 2);
    if (m >= M) continue;
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const long long n = n0 + 8 * j + 2 * t + q % 2;
      if (n >= N) continue;
      float v = acc[j][q];
      if (bias) v = __fadd_rn(v, (float)h3_ld(bias, n));
      h3_st(y, m * N + n, v);
    }
  }
}
