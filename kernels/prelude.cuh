// h3 kernel prelude (kernels/prelude.cuh): compiled in front of every translation unit, the
// plan's and the cuda backend's own. The only definitions of the arithmetic kernels use:
// widening loads (h3_w/h3_ld), narrowing stores with one RNE rounding (h3_put), rounding to
// bf16/f16 in registers (h3_rbf16/h3_rf16), 8-wide vector loads and stores, the per-op math
// (IEEE _rn intrinsics, so FMA contraction cannot change a result) and, embedded at build
// time in place of their #include, include/h3/rng.h (Philox + Box-Muller) and
// include/h3/scalar.h (integer floor division, modulo, row clamps): the CPU's own text; what
// two kernel files share (mma.sync and cp.async helpers, e4m3 codes and 2^x, a launch's last block, moe's grouped-GEMM contract, the
// warpgroup MMA, mbarrier and TMA helpers of the sm_90a units). Under H3_HOST_EMU it compiles as host C++
// (tests/codegen/host_emu.h; of the warpgroup MMA part only the descriptor and do-nothing fences and
// waits, for the kernels that read B through emu_wgmma_bf16).
#ifndef H3_HOST_EMU
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif
#include "h3/rng.h"
#include "h3/scalar.h"
typedef __nv_bfloat16 h3_bf16;
typedef __half h3_f16;
#define H3_DI __device__ __forceinline__
// a kernel's dynamic shared memory as an array `name` of T (host emulation: one buffer)
#ifdef H3_HOST_EMU
#define H3_DYN_SMEM(T, name) T *name = reinterpret_cast<T *>(emu_dyn_smem)
#else
#define H3_DYN_SMEM(T, name) extern __shared__ __align__(16) T name[]
#endif

// widening: stored element -> compute type (float, double or long long)
H3_DI float h3_w(h3_bf16 v) { return __bfloat162float(v); }
H3_DI float h3_w(h3_f16 v) { return __half2float(v); }
H3_DI float h3_w(float v) { return v; }
H3_DI double h3_w(double v) { return v; }
H3_DI long long h3_w(signed char v) { return v; }
H3_DI long long h3_w(unsigned char v) { return v; }
H3_DI long long h3_w(int v) { return v; }
H3_DI long long h3_w(long long v) { return v; }
template <typename T> H3_DI auto h3_ld(const T *p, long long i) { return h3_w(p[i]); }

// narrowing: compute value -> stored element, one rounding to nearest even
H3_DI void h3_put(h3_bf16 &d, float v) { d = __float2bfloat16_rn(v); }
H3_DI void h3_put(h3_f16 &d, float v) { d = __float2half_rn(v); }
H3_DI void h3_put(float &d, float v) { d = v; }
H3_DI void h3_put(double &d, double v) { d = v; }
H3_DI void h3_put(signed char &d, long long v) { d = (signed char)v; }
H3_DI void h3_put(unsigned char &d, long long v) { d = (unsigned char)v; }
H3_DI void h3_put(int &d, long long v) { d = (int)v; }
H3_DI void h3_put(long long &d, long long v) { d = v; }
template <typename T, typename C> H3_DI void h3_st(T *p, long long i, C v) { h3_put(p[i], v); }

// the 8 bf16 of q (16 bytes as loaded, the lower half of a word first) as fp32, exactly (a
// bf16 is the high half of its fp32): one shift or mask per element
H3_DI void h3_bf16x8_f32(uint4 q, float *f) {
  const unsigned u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int k = 0; k < 4; k++) {
    f[2 * k] = __int_as_float((int)(u[k] << 16));
    f[2 * k + 1] = __int_as_float((int)(u[k] & 0xffff0000u));
  }
}
// 8 bf16 of a 16-byte aligned array <-> fp32, a pair per 32-bit word (one shift or mask per
// element, one cvt per pair on the GPU; element by element elsewhere: the same values)
H3_DI void h3_wbf8(const h3_bf16 *t, float *f) {
#ifdef __CUDA_ARCH__
  h3_bf16x8_f32(*reinterpret_cast<const uint4 *>(t), f);
#else
  for (int k = 0; k < 8; k++) f[k] = h3_w(t[k]);
#endif
}
H3_DI void h3_pbf8(const float *f, h3_bf16 *t) {
#ifdef __CUDA_ARCH__
  unsigned u[4];
#pragma unroll
  for (int k = 0; k < 4; k++)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(u[k]) : "f"(f[2 * k + 1]), "f"(f[2 * k]));
  *reinterpret_cast<uint4 *>(t) = make_uint4(u[0], u[1], u[2], u[3]);
#else
  for (int k = 0; k < 8; k++) h3_put(t[k], f[k]);
#endif
}

// sage_attention's int8 rule (ops.def): a block's delta from its amax (1 when every value is
// 0) and a value's code, round-half-even(x / delta) clamped to [-127, 127]; the pre-passes of
// kernels/sage_quant.cu and the fused q norm + RoPE kernel (codegen/emit_norm_rope_sage.c)
// apply it, the CPU reference's rule bit for bit
H3_DI float h3_sage_delta(float amax) { return amax > 0.0f ? __fdiv_rn(amax, 127.0f) : 1.0f; }
H3_DI signed char h3_sage_code(float x, float delta) {
  const float r = rintf(__fdiv_rn(x, delta));
  return (signed char)(r > 127.0f ? 127 : r < -127.0f ? -127 : (int)r);
}

// in-register rounding of an fp32 value to the bf16/f16 grid
H3_DI float h3_rbf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
H3_DI float h3_rf16(float x) { return __half2float(__float2half_rn(x)); }
H3_DI float h3_rbf16d(double x) { return __bfloat162float(__double2bfloat16(x)); }
H3_DI float h3_rf16d(double x) { return __half2float(__double2half(x)); }
// Plan B's gated residual add on 8 bf16 of 16-byte aligned arrays, x[k] = bf16(x[k] + bf16(g[k] *
// u[k])): on sm_90 a bf16x2 multiply (mul.rn: the product of two bf16 is exact in fp32, so one
// rounding of it is the fp32 product's rounding) and add (add.rn: a sum rounded to fp32, then
// to bf16, is the sum rounded to bf16 once, as 24 >= 2 * 8 + 2 bits) per pair, subnormals
// kept; elsewhere in fp32 element by element: the same values (a NaN's payload aside)
H3_DI void h3_u3bf8(h3_bf16 *x, const h3_bf16 *g, const h3_bf16 *u) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint4 *xq = reinterpret_cast<uint4 *>(x);
  const uint4 gq = *reinterpret_cast<const uint4 *>(g), uq = *reinterpret_cast<const uint4 *>(u);
  unsigned xs[4] = {xq->x, xq->y, xq->z, xq->w};
  const unsigned gs[4] = {gq.x, gq.y, gq.z, gq.w}, us[4] = {uq.x, uq.y, uq.z, uq.w};
#pragma unroll
  for (int k = 0; k < 4; k++) {
    unsigned p;
    asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(p) : "r"(gs[k]), "r"(us[k]));
    asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(xs[k]) : "r"(xs[k]), "r"(p));
  }
  *xq = make_uint4(xs[0], xs[1], xs[2], xs[3]);
#else
  for (int k = 0; k < 8; k++)
    h3_put(x[k], __fadd_rn(h3_w(x[k]), h3_rbf16(__fmul_rn(h3_w(g[k]), h3_w(u[k])))));
#endif
}

// One warp-wide tensor-core product d += a * b, m16n8k16, bf16 in, fp32 accumulate (mma.sync;
// the PTX ISA's fragment layout: lane l = 4g + t holds a = {A[g][2t..], A[g+8][2t..],
// A[g][2t+8..], A[g+8][2t+8..]}, b = {B[2t..][g], B[2t+8..][g]} as bf16 pairs (low half the
// lower k) and d = {D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1]}). Every lane of the warp
// takes part. Host emulation: emu_mma_bf16 (tests/codegen/host_emu.h).
H3_DI void h3_mma_bf16(float *d, const unsigned *a, const unsigned *b) {
#ifdef H3_HOST_EMU
  emu_mma_bf16(d, a, b);
#else
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
               "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// Four 8x8 matrices of 16-bit elements from shared memory, warp-wide (ldmatrix.x4): lane 8i + r
// gives the address of row r of matrix i (16 bytes, 16-byte aligned); r[i] of lane 4g + t is
// row g, elements 2t and 2t + 1 of matrix i (low half the lower). With matrices (rows 0-7,
// cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15) of a row-major 16x16 tile that is
// h3_mma_bf16's a; with (n 0-7, k 0-7), (n 0-7, k 8-15) of an [n][k] tile its b. Every lane
// of the warp takes part. Host emulation: emu_ldsm4 (tests/codegen/host_emu.h).
H3_DI void h3_ldsm4(unsigned *r, const void *p) {
#ifdef H3_HOST_EMU
  emu_ldsm4(r, p);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"((unsigned)__cvta_generic_to_shared(p))
               : "memory");
#endif
}

// ldmatrix.x4.trans: h3_ldsm4's addressing (lane 8 i + r: row r of matrix i), each matrix
// transposed: r[i] of lane 4 g + t is rows 2 t and 2 t + 1 of column g (low half the former);
// with (k 0-7, n 0-7), (k 8-15, n 0-7) of a [k][n] tile, h3_mma_bf16's b. Every lane of the
// warp takes part. Host emulation: emu_ldsm4_trans.
H3_DI void h3_ldsm4_trans(unsigned *r, const void *p) {
#ifdef H3_HOST_EMU
  emu_ldsm4_trans(r, p);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"((unsigned)__cvta_generic_to_shared(p))
               : "memory");
#endif
}

// sc[n] = base + Q K^T for keys 8 n .. 8 n + 7 of a K tile in shared memory: rows of 64 KP bytes (a
// key each), 16-byte chunk c of key r at chunk c ^ (r & 7); qa[2 KP] Q's A fragments, k-steps
// ascending. An ldmatrix.x4 of 64 bytes of 8 keys gives the B fragments (n = key) of two
// k-steps, each multiplied by MMA (h3_mma_bf16: k16 of bf16, kernels/m31_msa_tile.cu; or an
// m16n8k32 of 8-bit codes, kernels/sage_attention.cu). Every lane of the warp takes part.
template <int KP, typename Acc, void (*MMA)(Acc *, const unsigned *, const unsigned *)>
H3_DI void h3_tile_qk(const unsigned char *ks, const unsigned (*qa)[4], Acc sc[8][4], Acc base) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int n = 0; n < 8; n++)
#pragma unroll
    for (int i = 0; i < 4; i++) sc[n][i] = base;
#pragma unroll
  for (int kp = 0; kp < KP; kp++) // bytes 64 kp .. + 63 of each key: k-steps 2 kp, 2 kp + 1
#pragma unroll
    for (int n = 0; n < 8; n++) {
      unsigned f[4];
      h3_ldsm4(f, ks + (8 * n + (lane & 7)) * 64 * KP + (((4 * kp + (lane >> 3)) ^ (lane & 7)) * 16));
      const unsigned b0[2] = {f[0], f[1]}, b1[2] = {f[2], f[3]};
      MMA(sc[n], qa[2 * kp], b0);
      MMA(sc[n], qa[2 * kp + 1], b1);
    }
}

// bf16 pair (lo, hi) in one word, low half the lower k (the mma's operand order), each
// rounded to nearest
H3_DI unsigned h3_bf16x2(float lo, float hi) {
#ifdef __CUDA_ARCH__
  unsigned u;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(u) : "f"(hi), "f"(lo));
  return u;
#else
  return (unsigned)h3_f32_to_bf16(lo) | (unsigned)h3_f32_to_bf16(hi) << 16;
#endif
}

// 2^x, the hardware approximation (flush to zero; the attention kernels' softmax); host
// emulation: exp2f
H3_DI float h3_exp2_approx(float x) {
#ifdef __CUDA_ARCH__
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return exp2f(x);
#endif
}

// e4m3 (OCP E4M3FN) pair (lo, hi) in the low 16 bits, lo the low byte: round to nearest even,
// +-448 past it (satfinite), NaN to 0x7f; include/h3/nvfp4.h's h3_e4m3_from_f32 twice (the
// sage kernels' V and P codes, kernels/sage_quant.cu and sage_attention.cu)
H3_DI unsigned h3_e4m3x2(float lo, float hi) {
#ifdef __CUDA_ARCH__
  unsigned short u;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(u) : "f"(hi), "f"(lo));
  return u;
#else
  return (unsigned)h3_e4m3_from_f32(lo) | (unsigned)h3_e4m3_from_f32(hi) << 8;
#endif
}

// Programmatic dependent launch (sm_90; no-ops where the kernel was launched without it, and
// in host emulation, which runs kernels one after another). h3_pdl_launch_dependents: the
// block lets the next kernel of its stream, launched with the programmatic attribute
// (cu_launch_pdl), start once every block of this grid has called it or exited.
// h3_pdl_wait: returns once the grids this one depends on have completed and their writes are
// visible; nothing written by them may be read before it, nothing they read written. A
// pointer read after the wait must not be `const __restrict__`: the compiler takes such data
// as unchanging over the kernel and may hoist its loads above the wait (asm volatile and a
// memory clobber do not stop it; seen in the moe's down GEMV, whose first chunk of act was
// loaded before the wait).
H3_DI void h3_pdl_launch_dependents() {
#ifdef __CUDA_ARCH__
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
H3_DI void h3_pdl_wait() {
#ifdef __CUDA_ARCH__
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// 16 bytes at p through the read-only cache (ld.global.nc): for data no kernel writes while
// this one runs (weights), whatever the compiler can prove of the pointer.
H3_DI uint4 h3_ldg16(const void *p) {
#ifdef __CUDA_ARCH__
  return __ldg(reinterpret_cast<const uint4 *>(p));
#else
  return *reinterpret_cast<const uint4 *>(p);
#endif
}

// Asks L2 for the line holding p (no register, no wait): the data a kernel reads after
// h3_pdl_wait can start coming before it, whatever order the compiler gives the loads.
H3_DI void h3_prefetch_l2(const void *p) {
#ifdef __CUDA_ARCH__
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#endif
}

// Few-row products on tensor cores, reading weights straight from global memory (decode:
// bandwidth-bound, no shared-memory staging). acc[j] (4 floats each, h3_mma_bf16's d) =
// x[rows] · w[j] over the 128-wide K chunks at k_first, k_first + k_step, ... < K (K a
// multiple of 128, 0 <= k_first < k_step; the loop runs ceil(K / k_step) times in every warp), for NT n-tiles whose row g (lane / 4) starts at w[j] (a tile's 8 outputs
// are 8 weight rows). The mma's 16 rows: this lane feeds rows g and g + 8, which start at
// x + xrow[0] * K and x + xrow[1] * K and are zeros where !xlive. The K order inside each
// chunk is permuted the same way for A and B: lane t (= lane % 4) of a quad reads the 32
// consecutive k at 32t (four 16-byte loads of each weight row and row of x) and feeds them to
// the chunk's 8 k-steps, two per 16 bytes; the sums are unchanged and each weight row is
// read 256 contiguous bytes at a time. Every lane of the warp takes part. PDL_WAIT: x is
// written by the grid before this one (a programmatic launch; x not `__restrict__`): the
// first chunk's weights are prefetched to L2, then h3_pdl_wait, then the loads, so that the
// weights' first reads overlap that grid's tail (a load of `__restrict__` weights before the
// wait in the source may still be scheduled after it).
template <int NT, bool PDL_WAIT = false>
H3_DI void h3_mma_rows(const h3_bf16 *x, const long long *xrow, const bool *xlive,
                       const h3_bf16 *const *w, long long K, long long k_first, long long k_step,
                       float acc[NT][4]) {
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int j = 0; j < NT; j++)
#pragma unroll
    for (int q = 0; q < 4; q++) acc[j][q] = 0.0f;
  const h3_bf16 *xa = x + xrow[0] * K + 32 * t, *xb = x + xrow[1] * K + 32 * t;
  const uint4 z = {0u, 0u, 0u, 0u};
#pragma unroll 2
  for (long long base = 0; base < K; base += k_step) { // as often in every warp of the block
    const long long k0 = base + k_first;
    const bool in = k0 < K; // else this warp adds zeros
    if (PDL_WAIT && base == 0) { // the first chunk's weights on their way while that grid ends
#pragma unroll
      for (int j = 0; j < NT; j++)
        if (in) h3_prefetch_l2(w[j] + k0 + 32 * t);
      h3_pdl_wait();
    }
    uint4 wv[NT][4], a[4], b[4];
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
      for (int q = 0; q < 4; q++) wv[j][q] = in ? h3_ldg16(w[j] + k0 + 32 * t + 8 * q) : z;
#pragma unroll
    for (int q = 0; q < 4; q++) {
      a[q] = in && xlive[0] ? *reinterpret_cast<const uint4 *>(xa + k0 + 8 * q) : z;
      b[q] = in && xlive[1] ? *reinterpret_cast<const uint4 *>(xb + k0 + 8 * q) : z;
    }
#pragma unroll
    for (int q = 0; q < 4; q++) {
      const unsigned a1[4] = {a[q].x, b[q].x, a[q].y, b[q].y}, a2[4] = {a[q].z, b[q].z, a[q].w, b[q].w};
#pragma unroll
      for (int j = 0; j < NT; j++) {
        const unsigned b1[2] = {wv[j][q].x, wv[j][q].y}, b2[2] = {wv[j][q].z, wv[j][q].w};
        h3_mma_bf16(acc[j], a1, b1);
        h3_mma_bf16(acc[j], a2, b2);
      }
    }
  }
}

// The sum over the block's W warps of each warp's acc (h3_mma_rows' partial sums of
// different K chunks), added in warp order into warp 0's acc; the other warps' acc are left
// as they were. Every thread of the block calls it (two barriers).
template <int NT, int W> H3_DI void h3_mma_reduce(float acc[NT][4]) {
  __shared__ float part[W > 1 ? W - 1 : 1][NT * 4][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (warp > 0)
#pragma unroll
    for (int i = 0; i < NT * 4; i++) part[warp - 1][i][lane] = acc[i / 4][i % 4];
  __syncthreads();
  if (warp == 0)
    for (int v = 0; v < W - 1; v++)
#pragma unroll
      for (int i = 0; i < NT * 4; i++) acc[i / 4][i % 4] = __fadd_rn(acc[i / 4][i % 4], part[v][i][lane]);
  __syncthreads();
}

// 16 bytes from global (16-byte aligned) into shared memory with no register held while in
// flight (cp.async.cg: through L2 only); h3_cp_commit closes the thread's batch, h3_cp_wait
// waits for it (the thread may then read what it copied; other threads' data needs a barrier)
H3_DI void h3_cp16(uint4 *dst, const void *src) {
#ifdef __CUDA_ARCH__
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::
               "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src) : "memory");
#else
  memcpy(dst, src, 16);
#endif
}
H3_DI void h3_cp_commit() {
#ifdef __CUDA_ARCH__
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
H3_DI void h3_cp_wait() {
#ifdef __CUDA_ARCH__
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}
// waits until at most N of this thread's cp.async batches are in flight
template <int N> H3_DI void h3_cp_wait_pending() {
#ifdef __CUDA_ARCH__
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}
// two bf16 (v0, v1 rounded once) at p, p + 1 (4-byte aligned) in one store
H3_DI void h3_st2(h3_bf16 *p, float v0, float v1) {
  __align__(4) h3_bf16 t[2];
  h3_put(t[0], v0);
  h3_put(t[1], v1);
  *reinterpret_cast<unsigned *>(p) = *reinterpret_cast<const unsigned *>(t);
}
// 8 consecutive elements as stored, t[8] at p + i: vector accesses when V (the caller
// checked h3_al8: B = 8 * sizeof(T) bytes, aligned to min(16, B)), else element by element
template <typename T> H3_DI bool h3_al8(const T *p) {
  constexpr unsigned long long A = sizeof(T) * 8 >= 16 ? 16 : sizeof(T) * 8;
  return (reinterpret_cast<unsigned long long>(p) & (A - 1)) == 0;
}
template <bool V, typename T> H3_DI void h3_ldr8(const T *p, long long i, T *t) {
  const T *q = p + i;
  constexpr int B = (int)sizeof(T) * 8;
  if constexpr (V && B >= 16) {
#pragma unroll
    for (int c = 0; c < B / 16; c++)
      reinterpret_cast<uint4 *>(t)[c] = reinterpret_cast<const uint4 *>(q)[c];
  } else if constexpr (V) {
    *reinterpret_cast<uint2 *>(t) = *reinterpret_cast<const uint2 *>(q);
  } else {
#pragma unroll
    for (int k = 0; k < 8; k++) t[k] = q[k];
  }
}
template <bool V, typename T> H3_DI void h3_str8(T *p, long long i, const T *t) {
  T *q = p + i;
  constexpr int B = (int)sizeof(T) * 8;
  if constexpr (V && B >= 16) {
#pragma unroll
    for (int c = 0; c < B / 16; c++)
      reinterpret_cast<uint4 *>(q)[c] = reinterpret_cast<const uint4 *>(t)[c];
  } else if constexpr (V) {
    *reinterpret_cast<uint2 *>(q) = *reinterpret_cast<const uint2 *>(t);
  } else {
#pragma unroll
    for (int k = 0; k < 8; k++) q[k] = t[k];
  }
}
// 8 consecutive elements widened / rounded (one RNE rounding), vector accesses when aligned
template <typename T, typename C> H3_DI void h3_ld8(const T *p, long long i, C *out) {
  __align__(16) T t[8];
  if (h3_al8(p + i)) h3_ldr8<true>(p, i, t);
  else h3_ldr8<false>(p, i, t);
#pragma unroll
  for (int k = 0; k < 8; k++) out[k] = h3_w(t[k]);
}
template <typename T, typename C> H3_DI void h3_st8(T *p, long long i, const C *v) {
  __align__(16) T t[8];
#pragma unroll
  for (int k = 0; k < 8; k++) h3_put(t[k], v[k]);
  if (h3_al8(p + i)) h3_str8<true>(p, i, t);
  else h3_str8<false>(p, i, t);
}

// op math in the compute type; IEEE round-to-nearest intrinsics only
H3_DI float h3_add(float a, float b) { return __fadd_rn(a, b); }
H3_DI double h3_add(double a, double b) { return __dadd_rn(a, b); }
H3_DI long long h3_add(long long a, long long b) { return (long long)((unsigned long long)a + (unsigned long long)b); }
H3_DI float h3_sub(float a, float b) { return __fsub_rn(a, b); }
H3_DI double h3_sub(double a, double b) { return __dsub_rn(a, b); }
H3_DI long long h3_sub(long long a, long long b) { return (long long)((unsigned long long)a - (unsigned long long)b); }
H3_DI float h3_mul(float a, float b) { return __fmul_rn(a, b); }
H3_DI double h3_mul(double a, double b) { return __dmul_rn(a, b); }
H3_DI long long h3_mul(long long a, long long b) { return (long long)((unsigned long long)a * (unsigned long long)b); }
H3_DI float h3_div(float a, float b) { return __fdiv_rn(a, b); }
H3_DI double h3_div(double a, double b) { return __ddiv_rn(a, b); }
// integer division floors and modulo takes the divisor's sign (Python), include/h3/scalar.h
H3_DI long long h3_div(long long a, long long b) { return h3_sc_floordiv(a, b); }
H3_DI long long h3_mod(long long a, long long b) { return h3_sc_floormod(a, b); }
H3_DI float h3_max(float a, float b) { return fmaxf(a, b); }
H3_DI double h3_max(double a, double b) { return fmax(a, b); }
H3_DI long long h3_max(long long a, long long b) { return a > b ? a : b; }
H3_DI float h3_min(float a, float b) { return fminf(a, b); }
H3_DI double h3_min(double a, double b) { return fmin(a, b); }
H3_DI long long h3_min(long long a, long long b) { return a < b ? a : b; }
H3_DI float h3_neg(float a) { return -a; }
H3_DI double h3_neg(double a) { return -a; }
H3_DI long long h3_neg(long long a) { return (long long)(0ull - (unsigned long long)a); }
H3_DI float h3_abs(float a) { return fabsf(a); }
H3_DI double h3_abs(double a) { return fabs(a); }
H3_DI long long h3_abs(long long a) { return a < 0 ? h3_neg(a) : a; }
H3_DI float h3_exp(float a) { return expf(a); }
H3_DI double h3_exp(double a) { return exp(a); }
H3_DI float h3_log(float a) { return logf(a); }
H3_DI double h3_log(double a) { return log(a); }
H3_DI float h3_sqrt(float a) { return __fsqrt_rn(a); }
H3_DI double h3_sqrt(double a) { return __dsqrt_rn(a); }
H3_DI float h3_rsqrt(float a) { return __fdiv_rn(1.0f, __fsqrt_rn(a)); }
H3_DI double h3_rsqrt(double a) { return __ddiv_rn(1.0, __dsqrt_rn(a)); }
// silu(x) = x / (1 + exp(-x)); sigmoid(x) = 1 / (1 + exp(-x))
H3_DI float h3_silu(float a) { return __fdiv_rn(a, __fadd_rn(1.0f, expf(-a))); }
H3_DI double h3_silu(double a) { return __ddiv_rn(a, __dadd_rn(1.0, exp(-a))); }
H3_DI float h3_sigmoid(float a) { return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-a))); }
H3_DI double h3_sigmoid(double a) { return __ddiv_rn(1.0, __dadd_rn(1.0, exp(-a))); }
// swigluoai (MiniMax-M3.1's experts) of one output from its gate and up sums as rounded:
// gate clamped above at limit, up clamped to [-limit, limit], then
// gate * sigmoid(alpha * gate) * (up + 1), the CPU reference's operations in its order
H3_DI float h3_swigluoai(float g, float u, float alpha, float limit) {
  g = g < limit ? g : limit;
  u = u < -limit ? -limit : (u > limit ? limit : u);
  return __fmul_rn(__fmul_rn(g, h3_sigmoid(__fmul_rn(alpha, g))), __fadd_rn(u, 1.0f));
}
// moe's grouped GEMMs (kernels/m31_moe_gemm.cu, m31_moe_wgmma.cu): the expert e and first
// row m0 (of its list) of m-tile slot s, the experts' ceil(counts[e] / bm) m-tiles numbered
// expert-major; false past the last
H3_DI bool h3_moe_tile(const int *counts, int E, int s, int bm, int *e, int *m0) {
  for (int i = 0; i < E; i++) {
    const int n = (counts[i] + bm - 1) / bm;
    if (s < n) {
      *e = i, *m0 = s * bm;
      return true;
    }
    s -= n;
  }
  return false;
}
// their parameters, one launch contract (runtime/cuda/cuda_m31_moe.c): gate_up (h[T, H],
// gate_up[E, 2F, H] -> act[T * k, F]) and down (down[E, H, F], act -> y[T * k, H]), both
// reading the row lists [E, T] and counts [E] of moe's route kernel
#define H3_MOE_GEMM_PARAMS                                                                      \
  const h3_bf16 *__restrict__ h, const h3_bf16 *__restrict__ gu, const int *__restrict__ lists, \
      const int *__restrict__ counts, h3_bf16 *__restrict__ act, long long T, long long H,      \
      long long F, int k, int E, float alpha, float limit
#define H3_MOE_GEMM_DOWN_PARAMS                                                                 \
  const h3_bf16 *__restrict__ down, const int *__restrict__ lists,                              \
      const int *__restrict__ counts, const h3_bf16 *__restrict__ act, h3_bf16 *__restrict__ y, \
      long long T, long long H, long long F, int k, int E
// the row t * k + s of act / y of the list entry ts = t * 16 + s
H3_DI long long h3_moe_row(int ts, int k) { return (long long)(ts / 16) * k + ts % 16; }
// two consecutive outputs of act from their gate sums g0, g1 and up sums u0, u1: each sum
// rounded to bf16, swigluoai, stored as two bf16 (h3_st2)
H3_DI void h3_moe_act2(h3_bf16 *p, float g0, float g1, float u0, float u1, float alpha, float limit) {
  h3_st2(p, h3_swigluoai(h3_rbf16(g0), h3_rbf16(u0), alpha, limit),
         h3_swigluoai(h3_rbf16(g1), h3_rbf16(u1), alpha, limit));
}
H3_DI float h3_tanh(float a) { return tanhf(a); }
H3_DI double h3_tanh(double a) { return tanh(a); }
H3_DI float h3_cos(float a) { return cosf(a); }
H3_DI double h3_cos(double a) { return cos(a); }
H3_DI float h3_sin(float a) { return sinf(a); }
H3_DI double h3_sin(double a) { return sin(a); }
// clamp of a gather index into [0, n); the int form for i32 indices into n < 2^31 rows (two
// 32-bit compares instead of 64-bit ones)
H3_DI long long h3_clampi(long long v, long long n) { return h3_sc_clamp_row(v, n); }
H3_DI int h3_clampi(int v, int n) { return v < 0 ? 0 : (v >= n ? n - 1 : v); }


// ---- a launch's last block (the split combines of m31_msa.cu, the router of m31_moe.cu) ----
// A value another block of the launch wrote, read through L2 (never a stale L1 line)
template <typename T> __device__ __forceinline__ T h3_ldcg(const T *p) {
#ifdef __CUDA_ARCH__
  return __ldcg(p);
#else
  return *p;
#endif
}

// A fence at GPU scope that orders this thread's memory accesses before and after it
// (release for its earlier writes, acquire for its later reads)
__device__ __forceinline__ void h3_fence_gpu() {
#ifdef __CUDA_ARCH__
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
#endif
}

// Whether the calling block is the last of the n blocks that pass counter c (u32, 0 before
// the first of them): every thread of the block calls it after the writes that the last block
// reads. The last resets c to 0 and then sees every block's writes (through h3_ldcg). Host
// emulation runs the blocks one at a time.
__device__ __forceinline__ bool h3_last_block(unsigned *c, unsigned n) {
  __shared__ int last;
  h3_fence_gpu(); // this thread's writes before the block's ticket
  __syncthreads();
  if (threadIdx.x == 0) {
#ifdef __CUDA_ARCH__
    last = atomicAdd(c, 1u) == n - 1;
#else
    last = (*c)++ == n - 1;
#endif
    if (last) *c = 0;
  }
  __syncthreads();
  if (last) h3_fence_gpu(); // the other blocks' writes before this block's reads
  return last;
}

// wgmma matrix descriptor (PTX ISA, "Matrix Descriptor Format"; GPU and host emulation) of a
// tile whose rows are 128 bytes stored in the 128-byte swizzle (16-byte chunk c of row r at chunk
// c ^ (r & 7), atoms of 8 rows = 1024 bytes, 1024-byte aligned): bits 0-13 the start address >>
// 4, 16-29 the leading byte offset lbo >> 4, 32-45 the stride byte offset sbo >> 4, 49-51 base
// offset 0, 62-63 the swizzle mode (1: 128 bytes). Adding n to it moves the start by 16 n bytes.
H3_DI unsigned long long h3_wg_desc(unsigned addr, unsigned lbo, unsigned sbo) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
         ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62);
}
#ifdef H3_HOST_EMU
// ---- the warpgroup MMA's helpers under host emulation (tests/codegen/host_emu.h's
// emu_wgmma_bf16 reads B through the descriptor): shared addresses are offsets into the
// emulation's dynamic shared memory; a wgmma completes at once, so fences, commits and waits
// do nothing ----
H3_DI unsigned h3_smem_addr(const void *p) {
  return (unsigned)(reinterpret_cast<const unsigned char *>(p) - emu_dyn_smem);
}
H3_DI void h3_wg_fence() {}
H3_DI void h3_wg_commit() {}
template <int N> H3_DI void h3_wg_wait() {}
template <int N> H3_DI void h3_wg_hold(float *) {}
H3_DI void h3_fence_async_smem() {}
#else
// ---- warpgroup MMA (wgmma; only units compiled for sm_90a may call these) ----
// a generic pointer into shared memory as a shared::cta address
H3_DI unsigned h3_smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
// orders this warpgroup's register (and shared memory) accesses before the wgmmas after it
H3_DI void h3_wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
// closes the group of this warpgroup's wgmmas issued since the last commit
H3_DI void h3_wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// waits until at most N of this warpgroup's committed wgmma groups are pending
template <int N> H3_DI void h3_wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// keeps reads of the N wgmma results d after the wait that precedes it
template <int N> H3_DI void h3_wg_hold(float *d) {
#pragma unroll
  for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}
// generic-proxy writes to shared memory (st.shared, cp.async) made visible to the async proxy
// (wgmma's operand reads, TMA) of the threads that synchronise with this one after it
H3_DI void h3_fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// ---- mbarriers (shared::cta addresses) and TMA (flash_attention.cu, m31_moe_wgmma.cu) ----
// a CUtensorMap (128 opaque bytes, 64-byte aligned), passed by value (__grid_constant__)
struct __align__(64) h3_tmap { unsigned long long opaque[16]; };
H3_DI void h3_bar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count)
               : "memory");
}
// the producer's arrival, announcing `bytes` of TMA writes that complete the phase
H3_DI void h3_bar_expect(unsigned bar, unsigned bytes) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n"
               ::"r"(bar), "r"(bytes) : "memory");
}
H3_DI void h3_bar_arrive(unsigned bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(bar)
               : "memory");
}
// waits until the phase of parity `parity` has completed
H3_DI void h3_bar_wait(unsigned bar, unsigned parity) {
  unsigned done;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  } while (!done);
}
// A ring of SLOTS shared-memory slots between one TMA producer and the consumers: per slot a
// "full" mbarrier (the producer's expect_tx arrival + the TMA bytes) and an "empty" one (the
// consumers' releases), 8-byte words from `bars` on: full(s), then empty(s) SLOTS words later.
template <int SLOTS> struct h3_ring {
  unsigned bars;
  H3_DI unsigned full(int s) const { return bars + 8 * s; }
  H3_DI unsigned empty(int s) const { return bars + 8 * (SLOTS + s); }
  // one thread, before the block's first barrier: every slot's two barriers (full expects one
  // arrival, empty `releases`), made visible to the async proxy
  H3_DI void init(unsigned releases) const {
    for (int s = 0; s < SLOTS; s++) {
      h3_bar_init(full(s), 1);
      h3_bar_init(empty(s), releases);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    h3_fence_async_smem();
  }
};
// TMA: the box of the map (flash attention, moe: {64 columns, 128 rows}, 128-byte swizzled)
// at (column c0, row c1) into shared memory at dst (1024-aligned), completing its bytes on bar
H3_DI void h3_tma(unsigned dst, const h3_tmap *map, int c0, int c1, unsigned bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3}], [%4];\n"
               ::"r"(dst), "l"((unsigned long long)map), "r"(c0), "r"(c1), "r"(bar)
               : "memory");
}
// ---- clusters (of 2 blocks: m31_moe_wgmma.cu, sage_attention.cu's wg1c form; of a row's key
// splits: m31_msa.cu's decode attention) ----
// this block's rank in its cluster
H3_DI unsigned h3_cluster_rank() {
  unsigned r;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// the two halves of a cluster barrier, every thread of every block of the cluster: arrive
// releases this thread's accesses before it (remote arrivals included), wait acquires the other
// blocks'
H3_DI void h3_cluster_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory"); }
H3_DI void h3_cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory"); }
H3_DI void h3_cluster_sync() {
  h3_cluster_arrive();
  h3_cluster_wait();
}
// the float at p (this block's shared memory) in block `rank` of the cluster
H3_DI float h3_ld_rank(const float *p, unsigned rank) {
  float v;
  asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %1, %2;\nld.shared::cluster.f32 %0, [ra];\n}\n"
               : "=f"(v) : "r"(h3_smem_addr(p)), "r"(rank) : "memory");
  return v;
}
// an arrival on the mbarrier at offset bar of the other block of the cluster (the default
// .release.cta, as CUTLASS's cluster pipelines: what it orders are this warp's finished wgmma
// reads before the other block's TMA writes; .cluster scope costs a MEMBAR.GPU per arrival)
H3_DI void h3_arrive_other(unsigned bar, unsigned rank) {
  asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
               "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n"
               ::"r"(bar), "r"(rank ^ 1u) : "memory");
}
// h3_tma into both blocks of the cluster: the box lands at dst and completes its bytes on bar
// at the same offsets in each
H3_DI void h3_tma_both(unsigned dst, const h3_tmap *map, int c0, int c1, unsigned bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n"
               ::"r"(dst), "l"((unsigned long long)map), "r"(c0), "r"(c1), "r"(bar),
               "h"((unsigned short)3) : "memory");
}
H3_DI void h3_prefetch_map(const h3_tmap *map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"((unsigned long long)map) : "memory");
}
// wgmma accumulator operands: 8 and 64 consecutive floats d[i ..] as "+f" asm operands, and
// the operand numbers %0 .. %63 of the first 64
#define H3_WG_C8(d, i) "+f"((d)[i]), "+f"((d)[(i) + 1]), "+f"((d)[(i) + 2]), "+f"((d)[(i) + 3]), \
    "+f"((d)[(i) + 4]), "+f"((d)[(i) + 5]), "+f"((d)[(i) + 6]), "+f"((d)[(i) + 7])
#define H3_WG_C64(d, i) H3_WG_C8(d, i), H3_WG_C8(d, (i) + 8), H3_WG_C8(d, (i) + 16), \
    H3_WG_C8(d, (i) + 24), H3_WG_C8(d, (i) + 32), H3_WG_C8(d, (i) + 40), H3_WG_C8(d, (i) + 48), \
    H3_WG_C8(d, (i) + 56)
#define H3_WG_OPS64 \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
// the attention kernels' m64n128k16 bf16 products (flash_attention.cu, m31_flash.cu), fp32
// accumulators d[64]: d (+)= A B with A and B (K-major) in shared memory (acc = 0 overwrites d);
// d += A B with A in registers (bf16x2) and B N-major in shared memory
H3_DI void h3_wgmma128_ss(float *d, unsigned long long a, unsigned long long b, int acc) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
               H3_WG_OPS64
               "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
               : H3_WG_C64(d, 0) : "l"(a), "l"(b), "r"(acc));
}
H3_DI void h3_wgmma128_rs(float *d, const unsigned *a, unsigned long long b) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
               H3_WG_OPS64
               "}, {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"
               : H3_WG_C64(d, 0) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
// the two consumer warpgroups' turns (named barrier id of 256 threads): wait for it, or pass it
H3_DI void h3_turn_wait(int id) { asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory"); }
H3_DI void h3_turn_pass(int id) { asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory"); }
#endif
