// nvfp4_wgmma_lab.cu: the NVFP4 GEMM at 1-16 rows of x on the warpgroup MMA (wgmma), the
// weights dequantized into the A registers and x read by the tensor cores from shared memory,
// against cuBLAS bf16 and the product's skinny / row-pair forms in the same run (lab; not CI)
//   nvcc -std=c++17 -arch=sm_90a -O3 -I kernels -I include -I dev dev/nvfp4_wgmma_lab.cu -lcublas
//     -o build-gpu/lab/nvfp4_wgmma_lab
//   build-gpu/lab/nvfp4_wgmma_lab            (~1 minute; no arguments)
// Why (dev/nvfp4-gemm.md, session 40): at 8 and 16 rows the product's cost above its 1-row time
// is x: each warp loads its turn's x words into registers (L2 reads per weight byte grow with the
// rows; at 16 rows two n-tiles of x hold 64 registers and the weight ring shrinks to 2 units) and
// permutes them. wgmma takes B from shared memory: x is staged once per block and chunk (the
// block's 4 warps and R weight tiles share it), no x register lives in the loop, and N = 16
// costs the same instructions as N = 8.
// Kernel wgx<NX, R, NB, GW> (NX = 8 or 16: the wgmma's N, x rows M <= NX; R weight tiles of 64
// rows a block; NB weight units in the register ring; GW code words a commit group):
//   grid (ceil(N / 64 R), S), 128 threads (one warpgroup). Block (bx, s) owns weight rows
//   64 R bx .. and the contiguous chunks (256 k) s cps .. of its split. Warp w, lane (g, t):
//   tile r's rows 64 R bx + 64 r + 16 w + g and + 8, the lane's 64 consecutive k at 64 t of
//   each chunk (the product's order: h3n_skinny_w, h3n_a_word), so that word i of a chunk
//   gives the A fragments of k-steps 2 i and 2 i + 1 of m64nNXk16 (a warp's A rows are the
//   m16n8k16 A fragment's).
//   x: chunk i of the block in buffer i % 3 of dynamic shared memory (3 buffers of NX rows x
//   512 bytes, 1024-aligned), the B operand of the 16 k-steps: K-major, 128-byte swizzle
//   (column block s / 4 of NX rows x 128 bytes; row n's 16-byte chunk c at c ^ (n & 7); 8-row
//   atoms 1024 bytes apart), logical k l of step s holding x's physical k as the product's
//   h3n_b_word pairs them (l = 2t, 2t + 1: k0, k0 + 4; l = 8 + 2t, + 1: k0 + 1, k0 + 5 for step
//   2i; k0 + 2, + 6 and k0 + 3, + 7 for step 2i + 1; k0 = 64 t + 8 i). Thread (lane n = lane & 7
//   (+ 8 j), t = lane >> 3) of warp w loads x's 32 bytes of groups i = 2 w, 2 w + 1 (rows past M:
//   zeros) a chunk ahead into registers and stores their 8 pairs (bank-conflict free: (c ^ n),
//   t distinct over the warp) at the end of the chunk before; one barrier a chunk (buffer i % 3
//   was last read by chunk i - 3's wgmmas, retired before any warp passed chunk i - 1's end).
//   Per chunk and tile: the scales, then 8 / GW commit groups of 2 GW wgmmas m64nNXk16 (bf16,
//   fp32 accumulate), A from the registers just dequantized; wgmma.wait_group 1 before a group's
//   dequantization (two groups' A registers live). End: wait_group 0; D fragment
//   d[4 j + 2 h + q] = D[16 w + g + 8 h][8 j + 2 t + q]: weight row (y's column) and x row;
//   S = 1: y = d * g * 2^7; S > 1: partials, the column group's last block adds them in split
//   order (h3n_add_partials).
// Rows timed (2026-12-07, later; the first run, call 127 on an H100, timed wgx at GW 2 / 4, NB 3 /
// 4 and R 1 / 2 and kept wgx<NX,1,3,2>: dev/nvfp4-gemm.md): wgx<8,1,3,2>, wgx<16,1,3,2> and
// wgc<NX, C> (below: clusters of C = 2, 4 blocks sharing x's staging). Predicted (H100; x's L2
// reads at ~0.2 us per MB, divided by C; a cluster barrier a chunk ~free): 16 rows fc 47 ->
// ~41.5 (C 2) / ~38.5 (C 4) us, gate_up 55 -> ~47 / ~44; 8 rows fc 39 -> ~36.5 / ~35, gate_up
// 44 -> ~42 / ~41. Refuted if wgc<16,4> is not >= 10 % faster than wgx<16,1,3,2> at fc and
// gate_up (then the cluster barrier or the remote stores cost what the L2 reads saved).
#include <cublas_v2.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "lab_cublas.cuh"
#include "lab_cuda.cuh"
#include "lab_skinny.cuh" // read_words (and the prelude)

#undef O_T
#define H3_NVFP4_NAME lab_nv
#define O_T float
#include "nvfp4_gemm.cu"

// d += A B, m64nNk16, A (this thread's 4 bf16 pairs) from registers, B (N rows, K-major) in shared
// memory at descriptor b; acc 0: d = A B
template <int N> __device__ __forceinline__ void wgx_mma(float *d, const unsigned a[4], unsigned long long b, int acc);
template <> __device__ __forceinline__ void wgx_mma<8>(float *d, const unsigned a[4], unsigned long long b, int acc) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void wgx_mma<16>(float *d, const unsigned a[4], unsigned long long b, int acc) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, "
               "{%8, %9, %10, %11}, %12, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(acc));
}

static constexpr size_t wgx_smem(int NX) { return 1024 + 3 * (size_t)NX * 512; }

template <int NX, int R, int NB, int GW>
__global__ void __launch_bounds__(128, R == 1 ? 3 : 2)
    wgx(const h3_bf16 *__restrict__ x, const unsigned char *__restrict__ packed, const unsigned char *__restrict__ scale,
        const float *__restrict__ gp, float *__restrict__ y, float *__restrict__ part, unsigned *__restrict__ cnt,
        long long M, long long N, long long K) {
  static_assert(NX == 8 || NX == 16, "wgmma N");
  static_assert(8 % GW == 0, "groups of a tile's chunk");
  constexpr int TX = NX / 8, P = NB % R == 0 ? NB : NB * R; // x tasks a thread; units a round
  extern __shared__ unsigned char wgx_dyn[];
  unsigned char *xs = reinterpret_cast<unsigned char *>(((unsigned long long)wgx_dyn + 1023) & ~1023ull);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const long long n0 = (long long)blockIdx.x * 64 * R;
  const int nch = (int)(K / H3N_KC), cps = (nch + (int)gridDim.y - 1) / (int)gridDim.y;
  const int c0 = (int)blockIdx.y * cps, nc = c0 + cps < nch ? cps : nch - c0; // >= 1 (host's splits)
  // unit u = R i + r: tile r of the block's chunk i
  auto load_w = [&](h3n_w(&w)[2], int u) {
    const int r = u % R;
    const unsigned char *p[2], *q[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const long long nr = n0 + 64 * r + 16 * warp + 8 * h + g, n = nr < N ? nr : N - 1;
      p[h] = packed + n * (K / 2) + 32 * t;
      q[h] = scale + n * (K / 16) + 4 * t;
    }
    h3n_skinny_w(w, p, q, u / R < nc ? c0 + u / R : nch, nch, K);
  };
  // x's chunk c: this thread's 32 bytes of each of its rows (lane & 7) + 8 j, groups 2 w, 2 w + 1
  uint4 xr[TX][2];
  const int xn = lane & 7, xt = lane >> 3;
  auto load_x = [&](long long c) {
#pragma unroll
    for (int j = 0; j < TX; j++) {
      const long long m = xn + 8 * j;
      const uint4 *src = reinterpret_cast<const uint4 *>(x + m * K + c * H3N_KC + 64 * xt + 16 * warp);
      xr[j][0] = m < M ? __ldg(src) : uint4{0u, 0u, 0u, 0u};
      xr[j][1] = m < M ? __ldg(src + 1) : uint4{0u, 0u, 0u, 0u};
    }
  };
  auto store_x = [&](int b) {
    unsigned char *base = xs + (size_t)b * NX * 512;
#pragma unroll
    for (int j = 0; j < TX; j++) {
      const int n = xn + 8 * j;
#pragma unroll
      for (int e = 0; e < 2; e++) {
        const int i = 2 * warp + e; // the group: steps 2 i, 2 i + 1, column block i / 2
        unsigned char *row = base + (i >> 1) * NX * 128 + n * 128 + 4 * xt;
        const uint4 v = xr[j][e];
        const int ch = 4 * (i & 1);
        *reinterpret_cast<unsigned *>(row + (((ch + 0) ^ (n & 7)) << 4)) = h3n_prmt(v.x, v.z, 0x5410u);
        *reinterpret_cast<unsigned *>(row + (((ch + 1) ^ (n & 7)) << 4)) = h3n_prmt(v.x, v.z, 0x7632u);
        *reinterpret_cast<unsigned *>(row + (((ch + 2) ^ (n & 7)) << 4)) = h3n_prmt(v.y, v.w, 0x5410u);
        *reinterpret_cast<unsigned *>(row + (((ch + 3) ^ (n & 7)) << 4)) = h3n_prmt(v.y, v.w, 0x7632u);
      }
    }
    h3_fence_async_smem();
  };
  float acc[R][NX / 2];
#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int e = 0; e < NX / 2; e++) acc[r][e] = 0.0f;
  h3n_w w[NB][2];
#pragma unroll
  for (int d = 0; d < NB - 1; d++) load_w(w[d], d);
  load_x(c0);
  store_x(0);
  if (nc > 1) load_x(c0 + 1);
  __syncthreads();
  const unsigned xs0 = h3_smem_addr(xs);
  const int units = nc * R;
  for (int u0 = 0; u0 < units; u0 += P) // as often in every thread
#pragma unroll
    for (int k = 0; k < P; k++) {
      const int u = u0 + k, r = k % R, i = u / R;
      if (u >= units) break;
      load_w(w[(k + NB - 1) % NB], u + NB - 1);
      const h3n_w(&cur)[2] = w[k % NB];
      unsigned S[2][4];
#pragma unroll
      for (int h = 0; h < 2; h++) h3n_scales(cur[h].s, S[h]);
      const unsigned long long desc = h3_wg_desc(xs0 + (unsigned)(i % 3) * NX * 512, 16, 1024);
#pragma unroll
      for (int gi = 0; gi < 8 / GW; gi++) {
        unsigned a[GW][2][4];
        h3_wg_wait<1>(); // the group before the last retired: its A registers are free
#pragma unroll
        for (int e = 0; e < GW; e++) h3n_a_word(cur, S, GW * gi + e, a[e]);
        h3_wg_fence();
#pragma unroll
        for (int e = 0; e < GW; e++)
#pragma unroll
          for (int ks = 0; ks < 2; ks++) {
            const int s = 2 * (GW * gi + e) + ks; // the chunk's k-step
            wgx_mma<NX>(acc[r], a[e][ks], desc + (unsigned long long)(((s >> 2) * NX * 128 + (s & 3) * 32) >> 4), 1);
          }
        h3_wg_commit();
      }
      if (r == R - 1) { // the chunk's end: x of chunk i + 1 into its buffer, chunk i + 2 loaded
        if (i + 1 < nc) store_x((i + 1) % 3);
        if (i + 2 < nc) load_x(c0 + i + 2);
        __syncthreads();
      }
    }
  h3_wg_wait<0>();
#pragma unroll
  for (int r = 0; r < R; r++) h3_wg_hold<NX / 2>(acc[r]);
  const float gs = __fmul_rn(*gp, 128.0f); // g * 2^7: the products carry 2^-7
  const bool whole = gridDim.y == 1;
#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int e = 0; e < NX / 2; e++) {
      const long long n = n0 + 64 * r + 16 * warp + g + 8 * ((e >> 1) & 1);
      const long long m = 8 * (e >> 2) + 2 * t + (e & 1);
      if (m >= M || n >= N) continue;
      if (whole) y[m * N + n] = __fmul_rn(acc[r][e], gs);
      else part[(long long)blockIdx.y * M * N + m * N + n] = acc[r][e];
    }
  if (whole || !h3_last_block(cnt + blockIdx.x, gridDim.y)) return;
  h3n_add_partials<64 * R, 128>(y, part, M, N, 0, (int)M, n0, gridDim.y, gs);
}

// wgc<NX, C>: wgx<NX, 1, 3, 2> in clusters of C blocks on adjacent column groups (the same
// split, so the same chunks), sharing x: thread tid of block rank r takes tasks q = tid / C
// + j 128 / C (j < NX / 8) of the block's share (global task T = r 16 NX / C + q: row T / 16,
// quad xt = T / 4 % 4, 32-byte piece wq = T % 4, its groups i = 2 wq, 2 wq + 1), loads the
// piece (the C lanes of a task load the same 32 bytes in one request) and stores its 8 pairs
// into the buffer of cluster block tid % C (st.shared::cluster at mapa's address), so each x
// byte is read from L2 once a cluster instead of once a block. One cluster barrier a chunk in
// place of the block barrier (buffer i % 3 of every block was last read by chunk i - 3's
// wgmmas, retired before that block arrived at chunk i - 1's barrier), one before the first
// remote store. Columns past N (the grid's padding to a multiple of C) read row N - 1.
__device__ __forceinline__ void wgc_st_remote(unsigned local, unsigned rank, unsigned v) {
  asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\nst.shared::cluster.u32 [ra], %2;\n}\n"
               ::"r"(local), "r"(rank), "r"(v) : "memory");
}

template <int NX, int C>
__global__ void __launch_bounds__(128, 3)
    wgc(const h3_bf16 *__restrict__ x, const unsigned char *__restrict__ packed, const unsigned char *__restrict__ scale,
        const float *__restrict__ gp, float *__restrict__ y, float *__restrict__ part, unsigned *__restrict__ cnt,
        long long M, long long N, long long K) {
  constexpr int NB = 3, GW = 2, TX = NX / 8, SH = 128 / C; // threads a destination
  extern __shared__ unsigned char wgx_dyn[];
  unsigned char *xs = reinterpret_cast<unsigned char *>(((unsigned long long)wgx_dyn + 1023) & ~1023ull);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const unsigned rank = h3_cluster_rank();
  const long long n0 = (long long)blockIdx.x * 64;
  const int nch = (int)(K / H3N_KC), cps = (nch + (int)gridDim.y - 1) / (int)gridDim.y;
  const int c0 = (int)blockIdx.y * cps, nc = c0 + cps < nch ? cps : nch - c0;
  const unsigned char *p[2], *q[2];
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const long long nr = n0 + 16 * warp + 8 * h + g, n = nr < N ? nr : N - 1;
    p[h] = packed + n * (K / 2) + 32 * t;
    q[h] = scale + n * (K / 16) + 4 * t;
  }
  const unsigned dest = threadIdx.x % C, xs0 = h3_smem_addr(xs);
  uint4 xr[TX][2];
  auto task = [&](int j, int &n, int &xt, int &wq) {
    const int T = (int)rank * (16 * NX / C) + (int)threadIdx.x / C + j * SH;
    n = T / 16, xt = T / 4 % 4, wq = T % 4;
  };
  auto load_x = [&](long long c) {
#pragma unroll
    for (int j = 0; j < TX; j++) {
      int n, xt, wq;
      task(j, n, xt, wq);
      const uint4 *src = reinterpret_cast<const uint4 *>(x + (long long)n * K + c * H3N_KC + 64 * xt + 16 * wq);
      xr[j][0] = n < M ? __ldg(src) : uint4{0u, 0u, 0u, 0u};
      xr[j][1] = n < M ? __ldg(src + 1) : uint4{0u, 0u, 0u, 0u};
    }
  };
  auto store_x = [&](int b) {
    const unsigned base = xs0 + (unsigned)b * NX * 512;
#pragma unroll
    for (int j = 0; j < TX; j++) {
      int n, xt, wq;
      task(j, n, xt, wq);
#pragma unroll
      for (int e = 0; e < 2; e++) {
        const int i = 2 * wq + e, ch = 4 * (i & 1);
        const unsigned row = base + (unsigned)((i >> 1) * NX * 128 + n * 128 + 4 * xt);
        const uint4 v = xr[j][e];
        wgc_st_remote(row + (unsigned)(((ch + 0) ^ (n & 7)) << 4), dest, h3n_prmt(v.x, v.z, 0x5410u));
        wgc_st_remote(row + (unsigned)(((ch + 1) ^ (n & 7)) << 4), dest, h3n_prmt(v.x, v.z, 0x7632u));
        wgc_st_remote(row + (unsigned)(((ch + 2) ^ (n & 7)) << 4), dest, h3n_prmt(v.y, v.w, 0x5410u));
        wgc_st_remote(row + (unsigned)(((ch + 3) ^ (n & 7)) << 4), dest, h3n_prmt(v.y, v.w, 0x7632u));
      }
    }
    asm volatile("fence.proxy.async.shared::cluster;\n" ::: "memory");
  };
  float acc[NX / 2];
#pragma unroll
  for (int e = 0; e < NX / 2; e++) acc[e] = 0.0f;
  h3n_w w[NB][2];
#pragma unroll
  for (int d = 0; d < NB - 1; d++) h3n_skinny_w(w[d], p, q, d < nc ? c0 + d : nch, nch, K);
  load_x(c0);
  h3_cluster_sync(); // every block of the cluster running before the first remote store
  store_x(0);
  if (nc > 1) load_x(c0 + 1);
  h3_cluster_sync();
  for (int i0 = 0; i0 < nc; i0 += NB)
#pragma unroll
    for (int k = 0; k < NB; k++) {
      const int i = i0 + k;
      if (i >= nc) break;
      h3n_skinny_w(w[(k + NB - 1) % NB], p, q, i + NB - 1 < nc ? c0 + i + NB - 1 : nch, nch, K);
      const h3n_w(&cur)[2] = w[k % NB];
      unsigned S[2][4];
#pragma unroll
      for (int h = 0; h < 2; h++) h3n_scales(cur[h].s, S[h]);
      const unsigned long long desc = h3_wg_desc(xs0 + (unsigned)(i % 3) * NX * 512, 16, 1024);
#pragma unroll
      for (int gi = 0; gi < 8 / GW; gi++) {
        unsigned a[GW][2][4];
        h3_wg_wait<1>();
#pragma unroll
        for (int e = 0; e < GW; e++) h3n_a_word(cur, S, GW * gi + e, a[e]);
        h3_wg_fence();
#pragma unroll
        for (int e = 0; e < GW; e++)
#pragma unroll
          for (int ks = 0; ks < 2; ks++) {
            const int st = 2 * (GW * gi + e) + ks;
            wgx_mma<NX>(acc, a[e][ks], desc + (unsigned long long)(((st >> 2) * NX * 128 + (st & 3) * 32) >> 4), 1);
          }
        h3_wg_commit();
      }
      if (i + 1 < nc) store_x((i + 1) % 3);
      if (i + 2 < nc) load_x(c0 + i + 2);
      h3_cluster_sync();
    }
  h3_wg_wait<0>();
  h3_wg_hold<NX / 2>(acc);
  const float gs = __fmul_rn(*gp, 128.0f);
  const bool whole = gridDim.y == 1;
#pragma unroll
  for (int e = 0; e < NX / 2; e++) {
    const long long n = n0 + 16 * warp + g + 8 * ((e >> 1) & 1), m = 8 * (e >> 2) + 2 * t + (e & 1);
    if (m >= M || n >= N) continue;
    if (whole) y[m * N + n] = __fmul_rn(acc[e], gs);
    else part[(long long)blockIdx.y * M * N + m * N + n] = acc[e];
  }
  if (whole || !h3_last_block(cnt + blockIdx.x, gridDim.y)) return;
  h3n_add_partials<64, 128>(y, part, M, N, 0, (int)M, n0, gridDim.y, gs);
}

typedef __nv_bfloat16 bf16;
typedef void (*wgx_fn)(const h3_bf16 *, const unsigned char *, const unsigned char *, const float *, float *, float *,
                       unsigned *, long long, long long, long long);
struct wgx_kind {
  const char *tag;
  wgx_fn kern;
  int NX, R, occ;
  size_t smem;
  int C; // blocks a cluster (wgc), 1 for wgx
};

// the K split of the wgx grid: the fewest waves of `slots` blocks times chunks a split (ties: fewer
// splits); every split non-empty
static long long wgx_splits(long long cols, long long nch, long long slots) {
  long long best = 1, cost = -1;
  for (long long S = 1; S <= 16 && S <= nch; S++) {
    const long long cps = (nch + S - 1) / S;
    if ((S - 1) * cps >= nch) continue;
    const long long c = (cols * S + slots - 1) / slots * cps;
    if (cost < 0 || c < cost) cost = c, best = S;
  }
  return best;
}
// the product's row-pair split (runtime/cuda/cuda_nvfp4.c's cu_nvfp4_rows_splits, mirrored)
static long long rows_splits(long long N, long long K) {
  const long long nch = K / H3N_KC, cols = (N + 31) / 32;
  long long best = 1, cost = -1;
  for (long long S = 1; S <= 16 && S <= (nch + 3) / 4; S++) {
    const long long c = (cols * S + 395) / 396 * ((nch + 4 * S - 1) / (4 * S));
    if (cost < 0 || c < cost) cost = c, best = S;
  }
  return best;
}

// random codes (every byte) and scales (e4m3 magnitudes 0x30-0x4f: 0.5-7.5, both signs)
__global__ void fill_nvfp4(unsigned char *pk, long long np, unsigned char *sc, long long ns, unsigned seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < np; i += (long long)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
    pk[i] = (unsigned char)h;
    if (i < ns) sc[i] = (unsigned char)(0x30 + (h >> 8) % 0x20) | (unsigned char)(h >> 16 & 0x80);
  }
}

struct shape {
  const char *name;
  long long N, K;
};
struct bufs {
  unsigned char *pk, *sc;
  bf16 *wb;
};
static int iters_of(double bytes) { return (int)std::fmin(80.0, std::fmax(40.0, 4e9 / bytes)); }

int main() {
  const shape shapes[] = {{"fc", 6144, 18432}, {"o_proj", 6144, 8192}, {"gate_up", 24576, 6144}, {"down", 6144, 12288}};
  const long long rows[] = {1, 8, 16};
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  wgx_kind kinds[] = {{"wgx<8,1,3,2>", wgx<8, 1, 3, 2>, 8, 1, 0, wgx_smem(8), 1},
                      {"wgx<16,1,3,2>", wgx<16, 1, 3, 2>, 16, 1, 0, wgx_smem(16), 1},
                      {"wgc<8,2>", wgc<8, 2>, 8, 1, 0, wgx_smem(8), 2},
                      {"wgc<8,4>", wgc<8, 4>, 8, 1, 0, wgx_smem(8), 4},
                      {"wgc<16,2>", wgc<16, 2>, 16, 1, 0, wgx_smem(16), 2},
                      {"wgc<16,4>", wgc<16, 4>, 16, 1, 0, wgx_smem(16), 4}};
  printf("device: %d SMs; blocks an SM:", sms);
  for (wgx_kind &k : kinds) {
    CK(cudaFuncSetAttribute(k.kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)k.smem));
    if (k.C > 1) CK(cudaFuncSetAttribute(k.kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&k.occ, k.kern, 128, k.smem));
    printf(" %s %d", k.tag, k.occ);
  }
  printf("\n");
  cublasHandle_t h;
  CB(cublasCreate(&h));
  float *gp;
  unsigned *sink;
  const float one = 1.0f, zero = 0.0f;
  CK(cudaMalloc(&gp, 4));
  CK(cudaMalloc(&sink, 4));
  CK(cudaMemcpy(gp, &one, 4, cudaMemcpyHostToDevice));
  int failed = 0;
  for (const shape &sh : shapes) {
    const long long N = sh.N, K = sh.K, np = N * K / 2, ns = N * K / 16, nch = K / H3N_KC;
    const double qbytes = (double)(np + ns), bbytes = (double)(N * K) * 2;
    const int copies = (int)((400ll << 20) / (long long)qbytes + 2), bcopies = (int)((400ll << 20) / (long long)bbytes + 2);
    std::vector<bufs> w(copies);
    for (int c = 0; c < copies; c++) {
      CK(cudaMalloc(&w[c].pk, np));
      CK(cudaMalloc(&w[c].sc, ns));
      fill_nvfp4<<<1024, 256>>>(w[c].pk, np, w[c].sc, ns, 31u * c + 7u);
      w[c].wb = nullptr;
      if (c < bcopies) {
        CK(cudaMalloc(&w[c].wb, N * K * 2));
        lab_nv_dq<<<(unsigned)((N * (K / 8) + 255) / 256), 256>>>(w[c].pk, w[c].sc, w[c].wb, N, K);
      }
    }
    CK(cudaDeviceSynchronize());
    const int it = iters_of(qbytes), bit = iters_of(bbytes);
    const double floor_us = 1e3 * mean_ms([&](int i) {
      read_words<<<sms * 8, 256>>>(reinterpret_cast<const uint4 *>(w[i % copies].pk), np / 16, sink);
    }, it / 8 + 1, it);
    printf("\n%s: N %lld K %lld, %.1f MB packed; plain read of the codes %.2f us\n", sh.name, N, K, qbytes / 1e6, floor_us);
    for (long long M : rows) {
      bf16 *x;
      float *y, *yref, *part;
      unsigned *cnt;
      CK(cudaMalloc(&x, M * K * 2));
      fill_bf16<<<256, 256>>>(x, M * K, 99u);
      CK(cudaMalloc(&y, M * N * 4));
      CK(cudaMalloc(&yref, M * N * 4));
      CK(cudaMalloc(&part, 16 * M * N * 4));
      CK(cudaMalloc(&cnt, (N / 32 + 1) * 4));
      CK(cudaMemset(cnt, 0, (N / 32 + 1) * 4));
      auto gemm = [&](int i, float *out) { // y^T [N, M] = W x^T: y [M, N] row-major
        CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, w[i % bcopies].wb, CUDA_R_16BF,
                        (int)K, x, CUDA_R_16BF, (int)K, &zero, out, CUDA_R_32F, (int)N, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
      };
      const double cublas_us = 1e3 * mean_ms([&](int i) { gemm(i, yref); }, bit / 8 + 1, bit);
      gemm(0, yref);
      std::vector<float> ref((size_t)(M * N)), got((size_t)(M * N));
      CK(cudaMemcpy(ref.data(), yref, M * N * 4, cudaMemcpyDeviceToHost));
      printf("  M %lld: cublas bf16 %8.2f us\n", M, cublas_us);
      auto measure = [&](const char *tag, auto launch) {
        const double us = 1e3 * mean_ms([&](int i) { launch(w[i % copies]); }, it / 8 + 1, it);
        CK(cudaMemset(y, 0xff, M * N * 4));
        launch(w[0]);
        CK(cudaMemcpy(got.data(), y, M * N * 4, cudaMemcpyDeviceToHost));
        const double rel = rel_diff(got, ref);
        failed += rel >= 1e-3;
        printf("    %-22s %8.2f us  %5.2f x cublas  %5.3f x plain  rel %.1e%s\n", tag, us, cublas_us / us, floor_us / us,
               rel, rel < 1e-3 ? "" : "  FAIL");
        if (rel >= 1e-3) { // where: the first mismatches (m, n) and their values, to tell a layout slip
          int shown = 0;
          for (long long e = 0; e < M * N && shown < 6; e++)
            if (!(std::fabs(got[e] - ref[e]) <= 1e-3 * std::fabs(ref[e]) + 1e-4))
              printf("      y[%lld, %lld] %.6g, cuBLAS %.6g\n", e / N, e % N, got[e], ref[e]), shown++;
        }
      };
      if (M <= 4) {
        measure("product _sk", [&](const bufs &b) {
          lab_nv_sk<<<(unsigned)((N + 15) / 16), 128>>>(x, b.pk, b.sc, gp, y, M, N, K);
        });
      } else {
        const long long S = rows_splits(N, K);
        char tag[32];
        snprintf(tag, sizeof tag, "product %s S%lld", M <= 8 ? "_sx" : "_sx16", S);
        measure(tag, [&](const bufs &b) {
          const dim3 grid((unsigned)((N + 31) / 32), (unsigned)S);
          if (M <= 8) lab_nv_sx<<<grid, 128>>>(x, b.pk, b.sc, gp, y, part, cnt, M, N, K);
          else lab_nv_sx16<<<grid, 128>>>(x, b.pk, b.sc, gp, y, part, cnt, M, N, K);
        });
      }
      for (const wgx_kind &k : kinds) {
        if (M > k.NX || (M <= 8 && k.NX == 16)) continue;
        const long long cols = ((N + 64 * k.R - 1) / (64 * k.R) + k.C - 1) / k.C * k.C; // whole clusters
        const long long S = wgx_splits(cols, nch, (long long)k.occ * sms);
        char tag[40];
        snprintf(tag, sizeof tag, "%s S%lld", k.tag, S);
        measure(tag, [&](const bufs &b) {
          cudaLaunchConfig_t cfg = {};
          cfg.gridDim = dim3((unsigned)cols, (unsigned)S);
          cfg.blockDim = dim3(128);
          cfg.dynamicSmemBytes = k.smem;
          cudaLaunchAttribute at[1];
          at[0].id = cudaLaunchAttributeClusterDimension;
          at[0].val.clusterDim.x = (unsigned)k.C, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
          cfg.attrs = at, cfg.numAttrs = 1;
          CK(cudaLaunchKernelEx(&cfg, k.kern, x, b.pk, b.sc, (const float *)gp, y, part, cnt, M, N, K));
        });
      }
      CK(cudaFree(x));
      CK(cudaFree(y));
      CK(cudaFree(yref));
      CK(cudaFree(part));
      CK(cudaFree(cnt));
    }
    for (bufs &b : w) {
      CK(cudaFree(b.pk));
      CK(cudaFree(b.sc));
      if (b.wb) CK(cudaFree(b.wb));
    }
  }
  CB(cublasDestroy(h));
  printf("\n%s\n", failed ? "SOME ROWS FAILED" : "every row within 1e-3 of cuBLAS");
  return failed != 0;
}
