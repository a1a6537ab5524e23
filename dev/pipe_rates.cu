// pipe_rates.cu: issue rates of the instructions Sage's softmax is made of, per SM and clock
// (lab; not CI). Decides whether I2FP.F32.S32 (int32 -> fp32, what nvcc emits for sm_90) runs
// at the FP32 rate or on the narrow XU pipe with MUFU.EX2: if I2FP issues at >= 64 an SM and
// clock and does not slow MUFU.EX2 when mixed with it, Sage's accumulators could start at 0
// (wgmma's scale-d off for the first k-step: no 64 MOVs of the magic a stage) and convert by
// one I2FP a score in place of the magic's FADD (dev/sage-attention.md: -1 instruction a score).
//   nvcc -std=c++17 -arch=sm_90a -O3 dev/pipe_rates.cu -o build-gpu/lab/pipe_rates
//   build-gpu/lab/pipe_rates        prints one line per kind: operations per SM per clock
// Each thread runs 8 independent chains (enough to cover each pipe's latency), 4 warps per
// scheduler; clock64 brackets the loop in every warp, the block's longest span counts.
#include <cstdio>
#include <cuda_runtime.h>

enum { ITERS = 4096, BLOCKS_PER_SM = 1, THREADS = 512 };

// kind 0 I2FP (cvt.rn.f32.s32), 1 FADD, 2 MUFU.EX2 (ex2.approx.f32), 3 I2FP + EX2 alternating,
// 4 FADD + EX2 alternating, 5 VIMNMX3
template <int KIND> __global__ void rate(int seed, float *sink, long long *cycles) {
  int xi[8];
  float xf[8];
#pragma unroll
  for (int c = 0; c < 8; c++) xi[c] = seed + threadIdx.x * 8 + c, xf[c] = 1e-3f * (float)xi[c];
  __syncthreads();
  const long long t0 = clock64();
  for (int i = 0; i < ITERS; i++) {
#pragma unroll
    for (int c = 0; c < 8; c++) {
      if constexpr (KIND == 0) {
        float f;
        asm volatile("cvt.rn.f32.s32 %0, %1;" : "=f"(f) : "r"(xi[c]));
        xi[c] ^= __float_as_int(f); // a dependency so the conversion stays
      } else if constexpr (KIND == 1) {
        asm volatile("add.f32 %0, %0, 0f3F800000;" : "+f"(xf[c]));
      } else if constexpr (KIND == 2) {
        asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(xf[c]));
      } else if constexpr (KIND == 3) {
        if (c & 1) asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(xf[c]));
        else {
          float f;
          asm volatile("cvt.rn.f32.s32 %0, %1;" : "=f"(f) : "r"(xi[c]));
          xi[c] ^= __float_as_int(f);
        }
      } else if constexpr (KIND == 4) {
        if (c & 1) asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(xf[c]));
        else asm volatile("add.f32 %0, %0, 0f3F800000;" : "+f"(xf[c]));
      } else {
        xi[c] = __vimax3_s32(xi[c], xi[(c + 1) & 7], i);
      }
    }
  }
  const long long t1 = clock64();
  float s = 0.0f;
#pragma unroll
  for (int c = 0; c < 8; c++) s += xf[c] + (float)xi[c];
  if (s == 12345.0f) sink[threadIdx.x] = s;
  __shared__ long long span;
  if (threadIdx.x == 0) span = 0;
  __syncthreads();
  atomicMax(reinterpret_cast<unsigned long long *>(&span), (unsigned long long)(t1 - t0));
  __syncthreads();
  if (threadIdx.x == 0) cycles[blockIdx.x] = span;
}

template <int KIND> static void run(const char *name, int ops_per_chain_step, int sms) {
  float *sink;
  long long *cyc;
  cudaMalloc(&sink, THREADS * sizeof(float));
  cudaMalloc(&cyc, sms * sizeof(long long));
  rate<KIND><<<sms, THREADS>>>(1, sink, cyc); // warm-up
  rate<KIND><<<sms, THREADS>>>(2, sink, cyc);
  long long h[1024];
  cudaMemcpy(h, cyc, sms * sizeof(long long), cudaMemcpyDeviceToHost);
  double mean = 0;
  for (int i = 0; i < sms; i++) mean += (double)h[i] / sms;
  // ops issued per block: THREADS / 32 warps x ITERS x 8 chains x ops_per_chain_step (warp-instructions)
  const double ops = (double)THREADS * ITERS * 8 * ops_per_chain_step;
  printf("%-22s %7.1f thread-ops per SM per clock (%.0f cycles)\n", name, ops / mean, mean);
  cudaFree(sink);
  cudaFree(cyc);
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  if (sms <= 0 || sms > 1024) {
    printf("pipe_rates: no GPU\n");
    return 1;
  }
  run<0>("I2FP (+LOP3)", 1, sms);
  run<1>("FADD", 1, sms);
  run<2>("MUFU.EX2", 1, sms);
  run<3>("I2FP+EX2 mixed", 1, sms);
  run<4>("FADD+EX2 mixed", 1, sms);
  run<5>("VIMNMX3", 1, sms);
  printf("(I2FP's line includes its LOP3; compare the mixed lines with EX2 alone: a shared pipe shows as\n"
         " the mixed rate near the slower op's)\n");
  return 0;
}
