/* normmod_variants.cu: Plan A lossless norm+modulate at [32768, 5376] bf16 (scale and shift
 * tables of 6 rows, g = 0 for rows < 30000, else 1) on one GPU: the plan's emitted kernel (v0, from
 * NM_KERNEL_H, written by bench/normmod_variants.sh) against hand-written variants of its
 * memory schedule, each compared with v0 bitwise (same arithmetic):
 *   v1<R>     R rows per block, the next row's x prefetched into registers
 *   v2<R, S>  R rows per block, x through an S-stage shared-memory ring filled by cp.async
 *   v3<R, P>  R rows per block, w_eff = (gamma + off)(1 + scale[g]) and shift[g] kept in
 *             registers while g repeats; P: register prefetch of the next row as v1
 *   v5<R, BS, MINB> R rows per block, each row brought into shared memory by one
 *             cp.async.bulk (mbarrier, double buffer); BS: y leaves by bulk stores from shared
 *             memory; MINB: blocks per SM asked of the register allocator
 *   v7<S, NB, TREG, COPY> persistent blocks (NB per SM), x through a ring of S row buffers
 *             filled by cp.async.bulk, w_eff and shift[g] kept per thread (COPY: y = x)
 *   v8<TPB, MINB> one row per block of TPB threads, MINB blocks per SM (register cap)
 *   v9<RP, MINB> RP rows per block, gamma / scale / shift read once per column for RP rows
 *   v0 launch_bounds(256, N) the plan's kernel with a blocks-per-SM bound
 *   v11<R, MINB, UNROLL, COPY> v5's bulk rows with x read from shared memory in both passes
 *             (few live registers: MINB blocks per SM without spills); COPY: y = x through
 *             the same schedule
 *   v12<R, S, MINB> v11 with an S-stage ring of rows (S - 1 rows ahead)
 *   v10<M>    the plan kernel's shape with stages left out (copy, + barrier, + reduction,
 *             + tables, all, all with the tables loaded early): where the time goes
 *   v13<M>    v10's full kernel with cache hints (x not allocated in L1, the tables
 *             prefetched into L1 before the reduction, y stored streaming)
 *   v14<R, MINB, PERSIST> R rows per block in turn (PERSIST: rows strided by the grid), x in
 *             registers, each thread's table chunks in shared memory (cp.async when g changes)
 *   v15<MINB, NA> v14 persistent with w_eff = (gamma + 0)(1 + scale[g]) computed once per g
 *             into shared memory in fp32 (one multiply and one fma per element per row); NA: x
 *             loaded without L1 allocation
 *   v18<MINB, PF> 672 threads per row (one chunk each), persistent, w_eff and shift in
 *             registers, PF: next row's chunk prefetched (21-warp sum order: not bitwise)
 *   v19       v18's block shape, one row per block, the tables read for every row
 *   v20<WPR, RPB, MINB> rows handled by groups of WPR warps (1, 3, 7, 21), RPB rows per block
 *   v22<S, NB, SK> persistent, each thread's chunks through a cp.async ring of S rows, w_eff
 *             (fp32) and shift[g] in registers; v23: v22 with rows handed out by atomic tickets
 *   v24<S, NB, FAST> v22 with fewer instructions (x widened once, pairs converted at once;
 *             FAST: the sum of squares by fma and r by rsqrtf, not bitwise)
 *   v25<FAST, MINB> v0's shape reading w_eff from an fp32 table made by nm_weff (a launch)
 *   v26<TPB, MINB, XF, CR, PK> v0's shape, w_eff = fma(gamma, scale, gamma) per element, the
 *             lean arithmetic (CR: __frsqrt_rn instead of rsqrtf; PK: pairs packed by one cvt)
 *   a1 / a2   the plan's kernel (v0) with r by rsqrtf / with the chunk-0 table loads issued
 *             right after the reduction's barrier (text edits by normmod_variants.sh)
 *   b0, b1, b2 the plan's Plan B kernel (residual_norm_modulate, out of place) and the same
 *             two edits, against a cudaMemcpy of twice x's bytes
 * and copies of x: cudaMemcpy, a row-per-block copy kernel (with / without cache hints), and
 * flat copies with U 16-byte vectors per thread (which shape reaches cudaMemcpy's rate).
 * Prints the mean of 200 launches (CUDA events) per kernel and the mismatch count (or, for
 * another summation order, the distance from v0: check_close). main() runs the variants of
 * the latest experiments; the others stay defined for the record of bench/results/
 * 2026-11-30-h200-*normmod-variants*.txt. `normmod_variants prof` launches the compared forms
 * twice each, for Nsight Compute. */
#include NM_KERNEL_H
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define T_ROWS 32768
#define HH 5376
#define UNITS 672
#define BLK 256
#define CH 3

// r of a row from the thread's sum of squares: butterfly, then the NW warps' partials in order
template <int NW = 8>
__device__ __forceinline__ float rowsum_r(float ss, float *part, int tid) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss = __fadd_rn(ss, __shfl_xor_sync(0xffffffffu, ss, o));
  if ((tid & 31) == 0) part[tid >> 5] = ss;
  __syncthreads();
  float tot = 0.0f;
#pragma unroll
  for (int w = 0; w < NW; w++) tot = __fadd_rn(tot, part[w]);
  return __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(tot, 5376.0f), 0x1.4f8b58p-17f)));
}

// y's 8 values at chunk u (CS: stored streaming, st.global.cs)
template <bool CS = false>
__device__ __forceinline__ void modstore(const h3_bf16 *xr, float r, const h3_bf16 *in1, const h3_bf16 *scr,
                                         const h3_bf16 *shr, h3_bf16 *y, int u) {
  __align__(16) h3_bf16 wr[8], sr[8], hr[8], yr[8];
  h3_ldr8<true>(in1, u * 8, wr);
  h3_ldr8<true>(scr, u * 8, sr);
  h3_ldr8<true>(shr, u * 8, hr);
#pragma unroll
  for (int k = 0; k < 8; k++) {
    const float we = __fmul_rn(__fadd_rn(h3_w(wr[k]), 0.0f), __fadd_rn(1.0f, h3_w(sr[k])));
    h3_put(yr[k], __fmaf_rn(__fmul_rn(h3_w(xr[k]), r), we, h3_w(hr[k])));
  }
  if (CS) __stcs(reinterpret_cast<uint4 *>(y + u * 8), *reinterpret_cast<const uint4 *>(yr));
  else h3_str8<true>(y, u * 8, yr);
}

// r of the row whose chunks the thread holds in xr (partials in part)
__device__ __forceinline__ float row_r(const h3_bf16 (*xr)[8], float *part, int tid) {
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
#pragma unroll
    for (int k = 0; k < 8; k++) { float v = h3_w(xr[j][k]); ss = __fadd_rn(ss, __fmul_rn(v, v)); } } }
  return rowsum_r(ss, part, tid);
}

// the thread's chunks of a row in shared memory into xr
__device__ __forceinline__ void smem_row(h3_bf16 (*xr)[8], const h3_bf16 *xs, int tid) {
#pragma unroll
  for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) *reinterpret_cast<uint4 *>(xr[j]) = *reinterpret_cast<const uint4 *>(xs + u * 8); }
}

// y's row from xr and r, with the table rows of g = idx[row]
__device__ __forceinline__ void row_out(const h3_bf16 (*xr)[8], float r, long long row, const h3_bf16 *in1,
                                        const h3_bf16 *in2, const h3_bf16 *in3, const int *in4, h3_bf16 *out0, int tid) {
  const long long g = h3_clampi(h3_ld(in4, row), 6ll);
#pragma unroll
  for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) modstore(xr[j], r, in1, in2 + g * HH, in3 + g * HH, out0 + row * HH, u); }
}

// V1: R rows per block, the next row's x prefetched into registers
template <int R>
__global__ void __launch_bounds__(256) nm_v1(const h3_bf16 *__restrict__ in0, const h3_bf16 *__restrict__ in1,
                                             const h3_bf16 *__restrict__ in2, const h3_bf16 *__restrict__ in3,
                                             const int *__restrict__ in4, h3_bf16 *__restrict__ out0) {
  __shared__ float part[2][8];
  const int tid = threadIdx.x;
  const long long row0 = (long long)blockIdx.x * R;
  __align__(16) h3_bf16 xa[CH][8], xb[CH][8];
#pragma unroll
  for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) h3_ldr8<true>(in0 + row0 * HH, u * 8, xa[j]); }
#pragma unroll
  for (int i = 0; i < R; i++) {
    const long long row = row0 + i;
    if (row >= T_ROWS) break;
    h3_bf16 (*cur)[8] = (i & 1) ? xb : xa;
    h3_bf16 (*nxt)[8] = (i & 1) ? xa : xb;
    if (i + 1 < R && row + 1 < T_ROWS) {
#pragma unroll
      for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) h3_ldr8<true>(in0 + (row + 1) * HH, u * 8, nxt[j]); }
    }
    row_out(cur, row_r(cur, part[i & 1], tid), row, in1, in2, in3, in4, out0, tid);
  }
}

// V2: R rows per block, x streamed through a shared-memory ring of S stages by cp.async
__device__ __forceinline__ void cpa16(void *sdst, const void *g) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"((unsigned)__cvta_generic_to_shared(sdst)), "l"(g));
}
__device__ __forceinline__ void cpa_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cpa_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

template <int R, int S>
__global__ void __launch_bounds__(256) nm_v2(const h3_bf16 *__restrict__ in0, const h3_bf16 *__restrict__ in1,
                                             const h3_bf16 *__restrict__ in2, const h3_bf16 *__restrict__ in3,
                                             const int *__restrict__ in4, h3_bf16 *__restrict__ out0) {
  __shared__ float part[2][8];
  __shared__ __align__(16) h3_bf16 ring[S][UNITS * 8];
  const int tid = threadIdx.x;
  const long long row0 = (long long)blockIdx.x * R;
  // prologue: rows 0 .. S-2
#pragma unroll
  for (int p = 0; p < S - 1; p++) {
    if (p < R && row0 + p < T_ROWS) {
#pragma unroll
      for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) cpa16(&ring[p][u * 8], in0 + (row0 + p) * HH + u * 8); }
    }
    cpa_commit();
  }
#pragma unroll 1
  for (int i = 0; i < R; i++) {
    const long long row = row0 + i;
    if (row >= T_ROWS) break;
    const int nx = i + S - 1;
    if (nx < R && row0 + nx < T_ROWS) {
#pragma unroll
      for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) cpa16(&ring[nx % S][u * 8], in0 + (row0 + nx) * HH + u * 8); }
    }
    cpa_commit();
    cpa_wait<S - 1>();
    const h3_bf16 *xs = ring[i % S];
    __align__(16) h3_bf16 xr[CH][8];
    smem_row(xr, xs, tid);
    row_out(xr, row_r(xr, part[i & 1], tid), row, in1, in2, in3, in4, out0, tid);
  }
}


// V3: R rows per block; the thread's columns of w_eff = (gamma + off)(1 + scale[g]) (fp32) and
// shift[g] stay in registers while g repeats; P: prefetch the next row's x
template <int R, bool P>
__global__ void __launch_bounds__(256) nm_v3(const h3_bf16 *__restrict__ in0, const h3_bf16 *__restrict__ in1,
                                             const h3_bf16 *__restrict__ in2, const h3_bf16 *__restrict__ in3,
                                             const int *__restrict__ in4, h3_bf16 *__restrict__ out0) {
  __shared__ float part[2][8];
  const int tid = threadIdx.x;
  const long long row0 = (long long)blockIdx.x * R;
  __align__(16) h3_bf16 xa[CH][8], xb[CH][8], hs[CH][8];
  float we[CH][8];
  long long gp = -1;
  if (P) {
#pragma unroll
  for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) h3_ldr8<true>(in0 + row0 * HH, u * 8, xa[j]); }
  }
#pragma unroll
  for (int i = 0; i < R; i++) {
    const long long row = row0 + i;
    if (row >= T_ROWS) break;
    h3_bf16 (*cur)[8] = (P && (i & 1)) ? xb : xa;
    h3_bf16 (*nxt)[8] = (P && (i & 1)) ? xa : xb;
    if (P) {
      if (i + 1 < R && row + 1 < T_ROWS) {
#pragma unroll
        for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) h3_ldr8<true>(in0 + (row + 1) * HH, u * 8, nxt[j]); }
      }
    } else {
#pragma unroll
      for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) h3_ldr8<true>(in0 + row * HH, u * 8, cur[j]); }
    }
    const long long g = h3_clampi(h3_ld(in4, row), 6ll);
    if (g != gp) {
      gp = g;
#pragma unroll
      for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
        __align__(16) h3_bf16 wr[8], sr[8];
        h3_ldr8<true>(in1, u * 8, wr);
        h3_ldr8<true>(in2 + g * HH, u * 8, sr);
        h3_ldr8<true>(in3 + g * HH, u * 8, hs[j]);
#pragma unroll
        for (int k = 0; k < 8; k++) we[j][k] = __fmul_rn(__fadd_rn(h3_w(wr[k]), 0.0f), __fadd_rn(1.0f, h3_w(sr[k])));
      } }
    }
    const float r = row_r(cur, part[i & 1], tid);
#pragma unroll
    for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
      __align__(16) h3_bf16 yr[8];
#pragma unroll
      for (int k = 0; k < 8; k++) h3_put(yr[k], __fmaf_rn(__fmul_rn(h3_w(cur[j][k]), r), we[j][k], h3_w(hs[j][k])));
      h3_str8<true>(out0 + row * HH, u * 8, yr);
    } }
  }
}


// plain copy kernels, 1 row per block, for the reference of what a row kernel reaches
template <bool HINT>
__global__ void __launch_bounds__(256) copyk(const h3_bf16 *__restrict__ x, h3_bf16 *__restrict__ y) {
  const long long row = blockIdx.x;
  const int tid = threadIdx.x;
  uint4 v[CH];
#pragma unroll
  for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
    const uint4 *p = reinterpret_cast<const uint4 *>(x + row * HH) + u;
    if (HINT) asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v[j].x), "=r"(v[j].y), "=r"(v[j].z), "=r"(v[j].w) : "l"(p));
    else v[j] = *p; } }
#pragma unroll
  for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
    uint4 *p = reinterpret_cast<uint4 *>(y + row * HH) + u;
    if (HINT) asm volatile("st.global.cs.v4.u32 [%0], {%1,%2,%3,%4};" :: "l"(p), "r"(v[j].x), "r"(v[j].y), "r"(v[j].z), "r"(v[j].w) : "memory");
    else *p = v[j]; } }
}

// flat copy kernels: each thread moves U 16-byte vectors (coalesced: vector b*TPB*U + k*TPB +
// tid), all loads issued before the stores; which shape reaches cudaMemcpy's rate
template <int U, int TPB>
__global__ void __launch_bounds__(TPB) copy_flat(const uint4 *__restrict__ x, uint4 *__restrict__ y, long long n16) {
  const long long base = (long long)blockIdx.x * TPB * U + threadIdx.x;
  uint4 v[U];
#pragma unroll
  for (int k = 0; k < U; k++) if (base + k * TPB < n16) v[k] = x[base + k * TPB];
#pragma unroll
  for (int k = 0; k < U; k++) if (base + k * TPB < n16) y[base + k * TPB] = v[k];
}

__device__ __forceinline__ unsigned sa(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void bar_init(unsigned b, unsigned n) { asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(n) : "memory"); }
__device__ __forceinline__ void bar_expect(unsigned b, unsigned bytes) { asm volatile("{.reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;}" :: "r"(b), "r"(bytes) : "memory"); }
__device__ __forceinline__ void bar_wait(unsigned b, unsigned par) {
  unsigned done;
  do { asm volatile("{.reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p;}" : "=r"(done) : "r"(b), "r"(par) : "memory"); } while (!done);
}
__device__ __forceinline__ void bulk_load(unsigned dst, const void *src, unsigned bytes, unsigned b) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" :: "r"(dst), "l"(src), "r"(bytes), "r"(b) : "memory");
}
__device__ __forceinline__ void bulk_store(void *dst, unsigned src, unsigned bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" :: "l"(dst), "r"(src), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
template <int N> __device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory"); }

// Double-buffered rows by bulk copy: thread 0 initialises both mbarriers and starts row row0
// into xs[0] (the block syncs between); stage(i) has thread 0 start row row0 + i + 1 into the
// other buffer (when there is one: R rows per block), then every thread waits for row
// row0 + i in xs[i & 1].
__device__ __forceinline__ void rows_begin(unsigned long long *bars, h3_bf16 (*xs)[UNITS * 8],
                                           const h3_bf16 *in0, long long row0, int tid) {
  if (tid == 0) {
    bar_init(sa(&bars[0]), 1); bar_init(sa(&bars[1]), 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (tid == 0) { bar_expect(sa(&bars[0]), UNITS * 16); bulk_load(sa(xs[0]), in0 + row0 * HH, UNITS * 16, sa(&bars[0])); }
}
template <int R>
__device__ __forceinline__ void rows_next(unsigned long long *bars, h3_bf16 (*xs)[UNITS * 8],
                                          const h3_bf16 *in0, long long row0, int i, int tid) {
  const long long row = row0 + i;
  const int b = i & 1;
  if (tid == 0 && i + 1 < R && row + 1 < T_ROWS) {
    bar_expect(sa(&bars[b ^ 1]), UNITS * 16); bulk_load(sa(xs[b ^ 1]), in0 + (row + 1) * HH, UNITS * 16, sa(&bars[b ^ 1]));
  }
  bar_wait(sa(&bars[b]), (i >> 1) & 1);
}

// V5: R rows per block; rows come in by one bulk copy each (mbarrier, double buffer) and y
// leaves by one bulk store each (double buffer); LD: y via bulk store (else plain stores)
template <int R, bool BS, int MINB = 1>
__global__ void __launch_bounds__(256, MINB) nm_v5(const h3_bf16 *__restrict__ in0, const h3_bf16 *__restrict__ in1,
                                             const h3_bf16 *__restrict__ in2, const h3_bf16 *__restrict__ in3,
                                             const int *__restrict__ in4, h3_bf16 *__restrict__ out0) {
  __shared__ float part[2][8];
  __shared__ __align__(128) h3_bf16 xs[2][UNITS * 8];
  __shared__ __align__(128) h3_bf16 ys[BS ? 2 : 1][BS ? UNITS * 8 : 8];
  __shared__ __align__(8) unsigned long long bars[2];
  const int tid = threadIdx.x;
  const long long row0 = (long long)blockIdx.x * R;
  const unsigned RB = UNITS * 16;
  rows_begin(bars, xs, in0, row0, tid);
#pragma unroll 1
  for (int i = 0; i < R; i++) {
    const long long row = row0 + i;
    if (row >= T_ROWS) break;
    const int b = i & 1;
    // the other buffer was read by every thread in row i-1 (before its barrier): refill it
    rows_next<R>(bars, xs, in0, row0, i, tid);
    __align__(16) h3_bf16 xr[CH][8];
    smem_row(xr, xs[b], tid);
    const float r = row_r(xr, part[b], tid);  // its barrier: every thread is done with xs[b^1] of row i-1
    const long long g = h3_clampi(h3_ld(in4, row), 6ll);
    const h3_bf16 *scr = in2 + g * HH, *shr = in3 + g * HH;
    if (BS) {
      // ys[b] was last stored from in row i-2: its bulk store must have read it
      if (tid == 0) bulk_wait_read<1>();
      __syncthreads();
    }
#pragma unroll
    for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
      __align__(16) h3_bf16 wr[8], sr[8], hr[8], yr[8];
      h3_ldr8<true>(in1, u * 8, wr);
      h3_ldr8<true>(scr, u * 8, sr);
      h3_ldr8<true>(shr, u * 8, hr);
#pragma unroll
      for (int k = 0; k < 8; k++) {
        const float we = __fmul_rn(__fadd_rn(h3_w(wr[k]), 0.0f), __fadd_rn(1.0f, h3_w(sr[k])));
        h3_put(yr[k], __fmaf_rn(__fmul_rn(h3_w(xr[j][k]), r), we, h3_w(hr[k])));
      }
      if (BS) *reinterpret_cast<uint4 *>(&ys[b][u * 8]) = *reinterpret_cast<const uint4 *>(yr);
      else h3_str8<true>(out0 + row * HH, u * 8, yr);
    } }
    if (BS) {
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      __syncthreads();
      if (tid == 0) bulk_store(out0 + row * HH, sa(ys[b]), RB);
    }
  }
  if (BS && tid == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

// the thread's part of the sum of squares of a row in shared memory (v0's order)
__device__ __forceinline__ float smem_sumsq(const h3_bf16 *x, int tid) {
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
    __align__(16) h3_bf16 xr[8];
    *reinterpret_cast<uint4 *>(xr) = *reinterpret_cast<const uint4 *>(x + u * 8);
#pragma unroll
    for (int k = 0; k < 8; k++) { float v = h3_w(xr[k]); ss = __fadd_rn(ss, __fmul_rn(v, v)); } } }
  return ss;
}

// V11: v5's schedule (R rows per block, each brought into shared memory by one cp.async.bulk,
// double buffer) with x never held in registers: the sum of squares reads the row from shared
// memory chunk by chunk, and the modulate reads it again next to the tables, one chunk at a
// time (UNROLL = false: `#pragma unroll 1`), so few registers stay live and MINB blocks of
// 256 threads fit on an SM without spilling. Same arithmetic and order as v0 (bitwise).
template <int R, int MINB, bool UNROLL, bool COPY = false>
__global__ void __launch_bounds__(256, MINB) nm_v11(const h3_bf16 *__restrict__ in0, const h3_bf16 *__restrict__ in1,
                                                    const h3_bf16 *__restrict__ in2, const h3_bf16 *__restrict__ in3,
                                                    const int *__restrict__ in4, h3_bf16 *__restrict__ out0) {
  __shared__ float part[2][8];
  __shared__ __align__(128) h3_bf16 xs[2][UNITS * 8];
  __shared__ __align__(8) unsigned long long bars[2];
  const int tid = threadIdx.x;
  const long long row0 = (long long)blockIdx.x * R;
  rows_begin(bars, xs, in0, row0, tid);
#pragma unroll 1
  for (int i = 0; i < R; i++) {
    const long long row = row0 + i;
    if (row >= T_ROWS) break;
    const int b = i & 1;
    // the other buffer held row i-1: the barrier that ended row i-1 shows every thread is
    // done reading it (both passes read x from shared memory)
    rows_next<R>(bars, xs, in0, row0, i, tid);
    const h3_bf16 *x = xs[b];
    if (COPY) {  // y = x through the same schedule: what it reaches without the arithmetic
#pragma unroll
      for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS)
        *reinterpret_cast<uint4 *>(out0 + row * HH + u * 8) = *reinterpret_cast<const uint4 *>(x + u * 8); }
      __syncthreads();
      continue;
    }
    const float r = rowsum_r(smem_sumsq(x, tid), part[b], tid);
    const long long g = h3_clampi(h3_ld(in4, row), 6ll);
    const h3_bf16 *scr = in2 + g * HH, *shr = in3 + g * HH;
    constexpr int unroll = UNROLL ? CH : 1;
#pragma unroll unroll
    for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
      __align__(16) h3_bf16 xr[8];
      *reinterpret_cast<uint4 *>(xr) = *reinterpret_cast<const uint4 *>(x + u * 8);
      modstore(xr, r, in1, scr, shr, out0 + row * HH, u);
    } }
    __syncthreads();  // ends row i: xs[b] is free for row i + 2
  }
}

// V12: v11 with an S-stage ring instead of a double buffer: R rows per block, rows i + 1 ..
// i + S - 1 already on their way while the block computes row i (each row ends with a barrier,
// after which the stage it held is refilled with row i + S). Same arithmetic as v0 (bitwise).
template <int R, int S, int MINB>
__global__ void __launch_bounds__(256, MINB) nm_v12(const h3_bf16 *__restrict__ in0, const h3_bf16 *__restrict__ in1,
                                                    const h3_bf16 *__restrict__ in2, const h3_bf16 *__restrict__ in3,
                                                    const int *__restrict__ in4, h3_bf16 *__restrict__ out0) {
  __shared__ float part[2][8];
  __shared__ __align__(128) h3_bf16 xs[S][UNITS * 8];
  __shared__ __align__(8) unsigned long long bars[S];
  const int tid = threadIdx.x;
  const long long row0 = (long long)blockIdx.x * R;
  if (tid == 0) {
    for (int k = 0; k < S; k++) bar_init(sa(&bars[k]), 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (tid == 0)
    for (int k = 0; k < S && k < R && row0 + k < T_ROWS; k++) {
      bar_expect(sa(&bars[k]), UNITS * 16); bulk_load(sa(xs[k]), in0 + (row0 + k) * HH, UNITS * 16, sa(&bars[k]));
    }
#pragma unroll 1
  for (int i = 0; i < R; i++) {
    const long long row = row0 + i;
    if (row >= T_ROWS) break;
    const int st = i % S;
    bar_wait(sa(&bars[st]), (unsigned)(i / S) & 1u);
    const h3_bf16 *x = xs[st];
    const float r = rowsum_r(smem_sumsq(x, tid), part[i & 1], tid);
    const long long g = h3_clampi(h3_ld(in4, row), 6ll);
    const h3_bf16 *scr = in2 + g * HH, *shr = in3 + g * HH;
#pragma unroll
    for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
      __align__(16) h3_bf16 xr[8];
      *reinterpret_cast<uint4 *>(xr) = *reinterpret_cast<const uint4 *>(x + u * 8);
      modstore(xr, r, in1, scr, shr, out0 + row * HH, u);
    } }
    __syncthreads();  // ends row i: its stage is free for row i + S
    if (tid == 0 && i + S < R && row + S < T_ROWS) {
      bar_expect(sa(&bars[st]), UNITS * 16); bulk_load(sa(xs[st]), in0 + (row + S) * HH, UNITS * 16, sa(&bars[st]));
    }
  }
}

// V7: persistent blocks (grid = NB per SM), each taking rows blockIdx.x + i * gridDim.x; x comes
// through a ring of S row buffers filled by cp.async.bulk (one mbarrier per stage, refilled as
// soon as the reduction's barrier shows every thread has read it); w_eff = (gamma + off)(1 +
// scale[g]) in fp32 and shift[g] for the row's g kept per thread (TREG: registers, else shared
// memory, each thread touching only its own columns), recomputed when g changes.
// COPY: y = x (the same schedule without the arithmetic: what the schedule itself reaches).
template <int S, int NB, bool TREG, bool COPY>
__global__ void __launch_bounds__(256, NB) nm_v7(const h3_bf16 *__restrict__ in0, const h3_bf16 *__restrict__ in1,
                                                 const h3_bf16 *__restrict__ in2, const h3_bf16 *__restrict__ in3,
                                                 const int *__restrict__ in4, h3_bf16 *__restrict__ out0) {
  extern __shared__ __align__(128) unsigned char dsm[];
  h3_bf16 (*ring)[UNITS * 8] = reinterpret_cast<h3_bf16 (*)[UNITS * 8]>(dsm);
  float *wes = reinterpret_cast<float *>(dsm + S * UNITS * 16);
  h3_bf16 *shs = reinterpret_cast<h3_bf16 *>(wes + HH);
  __shared__ float part[2][8];
  __shared__ __align__(8) unsigned long long bars[S];
  const int tid = threadIdx.x;
  const long long nblk = gridDim.x, b0 = blockIdx.x;
  const int n = (int)((T_ROWS - b0 + nblk - 1) / nblk);
  const unsigned RB = UNITS * 16;
  if (tid == 0) {
    for (int s = 0; s < S; s++) bar_init(sa(&bars[s]), 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (tid == 0)
    for (int p = 0; p < S && p < n; p++) { bar_expect(sa(&bars[p]), RB); bulk_load(sa(ring[p]), in0 + (b0 + p * nblk) * HH, RB, sa(&bars[p])); }
  float wr_[TREG ? CH : 1][8];
  __align__(16) h3_bf16 hr_[TREG ? CH : 1][8];
  long long gp = -1;
#pragma unroll 1
  for (int i = 0; i < n; i++) {
    const int s = i % S;
    const long long row = b0 + i * nblk;
    const long long g = h3_clampi(h3_ld(in4, row), 6ll);
    if (!COPY && g != gp) {
      gp = g;
#pragma unroll
      for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
        __align__(16) h3_bf16 gr[8], sr[8], hh[8];
        h3_ldr8<true>(in1, u * 8, gr);
        h3_ldr8<true>(in2 + g * HH, u * 8, sr);
        h3_ldr8<true>(in3 + g * HH, u * 8, hh);
        float we[8];
#pragma unroll
        for (int k = 0; k < 8; k++) we[k] = __fmul_rn(__fadd_rn(h3_w(gr[k]), 0.0f), __fadd_rn(1.0f, h3_w(sr[k])));
        if (TREG) {
#pragma unroll
          for (int k = 0; k < 8; k++) { wr_[TREG ? j : 0][k] = we[k]; hr_[TREG ? j : 0][k] = hh[k]; }
        } else {
          *reinterpret_cast<float4 *>(wes + u * 8) = make_float4(we[0], we[1], we[2], we[3]);
          *reinterpret_cast<float4 *>(wes + u * 8 + 4) = make_float4(we[4], we[5], we[6], we[7]);
          *reinterpret_cast<uint4 *>(shs + u * 8) = *reinterpret_cast<const uint4 *>(hh);
        }
      } }
    }
    bar_wait(sa(&bars[s]), (unsigned)(i / S) & 1u);
    __align__(16) h3_bf16 xr[CH][8];
    smem_row(xr, ring[s], tid);
    float r = 0.0f;
    if (!COPY) r = row_r(xr, part[i & 1], tid);
    else __syncthreads();
    // every thread has read ring[s]: refill it with the row S ahead
    if (tid == 0 && i + S < n) { bar_expect(sa(&bars[s]), RB); bulk_load(sa(ring[s]), in0 + (b0 + (i + S) * nblk) * HH, RB, sa(&bars[s])); }
    h3_bf16 *y = out0 + row * HH;
#pragma unroll
    for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
      if (COPY) { h3_str8<true>(y, u * 8, xr[j]); continue; }
      float we[8];
      __align__(16) h3_bf16 hh[8], yr[8];
      if (TREG) {
#pragma unroll
        for (int k = 0; k < 8; k++) { we[k] = wr_[TREG ? j : 0][k]; hh[k] = hr_[TREG ? j : 0][k]; }
      } else {
        *reinterpret_cast<float4 *>(we) = *reinterpret_cast<const float4 *>(wes + u * 8);
        *reinterpret_cast<float4 *>(we + 4) = *reinterpret_cast<const float4 *>(wes + u * 8 + 4);
        *reinterpret_cast<uint4 *>(hh) = *reinterpret_cast<const uint4 *>(shs + u * 8);
      }
#pragma unroll
      for (int k = 0; k < 8; k++) h3_put(yr[k], __fmaf_rn(__fmul_rn(h3_w(xr[j][k]), r), we[k], h3_w(hh[k])));
      h3_str8<true>(y, u * 8, yr);
    } }
  }
}

// V8: one row per block of TPB threads (chunks u = tid + j * TPB), at least MINB blocks per SM
// (the register cap that gives them room); the reduction runs over TPB / 32 warps, so for
// TPB != 256 the sum of squares is added in another order than v0's (mismatches expected,
// max |y - y0| printed by check_close)
template <int TPB, int MINB>
__global__ void __launch_bounds__(TPB, MINB) nm_v8(const h3_bf16 *__restrict__ in0, const h3_bf16 *__restrict__ in1,
                                                   const h3_bf16 *__restrict__ in2, const h3_bf16 *__restrict__ in3,
                                                   const int *__restrict__ in4, h3_bf16 *__restrict__ out0) {
  constexpr int C = (UNITS + TPB - 1) / TPB, NW = TPB / 32;
  __shared__ float part[NW];
  const int tid = threadIdx.x;
  const long long row = blockIdx.x;
  __align__(16) h3_bf16 xr[C][8];
#pragma unroll
  for (int j = 0; j < C; j++) { const int u = tid + j * TPB; if (u < UNITS) h3_ldr8<true>(in0 + row * HH, u * 8, xr[j]); }
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < C; j++) { const int u = tid + j * TPB; if (u < UNITS) {
#pragma unroll
    for (int k = 0; k < 8; k++) { float v = h3_w(xr[j][k]); ss = __fadd_rn(ss, __fmul_rn(v, v)); } } }
  const float r = rowsum_r<NW>(ss, part, tid);
  const long long g = h3_clampi(h3_ld(in4, row), 6ll);
#pragma unroll
  for (int j = 0; j < C; j++) { const int u = tid + j * TPB; if (u < UNITS) modstore(xr[j], r, in1, in2 + g * HH, in3 + g * HH, out0 + row * HH, u); }
}

// V9: RP rows per block of 256 threads, thread tid holding chunks u = tid + j * 256 of all RP
// rows: gamma and the scale/shift rows are read once per chunk for the RP rows (when their g
// agrees with the first row's; else again), so the tables' L2 traffic is 1 / RP of v0's.
// Per row the arithmetic and its order are v0's (bitwise).
template <int RP, int MINB>
__global__ void __launch_bounds__(256, MINB) nm_v9(const h3_bf16 *__restrict__ in0, const h3_bf16 *__restrict__ in1,
                                                   const h3_bf16 *__restrict__ in2, const h3_bf16 *__restrict__ in3,
                                                   const int *__restrict__ in4, h3_bf16 *__restrict__ out0) {
  __shared__ float part[RP][8];
  const int tid = threadIdx.x;
  const long long row0 = (long long)blockIdx.x * RP;
  __align__(16) h3_bf16 xr[RP][CH][8];
#pragma unroll
  for (int q = 0; q < RP; q++)
#pragma unroll
    for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) h3_ldr8<true>(in0 + (row0 + q) * HH, u * 8, xr[q][j]); }
  float ss[RP];
#pragma unroll
  for (int q = 0; q < RP; q++) {
    ss[q] = 0.0f;
#pragma unroll
    for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
#pragma unroll
      for (int k = 0; k < 8; k++) { float v = h3_w(xr[q][j][k]); ss[q] = __fadd_rn(ss[q], __fmul_rn(v, v)); } } }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss[q] = __fadd_rn(ss[q], __shfl_xor_sync(0xffffffffu, ss[q], o));
    if ((tid & 31) == 0) part[q][tid >> 5] = ss[q];
  }
  __syncthreads();
  float r[RP];
  long long g[RP];
#pragma unroll
  for (int q = 0; q < RP; q++) {
    float tot = 0.0f;
#pragma unroll
    for (int w = 0; w < 8; w++) tot = __fadd_rn(tot, part[q][w]);
    r[q] = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(tot, 5376.0f), 0x1.4f8b58p-17f)));
    g[q] = h3_clampi(h3_ld(in4, row0 + q), 6ll);
  }
#pragma unroll
  for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
    __align__(16) h3_bf16 wr[8], sr[8], hr[8];
    h3_ldr8<true>(in1, u * 8, wr);
    h3_ldr8<true>(in2 + g[0] * HH, u * 8, sr);
    h3_ldr8<true>(in3 + g[0] * HH, u * 8, hr);
#pragma unroll
    for (int q = 0; q < RP; q++) {
      if (g[q] != g[0]) { modstore(xr[q][j], r[q], in1, in2 + g[q] * HH, in3 + g[q] * HH, out0 + (row0 + q) * HH, u); continue; }
      __align__(16) h3_bf16 yr[8];
#pragma unroll
      for (int k = 0; k < 8; k++) {
        const float we = __fmul_rn(__fadd_rn(h3_w(wr[k]), 0.0f), __fadd_rn(1.0f, h3_w(sr[k])));
        h3_put(yr[k], __fmaf_rn(__fmul_rn(h3_w(xr[q][j][k]), r[q]), we, h3_w(hr[k])));
      }
      h3_str8<true>(out0 + (row0 + q) * HH, u * 8, yr);
    }
  } }
}

// V10: the plan kernel's shape (one row per block, 256 threads, chunks u = tid + 256 j, x held
// in registers) with stages left out, to find which one costs the time against the copy:
//   M0 load x, store x                               (copyk in this code shape)
//   M1 load x, block barrier, store x                (the barrier alone)
//   M2 load x, reduction, store bf16(x * r)          (the reduction, no tables)
//   M3 load x, load gamma/scale/shift, store modulate(x) with r = 1 (tables, no reduction)
//   M4 load x, reduction, tables, modulate           (all of it: v0's work, bitwise v0)
//   M5 as M4 with the tables' loads issued before the reduction (held as bf16, 36 registers)
template <int M>
__global__ void __launch_bounds__(256) nm_v10(const h3_bf16 *__restrict__ in0, const h3_bf16 *__restrict__ in1,
                                              const h3_bf16 *__restrict__ in2, const h3_bf16 *__restrict__ in3,
                                              const int *__restrict__ in4, h3_bf16 *__restrict__ out0) {
  __shared__ float part[8];
  const int tid = threadIdx.x;
  const long long row = blockIdx.x;
  h3_bf16 *y = out0 + row * HH;
  __align__(16) h3_bf16 xr[CH][8];
#pragma unroll
  for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) h3_ldr8<true>(in0 + row * HH, u * 8, xr[j]); }
  if (M == 0 || M == 1) {
    if (M == 1) __syncthreads();
#pragma unroll
    for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) h3_str8<true>(y, u * 8, xr[j]); }
    return;
  }
  const long long g = h3_clampi(h3_ld(in4, row), 6ll);
  const h3_bf16 *scr = in2 + g * HH, *shr = in3 + g * HH;
  __align__(16) h3_bf16 tw[M == 5 ? CH : 1][8], ts[M == 5 ? CH : 1][8], th[M == 5 ? CH : 1][8];
  if (M == 5) {
#pragma unroll
    for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
      h3_ldr8<true>(in1, u * 8, tw[M == 5 ? j : 0]);
      h3_ldr8<true>(scr, u * 8, ts[M == 5 ? j : 0]);
      h3_ldr8<true>(shr, u * 8, th[M == 5 ? j : 0]);
    } }
  }
  float r = 1.0f;
  if (M != 3) r = row_r(xr, part, tid);
#pragma unroll
  for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
    __align__(16) h3_bf16 yr[8];
    if (M == 2) {
#pragma unroll
      for (int k = 0; k < 8; k++) h3_put(yr[k], __fmul_rn(h3_w(xr[j][k]), r));
      h3_str8<true>(y, u * 8, yr);
    } else if (M == 5) {
#pragma unroll
      for (int k = 0; k < 8; k++) {
        const float we = __fmul_rn(__fadd_rn(h3_w(tw[M == 5 ? j : 0][k]), 0.0f), __fadd_rn(1.0f, h3_w(ts[M == 5 ? j : 0][k])));
        h3_put(yr[k], __fmaf_rn(__fmul_rn(h3_w(xr[j][k]), r), we, h3_w(th[M == 5 ? j : 0][k])));
      }
      h3_str8<true>(y, u * 8, yr);
    } else {
      modstore(xr[j], r, in1, scr, shr, y, u);
    }
  } }
}

// x's 16 bytes at p without allocating in L1 (the tables keep L1 to themselves)
__device__ __forceinline__ void ld_noalloc(const h3_bf16 *p, h3_bf16 *t) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  *reinterpret_cast<uint4 *>(t) = v;
}

// V13: v10 M4 (the plan kernel's work, bitwise v0) with cache hints, to learn whether the
// tables' loads after the reduction wait on L1 misses (x streaming through L1 evicts them):
//   M0 x loaded with L1::no_allocate
//   M1 M0 and the thread's 9 table chunks prefetched into L1 (prefetch.global.L1) before the
//      reduction (no registers held)
//   M2 the prefetch alone (x loaded as v0 loads it)
//   M3 M0 with y stored streaming (st.global.cs)
template <int M>
__global__ void __launch_bounds__(256) nm_v13(const h3_bf16 *__restrict__ in0, const h3_bf16 *__restrict__ in1,
                                              const h3_bf16 *__restrict__ in2, const h3_bf16 *__restrict__ in3,
                                              const int *__restrict__ in4, h3_bf16 *__restrict__ out0) {
  __shared__ float part[8];
  const int tid = threadIdx.x;
  const long long row = blockIdx.x;
  h3_bf16 *y = out0 + row * HH;
  const long long g = h3_clampi(h3_ld(in4, row), 6ll);
  const h3_bf16 *scr = in2 + g * HH, *shr = in3 + g * HH;
  __align__(16) h3_bf16 xr[CH][8];
#pragma unroll
  for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
    if (M == 2) h3_ldr8<true>(in0 + row * HH, u * 8, xr[j]);
    else ld_noalloc(in0 + row * HH + u * 8, xr[j]);
  } }
  if (M == 1 || M == 2) {
#pragma unroll
    for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
      asm volatile("prefetch.global.L1 [%0];" :: "l"(in1 + u * 8));
      asm volatile("prefetch.global.L1 [%0];" :: "l"(scr + u * 8));
      asm volatile("prefetch.global.L1 [%0];" :: "l"(shr + u * 8));
    } }
  }
  const float r = row_r(xr, part, tid);
#pragma unroll
  for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
    modstore<M == 3>(xr[j], r, in1, scr, shr, y, u);
  } }
}

// 16 bytes from global to shared memory by cp.async (L1-allocating: the tables are hot)
__device__ __forceinline__ void cp16(h3_bf16 *dst, const h3_bf16 *src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src));
}

// V14: R rows per block, one after the other, x in registers as v0; the thread's own chunks of
// gamma, scale[g] and shift[g] sit in shared memory (cp.async, issued before the row's x loads
// and only when g changes), so the modulate after the reduction reads shared memory instead
// of L1 / L2 and the block needs few registers: MINB blocks per SM (40 registers at 6). Each
// thread reads only the table chunks it copied itself: no barrier guards them. PERSIST: the
// block takes rows blockIdx.x + i * gridDim.x until they run out (launched with as many blocks
// as fit at once: no tail of a last wave, the tables copied about once per block). Same
// arithmetic and order as v0 (bitwise).
template <int R, int MINB, bool PERSIST = false>
__global__ void __launch_bounds__(256, MINB) nm_v14(const h3_bf16 *__restrict__ in0, const h3_bf16 *__restrict__ in1,
                                                    const h3_bf16 *__restrict__ in2, const h3_bf16 *__restrict__ in3,
                                                    const int *__restrict__ in4, h3_bf16 *__restrict__ out0) {
  __shared__ float part[2][8];
  __shared__ __align__(16) h3_bf16 tg[UNITS * 8], ts[UNITS * 8], th[UNITS * 8];
  const int tid = threadIdx.x;
  long long gcur = -1;
#pragma unroll
  for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) cp16(tg + u * 8, in1 + u * 8); }
#pragma unroll 1
  for (int i = 0; PERSIST || i < R; i++) {
    const long long row = PERSIST ? (long long)blockIdx.x + (long long)i * gridDim.x : (long long)blockIdx.x * R + i;
    if (row >= T_ROWS) break;
    const long long g = h3_clampi(h3_ld(in4, row), 6ll);
    if (g != gcur) {
#pragma unroll
      for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
        cp16(ts + u * 8, in2 + g * HH + u * 8);
        cp16(th + u * 8, in3 + g * HH + u * 8);
      } }
      gcur = g;
    }
    asm volatile("cp.async.commit_group;");
    __align__(16) h3_bf16 xr[CH][8];
#pragma unroll
    for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) h3_ldr8<true>(in0 + row * HH, u * 8, xr[j]); }
    const float r = row_r(xr, part[i & 1], tid);
    asm volatile("cp.async.wait_all;" ::: "memory");
#pragma unroll
    for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) modstore(xr[j], r, tg, ts, th, out0 + row * HH, u); }
  }
}

// V15: persistent blocks (rows blockIdx.x + i * gridDim.x) as v14's PERSIST, with less work
// per element: when g changes each thread computes its chunks' w_eff = (gamma + 0)(1 + scale[g])
// in fp32 once (the value v0 computes for every row) into shared memory, next to its chunks of
// shift[g]; per row the modulate is then one multiply and one fma per element. NA: x loaded
// with L1::no_allocate (the tables' shared memory leaves L1 small). Same values and order as
// v0 (bitwise).
template <int MINB, bool NA = false>
__global__ void __launch_bounds__(256, MINB) nm_v15(const h3_bf16 *__restrict__ in0, const h3_bf16 *__restrict__ in1,
                                                    const h3_bf16 *__restrict__ in2, const h3_bf16 *__restrict__ in3,
                                                    const int *__restrict__ in4, h3_bf16 *__restrict__ out0) {
  __shared__ float part[2][8];
  __shared__ __align__(16) float twe[UNITS * 8];
  __shared__ __align__(16) h3_bf16 tsh[UNITS * 8];
  const int tid = threadIdx.x;
  long long gcur = -1;
#pragma unroll 1
  for (int i = 0;; i++) {
    const long long row = (long long)blockIdx.x + (long long)i * gridDim.x;
    if (row >= T_ROWS) break;
    const long long g = h3_clampi(h3_ld(in4, row), 6ll);
    if (g != gcur) {  // this thread's chunks only: no barrier guards them
#pragma unroll 1
      for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
        __align__(16) h3_bf16 wr[8], sr[8];
        __align__(16) float we[8];
        h3_ldr8<true>(in1, u * 8, wr);
        h3_ldr8<true>(in2 + g * HH, u * 8, sr);
#pragma unroll
        for (int k = 0; k < 8; k++) we[k] = __fmul_rn(__fadd_rn(h3_w(wr[k]), 0.0f), __fadd_rn(1.0f, h3_w(sr[k])));
        reinterpret_cast<float4 *>(twe + u * 8)[0] = reinterpret_cast<const float4 *>(we)[0];
        reinterpret_cast<float4 *>(twe + u * 8)[1] = reinterpret_cast<const float4 *>(we)[1];
        *reinterpret_cast<uint4 *>(tsh + u * 8) = *reinterpret_cast<const uint4 *>(in3 + g * HH + u * 8);
      } }
      gcur = g;
    }
    __align__(16) h3_bf16 xr[CH][8];
#pragma unroll
    for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
      if (NA) ld_noalloc(in0 + row * HH + u * 8, xr[j]);
      else h3_ldr8<true>(in0 + row * HH, u * 8, xr[j]);
    } }
    const float r = row_r(xr, part[i & 1], tid);
#pragma unroll
    for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
      __align__(16) float we[8];
      __align__(16) h3_bf16 hr[8], yr[8];
      reinterpret_cast<float4 *>(we)[0] = reinterpret_cast<const float4 *>(twe + u * 8)[0];
      reinterpret_cast<float4 *>(we)[1] = reinterpret_cast<const float4 *>(twe + u * 8)[1];
      *reinterpret_cast<uint4 *>(hr) = *reinterpret_cast<const uint4 *>(tsh + u * 8);
#pragma unroll
      for (int k = 0; k < 8; k++) h3_put(yr[k], __fmaf_rn(__fmul_rn(h3_w(xr[j][k]), r), we[k], h3_w(hr[k])));
      h3_str8<true>(out0 + row * HH, u * 8, yr);
    } }
  }
}

// V18: one 16-byte chunk per thread, TPB = UNITS = 672 threads (21 warps) per row, persistent
// blocks (rows strided by the grid, MINB = 3 blocks per SM: 2016 threads). Each thread keeps
// its chunk's w_eff = (gamma + 0)(1 + scale[g]) (fp32) and shift[g] in registers, recomputed
// only when g changes, so the modulate reads no table memory; PF: the next row's chunk is
// loaded into registers before this row's reduction (two rows in flight per block). The sum
// of squares adds 21 warp partials in order: another order than v0's 8 (lossless-tier
// freedom; max |y - y0| printed, not bitwise).
template <int MINB, bool PF>
__global__ void __launch_bounds__(UNITS, MINB) nm_v18(const h3_bf16 *__restrict__ in0, const h3_bf16 *__restrict__ in1,
                                                     const h3_bf16 *__restrict__ in2, const h3_bf16 *__restrict__ in3,
                                                     const int *__restrict__ in4, h3_bf16 *__restrict__ out0) {
  constexpr int NW = UNITS / 32;
  __shared__ float part[2][NW];
  const int u = threadIdx.x;
  int gcur = -1;
  float we[8];
  __align__(16) h3_bf16 hr[8], xr[8], xn[8];
  int row = blockIdx.x;
  if (PF && row < T_ROWS) h3_ldr8<true>(in0 + (size_t)row * HH, u * 8, xn);
#pragma unroll 1
  for (int i = 0; row < T_ROWS; i++, row += gridDim.x) {
    const int g = (int)h3_clampi(h3_ld(in4, row), 6ll);
    if (g != gcur) {
      __align__(16) h3_bf16 wr[8], sr[8];
      h3_ldr8<true>(in1, u * 8, wr);
      h3_ldr8<true>(in2 + g * HH, u * 8, sr);
      h3_ldr8<true>(in3 + g * HH, u * 8, hr);
#pragma unroll
      for (int k = 0; k < 8; k++) we[k] = __fmul_rn(__fadd_rn(h3_w(wr[k]), 0.0f), __fadd_rn(1.0f, h3_w(sr[k])));
      gcur = g;
    }
    if (PF) {
      *reinterpret_cast<uint4 *>(xr) = *reinterpret_cast<const uint4 *>(xn);
      if (row + (int)gridDim.x < T_ROWS) h3_ldr8<true>(in0 + (size_t)(row + gridDim.x) * HH, u * 8, xn);
    } else {
      h3_ldr8<true>(in0 + (size_t)row * HH, u * 8, xr);
    }
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < 8; k++) { const float v = h3_w(xr[k]); ss = __fadd_rn(ss, __fmul_rn(v, v)); }
    const float r = rowsum_r<NW>(ss, part[i & 1], u);
    __align__(16) h3_bf16 yr[8];
#pragma unroll
    for (int k = 0; k < 8; k++) h3_put(yr[k], __fmaf_rn(__fmul_rn(h3_w(xr[k]), r), we[k], h3_w(hr[k])));
    h3_str8<true>(out0 + (size_t)row * HH, u * 8, yr);
  }
}

// V19: v18's shape without persistence: one row per block of 672 threads (one chunk each), the
// chunk's gamma / scale[g] / shift[g] loaded for every row after the reduction (v0's table
// traffic; 21-warp sum order as v18, not bitwise). What v18's kept tables and prefetch buy.
__global__ void __launch_bounds__(UNITS) nm_v19(const h3_bf16 *__restrict__ in0, const h3_bf16 *__restrict__ in1,
                                                const h3_bf16 *__restrict__ in2, const h3_bf16 *__restrict__ in3,
                                                const int *__restrict__ in4, h3_bf16 *__restrict__ out0) {
  constexpr int NW = UNITS / 32;
  __shared__ float part[NW];
  const int u = threadIdx.x;
  const size_t row = blockIdx.x;
  __align__(16) h3_bf16 xr[8];
  h3_ldr8<true>(in0 + row * HH, u * 8, xr);
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < 8; k++) { const float v = h3_w(xr[k]); ss = __fadd_rn(ss, __fmul_rn(v, v)); }
  const float r = rowsum_r<NW>(ss, part, u);
  const int g = (int)h3_clampi(h3_ld(in4, (long long)row), 6ll);
  modstore(xr, r, in1, in2 + g * HH, in3 + g * HH, out0 + row * HH, u);
}

// V20: rows handled by groups of WPR warps (WPR in 1, 3, 7, 21 divides 672 / 32 = 21: every lane
// has 21 / WPR chunks, u = lane + j * 32 WPR, no idle lanes); RPB rows per block (WPR = 1: each
// warp its own row, no block barrier at all). x in registers, the group's sum from WPR warp
// partials in order, then gamma / scale[g] / shift[g] chunk by chunk after the reduction.
// Another sum order than v0's (lossless-tier freedom; check_close prints the distance).
template <int WPR, int RPB, int MINB>
__global__ void __launch_bounds__(32 * WPR * RPB, MINB) nm_v20(const h3_bf16 *__restrict__ in0, const h3_bf16 *__restrict__ in1,
                                                              const h3_bf16 *__restrict__ in2, const h3_bf16 *__restrict__ in3,
                                                              const int *__restrict__ in4, h3_bf16 *__restrict__ out0) {
  static_assert(21 % WPR == 0 && (WPR == 1 || RPB == 1), "WPR divides 21; groups of several warps: one row per block");
  constexpr int GT = 32 * WPR, NC = 21 / WPR;
  __shared__ float part[WPR];
  const int t = threadIdx.x % GT;
  const long long row = (long long)blockIdx.x * RPB + threadIdx.x / GT;
  if (row >= T_ROWS) return;
  __align__(16) h3_bf16 xr[NC][8];
#pragma unroll
  for (int j = 0; j < NC; j++) h3_ldr8<true>(in0 + row * HH, (t + j * GT) * 8, xr[j]);
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < NC; j++)
#pragma unroll
    for (int k = 0; k < 8; k++) { const float v = h3_w(xr[j][k]); ss = __fadd_rn(ss, __fmul_rn(v, v)); }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss = __fadd_rn(ss, __shfl_xor_sync(0xffffffffu, ss, o));
  float tot = ss;
  if (WPR > 1) {
    if ((t & 31) == 0) part[t >> 5] = ss;
    __syncthreads();
    tot = 0.0f;
#pragma unroll
    for (int w = 0; w < WPR; w++) tot = __fadd_rn(tot, part[w]);
  }
  const float r = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(tot, 5376.0f), 0x1.4f8b58p-17f)));
  const long long g = h3_clampi(h3_ld(in4, row), 6ll);
#pragma unroll
  for (int j = 0; j < NC; j++) modstore(xr[j], r, in1, in2 + g * HH, in3 + g * HH, out0 + row * HH, t + j * GT);
}

// The persistent rings of v22 / v23. ring_issue: the thread's chunks of x's row `row` (none
// when row < 0) into ring slot i % S by cp.async, one commit group per call, so that
// cpa_wait<S - 1> after issuing slot i + S - 1 means slot i has landed.
template <int S>
__device__ __forceinline__ void ring_issue(uint4 *ring, const h3_bf16 *in0, int row, int i, int tid) {
  if (row >= 0) {
    const uint4 *src = reinterpret_cast<const uint4 *>(in0 + (size_t)row * HH);
#pragma unroll
    for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) cpa16(&ring[(i % S) * UNITS + u], src + u); }
  }
  cpa_commit();
}

// v22 / v23: w_eff = (gamma + 0)(1 + scale[g]) in fp32 (SK: without the + 0) and shift[g] as
// packed bf16 pairs, for the thread's chunks, into registers
template <bool SK>
__device__ __forceinline__ void regs_tables(float (*we)[8], unsigned (*sh)[4], const h3_bf16 *in1, const h3_bf16 *in2,
                                            const h3_bf16 *in3, int g, int tid) {
#pragma unroll
  for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
    __align__(16) h3_bf16 wr[8], sr[8];
    h3_ldr8<true>(in1, u * 8, wr);
    h3_ldr8<true>(in2 + g * HH, u * 8, sr);
    *reinterpret_cast<uint4 *>(sh[j]) = *reinterpret_cast<const uint4 *>(in3 + g * HH + u * 8);
#pragma unroll
    for (int k = 0; k < 8; k++)
      we[j][k] = __fmul_rn(SK ? h3_w(wr[k]) : __fadd_rn(h3_w(wr[k]), 0.0f), __fadd_rn(1.0f, h3_w(sr[k])));
  } }
}

// v22 / v23: the row in ring slot xs (landed) -> r (partials in part) -> y with the tables of
// regs_tables
__device__ __forceinline__ void ring_row_out(const uint4 *xs, float *part, const float (*we)[8],
                                             const unsigned (*sh)[4], h3_bf16 *y, int tid) {
  __align__(16) h3_bf16 xr[CH][8];
#pragma unroll
  for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS)
    *reinterpret_cast<uint4 *>(xr[j]) = xs[u]; }
  const float r = row_r(xr, part, tid);
#pragma unroll
  for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
    __align__(16) h3_bf16 yr[8];
    const h3_bf16 *hb = reinterpret_cast<const h3_bf16 *>(sh[j]);
#pragma unroll
    for (int k = 0; k < 8; k++) h3_put(yr[k], __fmaf_rn(__fmul_rn(h3_w(xr[j][k]), r), we[j][k], h3_w(hb[k])));
    h3_str8<true>(y, u * 8, yr);
  } }
}

// V22: persistent blocks (NB per SM, rows b, b + grid, ...), v0's block shape and sum order
// (bitwise v0). Each thread streams its own chunks of the rows S - 1 ahead into a shared-memory
// ring by cp.async (no barrier guards the ring: a thread reads back only what it copied), and
// keeps w_eff = (gamma + 0)(1 + scale[g]) in fp32 and shift[g] (bf16) for its chunks in
// registers, recomputed when g changes: per element the modulate is one multiply and one fma.
// SK: skip the w_eff + 0 add (not bitwise for signed zeros; what the add costs).
template <int S, int NB, bool SK = false>
__global__ void __launch_bounds__(BLK, NB) nm_v22(const h3_bf16 *__restrict__ in0, const h3_bf16 *__restrict__ in1,
                                                  const h3_bf16 *__restrict__ in2, const h3_bf16 *__restrict__ in3,
                                                  const int *__restrict__ in4, h3_bf16 *__restrict__ out0) {
  extern __shared__ __align__(16) uint4 ring[];  // [S][UNITS]
  __shared__ float part[2][8];
  const int tid = threadIdx.x;
  const int nblk = gridDim.x, b0 = blockIdx.x;
  const int n = (T_ROWS - b0 + nblk - 1) / nblk;
  auto row_of = [&](int i) { return i < n ? b0 + i * nblk : -1; };  // row i of this block, -1 past the end
#pragma unroll
  for (int i = 0; i < S - 1; i++) ring_issue<S>(ring, in0, row_of(i), i, tid);
  float we[CH][8];
  unsigned sh[CH][4];  // shift[g] as packed bf16 pairs
  int gcur = -1;
#pragma unroll 1
  for (int i = 0; i < n; i++) {
    ring_issue<S>(ring, in0, row_of(i + S - 1), i + S - 1, tid);
    const int row = row_of(i);
    const int g = (int)h3_clampi(h3_ld(in4, (long long)row), 6ll);
    if (g != gcur) gcur = g, regs_tables<SK>(we, sh, in1, in2, in3, g, tid);
    cpa_wait<S - 1>();
    ring_row_out(ring + (i % S) * UNITS, part[i & 1], we, sh, out0 + (size_t)row * HH, tid);
  }
}

// V23: v22 with rows handed out at run time: thread 0 takes row tickets from a global counter
// (atomicAdd) S rows ahead and publishes them through the reduction's barrier, so an SM that
// runs ahead takes more rows (no tail of blocks with equal shares). The last block to finish
// resets the counters for the next launch. Bitwise v0.
template <int S, int NB>
__global__ void __launch_bounds__(BLK, NB) nm_v23(const h3_bf16 *__restrict__ in0, const h3_bf16 *__restrict__ in1,
                                                  const h3_bf16 *__restrict__ in2, const h3_bf16 *__restrict__ in3,
                                                  const int *__restrict__ in4, h3_bf16 *__restrict__ out0,
                                                  unsigned *tickets) {
  extern __shared__ __align__(16) uint4 ring[];  // [S][UNITS]
  __shared__ float part[2][8];
  __shared__ int ids[2 * S];
  const int tid = threadIdx.x;
  if (tid == 0)
    for (int k = 0; k < S; k++) ids[k] = (int)atomicAdd(&tickets[0], 1u);
  __syncthreads();
  // row ids[i % 2S] into slot i % S (none past the last row)
  auto issue = [&](int i) { const int row = ids[i % (2 * S)]; ring_issue<S>(ring, in0, row < T_ROWS ? row : -1, i, tid); };
#pragma unroll
  for (int i = 0; i < S - 1; i++) issue(i);
  float we[CH][8];
  unsigned sh[CH][4];
  int gcur = -1;
#pragma unroll 1
  for (int i = 0;; i++) {
    const int row = ids[i % (2 * S)];
    if (row >= T_ROWS) break;
    issue(i + S - 1);
    if (tid == 0) ids[(i + S) % (2 * S)] = (int)atomicAdd(&tickets[0], 1u);  // read after row_r's barrier
    const int g = (int)h3_clampi(h3_ld(in4, (long long)row), 6ll);
    if (g != gcur) gcur = g, regs_tables<false>(we, sh, in1, in2, in3, g, tid);
    cpa_wait<S - 1>();
    ring_row_out(ring + (i % S) * UNITS, part[i & 1], we, sh, out0 + (size_t)row * HH, tid);
  }
  cpa_wait<0>();
  if (tid == 0) {
    __threadfence();
    if (atomicAdd(&tickets[1], 1u) == gridDim.x - 1) { tickets[0] = 0; tickets[1] = 0; __threadfence(); }
  }
}

// bf16 pair <-> fp32 in one instruction each way (bitwise the same as two conversions)
__device__ __forceinline__ float bf_lo(unsigned v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float bf_hi(unsigned v) { return __uint_as_float(v & 0xffff0000u); }
__device__ __forceinline__ unsigned bf_pack(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// V24: v22 with fewer instructions per element: x unpacked once (fp32 kept from the sum of
// squares to the modulate), pairs converted by one instruction each way, the 8 warp partials
// read as two float4. FAST (lossless-tier freedom, not bitwise v0): the sum of squares by fma
// and r = rsqrt(tot / 5376 + eps) by the approximate reciprocal square root.
template <int S, int NB, bool FAST>
__global__ void __launch_bounds__(BLK, NB) nm_v24(const h3_bf16 *__restrict__ in0, const h3_bf16 *__restrict__ in1,
                                                  const h3_bf16 *__restrict__ in2, const h3_bf16 *__restrict__ in3,
                                                  const int *__restrict__ in4, h3_bf16 *__restrict__ out0) {
  extern __shared__ __align__(16) uint4 ring[];  // [S][UNITS]
  __shared__ __align__(16) float part[2][8];
  const int tid = threadIdx.x;
  const int nblk = gridDim.x, b0 = blockIdx.x;
  const int n = (T_ROWS - b0 + nblk - 1) / nblk;
  auto issue = [&](int i) {
    if (i < n) {
      const uint4 *src = reinterpret_cast<const uint4 *>(in0 + (size_t)(b0 + (size_t)i * nblk) * HH);
#pragma unroll
      for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) cpa16(&ring[(i % S) * UNITS + u], src + u); }
    }
    cpa_commit();
  };
#pragma unroll
  for (int i = 0; i < S - 1; i++) issue(i);
  float we[CH][8];
  uint4 sh[CH];
  int gcur = -1;
#pragma unroll 1
  for (int i = 0; i < n; i++) {
    issue(i + S - 1);
    const size_t row = b0 + (size_t)i * nblk;
    const int g = (int)h3_clampi(h3_ld(in4, (long long)row), 6ll);
    if (g != gcur) {
      gcur = g;
#pragma unroll
      for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
        const uint4 w4 = *reinterpret_cast<const uint4 *>(in1 + u * 8), s4 = *reinterpret_cast<const uint4 *>(in2 + g * HH + u * 8);
        sh[j] = *reinterpret_cast<const uint4 *>(in3 + g * HH + u * 8);
        const unsigned wv[4] = {w4.x, w4.y, w4.z, w4.w}, sv[4] = {s4.x, s4.y, s4.z, s4.w};
#pragma unroll
        for (int q = 0; q < 4; q++) {
          we[j][2 * q] = __fmul_rn(__fadd_rn(bf_lo(wv[q]), 0.0f), __fadd_rn(1.0f, bf_lo(sv[q])));
          we[j][2 * q + 1] = __fmul_rn(__fadd_rn(bf_hi(wv[q]), 0.0f), __fadd_rn(1.0f, bf_hi(sv[q])));
        }
      } }
    }
    cpa_wait<S - 1>();
    float xf[CH][8];
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
      const uint4 v4 = ring[(i % S) * UNITS + u];
      const unsigned xv[4] = {v4.x, v4.y, v4.z, v4.w};
#pragma unroll
      for (int q = 0; q < 4; q++) { xf[j][2 * q] = bf_lo(xv[q]); xf[j][2 * q + 1] = bf_hi(xv[q]); }
#pragma unroll
      for (int k = 0; k < 8; k++) ss = FAST ? __fmaf_rn(xf[j][k], xf[j][k], ss) : __fadd_rn(ss, __fmul_rn(xf[j][k], xf[j][k]));
    } }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss = __fadd_rn(ss, __shfl_xor_sync(0xffffffffu, ss, o));
    float *pt = part[i & 1];
    if ((tid & 31) == 0) pt[tid >> 5] = ss;
    __syncthreads();
    const float4 p0 = *reinterpret_cast<const float4 *>(pt), p1 = *reinterpret_cast<const float4 *>(pt + 4);
    const float tot = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(0.0f, p0.x), p0.y), p0.z), p0.w), p1.x), p1.y), p1.z), p1.w);
    const float r = FAST ? rsqrtf(__fmaf_rn(tot, 1.0f / 5376.0f, 0x1.4f8b58p-17f))
                         : __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(tot, 5376.0f), 0x1.4f8b58p-17f)));
    h3_bf16 *y = out0 + row * HH;
#pragma unroll
    for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
      const unsigned hv[4] = {sh[j].x, sh[j].y, sh[j].z, sh[j].w};
      unsigned o[4];
#pragma unroll
      for (int q = 0; q < 4; q++)
        o[q] = bf_pack(__fmaf_rn(__fmul_rn(xf[j][2 * q], r), we[j][2 * q], bf_lo(hv[q])),
                       __fmaf_rn(__fmul_rn(xf[j][2 * q + 1], r), we[j][2 * q + 1], bf_hi(hv[q])));
      *reinterpret_cast<uint4 *>(y + u * 8) = make_uint4(o[0], o[1], o[2], o[3]);
    } }
  }
}

// V25: v0's shape (one row per block of 256 threads, x in registers, v0's sum order) reading
// w_eff = (gamma + 0)(1 + scale[g]) from a precomputed fp32 table wt[G][H] (nm_weff, a separate
// launch over the [G, H] tables) and shift[g] as bf16: per element after the reduction one
// multiply and one fma. Bitwise v0 unless FAST (the sum of squares by fma, r by rsqrt).
__global__ void nm_weff(const h3_bf16 *__restrict__ in1, const h3_bf16 *__restrict__ in2, float *__restrict__ wt, int rows) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows * HH) wt[i] = __fmul_rn(__fadd_rn(h3_w(in1[i % HH]), 0.0f), __fadd_rn(1.0f, h3_w(in2[i])));
}
template <bool FAST, int MINB>
__global__ void __launch_bounds__(BLK, MINB) nm_v25(const h3_bf16 *__restrict__ in0, const float *__restrict__ wt,
                                                    const h3_bf16 *__restrict__ in3, const int *__restrict__ in4,
                                                    h3_bf16 *__restrict__ out0) {
  __shared__ __align__(16) float part[8];
  const int tid = threadIdx.x;
  const size_t row = blockIdx.x;
  uint4 xv[CH];
#pragma unroll
  for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) xv[j] = reinterpret_cast<const uint4 *>(in0 + row * HH)[u]; }
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
    const unsigned q4[4] = {xv[j].x, xv[j].y, xv[j].z, xv[j].w};
#pragma unroll
    for (int q = 0; q < 4; q++) {
      const float a = bf_lo(q4[q]), b = bf_hi(q4[q]);
      ss = FAST ? __fmaf_rn(a, a, ss) : __fadd_rn(ss, __fmul_rn(a, a));
      ss = FAST ? __fmaf_rn(b, b, ss) : __fadd_rn(ss, __fmul_rn(b, b));
    }
  } }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss = __fadd_rn(ss, __shfl_xor_sync(0xffffffffu, ss, o));
  if ((tid & 31) == 0) part[tid >> 5] = ss;
  __syncthreads();
  const float4 p0 = *reinterpret_cast<const float4 *>(part), p1 = *reinterpret_cast<const float4 *>(part + 4);
  const float tot = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(0.0f, p0.x), p0.y), p0.z), p0.w), p1.x), p1.y), p1.z), p1.w);
  const float r = FAST ? rsqrtf(__fmaf_rn(tot, 1.0f / 5376.0f, 0x1.4f8b58p-17f))
                       : __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(tot, 5376.0f), 0x1.4f8b58p-17f)));
  const int g = (int)h3_clampi(h3_ld(in4, (long long)row), 6ll);
  const float *wg = wt + (size_t)g * HH;
  const h3_bf16 *hg = in3 + (size_t)g * HH;
#pragma unroll
  for (int j = 0; j < CH; j++) { const int u = tid + j * BLK; if (u < UNITS) {
    const float4 w0 = reinterpret_cast<const float4 *>(wg)[2 * u], w1 = reinterpret_cast<const float4 *>(wg)[2 * u + 1];
    const uint4 h4 = reinterpret_cast<const uint4 *>(hg)[u];
    const float we[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
    const unsigned q4[4] = {xv[j].x, xv[j].y, xv[j].z, xv[j].w}, hv[4] = {h4.x, h4.y, h4.z, h4.w};
    unsigned o[4];
#pragma unroll
    for (int q = 0; q < 4; q++)
      o[q] = bf_pack(__fmaf_rn(__fmul_rn(bf_lo(q4[q]), r), we[2 * q], bf_lo(hv[q])),
                     __fmaf_rn(__fmul_rn(bf_hi(q4[q]), r), we[2 * q + 1], bf_hi(hv[q])));
    reinterpret_cast<uint4 *>(out0 + row * HH)[u] = make_uint4(o[0], o[1], o[2], o[3]);
  } }
}

// V26: v25 FAST without the table: w_eff = fma(gamma, scale[g], gamma) per element in the kernel
// (one rounding of gamma (1 + scale), as lossless may; gamma and scale[g] as bf16, three 16-byte
// loads per chunk as v0). TPB threads per row (224: 7 warps, 3 chunks each, 256: v0's layout),
// XF: x kept in fp32 from the sum of squares to the modulate (more registers, fewer conversions).
template <int TPB, int MINB, bool XF, bool CR = false, bool PK = true>
__global__ void __launch_bounds__(TPB, MINB) nm_v26(const h3_bf16 *__restrict__ in0, const h3_bf16 *__restrict__ in1,
                                                    const h3_bf16 *__restrict__ in2, const h3_bf16 *__restrict__ in3,
                                                    const int *__restrict__ in4, h3_bf16 *__restrict__ out0) {
  constexpr int NC = (UNITS + TPB - 1) / TPB, NW = TPB / 32;
  __shared__ __align__(16) float part[8];
  const int tid = threadIdx.x;
  const size_t row = blockIdx.x;
  uint4 xv[NC];
  float xf[XF ? NC : 1][8];
#pragma unroll
  for (int j = 0; j < NC; j++) { const int u = tid + j * TPB; if (u < UNITS) xv[j] = reinterpret_cast<const uint4 *>(in0 + row * HH)[u]; }
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < NC; j++) { const int u = tid + j * TPB; if (u < UNITS) {
    const unsigned q4[4] = {xv[j].x, xv[j].y, xv[j].z, xv[j].w};
#pragma unroll
    for (int q = 0; q < 4; q++) {
      const float a = bf_lo(q4[q]), b = bf_hi(q4[q]);
      if (XF) { xf[XF ? j : 0][2 * q] = a; xf[XF ? j : 0][2 * q + 1] = b; }
      ss = __fmaf_rn(a, a, ss);
      ss = __fmaf_rn(b, b, ss);
    }
  } }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss = __fadd_rn(ss, __shfl_xor_sync(0xffffffffu, ss, o));
  if ((tid & 31) == 0) part[tid >> 5] = ss;
  __syncthreads();
  float tot = 0.0f;
#pragma unroll
  for (int w = 0; w < NW; w++) tot = __fadd_rn(tot, part[w]);
  const float r = CR ? __frsqrt_rn(__fmaf_rn(tot, 1.0f / 5376.0f, 0x1.4f8b58p-17f)) : rsqrtf(__fmaf_rn(tot, 1.0f / 5376.0f, 0x1.4f8b58p-17f));
  const int g = (int)h3_clampi(h3_ld(in4, (long long)row), 6ll);
  const h3_bf16 *sg = in2 + (size_t)g * HH, *hg = in3 + (size_t)g * HH;
#pragma unroll
  for (int j = 0; j < NC; j++) { const int u = tid + j * TPB; if (u < UNITS) {
    const uint4 w4 = reinterpret_cast<const uint4 *>(in1)[u], s4 = reinterpret_cast<const uint4 *>(sg)[u], h4 = reinterpret_cast<const uint4 *>(hg)[u];
    const unsigned q4[4] = {xv[j].x, xv[j].y, xv[j].z, xv[j].w}, wv[4] = {w4.x, w4.y, w4.z, w4.w},
                   sv[4] = {s4.x, s4.y, s4.z, s4.w}, hv[4] = {h4.x, h4.y, h4.z, h4.w};
    unsigned o[4];
#pragma unroll
    for (int q = 0; q < 4; q++) {
      const float wl = bf_lo(wv[q]), wh = bf_hi(wv[q]);
      const float xl = XF ? xf[XF ? j : 0][2 * q] : bf_lo(q4[q]), xh = XF ? xf[XF ? j : 0][2 * q + 1] : bf_hi(q4[q]);
      const float yl = __fmaf_rn(__fmul_rn(xl, r), __fmaf_rn(wl, bf_lo(sv[q]), wl), bf_lo(hv[q]));
      const float yh = __fmaf_rn(__fmul_rn(xh, r), __fmaf_rn(wh, bf_hi(sv[q]), wh), bf_hi(hv[q]));
      if (PK) o[q] = bf_pack(yl, yh);
      else o[q] = (unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(yl)) | ((unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(yh)) << 16);
    }
    reinterpret_cast<uint4 *>(out0 + row * HH)[u] = make_uint4(o[0], o[1], o[2], o[3]);
  } }
}

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)
typedef void (*kfn)(const h3_bf16 *, const h3_bf16 *, const h3_bf16 *, const h3_bf16 *, const int *, h3_bf16 *);

int main(int argc, char **) {
  size_t n = (size_t)T_ROWS * HH;
  std::vector<h3_bf16> hx(n), hp(13 * HH);
  std::vector<int> hi(T_ROWS);
  srand(1);
  for (size_t i = 0; i < n; i++) hx[i] = __float2bfloat16((rand() / (float)RAND_MAX - 0.5f) * 4);
  for (size_t i = 0; i < hp.size(); i++) hp[i] = __float2bfloat16((rand() / (float)RAND_MAX - 0.5f));
  for (int i = 0; i < T_ROWS; i++) hi[i] = i < 30000 ? 0 : 1;
  h3_bf16 *x, *p, *y, *y0, *cp;
  int *idx;
  CK(cudaMalloc(&x, n * 2)); CK(cudaMalloc(&y, n * 2)); CK(cudaMalloc(&y0, n * 2)); CK(cudaMalloc(&cp, n * 2));
  CK(cudaMalloc(&p, hp.size() * 2)); CK(cudaMalloc(&idx, T_ROWS * 4));
  CK(cudaMemcpy(x, hx.data(), n * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(p, hp.data(), hp.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(idx, hi.data(), T_ROWS * 4, cudaMemcpyHostToDevice));
  const h3_bf16 *gam = p, *sc = p + HH, *sh = p + 7 * HH;
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  const int iters = 200;
  auto timeit = [&](const char *name, auto launch) {
    for (int i = 0; i < 10; i++) launch();
    CK(cudaDeviceSynchronize());
    cudaEventRecord(a);
    for (int i = 0; i < iters; i++) launch();
    cudaEventRecord(b);
    CK(cudaEventSynchronize(b));
    float ms; cudaEventElapsedTime(&ms, a, b);
    printf("%-36s %8.1f us\n", name, ms * 1e3 / iters);
  };
  auto timeone = [&](const char *name, auto launch) {  // one launch at a time from an idle GPU: median of 31
    std::vector<float> ts;
    for (int i = 0; i < 36; i++) {
      CK(cudaDeviceSynchronize());
      cudaEventRecord(a); launch(); cudaEventRecord(b);
      CK(cudaEventSynchronize(b));
      float ms; cudaEventElapsedTime(&ms, a, b);
      if (i >= 5) ts.push_back(ms);
    }
    std::sort(ts.begin(), ts.end());
    printf("%-36s %8.1f us  (single launches, median)\n", name, ts[ts.size() / 2] * 1e3);
  };
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  if (argc > 1) {  // profiling: two launches each of the forms compared, no timing
    const long long n16p = (long long)n / 8;
    unsigned *tk;
    CK(cudaMalloc(&tk, 8)); CK(cudaMemset(tk, 0, 8));
    auto k22 = nm_v22<4, 3, false>;
    CK(cudaFuncSetAttribute(k22, cudaFuncAttributeMaxDynamicSharedMemorySize, 4 * UNITS * 16));
    float *wtp;
    CK(cudaMalloc(&wtp, 6 * HH * sizeof(float)));
    auto k24a = nm_v24<4, 3, false>, k24b = nm_v24<4, 3, true>;
    CK(cudaFuncSetAttribute(k24a, cudaFuncAttributeMaxDynamicSharedMemorySize, 4 * UNITS * 16));
    CK(cudaFuncSetAttribute(k24b, cudaFuncAttributeMaxDynamicSharedMemorySize, 4 * UNITS * 16));
    for (int i = 0; i < 2; i++) {
      copy_flat<1, 256><<<(unsigned)((n16p + 255) / 256), 256>>>(reinterpret_cast<const uint4 *>(x), reinterpret_cast<uint4 *>(y), n16p);
      nm_v10<2><<<T_ROWS, 256>>>(x, gam, sc, sh, idx, y);
      nm_v10<4><<<T_ROWS, 256>>>(x, gam, sc, sh, idx, y);
      nm_v11<2, 1, true><<<T_ROWS / 2, 256>>>(x, gam, sc, sh, idx, y);
      k22<<<sms * 3, BLK, 4 * UNITS * 16>>>(x, gam, sc, sh, idx, y);
      k24a<<<sms * 3, BLK, 4 * UNITS * 16>>>(x, gam, sc, sh, idx, y);
      k24b<<<sms * 3, BLK, 4 * UNITS * 16>>>(x, gam, sc, sh, idx, y);
      nm_weff<<<(6 * HH + 255) / 256, 256>>>(gam, sc, wtp, 6);
      nm_plan_kernel<<<T_ROWS, 256>>>(x, gam, sc, sh, idx, y);
      nm_v26<256, 1, false><<<T_ROWS, 256>>>(x, gam, sc, sh, idx, y);
      nm_v26<256, 1, false, true, true><<<T_ROWS, 256>>>(x, gam, sc, sh, idx, y);
      nm_v26<256, 1, false, true, false><<<T_ROWS, 256>>>(x, gam, sc, sh, idx, y);
      nm_v25<false, 6><<<T_ROWS, BLK>>>(x, wtp, sh, idx, y);
      nm_v25<true, 6><<<T_ROWS, BLK>>>(x, wtp, sh, idx, y);
    }
    CK(cudaDeviceSynchronize());
    return 0;
  }
  timeit("copy of x", [&] { cudaMemcpyAsync(cp, x, n * 2, cudaMemcpyDeviceToDevice); });
  timeit("v0 (current, 1 row/block)", [&] { nm_plan_kernel<<<T_ROWS, 256>>>(x, gam, sc, sh, idx, y0); });
  CK(cudaDeviceSynchronize());
  std::vector<h3_bf16> ref(n), got(n);
  CK(cudaMemcpy(ref.data(), y0, n * 2, cudaMemcpyDeviceToHost));
  auto check = [&](const char *name) {
    CK(cudaMemcpy(got.data(), y, n * 2, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += memcmp(&ref[i], &got[i], 2) != 0;
    printf("   %s: %zu mismatches\n", name, bad);
    CK(cudaMemset(y, 0, n * 2));
  };
  auto check_copy = [&](const char *name) {  // y must be x
    CK(cudaMemcpy(got.data(), y, n * 2, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += memcmp(&hx[i], &got[i], 2) != 0;
    printf("   %s: %zu elements differ from x\n", name, bad);
    CK(cudaMemset(y, 0, n * 2));
  };
  auto timing_only = [&](const char *) { CK(cudaMemset(y, 0, n * 2)); };
  auto check_close = [&](const char *name) {  // another summation order: how far from v0
    CK(cudaMemcpy(got.data(), y, n * 2, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    double maxd = 0, maxrel = 0;
    for (size_t i = 0; i < n; i++) {
      const double a = __bfloat162float(ref[i]), b = __bfloat162float(got[i]);
      if (!(a == b)) bad++;
      const double d = fabs(a - b);
      if (!(d <= maxd)) maxd = d;  // NaN propagates
      if (fabs(a) > 1e-2 && !(d / fabs(a) <= maxrel)) maxrel = d / fabs(a);
    }
    printf("   %s: %zu differ from v0, max |y - y0| %.3g, max relative %.3g (bf16 ulp 7.8e-3)\n", name, bad, maxd, maxrel);
    CK(cudaMemset(y, 0, n * 2));
  };
#define V10(M, WHAT, CHECK) timeit("v10 M" #M " " WHAT, [&] { nm_v10<M><<<T_ROWS, 256>>>(x, gam, sc, sh, idx, y); }); CHECK("v10 M" #M);
  V10(2, "load x, reduction, store x*r", timing_only) V10(4, "all (v0's work)", check)
#define V14(R, MB) timeit("v14 tables in smem R=" #R " MINB=" #MB, [&] { nm_v14<R, MB><<<(T_ROWS + R - 1) / R, 256>>>(x, gam, sc, sh, idx, y); }); check("v14");
#define V14P(MB, WAVES) timeit("v14 persistent MINB=" #MB " blocks=SMs*" #MB "*" #WAVES, [&] { \
    nm_v14<1, MB, true><<<sms * MB * WAVES, 256>>>(x, gam, sc, sh, idx, y); }); check("v14 persistent");
#define V15(MB, WAVES, NA) timeit("v15 w_eff in smem, persistent MINB=" #MB " blocks=SMs*" #MB "*" #WAVES " NA=" #NA, [&] { \
    nm_v15<MB, NA><<<sms * MB * WAVES, 256>>>(x, gam, sc, sh, idx, y); }); check("v15");
#define V22(S_, NB_, W, SK) { auto k_ = nm_v22<S_, NB_, SK>; const int sm_ = S_ * UNITS * 16; \
    CK(cudaFuncSetAttribute(k_, cudaFuncAttributeMaxDynamicSharedMemorySize, sm_)); \
    timeit("v22 ring S=" #S_ " NB=" #NB_ " blocks=SMs*" #W " SK=" #SK, [&] { k_<<<sms * W, BLK, sm_>>>(x, gam, sc, sh, idx, y); }); \
    if (SK) check_close("v22"); else check("v22"); }
  V22(4, 3, 3, false)
#define V24(S_, NB_, W, FAST) { auto k_ = nm_v24<S_, NB_, FAST>; const int sm_ = S_ * UNITS * 16; \
    CK(cudaFuncSetAttribute(k_, cudaFuncAttributeMaxDynamicSharedMemorySize, sm_)); \
    timeit("v24 lean ring S=" #S_ " NB=" #NB_ " blocks=SMs*" #W " FAST=" #FAST, [&] { k_<<<sms * W, BLK, sm_>>>(x, gam, sc, sh, idx, y); }); \
    if (FAST) check_close("v24"); else check("v24"); }
  V24(4, 3, 3, true)
  float *wt;
  CK(cudaMalloc(&wt, 6 * HH * sizeof(float)));
  timeit("nm_weff: w_eff table [6, 5376] fp32", [&] { nm_weff<<<(6 * HH + 255) / 256, 256>>>(gam, sc, wt, 6); });
#define V25(FAST, MB) timeit("v25 w_eff table, 1 row/block FAST=" #FAST " MINB=" #MB, [&] { \
    nm_v25<FAST, MB><<<T_ROWS, BLK>>>(x, wt, sh, idx, y); }); if (FAST) check_close("v25"); else check("v25");
  V25(false, 6) V25(true, 1) V25(true, 6)
#define V26(TPB, MB, XF) timeit("v26 w_eff in kernel by fma, TPB=" #TPB " MINB=" #MB " XF=" #XF, [&] { \
    nm_v26<TPB, MB, XF><<<T_ROWS, TPB>>>(x, gam, sc, sh, idx, y); }); check_close("v26");
  V26(256, 1, false)
#define V11(R, MB, U) timeit("v11 bulk, x from smem R=" #R " MINB=" #MB " UNROLL=" #U, [&] { nm_v11<R, MB, U><<<(T_ROWS + R - 1) / R, 256>>>(x, gam, sc, sh, idx, y); }); check("v11");
  V11(2, 1, true)
  {  // Plan B (the plan's residual_norm_modulate, residual' out of place) against a copy of its bytes
    h3_bf16 *upd, *r2, *big_s, *big_d;
    CK(cudaMalloc(&upd, n * 2)); CK(cudaMalloc(&r2, n * 2));
    CK(cudaMalloc(&big_s, n * 4)); CK(cudaMalloc(&big_d, n * 4));
    CK(cudaMemcpy(upd, x, n * 2, cudaMemcpyDeviceToDevice));
    timeit("copy of 2x (Plan B's bytes)", [&] { cudaMemcpyAsync(big_d, big_s, n * 4, cudaMemcpyDeviceToDevice); });
    timeit("b0 Plan B (plan kernel)", [&] { nm_planb_kernel<<<T_ROWS, 256>>>(x, upd, sc, gam, sc, sh, idx, r2, y); });
    timeit("b0 Plan B, launch_bounds(256, 6)", [&] { nm_planb_kernel_lb6<<<T_ROWS, 256>>>(x, upd, sc, gam, sc, sh, idx, r2, y); });
    timeit("b1 Plan B, r by rsqrtf", [&] { nm_planb_kernel_b1<<<T_ROWS, 256>>>(x, upd, sc, gam, sc, sh, idx, r2, y); });
    timeit("b2 Plan B, chunk-0 tables before r", [&] { nm_planb_kernel_b2<<<T_ROWS, 256>>>(x, upd, sc, gam, sc, sh, idx, r2, y); });
    timeit("copy of 2x (again)", [&] { cudaMemcpyAsync(big_d, big_s, n * 4, cudaMemcpyDeviceToDevice); });
    CK(cudaFree(upd)); CK(cudaFree(r2)); CK(cudaFree(big_s)); CK(cudaFree(big_d));
  }
  timeit("a1 Plan A, r by rsqrtf", [&] { nm_plan_kernel_a1<<<T_ROWS, 256>>>(x, gam, sc, sh, idx, y); }); check_close("a1");
  timeit("a2 Plan A, chunk-0 tables before r", [&] { nm_plan_kernel_a2<<<T_ROWS, 256>>>(x, gam, sc, sh, idx, y); }); check("a2");
  timeit("v0 (current, 1 row/block) again", [&] { nm_plan_kernel<<<T_ROWS, 256>>>(x, gam, sc, sh, idx, y); });
  timeit("copy kernel 1 row/block", [&] { copyk<false><<<T_ROWS, 256>>>(x, y); });
  const long long n16 = (long long)n / 8;
#define CF(U, TPB) timeit("flat copy U=" #U " TPB=" #TPB, [&] { copy_flat<U, TPB><<<(unsigned)((n16 + TPB * U - 1) / (TPB * U)), TPB>>>( \
    reinterpret_cast<const uint4 *>(x), reinterpret_cast<uint4 *>(y), n16); }); check_copy("flat copy");
  CF(1, 256)
  timeit("copy of x (again)", [&] { cudaMemcpyAsync(cp, x, n * 2, cudaMemcpyDeviceToDevice); });
  return 0;
}
