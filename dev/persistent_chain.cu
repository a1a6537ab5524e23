// persistent_chain.cu: what a batch-1 decode step would gain if the glue between its GEMVs ran
// inside one persistent kernel instead of as launches between cuBLAS GEMVs (lab; not CI).
//   nvcc -std=c++17 -arch=sm_90a -O3 -I dev dev/persistent_chain.cu -lcublas -o build-gpu/lab/persistent_chain
//   build-gpu/lab/persistent_chain [layers] [blocks an SM]
// Question (dev/m31-decode.md, 2026-12-06): the batch-1 step of M3.1 small is ~0.3 ms above its
// bandwidth floor on the H200; ~40 dependent launches on the main stream at ~1.8 µs each, the
// small kernels' own latency chains and each weight read's ramp and tail make it. Fusing one
// more pair of kernels saves ~2 µs; only a different structure moves it by 100 µs.
// Method: a stand-in of a sparse layer's main stream, `layers` times (own weights each, 326 MB a
// layer: L2 holds none of it across runs), four GEMVs y = W v (bf16 W [N, K], fp32 y):
//   qkv [9216, 6144] <- v = rmsnorm(x); o [6144, 8192] <- v = y / 2 (the attention's stand-in);
//   gate_up [6144, 6144] <- x += y, v = rmsnorm(x); down [6144, 3072] <- v = silu(y0) * y1;
//   the next layer's qkv <- x += y, v = rmsnorm(x); at the end x += y is the output.
// The glue (glue_phase) is the same code in both forms, 256 threads, so its bits are the same.
//   A "graph": per phase a 1-block glue kernel and cublasGemmEx, captured once in a CUDA graph.
//   B "persistent": one kernel, 3 blocks an SM (all resident; rows a warp 2.9 at qkv, 1.9 else:
//     the last row's imbalance ~3 %), per phase every block runs the glue
//     itself (x and v in its shared memory, the previous y read from L2), then its warps take
//     weight rows grid-stride (16-byte loads, 8 in flight a lane, a warp a row); a grid barrier
//     (a counter: fence, add, spin) ends the phase. PF = 0, 1, 2: before waiting at the barrier
//     each warp asks for its first PF rows of the next phase in L2 (cp.async.bulk.prefetch.L2),
//     so the wait and the glue overlap the next phase's first reads.
//   A0: A's GEMVs alone in a graph (no glue kernels): what the glue launches add to A.
//   floor: one grid-stride read of all the weights.
// Checks: B's output against A's (relative to max |x|; only the GEMVs' fp32 sum orders differ),
// NaN / Inf fail; B bitwise run to run.
// Prediction (H100; H200 alike in ratio): A ~1.2 x the floor (16 phases x ~5 µs of glue and launch
// gaps over ~100-120 µs of reads a layer); B with PF = 0 near A (its barrier and redundant glue
// cost ~2 µs a phase, its GEMV a few % below cuBLAS's rate); B with PF = 1 ~1.08-1.10 x the
// floor. If B PF 1 beats A by >= 8 %, a persistent layer kernel is the lever for issue 17's
// batch 1 (~-100 µs a step); if not, the step's structure is not where the gap is.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <cstring>
#include <vector>

#include "lab_cublas.cuh"
#include "lab_cuda.cuh"

constexpr int H = 6144, THREADS = 256, WARPS = THREADS / 32, UNROLL = 8, PHASES = 4;
// phase q's weight: [pn(q), pk(q)]
__host__ __device__ constexpr int pn(int q) { return q == 0 ? 9216 : 6144; }
__host__ __device__ constexpr int pk(int q) { return q == 1 ? 8192 : q == 3 ? 3072 : 6144; }

struct chain {
  const __nv_bfloat16 *w[64]; // [layers * PHASES] weights
  int n_phase;
  float *y[2];                // ping-pong outputs, 9216 floats each
};

// The block's sum of a (every thread's part), 256 threads: warp shuffles, then warp 0.
__device__ float block_sum(float a, float *red) {
  for (int o = 16; o; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
  __syncthreads();
  if (l == 0) red[w] = a;
  __syncthreads();
  float s = 0;
  for (int i = 0; i < WARPS; i++) s += red[i];
  return s;
}

// The glue before phase p: x (H floats) and v (pk(p % 4) bf16) from the previous phase's y.
__device__ void glue_phase(int p, float *x, __nv_bfloat16 *v, const float *yprev, float *red) {
  const int q = p % PHASES, t = threadIdx.x;
  if (q == 1) {
    for (int k = t; k < pk(1); k += THREADS) v[k] = __float2bfloat16_rn(0.5f * __ldcg(yprev + k));
    return;
  }
  if (q == 3) {
    for (int k = t; k < pk(3); k += THREADS) {
      const float g = __ldcg(yprev + k), u = __ldcg(yprev + pk(3) + k);
      v[k] = __float2bfloat16_rn(g / (1.0f + __expf(-g)) * u);
    }
    return;
  }
  float ss = 0;
  for (int k = t; k < H; k += THREADS) {
    const float xn = p > 0 ? x[k] + __ldcg(yprev + k) : x[k];
    x[k] = xn;
    ss += xn * xn;
  }
  const float r = rsqrtf(block_sum(ss, red) / H + 1e-6f);
  for (int k = t; k < H; k += THREADS) v[k] = __float2bfloat16_rn(x[k] * r);
  __syncthreads();
}

// A's glue: one block; x in global memory.
__global__ void __launch_bounds__(THREADS) glue_kernel(int p, float *x, __nv_bfloat16 *v, const float *yprev) {
  __shared__ float red[WARPS];
  glue_phase(p, x, v, yprev, red);
}
__global__ void __launch_bounds__(THREADS) final_add(float *x, const float *y) {
  for (int k = threadIdx.x; k < H; k += THREADS) x[k] += __ldcg(y + k);
}

__device__ float dot8(uint4 w, const __nv_bfloat16 *v) {
  const __nv_bfloat162 *a = reinterpret_cast<const __nv_bfloat162 *>(&w);
  const __nv_bfloat162 *b = reinterpret_cast<const __nv_bfloat162 *>(v);
  float s = 0;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const float2 fa = __bfloat1622float2(a[i]), fb = __bfloat1622float2(b[i]);
    s = fmaf(fa.x, fb.x, s);
    s = fmaf(fa.y, fb.y, s);
  }
  return s;
}

__device__ void prefetch_l2(const void *p, unsigned bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}

// B: the whole chain. bar: the grid barrier's counter (monotonic; base: its value at launch).
template <int PF>
__global__ void __launch_bounds__(THREADS, 3) persistent(chain c, float *out, unsigned *bar, unsigned base) {
  __shared__ float x[H], red[WARPS];
  __shared__ __align__(16) __nv_bfloat16 v[8192];
  const int lane = threadIdx.x & 31, gw = blockIdx.x * WARPS + (threadIdx.x >> 5), GW = gridDim.x * WARPS;
  for (int k = threadIdx.x; k < H; k += THREADS) x[k] = 1.0f + 0.001f * (k % 97); // the input
  for (int p = 0; p < c.n_phase; p++) {
    glue_phase(p, x, v, c.y[(p + 1) & 1], red);
    __syncthreads();
    const int N = pn(p % PHASES), K = pk(p % PHASES);
    const __nv_bfloat16 *W = c.w[p];
    float *y = c.y[p & 1];
    for (int r = gw; r < N; r += GW) {
      const uint4 *row = reinterpret_cast<const uint4 *>(W + (size_t)r * K);
      float s = 0;
      for (int c0 = 0; c0 < K / 8; c0 += 32 * UNROLL) { // K / 8 words a row, UNROLL a lane in flight
        uint4 wv[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
          const int j = c0 + u * 32 + lane;
          wv[u] = j < K / 8 ? __ldcs(row + j) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
          const int j = c0 + u * 32 + lane;
          if (j < K / 8) s += dot8(wv[u], v + 8 * j);
        }
      }
      for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
      if (lane == 0) __stcg(y + r, s);
    }
    if (PF > 0 && p + 1 < c.n_phase && lane == 0) { // the next phase's first rows of this warp
      const int N1 = pn((p + 1) % PHASES), K1 = pk((p + 1) % PHASES);
      for (int i = 0; i < PF && gw + i * GW < N1; i++)
        prefetch_l2(c.w[p + 1] + (size_t)(gw + i * GW) * K1, (unsigned)K1 * 2u);
    }
    __syncthreads();
    if (threadIdx.x == 0) { // the grid barrier
      __threadfence();
      atomicAdd(bar, 1u);
      const unsigned want = base + (unsigned)(p + 1) * gridDim.x;
      unsigned got;
      do asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(got) : "l"(bar));
      while ((int)(got - want) < 0);
    }
    __syncthreads();
  }
  if (blockIdx.x == 0)
    for (int k = threadIdx.x; k < H; k += THREADS) out[k] = x[k] + __ldcg(c.y[(c.n_phase - 1) & 1] + k);
}

__global__ void plain_read(const uint4 *p, long long n, unsigned *sink) {
  unsigned a = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const uint4 q = __ldcs(p + i);
    a ^= q.x ^ q.y ^ q.z ^ q.w;
  }
  if (a == 0x9e3779b9u) *sink = a;
}

int main(int argc, char **argv) {
  const int layers = argc > 1 ? atoi(argv[1]) : 4, want_per_sm = argc > 2 ? atoi(argv[2]) : 3;
  if (layers < 1 || layers * PHASES > 64 || want_per_sm < 1) {
    fprintf(stderr, "usage: persistent_chain [layers 1 .. 16] [blocks an SM, default 3]\n");
    return 1;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  chain c{};
  c.n_phase = layers * PHASES;
  size_t bytes = 0;
  for (int p = 0; p < c.n_phase; p++) bytes += (size_t)pn(p % PHASES) * pk(p % PHASES) * 2;
  __nv_bfloat16 *wall;
  CK(cudaMalloc(&wall, bytes));
  size_t off = 0;
  for (int p = 0; p < c.n_phase; p++) {
    const long long n = (long long)pn(p % PHASES) * pk(p % PHASES);
    c.w[p] = wall + off;
    fill_bf16<<<1024, 256>>>(wall + off, n, 0x1234u + 77u * p);
    off += (size_t)n;
  }
  CK(cudaDeviceSynchronize()); // the fills ran on the legacy stream; the runs below on a non-blocking one
  for (float *&y : c.y) CK(cudaMalloc(&y, 9216 * sizeof(float)));
  float *x, *outa, *outb;
  __nv_bfloat16 *v;
  unsigned *bar, *sink;
  CK(cudaMalloc(&x, H * sizeof(float)));
  CK(cudaMalloc(&outa, H * sizeof(float)));
  CK(cudaMalloc(&outb, H * sizeof(float)));
  CK(cudaMalloc(&v, 8192 * sizeof(__nv_bfloat16)));
  CK(cudaMalloc(&bar, 4));
  CK(cudaMalloc(&sink, 4));
  CK(cudaMemset(bar, 0, 4));
  std::vector<float> x0(H);
  for (int k = 0; k < H; k++) x0[k] = 1.0f + 0.001f * (k % 97); // as the persistent kernel's
  float *x0d;
  CK(cudaMalloc(&x0d, H * sizeof(float)));
  CK(cudaMemcpy(x0d, x0.data(), H * sizeof(float), cudaMemcpyHostToDevice));

  // A: glue kernels and cuBLAS GEMVs in one CUDA graph
  cublasHandle_t h;
  CB(cublasCreate(&h));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  CB(cublasSetStream(h, st));
  const float one = 1.0f, zero = 0.0f;
  auto chain_a = [&] {
    CK(cudaMemcpyAsync(x, x0d, H * sizeof(float), cudaMemcpyDeviceToDevice, st));
    for (int p = 0; p < c.n_phase; p++) {
      glue_kernel<<<1, THREADS, 0, st>>>(p, x, v, c.y[(p + 1) & 1]);
      const int N = pn(p % PHASES), K = pk(p % PHASES);
      CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, 1, K, &one, c.w[p], CUDA_R_16BF, K, v, CUDA_R_16BF, K,
                      &zero, c.y[p & 1], CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
    final_add<<<1, THREADS, 0, st>>>(x, c.y[(c.n_phase - 1) & 1]);
  };
  chain_a(); // cuBLAS's first call outside the capture
  CK(cudaStreamSynchronize(st));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  chain_a();
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  cudaGraph_t g0; // A0: the GEMVs alone, back to back (v as the last glue left it): the glue's share
  cudaGraphExec_t ge0;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int p = 0; p < c.n_phase; p++) {
    const int N = pn(p % PHASES), K = pk(p % PHASES);
    CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, 1, K, &one, c.w[p], CUDA_R_16BF, K, v, CUDA_R_16BF, K, &zero,
                    c.y[p & 1], CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  CK(cudaStreamEndCapture(st, &g0));
  CK(cudaGraphInstantiate(&ge0, g0, 0));
  CK(cudaGraphLaunch(ge, st));
  CK(cudaMemcpyAsync(outa, x, H * sizeof(float), cudaMemcpyDeviceToDevice, st));
  CK(cudaStreamSynchronize(st));
  std::vector<float> ref(H), got(H), again(H);
  CK(cudaMemcpy(ref.data(), outa, H * sizeof(float), cudaMemcpyDeviceToHost));

  // B: the grid of resident blocks
  int occ = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, persistent<1>, THREADS, 0));
  const int per_sm = occ < want_per_sm ? occ : want_per_sm, grid = per_sm * prop.multiProcessorCount;
  if (per_sm < 1) {
    fprintf(stderr, "the persistent kernel does not fit an SM\n");
    return 1;
  }
  unsigned base = 0;
  auto run_b = [&](int pf) {
    if (pf == 0) persistent<0><<<grid, THREADS, 0, st>>>(c, outb, bar, base);
    else if (pf == 1) persistent<1><<<grid, THREADS, 0, st>>>(c, outb, bar, base);
    else persistent<2><<<grid, THREADS, 0, st>>>(c, outb, bar, base);
    base += (unsigned)c.n_phase * (unsigned)grid;
  };
  auto time_it = [&](auto f) { return 1e3 * mean_ms([&](int) { f(); }, 3, 20, st) / layers; }; // µs a layer
  printf("%s, %d SMs; %d layers of 4 GEMVs, %.1f MB of weights a layer; persistent grid %d x %d threads\n",
         prop.name, prop.multiProcessorCount, layers, bytes / 1e6 / layers, grid, THREADS);
  const long long words = (long long)(bytes / 16);
  const double floor_us = time_it([&] { plain_read<<<8 * prop.multiProcessorCount, 256, 0, st>>>((const uint4 *)wall, words, sink); });
  const double a0_us = time_it([&] { CK(cudaGraphLaunch(ge0, st)); });
  const double a_us = time_it([&] { CK(cudaGraphLaunch(ge, st)); });
  printf("  %-34s %8.1f us a layer  %5.2f TB/s  %.3f x floor\n", "floor (a plain read)", floor_us,
         bytes / layers / floor_us / 1e6, 1.0);
  printf("  %-34s %8.1f us a layer  %5.2f TB/s  %.3f x floor\n", "A0: cuBLAS alone, a graph", a0_us,
         bytes / layers / a0_us / 1e6, a0_us / floor_us);
  printf("  %-34s %8.1f us a layer  %5.2f TB/s  %.3f x floor\n", "A: glue kernels + cuBLAS, a graph", a_us,
         bytes / layers / a_us / 1e6, a_us / floor_us);
  for (int pf = 0; pf <= 2; pf++) {
    run_b(pf);
    CK(cudaStreamSynchronize(st));
    CK(cudaMemcpy(got.data(), outb, H * sizeof(float), cudaMemcpyDeviceToHost));
    run_b(pf);
    CK(cudaStreamSynchronize(st));
    CK(cudaMemcpy(again.data(), outb, H * sizeof(float), cudaMemcpyDeviceToHost));
    const double b_us = time_it([&] { run_b(pf); });
    const double rd = rel_diff(got, ref);
    const bool same = !memcmp(got.data(), again.data(), H * sizeof(float));
    char name[64];
    snprintf(name, sizeof name, "B: persistent, prefetch %d row%s", pf, pf == 1 ? "" : "s");
    printf("  %-34s %8.1f us a layer  %5.2f TB/s  %.3f x floor  %.3f x A  rel diff %.2e %s%s\n", name, b_us,
           bytes / layers / b_us / 1e6, b_us / floor_us, b_us / a_us, rd, rd < 1e-2 ? "ok" : "MISMATCH",
           same ? "" : " (not bitwise run to run)");
  }
  return 0;
}
