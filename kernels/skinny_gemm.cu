// skinny_gemm.cu: linear of few rows (M <= 16) on CUDA cores, bound by the weight's bandwidth:
//   H3_SKINNY_NAME_m<MR> (x[M, K] bf16, w[N, K] bf16, bias[N] O_T or null, y[M, N] O_T,
//                         part f32[S, M, N], cnt u32[grid.x], M, N, K, cpb, kr)
//   y[m, n] = round(sum_k x[m, k] w[n, k] + bias[n]): fp32 sums, the bias added in fp32, one
//   rounding to O_T (runtime/cuda/cuda_gemm.c's contract for cuBLASLt's BIAS epilogue).
// Five kernels, MR = 1, 2, 4, 8, 16: the fewest of those rows that hold M (a row past M reads
// row M - 1 of x and is never stored). Launch (runtime/cuda/cuda_skinny_gemm.c picks cpb, kr
// and S from M, N, K alone, cuda_skinny_gemm.h, so that the sum order, hence every bit of y,
// depends on the inputs only): grid (ceil(N / cpb), S = ceil(K / kr)), H3S_THREADS threads,
// dynamic shared memory M * kr * 2 bytes. Requires K % 8 == 0 and x, w 16-byte aligned.
// Block (bx, s) stages x[0 .. M, s kr .. s kr + kr) into shared memory (cp.async, one barrier),
// then warp w computes the column pairs n = bx cpb + 2 (w + 8 i) (cpb a multiple of 16) over
// those k: lane l owns the 8 k at 8 l + 256 j of the range, H3S_U such 16-byte loads per
// weight row per iteration (2 H3S_U independent loads in flight per lane), each product
// added by fma in k order into the lane's fp32 sums, then the warp's 32 lane sums added by a
// fixed butterfly of shuffles.
// S == 1: y written directly. S > 1: fp32 partials part[s, M, N], then the last block of each
// column group (counter cnt[bx], u32, 0 before the launch and again after it) adds them in
// split order s = 0, 1, ... (never atomics on floats), adds the bias and writes y.
// The streaming form H3_SKINNY_NAME_st (one row of x, K a multiple of 256; below): work units
// of 1, 2 or 4 KB of the weight handed out grid-stride, partials added by a ticket's last drawer.
// Every barrier and shuffle runs as often in every thread of a block
// (tests/m31/test_skinny_emu.cpp runs these kernels on the host under tests/codegen/host_emu.h).
// Macros the user defines in front: H3_SKINNY_NAME and O_T (y's and the bias's element type).

#define H3S_THREADS 256 // 8 warps
#define H3S_U 4         // 16-byte loads per weight row and lane per iteration

// 16 bytes of the weight, streamed: read once, kept out of L1
H3_DI uint4 h3s_ldw(const h3_bf16 *p) {
#ifdef __CUDA_ARCH__
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
#else
  return *reinterpret_cast<const uint4 *>(p);
#endif
}

// y[at] = the sum of count partials p[0], p[stride], .. written by other blocks (through L2), in
// that order from 0, 8 loads in flight, then bias[n] (if any) added: one rounding to O_T
H3_DI void h3s_finish(const float *p, long long stride, long long count, const O_T *bias, long long n, O_T *y,
                      long long at) {
  float sum = 0.0f;
  for (long long c0 = 0; c0 < count; c0 += 8) {
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = c0 + i < count ? h3_ldcg(p + (c0 + i) * stride) : 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++)
      if (c0 + i < count) sum = __fadd_rn(sum, v[i]);
  }
  h3_st(y, at, bias ? __fadd_rn(sum, h3_w(bias[n])) : sum);
}

template <int MR>
__device__ void h3s_gemm(const h3_bf16 *x, const h3_bf16 *w, const O_T *bias, O_T *y, float *part,
                         unsigned *cnt, long long M, long long N, long long K, int cpb, int kr) {
  H3_DYN_SMEM(uint4, xs); // x[M, kn] of the block's k range, 8 bf16 per slot
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long kb = (long long)blockIdx.y * kr;
  const int kn = (int)(K - kb < kr ? K - kb : kr), ks = kn / 8; // k and slots of a row
  for (int i = threadIdx.x; i < M * ks; i += H3S_THREADS)
    h3_cp16(xs + i, x + (i / ks) * K + kb + 8 * (i % ks));
  h3_cp_commit();
  h3_cp_wait();
  __syncthreads();
  const long long c0 = (long long)blockIdx.x * cpb;
  const bool whole = gridDim.y == 1;
  // cpb / 16 pairs per warp in every block, so that every lane shuffles as often
  for (int pair = warp; 2 * pair < cpb; pair += H3S_THREADS / 32) {
    const long long n0 = c0 + 2 * pair;
    // the pair's weight rows (past N: row N - 1, never stored)
    const h3_bf16 *wr[2] = {w + (n0 < N ? n0 : N - 1) * K + kb, w + (n0 + 1 < N ? n0 + 1 : N - 1) * K + kb};
    float acc[MR][2];
#pragma unroll
    for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = 0.0f;
    for (int j0 = lane; j0 < ks; j0 += 32 * H3S_U) { // slot j0 + 32 u of each row
      uint4 wv[H3S_U][2];
#pragma unroll
      for (int u = 0; u < H3S_U; u++)
#pragma unroll
        for (int c = 0; c < 2; c++)
          if (j0 + 32 * u < ks) wv[u][c] = h3s_ldw(wr[c] + 8 * (j0 + 32 * u));
#pragma unroll
      for (int u = 0; u < H3S_U; u++) {
        const int j = j0 + 32 * u;
        if (j >= ks) break;
        float wf[2][8];
        h3_bf16x8_f32(wv[u][0], wf[0]);
        h3_bf16x8_f32(wv[u][1], wf[1]);
#pragma unroll
        for (int r = 0; r < MR; r++) {
          float xf[8];
          h3_bf16x8_f32(xs[(r < M ? r : M - 1) * ks + j], xf);
#pragma unroll
          for (int e = 0; e < 8; e++) {
            acc[r][0] = __fmaf_rn(xf[e], wf[0][e], acc[r][0]);
            acc[r][1] = __fmaf_rn(xf[e], wf[1][e], acc[r][1]);
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < MR; r++)
#pragma unroll
      for (int c = 0; c < 2; c++) {
        float v = acc[r][c];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
        const long long n = n0 + c;
        if (lane != 2 * r + c || r >= M || n >= N) continue; // lane 2 r + c stores
        if (!whole) part[((long long)blockIdx.y * M + r) * N + n] = v;
        else h3_st(y, r * N + n, bias ? __fadd_rn(v, h3_w(bias[n])) : v);
      }
  }
  if (whole || !h3_last_block(cnt + blockIdx.x, gridDim.y)) return;
  const long long S = gridDim.y;
  for (int i = threadIdx.x; i < M * cpb; i += H3S_THREADS) {
    const long long r = i / cpb, n = c0 + i % cpb;
    if (n < N) h3s_finish(part + r * N + n, M * N, S, bias, n, y, r * N + n);
  }
}

#define H3S_CAT2(a, b) a##b
#define H3S_CAT(a, b) H3S_CAT2(a, b)
#define H3S_KERNEL(MR)                                                                               \
  extern "C" __global__ void __launch_bounds__(H3S_THREADS) H3S_CAT(H3_SKINNY_NAME, _m##MR)(        \
      const h3_bf16 *x, const h3_bf16 *w, const O_T *bias, O_T *y, float *part, unsigned *cnt,      \
      long long M, long long N, long long K, int cpb, int kr) {                                     \
    h3s_gemm<MR>(x, w, bias, y, part, cnt, M, N, K, cpb, kr);                                       \
  }
H3S_KERNEL(1)
H3S_KERNEL(2)
H3S_KERNEL(4)
H3S_KERNEL(8)
H3S_KERNEL(16)

// ---- the streaming form (M = 1) ----------------------------------------------------------------
// H3_SKINNY_NAME_st (x[1, K], w[N, K], bias[N] or null, y[1, N], part f32[C, N], cnt u32[P],
// N, K): y as above for one row of x, K a multiple of 256, x and w 16-byte aligned; S = K /
// 256 segments of 256 k, G = 4, 2 or 1 (the most of those dividing S) segments a chunk, C = S
// / G chunks a row, P = ceil(N / 2) row pairs. Work unit u = (pair p = u / C, chunk c = u %
// C): rows 2p and 2p + 1 (row N - 1 read twice for odd N, never stored) over k = 256 G c ..
// + 256 G - 1, at most 4 KB of the weight; warp v of block b takes units 8 b + v + 8 i
// gridDim.x, two a turn (every warp of a block as many turns, units past the last computing
// zeros), a unit's 2 G 16-byte loads a lane issued at once and before the previous unit's
// sums, x read through the read-only cache (no staging, no barrier). A unit's two sums: lane l's
// products at k = 256 (G c + g) + 8 l + e (g < G, e < 8) added by fma in that order, then the
// warp's butterfly; lane j % 32 of the warp's j-th unit writes them to part[c, 2p .. 2p + 1].
// No fence and no ticket inside the loop (a fence waits for the loads in flight, which would
// leave the warp with none during the ticket's round trip): after its last unit each lane
// fences once and draws a ticket of cnt[p] (0 before the launch and after it) for each unit
// it wrote; the drawer of a pair's C-th ticket adds the pair's C partials in chunk order from
// 0 (then the bias), writes y and resets cnt[p]. The sums depend on K alone: any grid gives
// y's bits (the launcher's: 2 blocks an SM; nothing waits for another block).

// A ticket of c. On the host an atomic too: lane 0 of several warps of a block draws at once
// where the emulator runs a block's threads as OS threads (the sanitizers' form).
H3_DI unsigned h3s_ticket(unsigned *c) {
#ifdef __CUDA_ARCH__
  return atomicAdd(c, 1u);
#else
  return __atomic_fetch_add(c, 1u, __ATOMIC_ACQ_REL);
#endif
}

extern "C" __global__ void __launch_bounds__(H3S_THREADS, 2) H3S_CAT(H3_SKINNY_NAME, _st)(
    const h3_bf16 *x, const h3_bf16 *w, const O_T *bias, O_T *y, float *part, unsigned *cnt, long long N,
    long long K) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = H3S_THREADS / 32;
  const long long S = K / 256, G = S % 4 == 0 ? 4 : S % 2 == 0 ? 2 : 1, C = S / G;
  const long long units = (N + 1) / 2 * C, step = (long long)warps * gridDim.x;
  // unit u's weight loads (rows 2p, 2p + 1; zeros past the last unit)
  auto issue = [&](long long u, uint4 *w0, uint4 *w1) {
    const long long p = u / C, k0 = 256 * G * (u % C) + 8 * lane;
    const long long r1 = 2 * p + 1 < N ? 2 * p + 1 : N - 1;
#pragma unroll
    for (int g = 0; g < 4; g++) {
      w0[g] = w1[g] = uint4{0u, 0u, 0u, 0u};
      if (u < units && g < G) {
        w0[g] = h3s_ldw(w + 2 * p * K + k0 + 256 * g);
        w1[g] = h3s_ldw(w + r1 * K + k0 + 256 * g);
      }
    }
  };
  // unit u (the warp's j-th) summed by every lane (the shuffles); lane j % 32 writes its partials
  auto unit = [&](long long u, long long j, const uint4 *w0, const uint4 *w1) {
    const long long p = u / C, c = u % C, k0 = 256 * G * c + 8 * lane;
    uint4 xv[4];
#pragma unroll
    for (int g = 0; g < 4; g++) xv[g] = u < units && g < G ? h3_ldg16(x + k0 + 256 * g) : uint4{0u, 0u, 0u, 0u};
    float a0 = 0.0f, a1 = 0.0f;
#pragma unroll
    for (int g = 0; g < 4; g++) {
      if (g >= G) break;
      float xf[8], f0[8], f1[8];
      h3_bf16x8_f32(xv[g], xf);
      h3_bf16x8_f32(w0[g], f0);
      h3_bf16x8_f32(w1[g], f1);
#pragma unroll
      for (int e = 0; e < 8; e++) a0 = __fmaf_rn(xf[e], f0[e], a0), a1 = __fmaf_rn(xf[e], f1[e], a1);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      a0 = __fadd_rn(a0, __shfl_xor_sync(0xffffffffu, a0, o));
      a1 = __fadd_rn(a1, __shfl_xor_sync(0xffffffffu, a1, o));
    }
    if (lane != (int)(j & 31) || u >= units) return;
    part[c * N + 2 * p] = a0;
    if (2 * p + 1 < N) part[c * N + 2 * p + 1] = a1;
  };
  // two units in turn (buffers a and b, never copied: a copy of a register whose load is in
  // flight waits for it), the next one's loads issued before a unit's sums
  uint4 a0[4], a1[4], b0[4], b1[4];
  const long long first = (long long)warps * blockIdx.x + warp;
  long long j = 0; // the warp's units so far
  issue(first, a0, a1);
  for (long long base = (long long)warps * blockIdx.x; base < units; base += 2 * step, j += 2) { // the same turns in every warp
    issue(base + warp + step, b0, b1);
    unit(base + warp, j, a0, a1);
    issue(base + warp + 2 * step, a0, a1);
    unit(base + warp + step, j + 1, b0, b1);
  }
  // the tickets of the units this lane wrote (units first + i step, i = lane, lane + 32, ..)
  h3_fence_gpu(); // this lane's partials before its tickets
  for (long long i = lane; i < j; i += 32) {
    const long long u = first + i * step, p = u / C;
    if (u >= units) break;
    if (h3s_ticket(cnt + p) != (unsigned)(C - 1)) continue;
    h3_fence_gpu(); // the pair's other partials, after its last ticket
    cnt[p] = 0u;
    h3s_finish(part + 2 * p, N, C, bias, 2 * p, y, 2 * p);
    if (2 * p + 1 < N) h3s_finish(part + 2 * p + 1, N, C, bias, 2 * p + 1, y, 2 * p + 1);
  }
}
