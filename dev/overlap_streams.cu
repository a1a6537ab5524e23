// overlap_streams.cu: would a serving step gain by running a compute-bound prefill beside the
// memory-bound decode steps on the same H200 (lab; not CI)?
//   nvcc -std=c++17 -arch=sm_90a -O3 dev/overlap_streams.cu -lcublas -lcuda -o overlap_streams
//   ./overlap_streams [decode_steps] [prefill_units]
// Stand-ins with M3.1 small's shapes: a decode step = 200 GEMMs of 64 rows over distinct
// [6144, 6144] bf16 weights (15.1 GB read per step, as a 64-row step reads ~15.6 GB); a prefill
// unit = 24 GEMMs of 8192 x 6144 x 6144 (~14.8 TFLOP, as a 16-prompt group's linears and experts
// in ~1/7). Measured: each alone, one after the other, and both at once on two streams (decode at
// the greatest priority, then equal priorities), and with the SMs split between two green
// contexts (decode on n SMs, prefill on the rest). Question: is "both at once" well under "one
// after the other"? If so, serving could prefill a group on a side stream while the running
// requests keep decoding. Times: cudaEvents, after one warm-up round of each.
#include <cuda.h>

#include <vector>

#include "lab_cublas.cuh"
#include "lab_cuda.cuh"

static const int D = 6144, NW = 200, DROWS = 64, PROWS = 8192, PGEMMS = 24;
typedef __nv_bfloat16 bf16;

struct Work {
  std::vector<bf16 *> w; // NW weights [D, D]
  bf16 *xd, *yd, *xp, *yp;
};

// y[M, D] = x[M, D] w^T (row-major x, y; w [D, D] row-major), bf16 in and out, fp32 compute
static void gemm(cublasHandle_t h, const bf16 *x, const bf16 *w, bf16 *y, int M) {
  const float one = 1, zero = 0;
  CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, D, M, D, &one, w, CUDA_R_16BF, D, x, CUDA_R_16BF, D,
                  &zero, y, CUDA_R_16BF, D, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

static void decode_steps(cublasHandle_t h, const Work &k, int steps) {
  for (int s = 0; s < steps; s++)
    for (int i = 0; i < NW; i++) gemm(h, k.xd, k.w[i], k.yd, DROWS);
}

static void prefill_units(cublasHandle_t h, const Work &k, int units) {
  for (int u = 0; u < units; u++)
    for (int i = 0; i < PGEMMS; i++) gemm(h, k.xp, k.w[i % 8], k.yp, PROWS);
}

struct Pair {
  cudaStream_t sd, sp;
  cublasHandle_t hd, hp;
};

// both workloads from one start; returns {decode end, prefill end, total} in ms
static void at_once(const Pair &p, const Work &k, int steps, int units, float out[3]) {
  cudaEvent_t e0, ed, ep;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&ed));
  CK(cudaEventCreate(&ep));
  CK(cudaDeviceSynchronize());
  CK(cudaEventRecord(e0, p.sd));
  CK(cudaStreamWaitEvent(p.sp, e0, 0));
  prefill_units(p.hp, k, units);
  decode_steps(p.hd, k, steps);
  CK(cudaEventRecord(ed, p.sd));
  CK(cudaEventRecord(ep, p.sp));
  CK(cudaDeviceSynchronize());
  CK(cudaEventElapsedTime(&out[0], e0, ed));
  CK(cudaEventElapsedTime(&out[1], e0, ep));
  out[2] = out[0] > out[1] ? out[0] : out[1];
}

static float alone(cublasHandle_t h, cudaStream_t s, const Work &k, int steps, int units) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaDeviceSynchronize());
  CK(cudaEventRecord(a, s));
  if (steps) decode_steps(h, k, steps);
  if (units) prefill_units(h, k, units);
  CK(cudaEventRecord(b, s));
  CK(cudaEventSynchronize(b));
  float ms;
  CK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

static Pair make_pair(cudaStream_t sd, cudaStream_t sp) {
  Pair p = {sd, sp, 0, 0};
  CB(cublasCreate(&p.hd));
  CB(cublasCreate(&p.hp));
  CB(cublasSetStream(p.hd, sd));
  CB(cublasSetStream(p.hp, sp));
  return p;
}

static void report(const char *name, const float t[3], float seq, float d1, float p1) {
  printf("%-44s decode done %8.2f ms (%.2f x alone)  prefill done %8.2f ms (%.2f x alone)  "
         "both %8.2f ms = %.3f x one after the other\n",
         name, t[0], t[0] / d1, t[1], t[1] / p1, t[2], t[2] / seq);
}

// a green context of n SMs (rounded by the driver) and one of the rest, a stream in each
static bool green_pair(int n, cudaStream_t *sd, cudaStream_t *sp, int *got_d, int *got_p) {
  CUdevice dev;
  if (cuDeviceGet(&dev, 0) != CUDA_SUCCESS) return false;
  CUdevResource all, part, rest;
  unsigned groups = 1;
  if (cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM) != CUDA_SUCCESS) return false;
  if (cuDevSmResourceSplitByCount(&part, &groups, &all, &rest, 0, n) != CUDA_SUCCESS || groups != 1)
    return false;
  CUdevResourceDesc dd, dp;
  CUgreenCtx gd, gp;
  if (cuDevResourceGenerateDesc(&dd, &part, 1) != CUDA_SUCCESS) return false;
  if (cuDevResourceGenerateDesc(&dp, &rest, 1) != CUDA_SUCCESS) return false;
  if (cuGreenCtxCreate(&gd, dd, dev, CU_GREEN_CTX_DEFAULT_STREAM) != CUDA_SUCCESS) return false;
  if (cuGreenCtxCreate(&gp, dp, dev, CU_GREEN_CTX_DEFAULT_STREAM) != CUDA_SUCCESS) return false;
  CUstream a, b;
  if (cuGreenCtxStreamCreate(&a, gd, CU_STREAM_NON_BLOCKING, 0) != CUDA_SUCCESS) return false;
  if (cuGreenCtxStreamCreate(&b, gp, CU_STREAM_NON_BLOCKING, 0) != CUDA_SUCCESS) return false;
  *sd = (cudaStream_t)a, *sp = (cudaStream_t)b;
  *got_d = (int)part.sm.smCount, *got_p = (int)rest.sm.smCount;
  return true;
}

int main(int argc, char **argv) {
  const int steps = argc > 1 ? atoi(argv[1]) : 20, units = argc > 2 ? atoi(argv[2]) : 4;
  CK(cudaSetDevice(0));
  CK(cudaFree(0));
  Work k;
  k.w.resize(NW);
  for (int i = 0; i < NW; i++) {
    CK(cudaMalloc(&k.w[i], (size_t)D * D * 2));
    fill_bf16<<<1024, 256>>>(k.w[i], (long long)D * D, 17u + i);
  }
  CK(cudaMalloc(&k.xd, (size_t)DROWS * D * 2));
  CK(cudaMalloc(&k.yd, (size_t)DROWS * D * 2));
  CK(cudaMalloc(&k.xp, (size_t)PROWS * D * 2));
  CK(cudaMalloc(&k.yp, (size_t)PROWS * D * 2));
  fill_bf16<<<1024, 256>>>(k.xd, (long long)DROWS * D, 3u);
  fill_bf16<<<1024, 256>>>(k.xp, (long long)PROWS * D, 5u);
  CK(cudaDeviceSynchronize());

  int lo, hi;
  CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  cudaStream_t s_hi, s_lo, s_a, s_b;
  CK(cudaStreamCreateWithPriority(&s_hi, cudaStreamNonBlocking, hi));
  CK(cudaStreamCreateWithPriority(&s_lo, cudaStreamNonBlocking, lo));
  CK(cudaStreamCreateWithPriority(&s_a, cudaStreamNonBlocking, lo));
  CK(cudaStreamCreateWithPriority(&s_b, cudaStreamNonBlocking, lo));
  const Pair prio = make_pair(s_hi, s_lo), equal = make_pair(s_a, s_b);

  alone(prio.hd, s_hi, k, 1, 1); // warm-up (cuBLAS heuristics, clocks)
  const float d1 = alone(prio.hd, s_hi, k, steps, 0), p1 = alone(prio.hd, s_hi, k, 0, units);
  const float seq = d1 + p1;
  const double step_bytes = (double)NW * D * D * 2;
  printf("decode alone: %d steps %.2f ms (%.3f ms a step, %.0f GB/s); prefill alone: %d units "
         "%.2f ms (%.0f TFLOP/s); one after the other %.2f ms\n",
         steps, d1, d1 / steps, step_bytes * steps / (d1 * 1e6), units, p1,
         2.0 * PROWS * D * D * PGEMMS * units / (p1 * 1e9), seq);
  float t[3];
  at_once(prio, k, steps, units, t); // warm-up of the pair
  at_once(prio, k, steps, units, t);
  report("both at once, decode at the greatest priority", t, seq, d1, p1);
  at_once(equal, k, steps, units, t);
  at_once(equal, k, steps, units, t);
  report("both at once, equal priorities", t, seq, d1, p1);
  const int splits[] = {32, 48, 64, 88};
  for (int n : splits) {
    cudaStream_t gd, gp;
    int nd, np;
    if (!green_pair(n, &gd, &gp, &nd, &np)) {
      printf("green contexts of %d SMs: not available on this driver\n", n);
      continue;
    }
    const Pair g = make_pair(gd, gp);
    const float gd1 = alone(g.hd, gd, k, steps, 0), gp1 = alone(g.hp, gp, k, 0, units);
    at_once(g, k, steps, units, t);
    at_once(g, k, steps, units, t);
    char name[96];
    snprintf(name, sizeof name, "green: decode on %d SMs, prefill on %d", nd, np);
    report(name, t, seq, d1, p1);
    printf("%-44s (alone in its partition: decode %.2f ms = %.2f x, prefill %.2f ms = %.2f x)\n",
           "", gd1, gd1 / d1, gp1, gp1 / p1);
  }
  return 0;
}
