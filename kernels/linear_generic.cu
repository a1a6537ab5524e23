// linear_generic.cu: linear for any dtype combination cuBLASLt does not take (and the fp32
// island of H3). y[M, N] = x[M, K] . w[N, K]^T (+ bias[N]): 64x64 output tiles, 256 threads
// with 4x4 outputs each; every output is sum_k fp32(x)*fp32(w) with __fmul_rn / __fadd_rn,
// k ascending from 0, then + bias, then one rounding: the CPU reference's exact sequence, so
// the result is bitwise equal to it. Launch: grid (ceil(N/64), ceil(M/64)), 256 threads.
// Macros the user defines in front: H3_LINEAR_NAME (the kernel's name), H3_X_T, H3_W_T,
// H3_B_T, H3_Y_T (element types of x, w, bias, y; bias may be NULL at run time).
extern "C" __global__ void __launch_bounds__(256) H3_LINEAR_NAME(const H3_X_T *__restrict__ x,
    const H3_W_T *__restrict__ w, const H3_B_T *__restrict__ bias, H3_Y_T *__restrict__ y,
    long long M, long long N, long long K) {
  __shared__ float xs[16][65], ws[16][65]; // [k][row of the tile]
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const long long m0 = (long long)blockIdx.y * 64, n0 = (long long)blockIdx.x * 64;
  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
  for (long long k0 = 0; k0 < K; k0 += 16) {
    for (int e = threadIdx.x; e < 1024; e += 256) {
      const int r = e / 16, c = e % 16;
      const long long kk = k0 + c, mm = m0 + r, nn = n0 + r;
      xs[c][r] = (mm < M && kk < K) ? (float)h3_ld(x, mm * K + kk) : 0.0f;
      ws[c][r] = (nn < N && kk < K) ? (float)h3_ld(w, nn * K + kk) : 0.0f;
    }
    __syncthreads();
    const int kmax = K - k0 < 16 ? (int)(K - k0) : 16;
    for (int c = 0; c < kmax; c++) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; i++) { a[i] = xs[c][ty + 16 * i]; b[i] = ws[c][tx + 16 * i]; }
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = __fadd_rn(acc[i][j], __fmul_rn(a[i], b[j]));
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const long long m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
      if (m >= M || n >= N) continue;
      float v = acc[i][j];
      if (bias) v = __fadd_rn(v, (float)h3_ld(bias, n));
      h3_st(y, m * N + n, v);
    }
}
