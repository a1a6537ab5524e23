// lab_cuda.cuh: what the stand-alone CUDA benches of dev/ share (lab; not CI): CK (a CUDA call
// that must succeed, else the file:line and exit 1), fill_bf16 (hashed values in [-0.05,
// 0.05)), mean_ms (the mean time of `iters` calls of f after `warm` warm-ups, cudaEvents on
// `stream`, the legacy stream by default) and
// rel_diff (the largest |a - b| over the largest |b|; 1e30 where a holds a NaN or Inf).
#pragma once
#include <cuda_bf16.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

static inline double rel_diff(const std::vector<float> &a, const std::vector<float> &b) {
  double m = 0, d = 0;
  for (size_t i = 0; i < a.size(); i++) {
    if (!std::isfinite(a[i])) return 1e30;
    m = std::fmax(m, std::fabs((double)b[i]));
    d = std::fmax(d, std::fabs((double)a[i] - b[i]));
  }
  return m > 0 ? d / m : d;
}

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));                \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

__global__ void fill_bf16(__nv_bfloat16 *p, long long n, unsigned seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
    p[i] = __float2bfloat16_rn(((h & 0xffff) / 65536.0f - 0.5f) * 0.1f);
  }
}

template <typename F> float mean_ms(F f, int warm, int iters, cudaStream_t stream = 0) {
  static cudaEvent_t e0, e1;
  if (!e0) {
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
  }
  for (int i = 0; i < warm; i++) f(i);
  CK(cudaEventRecord(e0, stream));
  for (int i = 0; i < iters; i++) f(i);
  CK(cudaEventRecord(e1, stream));
  CK(cudaEventSynchronize(e1));
  CK(cudaGetLastError());
  float ms;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  return ms / iters;
}
