// cluster_placement.cu: does a kernel launched in thread-block clusters start later than the same
// blocks launched alone when another stream's GEMV holds the SMs? (lab; not CI)
//   nvcc -std=c++17 -arch=sm_90a -O3 -I dev dev/cluster_placement.cu -lcublas -o build-gpu/lab/cluster_placement
//   build-gpu/lab/cluster_placement
// Why (dev/m31-decode.md, 2026-12-06): three cluster forms of the decode step's small kernels
// were faster alone (the router 16.6 against 27.7 µs) but slower in the step's CUDA graph, where
// they run beside the side stream's GEMVs; the guess is that a cluster's blocks can only start
// together, on free SMs of one GPC. The same guess would explain why cuBLASLt picks with 2x1 /
// 1x2 clusters time well alone and lose in the step (call 88).
// Method: stream B runs cuBLAS GEMVs y = W x (W [6144, 6144] bf16, 75 MB, weight copies rotated
// past the L2) back to back, 40 of them (~1 ms); stream A, after a delay (a spin kernel of one
// block, ~100 µs), runs a small kernel X: `blocks` blocks of 256 threads that each spin ~5 µs
// (the latency-bound work), launched plain or in clusters of `blocks`. Events around X on stream
// A give its time from launch to end; each form 30 times, alternating; and X alone (no GEMVs).
// Prediction: alone both ~6-8 µs; beside the GEMVs the plain form +2-5 µs (it waits for a few
// free block slots), the cluster form of 8 blocks +10-20 µs. If the cluster form waits no longer
// than the plain one, placement is not the cost and the step's losses need ncu.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <vector>

#include "lab_cublas.cuh"
#include "lab_cuda.cuh"

__global__ void spin_us(long long cycles, unsigned *sink) { // every thread waits `cycles` clocks
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  if (threadIdx.x == 1023) *sink = 1;
}

// X on stream a between events e0 and e1: plain blocks, or one cluster of all of them
static void launch_x(cudaStream_t a, bool cluster, int blocks, long long cycles, unsigned *sink,
                       cudaEvent_t e0, cudaEvent_t e1) {
  CK(cudaEventRecord(e0, a));
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(256);
  cfg.stream = a;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeClusterDimension;
  at[0].val.clusterDim.x = cluster ? blocks : 1;
  at[0].val.clusterDim.y = 1;
  at[0].val.clusterDim.z = 1;
  cfg.attrs = at;
  cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, spin_us, cycles, sink));
  CK(cudaEventRecord(e1, a));
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int N = 6144, K = 6144, copies = 8, blocks = 8;
  int clock_khz = 0;
  CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const long long work = 5LL * clock_khz / 1000; // ~5 µs of clocks
  std::vector<__nv_bfloat16 *> w(copies);
  for (auto &p : w) {
    CK(cudaMalloc(&p, (size_t)N * K * 2));
    fill_bf16<<<1024, 256>>>(p, (long long)N * K, 7u);
  }
  __nv_bfloat16 *x;
  float *y;
  unsigned *sink;
  CK(cudaMalloc(&x, K * 2));
  CK(cudaMalloc(&y, N * 4));
  CK(cudaMalloc(&sink, 4));
  fill_bf16<<<8, 256>>>(x, K, 9u);
  CK(cudaDeviceSynchronize());
  cudaStream_t a, b;
  CK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  cublasHandle_t h;
  CB(cublasCreate(&h));
  CB(cublasSetStream(h, b));
  const float one = 1, zero = 0;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  printf("%s: X = %d blocks of 256 threads spinning ~5 us, plain or one cluster of %d\n", prop.name, blocks, blocks);
  for (int beside = 0; beside <= 1; beside++) {
    std::vector<float> t[2];
    for (int rep = 0; rep < 60; rep++) {
      const bool cluster = rep & 1;
      if (beside) {
        for (int i = 0; i < 40; i++)
          CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, 1, K, &one, w[i % copies], CUDA_R_16BF, K, x, CUDA_R_16BF,
                          K, &zero, y, CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        spin_us<<<1, 32, 0, a>>>(100LL * clock_khz / 1000, sink); // X starts ~100 µs into the GEMVs
      }
      launch_x(a, cluster, blocks, work, sink, e0, e1);
      CK(cudaDeviceSynchronize());
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (rep >= 4) t[cluster].push_back(1e3f * ms);
    }
    for (int c = 0; c < 2; c++) {
      std::sort(t[c].begin(), t[c].end());
      printf("  %-18s %-8s median %7.2f us, p10 %7.2f, p90 %7.2f (%zu runs)\n",
             beside ? "beside the GEMVs" : "alone", c ? "cluster" : "plain", t[c][t[c].size() / 2],
             t[c][t[c].size() / 10], t[c][t[c].size() * 9 / 10], t[c].size());
    }
  }
  return 0;
}
