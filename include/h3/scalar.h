/* scalar.h: scalar arithmetic whose exact semantics the CPU reference and the kernels share,
 * written once. It compiles as C11 (the cpu backend), as CUDA C under nvcc and as NVRTC
 * source: kernels/prelude.cuh #includes it, and the build embeds this text in its place
 * (kernels/embed.cmake), the way include/h3/rng.h is shared. Under NVRTC it includes no
 * header. Every function is integer arithmetic with one fixed result for every input, so
 * host and device agree bitwise by construction:
 *   h3_sc_floordiv(a, b)  a / b rounded toward minus infinity (Python's //); b == 0 gives 0
 *                         (the cpu backend reports the division by zero first); the one
 *                         overflowing quotient, INT64_MIN / -1, wraps to INT64_MIN;
 *   h3_sc_floormod(a, b)  a - b * floordiv(a, b): the remainder takes the divisor's sign
 *                         (Python's %); b == 0 gives 0; b == -1 gives 0;
 *   h3_sc_clamp_row(v, n) a row index clamped into [0, n) (n >= 1): what a gather, index or
 *                         KV write does with a row it cannot report from inside a kernel.
 */
#ifndef H3_SCALAR_H
#define H3_SCALAR_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define H3_SC static __host__ __device__ __forceinline__
#else
#define H3_SC static inline
#endif

H3_SC long long h3_sc_floordiv(long long a, long long b) {
  if (b == 0) return 0;
  if (b == -1) return (long long)(0ull - (unsigned long long)a);
  long long q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
  return q;
}

H3_SC long long h3_sc_floormod(long long a, long long b) {
  if (b == 0 || b == -1) return 0;
  long long r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

H3_SC long long h3_sc_clamp_row(long long v, long long n) { return v < 0 ? 0 : (v >= n ? n - 1 : v); }

#endif
