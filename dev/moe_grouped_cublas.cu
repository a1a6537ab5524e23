// moe_grouped_cublas.cu: the expert GEMMs of an M3.1 small prefill (32 experts, top 4; gate_up
// [rows_e, 6144] x [6144, 6144]^T, down [rows_e, 3072] x [6144, 3072]^T; bf16 in, fp32 compute,
// bf16 out) in cuBLAS's forms, against one dense GEMM of all rows (cublasGemmEx, the same
// FLOPs) (lab; not CI).
//   nvcc -std=c++17 -arch=sm_90a -O3 -I dev dev/moe_grouped_cublas.cu -lcublas -o moe_grouped_cublas
//   ./moe_grouped_cublas [tokens]      (default 2048: one prompt; 32768: a group of 16 prompts)
// Forms: cuBLAS's grouped GEMM (cublasGemmGroupedBatchedEx); one GEMM per expert on one stream
// (what moe's cuBLASLt form, runtime/cuda/cuda_m31_moe_lt.c, launches), and round-robin on 2
// and 4 streams (each GEMM's last partial wave under the next one's first); one strided batched
// GEMM over every expert padded to the most rows.
// Questions: (2048 tokens, 2026-12-03) h3's wgmma grouped GEMMs take 1.34 ms (gate_up) and
// 0.715 ms (down) per layer, ~460 TFLOP/s: would cuBLAS's grouped GEMM do better? (32768
// tokens, a prefill group: ~4096 rows per expert) moe's cuBLASLt form is ~26 ms a layer in the
// group's per-op profile with its gather, activation and combine passes (~560 TFLOP/s): how
// much of that is the per-expert GEMMs' own rate, and would streams or one batched launch lift
// it? Rows per expert come from a seeded uniform routing (each token 4 distinct experts) and
// from a skewed one (expert e drawn with weight 1 / (e + 1)). Times: mean of 20 calls after 3
// warm-ups, cudaEvents.

#include <vector>

#include "lab_cublas.cuh"
#include "lab_cuda.cuh"

static unsigned long long rng = 88172645463325252ull;
static double unit() {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (rng >> 11) * (1.0 / 9007199254740992.0);
}

// rows per expert of T tokens routed to k distinct experts of E; skew: weights 1 / (e + 1)
static std::vector<int> route(int T, int E, int k, bool skew) {
  std::vector<int> rows(E, 0);
  std::vector<double> w(E);
  double tot = 0;
  for (int e = 0; e < E; e++) tot += (w[e] = skew ? 1.0 / (e + 1) : 1.0);
  for (int t = 0; t < T; t++) {
    std::vector<bool> taken(E, false);
    for (int j = 0; j < k;) {
      double u = unit() * tot, c = 0;
      int e = 0;
      while (e < E - 1 && (c += w[e]) < u) e++;
      if (!taken[e]) taken[e] = true, rows[e]++, j++;
    }
  }
  return rows;
}

int main(int argc, char **argv) {
  const int T = argc > 1 ? atoi(argv[1]) : 2048, E = 32, k = 4, H = 6144, F = 3072, NS = 4;
  cublasHandle_t h, hs[NS];
  cudaStream_t st[NS];
  cudaEvent_t fork, join[NS];
  CB(cublasCreate(&h));
  void *ws;
  CK(cudaMalloc(&ws, 64 << 20));
  CB(cublasSetWorkspace(h, ws, 64 << 20));
  CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  for (int i = 0; i < NS; i++) { // a handle per stream, each its own workspace
    void *w;
    CK(cudaMalloc(&w, 64 << 20));
    CK(cudaStreamCreateWithFlags(&st[i], cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&join[i], cudaEventDisableTiming));
    CB(cublasCreate(&hs[i]));
    CB(cublasSetWorkspace(hs[i], w, 64 << 20));
    CB(cublasSetStream(hs[i], st[i]));
  }
  const long long R = (long long)T * k, RB = R + R / 4; // rows; the buffers' (padding's room)
  __nv_bfloat16 *x, *wgu, *wd, *y, *act;
  CK(cudaMalloc(&x, RB * H * 2));
  CK(cudaMalloc(&act, RB * F * 2));
  CK(cudaMalloc(&y, RB * (2 * F > H ? 2 * F : H) * 2));
  CK(cudaMalloc(&wgu, (long long)E * 2 * F * H * 2));
  CK(cudaMalloc(&wd, (long long)E * H * F * 2));
  fill_bf16<<<2048, 256>>>(x, RB * H, 1);
  fill_bf16<<<2048, 256>>>(act, RB * F, 2);
  fill_bf16<<<2048, 256>>>(wgu, (long long)E * 2 * F * H, 3);
  fill_bf16<<<2048, 256>>>(wd, (long long)E * H * F, 4);
  const float one = 1.0f, zero = 0.0f;
  // one product: Y [rows, N] = X [rows, K] W[N, K]^T per expert, row-major = column-major
  // Y^T (N x rows) = W (op T of the K x N column-major matrix) X^T
  auto grouped = [&](const std::vector<int> &rows, const __nv_bfloat16 *xs, const __nv_bfloat16 *ws_, int N, int K) {
    std::vector<cublasOperation_t> ta(E, CUBLAS_OP_T), tb(E, CUBLAS_OP_N);
    std::vector<int> m(E, N), n(E), kk(E, K), lda(E, K), ldb(E, K), ldc(E, N), gs(E, 1);
    std::vector<const void *> A(E), B(E);
    std::vector<void *> C(E);
    const void **dA, **dB; // the pointer arrays live in device memory (the batched APIs' rule)
    void **dC;
    std::vector<float> al(E, one), be(E, zero);
    long long off = 0;
    for (int e = 0; e < E; e++) {
      n[e] = rows[e];
      A[e] = ws_ + (long long)e * N * K;
      B[e] = xs + off * K;
      C[e] = y + off * N;
      off += rows[e];
    }
    CK(cudaMalloc(&dA, E * sizeof(void *)));
    CK(cudaMalloc(&dB, E * sizeof(void *)));
    CK(cudaMalloc(&dC, E * sizeof(void *)));
    CK(cudaMemcpy(dA, A.data(), E * sizeof(void *), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dB, B.data(), E * sizeof(void *), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dC, C.data(), E * sizeof(void *), cudaMemcpyHostToDevice));
    const float ms = mean_ms([&](int) {
      CB(cublasGemmGroupedBatchedEx(h, ta.data(), tb.data(), m.data(), n.data(), kk.data(), al.data(), dA,
                                    CUDA_R_16BF, lda.data(), dB, CUDA_R_16BF, ldb.data(), be.data(), dC,
                                    CUDA_R_16BF, ldc.data(), E, gs.data(), CUBLAS_COMPUTE_32F));
    }, 3, 20);
    CK(cudaFree(dA));
    CK(cudaFree(dB));
    CK(cudaFree(dC));
    return ms;
  };
  // one GEMM per expert, round-robin on the first `ns` streams (ns = 1: the legacy stream's
  // handle h, as the product launches them), joined back to the timed stream
  auto per_expert = [&](const std::vector<int> &rows, const __nv_bfloat16 *xs, const __nv_bfloat16 *ws_, int N,
                        int K, int ns) {
    return mean_ms([&](int) {
      if (ns > 1) {
        CK(cudaEventRecord(fork, 0));
        for (int i = 0; i < ns; i++) CK(cudaStreamWaitEvent(st[i], fork, 0));
      }
      long long off = 0;
      for (int e = 0; e < E; e++) {
        CB(cublasGemmEx(ns > 1 ? hs[e % ns] : h, CUBLAS_OP_T, CUBLAS_OP_N, N, rows[e], K, &one,
                        ws_ + (long long)e * N * K, CUDA_R_16BF, K, xs + off * K, CUDA_R_16BF, K, &zero,
                        y + off * N, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        off += rows[e];
      }
      for (int i = 0; ns > 1 && i < ns; i++) {
        CK(cudaEventRecord(join[i], st[i]));
        CK(cudaStreamWaitEvent(0, join[i], 0));
      }
    }, 3, 20);
  };
  // every expert padded to the most rows, one strided batched GEMM (its FLOPs counted unpadded)
  auto padded = [&](const std::vector<int> &rows, const __nv_bfloat16 *xs, const __nv_bfloat16 *ws_, int N, int K) {
    int most = 0;
    for (int r : rows) most = r > most ? r : most;
    if ((long long)most * E > RB) return -1.0f; // the buffers hold RB rows
    return mean_ms([&](int) {
      CB(cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, most, K, &one, ws_, CUDA_R_16BF, K,
                                    (long long)N * K, xs, CUDA_R_16BF, K, (long long)most * K, &zero, y,
                                    CUDA_R_16BF, N, (long long)most * N, E, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT));
    }, 3, 20);
  };
  auto dense = [&](const __nv_bfloat16 *xs, const __nv_bfloat16 *ws_, int N, int K) {
    return mean_ms([&](int) {
      CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, (int)R, K, &one, ws_, CUDA_R_16BF, K, xs, CUDA_R_16BF, K,
                      &zero, y, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }, 3, 20);
  };
  const double fl_gu = 2.0 * R * 2 * F * H, fl_d = 2.0 * R * H * F;
  printf("M3.1 small prefill, %d tokens, %d experts, top %d (%lld rows)\n", T, E, k, R);
  auto line = [&](const char *what, float gu, float dn) {
    if (gu < 0 || dn < 0) printf("  %-34s (the padded rows do not fit the buffers)\n", what);
    else
      printf("  %-34s gate_up %.3f ms (%.0f TFLOP/s), down %.3f ms (%.0f TFLOP/s)\n", what, gu, fl_gu / gu / 1e9,
             dn, fl_d / dn / 1e9);
  };
  for (int skew = 0; skew < 2; skew++) {
    std::vector<int> rows = route(T, E, k, skew);
    int lo = rows[0], hi = rows[0];
    for (int r : rows) lo = r < lo ? r : lo, hi = r > hi ? r : hi;
    printf("%s routing (rows per expert %d..%d):\n", skew ? "skewed" : "uniform", lo, hi);
    line("cuBLAS grouped", grouped(rows, x, wgu, 2 * F, H), grouped(rows, act, wd, H, F));
    for (int ns : {1, 2, 4}) {
      char what[64];
      snprintf(what, sizeof what, "a GEMM per expert, %d stream%s", ns, ns > 1 ? "s" : "");
      line(what, per_expert(rows, x, wgu, 2 * F, H, ns), per_expert(rows, act, wd, H, F, ns));
    }
    line("strided batched, padded", padded(rows, x, wgu, 2 * F, H), padded(rows, act, wd, H, F));
  }
  const float gu = dense(x, wgu, 2 * F, H), dn = dense(act, wd, H, F);
  printf("dense, one expert's weights for all %lld rows: gate_up %.3f ms (%.0f TFLOP/s), down %.3f ms (%.0f TFLOP/s)\n", R,
         gu, fl_gu / gu / 1e9, dn, fl_d / dn / 1e9);
  return 0;
}
