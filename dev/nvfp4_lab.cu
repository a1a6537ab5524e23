// nvfp4_lab.cu: the NVFP4 skinny form (kernels/nvfp4_gemm.cu's _sk, 1-8 rows) against variants
// of its loop built from its own helpers (lab; not CI)
//   nvcc -std=c++17 -arch=sm_90a -O3 -I kernels -I include -I dev dev/nvfp4_lab.cu -lcublas
//     -o build-gpu/lab/nvfp4_lab
//   build-gpu/lab/nvfp4_lab            (~2 minutes on an H100; no arguments)
// The skr and skx kernels run on the host too: dev/nvfp4_skr_emu.cpp (build line in its header).
// The product's loop (since 2026-12-06): per lane the weights two turns ahead in a ring of 3,
// x one turn ahead in a ring of 2, unrolled by 6, one accumulator chain (3 blocks an SM; the
// former skv<1,1>, 3-15 % faster at M = 1 than x loaded in its turn: dev/nvfp4-gemm.md,
// 2026-12-06, raw log dev/results/2026-12-06-h100-s25-sage-128key-ab-nvfp4-lab.txt). Rows of the
// tables, per weight shape and M = 1, 8, 16:
//   tiled _m1: the product's tiled kernel in its launch shape (mirrored), its form at 9-16 rows;
//   product _sk (M <= 8); skv16 (M = 16): the skinny loop over two n-tiles of x, x in its turn;
//   skr<4,4> (M <= 8): 4 weight tiles a warp, x through cp.async into shared memory (the one
//   skr row kept: measured 2026-12-06, dev/results/2026-12-06-h100-s25-call58-sage-n128-nvfp4-
//   xahead-skr-lab.txt, the shared-memory x path lost to the product's everywhere);
//   skx<R,NB,XB> (M <= 8) and skx16<R,NB,XB> (M = 16, two n-tiles), 2026-12-06 later: R weight
//   tiles a warp on the product's own x path (the turn's x words in registers, permuted by tile
//   0 and read by all R tiles, so x's L2 reads are 1 / R of the product's), weights in a ring
//   of NB units (tile r of turn i: unit R i + r), x in a ring of XB turns (2: the next turn's
//   loaded at its tile R - 1, one unit ahead as in the product; 1: loaded at the turn's first
//   unit). Tag "S<n>": the K split (S1: the product's sums, bitwise; else skr_splits' S, fewest
//   waves x units a warp at the occupancy printed at the top; the last block adds the partials).
//   skx<1,3,2>: R = 1 on skx's skeleton, the product's loop (its control).
// Prediction (written 2026-12-06 before any run; dev/nvfp4-gemm.md, session 25 later, has the
// arithmetic): the product's M = 8 times less 0.15 us per MB of x's L2 reads give the
// weights-only t_w (fc 28.9, o_proj 14.9, gate_up 37.9, down 20.8 us); R = 2 halves x's MB
// (113 / 50 / 151 / 75 at R = 1, M = 8); the K split S = 2 (fc, o_proj, down) adds ~1 us; x in
// its turn (XB = 1) half the product's measured cost of it (one exposure a turn of 2 units).
// us (x cuBLAS bf16), skx<2,3,1> at skr_splits' S:
//   shape    M  product _sk / tiled   skx<2,3,1> (XB 1)     skx<2,2,2> (XB 2)   skx16<2,2,1>
//   fc       1  29.5                  31.9                  29.4
//   fc       8  45.9                  38.6 (2.10 x)         38.4
//   fc      16  65.4 (tiled)                                                   58.5 (1.40 x)
//   o_proj   1  15.7                  17.5                  16.3
//   o_proj   8  22.4                  20.0 (1.94 x)         19.7
//   o_proj  16  35.8 (skv16)                                                   29.2 (1.35 x)
//   gate_up  1  40.0                  39.3                  38.6
//   gate_up  8  60.5                  49.7 (2.09 x)         49.2
//   gate_up 16  81.5 (tiled)                                                   79.4 (1.32 x)
//   down     1  21.4                  23.3                  21.7
//   down     8  32.1                  27.9 (2.01 x)         27.5
//   down    16  41.8 (tiled)                                                   41.1 (1.39 x)
// S1 rows at fc, o_proj, down (192 blocks on 132 SMs: 60 % of 3-an-SM slots empty) >= 15 %
// slower than S2. skx<1,3,2> S1 within 3 % of the product (else read the skx rows against it).
// Refuted if skx<2,3,1> at M = 8 is not >= 10 % faster than the product at fc and gate_up.
// Even if right, 2.5 x at M = 8 is not reached (2.0-2.1 x): see the notebook.
// Against: a plain read of the same packed bytes (the floor) and cuBLAS's bf16 GEMM over the
// dequantized weight (the product's _dq kernel, exact). Every case rotates over weight copies of
// >= 400 MB (the L2 holds none of what a launch reads, as inside a model); times are means of
// ~40-80 launches after warm-ups. Checks: each result against cuBLAS's (max |diff| / max |y| <
// 1e-3: fp32 sum orders differ; "FAIL" past it), skr and skx at S = 1 bitwise against the
// product (M <= 8) or skv16 (M = 16: the same sums); y set to NaN before each checked launch. The plain read covers the
// codes, not the scales (1/8 more bytes): "x plain" is ~11 % optimistic.
#ifndef NVFP4_LAB_EMU // else dev/nvfp4_skr_emu.cpp takes the kernels alone (after its own prelude)
#include <cublas_v2.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "lab_cublas.cuh"
#include "lab_cuda.cuh"
#include "lab_skinny.cuh" // read_words (and the prelude)

#undef O_T
#endif
#define H3_NVFP4_NAME lab_nv
#define O_T float
#include "nvfp4_gemm.cu"

// y[M, N] f32 = the skinny form's contract (x [M, K] bf16, M <= 8 NT; codes and scales of W
// [N, K]; K a multiple of 256): grid ceil(N / 16), 128 threads. NA accumulator chains; XPF: x
// one turn ahead (a ring of 2; else loaded in its turn); NT n-tiles of x's rows (lane row 8 j +
// g of tile j). skv<1, true> is the product's loop.
template <int NA, bool XPF, int NT = 1>
__global__ void __launch_bounds__(32 * H3NS_WARPS, XPF || NT > 1 ? 3 : 4)
    skv(const h3_bf16 *__restrict__ x, const unsigned char *__restrict__ packed, const unsigned char *__restrict__ scale,
        const float *__restrict__ gp, float *__restrict__ y, long long M, long long N, long long K) {
  static_assert(NT == 1 || !XPF, "x one turn ahead for one n-tile only");
  __shared__ float red[H3NS_WARPS][16][8 * NT];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const long long n0 = (long long)blockIdx.x * 16, nch = K / H3N_KC;
  const unsigned char *p[2], *q[2];
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const long long n = n0 + g + 8 * h < N ? n0 + g + 8 * h : N - 1;
    p[h] = packed + n * (K / 2) + 32 * t;
    q[h] = scale + n * (K / 16) + 4 * t;
  }
  const h3_bf16 *xr[NT]; // the lane's x rows (NULL: past M)
#pragma unroll
  for (int j = 0; j < NT; j++) xr[j] = 8 * j + g < M ? x + (long long)(8 * j + g) * K + 64 * t : nullptr;
  float acc[NA][NT][4];
#pragma unroll
  for (int a = 0; a < NA; a++)
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) acc[a][j][e] = 0.0f;
  auto loadx = [&](uint4(&xv)[NT][8], long long c) {
#pragma unroll
    for (int j = 0; j < NT; j++) h3n_x_words(xv[j], xr[j], c, nch);
  };
  constexpr int XB = XPF ? 2 : 1;
  h3n_w w[3][2];
  uint4 xb[XB][NT][8];
  h3n_skinny_w(w[0], p, q, warp, nch, K);
  h3n_skinny_w(w[1], p, q, warp + H3NS_WARPS, nch, K);
  if (XPF) loadx(xb[0], warp);
  const long long turns = (nch + H3NS_WARPS - 1) / H3NS_WARPS;
  auto turn = [&](long long it, const h3n_w(&cur)[2], h3n_w(&far)[2], uint4(&xc)[NT][8], uint4(&xn)[NT][8]) {
    const long long c = warp + it * H3NS_WARPS;
    h3n_skinny_w(far, p, q, c + 2 * H3NS_WARPS, nch, K);
    if (XPF) loadx(xn, c + H3NS_WARPS);
    else loadx(xc, c);
    h3n_skinny_turn<NT>(acc[0], acc[NA - 1], cur, xc);
  };
  for (long long it = 0; it < turns; it += 6)
#pragma unroll
    for (int u = 0; u < 6; u++)
      if (it + u < turns) turn(it + u, w[u % 3], w[(u + 2) % 3], xb[u % XB], xb[(u + 1) % XB]);
#pragma unroll
  for (int j = 0; j < NT; j++)
#pragma unroll
    for (int e = 0; e < 4; e++)
      red[warp][g + 8 * (e >> 1)][8 * j + 2 * t + (e & 1)] =
          NA == 2 ? __fadd_rn(acc[0][j][e], acc[NA - 1][j][e]) : acc[0][j][e];
  __syncthreads();
  const float gs = __fmul_rn(*gp, 128.0f);
  for (int i = threadIdx.x; i < 16 * 8 * NT; i += 32 * H3NS_WARPS) {
    const int r = i / (8 * NT), m = i % (8 * NT);
    if (m >= M || n0 + r >= N) continue;
    float sum = red[0][r][m];
#pragma unroll
    for (int v = 1; v < H3NS_WARPS; v++) sum = __fadd_rn(sum, red[v][r][m]);
    y[(long long)m * N + n0 + r] = __fmul_rn(sum, gs);
  }
}

// ---- skr: R weight tiles a warp, x one turn ahead through shared memory -----------------------
// y[M, N] f32 = the skinny form's contract (x [M, K] bf16, M <= 8 NT; K a multiple of 256;
// x, codes 16-byte aligned, scales 4-byte): grid (ceil(N / (16 R)), S), 128 threads, dynamic
// shared memory skr_smem(NT); S > 1: part [S, M, N] f32 scratch and cnt [gridDim.x] u32 (0
// before the launch and again after it). Block (bx, s) owns the weight rows 16 R bx .. + 16 R
// (R m16n8k16 A tiles: tile r's rows 16 R bx + 16 r + g, + 8 for lane (g, t)); its warp w is
// warp v = 4 s + w of the column group's 4 S and takes the chunks v, v + 4 S, ... (S = 1: the
// product's chunks, warp for warp). A warp's work is a stream of units (turn i, tile r), tile
// by tile inside a turn: unit u = R i + r. Per lane:
// - weights: a ring of NB units of h3n_w[2] in registers, unit u + NB - 1 loaded in unit u (the
//   loop unrolled by lcm(NB, R) units, so that every slot is a register and every tile's
//   accumulator a compile-time index);
// - x: the turn's 8 NT words (its rows 8 j + g, its 64 k at 64 t: the product's h3n_x_words)
//   copied by cp.async one turn ahead into a ring of 2 stages in shared memory that only this
//   lane reads (no barrier, no registers held while in flight; rows past M and chunks past the
//   last are stored zeros), rewritten in place into the mma's b pairs (h3n_b_word) once a turn
//   and then read by all R tiles: x's L2 reads per weight byte are 1/R of the product's;
// - products: h3n_a_word of the tile's unit against the turn's b words, one accumulator chain a
//   tile and n-tile (the product's order: S = 1 gives its sums bit for bit).
// The 4 warps' sums meet in shared memory (aliasing the x stages) and are added in warp order;
// S > 1: into part[s], then the column group's last block adds them in split order
// (h3n_add_partials). Every warp runs ceil(chunks / 4 S) turns (past its chunks: zeros).
#ifndef SKR_NOTE
#define SKR_NOTE(what, i) // host emulation: counts the stores (dev/nvfp4_skr_emu.cpp)
#endif
__host__ __device__ constexpr int skr_gcd(int a, int b) { return b ? skr_gcd(b, a % b) : a; }
// the x stages' bytes: [warp][stage][n-tile][word][lane] 16-byte words
static inline size_t skr_smem(int NT) { return (size_t)H3NS_WARPS * 2 * NT * 8 * 32 * 16; }

// a 16-byte word of shared memory, read where it stands in the program (volatile: not hoisted
// above the mma before it, so that a unit holds one x word an n-tile, not eight; after every
// earlier store: the in-place permute)
__device__ __forceinline__ uint4 skr_lds(const uint4 *p) {
#ifdef __CUDA_ARCH__
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"((unsigned)__cvta_generic_to_shared(p))
               : "memory");
  return v;
#else
  return *p;
#endif
}

template <int R, int NT, int NB>
__global__ void __launch_bounds__(32 * H3NS_WARPS, 3)
    skr(const h3_bf16 *__restrict__ x, const unsigned char *__restrict__ packed, const unsigned char *__restrict__ scale,
        const float *__restrict__ gp, float *__restrict__ y, float *__restrict__ part, unsigned *__restrict__ cnt,
        long long M, long long N, long long K) {
  static_assert(NB >= 2 && (R & (R - 1)) == 0, "a ring of 2 or more; R a power of 2");
  constexpr int P = NB / skr_gcd(NB, R) * R; // units a round of the unrolled loop
  H3_DYN_SMEM(uint4, xs);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const long long n0 = (long long)blockIdx.x * 16 * R;
  const int nch = (int)(K / H3N_KC), step = (int)gridDim.y * H3NS_WARPS, c0 = (int)blockIdx.y * H3NS_WARPS + warp;
  const int turns = (nch + step - 1) / step, units = turns * R;
  uint4 *xl = xs + warp * (2 * NT * 8 * 32) + lane; // the lane's word (stage st, n-tile j, word i): [((st NT + j) 8 + i) 32]
  const h3_bf16 *xr[NT]; // the lane's x rows at its first k (NULL: past M)
#pragma unroll
  for (int j = 0; j < NT; j++) xr[j] = 8 * j + g < M ? x + (long long)(8 * j + g) * K + 64 * t : nullptr;
  // x's chunk of turn i into stage i & 1: cp.async, or zeros (a row past M, a chunk past the last)
  auto stage_x = [&](int i) {
    const int c = c0 + i * step;
    uint4 *d = xl + (int)(i & 1) * (NT * 8 * 32);
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
      for (int k = 0; k < 8; k++) {
        if (xr[j] && c < nch) h3_cp16(d + (j * 8 + k) * 32, xr[j] + (long long)c * H3N_KC + 8 * k);
        else d[(j * 8 + k) * 32] = uint4{0u, 0u, 0u, 0u};
      }
    h3_cp_commit();
  };
  // unit u's weights (tile r = u % R of turn u / R; zeros past the last chunk): rows past N read
  // row N - 1, whose products land in rows never stored (p0, q0: the lane's row n0 + g)
  const long long n0g = n0 + g < N ? n0 + g : N - 1;
  const unsigned char *p0 = packed + n0g * (K / 2) + 32 * t, *q0 = scale + n0g * (K / 16) + 4 * t;
  const int kp = (int)(K / 2), kq = (int)(K / 16); // a row's bytes of codes, of scales
  auto load_w = [&](h3n_w(&w)[2], int u, int r) {
    const unsigned char *p[2], *q[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int d = n0 + 16 * r + 8 * h + g < N ? 16 * r + 8 * h : (int)(N - 1 - n0g); // rows past p0's
      p[h] = p0 + d * kp;
      q[h] = q0 + d * kq;
    }
    h3n_skinny_w(w, p, q, c0 + u / R * step, nch, K);
  };
  float acc[R][NT][4];
#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) acc[r][j][e] = 0.0f;
  h3n_w w[NB][2];
  stage_x(0);
#pragma unroll
  for (int d = 0; d < NB - 1; d++) load_w(w[d], d, d % R);
  for (int u0 = 0; u0 < units; u0 += P) // units and P multiples of R: unit u0 + k is tile k % R
#pragma unroll
    for (int k = 0; k < P; k++) {
      const int u = u0 + k;
      if (u >= units) break;
      const int r = k % R, st = (int)(u / R & 1);
      if (r == 0) { // a turn begins: its x (copied a turn ago) as b pairs; the next turn's copy issued
        const int i = u / R;
        h3_cp_wait();
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
          for (int k2 = 0; k2 < 8; k2++) {
            uint4 *a = xl + ((st * NT + j) * 8 + k2) * 32;
            unsigned b[2][2];
            h3n_b_word(*a, b);
            *a = uint4{b[0][0], b[0][1], b[1][0], b[1][1]};
          }
        if (i + 1 < turns) stage_x(i + 1);
      }
      load_w(w[(k + NB - 1) % NB], u + NB - 1, (k + NB - 1) % R);
      const h3n_w(&cur)[2] = w[k % NB];
      unsigned S[2][4];
#pragma unroll
      for (int h = 0; h < 2; h++) h3n_scales(cur[h].s, S[h]);
#pragma unroll
      for (int k2 = 0; k2 < 8; k2++) {
        uint4 v[NT]; // the turn's word k2 as b pairs: (k-step 0: x, y), (k-step 1: z, w)
#pragma unroll
        for (int j = 0; j < NT; j++) v[j] = skr_lds(xl + ((st * NT + j) * 8 + k2) * 32);
        unsigned a[2][4];
        h3n_a_word(cur, S, k2, a);
#pragma unroll
        for (int j = 0; j < NT; j++) {
          const unsigned b0[2] = {v[j].x, v[j].y}, b1[2] = {v[j].z, v[j].w};
          h3_mma_bf16(acc[r][j], a[0], b0);
          h3_mma_bf16(acc[r][j], a[1], b1);
        }
      }
    }
  __syncthreads(); // every warp done with its stages (nothing in flight: the last turn copied none)
  float *red = reinterpret_cast<float *>(xs); // [warp][16 R weight rows][8 NT x rows]
#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
      for (int e = 0; e < 4; e++)
        red[(warp * 16 * R + 16 * r + g + 8 * (e >> 1)) * 8 * NT + 8 * j + 2 * t + (e & 1)] = acc[r][j][e];
  __syncthreads();
  const float gs = __fmul_rn(*gp, 128.0f); // g * 2^7: the products carry 2^-7
  const bool whole = gridDim.y == 1;
  for (int i = threadIdx.x; i < 16 * R * 8 * NT; i += 32 * H3NS_WARPS) {
    const int rr = i / (8 * NT), m = i % (8 * NT);
    if (m >= M || n0 + rr >= N) continue;
    float sum = red[rr * 8 * NT + m];
#pragma unroll
    for (int v = 1; v < H3NS_WARPS; v++) sum = __fadd_rn(sum, red[(v * 16 * R + rr) * 8 * NT + m]);
    const long long o = (long long)m * N + n0 + rr;
    if (whole) {
      SKR_NOTE(0, o);
      y[o] = __fmul_rn(sum, gs);
    } else {
      SKR_NOTE(1, (long long)blockIdx.y * M * N + o);
      part[(long long)blockIdx.y * M * N + o] = sum;
    }
  }
  if (whole || !h3_last_block(cnt + blockIdx.x, gridDim.y)) return;
  h3n_add_partials<16 * R, 32 * H3NS_WARPS>(y, part, M, N, 0, (int)M, n0, gridDim.y, gs);
}

// skr's K splits: the S of at most 16 (and at most ceil(chunks / 4)) that minimises waves of
// `slots` blocks times units a warp (R ceil(chunks / 4 S)); the smallest S of the ties
static long long skr_splits(int R, long long N, long long K, long long slots) {
  const long long nch = K / H3N_KC, cols = (N + 16 * R - 1) / (16 * R);
  long long best = 1, cost = -1;
  for (long long S = 1; S <= 16 && S <= (nch + H3NS_WARPS - 1) / H3NS_WARPS; S++) {
    const long long c = ((cols * S + slots - 1) / slots) * R * ((nch + H3NS_WARPS * S - 1) / (H3NS_WARPS * S));
    if (cost < 0 || c < cost) cost = c, best = S;
  }
  return best;
}

// ---- skx: R weight tiles a warp on the product's own x path (2026-12-06, session 25, later) -----
// skr's R row tiles without skr's shared-memory x: y[M, N] f32 = the skinny form's contract (x
// [M, K] bf16, M <= 8 NT; K a multiple of 256; x, codes 16-byte aligned, scales 4-byte): grid
// (ceil(N / (16 R)), S), 128 threads, no dynamic shared memory; S > 1: part [S, M, N] f32 and
// cnt [gridDim.x] u32 (0 before the launch and again after it), as skr. Block (bx, s) owns the
// weight rows 16 R bx .. + 16 R (tile r: rows 16 R bx + 16 r + g, + 8 for lane (g, t)); its warp
// w is warp v = 4 s + w of the column group and takes the chunks v, v + 4 S, ... (S = 1: the
// product's chunks, warp for warp). A warp's work is a stream of units u = R i + r (turn i,
// tile r). Per lane:
// - x: the turn's 8 NT words in registers (the product's h3n_x_words: rows 8 j + g, 64 k at
//   64 t), XB = 2: a ring of 2 turns, the next turn's loaded at this turn's last unit (one unit
//   ahead, the product's lead in time; from the turn's first unit ptxas spilled more), XB = 1:
//   loaded at the turn's first unit; tile 0 rewrites each word into the mma's b pairs where it uses it
//   (h3n_b_word, in place) and the other R - 1 tiles read the pairs: x's L2 reads per weight
//   byte are 1 / R of the product's, and its permutes too;
// - weights: a ring of NB units of h3n_w[2] in registers, unit u + NB - 1 loaded at unit u (NB =
//   3, R = 2: both tiles of the next turn in flight, the product's bytes in flight a lane); the
//   loop unrolled by lcm(NB, R XB) units so that every slot and accumulator is a register;
// - products: h3n_a_word of the unit's tile against the turn's b pairs, one accumulator chain
//   a tile and n-tile, in the product's order (S = 1, NT = 1: the product's sums bit for bit;
//   NT = 2: skv16's).
// The 4 warps' sums meet in shared memory and are added in warp order; S > 1: into part[s],
// then the column group's last block adds them in split order (h3n_add_partials). Every warp
// runs ceil(chunks / 4 S) turns (past its chunks: zeros). OCC: the launch bounds' blocks an SM
// (3: 168 registers, the product's bound; ptxas -v of each instance in dev/nvfp4-gemm.md).
template <int R, int NT, int NB, int XB, int OCC = 3>
__global__ void __launch_bounds__(32 * H3NS_WARPS, OCC)
    skx(const h3_bf16 *__restrict__ x, const unsigned char *__restrict__ packed, const unsigned char *__restrict__ scale,
        const float *__restrict__ gp, float *__restrict__ y, float *__restrict__ part, unsigned *__restrict__ cnt,
        long long M, long long N, long long K) {
  static_assert(NB >= 2 && (XB == 1 || XB == 2), "a weight ring of 2 or more units; x's ring 1 or 2 turns");
  constexpr int RX = R * XB, P = NB / skr_gcd(NB, RX) * RX; // units a round of the unrolled loop
  __shared__ float red[H3NS_WARPS][16 * R][8 * NT];       // [warp][weight row][x row]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const long long n0 = (long long)blockIdx.x * 16 * R;
  const int nch = (int)(K / H3N_KC), step = (int)gridDim.y * H3NS_WARPS, c0 = (int)blockIdx.y * H3NS_WARPS + warp;
  const int turns = (nch + step - 1) / step, units = turns * R;
  const h3_bf16 *xr[NT]; // the lane's x rows at its first k (NULL: past M)
#pragma unroll
  for (int j = 0; j < NT; j++) xr[j] = 8 * j + g < M ? x + (long long)(8 * j + g) * K + 64 * t : nullptr;
  auto load_x = [&](uint4(&xv)[NT][8], int i) {
#pragma unroll
    for (int j = 0; j < NT; j++) h3n_x_words(xv[j], xr[j], c0 + (long long)i * step, nch);
  };
  // unit u's weights (tile r of turn u / R; zeros past the last chunk): rows past N read row
  // N - 1, whose products land in rows never stored; the row's addresses are worked out at
  // each load from the kernel's parameters (no registers held for them: 168 is the bound)
  auto load_w = [&](h3n_w(&w)[2], int u, int r) {
    const unsigned char *p[2], *q[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const long long n0r = n0 + 16 * r + 8 * h + g, n = n0r < N ? n0r : N - 1;
      p[h] = packed + n * (K / 2) + 32 * t;
      q[h] = scale + n * (K / 16) + 4 * t;
    }
    h3n_skinny_w(w, p, q, c0 + (long long)(u / R) * step, nch, K);
  };
  float acc[R][NT][4];
#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) acc[r][j][e] = 0.0f;
  h3n_w w[NB][2];
  uint4 xb[XB][NT][8];
#pragma unroll
  for (int d = 0; d < NB - 1; d++) load_w(w[d], d, d % R);
  if (XB == 2) load_x(xb[0], 0);
  // tile r of a turn: the unit's weights (cur) against the turn's x (xv: raw words for r = 0,
  // rewritten there into b pairs; pairs for r > 0)
  auto tile = [&](float(&a0)[NT][4], const h3n_w(&cur)[2], uint4(&xv)[NT][8], bool first) {
    unsigned S[2][4];
#pragma unroll
    for (int h = 0; h < 2; h++) h3n_scales(cur[h].s, S[h]);
#pragma unroll
    for (int i = 0; i < 8; i++) {
      unsigned a[2][4];
      h3n_a_word(cur, S, i, a);
#pragma unroll
      for (int j = 0; j < NT; j++) {
        unsigned b[2][2];
        if (first) {
          h3n_b_word(xv[j][i], b);
          if (R > 1) xv[j][i] = uint4{b[0][0], b[0][1], b[1][0], b[1][1]};
        } else {
          b[0][0] = xv[j][i].x, b[0][1] = xv[j][i].y, b[1][0] = xv[j][i].z, b[1][1] = xv[j][i].w;
        }
        h3_mma_bf16(a0[j], a[0], b[0]);
        h3_mma_bf16(a0[j], a[1], b[1]);
      }
    }
  };
  for (int u0 = 0; u0 < units; u0 += P) // as often in every thread; P a multiple of R: unit u0 + k is tile k % R
#pragma unroll
    for (int k = 0; k < P; k++) {
      const int u = u0 + k;
      if (u >= units) break;
      const int r = k % R, xs = k / R % XB, i = u / R;
      load_w(w[(k + NB - 1) % NB], u + NB - 1, (k + NB - 1) % R);
      if (XB == 2 && r == R - 1) load_x(xb[(xs + 1) % XB], i + 1); // the next turn's x (past the last: zeros)
      if (XB == 1 && r == 0) load_x(xb[0], i);                      // this turn's
      tile(acc[r], w[k % NB], xb[xs], r == 0);
    }
#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) red[warp][16 * r + g + 8 * (e >> 1)][8 * j + 2 * t + (e & 1)] = acc[r][j][e];
  __syncthreads();
  const float gs = __fmul_rn(*gp, 128.0f); // g * 2^7: the products carry 2^-7
  const bool whole = gridDim.y == 1;
  for (int i = threadIdx.x; i < 16 * R * 8 * NT; i += 32 * H3NS_WARPS) {
    const int rr = i / (8 * NT), m = i % (8 * NT);
    if (m >= M || n0 + rr >= N) continue;
    float sum = red[0][rr][m];
#pragma unroll
    for (int v = 1; v < H3NS_WARPS; v++) sum = __fadd_rn(sum, red[v][rr][m]);
    const long long o = (long long)m * N + n0 + rr;
    if (whole) {
      SKR_NOTE(0, o);
      y[o] = __fmul_rn(sum, gs);
    } else {
      SKR_NOTE(1, (long long)blockIdx.y * M * N + o);
      part[(long long)blockIdx.y * M * N + o] = sum;
    }
  }
  if (whole || !h3_last_block(cnt + blockIdx.x, gridDim.y)) return;
  h3n_add_partials<16 * R, 32 * H3NS_WARPS>(y, part, M, N, 0, (int)M, n0, gridDim.y, gs);
}

#ifndef NVFP4_LAB_EMU
#include "lab_nvfp4.cuh" // weight copies (lab_nv_dq)

typedef __nv_bfloat16 bf16;

// The tiled kernels' launch for M <= 16 (the _m1 kernel): runtime/cuda/cuda_nvfp4.c's
// cu_nvfp4_shape_of, mirrored here (the lab links no runtime): one block per 128 columns, the K
// splits that minimise waves of 264 blocks times chunks per split plus the partials' traffic.
struct tiled_shape {
  long long cols, splits;
  int cps;
};
static tiled_shape tiled_of(long long M, long long N, long long K) {
  const long long nch = K / H3N_KC;
  tiled_shape sh{(N + H3N_COLS - 1) / H3N_COLS, 1, (int)nch};
  double best = -1;
  for (long long S = 1; S <= 16 && S <= nch; S++) {
    const long long c = (nch + S - 1) / S, used = (nch + c - 1) / c, waves = (sh.cols * used + 263) / 264;
    const double t = (double)(waves * c) * (H3N_COLS * H3N_KC * 0.5625) + (used > 1 ? 8.0 * used * M * N / 264 : 0);
    if (best < 0 || t < best) best = t, sh.splits = used, sh.cps = (int)c;
  }
  return sh;
}


// an skr or skx instance of the table (tags skr<R,NB>; skx<R,NB,XB>, skx16: two n-tiles): R tiles
// a warp, NT n-tiles of x; occ its blocks an SM; smem its dynamic shared memory
typedef void (*skr_fn)(const h3_bf16 *, const unsigned char *, const unsigned char *, const float *, float *, float *,
                       unsigned *, long long, long long, long long);
struct skr_kind {
  const char *tag;
  skr_fn kern;
  int R, NT, S, occ; // S: 0 skr_splits' choice, 1 one split, -1 both (one row when skr_splits gives 1)
  size_t smem;
};

int main() {
  const shape shapes[] = {{"fc", 6144, 18432}, {"o_proj", 6144, 8192}, {"gate_up", 24576, 6144}, {"down", 6144, 12288}};
  const long long rows[] = {1, 8, 16};
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int occ[2];
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ[0], lab_nv_sk, 128, 0));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ[1], skv<1, false, 2>, 128, 0));
  printf("device: %d SMs; blocks an SM: product _sk %d, skv16 %d", sms, occ[0], occ[1]);
  // skr<4,4>: the one skr row kept (measured 2026-12-06: x through shared memory lost to the
  // product's register path everywhere; the reference point for R = 4). skx (x in registers, the
  // product's path): skx<1,3,2> on the product's grid (S = 1: the product's loop on skx's
  // skeleton, its control); at R = 2 the weight ring of NB units (3: the product's bytes in
  // flight) and x's ring of XB turns (2: ptxas spills at NB 3; 1: none), each at S = 1 (the
  // product's sums, bitwise) and at skr_splits' S (fc, o_proj, down: 2, so that 384 blocks fill
  // 3 an SM where 192 leave 60 % of the slots empty); skx16 at 16 rows: x ring 1 (a ring of 2
  // at two n-tiles is 128 registers of x alone)
  skr_kind skrs[] = {{"skr<4,4>", skr<4, 1, 4>, 4, 1, 0, 0, skr_smem(1)},
                     {"skx<1,3,2>", skx<1, 1, 3, 2>, 1, 1, 1, 0, 0},
                     {"skx<2,3,1>", skx<2, 1, 3, 1>, 2, 1, -1, 0, 0},
                     {"skx<2,4,1>", skx<2, 1, 4, 1>, 2, 1, -1, 0, 0},
                     {"skx<2,2,2>", skx<2, 1, 2, 2>, 2, 1, -1, 0, 0},
                     {"skx<2,3,2>", skx<2, 1, 3, 2>, 2, 1, -1, 0, 0},
                     {"skx16<2,2,1>", skx<2, 2, 2, 1>, 2, 2, -1, 0, 0},
                     {"skx16<2,3,1>", skx<2, 2, 3, 1>, 2, 2, -1, 0, 0}};
  for (skr_kind &k : skrs) {
    if (k.smem) CK(cudaFuncSetAttribute(k.kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)k.smem));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&k.occ, k.kern, 128, k.smem));
    printf(", %s %d", k.tag, k.occ);
  }
  printf("\n");
  cublasHandle_t h;
  CB(cublasCreate(&h));
  unsigned *sink;
  float *gp;
  const float one = 1.0f, zero = 0.0f;
  CK(cudaMalloc(&sink, 4));
  CK(cudaMalloc(&gp, 4));
  CK(cudaMemcpy(gp, &one, 4, cudaMemcpyHostToDevice));
  for (const shape &sh : shapes) {
    const long long N = sh.N, K = sh.K, np = N * K / 2, ns = N * K / 16;
    const double qbytes = (double)(np + ns), bbytes = (double)(N * K) * 2;
    int bcopies;
    std::vector<bufs> w = weight_copies(N, K, &bcopies);
    const int copies = (int)w.size();
    const int it = iters_of(qbytes), bit = iters_of(bbytes);
    const double floor_us = 1e3 * mean_ms([&](int i) {
      read_words<<<sms * 8, 256>>>(reinterpret_cast<const uint4 *>(w[i % copies].pk), np / 16, sink);
    }, it / 8 + 1, it);
    printf("\n%s: N %lld K %lld, %.1f MB packed (%.1f MB bf16); plain read of the codes %.2f us (%.2f TB/s)\n", sh.name,
           N, K, qbytes / 1e6, bbytes / 1e6, floor_us, (double)np / floor_us / 1e6);
    for (long long M : rows) {
      bf16 *x;
      float *y, *yref;
      CK(cudaMalloc(&x, M * K * 2));
      fill_bf16<<<256, 256>>>(x, M * K, 99u);
      CK(cudaMalloc(&y, M * N * 4));
      CK(cudaMalloc(&yref, M * N * 4));
      auto gemm = [&](int i, float *out) { // y^T [N, M] = W x^T: y [M, N] row-major
        CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, w[i % bcopies].wb, CUDA_R_16BF,
                        (int)K, x, CUDA_R_16BF, (int)K, &zero, out, CUDA_R_32F, (int)N, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
      };
      const double cublas_us = 1e3 * mean_ms([&](int i) { gemm(i, yref); }, bit / 8 + 1, bit);
      gemm(0, yref);
      std::vector<float> ref((size_t)(M * N)), got((size_t)(M * N)), prod((size_t)(M * N));
      CK(cudaMemcpy(ref.data(), yref, M * N * 4, cudaMemcpyDeviceToHost));
      printf("  M %lld: cublas bf16 %8.2f us\n", M, cublas_us);
      const unsigned grid = (unsigned)((N + 15) / 16);
      auto report = [&](const char *tag, double us, bool check_prod) {
        CK(cudaMemcpy(got.data(), y, M * N * 4, cudaMemcpyDeviceToHost));
        const bool same = !check_prod || !memcmp(got.data(), prod.data(), got.size() * 4);
        const double rel = rel_diff(got, ref);
        printf("    %-16s %8.2f us  %5.2f x cublas  %5.3f x plain  rel %.1e%s%s\n", tag, us, cublas_us / us, floor_us / us,
               rel, rel < 1e-3 ? "" : "  FAIL", same ? "" : (M <= 8 ? "  NOT BITWISE THE PRODUCT'S" : "  NOT BITWISE SKV16'S"));
      };
      // a kernel's launch over the rotated copies, timed; then once on copy 0 into a poisoned y, checked
      auto measure = [&](const char *tag, auto launch, bool bitwise) {
        const double us = 1e3 * mean_ms([&](int i) { launch(w[i % copies]); }, it / 8 + 1, it);
        CK(cudaMemset(y, 0xff, M * N * 4));
        launch(w[0]);
        report(tag, us, bitwise);
      };
      auto variant = [&](const char *tag, auto kern, bool bitwise) {
        measure(tag, [&](const bufs &b) { kern<<<grid, 128>>>(x, b.pk, b.sc, gp, y, M, N, K); }, bitwise);
      };
      { // the product's tiled kernel (its form at 9-16 rows; H3_NVFP4_FORM=tiled below)
        const tiled_shape ts = tiled_of(M, N, K);
        float *part = nullptr;
        unsigned *cnt = nullptr;
        if (ts.splits > 1) {
          CK(cudaMalloc(&part, ts.splits * M * N * 4));
          CK(cudaMalloc(&cnt, ts.cols * 4));
          CK(cudaMemset(cnt, 0, ts.cols * 4));
        }
        const dim3 tg((unsigned)ts.cols, (unsigned)ts.splits, 1);
        const size_t smem = (size_t)3 * M * H3N_RS * 16;
        measure("tiled _m1", [&](const bufs &b) {
          lab_nv_m1<<<tg, H3N_THREADS, smem>>>(x, b.pk, b.sc, gp, y, part, cnt, M, N, K, ts.cps, 1);
        }, false);
        if (part) CK(cudaFree(part));
        if (cnt) CK(cudaFree(cnt));
      }
      if (M <= 8) { // the product's skinny form
        variant("product _sk", lab_nv_sk, false);
        prod = got; // the product's result, for skr's bitwise check (one K split: the same sums)
      } else { // 9-16 rows: the skinny form of two n-tiles (the product runs its tiled kernels there)
        variant("skv16", skv<1, false, 2>, false);
        prod = got; // skx16's bitwise check at one K split (the same sums)
      }
      for (const skr_kind &k : skrs) { // R weight tiles a warp (skr: x through shared memory; skx: registers)
        if ((M <= 8) != (k.NT == 1)) continue;
        const long long Sa = skr_splits(k.R, N, K, (long long)k.occ * sms);
        const long long Ss[2] = {k.S == 0 ? Sa : 1, k.S == -1 && Sa > 1 ? Sa : 0};
        const long long cols = (N + 16 * k.R - 1) / (16 * k.R);
        for (const long long S : Ss) {
          if (S == 0) continue;
          float *part = nullptr;
          unsigned *cnt = nullptr;
          if (S > 1) {
            CK(cudaMalloc(&part, S * M * N * 4));
            CK(cudaMalloc(&cnt, cols * 4));
            CK(cudaMemset(cnt, 0, cols * 4));
          }
          char tag[32];
          snprintf(tag, sizeof tag, "%s S%lld", k.tag, S);
          measure(tag, [&](const bufs &b) {
            k.kern<<<dim3((unsigned)cols, (unsigned)S), 128, k.smem>>>(x, b.pk, b.sc, gp, y, part, cnt, M, N, K);
          }, S == 1);
          if (part) CK(cudaFree(part));
          if (cnt) CK(cudaFree(cnt));
        }
      }
      CK(cudaFree(x));
      CK(cudaFree(y));
      CK(cudaFree(yref));
    }
    free_copies(w);
  }
  CB(cublasDestroy(h));
  return 0;
}
#endif
