/* host_emu.h: just enough of CUDA to compile h3's emitted kernels (prelude + kernel
 * sources) as host C++17 and run them on the CPU, so tests check the numerics of the
 * generated code without a GPU.
 *
 * A launch runs the blocks one after another; the threads of a block are fibers (ucontext,
 * on the launching thread: a barrier switches to the next thread; under AddressSanitizer,
 * which does not follow such stack switches, real threads and a pthread barrier), so
 * __syncthreads is a barrier and __shfl_xor_sync exchanges values through a per-block slot
 * array between two barriers (every thread of the block takes part, which holds for h3's
 * kernels; with fibers a thread that ends while others wait at a barrier is reported and
 * the test aborts). __shared__ variables are function statics: one block at a time.
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
#include <cstdio>
#include <cstdlib>
#include <pthread.h>
#include <thread>
#include <ucontext.h>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define H3_EMU_OS_THREADS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define H3_EMU_OS_THREADS 1
#endif
#endif

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
/* int32 -> fp32, rounded to nearest (I2FP on sm_90; the host's conversion rounds the same way) */
inline float __int2float_rn(int v) { return (float)v; }
/* the 3-way signed maximum (one VIMNMX3 on sm_90) */
inline int __vimax3_s32(int a, int b, int c) { return std::max(std::max(a, b), c); }
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
#ifndef H3_EMU_OS_THREADS
/* The fibers of the running block: their contexts and stacks (reused across launches), each
 * one's state, the one running, and the launch's body. */
struct emu_fiber_set {
  ucontext_t main;
  std::vector<ucontext_t> ctx;
  std::vector<unsigned char> state; /* EMU_FIBER_READY, _AT_BARRIER, _DONE */
  char *stacks = nullptr;
  size_t n_stacks = 0;
  int cur = 0;
  const std::function<void()> *body = nullptr;
};
enum { EMU_FIBER_READY, EMU_FIBER_AT_BARRIER, EMU_FIBER_DONE };
constexpr size_t EMU_FIBER_STACK = (size_t)256 << 10;
inline emu_fiber_set emu_fibers;
#endif
/* A block-wide barrier: the running fiber waits for its block's others (or the pthread
 * barrier of the OS-thread form). */
inline void emu_sync() {
#ifdef H3_EMU_OS_THREADS
  pthread_barrier_wait(&emu_barrier);
#else
  emu_fiber_set &f = emu_fibers;
  f.state[f.cur] = EMU_FIBER_AT_BARRIER;
  swapcontext(&f.ctx[f.cur], &f.main);
#endif
}
inline void __syncthreads() { emu_sync(); }
template <typename T> inline T __shfl_xor_sync(unsigned, T v, int lane_mask) {
  static_assert(sizeof(T) <= 8, "slot size");
  unsigned t = threadIdx.x;
  std::memcpy(&emu_slots[t], &v, sizeof v);
  emu_sync();
  T r;
  std::memcpy(&r, &emu_slots[t ^ (unsigned)lane_mask], sizeof r);
  emu_sync();
  return r;
}
/* __shfl_sync(mask, v, src, width): the value of v in lane src (mod width) of the caller's
 * group of `width` lanes (a power of two <= 32), through the same slots and barriers. */
template <typename T> inline T __shfl_sync(unsigned, T v, int src_lane, int width = 32) {
  static_assert(sizeof(T) <= 8, "slot size");
  unsigned t = threadIdx.x, w = (unsigned)width;
  std::memcpy(&emu_slots[t], &v, sizeof v);
  emu_sync();
  T r;
  std::memcpy(&r, &emu_slots[(t & ~(w - 1u)) + ((unsigned)src_lane & (w - 1u))], sizeof r);
  emu_sync();
  return r;
}

/* __ballot_sync(mask, pred): bit l set where lane l of the caller's warp has pred nonzero,
 * through the same slots and barriers */
inline unsigned __ballot_sync(unsigned, int pred) {
  unsigned t = threadIdx.x, w0 = t & ~31u, r = 0u;
  emu_slots[t] = pred != 0;
  emu_sync();
  for (unsigned i = 0; i < 32; i++) r |= (emu_slots[w0 + i] ? 1u : 0u) << i;
  emu_sync();
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
  emu_sync();
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
  emu_sync();
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

/* wgmma.mma_async m64nNk16 (bf16, fp32 accumulate) of the calling thread's warpgroup (threads
 * 128v .. 128v + 127 of the block), A from registers, B from the emulation's shared memory at
 * descriptor desc (the 128-byte swizzle, K-major, as h3_wg_desc encodes it: start offset into
 * emu_dyn_smem >> 4 at bits 0-13, the 8-row atoms sbo >> 4 apart at bits 32-45; B row n, k at
 * start + (n / 8) sbo + (n % 8) 128 + 2 k with the 16-byte chunk bits 4-6 XORed with bits 7-9).
 * A(m, k): warp m / 16's lane 4 ((m % 16) % 8) + (k % 8) / 2, word ((m % 16) >= 8) + 2 (k >= 8),
 * the half k % 2 (h3_mma_bf16's a of each warp); d[4 j + 2 h + q] += D[16 w + g + 8 h][8 j + 2 t +
 * q] over k ascending. The operation completes at once (commit and wait are no-ops); every thread
 * of the block takes part (two barriers). */
template <int N> inline void emu_wgmma_bf16(float *d, const unsigned *a, unsigned long long desc) {
  const unsigned me = threadIdx.x, v0 = me & ~127u;
  for (int i = 0; i < 4; i++) emu_mma_words[me][i] = a[i];
  emu_sync();
  const unsigned start = (unsigned)(desc & 0x3FFFu) << 4, sbo = (unsigned)(desc >> 32 & 0x3FFFu) << 4;
  auto A = [&](int m, int k) {
    const int mm = m % 16;
    const unsigned w = emu_mma_words[v0 + 32 * (m / 16) + 4 * (mm % 8) + (k % 8) / 2][(mm >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)];
    return h3_bf16_to_f32((uint16_t)(w >> (16 * (k % 2))));
  };
  auto B = [&](int k, int n) {
    unsigned at = start + (unsigned)(n / 8) * sbo + (unsigned)(n % 8) * 128u + 2u * (unsigned)k;
    at ^= (at >> 7 & 7u) << 4;
    uint16_t e;
    std::memcpy(&e, emu_dyn_smem + at, 2);
    return h3_bf16_to_f32(e);
  };
  const int w = (int)((me - v0) / 32), g = (int)(me & 31u) / 4, t = (int)(me & 3u);
  float out[N / 2];
  for (int i = 0; i < N / 2; i++) {
    const int m = 16 * w + g + 8 * ((i >> 1) & 1), n = 8 * (i >> 2) + 2 * t + (i & 1);
    float acc = d[i];
    for (int k = 0; k < 16; k++) acc += A(m, k) * B(k, n);
    out[i] = acc;
  }
  emu_sync();
  for (int i = 0; i < N / 2; i++) d[i] = out[i];
}

/* ldmatrix.x4 of the calling thread's warp: each lane posts its row address, then reads
 * the 4 bytes at 4 * (lane % 4) of the rows that lanes 8i + lane / 4 gave (i = 0..3). Every
 * thread of the block takes part (two barriers). */
inline void emu_ldsm4(unsigned *r, const void *p) {
  unsigned me = threadIdx.x, w0 = me & ~31u, g = (me & 31u) / 4, t = me & 3u;
  emu_slots[me] = (unsigned long long)(uintptr_t)p;
  emu_sync();
  for (unsigned i = 0; i < 4; i++)
    std::memcpy(&r[i], (const unsigned char *)(uintptr_t)emu_slots[w0 + 8 * i + g] + 4 * t, 4);
  emu_sync();
}

/* ldmatrix.x4.trans the same way: r[i] of lane 4 g + t holds element g of the rows of lanes
 * 8 i + 2 t and 8 i + 2 t + 1 (low half the former). */
inline void emu_ldsm4_trans(unsigned *r, const void *p) {
  unsigned me = threadIdx.x, w0 = me & ~31u, g = (me & 31u) / 4, t = me & 3u;
  emu_slots[me] = (unsigned long long)(uintptr_t)p;
  emu_sync();
  for (unsigned i = 0; i < 4; i++) {
    uint16_t e[2];
    for (unsigned k = 0; k < 2; k++)
      std::memcpy(&e[k], (const unsigned char *)(uintptr_t)emu_slots[w0 + 8 * i + 2 * t + k] + 2 * g, 2);
    r[i] = e[0] | (unsigned)e[1] << 16;
  }
  emu_sync();
}

#ifndef H3_EMU_OS_THREADS
/* fiber t's start: runs the body, then returns to the scheduler (uc_link) as done */
inline void emu_fiber_entry(int t) {
  (*emu_fibers.body)();
  emu_fibers.state[t] = EMU_FIBER_DONE;
}
#endif

/* Runs body() as the kernel: a grid of gx x gy x gz blocks of `block` threads, one block at
 * a time (x fastest). Fibers: each block's threads start afresh and run in turn, thread 0 ..
 * block - 1, each up to its next barrier or its end, until all have ended (a barrier is
 * passed when every thread has reached it). OS threads: made once per launch, they run
 * every block in turn; thread 0 sets blockIdx between two barriers. */
inline void emu_launch3(long long gx, long long gy, long long gz, long long block,
                        const std::function<void()> &body) {
  gridDim = {(unsigned)gx, (unsigned)gy, (unsigned)gz};
  blockDim = {(unsigned)block, 1, 1};
  const long long blocks = gx * gy * gz;
#ifndef H3_EMU_OS_THREADS
  emu_fiber_set &f = emu_fibers;
  if (f.n_stacks < (size_t)block) {
    std::free(f.stacks);
    f.stacks = (char *)std::malloc((size_t)block * EMU_FIBER_STACK);
    if (!f.stacks) std::abort();
    f.n_stacks = (size_t)block;
  }
  f.ctx.resize((size_t)block);
  f.state.assign((size_t)block, EMU_FIBER_READY);
  f.body = &body;
  for (long long b = 0; b < blocks; b++) {
    blockIdx = {(unsigned)(b % gx), (unsigned)(b / gx % gy), (unsigned)(b / (gx * gy))};
    for (long long t = 0; t < block; t++) {
      ucontext_t &c = f.ctx[(size_t)t];
      getcontext(&c);
      c.uc_stack.ss_sp = f.stacks + (size_t)t * EMU_FIBER_STACK;
      c.uc_stack.ss_size = EMU_FIBER_STACK;
      c.uc_link = &f.main;
      makecontext(&c, (void (*)())emu_fiber_entry, 1, (int)t);
      f.state[(size_t)t] = EMU_FIBER_READY;
    }
    for (long long done = 0; done < block;) {
      long long at_barrier = 0;
      done = 0;
      for (long long t = 0; t < block; t++) {
        if (f.state[(size_t)t] == EMU_FIBER_DONE) {
          done++;
          continue;
        }
        f.cur = (int)t;
        threadIdx = {(unsigned)t, 0, 0};
        f.state[(size_t)t] = EMU_FIBER_READY;
        swapcontext(&f.main, &f.ctx[(size_t)t]);
        if (f.state[(size_t)t] == EMU_FIBER_DONE) done++;
        else at_barrier++;
      }
      if (at_barrier && done) {
        std::fprintf(stderr, "host_emu: block (%u, %u, %u): %lld threads ended while %lld wait at a "
                     "barrier (a barrier, shuffle or mma not reached by every thread)\n",
                     blockIdx.x, blockIdx.y, blockIdx.z, done, at_barrier);
        std::abort();
      }
    }
  }
#else
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
#endif
}

#endif
