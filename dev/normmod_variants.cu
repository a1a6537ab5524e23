/* normmod_variants.cu: the plan's lossless norm+modulate kernels at [32768, 5376] bf16 (scale and
 * shift tables of 6 rows, Plan B's gate table of 6 more, g = 0 for rows < 30000, else 1; the update
 * its own random rows) on one GPU, from NM_KERNEL_H (written by
 * dev/normmod_variants.sh from the full H3 plan), against copies of their bytes and hand-written
 * forms of their memory schedule:
 *   v0        the plan's Plan A kernel (norm_modulate); a1 / a2: with r by rsqrtf / with the
 *             chunk-0 table loads issued right after the reduction's barrier; a4: the chunks'
 *             bodies without their `u < units` test (the staged Plan B's form); a256: with 256
 *             threads per row (the tier's block before the 224-thread rows of 2026-11-30: another
 *             sum order, compared by check_close); all text edits by normmod_variants.sh
 *   b0        the plan's Plan B kernel (residual_norm_modulate: the staged row), out of place,
 *             and in place as the model runs it, against a cudaMemcpy of twice x's bytes; with
 *             gamma and the tables in separate allocations too ("sep")
 *   b10       Plan B with the residual and update rows brought into shared memory by cp.async
 *             (no registers held by loads in flight), 224 threads, hand-written, U3 in fp32;
 *             b11: with the plan's bf16x2 U3 (h3_u3bf8); both compared with b0 bitwise
 *   copy_rows<2, TPB, UPB> Plan B's four streams copied without arithmetic (x -> residual',
 *             update -> y), a row per block or flat: the floor of Plan B's access pattern
 * and copies of x: cudaMemcpy, copy_rows<1, ...> with a row per block and flat. Prints the mean
 * of 200 launches (CUDA events) per kernel and the mismatch count (or, for another summation
 * order, the distance from v0: check_close). `normmod_variants prof` launches the compared forms
 * twice each, for Nsight Compute; `normmod_variants dit` times them on normmod_gpu's kind of
 * inputs (DiT-like rows with outlier channels, N(0, 0.2) tables, H3's row layout of idx), where
 * normmod_gpu's Plan B times ran 3-6 us above this bench's. The earlier forms (v1-v26:
 * multi-row blocks, rings, bulk copies, persistent blocks, w_eff tables, copies with cache
 * hints; the text edits b1-b9 of the former Plan B kernel and b10's parameters, 2026-11-30; the
 * edits of the register row, 2026-12-01: bn / bf / bc / bs / b2, its blocks-per-SM bound, fp32
 * U3, load cache hints) are in this file's git history, their numbers in dev/results/
 * 2026-11-30-h200-*normmod-variants*.txt and 2026-12-01-h200-normmod-*.txt. NM_BALLAST_GB=N allocates
 * N GiB before the bench's own buffers. */
#include NM_KERNEL_H
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>
#include <cuda_runtime.h>
#define T_ROWS 32768
#define HH 5376
#define UNITS 672

// b10: lossless Plan B (the plan's arithmetic and 224-thread sum order, so bitwise equal to b0)
// with the row's residual and update brought into shared memory by cp.async (16 bytes per thread
// and chunk, L2 only) instead of registers: no registers held while the loads are in flight, so
// more rows per SM (5 blocks asked of the register allocator: 56 registers). Each thread reads
// back only the chunks it copied (cp.async.wait_all, no barrier). (Measured and dropped on
// 2026-11-30, dev/results/2026-11-30-h200-normmod-variants-e.txt: residual' kept in shared
// memory across the reduction, 6-9 blocks per SM, the chunk loops not unrolled.)
// BF: U3 by h3_u3bf8 (the plan's bf16x2 arithmetic: b11) instead of fp32.
template <bool BF>
__global__ void __launch_bounds__(224, 5) nm_b10(const h3_bf16 *in0, const h3_bf16 *__restrict__ in1,
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
#pragma unroll
  for (int j = 0; j < 3; j++) {
    const int u = tid + j * 224;
    __align__(16) h3_bf16 gr[8], ur[8];
    *reinterpret_cast<uint4 *>(xr[j]) = rows[u];
    *reinterpret_cast<uint4 *>(ur) = rows[UNITS + u];
    h3_ldr8<true>(gate, u * 8, gr);
    if (BF) {
      h3_u3bf8(xr[j], gr, ur);
    } else {
      float xw[8], gw[8], uw[8];
      h3_wbf8(xr[j], xw);
      h3_wbf8(gr, gw);
      h3_wbf8(ur, uw);
#pragma unroll
      for (int k = 0; k < 8; k++) xw[k] = __fadd_rn(xw[k], h3_rbf16(__fmul_rn(gw[k], uw[k])));
      h3_pbf8(xw, xr[j]);
    }
    h3_str8<true>(xo, u * 8, xr[j]);
  }
  // the sum of squares of the rounded residual', chunk by chunk as the emitted kernel
#pragma unroll
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
#pragma unroll
  for (int j = 0; j < 3; j++) {
    const int u = tid + j * 224;
    __align__(16) h3_bf16 wr[8], sr[8], hr[8], yr[8];
    h3_ldr8<true>(in3, u * 8, wr);
    h3_ldr8<true>(scr, u * 8, sr);
    h3_ldr8<true>(shr, u * 8, hr);
    float v[8], w[8], sc[8], sh[8], o[8];
    h3_wbf8(xr[j], v);
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

// copies of NS streams (a -> c; NS = 2: b -> d too), UPB 16-byte vectors of each stream per
// block of TPB threads (UPB = UNITS: a row per block, what a row kernel can reach; UPB = TPB:
// flat, what cudaMemcpy reaches), all loads before the stores. NS = 2 is Plan B's four streams
// without its arithmetic.
template <int NS, int TPB, int UPB>
__global__ void __launch_bounds__(TPB) copy_rows(const h3_bf16 *__restrict__ a, const h3_bf16 *__restrict__ b,
                                                 h3_bf16 *__restrict__ c, h3_bf16 *__restrict__ d) {
  constexpr int C = (UPB + TPB - 1) / TPB;
  const long long base = (long long)blockIdx.x * UPB;
  const h3_bf16 *in[2] = {a, b};
  h3_bf16 *out[2] = {c, d};
  const uint4 *src[NS];
  uint4 *dst[NS];
#pragma unroll
  for (int q = 0; q < NS; q++)  // (b and d are not touched when NS = 1)
    src[q] = reinterpret_cast<const uint4 *>(in[q]) + base, dst[q] = reinterpret_cast<uint4 *>(out[q]) + base;
  uint4 v[NS][C];
#pragma unroll
  for (int j = 0; j < C; j++) {
    const int u = threadIdx.x + j * TPB;
#pragma unroll
    for (int q = 0; q < NS; q++) if (u < UPB) v[q][j] = src[q][u];
  }
#pragma unroll
  for (int j = 0; j < C; j++) {
    const int u = threadIdx.x + j * TPB;
#pragma unroll
    for (int q = 0; q < NS; q++) if (u < UPB) dst[q][u] = v[q][j];
  }
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
  // NM_BALLAST_GB=N: N GiB allocated and written first, so that the bench's buffers land where a
  // process holding as much memory as normmod_gpu puts them
  std::vector<void *> ballast;
  for (int i = 0, gb = getenv("NM_BALLAST_GB") ? atoi(getenv("NM_BALLAST_GB")) : 0; i < gb; i++) {
    void *q;
    CK(cudaMalloc(&q, 1u << 30));
    CK(cudaMemset(q, 0, 1u << 30));
    ballast.push_back(q);
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
  const h3_bf16 *tg = gam, *ts = sc, *th = sh, *tt = gt;  // the tables Plan B reads (see "sep")
  auto plan_b = [&](h3_bf16 *res, h3_bf16 *res_out) {
    nm_planb_kernel<<<T_ROWS, NM_B0_BLOCK>>>(res, upd, tt, tg, ts, th, idx, res_out, y);
  };
  auto b10 = [&] { nm_b10<false><<<T_ROWS, 224>>>(x, upd, tt, tg, ts, th, idx, r2, y); };
  auto b11 = [&] { nm_b10<true><<<T_ROWS, 224>>>(x, upd, tt, tg, ts, th, idx, r2, y); };
  if (prof) {  // profiling: two launches each of the forms compared, no timing
    for (int i = 0; i < 2; i++) {
      copy_rows<1, 256, 256><<<(unsigned)(n / 8 / 256), 256>>>(x, nullptr, y, nullptr);
      nm_plan_kernel<<<T_ROWS, NM_V0_BLOCK>>>(x, gam, sc, sh, idx, y);
      copy_rows<2, 224, UNITS><<<T_ROWS, 224>>>(x, upd, r2, y);
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
  timeit("a256 Plan A at 256 threads (the tier's former block)", [&] { nm_plan_kernel_a256<<<T_ROWS, 256>>>(x, gam, sc, sh, idx, y); }); check_close("a256");
  timeit("copy kernel 1 row/block", [&] { copy_rows<1, 256, UNITS><<<T_ROWS, 256>>>(x, nullptr, y, nullptr); }); check_copy("copy kernel");
  timeit("flat copy TPB=256", [&] { copy_rows<1, 256, 256><<<(unsigned)(n / 8 / 256), 256>>>(x, nullptr, y, nullptr); });
  check_copy("flat copy");
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
    auto same_as_b0 = [&](const char *name, const std::function<void()> &run) {  // residual' and y
      run(); outs(r_b10, y_b10);
      printf("   %s %s b0 bitwise (residual' and y)\n", name, r_b0 == r_b10 && y_b0 == y_b10 ? "equals" : "DIFFERS from");
    };
    same_as_b0("b10", b10);
    same_as_b0("b11", b11);
    for (int round = 0; round < 3; round++) {
      timeit("copy of 2x (Plan B's bytes)", [&] { cudaMemcpyAsync(big_d, big_s, n * 4, cudaMemcpyDeviceToDevice); });
      timeit("b0 Plan B (plan kernel)", [&] { plan_b(x, r2); });
      timeit("b10 Plan B, hand-written", b10);
      timeit("b11 b10 with h3_u3bf8", b11);
    }
    {  // sep: gamma and the three tables each in an allocation of its own (4 MiB apart at least),
       // as normmod_gpu and a plan place them, instead of one array
      h3_bf16 *q[4];
      const size_t rows[4] = {1, 6, 6, 6};
      const h3_bf16 *from[4] = {gam, sc, sh, gt};
      for (int i = 0; i < 4; i++) {
        CK(cudaMalloc(&q[i], 4u << 20));
        CK(cudaMemcpy(q[i], from[i], rows[i] * HH * 2, cudaMemcpyDeviceToDevice));
      }
      tg = q[0], ts = q[1], th = q[2], tt = q[3];
      same_as_b0("sep: b0", [&] { plan_b(x, r2); });
      timeit("sep: copy of 2x", [&] { cudaMemcpyAsync(big_d, big_s, n * 4, cudaMemcpyDeviceToDevice); });
      timeit("sep: b0 Plan B (plan kernel)", [&] { plan_b(x, r2); });
      timeit("sep: b10 Plan B, hand-written", b10);
      timeit("sep: b11", b11);
      tg = gam, ts = sc, th = sh, tt = gt;
      for (int i = 0; i < 4; i++) CK(cudaFree(q[i]));
    }
    timeit("b0 Plan B in place (residual' over x)", [&] { plan_b(r2, r2); });
    timeit("c2 copy x->r2, upd->y, 1 row/block, 224", [&] { copy_rows<2, 224, UNITS><<<T_ROWS, 224>>>(x, upd, r2, y); });
    timeit("c2 copy x->r2, upd->y, flat, 256", [&] { copy_rows<2, 256, 256><<<(unsigned)(n / 8 / 256), 256>>>(x, upd, r2, y); });
    timeit("copy of 2x (again)", [&] { cudaMemcpyAsync(big_d, big_s, n * 4, cudaMemcpyDeviceToDevice); });
    // random idx (every row its own of the 6 table rows): the tables miss L1 more often
    std::vector<int> hr(T_ROWS);
    for (int i = 0; i < T_ROWS; i++) hr[i] = rand() % 6;
    CK(cudaMemcpy(idx, hr.data(), T_ROWS * 4, cudaMemcpyHostToDevice));
    timeit("random idx: b0 Plan B (plan kernel)", [&] { plan_b(x, r2); });
    timeit("random idx: b11 Plan B, hand-written, bf16x2 U3", b11);
    timeit("random idx: b10 Plan B, hand-written", b10);
    timeit("random idx: v0 Plan A", [&] { nm_plan_kernel<<<T_ROWS, NM_V0_BLOCK>>>(x, gam, sc, sh, idx, y); });
    timeit("random idx: a4 Plan A, no u < 672 test", [&] { nm_plan_kernel_a4<<<T_ROWS, NM_V0_BLOCK>>>(x, gam, sc, sh, idx, y); });
  }
  CK(cudaFree(upd)); CK(cudaFree(r2)); CK(cudaFree(big_s)); CK(cudaFree(big_d));
  return 0;
}
