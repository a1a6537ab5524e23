// l2_prefetch.cu: can a decode step's next weight stream be loaded into L2 while the
// latency-bound kernels before it (indexer top-k, decode attention, router: ~15-45 us each
// window, DRAM nearly idle) run? (lab; not CI)
//   nvcc -std=c++17 -arch=sm_90a -O3 -I kernels -I include dev/l2_prefetch.cu -lcublas -o l2_prefetch
//   ./l2_prefetch
// Per iteration (rotating over weight copies of >= 600 MB in all, so that L2 holds none of
// the weight it reads, as in a decode step): a prefetch kernel that issues
// cp.async.bulk.prefetch.L2 over the first P MB of the weight and exits, then a kernel that
// only waits (64 blocks spinning for `spin` us: the latency-bound window), then the GEMV
// y = W x (cuBLAS, M = 1: the default linear of a batch-1 step). Times: the mean of 30
// iterations after 5 warm-ups (cudaEvents around the three launches), against P = 0.
// Prediction (the step's arithmetic in dev/m31-decode.md): the GEMV saves ~P / 4 TB/s while
// P <= ~40 MB (L2 50 MB) and the window is long enough to fill it (P / ~3.5 TB/s).
#include <cublas_v2.h>

#include <vector>

#include "lab_cuda.cuh"

// cp.async.bulk.prefetch.L2 over bytes [0, P) of w, in chunks of `chunk` bytes (16-byte
// multiples), one per thread, then the kernel ends (nothing waits for the prefetches)
__global__ void prefetch_l2(const char *w, long long P, long long chunk) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x, o = i * chunk;
  if (o >= P) return;
  const long long n = P - o < chunk ? P - o : chunk;
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(w + o), "r"((unsigned)n) : "memory");
}

// the same with one prefetch.global.L2 per 128-byte line (the pre-Hopper form)
__global__ void prefetch_lines(const char *w, long long P) {
  for (long long o = (blockIdx.x * (long long)blockDim.x + threadIdx.x) * 128; o < P;
       o += (long long)gridDim.x * blockDim.x * 128)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(w + o));
}

// 64 blocks that wait `cycles` clocks (a latency-bound window: SMs busy, DRAM idle)
__global__ void spin(long long cycles, unsigned *sink) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  if (threadIdx.x == 1000) *sink = 1; // never
}

struct shape { const char *name; int N, K; };

int main() {
  int sms = 0, l2 = 0, khz = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  printf("device: %d SMs, L2 %.1f MB, clock %.2f GHz\n", sms, l2 / 1e6, khz / 1e6);
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
  unsigned *sink;
  CK(cudaMalloc(&sink, 4));
  const shape shapes[] = {{"o_proj", 6144, 8192}, {"qkv", 9216, 6144}, {"shared gate_up", 6144, 6144}};
  for (const shape &sh : shapes) {
    const long long wn = (long long)sh.N * sh.K, bytes = wn * 2;
    const int copies = (int)((600ll << 20) / bytes + 2);
    std::vector<__nv_bfloat16 *> w(copies);
    for (int c = 0; c < copies; c++) {
      CK(cudaMalloc(&w[c], bytes));
      fill_bf16<<<1024, 256>>>(w[c], wn, 17u * c + 1u);
    }
    __nv_bfloat16 *x, *y;
    CK(cudaMalloc(&x, sh.K * 2));
    CK(cudaMalloc(&y, sh.N * 2));
    fill_bf16<<<64, 256>>>(x, sh.K, 99u);
    const float one = 1.0f, zero = 0.0f;
    auto gemv = [&](int i) { // y[1, N] = x[1, K] W[N, K]^T (column-major: W^T x)
      cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, sh.N, 1, sh.K, &one, w[i % copies], CUDA_R_16BF, sh.K, x,
                   CUDA_R_16BF, sh.K, &zero, y, CUDA_R_16BF, sh.N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    };
    printf("\n%s: N %d K %d, %.1f MB\n", sh.name, sh.N, sh.K, bytes / 1e6);
    const double g_us = 1e3 * mean_ms(gemv, 5, 30);
    printf("  gemv alone %.2f us (%.2f TB/s)\n", g_us, bytes / g_us / 1e6);
    for (double spin_us : {15.0, 40.0}) {
      const long long cyc = (long long)(spin_us * khz / 1e3);
      const double s_us = 1e3 * mean_ms([&](int) { spin<<<64, 128>>>(cyc, sink); }, 5, 30);
      printf("  window %.0f us (spin kernel alone %.2f us)\n", spin_us, s_us);
      printf("    %-8s %6s %10s %10s %10s\n", "form", "P MB", "total us", "-window", "saved us");
      const double base = 1e3 * mean_ms([&](int i) { spin<<<64, 128>>>(cyc, sink); gemv(i); }, 5, 30);
      printf("    %-8s %6d %10.2f %10.2f %10s\n", "none", 0, base, base - s_us, "-");
      for (int form = 0; form < 2; form++)
        for (long long P : {8ll << 20, 16ll << 20, 32ll << 20, 48ll << 20}) {
          if (P > bytes) continue;
          const long long chunk = 64 << 10, nthr = (P + chunk - 1) / chunk;
          const double t = 1e3 * mean_ms([&](int i) {
            const char *wp = reinterpret_cast<const char *>(w[i % copies]);
            if (form == 0) prefetch_l2<<<(unsigned)((nthr + 127) / 128), 128>>>(wp, P, chunk);
            else prefetch_lines<<<2 * sms, 256>>>(wp, P);
            spin<<<64, 128>>>(cyc, sink);
            gemv(i);
          }, 5, 30);
          printf("    %-8s %6lld %10.2f %10.2f %10.2f\n", form ? "lines" : "bulk", P >> 20, t, t - s_us, base - t);
        }
    }
    // the prefetch kernel alone (does it end before its prefetches?)
    for (long long P : {16ll << 20, 48ll << 20}) {
      const long long chunk = 64 << 10, nthr = (P + chunk - 1) / chunk;
      const double t = 1e3 * mean_ms([&](int i) {
        prefetch_l2<<<(unsigned)((nthr + 127) / 128), 128>>>(reinterpret_cast<const char *>(w[i % copies]), P, chunk);
      }, 5, 30);
      printf("  bulk prefetch kernel alone, P %lld MB: %.2f us per launch\n", P >> 20, t);
    }
    for (auto p : w) CK(cudaFree(p));
    CK(cudaFree(x));
    CK(cudaFree(y));
  }
  CK(cudaGetLastError());
  return 0;
}
