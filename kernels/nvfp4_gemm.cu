// nvfp4_gemm.cu: linear_nvfp4 (include/h3/ops.def, docs/nvfp4.md) on tensor cores, W4A16:
//   H3_NVFP4_NAME (x[M, K] bf16, packed u8[N, K/2], scale u8[N, K/16], g f32[1]) -> y[M, N] O_T
//   y = bf16-exact w_b = e2m1(code) * e4m3(scale) against x, fp32 sums, times g once, one
//   rounding; equal to the CPU op (runtime/cpu/ops_nvfp4.c) within fp32 summation order.
// Three kernels, H3_NVFP4_NAME_m1, _m2 and _m4, of MT = 1, 2 and 4 m-tiles (blocks of 16 MT
// rows). Launch (runtime/cuda/cuda_nvfp4.c picks MT, S and cps from M, N, K alone, so that the
// sum order, hence every bit of y, depends on the inputs only): grid (ceil(N / H3N_COLS), S,
// ceil(M / (16 MT))), H3N_THREADS threads, dynamic shared memory 3 * min(M, 16 MT) * H3N_RS *
// 16 bytes. Block (bx, s, z) computes rows 16 MT z .. x columns H3N_COLS bx .. over the K
// chunks (H3N_KC each) s cps .. s cps + cps - 1; warp w owns the block's columns 16 w ..
// 16 w + 15 (two n-tiles of 8), all warps the same chunks.
// Per chunk: the block stages its rows of x into shared memory (cp.async two chunks ahead,
// each thread then rewrites its own groups into the mma's pairs, double-buffered, one barrier
// per chunk) while each lane holds the next chunk's weights (the next two: MT = 1) in
// registers. S == 1: y written directly. S > 1 (M <= 16 MT): fp32 partials part[S, M, N]
// (scratch), then the last block of each column group (counter cnt[bx], u32, 0 before the
// launch and again after it) adds them in split order s = 0, 1, ... and writes y.
// The K order inside a chunk is permuted the same way for A (x) and B (weights): lane t of a
// quad owns the 64 consecutive k at 64 t (32 code bytes: two 16-byte loads per weight row,
// and 4 scale bytes), as 8 words of 8 codes; word i (k0 = 64 t + 8 i) feeds two k-steps: the
// codes (p, p + 4) for p = 0, 1 (step 0) and p = 2, 3 (step 1) are the pairs of b[0], b[1],
// and x's k0 + p, k0 + p + 4 the matching pairs of a (h3n_permute's, one 16-byte load).
// Dequantization is exact bit arithmetic: a code's magnitude bits below the bf16 exponent's
// two lowest bits give e2m1 * 2^-126 (0.5 a subnormal), a scale's bits give e4m3 * 2^-120,
// brought to e4m3 * 2^119 by two exact multiplies; their bf16 product (mul.rn.bf16x2) is
// e2m1 * e4m3 * 2^-7 (exact: at most 6 significant bits, normal), and y = acc * (g * 2^7).
// A NaN scale byte (0x7f, 0xff) gives NaN weights, as on the CPU.
// Every barrier and mma runs as often in every thread of a block (tests/m31/test_nvfp4_emu.cpp
// runs this kernel on the host under tests/codegen/host_emu.h).
// Macros the user defines in front: H3_NVFP4_NAME and O_T (y's element type).

#define H3N_THREADS 256 // 8 warps
#define H3N_COLS 128    // columns per block (16 per warp)
#define H3N_KC 256      // k per chunk (64 per lane of a quad)
#define H3N_RS 36       // 16-byte slots per staged row of x (32 used; see h3n_stage)

// bytes of a and b (a: 0-3, b: 4-7) picked by the 4 selector nibbles (each 0-7)
H3_DI unsigned h3n_prmt(unsigned a, unsigned b, unsigned sel) {
#ifdef __CUDA_ARCH__
  return __byte_perm(a, b, sel);
#else
  const unsigned long long v = a | (unsigned long long)b << 32;
  unsigned r = 0;
  for (int i = 0; i < 4; i++) r |= (unsigned)(v >> (8 * ((sel >> (4 * i)) & 7u)) & 0xffu) << (8 * i);
  return r;
#endif
}

// bf16 pairs multiplied, each product rounded to nearest (subnormals kept)
H3_DI unsigned h3n_mul2(unsigned a, unsigned b) {
#ifdef __CUDA_ARCH__
  unsigned d;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
#else
  return h3_bf16x2(h3_bf16_to_f32((uint16_t)a) * h3_bf16_to_f32((uint16_t)b),
                   h3_bf16_to_f32((uint16_t)(a >> 16)) * h3_bf16_to_f32((uint16_t)(b >> 16)));
#endif
}

// codes P and P + 4 of the 8 e2m1 codes of w (code i in bits 4i .. 4i + 3, bit 3 the sign) as
// a bf16 pair (low half code P) of e2m1 * 2^-126, exactly: the magnitude's 3 bits at 8 .. 6
// (the exponent's two lowest bits and the mantissa's highest), the sign at 15. wh: w >> 8
// (codes 2, 3, 6, 7 where codes 0, 1, 4, 5 are in w), so that P = 2, 3 are P = 0, 1 of wh.
// The two codes alone (u), then one multiply adds u << 6 - 4 p (the magnitudes at 6 .. 8, a
// sign at 9) and u << 12 - 4 p (a sign at 15), whose bits do not meet: no carry.
template <int P> H3_DI unsigned h3n_e2m1x2(unsigned w, unsigned wh) {
  constexpr int p = P & 1;
  const unsigned u = (P < 2 ? w : wh) & (0x000F000Fu << 4 * p);
  return u * ((1u << (6 - 4 * p)) + (1u << (12 - 4 * p))) & 0x81C081C0u;
}

// the e4m3 bytes at bits 0-7 and 16-23 of v (OCP E4M3FN) as a bf16 pair of e4m3 * 2^119,
// exactly: the byte's 7 magnitude bits at 10 .. 4 are e4m3 * 2^-120 (subnormals included),
// times 2^120 (0x7B80) and 2^119 (0x7B00); a NaN byte gives a finite value here (see below)
H3_DI unsigned h3n_e4m3x2(unsigned v) {
  const unsigned u = (v << 4 & 0x07F007F0u) | (v << 8 & 0x80008000u);
  return h3n_mul2(h3n_mul2(u, 0x7B807B80u), 0x7B007B00u);
}

// one n-tile's weights of a chunk for this lane: 32 code bytes (8 words) and 4 scales
struct h3n_w {
  uint4 c[2];
  unsigned s;
};

// word i (0-7: k 8 i .. 8 i + 7 of the lane's 64) of w's codes
H3_DI unsigned h3n_word(const h3n_w &w, int i) {
  const uint4 q = w.c[i >> 2];
  return (i & 3) == 0 ? q.x : (i & 3) == 1 ? q.y : (i & 3) == 2 ? q.z : q.w;
}

// the 8 codes of word c times the broadcast scale pair sc (h3n_scales) as 4 bf16 pairs:
// p[P] = codes (P, P + 4), each e2m1 * e4m3 * 2^-7 (exact)
H3_DI void h3n_dequant_word(unsigned c, unsigned sc, unsigned p[4]) {
  const unsigned ch = c >> 8;
  p[0] = h3n_mul2(h3n_e2m1x2<0>(c, ch), sc), p[1] = h3n_mul2(h3n_e2m1x2<1>(c, ch), sc);
  p[2] = h3n_mul2(h3n_e2m1x2<2>(c, ch), sc), p[3] = h3n_mul2(h3n_e2m1x2<3>(c, ch), sc);
}

// The lane's weights of chunk c: p, q its weight row's codes and scales at the lane's first
// chunk (k = 64 t), k0 that chunk's first k. vec: K a multiple of H3N_KC and 16-byte aligned
// rows (vector loads); else byte loads, zeros past K.
H3_DI h3n_w h3n_load(const unsigned char *p, const unsigned char *q, int c, long long k0, long long K,
                     int vec) {
  h3n_w r;
  p += c * (H3N_KC / 2), q += c * (H3N_KC / 16);
  if (vec) {
#ifdef __CUDA_ARCH__
    r.c[0] = __ldg(reinterpret_cast<const uint4 *>(p));
    r.c[1] = __ldg(reinterpret_cast<const uint4 *>(p) + 1);
    r.s = __ldg(reinterpret_cast<const unsigned *>(q));
#else
    memcpy(r.c, p, 32);
    memcpy(&r.s, q, 4);
#endif
    return r;
  }
  k0 += (long long)c * H3N_KC;
  unsigned wd[8];
  for (int i = 0; i < 8; i++) {
    wd[i] = 0u;
    for (int j = 0; j < 4; j++)
      if (k0 + 8 * i + 2 * j < K) wd[i] |= (unsigned)p[4 * i + j] << (8 * j);
  }
  r.s = 0u;
  for (int i = 0; i < 4; i++)
    if (k0 + 16 * i < K) r.s |= (unsigned)q[i] << (8 * i);
  r.c[0] = uint4{wd[0], wd[1], wd[2], wd[3]}, r.c[1] = uint4{wd[4], wd[5], wd[6], wd[7]};
  return r;
}

// Staged x: per row H3N_RS 16-byte slots, group gg (k 8 gg .. 8 gg + 7 of the chunk) in slot
// 4 (gg % 8) + gg / 8, so that lane t's word i reads slot 4 i + t: the 8 lanes of a
// quarter-warp (rows g, g + 1: H3N_RS = 4 mod 8 apart) hit 8 distinct bank groups.

// Stages x[m0 + r, chunk c ..] (r < rows; zeros past K) into buffer b; thread i fills slot i % 32.
H3_DI void h3n_stage(uint4 *b, const h3_bf16 *x, long long m0, int rows, int c, long long K, int vec) {
  for (int i = threadIdx.x; i < rows * 32; i += H3N_THREADS) {
    const int r = i >> 5, sl = i & 31, gg = 8 * (sl & 3) + (sl >> 2);
    const long long k = (long long)c * H3N_KC + 8 * gg;
    const h3_bf16 *src = x + (m0 + r) * K + k;
    uint4 *dst = b + r * H3N_RS + sl;
    if (vec) {
      h3_cp16(dst, src);
    } else {
      __align__(16) h3_bf16 e[8];
      for (int j = 0; j < 8; j++) e[j] = k < K ? src[j] : __float2bfloat16_rn(0.0f);
      *dst = *reinterpret_cast<const uint4 *>(e);
    }
  }
  h3_cp_commit();
}

// Rewrites the groups this thread staged (h3n_stage's slots) from raw into p as the lane's
// A pairs: x's (k, k + 4), (k + 1, k + 5) of the group's first k (a word's k-step 0) and
// (k + 2, k + 6), (k + 3, k + 7) (step 1).
H3_DI void h3n_permute(uint4 *p, const uint4 *raw, int rows) {
  for (int i = threadIdx.x; i < rows * 32; i += H3N_THREADS) {
    const int at = (i >> 5) * H3N_RS + (i & 31);
    const uint4 v = raw[at];
    p[at] = uint4{h3n_prmt(v.x, v.z, 0x5410u), h3n_prmt(v.x, v.z, 0x7632u), h3n_prmt(v.y, v.w, 0x5410u),
                  h3n_prmt(v.y, v.w, 0x7632u)};
  }
}

// The broadcast bf16 pairs (S, S) of the lane's 4 scales (S = e4m3 * 2^119; NaN for a NaN byte).
H3_DI void h3n_scales(unsigned s, unsigned *S) {
  const unsigned lo = h3n_e4m3x2(h3n_prmt(s, 0u, 0x4140u)), hi = h3n_e4m3x2(h3n_prmt(s, 0u, 0x4342u));
  S[0] = h3n_prmt(lo, lo, 0x1010u), S[1] = h3n_prmt(lo, lo, 0x3232u);
  S[2] = h3n_prmt(hi, hi, 0x1010u), S[3] = h3n_prmt(hi, hi, 0x3232u);
  if ((((s & 0x7f7f7f7fu) + 0x01010101u) & 0x80808080u) != 0u) // a byte with magnitude 0x7f
    for (int i = 0; i < 4; i++)
      if ((s >> (8 * i) & 0x7fu) == 0x7fu) S[i] = 0x7FC07FC0u;
}

// Adds a chunk's products: cur (the lane's two n-tiles) against permuted buffer b, whose slots
// xo[mt][h] (+ 4 i) hold the lane's rows of m-tile mt (h: rows g, g + 8; rows past the
// block's read a valid one instead: their products land in rows never stored).
template <int MT>
H3_DI void h3n_chunk(float acc[MT][2][4], const h3n_w *cur, const uint4 *b, const int xo[MT][2]) {
  unsigned S[2][4];
#pragma unroll
  for (int j = 0; j < 2; j++) h3n_scales(cur[j].s, S[j]);
#pragma unroll
  for (int i = 0; i < 8; i++) {
    unsigned bf[2][2][2]; // [tile][step][half]
#pragma unroll
    for (int j = 0; j < 2; j++) {
      unsigned p[4];
      h3n_dequant_word(h3n_word(cur[j], i), S[j][i >> 1], p);
      bf[j][0][0] = p[0], bf[j][0][1] = p[1], bf[j][1][0] = p[2], bf[j][1][1] = p[3];
    }
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
      const uint4 xa = b[xo[mt][0] + 4 * i], xb = b[xo[mt][1] + 4 * i]; // h3n_permute's pairs
      const unsigned a0[4] = {xa.x, xb.x, xa.y, xb.y}, a1[4] = {xa.z, xb.z, xa.w, xb.w};
#pragma unroll
      for (int j = 0; j < 2; j++) {
        h3_mma_bf16(acc[mt][j], a0, bf[j][0]);
        h3_mma_bf16(acc[mt][j], a1, bf[j][1]);
      }
    }
  }
}

// The last block of a column group (T threads): y[m0 + r, n0 + c] (r < rows, c < W, columns
// past N skipped) = gs times the sum over s = 0 .. S - 1, in that order, of the partials
// part[s, m0 + r, n0 + c] (part: [S, M, N] f32, read through L2: other blocks wrote them).
template <int W, int T>
H3_DI void h3n_add_partials(O_T *__restrict__ y, const float *__restrict__ part, long long M, long long N, long long m0,
                            int rows, long long n0, long long S, float gs) {
  for (int i = threadIdx.x; i < rows * W; i += T) {
    const long long m = m0 + i / W, n = n0 + i % W;
    if (n >= N) continue;
    const float *p = part + m * N + n;
    float sum = 0.0f;
    for (long long s0 = 0; s0 < S; s0 += 8) { // 8 loads in flight, added in split order
      float v[8];
#pragma unroll
      for (int u = 0; u < 8; u++) v[u] = s0 + u < S ? h3_ldcg(p + (s0 + u) * M * N) : 0.0f;
#pragma unroll
      for (int u = 0; u < 8; u++)
        if (s0 + u < S) sum = __fadd_rn(sum, v[u]);
    }
    h3_st(y, m * N + n, __fmul_rn(sum, gs));
  }
}

#define H3N_PARAMS                                                                             \
  const h3_bf16 *__restrict__ x, const unsigned char *__restrict__ packed,                     \
      const unsigned char *__restrict__ scale, const float *__restrict__ gp, O_T *__restrict__ y, \
      float *__restrict__ part, unsigned *__restrict__ cnt, long long M, long long N, long long K, \
      int cps, int vec

// The kernel of MT m-tiles (the block's rows: at most 16 MT).
template <int MT> H3_DI void h3n_gemm(H3N_PARAMS) {
  H3_DYN_SMEM(uint4, xs); // [3][rows][H3N_RS]: x's groups as staged, then permuted twice
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const long long m0 = (long long)blockIdx.z * 16 * MT;
  const int rows = (int)(M - m0 < 16 * MT ? M - m0 : 16 * MT);
  uint4 *raw = xs, *perm = xs + rows * H3N_RS;
  const int nch = (int)((K + H3N_KC - 1) / H3N_KC), c0 = (int)blockIdx.y * cps;
  const int nc = (c0 + cps < nch ? c0 + cps : nch) - c0; // the block's chunks c0 ..
  const long long col = (long long)blockIdx.x * H3N_COLS + 16 * warp; // the warp's first column
  // the lane's weight rows (past N: row N - 1, whose products land in columns never stored)
  const unsigned char *p[2], *q[2];
#pragma unroll
  for (int j = 0; j < 2; j++) {
    const long long n = col + 8 * j + g < N ? col + 8 * j + g : N - 1;
    p[j] = packed + n * (K / 2) + (long long)c0 * (H3N_KC / 2) + 32 * t;
    q[j] = scale + n * (K / 16) + (long long)c0 * (H3N_KC / 16) + 4 * t;
  }
  const long long k0 = (long long)c0 * H3N_KC + 64 * t;
  int xo[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int r = 16 * mt + 8 * h + g;
      xo[mt][h] = (r < rows ? r : rows - 1) * H3N_RS + t;
    }
  float acc[MT][2][4];
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) acc[mt][j][e] = 0.0f;
  // the lane's weights D chunks ahead (D = 2 for one m-tile, whose registers allow it) in a
  // ring of D + 1 chunks: D = 2, chunk c in w[c % 3], the loop unrolled by 3 so that the ring's
  // slots are registers and no copy waits for a load still in flight; D = 1, chunk c in w[0]
  // and chunk c + 1 copied there at the end of chunk c (its load had the chunk's products to land)
  constexpr int D = MT == 1 ? 2 : 1, NB = D + 1;
  h3n_w w[NB][2];
  h3n_stage(raw, x, m0, rows, c0, K, vec);
  h3_cp_wait();
  h3n_permute(perm, raw, rows);
  if (nc > 1) h3n_stage(raw, x, m0, rows, c0 + 1, K, vec);
#pragma unroll
  for (int d = 0; d < D; d++)
    if (d < nc)
#pragma unroll
      for (int j = 0; j < 2; j++) w[d][j] = h3n_load(p[j], q[j], d, k0, K, vec);
  // chunk c of the block: its products from w[b] (b = c % NB), chunk c + D loaded into
  // w[(b + D) % NB], x's chunk c + 1 permuted and c + 2 staged
  auto turn = [&](int c, h3n_w(&cur)[2], h3n_w(&far)[2]) {
    __syncthreads(); // chunk c permuted; every warp done with chunk c - 1's buffer
    if (c + D < nc)
#pragma unroll
      for (int j = 0; j < 2; j++) far[j] = h3n_load(p[j], q[j], c + D, k0, K, vec);
    h3n_chunk<MT>(acc, cur, perm + (c & 1) * rows * H3N_RS, xo);
    if (c + 1 < nc) { // this thread's groups of chunk c + 1 (in flight since chunk c - 1)
      h3_cp_wait();
      h3n_permute(perm + ((c + 1) & 1) * rows * H3N_RS, raw, rows);
      if (c + 2 < nc) h3n_stage(raw, x, m0, rows, c0 + c + 2, K, vec);
    }
  };
  if constexpr (D == 2) {
    for (int c = 0; c < nc; c += NB) // as often in every thread
#pragma unroll
      for (int b = 0; b < NB; b++)
        if (c + b < nc) turn(c + b, w[b], w[(b + D) % NB]);
  } else {
    for (int c = 0; c < nc; c++) { // as often in every thread
      turn(c, w[0], w[1]);
      w[0][0] = w[1][0], w[0][1] = w[1][1];
    }
  }
  const float gs = __fmul_rn(*gp, 128.0f); // g * 2^7: the products carry 2^-7
  const bool whole = gridDim.y == 1;         // one K split: y directly, else the partials
#pragma unroll
  for (int mt = 0; mt < MT; mt++)
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int r = 16 * mt + g + 8 * (e >> 1);
        const long long n = col + 8 * j + 2 * t + (e & 1);
        if (r >= rows || n >= N) continue;
        if (whole) h3_st(y, (m0 + r) * N + n, __fmul_rn(acc[mt][j][e], gs));
        else part[((long long)blockIdx.y * M + m0 + r) * N + n] = acc[mt][j][e];
      }
  if (whole) return;
  const long long S = gridDim.y;
  if (!h3_last_block(cnt + (long long)blockIdx.z * gridDim.x + blockIdx.x, gridDim.y)) return;
  h3n_add_partials<H3N_COLS, H3N_THREADS>(y, part, M, N, m0, rows, (long long)blockIdx.x * H3N_COLS, S, gs);
}

// The weights as the mma's A operand (the skinny form): word i of the lane's rows
// g, g + 8 (cur[0], cur[1]; S their broadcast scales) as a[k-step][fragment], codes (p, p + 4)
// of k-step 0 (p = 0, 1) and 1 (p = 2, 3).
H3_DI void h3n_a_word(const h3n_w cur[2], const unsigned S[2][4], int i, unsigned a[2][4]) {
#pragma unroll
  for (int h = 0; h < 2; h++) {
    unsigned p[4];
    h3n_dequant_word(h3n_word(cur[h], i), S[h][i >> 1], p);
    a[0][h] = p[0], a[0][2 + h] = p[1], a[1][h] = p[2], a[1][2 + h] = p[3];
  }
}

// x as the mma's B operand: the lane's 8 k of word i (one row of x, k0 .. k0 + 7) as
// b[k-step] = pairs (k0 + p, k0 + p + 4) for p = 0, 1 (step 0) and 2, 3 (step 1).
H3_DI void h3n_b_word(uint4 v, unsigned b[2][2]) {
  b[0][0] = h3n_prmt(v.x, v.z, 0x5410u), b[0][1] = h3n_prmt(v.x, v.z, 0x7632u);
  b[1][0] = h3n_prmt(v.y, v.w, 0x5410u), b[1][1] = h3n_prmt(v.y, v.w, 0x7632u);
}

// How a turn's x words are held: raw (permuted into the mma's b pairs for each use), raw to be
// kept as pairs (permuted, and the pairs written back in place for the chunk's next weight tile),
// or pairs already
enum { H3N_X_RAW, H3N_X_KEEP, H3N_X_PAIRS };

// The products of a turn of the skinny form: the lane's weights of a chunk (cur: rows g, g + 8)
// against x's 8 words of it for NT n-tiles of x's rows (xv[j]: the lane's row 8 j + g, held as
// XS says), each word's k-step 0 added to a0[j] and k-step 1 to a1[j] (one accumulator twice,
// or two chains)
template <int NT, int XS = H3N_X_RAW>
H3_DI void h3n_skinny_turn(float (*a0)[4], float (*a1)[4], const h3n_w cur[2], uint4 (*xv)[8]) {
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
      if (XS == H3N_X_PAIRS) {
        b[0][0] = xv[j][i].x, b[0][1] = xv[j][i].y, b[1][0] = xv[j][i].z, b[1][1] = xv[j][i].w;
      } else {
        h3n_b_word(xv[j][i], b);
        if (XS == H3N_X_KEEP) xv[j][i] = uint4{b[0][0], b[0][1], b[1][0], b[1][1]};
      }
      h3_mma_bf16(a0[j], a[0], b[0]);
      h3_mma_bf16(a1[j], a[1], b[1]);
    }
  }
}

// The lane's weights of chunk c for the skinny form: rows g, g + 8 (p, q: their codes and
// scales at the lane's first k; vector loads: K a multiple of H3N_KC); zero codes and scales
// for c past the last chunk (nch).
H3_DI void h3n_skinny_w(h3n_w w[2], const unsigned char *const p[2], const unsigned char *const q[2], long long c,
                        long long nch, long long K) {
#pragma unroll
  for (int h = 0; h < 2; h++)
    w[h] = c < nch ? h3n_load(p[h], q[h], (int)c, 0, K, 1) : h3n_w{{uint4{0u, 0u, 0u, 0u}, uint4{0u, 0u, 0u, 0u}}, 0u};
}

// The lane's weight rows nb + g and nb + g + 8 (past N: row N - 1, whose products land in rows
// never stored): p[h], q[h] their codes and scales at the lane's first k (64 t), as
// h3n_skinny_w takes them.
H3_DI void h3n_lane_rows(const unsigned char *packed, const unsigned char *scale, long long nb, long long N,
                         long long K, int g, int t, const unsigned char *p[2], const unsigned char *q[2]) {
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const long long nr = nb + 8 * h + g, n = nr < N ? nr : N - 1;
    p[h] = packed + n * (K / 2) + 32 * t;
    q[h] = scale + n * (K / 16) + 4 * t;
  }
}

// The lane's 64 k of x's chunk c as 8 words of 8 (xr: its row at its first k, 16-byte
// aligned, K a multiple of H3N_KC); zeros for a row past M (xr NULL) or c past the last chunk.
H3_DI void h3n_x_words(uint4 xv[8], const h3_bf16 *xr, long long c, long long nch) {
#pragma unroll
  for (int i = 0; i < 8; i++) {
    xv[i] = uint4{0u, 0u, 0u, 0u};
    if (xr && c < nch) {
#ifdef __CUDA_ARCH__
      xv[i] = __ldg(reinterpret_cast<const uint4 *>(xr + c * H3N_KC) + i);
#else
      memcpy(&xv[i], xr + c * H3N_KC + 8 * i, 16);
#endif
    }
  }
}

#define H3NS_WARPS 4 // the skinny and row-pair forms' warps a block

// The end of a skinny or row-pair block of R tiles of 16 weight rows (from n0) and NT n-tiles of
// x rows: each warp's sums acc (acc[r][j]: weight row 16 r + g with x rows 8 j + 2 t, + 1, then
// weight row 16 r + g + 8) meet in shared memory and are added in warp order; one K split (or
// SPLITS false: the skinny form's grid): y = sum * g * 2^7 (the products carry 2^-7); else split
// s's partials part[s] = sum, and the column group's last block (counter cnt[bx]) adds the
// splits in order (h3n_add_partials)
template <int R, int NT, bool SPLITS>
H3_DI void h3n_warp_sums(const float (&acc)[R][NT][4], const float *gp, O_T *y, float *part, unsigned *cnt,
                         long long M, long long N, long long n0) {
  __shared__ float red[H3NS_WARPS][16 * R][8 * NT]; // [warp][weight row][x row]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) red[warp][16 * r + g + 8 * (e >> 1)][8 * j + 2 * t + (e & 1)] = acc[r][j][e];
  __syncthreads();
  const float gs = __fmul_rn(*gp, 128.0f);
  const bool whole = !SPLITS || gridDim.y == 1;
  for (int i = threadIdx.x; i < 16 * R * 8 * NT; i += 32 * H3NS_WARPS) {
    const int rr = i / (8 * NT), m = i % (8 * NT);
    if (m >= M || n0 + rr >= N) continue;
    float sum = red[0][rr][m];
#pragma unroll
    for (int v = 1; v < H3NS_WARPS; v++) sum = __fadd_rn(sum, red[v][rr][m]);
    const long long o = (long long)m * N + n0 + rr;
    if (whole) h3_st(y, o, __fmul_rn(sum, gs));
    else part[(long long)blockIdx.y * M * N + o] = sum;
  }
  if (whole || !h3_last_block(cnt + blockIdx.x, gridDim.y)) return;
  h3n_add_partials<16 * R, 32 * H3NS_WARPS>(y, part, M, N, 0, (int)M, n0, gridDim.y, gs);
}

// ---- the skinny form (M <= 8): weights as the mma's A operand --------------------------------
// H3_NVFP4_NAME_sk, picked by runtime/cuda/cuda_nvfp4.c for 1 to 8 rows of x with x and codes
// 16-byte aligned, scales 4-byte aligned and K a multiple of H3N_KC (measured on the H200 at
// the draft's shapes: 1.6-2.0 x cuBLASLt bf16 at M = 1, against the tiled kernels' 1.35-1.47;
// a 16-row variant of it was slower than the tiled kernels and is not kept). Launch: grid
// (ceil(N / 16), 1, 1), H3NS_WARPS warps, no dynamic shared memory, no scratch. Block bx
// computes y[0 .. M, 16 bx .. 16 bx + 15]: its 16 weight rows are the A tile of m16n8k16 (lane
// (g, t) dequantizes rows g and g + 8), x's rows the B tile's 8 columns (rows past M read as
// zeros, their products land in columns never stored), so an mma takes 256 weights where the
// tiled kernels' take 128. Warp w takes the chunks w, w + H3NS_WARPS, ... (no barrier in the
// loop; per lane the next two turns' weights and the next turn's x in flight during a turn:
// 3 blocks an SM); lane t of a quad owns the chunk's 64 consecutive k at 64 t, as the tiled
// kernels do (word i: codes (p, p + 4) the pairs of a[0], a[2] for p = 0, 1 and the next
// k-step's for p = 2, 3; x's k0 + p, k0 + p + 4 the matching pairs of b, from one 16-byte
// load). Then the warps' sums meet in shared memory and are added in warp order: the sum order
// depends on K alone. Every warp runs ceil(chunks / H3NS_WARPS) turns (host emulation's mma is
// block-wide).

H3_DI void h3n_skinny(const h3_bf16 *__restrict__ x, const unsigned char *__restrict__ packed,
                      const unsigned char *__restrict__ scale, const float *__restrict__ gp, O_T *__restrict__ y,
                      long long M, long long N, long long K) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const long long n0 = (long long)blockIdx.x * 16, nch = K / H3N_KC;
  const unsigned char *p[2], *q[2];
  h3n_lane_rows(packed, scale, n0, N, K, g, t, p, q);
  // the lane's x row g at its k (NULL: a row past M)
  const h3_bf16 *xr = g < M ? x + (long long)g * K + 64 * t : nullptr;
  float acc[1][1][4] = {{{0.0f, 0.0f, 0.0f, 0.0f}}};
  // Rings in registers: turn i's weights in w[i % 3] (loaded two turns ahead), its x in
  // xv[i % 2] (one turn ahead); the loop unrolled by 6 (both rings' periods) so that every slot
  // is a register and no copy waits for a load still in flight (measured on an H100 at M = 1:
  // x one turn ahead 3-15 % faster than x loaded in its own turn; dev/nvfp4-gemm.md, 2026-12-06)
  h3n_w w[3][2];
  uint4 xv[2][8];
  h3n_skinny_w(w[0], p, q, warp, nch, K);
  h3n_skinny_w(w[1], p, q, warp + H3NS_WARPS, nch, K);
  h3n_x_words(xv[0], xr, warp, nch);
  // every warp runs as many turns (the block's mmas as often in every thread); a turn past the
  // warp's last chunk adds zeros
  const long long turns = (nch + H3NS_WARPS - 1) / H3NS_WARPS;
  auto turn = [&](long long it, const h3n_w(&cur)[2], h3n_w(&far)[2], uint4(&xc)[8], uint4(&xn)[8]) {
    const long long c = warp + it * H3NS_WARPS;
    h3n_skinny_w(far, p, q, c + 2 * H3NS_WARPS, nch, K);
    h3n_x_words(xn, xr, c + H3NS_WARPS, nch);
    h3n_skinny_turn<1>(acc[0], acc[0], cur, &xc);
  };
  for (long long it = 0; it < turns; it += 6)
#pragma unroll
    for (int u = 0; u < 6; u++)
      if (it + u < turns) turn(it + u, w[u % 3], w[(u + 2) % 3], xv[u % 2], xv[(u + 1) % 2]);
  h3n_warp_sums<1, 1, false>(acc, gp, y, nullptr, nullptr, M, N, n0);
}

// ---- the row-pair form (5 to 16 rows): two tiles of weight rows a warp ------------------------
// H3_NVFP4_NAME_sx (NT = 1 n-tile of x rows: up to 8 rows) and _sx16 (NT = 2: 9 to 16), picked by
// runtime/cuda/cuda_nvfp4.c at 5 to 16 rows (cu_nvfp4_rows_applies, cu_nvfp4_rows_splits) under
// the skinny form's conditions. The
// skinny form with two 16-row weight tiles a warp: a turn's x words, loaded into registers at
// its first tile, serve both (tile 0 rewrites them into the mma's b pairs in place, tile 1
// reads the pairs), so x's L2 reads and permutes per weight byte are half the skinny form's
// (measured on an H100 at 8 rows: 6-23 % less time; docs/nvfp4.md). Launch: grid (ceil(N /
// 32), S), 4 warps, no dynamic shared memory; S > 1: partials part [S, M, N] f32 and counters
// cnt [ceil(N / 32)] u32 (0 before the launch and again after it). Block (bx, s) owns weight
// rows 32 bx .. + 31 (tile r: rows 32 bx + 16 r + g, + 8 for lane (g, t); rows past N read
// row N - 1, whose products land in rows never stored); its warp w is warp v = 4 s + w of the
// column group and takes the chunks v, v + 4 S, ...; a warp's work is a stream of units u = 2 i
// + r (turn i, tile r), the weights a ring of NB units in registers (unit u + NB - 1 loaded at
// unit u; the loop unrolled by lcm(NB, 2) so that every slot is a register), one accumulator
// chain a tile and n-tile. The 4 warps' sums meet in shared memory and are added in warp order;
// S > 1: into part[s], then the column group's last block adds them in split order
// (h3n_add_partials). Every warp runs ceil(chunks / 4 S) turns (past its chunks: zeros), so the
// sum order depends on M, N, K alone.
template <int NT, int NB>
H3_DI void h3n_rows(const h3_bf16 *__restrict__ x, const unsigned char *__restrict__ packed,
                    const unsigned char *__restrict__ scale, const float *__restrict__ gp, O_T *__restrict__ y,
                    float *__restrict__ part, unsigned *__restrict__ cnt, long long M, long long N, long long K) {
  constexpr int R = 2, P = NB % R == 0 ? NB : NB * R; // tiles a turn; units a round of the loop
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const long long n0 = (long long)blockIdx.x * 16 * R;
  const int nch = (int)(K / H3N_KC), step = (int)gridDim.y * H3NS_WARPS, c0 = (int)blockIdx.y * H3NS_WARPS + warp;
  const int units = (nch + step - 1) / step * R;
  const h3_bf16 *xr[NT]; // the lane's x rows at its first k (NULL: past M)
#pragma unroll
  for (int j = 0; j < NT; j++) xr[j] = 8 * j + g < M ? x + (long long)(8 * j + g) * K + 64 * t : nullptr;
  // unit u's weights (tile r of turn u / R), their addresses worked out at each load from the
  // kernel's parameters (holding them costs registers the ring needs)
  auto load_w = [&](h3n_w(&w)[2], int u, int r) {
    const unsigned char *p[2], *q[2];
    h3n_lane_rows(packed, scale, n0 + 16 * r, N, K, g, t, p, q);
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
  uint4 xv[NT][8];
#pragma unroll
  for (int d = 0; d < NB - 1; d++) load_w(w[d], d, d % R);
  for (int u0 = 0; u0 < units; u0 += P) // as often in every thread
#pragma unroll
    for (int k = 0; k < P; k++) {
      const int u = u0 + k, r = k % R;
      if (u >= units) break;
      load_w(w[(k + NB - 1) % NB], u + NB - 1, (k + NB - 1) % R);
      // the unit's weights against the turn's x: its raw words, loaded at tile 0 and kept
      // there as the b pairs that tile 1 reads
      if (r == 0) {
#pragma unroll
        for (int j = 0; j < NT; j++) h3n_x_words(xv[j], xr[j], c0 + (long long)(u / R) * step, nch);
        h3n_skinny_turn<NT, H3N_X_KEEP>(acc[0], acc[0], w[k % NB], xv);
      } else {
        h3n_skinny_turn<NT, H3N_X_PAIRS>(acc[1], acc[1], w[k % NB], xv);
      }
    }
  h3n_warp_sums<R, NT, true>(acc, gp, y, part, cnt, M, N, n0);
}

// ---- the warpgroup form (9 to 16 rows, sm_90a): the weights as wgmma's A registers -----------
// H3_NVFP4_NAME_wg (NX = 8: up to 8 rows of x) and _wg16 (NX = 16: 9 to 16), picked by
// runtime/cuda/cuda_nvfp4.c at 9 to 16 rows (5 to 16 under H3_NVFP4_FORM=wg; splits from
// cu_nvfp4_wg_splits) under the skinny form's conditions. One warpgroup a block; block (bx, s) owns weight rows 64 bx .. 64 bx + 63 and the
// chunks s cps .. of its split (cps = ceil(chunks / S)). Warp w, lane (g, t): weight rows 64 bx +
// 16 w + g and + 8 (past N: row N - 1, whose products land in rows never stored), the lane's 64
// consecutive k at 64 t of each chunk (h3n_skinny_w, a ring of NB chunks in registers),
// dequantized by h3n_a_word into the A registers of wgmma m64nNXk16 (a warp's A fragment is
// m16n8k16's: word i gives k-steps 2 i and 2 i + 1). x is B, from shared memory: chunk i of the
// block in buffer i % 3 (NX rows x 512 bytes each, 1024-aligned), K-major in the 128-byte swizzle
// (column block s / 4 of the chunk's k-steps s: NX rows of 128 bytes, row n's 16-byte chunk c at
// c ^ (n & 7), 8-row atoms 1024 bytes apart), logical k l of step s holding the physical k that
// h3n_b_word pairs (l = 2 t, 2 t + 1: k0, k0 + 4 and l = 8 + 2 t, + 1: k0 + 1, k0 + 5 at step 2 i;
// k0 + 2, + 6 and k0 + 3, + 7 at step 2 i + 1; k0 = 64 t + 8 i), so the k order inside a chunk
// is the other forms'. Thread (n = lane & 7 (+ 8 j), t = lane >> 3) of warp w loads x's 32 bytes
// of groups i = 2 w, 2 w + 1 of its rows (past M: zeros) a chunk ahead into registers and stores
// their pairs at the end of the chunk before (bank-conflict free: (c ^ n), t distinct in a
// warp); one barrier a chunk (buffer i % 3 was last read by chunk i - 3's wgmmas, retired
// before any warp passed chunk i - 1's end). A chunk: the scales, then 8 / GW commit groups of
// 2 GW wgmmas (bf16, fp32 accumulate), wgmma.wait_group 1 before each group's dequantization
// (two groups' A registers live). End: wait_group 0; the D fragment d[4 j + 2 h + q] = D[16 w +
// g + 8 h][8 j + 2 t + q] is weight row (y's column) by x row; S = 1: y = d * g * 2^7; S > 1:
// partials part[S, M, N], and the column group's last block (cnt[bx]) adds them in split order
// (h3n_add_partials). The sum order depends on M, N, K alone. Dynamic shared memory: 1024 + 3 NX
// 512 bytes (the buffers and the slack that aligns them; cu_nvfp4_wg_smem). Measured: docs/nvfp4.md.
// Compiled for sm_90a (the runtime loads these two kernels from the file's sm_90a build; the
// exact tier's sm_90 build leaves them out) and for the host emulation (emu_wgmma_bf16).
#if defined(H3_HOST_EMU) || !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define H3N_WG_BUILD 1
#else
#define H3N_WG_BUILD 0
#endif
#if H3N_WG_BUILD
// d += A B, m64nNXk16: A (the thread's 4 bf16 pairs) from registers, B (NX rows, K-major, 128-byte
// swizzle) at shared-memory descriptor b
template <int NX> H3_DI void h3n_wg_mma(float *d, const unsigned a[4], unsigned long long b);
#ifdef H3_HOST_EMU
template <int NX> H3_DI void h3n_wg_mma(float *d, const unsigned a[4], unsigned long long b) {
  emu_wgmma_bf16<NX>(d, a, b);
}
#else
template <> H3_DI void h3n_wg_mma<8>(float *d, const unsigned a[4], unsigned long long b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
template <> H3_DI void h3n_wg_mma<16>(float *d, const unsigned a[4], unsigned long long b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, "
               "{%8, %9, %10, %11}, %12, p, 1, 1, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
#endif

// A chunk's products of the warpgroup form: the lane's weights cur (rows g, g + 8 of its warp's
// 16) against x's chunk at shared-memory descriptor desc (h3n_wg's buffer layout), added to acc
// (m64nNXk16's D fragment) in 8 / GW commit groups of 2 GW wgmmas, each group's A registers
// dequantized after wgmma.wait_group 1 (the group before the last retired: two groups' A live).
template <int NX, int GW> H3_DI void h3n_wg_chunk(float *acc, const h3n_w (&cur)[2], unsigned long long desc) {
  unsigned S[2][4];
#pragma unroll
  for (int h = 0; h < 2; h++) h3n_scales(cur[h].s, S[h]);
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
        const int st = 2 * (GW * gi + e) + ks; // the chunk's k-step
        h3n_wg_mma<NX>(acc, a[e][ks], desc + (unsigned long long)(((st >> 2) * NX * 128 + (st & 3) * 32) >> 4));
      }
    h3_wg_commit();
  }
}

// The end of a warpgroup-form block of weight rows n0 .. n0 + 63: its wgmmas retired, the D
// fragment acc (weight row 16 w + g + 8 h by x row 8 j + 2 t + q at acc[4 j + 2 h + q]) goes to
// y = acc * g * 2^7 (one K split) or to split s's partials part[s], and the column group's last
// block (counter cnt[bx]) adds the splits in order (h3n_add_partials).
template <int NX>
H3_DI void h3n_wg_store(float *acc, const float *gp, O_T *y, float *part, unsigned *cnt, long long M, long long N,
                        long long n0) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  h3_wg_wait<0>();
  h3_wg_hold<NX / 2>(acc);
  const float gs = __fmul_rn(*gp, 128.0f); // g * 2^7: the products carry 2^-7
  const bool whole = gridDim.y == 1;
#pragma unroll
  for (int e = 0; e < NX / 2; e++) {
    const long long n = n0 + 16 * warp + g + 8 * ((e >> 1) & 1), m = 8 * (e >> 2) + 2 * t + (e & 1);
    if (m >= M || n >= N) continue;
    if (whole) h3_st(y, m * N + n, __fmul_rn(acc[e], gs));
    else part[(long long)blockIdx.y * M * N + m * N + n] = acc[e];
  }
  if (whole || !h3_last_block(cnt + blockIdx.x, gridDim.y)) return;
  h3n_add_partials<64, 128>(y, part, M, N, 0, (int)M, n0, gridDim.y, gs);
}

template <int NX, int NB, int GW>
H3_DI void h3n_wg(const h3_bf16 *__restrict__ x, const unsigned char *__restrict__ packed,
                  const unsigned char *__restrict__ scale, const float *__restrict__ gp, O_T *__restrict__ y,
                  float *__restrict__ part, unsigned *__restrict__ cnt, long long M, long long N, long long K) {
  static_assert(NX == 8 || NX == 16, "wgmma N");
  static_assert(8 % GW == 0, "commit groups of a chunk");
  constexpr int TX = NX / 8; // x rows a thread stages (8 apart)
  H3_DYN_SMEM(unsigned char, dyn);
  unsigned char *xs = reinterpret_cast<unsigned char *>(((unsigned long long)dyn + 1023) & ~1023ull);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const long long n0 = (long long)blockIdx.x * 64;
  const int nch = (int)(K / H3N_KC), cps = (nch + (int)gridDim.y - 1) / (int)gridDim.y;
  const int c0 = (int)blockIdx.y * cps, nc = c0 + cps < nch ? cps : nch - c0; // >= 1 (the launcher's splits)
  const unsigned char *p[2], *q[2];
  h3n_lane_rows(packed, scale, n0 + 16 * warp, N, K, g, t, p, q);
  uint4 xr[TX][2]; // x's next chunk: rows xn + 8 j, groups 2 w, 2 w + 1
  const int xn = lane & 7, xt = lane >> 3;
  auto load_x = [&](long long c) {
#pragma unroll
    for (int j = 0; j < TX; j++) {
      const long long m = xn + 8 * j;
      const uint4 *src = reinterpret_cast<const uint4 *>(x + m * K + c * H3N_KC + 64 * xt + 16 * warp);
      xr[j][0] = m < M ? h3_ldg16(src) : uint4{0u, 0u, 0u, 0u};
      xr[j][1] = m < M ? h3_ldg16(src + 1) : uint4{0u, 0u, 0u, 0u};
    }
  };
  auto store_x = [&](int b) {
    unsigned char *base = xs + b * NX * 512;
#pragma unroll
    for (int j = 0; j < TX; j++) {
      const int n = xn + 8 * j;
#pragma unroll
      for (int e = 0; e < 2; e++) {
        const int i = 2 * warp + e, ch = 4 * (i & 1); // group i: steps 2 i, 2 i + 1, column block i / 2
        unsigned char *row = base + (i >> 1) * NX * 128 + n * 128 + 4 * xt;
        const uint4 v = xr[j][e];
        *reinterpret_cast<unsigned *>(row + ((ch ^ (n & 7)) << 4)) = h3n_prmt(v.x, v.z, 0x5410u);
        *reinterpret_cast<unsigned *>(row + (((ch + 1) ^ (n & 7)) << 4)) = h3n_prmt(v.x, v.z, 0x7632u);
        *reinterpret_cast<unsigned *>(row + (((ch + 2) ^ (n & 7)) << 4)) = h3n_prmt(v.y, v.w, 0x5410u);
        *reinterpret_cast<unsigned *>(row + (((ch + 3) ^ (n & 7)) << 4)) = h3n_prmt(v.y, v.w, 0x7632u);
      }
    }
    h3_fence_async_smem();
  };
  float acc[NX / 2];
#pragma unroll
  for (int e = 0; e < NX / 2; e++) acc[e] = 0.0f;
  h3n_w w[NB][2];
#pragma unroll
  for (int d = 0; d < NB - 1; d++) h3n_skinny_w(w[d], p, q, d < nc ? c0 + d : nch, nch, K);
  load_x(c0);
  store_x(0);
  if (nc > 1) load_x(c0 + 1);
  __syncthreads();
  const unsigned xs0 = h3_smem_addr(xs);
  for (int i0 = 0; i0 < nc; i0 += NB) // as often in every thread
#pragma unroll
    for (int k = 0; k < NB; k++) {
      const int i = i0 + k;
      if (i >= nc) break;
      h3n_skinny_w(w[(k + NB - 1) % NB], p, q, i + NB - 1 < nc ? c0 + i + NB - 1 : nch, nch, K);
      h3n_wg_chunk<NX, GW>(acc, w[k % NB], h3_wg_desc(xs0 + (unsigned)(i % 3) * NX * 512, 16, 1024));
      if (i + 1 < nc) store_x((i + 1) % 3);
      if (i + 2 < nc) load_x(c0 + i + 2);
      __syncthreads();
    }
  h3n_wg_store<NX>(acc, gp, y, part, cnt, M, N, n0);
}
#endif

#define H3N_CAT2(a, b) a##b
#define H3N_CAT(a, b) H3N_CAT2(a, b)
// H3_NVFP4_NAME_m1, _m2, _m4: blocks of 16, 32 and 64 rows
#define H3N_KERNEL(MT)                                                                          \
  extern "C" __global__ void __launch_bounds__(H3N_THREADS, 2) H3N_CAT(H3_NVFP4_NAME, _m##MT)( \
      H3N_PARAMS) {                                                                             \
    h3n_gemm<MT>(x, packed, scale, gp, y, part, cnt, M, N, K, cps, vec);                      \
  }
H3N_KERNEL(1)
H3N_KERNEL(2)
H3N_KERNEL(4)
// H3_NVFP4_NAME_sk: the skinny form (3 blocks per SM: its rings hold it at 160 registers, of 168)
extern "C" __global__ void __launch_bounds__(32 * H3NS_WARPS, 3) H3N_CAT(H3_NVFP4_NAME, _sk)(
    const h3_bf16 *__restrict__ x, const unsigned char *__restrict__ packed, const unsigned char *__restrict__ scale,
    const float *__restrict__ gp, O_T *__restrict__ y, long long M, long long N, long long K) {
  h3n_skinny(x, packed, scale, gp, y, M, N, K);
}

// H3_NVFP4_NAME_sx, _sx16: the row-pair form, up to 8 and 9-16 rows (weight rings of 4 and 2 units
// hold them at 166 and 168 registers)
#define H3N_ROWS_KERNEL(SUFFIX, NT, NB)                                                                   \
  extern "C" __global__ void __launch_bounds__(32 * H3NS_WARPS, 3) H3N_CAT(H3_NVFP4_NAME, SUFFIX)(        \
      const h3_bf16 *__restrict__ x, const unsigned char *__restrict__ packed,                            \
      const unsigned char *__restrict__ scale, const float *__restrict__ gp, O_T *__restrict__ y,         \
      float *__restrict__ part, unsigned *__restrict__ cnt, long long M, long long N, long long K) {       \
    h3n_rows<NT, NB>(x, packed, scale, gp, y, part, cnt, M, N, K);                                         \
  }
H3N_ROWS_KERNEL(_sx, 1, 4)
H3N_ROWS_KERNEL(_sx16, 2, 2)

#if H3N_WG_BUILD
// H3_NVFP4_NAME_wg, _wg16: the warpgroup form, up to 8 and 9-16 rows
#define H3N_WG_KERNEL(SUFFIX, NX, NB, GW)                                                                 \
  extern "C" __global__ void __launch_bounds__(128, 3) H3N_CAT(H3_NVFP4_NAME, SUFFIX)(                    \
      const h3_bf16 *__restrict__ x, const unsigned char *__restrict__ packed,                            \
      const unsigned char *__restrict__ scale, const float *__restrict__ gp, O_T *__restrict__ y,         \
      float *__restrict__ part, unsigned *__restrict__ cnt, long long M, long long N, long long K) {       \
    h3n_wg<NX, NB, GW>(x, packed, scale, gp, y, part, cnt, M, N, K);                                       \
  }
H3N_WG_KERNEL(_wg, 8, 3, 2)
H3N_WG_KERNEL(_wg16, 16, 3, 2)
#endif

// ---- the dequantized form (M > 64): w_b for cuBLASLt ---------------------------------------
// H3_NVFP4_NAME_dq(packed, scale, wb, N, K) -> wb [N, K] bf16 = e2m1(code) * e4m3(scale)
// exactly (a NaN scale byte: NaN), for runtime/cuda/cuda_nvfp4.c's form of many rows: the
// weight dequantized into scratch slab by slab (N: a slab's rows), then cuBLASLt's bf16 GEMM
// with alpha = g (y = bf16(g * sum), the contract above up to the fp32 summation order). Needs
// K a multiple of 16 and wb 16-byte aligned, the codes 4-byte aligned. Launch: ceil(N K / 8 /
// 256) blocks of 256 threads; thread i takes code word i (8 k of one row: the rows of the codes
// and of wb are contiguous, so word i is wb's 16 bytes at 16 i and its scale byte i / 2): a
// warp reads 128 contiguous code bytes and writes 512 contiguous bytes of wb.
extern "C" __global__ void __launch_bounds__(256) H3N_CAT(H3_NVFP4_NAME, _dq)(
    const unsigned char *__restrict__ packed, const unsigned char *__restrict__ scale, h3_bf16 *__restrict__ wb,
    long long N, long long K) {
  const long long i = (long long)blockIdx.x * 256 + threadIdx.x;
  if (i >= N * (K / 8)) return;
  const unsigned b = scale[i >> 1];
  unsigned p[4];
  // the scale's bf16 pair (e4m3 * 2^119; NaN for a NaN byte), then the pairs (code P, code
  // P + 4) of e2m1 * e4m3 * 2^-7 times 2^7 (both products exact), in k order (0, 1) .. (6, 7)
  const unsigned S = (b & 0x7fu) == 0x7fu ? 0x7FC07FC0u : h3n_e4m3x2(b | b << 16);
  h3n_dequant_word(reinterpret_cast<const unsigned *>(packed)[i], S, p);
#pragma unroll
  for (int j = 0; j < 4; j++) p[j] = h3n_mul2(p[j], 0x43004300u);
  reinterpret_cast<uint4 *>(wb)[i] = uint4{h3n_prmt(p[0], p[1], 0x5410u), h3n_prmt(p[2], p[3], 0x5410u),
                                           h3n_prmt(p[0], p[1], 0x7632u), h3n_prmt(p[2], p[3], 0x7632u)};
}
