// moe_grouped_cublas.cu: cuBLAS's grouped GEMM (cublasGemmGroupedBatchedEx, bf16 in, fp32
// compute, bf16 out) at the expert GEMMs of an M3.1 small prefill of 2048 tokens (32 experts,
// top 4: 8192 rows; gate_up [rows_e, 6144] x [6144, 6144]^T, down [rows_e, 3072] x [6144,
// 3072]^T), against one dense GEMM of all 8192 rows (cublasGemmEx, the same FLOPs) (lab; not CI).
//   nvcc -std=c++17 -arch=sm_90a -O3 dev/moe_grouped_cublas.cu -lcublas -o moe_grouped_cublas
//   ./moe_grouped_cublas
// Question: h3's wgmma grouped GEMMs (kernels/m31_moe_wgmma.cu) take 1.34 ms (gate_up) and
// 0.715 ms (down) per layer (ncu, 2026-12-03), ~460 TFLOP/s, with 26 % of issue slots busy;
// would cuBLAS's grouped GEMM do better (the issue asks to measure both)? Rows per expert come
// from a seeded uniform routing (each token 4 distinct experts) and from a skewed one (expert
// e drawn with weight 1 / (e + 1)). Times: mean of 20 calls after 3 warm-ups, cudaEvents.

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

int main() {
  const int T = 2048, E = 32, k = 4, H = 6144, F = 3072;
  cublasHandle_t h;
  CB(cublasCreate(&h));
  void *ws;
  CK(cudaMalloc(&ws, 64 << 20));
  CB(cublasSetWorkspace(h, ws, 64 << 20));
  const long long R = (long long)T * k;
  __nv_bfloat16 *x, *wgu, *wd, *y, *act;
  CK(cudaMalloc(&x, R * H * 2));
  CK(cudaMalloc(&act, R * F * 2));
  CK(cudaMalloc(&y, R * 2 * F * 2 > R * H * 2 ? R * 2 * F * 2 : R * H * 2));
  CK(cudaMalloc(&wgu, (long long)E * 2 * F * H * 2));
  CK(cudaMalloc(&wd, (long long)E * H * F * 2));
  fill_bf16<<<2048, 256>>>(x, R * H, 1);
  fill_bf16<<<2048, 256>>>(act, R * F, 2);
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
  auto dense = [&](const __nv_bfloat16 *xs, const __nv_bfloat16 *ws_, int N, int K) {
    return mean_ms([&](int) {
      CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, (int)R, K, &one, ws_, CUDA_R_16BF, K, xs, CUDA_R_16BF, K,
                      &zero, y, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }, 3, 20);
  };
  const double fl_gu = 2.0 * R * 2 * F * H, fl_d = 2.0 * R * H * F;
  printf("M3.1 small prefill, %d tokens, %d experts, top %d (%lld rows)\n", T, E, k, R);
  for (int skew = 0; skew < 2; skew++) {
    std::vector<int> rows = route(T, E, k, skew);
    int lo = rows[0], hi = rows[0];
    for (int r : rows) lo = r < lo ? r : lo, hi = r > hi ? r : hi;
    const float gu = grouped(rows, x, wgu, 2 * F, H), dn = grouped(rows, act, wd, H, F);
    printf("%s routing (rows per expert %d..%d): grouped gate_up %.3f ms (%.0f TFLOP/s), down %.3f ms (%.0f "
           "TFLOP/s)\n",
           skew ? "skewed" : "uniform", lo, hi, gu, fl_gu / gu / 1e9, dn, fl_d / dn / 1e9);
  }
  const float gu = dense(x, wgu, 2 * F, H), dn = dense(act, wd, H, F);
  printf("dense, one expert's weights for all %lld rows: gate_up %.3f ms (%.0f TFLOP/s), down %.3f ms (%.0f TFLOP/s)\n", R,
         gu, fl_gu / gu / 1e9, dn, fl_d / dn / 1e9);
  return 0;
}
