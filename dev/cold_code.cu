// cold_code.cu: what fetching its code cold costs a short kernel of a decode step (lab; not CI).
//   nvcc -std=c++17 -arch=sm_90 -O3 dev/cold_code.cu -o cold_code && ./cold_code
// Question (dev/m31-decode.md): ncu put half the stall cycles of the batch-1 step's short
// kernels (decode attention, router, top-k: 70-120 KB of code each) on "no instruction". A
// step streams ~5.5 GB, so no kernel's code survives in L2 from one step to the next. Is the
// fetch of cold code worth shrinking the kernels for, and by how much per KB?
// Method: body<N> runs N straight-line steps (one FFMA with its own immediate each, 16 bytes
// of code: N = 256 .. 8192 is 4 .. 128 KB) over 8 accumulators, one block of 128 threads (the
// shape of a latency-bound kernel's last block). Three CUDA graphs per N, replayed:
//   cold:  a 1 GB read (L2 then holds none of the code), body<N>
//   base:  the same read, body<0>
//   twice: the same read, body<N>, body<N> (the second run finds its code warm)
// cold(N) = t(cold) - t(base): the kernel with its code fetched from memory; warm(N) =
// t(twice) - t(cold); fetch(N) = cold(N) - warm(N), printed per KB of code.
#include "lab_cuda.cuh"

#include <cuda_runtime.h>

#include <cstdio>
#include <algorithm>
#include <vector>

// the 1 GB read that evicts L2 (the weight stream of a step)
__global__ void flush_read(const uint4 *w, long long n, unsigned *sink) {
  unsigned acc = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const uint4 v = w[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc; // never in practice; keeps the loads
}

template <int N> __global__ void body(float *out, float seed) {
  float a[8];
#pragma unroll
  for (int i = 0; i < 8; i++) a[i] = seed + (float)(threadIdx.x + i);
#pragma unroll
  for (int i = 1; i <= N; i++) // a distinct immediate per step: no two steps fold into one
    a[i % 8] = __fmaf_rn(a[i % 8], 1.0f + (float)i * 1.0e-6f, a[(i + 3) % 8]);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; i++) s += a[i];
  if (s == 1.2345f) *out = s; // never in practice; keeps the steps
}

template <int N> static float graph_ms(const uint4 *w, long long words, unsigned *sink, float *out, int sms,
                                       int runs) {
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  flush_read<<<sms * 8, 256, 0, st>>>(w, words, sink);
  for (int r = 0; r < runs; r++) body<N><<<1, 128, 0, st>>>(out, 0.5f);
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  const float ms = mean_ms([&](int) { CK(cudaGraphLaunch(ge, st)); }, 3, 40);
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  CK(cudaStreamDestroy(st));
  return ms;
}

template <int N> static void measure(const uint4 *w, long long words, unsigned *sink, float *out, int sms,
                                     float base) {
  // alternate the forms so that the clock drifts alike on each: 3 rounds, the medians
  std::vector<float> c, t;
  for (int r = 0; r < 3; r++) {
    c.push_back(graph_ms<N>(w, words, sink, out, sms, 1));
    t.push_back(graph_ms<N>(w, words, sink, out, sms, 2));
  }
  std::sort(c.begin(), c.end());
  std::sort(t.begin(), t.end());
  const float cold = (c[1] - base) * 1e3f, warm = (t[1] - c[1]) * 1e3f, kb = N * 16 / 1024.0f;
  printf("N %5d  code ~%6.1f KB  cold %7.2f us  warm %7.2f us  fetch %7.2f us  (%.3f us per KB)\n", N, kb, cold,
         warm, cold - warm, (cold - warm) / kb);
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const long long bytes = 1ll << 30, words = bytes / 16;
  uint4 *w;
  unsigned *sink;
  float *out;
  CK(cudaMalloc(&w, bytes));
  CK(cudaMemset(w, 1, bytes));
  CK(cudaMalloc(&sink, 4));
  CK(cudaMalloc(&out, 4));
  std::vector<float> b;
  for (int r = 0; r < 3; r++) b.push_back(graph_ms<0>(w, words, sink, out, sms, 1));
  std::sort(b.begin(), b.end());
  printf("the 1 GB read + an empty kernel: %.2f us a graph (median of 3)\n", b[1] * 1e3f);
  measure<256>(w, words, sink, out, sms, b[1]);
  measure<1024>(w, words, sink, out, sms, b[1]);
  measure<2048>(w, words, sink, out, sms, b[1]);
  measure<4096>(w, words, sink, out, sms, b[1]);
  measure<8192>(w, words, sink, out, sms, b[1]);
  return 0;
}
