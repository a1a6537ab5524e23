// skinny_shapes.cu: the skinny GEMV (kernels/skinny_gemm.cu) at M3.1 small's batch-1 decode
// shapes over its launch shapes (columns per block cpb x K splits S), against a plain read of
// the same weight bytes (lab; not CI).
//   nvcc -std=c++17 -arch=sm_90a -O3 -I kernels -I include dev/skinny_shapes.cu -o skinny_shapes
//   ./skinny_shapes
// Question: the decode step's 22 dense GEMVs run at ~3.1 TB/s while the lm_head, with ~12
// waves of blocks, runs at 4.4; the shape rule (cuda_skinny_gemm.c) gives the others 288-384
// blocks (1.1-1.5 waves of 264 slots). Is it the launch shape? Each case rotates over weight
// copies of >= 400 MB in all, so that L2 holds none of the weight it reads (as in a decode
// step); times are the mean of 40 launches after 5 warm-ups. Every shape's y is checked
// against the S = 1 shape's (relative difference < 1e-2: only the fp32 sum order differs).
#include <vector>

#include "lab_cuda.cuh"
#include "lab_skinny.cuh"

struct shape { const char *name; long long N, K; };

int main() {
  const shape shapes[] = {{"qkv", 9216, 6144},          {"o_proj", 6144, 8192},   {"dense gate_up", 24576, 6144},
                          {"dense down", 6144, 12288}, {"shared gate_up", 6144, 6144}, {"shared down", 6144, 3072},
                          {"lm_head", 200064, 6144}};
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  void (*kern)(const h3_bf16 *, const h3_bf16 *, const float *, float *, float *, unsigned *, long long, long long,
               long long, int, int) = sk_m1;
  int occ = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, H3S_THREADS, 6144 * 2));
  printf("device: %d SMs; sk_m1 blocks per SM at 12 KiB of x: %d\n", sms, occ);
  unsigned *sink;
  CK(cudaMalloc(&sink, 4));
  for (const shape &sh : shapes) {
    const long long N = sh.N, K = sh.K, wn = N * K, bytes = wn * 2;
    const int copies = (int)((400ll << 20) / bytes + 2);
    std::vector<h3_bf16 *> w(copies);
    for (int c = 0; c < copies; c++) {
      CK(cudaMalloc(&w[c], bytes));
      fill_bf16<<<1024, 256>>>(w[c], wn, 17u * c + 1u);
    }
    h3_bf16 *x;
    float *y, *yref, *part;
    unsigned *cnt;
    CK(cudaMalloc(&x, K * 2));
    fill_bf16<<<64, 256>>>(x, K, 99u);
    CK(cudaMalloc(&y, N * 4));
    CK(cudaMalloc(&yref, N * 4));
    CK(cudaMalloc(&part, 64ll * N * 4));
    CK(cudaMalloc(&cnt, (N / 16 + 1) * 4));
    CK(cudaMemset(cnt, 0, (N / 16 + 1) * 4));
    // the read floor of these bytes
    const double floor_us =
        1e3 * mean_ms([&](int i) { read_words<<<sms * 8, 256>>>((const uint4 *)w[i % copies], bytes / 16, sink); }, 5, 40);
    printf("\n%s: N %lld K %lld, %.1f MB; plain read %.2f us (%.2f TB/s)\n", sh.name, N, K, bytes / 1e6, floor_us,
           bytes / floor_us / 1e6);
    printf("  %4s %3s %6s %7s %9s %8s %8s\n", "cpb", "S", "blocks", "waves", "us", "TB/s", "maxrel");
    const long long nkg = (K + 255) / 256;
    std::vector<float> hy(N), hr(N);
    bool have_ref = false;
    for (int cpb : {64, 32, 16}) {
      for (int S : {1, 2, 3, 4, 6, 8, 12, 16, 24}) {
        if (S > nkg) continue;
        const long long per = (nkg + S - 1) / S;
        const int splits = (int)((nkg + per - 1) / per), kr = (int)(per * 256);
        if (splits != S) continue;
        const long long cols = (N + cpb - 1) / cpb;
        const size_t smem = (size_t)(K < kr ? K : kr) * 2;
        dim3 grid((unsigned)cols, (unsigned)S);
        const double us = 1e3 * mean_ms([&](int i) {
          kern<<<grid, H3S_THREADS, smem>>>(x, w[i % copies], nullptr, y, part, cnt, 1, N, K, cpb, kr);
        }, 5, 40);
        // y of w[39 % copies]
        CK(cudaMemcpy(hy.data(), y, N * 4, cudaMemcpyDeviceToHost));
        if (!have_ref && S == 1) hr = hy, have_ref = true;
        double maxrel = 0;
        for (long long n = 0; n < N; n++) {
          const double d = fabs((double)hy[n] - hr[n]) / (fabs((double)hr[n]) + 1e-3);
          maxrel = d > maxrel ? d : maxrel;
        }
        printf("  %4d %3d %6lld %7.2f %9.2f %8.2f %8.1e%s\n", cpb, S, cols * S, (double)(cols * S) / (sms * occ), us,
               bytes / us / 1e6, maxrel, maxrel < 1e-2 ? "" : "  MISMATCH");
      }
    }
    for (auto p : w) CK(cudaFree(p));
    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaFree(yref));
    CK(cudaFree(part));
    CK(cudaFree(cnt));
  }
  return 0;
}
