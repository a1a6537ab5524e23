// int8_gemm.cu: the int8 GEMM of linear_int8 where cuBLASLt's int8 TN does not apply, and
// the dequantization that follows an int32 GEMM (exact tier, one rounding per output).
// Macros the user defines in front: H3_I8_GEMM_NAME, H3_I8_DQ_NAME (the two kernels' names),
// H3_B_T, H3_Y_T (element types of bias and y; bias may be NULL at run time).
// acc[m, n] = sum_k q[m, k] * w[n, k] in int32 (exact), k ascending; [rows, N] row-major
extern "C" __global__ void __launch_bounds__(256) H3_I8_GEMM_NAME(const signed char *__restrict__ q,
    const signed char *__restrict__ w, int *__restrict__ acc, long long rows, long long N,
    long long K) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < rows * N;
       i += (long long)gridDim.x * blockDim.x) {
    const long long m = i / N, n = i - m * N;
    const signed char *qr = q + m * K, *wr = w + n * K;
    int s = 0;
    for (long long k = 0; k < K; k++) s += (int)qr[k] * (int)wr[k];
    acc[i] = s;
  }
}
// y[m, n] = ((float)acc[m, n] * sx[m]) * sw[n] (+ bias[n]), one rounding; [rows, N]
extern "C" __global__ void __launch_bounds__(256) H3_I8_DQ_NAME(const int *__restrict__ acc,
    const float *__restrict__ sx, const float *__restrict__ sw,
    const H3_B_T *__restrict__ bias, H3_Y_T *__restrict__ y, long long rows, long long N) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < rows * N;
       i += (long long)gridDim.x * blockDim.x) {
    const long long m = i / N, n = i - m * N;
    float v = __fmul_rn(__fmul_rn(__int2float_rn(acc[i]), sx[m]), sw[n]);
    if (bias) v = __fadd_rn(v, (float)h3_ld(bias, n));
    h3_st(y, i, v);
  }
}
