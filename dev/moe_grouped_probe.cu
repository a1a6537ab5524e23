/* moe_grouped_probe.cu: how fast is cuBLAS's grouped GEMM (cublasGemmGroupedBatchedEx) at
 * the M3.1 small prefill's expert shapes, against one dense cuBLAS GEMM of all rows (the
 * ceiling) — to decide whether the prefill's MoE should use it instead of h3's wgmma
 * grouped kernels (issue 17: "measure both where both exist").
 *
 * Shapes: E = 32 experts, 2048 rows x top-4 = 8192 routed rows; gate_up N = 6144, K = 6144;
 * down N = 6144, K = 3072. Rows per expert: all 256, or ragged (uniform 128..384, summing
 * to 8192). Y[m, n] = X[m, :] . W_e[n, :] (row-major, as h3's linear), bf16 in and out, fp32
 * accumulation. Prints TFLOP/s (median of 20 timed launches after 3 warm-ups).
 *
 *   nvcc -O2 -arch=sm_90 -o moe_grouped_probe dev/moe_grouped_probe.cu -lcublas
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)
#define CB(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "%s:%d cublas %d\n", __FILE__, __LINE__, (int)s_); exit(1); } } while (0)

enum { E = 32, ROWS = 8192, REPS = 20 };

static int cmp(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static __global__ void fill(__nv_bfloat16 *p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
    p[i] = __float2bfloat16(((h & 0xffff) / 65536.0f - 0.5f) * 0.05f);
  }
}

typedef void (*launch_fn)(void *ctx);

static float median_ms(launch_fn f, void *ctx) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  float t[REPS];
  for (int i = 0; i < 3; i++) f(ctx);
  for (int i = 0; i < REPS; i++) {
    CK(cudaEventRecord(a, 0));
    f(ctx);
    CK(cudaEventRecord(b, 0));
    CK(cudaEventSynchronize(b));
    CK(cudaEventElapsedTime(&t[i], a, b));
  }
  qsort(t, REPS, sizeof *t, cmp);
  return t[REPS / 2];
}

typedef struct {
  cublasHandle_t h;
  int n, k, m[E];
  const void **A, **B; /* device arrays of pointers */
  void **C;
  const __nv_bfloat16 *x, *w;
  __nv_bfloat16 *y;
} job;

static void grouped(void *ctx) {
  job *j = (job *)ctx;
  cublasOperation_t ta[E], tb[E];
  int ms[E], ns[E], ks[E], lda[E], ldb[E], ldc[E], gs[E];
  float alpha[E], beta[E];
  for (int e = 0; e < E; e++) {
    ta[e] = CUBLAS_OP_T, tb[e] = CUBLAS_OP_N;
    ms[e] = j->n, ns[e] = j->m[e], ks[e] = j->k;
    lda[e] = j->k, ldb[e] = j->k, ldc[e] = j->n, gs[e] = 1;
    alpha[e] = 1.0f, beta[e] = 0.0f;
  }
  CB(cublasGemmGroupedBatchedEx(j->h, ta, tb, ms, ns, ks, alpha, j->A, CUDA_R_16BF, lda, j->B,
                                CUDA_R_16BF, ldb, beta, j->C, CUDA_R_16BF, ldc, E, gs,
                                CUBLAS_COMPUTE_32F));
}

static void dense(void *ctx) { /* all rows against expert 0's weights: the ceiling */
  job *j = (job *)ctx;
  float alpha = 1.0f, beta = 0.0f;
  CB(cublasGemmEx(j->h, CUBLAS_OP_T, CUBLAS_OP_N, j->n, ROWS, j->k, &alpha, j->w, CUDA_R_16BF,
                  j->k, j->x, CUDA_R_16BF, j->k, &beta, j->y, CUDA_R_16BF, j->n,
                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

static void run(cublasHandle_t h, int n, int k, int ragged) {
  job j = {h, n, k};
  srand(7);
  int left = ROWS;
  for (int e = 0; e < E; e++) {
    int m = ragged ? 128 + rand() % 257 : ROWS / E;
    if (e == E - 1 || m > left - (E - 1 - e) * 128) m = e == E - 1 ? left : left - (E - 1 - e) * 128;
    j.m[e] = m, left -= m;
  }
  __nv_bfloat16 *x, *w, *y;
  CK(cudaMalloc(&x, (size_t)ROWS * k * 2));
  CK(cudaMalloc(&w, (size_t)E * n * k * 2));
  CK(cudaMalloc(&y, (size_t)ROWS * n * 2));
  fill<<<1024, 256>>>(x, (size_t)ROWS * k, 1);
  fill<<<1024, 256>>>(w, (size_t)E * n * k, 2);
  const void *hA[E], *hB[E];
  void *hC[E];
  size_t row = 0;
  for (int e = 0; e < E; e++) {
    hA[e] = w + (size_t)e * n * k;
    hB[e] = x + row * k;
    hC[e] = y + row * n;
    row += (size_t)j.m[e];
  }
  CK(cudaMalloc((void **)&j.A, sizeof hA));
  CK(cudaMalloc((void **)&j.B, sizeof hB));
  CK(cudaMalloc((void **)&j.C, sizeof hC));
  CK(cudaMemcpy(j.A, hA, sizeof hA, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(j.B, hB, sizeof hB, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(j.C, hC, sizeof hC, cudaMemcpyHostToDevice));
  j.x = x, j.w = w, j.y = y;
  double flops = 2.0 * ROWS * n * k;
  float tg = median_ms(grouped, &j), td = median_ms(dense, &j);
  printf("{\"probe\": \"moe_grouped\", \"n\": %d, \"k\": %d, \"rows\": \"%s\", \"grouped_ms\": %.4f, "
         "\"grouped_tflops\": %.1f, \"dense_ms\": %.4f, \"dense_tflops\": %.1f}\n",
         n, k, ragged ? "ragged 128..384" : "256 each", tg, flops / tg / 1e9, td, flops / td / 1e9);
  CK(cudaFree(x));
  CK(cudaFree(w));
  CK(cudaFree(y));
  CK(cudaFree(j.A));
  CK(cudaFree(j.B));
  CK(cudaFree(j.C));
}

int main(void) {
  cublasHandle_t h;
  CB(cublasCreate(&h));
  for (int ragged = 0; ragged < 2; ragged++) {
    run(h, 6144, 6144, ragged); /* gate_up */
    run(h, 6144, 3072, ragged); /* down */
  }
  CB(cublasDestroy(h));
  return 0;
}
