/* host_emu.h: just enough of CUDA to compile h3's emitted kernels (prelude + kernel
 * sources) as host C++17 and run them on the CPU, so tests check the numerics of the
 * generated code without a GPU.
 *
 * A launch runs the blocks one after another; the threads of a block are real threads
 * (std::thread) so __syncthreads is a barrier and __shfl_xor_sync exchanges values through
 * a per-block slot array between two barriers (every thread of the block takes part, which
 * holds for h3's kernels). __shared__ variables are function statics: one block at a time.
 * The _rn intrinsics are the host's IEEE operations (compile with -ffp-contract=off);
 * bf16/f16 conversions are include/h3/bf16.h's RNE; conversions from double round to odd
 * at fp32 first so the final rounding is single.
 */
#ifndef H3_HOST_EMU_H
#define H3_HOST_EMU_H

#define H3_HOST_EMU 1

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <pthread.h>
#include <thread>
#include <vector>

extern "C" {
#include "h3/bf16.h"
#include "h3/nvfp4.h"
}

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __shared__ static

struct uint4 {
  unsigned x, y, z, w;
};
struct uint2 {
  unsigned x, y;
};
struct emu_dim3 {
  unsigned x, y, z;
};
extern thread_local emu_dim3 threadIdx;
extern emu_dim3 blockIdx, blockDim, gridDim;

struct __nv_bfloat16 {
  uint16_t bits;
};
struct __half {
  uint16_t bits;
};

inline float __bfloat162float(__nv_bfloat16 v) { return h3_bf16_to_f32(v.bits); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return {h3_f32_to_bf16(f)}; }
inline float __half2float(__half v) { return h3_f16_to_f32(v.bits); }
inline __half __float2half_rn(float f) { return {h3_f32_to_f16(f)}; }
/* double -> fp32 rounded to odd: exact for the second rounding to 8/11 bits */
inline float emu_round_odd(double d) {
  float f = (float)d;
  if (std::isnan(d) || std::isinf(f) || (double)f == d) return f;
  if (std::fabs((double)f) > std::fabs(d)) f = std::nextafter(f, 0.0f);
  uint32_t u = h3_f32_bits(f) | 1u;
  return h3_f32_from_bits(u);
}
inline __nv_bfloat16 __double2bfloat16(double d) { return {h3_f32_to_bf16(emu_round_odd(d))}; }
inline __half __double2half(double d) { return {h3_f32_to_f16(emu_round_odd(d))}; }

inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
/* 1/sqrt(a) rounded once to float from double: correctly rounded unless the exact value
   lies within a few double ulps of a float rounding boundary (about 2^-27 of inputs) */
inline float __frsqrt_rn(float a) { return (float)(1.0 / std::sqrt((double)a)); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
/* the GPU's fast exponential: the host's expf (within a few ulps of it) */
inline float __expf(float a) { return std::exp(a); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double a) { return std::sqrt(a); }
inline float __int_as_float(int v) {
  float f;
  std::memcpy(&f, &v, sizeof f);
  return f;
}
inline double __longlong_as_double(long long v) {
  double f;
  std::memcpy(&f, &v, sizeof f);
  return f;
}
using std::cos;
using std::exp;
using std::fabs;
using std::fmax;
using std::fmin;
using std::log;
using std::pow;
using std::sin;
using std::tanh;

/* block-wide synchronisation of the running block */
extern pthread_barrier_t emu_barrier;
extern unsigned long long emu_slots[1024];
/* dynamic shared memory (H3_DYN_SMEM): one buffer, as blocks run one at a time */
extern unsigned char emu_dyn_smem[];
inline void __syncthreads() { pthread_barrier_wait(&emu_barrier); }
template <typename T> inline T __shfl_xor_sync(unsigned, T v, int lane_mask) {
  static_assert(sizeof(T) <= 8, "slot size");
  unsigned t = threadIdx.x;
  std::memcpy(&emu_slots[t], &v, sizeof v);
  pthread_barrier_wait(&emu_barrier);
  T r;
  std::memcpy(&r, &emu_slots[t ^ (unsigned)lane_mask], sizeof r);
  pthread_barrier_wait(&emu_barrier);
  return r;
}
/* __shfl_sync(mask, v, src, width): the value of v in lane src (mod width) of the caller's
 * group of `width` lanes (a power of two <= 32), through the same slots and barriers. */
template <typename T> inline T __shfl_sync(unsigned, T v, int src_lane, int width = 32) {
  static_assert(sizeof(T) <= 8, "slot size");
  unsigned t = threadIdx.x, w = (unsigned)width;
  std::memcpy(&emu_slots[t], &v, sizeof v);
  pthread_barrier_wait(&emu_barrier);
  T r;
  std::memcpy(&r, &emu_slots[(t & ~(w - 1u)) + ((unsigned)src_lane & (w - 1u))], sizeof r);
  pthread_barrier_wait(&emu_barrier);
  return r;
}

/* mma.m16n8kK of the calling thread's warp (threads 32w .. 32w + 31 of the block), K = 16
 * (16-bit elements, two per 32-bit word) or 32 (8-bit, four per word): each lane posts its
 * fragments, all lanes read the warp's, each computes its d over k ascending (elem decodes
 * an element's bits; the tensor cores' sum order differs: fp32 results agree within fp32
 * rounding, int32 ones exactly). Fragments (PTX ISA), W = K / 8 elements per word: A(m, k) is
 * element k % W of word (m >= 8) + 2 (k >= K / 2) of lane 4 (m % 8) + (k % (K / 2)) / W;
 * B(k, n) element k % W of word 4 + (k >= K / 2) of lane 4 n + (k % (K / 2)) / W. Every
 * thread of the block takes part (two barriers). */
extern unsigned emu_mma_words[1024][6];
template <int K, typename Acc, typename Elem>
inline void emu_mma(Acc *d, const unsigned *a, const unsigned *b, Elem elem) {
  constexpr int W = K / 8, bits = 32 / W;
  unsigned me = threadIdx.x, w0 = me & ~31u;
  for (int i = 0; i < 4; i++) emu_mma_words[me][i] = a[i];
  emu_mma_words[me][4] = b[0];
  emu_mma_words[me][5] = b[1];
  pthread_barrier_wait(&emu_barrier);
  auto part = [&](unsigned w, int k) { return elem((w >> (bits * (k % W))) & ((1u << bits) - 1u)); };
  auto A = [&](int m, int k) {
    return part(emu_mma_words[w0 + 4 * (m % 8) + (k % (K / 2)) / W][(m >= 8 ? 1 : 0) + (k >= K / 2 ? 2 : 0)], k);
  };
  auto B = [&](int k, int n) { return part(emu_mma_words[w0 + 4 * n + (k % (K / 2)) / W][4 + (k >= K / 2 ? 1 : 0)], k); };
  int g = (int)(me & 31u) / 4, t = (int)(me & 3u);
  Acc out[4];
  for (int i = 0; i < 4; i++) {
    int m = g + (i >= 2 ? 8 : 0), n = 2 * t + (i & 1);
    Acc s = d[i];
    for (int k = 0; k < K; k++) s += A(m, k) * B(k, n);
    out[i] = s;
  }
  pthread_barrier_wait(&emu_barrier);
  for (int i = 0; i < 4; i++) d[i] = out[i];
}
/* bf16 in, fp32 accumulate (h3_mma_bf16); s8 -> s32 and e4m3 -> f32 (the sage kernels) */
inline void emu_mma_bf16(float *d, const unsigned *a, const unsigned *b) {
  emu_mma<16>(d, a, b, [](unsigned v) { return h3_bf16_to_f32((uint16_t)v); });
}
inline void emu_mma_s8(int *d, const unsigned *a, const unsigned *b) {
  emu_mma<32>(d, a, b, [](unsigned v) { return (int)(int8_t)(uint8_t)v; });
}
inline void emu_mma_e4m3(float *d, const unsigned *a, const unsigned *b) {
  emu_mma<32>(d, a, b, [](unsigned v) { return h3_e4m3_to_f32((uint8_t)v); });
}

/* ldmatrix.x4 of the calling thread's warp: each lane posts its row address, then reads
 * the 4 bytes at 4 * (lane % 4) of the rows that lanes 8i + lane / 4 gave (i = 0..3). Every
 * thread of the block takes part (two barriers). */
inline void emu_ldsm4(unsigned *r, const void *p) {
  unsigned me = threadIdx.x, w0 = me & ~31u, g = (me & 31u) / 4, t = me & 3u;
  emu_slots[me] = (unsigned long long)(uintptr_t)p;
  pthread_barrier_wait(&emu_barrier);
  for (unsigned i = 0; i < 4; i++)
    std::memcpy(&r[i], (const unsigned char *)(uintptr_t)emu_slots[w0 + 8 * i + g] + 4 * t, 4);
  pthread_barrier_wait(&emu_barrier);
}

/* ldmatrix.x4.trans the same way: r[i] of lane 4 g + t holds element g of the rows of lanes
 * 8 i + 2 t and 8 i + 2 t + 1 (low half the former). */
inline void emu_ldsm4_trans(unsigned *r, const void *p) {
  unsigned me = threadIdx.x, w0 = me & ~31u, g = (me & 31u) / 4, t = me & 3u;
  emu_slots[me] = (unsigned long long)(uintptr_t)p;
  pthread_barrier_wait(&emu_barrier);
  for (unsigned i = 0; i < 4; i++) {
    uint16_t e[2];
    for (unsigned k = 0; k < 2; k++)
      std::memcpy(&e[k], (const unsigned char *)(uintptr_t)emu_slots[w0 + 8 * i + 2 * t + k] + 2 * g, 2);
    r[i] = e[0] | (unsigned)e[1] << 16;
  }
  pthread_barrier_wait(&emu_barrier);
}

/* Runs body() as the kernel: a grid of gx x gy x gz blocks of `block` threads, one block at
 * a time (x fastest). The block's threads are made once per launch and run every block in
 * turn: thread 0 sets blockIdx between two barriers. */
inline void emu_launch3(long long gx, long long gy, long long gz, long long block,
                        const std::function<void()> &body) {
  gridDim = {(unsigned)gx, (unsigned)gy, (unsigned)gz};
  blockDim = {(unsigned)block, 1, 1};
  const long long blocks = gx * gy * gz;
  pthread_barrier_init(&emu_barrier, nullptr, (unsigned)block);
  std::vector<std::thread> ts;
  for (long long t = 0; t < block; t++)
    ts.emplace_back([t, gx, gy, blocks, &body] {
      threadIdx = {(unsigned)t, 0, 0};
      for (long long b = 0; b < blocks; b++) {
        if (t == 0) blockIdx = {(unsigned)(b % gx), (unsigned)(b / gx % gy), (unsigned)(b / (gx * gy))};
        pthread_barrier_wait(&emu_barrier); /* every thread sees the block's index */
        body();
        pthread_barrier_wait(&emu_barrier); /* the block is done before the next begins */
      }
    });
  for (auto &t : ts) t.join();
  pthread_barrier_destroy(&emu_barrier);
}

/* Runs body() as the kernel: grid[0] blocks of block[0] threads, one block at a time. */
inline void emu_launch(long long grid, long long block, const std::function<void()> &body) {
  emu_launch3(grid, 1, 1, block, body);
}

#endif
