/* normmod_variants.cu: the plan's lossless norm+modulate kernels at [32768, 5376] bf16 (scale and
 * shift tables of 6 rows, Plan B's gate table of 6 more, g = 0 for rows < 30000, else 1; the update
 * its own random rows) on one GPU, from NM_KERNEL_H (written by
 * bench/normmod_variants.sh from the full H3 plan), against copies of their bytes and hand-written
 * forms of their memory schedule:
 *   v0        the plan's Plan A kernel (norm_modulate); a1 / a2: with r by rsqrtf / with the
 *             chunk-0 table loads issued right after the reduction's barrier (text edits by
 *             normmod_variants.sh); a4: the chunks' bodies without their `u < units` test
 *             (the staged Plan B's form); v26: Plan A's lossless arithmetic with 256 threads per row
 *             (the tier's block before session 6: another sum order, compared by check_close)
 *   b0        the plan's Plan B kernel (residual_norm_modulate), out of place, and in place as
 *             the model runs it, against a cudaMemcpy of twice x's bytes
 *   b10<XSM, MINB, UR> Plan B with the residual and update rows brought into shared memory by
 *             cp.async (no registers held by loads in flight; XSM: residual' kept there across
 *             the reduction; MINB blocks per SM asked of ptxas; UR: the unroll of the chunk
 *             loops), 224 threads: the form the codegen adopted, compared with b0 bitwise
 *   c2<TPB, UPB> Plan B's four streams copied without arithmetic (x -> residual', update -> y),
 *             UPB vectors per block (a row, half, two, or flat): the floor of Plan B's access
 *             pattern
 * and copies of x: cudaMemcpy, a row-per-block copy kernel, a flat copy. Prints the mean of 200
 * launches (CUDA events) per kernel and the mismatch count (or, for another summation order,
 * the distance from v0: check_close). `normmod_variants prof` launches the compared forms twice
 * each, for Nsight Compute; `normmod_variants dit` times them on normmod_gpu's kind of inputs
 * (DiT-like rows with outlier channels, N(0, 0.2) tables, H3's row layout of idx), where
 * normmod_gpu's Plan B times ran 3-6 us above this bench's. The earlier forms (v1-v25: multi-row blocks, rings, bulk copies,
 * persistent blocks, w_eff tables; session 6's text edits b1-b9 of the former Plan B kernel)
 * are in this file's git history (c7a6481 and before), their numbers in bench/results/
 * 2026-11-30-h200-*normmod-variants*.txt. */
#include NM_KERNEL_H
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>
#define T_ROWS 32768
#define HH 5376
#define UNITS 672

// b10<XSM, MINB, UR>: lossless Plan B (the plan's arithmetic and 224-thread sum order, so
// bitwise equal to b0) with the row's residual and update brought into shared memory by cp.async
// (16 bytes per thread and chunk, L2 only) instead of registers: no registers held while the
// loads are in flight, so more rows per SM (MINB blocks asked of the register allocator). Each
// thread reads back only the chunks it copied (cp.async.wait_all, no barrier). XSM: residual'
// kept in shared memory (over the residual's slot) across the reduction instead of in 12
// registers. UR: the unroll of the chunk loops after the copies (1: a chunk's registers at a time).
template <bool XSM, int MINB, int UR = 3>
__global__ void __launch_bounds__(224, MINB) nm_b10(const h3_bf16 *in0, const h3_bf16 *__restrict__ in1,
    const h3_bf16 *__restrict__ in2, const h3_bf16 *__restrict__ in3, const h3_bf16 *__restrict__ in4,
    const h3_bf16 *__restrict__ in5, const int *__restrict__ in6, h3_bf16 *out0, h3_bf16 *__restrict__ out1) {
  __shared__ uint4 rows[2 * UNITS];  // [residual row | update row]
  __shared__ float part[7];
  const long long row = blockIdx.x;
  const int tid = threadIdx.x;
  const uint4 *xg = reinterpret_cast<const uint4 *>(in0 + row * HH), *ug = reinterpret_cast<const uint4 *>(in1 + row * HH);
#pragma unroll
  for (int j = 0; j < 3; j++) {
    const int u = tid + j * 224;
    const unsigned dx = (unsigned)__cvta_generic_to_shared(&rows[u]), du = (unsigned)__cvta_generic_to_shared(&rows[UNITS + u]);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dx), "l"(xg + u) : "memory");
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(du), "l"(ug + u) : "memory");
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
  const long long g = h3_clampi(h3_ld(in6, row), 6ll);
  const h3_bf16 *scr = in4 + g * HH, *shr = in5 + g * HH, *gate = in2 + g * HH;
  h3_bf16 *y = out1 + row * HH, *xo = out0 + row * HH;
  asm volatile("cp.async.wait_all;" ::: "memory");
  __align__(16) h3_bf16 xr[3][8];
  float ss = 0.0f;
#pragma unroll UR
  for (int j = 0; j < 3; j++) {
    const int u = tid + j * 224;
    __align__(16) h3_bf16 gr[8], ur[8];
    *reinterpret_cast<uint4 *>(xr[j]) = rows[u];
    *reinterpret_cast<uint4 *>(ur) = rows[UNITS + u];
    h3_ldr8<true>(gate, u * 8, gr);
    float xw[8], gw[8], uw[8];
    h3_wbf8(xr[j], xw);
    h3_wbf8(gr, gw);
    h3_wbf8(ur, uw);
#pragma unroll
    for (int k = 0; k < 8; k++) xw[k] = __fadd_rn(xw[k], h3_rbf16(__fmul_rn(gw[k], uw[k])));
    h3_pbf8(xw, xr[j]);
    h3_str8<true>(xo, u * 8, xr[j]);
    if (XSM) rows[u] = *reinterpret_cast<const uint4 *>(xr[j]);
  }
  // the sum of squares of the rounded residual', chunk by chunk as the emitted kernel
#pragma unroll UR
  for (int j = 0; j < 3; j++) {
    float v[8];
    h3_wbf8(xr[j], v);
#pragma unroll
    for (int k = 0; k < 8; k++) ss = __fmaf_rn(v[k], v[k], ss);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss = __fadd_rn(ss, __shfl_xor_sync(0xffffffffu, ss, o));
  if ((tid & 31) == 0) part[tid >> 5] = ss;
  __syncthreads();
  float tot = 0.0f;
#pragma unroll
  for (int w = 0; w < 7; w++) tot = __fadd_rn(tot, part[w]);
  const float r = __frsqrt_rn(__fmaf_rn(tot, 0x1.861862p-13f, 0x1.4f8b58p-17f));
#pragma unroll UR
  for (int j = 0; j < 3; j++) {
    const int u = tid + j * 224;
    __align__(16) h3_bf16 wr[8], sr[8], hr[8], yr[8], xx[8];
    if (XSM) *reinterpret_cast<uint4 *>(xx) = rows[u];
    else *reinterpret_cast<uint4 *>(xx) = *reinterpret_cast<const uint4 *>(xr[j]);
    h3_ldr8<true>(in3, u * 8, wr);
    h3_ldr8<true>(scr, u * 8, sr);
    h3_ldr8<true>(shr, u * 8, hr);
    float v[8], w[8], sc[8], sh[8], o[8];
    h3_wbf8(xx, v);
    h3_wbf8(wr, w);
    h3_wbf8(sr, sc);
    h3_wbf8(hr, sh);
#pragma unroll
    for (int k = 0; k < 8; k++) {
      const float we = __fmaf_rn(w[k], sc[k], w[k]);
      o[k] = __fmaf_rn(__fmul_rn(v[k], r), we, sh[k]);
    }
    h3_pbf8(o, yr);
    h3_str8<true>(y, u * 8, yr);
  }
}

// plain copy kernels, 1 row per block, for the reference of what a row kernel reaches
template <bool HINT>
__global__ void __launch_bounds__(256) copyk(const h3_bf16 *__restrict__ x, h3_bf16 *__restrict__ y) {
  const long long row = blockIdx.x;
  const int tid = threadIdx.x;
  constexpr int BLK = 256, CH = (UNITS + BLK - 1) / BLK;
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

// Plan B's streams without its arithmetic: a -> c and b -> d, UPB 16-byte vectors of each
// stream per block of TPB threads (UPB = UNITS: a row per block; UPB = TPB: flat), all loads
// before the stores
template <int TPB, int UPB>
__global__ void __launch_bounds__(TPB) copy2k(const h3_bf16 *__restrict__ a, const h3_bf16 *__restrict__ b,
                                              h3_bf16 *__restrict__ c, h3_bf16 *__restrict__ d) {
  constexpr int C2 = (UPB + TPB - 1) / TPB;
  const long long base = (long long)blockIdx.x * UPB;
  const uint4 *pa = reinterpret_cast<const uint4 *>(a) + base, *pb = reinterpret_cast<const uint4 *>(b) + base;
  uint4 *pc = reinterpret_cast<uint4 *>(c) + base, *pd = reinterpret_cast<uint4 *>(d) + base;
  uint4 va[C2], vb[C2];
#pragma unroll
  for (int j = 0; j < C2; j++) { const int u = threadIdx.x + j * TPB; if (u < UPB) { va[j] = pa[u]; vb[j] = pb[u]; } }
#pragma unroll
  for (int j = 0; j < C2; j++) { const int u = threadIdx.x + j * TPB; if (u < UPB) { pc[u] = va[j]; pd[u] = vb[j]; } }
}

// bf16 pairs of a 32-bit word <-> fp32
__device__ __forceinline__ float bf_lo(unsigned v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float bf_hi(unsigned v) { return __uint_as_float(v & 0xffff0000u); }
__device__ __forceinline__ unsigned bf_pack(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
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

// a standard normal sample (Box-Muller over rand())
static float normal() {
  const float u1 = (rand() + 1.0f) / (RAND_MAX + 2.0f), u2 = rand() / (float)RAND_MAX;
  return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

int main(int argc, char **argv) {
  const bool prof = argc > 1 && !strcmp(argv[1], "prof"), dit = argc > 1 && !strcmp(argv[1], "dit");
  if (argc > 1 && !prof && !dit) {
    fprintf(stderr, "usage: normmod_variants [prof | dit]\n");
    return 2;
  }
  size_t n = (size_t)T_ROWS * HH;
  std::vector<h3_bf16> hx(n), hu(n), hp(19 * HH);
  std::vector<int> hi(T_ROWS);
  srand(1);
  if (dit) {  // normmod_gpu's inputs: N(0, 1) rows with 4 outlier channels 40 x larger (+-30),
              // gamma near 1, scale / shift / gate tables N(0, 0.2), idx in H3's row layout
    const int outliers[4] = {3, 77, (HH / 3) | 1, HH - 5};
    for (size_t i = 0; i < n; i++) {
      float v = normal(), w = normal();
      for (int o = 0; o < 4; o++)
        if ((int)(i % HH) == outliers[o]) v = 40.0f * v + (o % 2 ? -30.0f : 30.0f);
      hx[i] = __float2bfloat16(v), hu[i] = __float2bfloat16(w);
    }
    for (size_t i = 0; i < hp.size(); i++) hp[i] = __float2bfloat16(i < HH ? 1.0f + 0.1f * normal() : 0.2f * normal());
    for (int i = 0; i < T_ROWS; i++) hi[i] = i < 88 ? 1 : i < 444 ? 5 : 0;
  } else {
    for (size_t i = 0; i < n; i++) hx[i] = __float2bfloat16((rand() / (float)RAND_MAX - 0.5f) * 4);
    for (size_t i = 0; i < n; i++) hu[i] = __float2bfloat16((rand() / (float)RAND_MAX - 0.5f) * 4);
    for (size_t i = 0; i < hp.size(); i++) hp[i] = __float2bfloat16((rand() / (float)RAND_MAX - 0.5f));
    for (int i = 0; i < T_ROWS; i++) hi[i] = i < 30000 ? 0 : 1;
  }
  h3_bf16 *x, *p, *y, *y0, *cp;
  int *idx;
  CK(cudaMalloc(&x, n * 2)); CK(cudaMalloc(&y, n * 2)); CK(cudaMalloc(&y0, n * 2)); CK(cudaMalloc(&cp, n * 2));
  CK(cudaMalloc(&p, hp.size() * 2)); CK(cudaMalloc(&idx, T_ROWS * 4));
  CK(cudaMemcpy(x, hx.data(), n * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(p, hp.data(), hp.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(idx, hi.data(), T_ROWS * 4, cudaMemcpyHostToDevice));
  const h3_bf16 *gam = p, *sc = p + HH, *sh = p + 7 * HH, *gt = p + 13 * HH;  // gt: Plan B's gate table
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
  h3_bf16 *upd, *r2, *big_s, *big_d;  // Plan B: the update, residual' (out of place), 2x copies
  CK(cudaMalloc(&upd, n * 2)); CK(cudaMalloc(&r2, n * 2));
  CK(cudaMalloc(&big_s, n * 4)); CK(cudaMalloc(&big_d, n * 4));
  CK(cudaMemcpy(upd, hu.data(), n * 2, cudaMemcpyHostToDevice));
  auto plan_b = [&](h3_bf16 *res, h3_bf16 *res_out) {
    nm_planb_kernel<<<T_ROWS, NM_B0_BLOCK>>>(res, upd, gt, gam, sc, sh, idx, res_out, y);
  };
  auto b10 = [&] { nm_b10<false, 5><<<T_ROWS, 224>>>(x, upd, gt, gam, sc, sh, idx, r2, y); };
  if (prof) {  // profiling: two launches each of the forms compared, no timing
    const long long n16p = (long long)n / 8;
    for (int i = 0; i < 2; i++) {
      copy_flat<1, 256><<<(unsigned)((n16p + 255) / 256), 256>>>(reinterpret_cast<const uint4 *>(x), reinterpret_cast<uint4 *>(y), n16p);
      nm_plan_kernel<<<T_ROWS, NM_V0_BLOCK>>>(x, gam, sc, sh, idx, y);
      copy2k<224, UNITS><<<T_ROWS, 224>>>(x, upd, r2, y);
      plan_b(x, r2);
      b10();
    }
    CK(cudaDeviceSynchronize());
    return 0;
  }
  timeit("copy of x", [&] { cudaMemcpyAsync(cp, x, n * 2, cudaMemcpyDeviceToDevice); });
  timeit("v0 (the plan's Plan A, 1 row/block)", [&] { nm_plan_kernel<<<T_ROWS, NM_V0_BLOCK>>>(x, gam, sc, sh, idx, y0); });
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
  timeit("a1 Plan A, r by rsqrtf", [&] { nm_plan_kernel_a1<<<T_ROWS, NM_V0_BLOCK>>>(x, gam, sc, sh, idx, y); }); check_close("a1");
  timeit("a4 Plan A, chunks without the u < 672 test", [&] { nm_plan_kernel_a4<<<T_ROWS, NM_V0_BLOCK>>>(x, gam, sc, sh, idx, y); }); check("a4");
  timeit("a2 Plan A, chunk-0 tables before r", [&] { nm_plan_kernel_a2<<<T_ROWS, NM_V0_BLOCK>>>(x, gam, sc, sh, idx, y); }); check("a2");
  timeit("v26 Plan A at 256 threads (the tier's former block)", [&] { nm_v26<256, 1, false, true, true><<<T_ROWS, 256>>>(x, gam, sc, sh, idx, y); }); check_close("v26");
  timeit("copy kernel 1 row/block", [&] { copyk<false><<<T_ROWS, 256>>>(x, y); }); check_copy("copy kernel");
  const long long n16 = (long long)n / 8;
  timeit("flat copy U=1 TPB=256", [&] { copy_flat<1, 256><<<(unsigned)((n16 + 255) / 256), 256>>>(
    reinterpret_cast<const uint4 *>(x), reinterpret_cast<uint4 *>(y), n16); }); check_copy("flat copy");
  timeit("copy of x (again)", [&] { cudaMemcpyAsync(cp, x, n * 2, cudaMemcpyDeviceToDevice); });
  // Plan B (the plan's residual_norm_modulate, residual' out of place) against a copy of its bytes
  {
    std::vector<uint16_t> r_b0(n), y_b0(n), r_b10(n), y_b10(n);
    auto outs = [&](std::vector<uint16_t> &ro, std::vector<uint16_t> &yo) {
      CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(ro.data(), r2, n * 2, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(yo.data(), y, n * 2, cudaMemcpyDeviceToHost));
      CK(cudaMemset(r2, 0, n * 2)); CK(cudaMemset(y, 0, n * 2));
    };
    plan_b(x, r2); outs(r_b0, y_b0);
    b10(); outs(r_b10, y_b10);
    printf("   b10 %s b0 bitwise (residual' and y)\n", r_b0 == r_b10 && y_b0 == y_b10 ? "equals" : "DIFFERS from");
    for (int round = 0; round < 3; round++) {
      timeit("copy of 2x (Plan B's bytes)", [&] { cudaMemcpyAsync(big_d, big_s, n * 4, cudaMemcpyDeviceToDevice); });
      timeit("b0 Plan B (plan kernel)", [&] { plan_b(x, r2); });
      timeit("b10 Plan B, hand-written", b10);
    }
    timeit("b0 Plan B in place (residual' over x)", [&] { plan_b(r2, r2); });
    timeit("c2 copy x->r2, upd->y, 1 row/block, 224", [&] { copy2k<224, UNITS><<<T_ROWS, 224>>>(x, upd, r2, y); });
    timeit("c2 copy x->r2, upd->y, flat, 256", [&] { copy2k<256, 256><<<(unsigned)(n / 8 / 256), 256>>>(x, upd, r2, y); });
    timeit("copy of 2x (again)", [&] { cudaMemcpyAsync(big_d, big_s, n * 4, cudaMemcpyDeviceToDevice); });
    // random idx (every row its own of the 6 table rows): the tables miss L1 more often
    std::vector<int> hr(T_ROWS);
    for (int i = 0; i < T_ROWS; i++) hr[i] = rand() % 6;
    CK(cudaMemcpy(idx, hr.data(), T_ROWS * 4, cudaMemcpyHostToDevice));
    timeit("random idx: b0 Plan B (plan kernel)", [&] { plan_b(x, r2); });
    timeit("random idx: b10 Plan B, hand-written", b10);
    timeit("random idx: v0 Plan A", [&] { nm_plan_kernel<<<T_ROWS, NM_V0_BLOCK>>>(x, gam, sc, sh, idx, y); });
    timeit("random idx: a4 Plan A, no u < 672 test", [&] { nm_plan_kernel_a4<<<T_ROWS, NM_V0_BLOCK>>>(x, gam, sc, sh, idx, y); });
  }
  CK(cudaFree(upd)); CK(cudaFree(r2)); CK(cudaFree(big_s)); CK(cudaFree(big_d));
  return 0;
}
