// stream_gemv.cu: can a batch-1 GEMV read its weight as fast as a plain read of the same
// bytes? (lab; not CI)
//   nvcc -std=c++17 -arch=sm_90a -O3 -I kernels -I include dev/stream_gemv.cu -lcublas -o stream_gemv
//   ./stream_gemv
// Question (dev/m31-decode.md): the decode step's GEMVs (cuBLASLt, or the skinny kernel) run
// at ~3.3-3.5 TB/s where a grid-stride read of the same 75-300 MB runs at 3.6-4.1; at batch
// 1 that gap is ~50-80 µs of the step. Both GEMVs give a warp or a block whole rows or
// columns of the weight (units of 12-24 KB), so their last wave is uneven and they start by
// staging x; the plain read hands out 16 bytes at a time.
// Method: sgemv<U> gives each warp units of 2 weight rows x 256 k (1 KB), unit u = (row pair
// u / S, segment u % S), S = K / 256, warps taking units gw, gw + GW, ... (GW warps in all,
// U units' loads in flight at once), x read through L1 (no staging). A unit's two dot
// products (fp32, fma in k order within a lane, then a butterfly) go to partials part[s][n];
// the last of a row pair's S units to finish (a ticket per row pair) adds the S partials in
// segment order and writes y: the sum order depends on K alone, so y is the same bits run to
// run. Against: the plain read of the weight (16-byte words, grid-stride, 8 blocks an SM) and
// cuBLAS's GEMM (y^T = W x, bf16 in, fp32 out) at M3.1 small's batch-1 shapes. Each case
// rotates over weight copies of >= 400 MB (L2 holds none of what it reads, as in a decode
// step); times are the mean of ~2 GB of launches (5 to 40) after a few warm-ups. Checks: y against cuBLAS's
// (relative to max |y|, < 1e-3: only the fp32 sum order differs) and bitwise against sgemv's
// own second run; NaN / Inf count as mismatches.
// The product's form of it (kernels/skinny_gemm.cu's _st, H3_LINEAR_FORM=stream: units of a row
// pair's 4 consecutive segments, one partial a unit, no fence in the loop: each lane fences once
// after the warp's last unit and then draws the tickets of the units it wrote) is timed beside
// them.
// Prediction: sgemv within ~5 % of the plain read at every shape (~3.7-3.9 TB/s), i.e. ~10 %
// faster than cuBLAS at 75-150 MB; if it is not, the tickets' fences (one per U units a warp)
// are the first suspect (variant: U = 8).
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "lab_cublas.cuh"
#include "lab_cuda.cuh"

#include "lab_skinny.cuh" // sk_st: the product's streaming form (H3_LINEAR_FORM=stream)

typedef __nv_bfloat16 bf16;

// y[N] = W[N, K] x[K] (fp32), N even, K a multiple of 256; part [S][N] f32 scratch, cnt
// [N / 2] u32, 0 before the launch and after it. 256 threads a block.
template <int U>
__global__ void __launch_bounds__(256) sgemv(const bf16 *__restrict__ x, const bf16 *__restrict__ w,
                                             float *__restrict__ y, float *part, unsigned *cnt, long long N,
                                             long long K) {
  const int lane = threadIdx.x & 31;
  const long long GW = (long long)gridDim.x * 8, gw = (long long)blockIdx.x * 8 + (threadIdx.x >> 5);
  const long long S = K / 256, units = N / 2 * S;
  for (long long u0 = gw; u0 < units; u0 += U * GW) {
    uint4 wv[U][2], xv[U];
#pragma unroll
    for (int j = 0; j < U; j++) { // every unit's loads first
      const long long u = u0 + j * GW, p = u / S, s = u % S;
      if (u < units) {
        const bf16 *r = w + 2 * p * K + s * 256 + 8 * lane;
        wv[j][0] = h3s_ldw(r);
        wv[j][1] = h3s_ldw(r + K);
        xv[j] = __ldg(reinterpret_cast<const uint4 *>(x + s * 256 + 8 * lane));
      }
    }
    float a[U][2];
#pragma unroll
    for (int j = 0; j < U; j++) {
      float xf[8], w0[8], w1[8];
      h3_bf16x8_f32(xv[j], xf), h3_bf16x8_f32(wv[j][0], w0), h3_bf16x8_f32(wv[j][1], w1);
      a[j][0] = a[j][1] = 0.0f;
#pragma unroll
      for (int e = 0; e < 8; e++) a[j][0] = __fmaf_rn(xf[e], w0[e], a[j][0]), a[j][1] = __fmaf_rn(xf[e], w1[e], a[j][1]);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1)
        a[j][0] = __fadd_rn(a[j][0], __shfl_xor_sync(0xffffffffu, a[j][0], o)),
        a[j][1] = __fadd_rn(a[j][1], __shfl_xor_sync(0xffffffffu, a[j][1], o));
    }
    unsigned last = 0; // bit j: this warp drew unit j's row pair's last ticket
    if (lane == 0) {
#pragma unroll
      for (int j = 0; j < U; j++) {
        const long long u = u0 + j * GW, p = u / S, s = u % S;
        if (u < units) part[s * N + 2 * p] = a[j][0], part[s * N + 2 * p + 1] = a[j][1];
      }
      __threadfence();
#pragma unroll
      for (int j = 0; j < U; j++) {
        const long long u = u0 + j * GW;
        if (u < units && atomicAdd(cnt + u / S, 1u) == (unsigned)(S - 1)) last |= 1u << j;
      }
      if (last) __threadfence();
    }
    last = __shfl_sync(0xffffffffu, last, 0);
    for (int j = 0; j < U; j++) { // the row pairs this warp completed: S partials in order
      if (!(last >> j & 1u)) continue;
      const long long p = (u0 + j * GW) / S;
      float s0 = 0.0f, s1 = 0.0f;
      for (long long b = 0; b < S; b += 32) {
        const long long s = b + lane;
        const float v0 = s < S ? __ldcg(part + s * N + 2 * p) : 0.0f, v1 = s < S ? __ldcg(part + s * N + 2 * p + 1) : 0.0f;
        for (int q = 0; q < 32 && b + q < S; q++)
          s0 = __fadd_rn(s0, __shfl_sync(0xffffffffu, v0, q)), s1 = __fadd_rn(s1, __shfl_sync(0xffffffffu, v1, q));
      }
      if (lane == 0) y[2 * p] = s0, y[2 * p + 1] = s1, cnt[p] = 0;
    }
  }
}

struct shape { const char *name; long long N, K; };

// max |a - b| / max |b| over n floats; NaN / Inf in a count as a mismatch (returned as 1e30)
// launches of a case: ~2 GB of weight reads in all, 5 to 40
static int iters_of(double bytes) { return (int)std::fmin(40.0, std::fmax(5.0, 2e9 / bytes)); }

template <int U>
static void run_sgemv(const char *tag, int blocks, const std::vector<bf16 *> &w, const bf16 *x, float *y,
                      float *part, unsigned *cnt, long long N, long long K, double bytes, double floor_us,
                      const std::vector<float> &ref) {
  const int copies = (int)w.size(), it = iters_of(bytes);
  const double us =
      1e3 * mean_ms([&](int i) { sgemv<U><<<blocks, 256>>>(x, w[i % copies], y, part, cnt, N, K); }, it / 8 + 1, it);
  std::vector<float> a((size_t)N), b((size_t)N);
  sgemv<U><<<blocks, 256>>>(x, w[0], y, part, cnt, N, K);
  CK(cudaMemcpy(a.data(), y, N * 4, cudaMemcpyDeviceToHost));
  sgemv<U><<<blocks, 256>>>(x, w[0], y, part, cnt, N, K);
  CK(cudaMemcpy(b.data(), y, N * 4, cudaMemcpyDeviceToHost));
  const bool same = std::equal(a.begin(), a.end(), b.begin(), [](float p, float q) { return !memcmp(&p, &q, 4); });
  printf("  %-14s U %d blocks %4d  %8.2f us  %5.2f TB/s  %5.3f x plain  rel %.1e%s\n", tag, U, blocks, us,
         bytes / us / 1e6, floor_us / us, rel_diff(a, ref), same ? "" : "  NOT BITWISE RUN TO RUN");
}

int main() {
  const shape shapes[] = {{"qkv", 9216, 6144},          {"o_proj", 6144, 8192},   {"dense gate_up", 24576, 6144},
                          {"dense down", 6144, 12288}, {"shared gate_up", 6144, 6144}, {"shared down", 6144, 3072},
                          {"lm_head", 200064, 6144}};
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int occ2 = 0, occ4 = 0, occ8 = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ2, sgemv<2>, 256, 0));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ4, sgemv<4>, 256, 0));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ8, sgemv<8>, 256, 0));
  printf("device: %d SMs; sgemv blocks per SM: U 2: %d, U 4: %d, U 8: %d\n", sms, occ2, occ4, occ8);
  cublasHandle_t h;
  CB(cublasCreate(&h));
  unsigned *sink;
  CK(cudaMalloc(&sink, 4));
  for (const shape &sh : shapes) {
    const long long N = sh.N, K = sh.K, wn = N * K;
    const double bytes = (double)wn * 2;
    const int copies = (int)((400ll << 20) / (long long)bytes + 2);
    std::vector<bf16 *> w(copies);
    for (int c = 0; c < copies; c++) {
      CK(cudaMalloc(&w[c], wn * 2));
      fill_bf16<<<1024, 256>>>(w[c], wn, 17u * c + 1u);
    }
    bf16 *x;
    float *y, *yref, *part;
    unsigned *cnt;
    CK(cudaMalloc(&x, K * 2));
    fill_bf16<<<64, 256>>>(x, K, 99u);
    CK(cudaMalloc(&y, N * 4));
    CK(cudaMalloc(&yref, N * 4));
    CK(cudaMalloc(&part, K / 256 * N * 4));
    CK(cudaMalloc(&cnt, (N + 1) / 2 * 4));
    CK(cudaMemset(cnt, 0, (N + 1) / 2 * 4));
    const double floor_us = 1e3 * mean_ms([&](int i) {
      read_words<<<sms * 8, 256>>>(reinterpret_cast<const uint4 *>(w[i % copies]), wn / 8, sink);
    }, iters_of(bytes) / 8 + 1, iters_of(bytes));
    const float one = 1.0f, zero = 0.0f;
    auto gemm = [&](int i, float *out) {
      CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, 1, (int)K, &one, w[i % copies], CUDA_R_16BF, (int)K, x,
                      CUDA_R_16BF, (int)K, &zero, out, CUDA_R_32F, (int)N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    };
    const double cublas_us = 1e3 * mean_ms([&](int i) { gemm(i, yref); }, iters_of(bytes) / 8 + 1, iters_of(bytes));
    gemm(0, yref);
    std::vector<float> ref((size_t)N);
    CK(cudaMemcpy(ref.data(), yref, N * 4, cudaMemcpyDeviceToHost));
    printf("\n%s: N %lld K %lld, %.1f MB\n  plain read     %8.2f us  %5.2f TB/s\n  cublas gemm    %8.2f us  %5.2f TB/s  %5.3f x plain\n",
           sh.name, N, K, bytes / 1e6, floor_us, bytes / floor_us / 1e6, cublas_us, bytes / cublas_us / 1e6,
           floor_us / cublas_us);
    { // the product's streaming form at its launcher's grid (2 blocks an SM)
      const int copies_ = (int)w.size(), it = iters_of(bytes), blocks = sms * 2;
      const double us = 1e3 * mean_ms([&](int i) {
        sk_st<<<blocks, 256>>>(x, w[i % copies_], nullptr, y, part, cnt, N, K);
      }, it / 8 + 1, it);
      std::vector<float> a((size_t)N);
      sk_st<<<blocks, 256>>>(x, w[0], nullptr, y, part, cnt, N, K);
      CK(cudaMemcpy(a.data(), y, N * 4, cudaMemcpyDeviceToHost));
      printf("  %-14s U - blocks %4d  %8.2f us  %5.2f TB/s  %5.3f x plain  rel %.1e\n", "product _st", blocks, us,
             bytes / us / 1e6, floor_us / us, rel_diff(a, ref));
    }
    for (int bps = 2; bps <= occ2; bps *= 2) run_sgemv<2>("sgemv", sms * bps, w, x, y, part, cnt, N, K, bytes, floor_us, ref);
    for (int bps = 2; bps <= occ4; bps *= 2) run_sgemv<4>("sgemv", sms * bps, w, x, y, part, cnt, N, K, bytes, floor_us, ref);
    for (int bps = 1; bps <= occ8; bps *= 2) run_sgemv<8>("sgemv", sms * bps, w, x, y, part, cnt, N, K, bytes, floor_us, ref);
    for (bf16 *p : w) CK(cudaFree(p));
    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaFree(yref));
    CK(cudaFree(part));
    CK(cudaFree(cnt));
  }
  CB(cublasDestroy(h));
  return 0;
}
