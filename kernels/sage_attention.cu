// sage_attention.cu: the attention of `sage_attention` (ops.def) on tensor cores for ONE
// segment of len rows, after kernels/sage_quant.cu's pre-passes (q's codes and deltas come from
// the q norm + RoPE kernel instead under sage-q-fusion, in the same layout: include/h3/sage.h)
// (their padded layouts: lp = len rounded up to 128; qc [Hq][lp][128] and kc [Hk][lp][128]
// int8, qd [Hq][lp / 64] and kd
// [Hk][lp / 64] their 64-row blocks' deltas; pv = fp8: vt [Hk][128][lp] e4m3 in sage_quant.cu's
// key order and vscale [Hk][128]; pv = bf16: v itself, bf16 [len, Hk, 128] with row stride
// v_stride). The CPU reference (runtime/cpu/ops_sage.c) fixes every rounding; this kernel
// multiplies the same int8 codes (int32 dot products: exact), takes the running maxima over
// the same 128-key blocks (a stage: two key tiles, each one block of kd) and rounds P and V to
// e4m3 (or P to bf16) as it does. It differs in fp32 details only: the scores in log2 units (dot
// * (dq * dk * scale * log2 e), one rounding chain against the reference's two products; in
// the wgmma forms with scale > 0, p's exponent one fma: h3s_exp) and 2^x by
// ex2.approx in place of expf (P within ~1e-6 relative: a rare P code lands one e4m3 step
// away), the order and precision of the sums (fp8: l and O per tile in the tensor cores' order
// and accumulator, then one fma of the tile into them; bf16: l per lane, then the quad).
//   h3cu_sage_fwd_fp8, h3cu_sage_fwd_bf16 (H3_SAGE_FWD_PARAMS) -> o bf16 at the segment's first
//     row (row stride o_stride), head n of row t at o + t * o_stride + n * 128.
// Grid (ceil(len / 128), Hq), 256 threads, one block per SM (240-255 registers).
// Block x takes query rows 128 x .. + 127 of q head y (kv head y / group); warp w its rows
// 16 w .. + 15 (in one 64-row q block: one delta dq), lane l = 4 g + c rows g and g + 8 as
// the M = 16 of mma.m16n8k32. Stages of 128 keys (two tiles of 64: each one k block, one
// delta dk) go into shared memory by cp.async, 3 stages (two in flight while one is used): K
// [128][128] int8 with 16-byte chunk c of key r at chunk c ^ (r & 7); fp8: V^T [128][128]
// e4m3 (dim, key) with chunk c of dim d at c ^ (d & 7); bf16: V [128][128] bf16 with chunk c
// of key r at c ^ (r & 7) (the 8 rows of an ldmatrix phase on distinct banks). Per stage and
// warp:
//   S = Q K^T of a tile: Q's A fragments in registers (4 k-steps of 32 dims, read once from qc),
//     K the B operand by ldmatrix.x4 (n = key, k = dim): 32 mma.m16n8k32 s8 -> s32, exact;
//   t = fp32(dot) * kq (log2 units); keys past len -inf; m' = max(m, the stage's rowmax t)
//     (quad shuffles); alpha = 2^(m - m'); p = 2^(t - m') (fp8: 2^(t - m' + log2 448) = p *
//     448); bf16: l = l * alpha + sum p (this lane's keys; the quad's sums added at the end),
//     fp8: l = l * alpha + the rows' sums of P, by an mma against a tile of ones. S of
//     the stage's first tile is computed twice: once for the maxima, once more for its P after
//     the second tile's P V (255 registers leave no room to keep both tiles' scores);
//   fp8: P = e4m3(p * 448) packed as the A fragments of 2 k-steps of 32 keys (sage_quant.cu's
//     order), V^T by ldmatrix.x4 (n = dim): 32 mma.m16n8k32 e4m3 -> f32; bf16: P = bf16(p),
//     V by ldmatrix.x4.trans: 64 mma.m16n8k16; each n-tile's product into zeroed registers,
//     then O = O * alpha + the tile's sum (fp32; SageAttention's "fp32 + fp32" accumulation;
//     alpha only with the stage's first P V).
// Output: fp8 O * vscale[d] / l (l the sum of P, the e4m3 codes of p * 448), bf16 O / l, rounded
// once to bf16.
// h3cu_sage_fwd_fp8_wg1 (H3_SAGE_FORM=wg1; GPU only, sm_90a) is the same math on the same
// pre-pass layouts in blocks of one warpgroup, TMA loads and both products as warpgroup MMAs,
// with its variant in clusters of 2 blocks h3cu_sage_fwd_fp8_wg1c (the default): see their
// comments below.

#define H3S_INF __int_as_float(0x7f800000) // NVRTC has no INFINITY
#define H3S_ROWS 128                       // query rows per block, 16 per warp
#define H3S_THREADS 256
#define H3S_KEYS 64         // keys per tile: one 64-row block of k
#define H3S_STAGE_KEYS 128  // keys per stage: two tiles
#define H3S_STAGES 3
#define H3S_KBYTES (H3S_STAGE_KEYS * 128) // a stage's K (int8), also its V^T (e4m3)

// the dynamic shared memory of the fp8 and bf16 forms: 3 stages of K and V (96, 144 KiB)
#define H3S_SMEM_FP8 (H3S_STAGES * 2 * H3S_KBYTES)
#define H3S_SMEM_BF16 (H3S_STAGES * 3 * H3S_KBYTES)

#define H3_SAGE_FWD_PARAMS                                                                        \
  const signed char *__restrict__ qc, const signed char *__restrict__ kc,                        \
      const unsigned char *__restrict__ vt, const h3_bf16 *__restrict__ v,                       \
      const float *__restrict__ qd, const float *__restrict__ kd, const float *__restrict__ vscale, \
      h3_bf16 *__restrict__ o, long long len, long long lp, long long v_stride, long long o_stride, \
      int group, float scale

// d += a * b, m16n8k32 with 8-bit operands: int8 -> int32 (exact) or e4m3 -> fp32; the
// fragments are those of h3_mma_bf16 with each 32-bit word 4 bytes of k (lane 4 g + c: a =
// {A[g][4c..], A[g+8][4c..], A[g][16+4c..], A[g+8][16+4c..]}, b = {B[4c..][g], B[16+4c..][g]},
// low byte the lower k). Host emulation: emu_mma_s8, emu_mma_e4m3 (tests/codegen/host_emu.h).
#define H3S_MMA_K32(types, acc)                                                                \
  asm volatile("mma.sync.aligned.m16n8k32.row.col." types " {%0, %1, %2, %3}, {%4, %5, %6, %7}, " \
               "{%8, %9}, {%0, %1, %2, %3};"                                                   \
               : acc(d[0]), acc(d[1]), acc(d[2]), acc(d[3])                                    \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
#ifdef H3_HOST_EMU
H3_DI void h3s_mma_s8(int *d, const unsigned *a, const unsigned *b) { emu_mma_s8(d, a, b); }
H3_DI void h3s_mma_e4m3(float *d, const unsigned *a, const unsigned *b) { emu_mma_e4m3(d, a, b); }
#else
H3_DI void h3s_mma_s8(int *d, const unsigned *a, const unsigned *b) { H3S_MMA_K32("s32.s8.s8.s32", "+r"); }
H3_DI void h3s_mma_e4m3(float *d, const unsigned *a, const unsigned *b) { H3S_MMA_K32("f32.e4m3.e4m3.f32", "+f"); }
#endif

// Keys 128 j .. + 127 of kv head h into a stage: K (16 KiB of kc), then V^T (fp8: 128 rows of
// 128 bytes of vt) or V (bf16: 128 keys of 256 bytes, zeros past len), this thread's 16-byte
// chunks
template <bool FP8>
H3_DI void h3s_load(unsigned char *stage, const signed char *kc, const unsigned char *vt,
                    const h3_bf16 *v, long long j, int h, long long len, long long lp, long long v_stride) {
  const int tid = threadIdx.x;
  uint4 *ks = reinterpret_cast<uint4 *>(stage), *vs = ks + H3S_KBYTES / 16;
  const signed char *ksrc = kc + ((long long)h * lp + j * H3S_STAGE_KEYS) * 128;
#pragma unroll
  for (int i = tid; i < H3S_KBYTES / 16; i += H3S_THREADS) { // key i / 8, chunk i % 8
    const int key = i >> 3, ch = i & 7;
    h3_cp16(ks + key * 8 + (ch ^ (key & 7)), ksrc + 16 * i);
  }
  if constexpr (FP8) {
#pragma unroll
    for (int i = tid; i < H3S_KBYTES / 16; i += H3S_THREADS) { // dim i / 8, chunk i % 8
      const int dim = i >> 3, ch = i & 7;
      h3_cp16(vs + dim * 8 + (ch ^ (dim & 7)), vt + ((long long)h * 128 + dim) * lp + j * H3S_STAGE_KEYS + 16 * ch);
    }
  } else {
#pragma unroll
    for (int i = tid; i < 2 * H3S_KBYTES / 16; i += H3S_THREADS) { // key i / 16, chunk i % 16
      const int key = i >> 4, ch = i & 15;
      const long long r = j * H3S_STAGE_KEYS + key;
      uint4 *dst = vs + key * 16 + (ch ^ (key & 7));
      if (r < len) h3_cp16(dst, v + r * v_stride + h * 128 + 8 * ch);
      else *dst = uint4{0u, 0u, 0u, 0u};
    }
  }
}

// The online softmax, in log2 units, over blocks of 128 keys (a stage: two 64-key tiles, each
// its own delta dk, so its own kq = dq * dk * scale * log2(e)); rows g, g + 8 of the lane: r =
// 0, 1. The int32 dots (|dot| <= 128 * 127 * 127 < 2^22) become x = fp32(dot) by one exact
// conversion (I2FP: it issues beside MUFU.EX2, not on its pipe: dev/pipe_rates.cu). A stage runs
//   h3s_scores (per tile) -> h3s_row_max (per tile, maxima combined) -> h3s_new_max (once)
//   -> h3s_exp (per tile)
// t = x * kq, -inf past len; m' = max(m, the stage's max t over the quad's lanes); alpha =
// 2^(m - m'); p = 2^(t - m' + lg) (lg = log2(448) for fp8: P's e4m3 input p * 448 directly; 0
// for bf16); bf16: l = l * alpha + this lane's sum of p (the quad's sums added at the end); fp8:
// l = l * alpha + the row's sum of P, by the tensor cores with P V (P times a tile of ones:
// h3s_pv_fp8, h3s_wg1_pv), complete in every lane of the quad. POS (kq >
// 0; the wgmma forms): pf keeps x, since rounding x * kq is monotone, max t = fp32(max x * kq),
// and p's exponent is one fma x * kq - (m' - lg), one rounding less. FULL: every key of the
// tile is live (no per-key test).
template <bool POS, bool FULL>
H3_DI void h3s_scores(const int sc[8][4], float pf[8][4], float kq, long long key0, long long len) {
  const int c = threadIdx.x & 3;
#pragma unroll
  for (int k = 0; k < 32; k++) {
    const int n = k >> 2, e = k & 3;
    const bool live = FULL || key0 + 8 * n + 2 * c + (e & 1) < len;
    const float x = __int2float_rn(sc[n][e]);
    pf[n][e] = live ? (POS ? x : __fmul_rn(x, kq)) : -H3S_INF;
  }
}

// The largest t of row r's 16 values of pf in this lane (POS: of x, times kq), as 4 chains of 4
// and their maximum (max is exact in any order; one chain of 16 dependent maxima held the
// exponentials back)
template <bool POS> H3_DI float h3s_row_max(const float pf[8][4], int r, float kq) {
  float mx[4];
#pragma unroll
  for (int i = 0; i < 4; i++) mx[i] = fmaxf(pf[i][2 * r], pf[i][2 * r + 1]);
#pragma unroll
  for (int i = 4; i < 8; i++) mx[i & 3] = fmaxf(mx[i & 3], fmaxf(pf[i][2 * r], pf[i][2 * r + 1]));
  const float xm = fmaxf(fmaxf(mx[0], mx[1]), fmaxf(mx[2], mx[3]));
  return POS ? __fmul_rn(xm, kq) : xm;
}

// The largest x of row r's 16 values of sc in this lane, from the int32 dots: 3-way integer
// maxima (VIMNMX3: half the instructions of pairwise float maxima, off the FP32 pipe) and one
// conversion of the kept dot give h3s_row_max's x
H3_DI float h3s_row_max_dots(const int sc[8][4], int r) {
  int v[16];
#pragma unroll
  for (int i = 0; i < 8; i++) v[2 * i] = sc[i][2 * r], v[2 * i + 1] = sc[i][2 * r + 1];
  int m[5];
#pragma unroll
  for (int i = 0; i < 5; i++) m[i] = __vimax3_s32(v[3 * i], v[3 * i + 1], v[3 * i + 2]);
  const int a = __vimax3_s32(m[0], m[1], m[2]), b = __vimax3_s32(m[3], m[4], v[15]);
  return __int2float_rn(a > b ? a : b);
}

// The rows' new maxima from this lane's stage maxima tm (t units; the quad's maximum taken
// here): alpha = 2^(m - m'), m = m', off = m' - lg (every thread calls it: shuffles)
H3_DI void h3s_new_max(const float tm[2], float lg, float m[2], float alpha[2], float off[2]) {
#pragma unroll
  for (int r = 0; r < 2; r++) {
    float x = tm[r];
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
    x = fmaxf(m[r], x);
    alpha[r] = h3_exp2_approx(__fsub_rn(m[r], x));
    m[r] = x;
    off[r] = __fsub_rn(x, lg);
  }
}

// p = 2^(t - off) of a tile in place (POS: pf holds x, t - off one fma); SUM (bf16): added to
// this lane's l
template <bool POS, bool SUM = false> H3_DI void h3s_exp(float pf[8][4], float kq, const float off[2], float *l) {
#pragma unroll
  for (int k = 0; k < 32; k++) {
    const int r = (k >> 1) & 1;
    float &x = pf[k >> 2][k & 3];
    x = h3_exp2_approx(POS ? __fmaf_rn(x, kq, -off[r]) : __fsub_rn(x, off[r]));
    if constexpr (SUM) l[r] = __fadd_rn(l[r], x);
  }
}

// The largest t of row r of a tile in this lane: from the int32 dots of sc when `dots` (every
// key live and kq > 0: then fp32(max x * kq) = max t), else from its scores pf
template <bool POS> H3_DI float h3s_tile_max(const int sc[8][4], const float pf[8][4], float kq, int r, bool dots) {
  return dots ? __fmul_rn(h3s_row_max_dots(sc, r), kq) : h3s_row_max<POS>(pf, r, kq);
}

// The mma forms' scores of a tile (kq of any sign: their 255 registers leave no room for more
// paths) and the largest t of each of its rows in this lane
H3_DI void h3s_scores_any(const int sc[8][4], float pf[8][4], float kq, long long key0, long long len, float tm[2]) {
  const bool full = key0 + H3S_KEYS <= len;
  if (full) h3s_scores<false, true>(sc, pf, kq, key0, len);
  else h3s_scores<false, false>(sc, pf, kq, key0, len);
#pragma unroll
  for (int r = 0; r < 2; r++) tm[r] = h3s_tile_max<false>(sc, pf, kq, r, full && kq > 0.0f);
}

// e4m3 of four p * 448 (h3s_exp's pf for fp8), packed in one word (a the low byte)
H3_DI unsigned h3s_p8(float a, float b, float c, float d) { return h3_e4m3x2(a, b) | h3_e4m3x2(c, d) << 16; }

// P = e4m3(p * 448) of a tile (pf) as the A fragments of its 2 k-steps of 32 keys, in vt's key
// order: n-tiles 4 kk, 4 kk + 1 in the first word of a row, 4 kk + 2, + 3 in the second
H3_DI void h3s_pack_p8(const float pf[8][4], unsigned pa[2][4]) {
#pragma unroll
  for (int kk = 0; kk < 2; kk++) {
    const int n = 4 * kk;
    pa[kk][0] = h3s_p8(pf[n][0], pf[n][1], pf[n + 1][0], pf[n + 1][1]);
    pa[kk][1] = h3s_p8(pf[n][2], pf[n][3], pf[n + 1][2], pf[n + 1][3]);
    pa[kk][2] = h3s_p8(pf[n + 2][0], pf[n + 2][1], pf[n + 3][0], pf[n + 3][1]);
    pa[kk][3] = h3s_p8(pf[n + 2][2], pf[n + 2][3], pf[n + 3][2], pf[n + 3][3]);
  }
}

// The softmax of a stage for the wgmma forms (the contract's 128-key block), from S of its two
// tiles sc0, sc1 (int32 accumulators, complete) with their kq0, kq1, into the e4m3 codes pa0, pa1
// (register A fragments) and the rows' factors alpha; m updated. POS, FULL as h3s_scores'; a
// row's largest t of a tile from the int32 dots where every key is live and kq > 0 (then
// fp32(max x * kq) = max t). tests/sage runs it on the host against the general path.
template <bool POS, bool FULL>
H3_DI void h3s_stage_softmax(const int sc0[8][4], const int sc1[8][4], unsigned pa0[2][4], unsigned pa1[2][4],
                             float kq0, float kq1, long long key0, long long len, float m[2], float alpha[2]) {
  float pf0[8][4], pf1[8][4], tm[2], off[2];
  h3s_scores<POS, FULL>(sc0, pf0, kq0, key0, len);
  h3s_scores<POS, FULL>(sc1, pf1, kq1, key0 + H3S_KEYS, len);
#pragma unroll
  for (int r = 0; r < 2; r++)
    tm[r] = fmaxf(h3s_tile_max<POS>(sc0, pf0, kq0, r, POS && FULL), h3s_tile_max<POS>(sc1, pf1, kq1, r, POS && FULL));
  h3s_new_max(tm, 8.807354922057604f, m, alpha, off); // lg = log2(448)
  h3s_exp<POS>(pf0, kq0, off, nullptr);
  h3s_pack_p8(pf0, pa0);
  h3s_exp<POS>(pf1, kq1, off, nullptr);
  h3s_pack_p8(pf1, pa1);
}

// a[j] = a[j] * alpha + t (one fma; rows g: alpha[0], g + 8: alpha[1]), the tile's sums of
// n-tile j
H3_DI void h3s_fold(float *a, const float *t, const float alpha[2]) {
#pragma unroll
  for (int i = 0; i < 4; i++) a[i] = __fmaf_rn(a[i], alpha[i >> 1], t[i]);
}

// e4m3 1.0 in every byte: the B operand (a tile of ones) whose product with P sums P's rows
#define H3S_ONES8 0x38383838u

// acc = acc * alpha + P V for tile sub (keys 64 sub .. + 63) of the fp8 V^T stage vs, and l = l
// * alpha + the rows' sums of P: P (h3s_pack_p8), V^T by ldmatrix.x4 (the tile's 64 bytes of 8
// dims, n = dim) and a tile of ones; each n-tile's product in a zeroed accumulator, then folded
H3_DI void h3s_pv_fp8(const unsigned char *vs, int sub, const float pf[8][4], const float alpha[2], float acc[16][4],
                      float l[2]) {
  const int lane = threadIdx.x & 31;
  unsigned pa[2][4];
  h3s_pack_p8(pf, pa);
  const unsigned ones[2] = {H3S_ONES8, H3S_ONES8};
  float ls[4] = {0.0f, 0.0f, 0.0f, 0.0f}; // the rows' sums (rows g: ls[0] = ls[1]; g + 8: ls[2])
  h3s_mma_e4m3(ls, pa[0], ones);
  h3s_mma_e4m3(ls, pa[1], ones);
  l[0] = __fmaf_rn(l[0], alpha[0], ls[0]), l[1] = __fmaf_rn(l[1], alpha[1], ls[2]);
#pragma unroll
  for (int j = 0; j < 16; j++) { // dims 8 j .. + 7
    const int dim = 8 * j + (lane & 7);
    unsigned f[4];
    h3_ldsm4(f, vs + dim * 128 + (((4 * sub + (lane >> 3)) ^ (dim & 7)) * 16));
    const unsigned b0[2] = {f[0], f[1]}, b1[2] = {f[2], f[3]};
    float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    h3s_mma_e4m3(t, pa[0], b0);
    h3s_mma_e4m3(t, pa[1], b1);
    h3s_fold(acc[j], t, alpha);
  }
}

// acc = acc * alpha + P V for the bf16 V tile vs: P = bf16(p) as the A fragments of 4 k16
// steps, V the B operand by ldmatrix.x4.trans (k = key, n = dim); each pair of n-tiles'
// product in zeroed accumulators, then folded into acc
H3_DI void h3s_pv_bf16(const unsigned char *vsb, const float pf[8][4], const float alpha[2], float acc[16][4]) {
  const int lane = threadIdx.x & 31;
  const h3_bf16 *vs = reinterpret_cast<const h3_bf16 *>(vsb);
  unsigned pa[4][4];
#pragma unroll
  for (int ks = 0; ks < 4; ks++) { // keys 16 ks .. + 15
    pa[ks][0] = h3_bf16x2(pf[2 * ks][0], pf[2 * ks][1]), pa[ks][1] = h3_bf16x2(pf[2 * ks][2], pf[2 * ks][3]);
    pa[ks][2] = h3_bf16x2(pf[2 * ks + 1][0], pf[2 * ks + 1][1]);
    pa[ks][3] = h3_bf16x2(pf[2 * ks + 1][2], pf[2 * ks + 1][3]);
  }
#pragma unroll
  for (int dp = 0; dp < 8; dp++) { // dims 16 dp .. + 15: n-tiles 2 dp, 2 dp + 1
    float t[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int ks = 0; ks < 4; ks++) {
      const int row = 16 * ks + (lane & 7) + 8 * ((lane >> 3) & 1);
      unsigned f[4];
      h3_ldsm4_trans(f, vs + row * 128 + (((2 * dp + (lane >> 4)) ^ (lane & 7)) * 8));
      const unsigned b0[2] = {f[0], f[1]}, b1[2] = {f[2], f[3]};
      h3_mma_bf16(t[0], pa[ks], b0);
      h3_mma_bf16(t[1], pa[ks], b1);
    }
    h3s_fold(acc[2 * dp], t[0], alpha);
    h3s_fold(acc[2 * dp + 1], t[1], alpha);
  }
}

// The output rows of this lane (r0 + g, + 8 of q head n, kv head h; those < len): fp8 O *
// vscale[d] / l (l the sum of P, the codes of p * 448), bf16 O / l (l summed over the quad
// first: every thread calls it, shuffles), rounded once
template <bool FP8>
H3_DI void h3s_store(h3_bf16 *o, long long o_stride, int n, int h, long long r0, long long len, const float *vscale,
                     const float acc[16][4], float l[2]) {
  const int g = (threadIdx.x & 31) >> 2, c = threadIdx.x & 3;
#pragma unroll
  for (int r = 0; r < 2; r++) {
    if constexpr (!FP8) {
      l[r] = __fadd_rn(l[r], __shfl_xor_sync(0xffffffffu, l[r], 1));
      l[r] = __fadd_rn(l[r], __shfl_xor_sync(0xffffffffu, l[r], 2));
    }
    const long long t = r0 + g + 8 * r;
    if (t >= len) continue;
    h3_bf16 *ot = o + t * o_stride + (long long)n * 128;
#pragma unroll
    for (int j = 0; j < 16; j++) {
      const int d = 8 * j + 2 * c;
      float y[2];
#pragma unroll
      for (int e = 0; e < 2; e++)
        y[e] = __fdiv_rn(FP8 ? __fmul_rn(acc[j][2 * r + e], vscale[h * 128 + d + e]) : acc[j][2 * r + e], l[r]);
      h3_st2(ot + d, y[0], y[1]);
    }
  }
}

// Q's A fragments of this lane (4 k-steps of 32 dims; the 8-bit A fragment of mma.m16n8k32 and
// of wgmma: dims 32 kk + 4 c (+ 16) of rows g, g + 8) from the codes of the warp's 16 rows at q
// (128 bytes a row; zero codes past len)
H3_DI void h3s_load_qa(const signed char *q, unsigned qa[4][4]) {
  const int g = (threadIdx.x & 31) >> 2, c = threadIdx.x & 3;
  const unsigned *qg = reinterpret_cast<const unsigned *>(q + g * 128);
#pragma unroll
  for (int kk = 0; kk < 4; kk++) {
    qa[kk][0] = qg[8 * kk + c], qa[kk][1] = qg[8 * 32 + 8 * kk + c];
    qa[kk][2] = qg[8 * kk + 4 + c], qa[kk][3] = qg[8 * 32 + 8 * kk + 4 + c];
  }
}

template <bool FP8> H3_DI void h3s_fwd(H3_SAGE_FWD_PARAMS) {
  H3_DYN_SMEM(unsigned char, smem); // stage s at s * (FP8 ? 2 : 3) * H3S_KBYTES: K, then V
  constexpr int STAGE = (FP8 ? 2 : 3) * H3S_KBYTES;
  const int warp = threadIdx.x >> 5, n = blockIdx.y, h = n / group;
  const long long r0 = (long long)blockIdx.x * H3S_ROWS + 16 * warp; // the warp's first row
  unsigned qa[4][4];
  h3s_load_qa(qc + ((long long)n * lp + r0) * 128, qa);
  const float dq = qd[(long long)n * (lp / 64) + r0 / 64], sl2 = __fmul_rn(scale, 1.4426950408889634f);
  float acc[16][4], m[2] = {-H3S_INF, -H3S_INF}, l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int j = 0; j < 16; j++)
#pragma unroll
    for (int i = 0; i < 4; i++) acc[j][i] = 0.0f;
  const int nt = (int)((len + H3S_STAGE_KEYS - 1) / H3S_STAGE_KEYS);
  const float lg = FP8 ? 8.807354922057604f : 0.0f; // log2(448)
#pragma unroll
  for (int i = 0; i < H3S_STAGES - 1; i++) {
    if (i < nt) h3s_load<FP8>(smem + i * STAGE, kc, vt, v, i, h, len, lp, v_stride);
    h3_cp_commit();
  }
  for (int it = 0; it < nt; it++) { // as often in every thread
    h3_cp_wait_pending<H3S_STAGES - 2>();
    __syncthreads(); // stage it is in; every warp is done with the stage loaded next
    const int nx = it + H3S_STAGES - 1;
    if (nx < nt) h3s_load<FP8>(smem + (nx % H3S_STAGES) * STAGE, kc, vt, v, nx, h, len, lp, v_stride);
    h3_cp_commit();
    const unsigned char *ks = smem + (it % H3S_STAGES) * STAGE, *vs = ks + H3S_KBYTES;
    const float *kdh = kd + (long long)h * (lp / 64) + 2 * it; // the stage's two blocks (lp / 64 even)
    const float dk0 = kdh[0], dk1 = kdh[1];
    // the stage's softmax block: tile 0's scores for its maxima, tile 1's (if any key of it is
    // live) kept for P, then tile 0's recomputed for P (no room for both tiles' 64 scores)
    const long long key0 = (long long)it * H3S_STAGE_KEYS;
    const bool two = key0 + H3S_KEYS < len; // in every thread alike
    const float kq0 = __fmul_rn(__fmul_rn(dq, dk0), sl2), kq1 = __fmul_rn(__fmul_rn(dq, dk1), sl2);
    int sc[8][4];
    float pf[8][4], tm[2], t1[2], alpha[2], off[2];
    h3_tile_qk<2, int, h3s_mma_s8>(ks, qa, sc, 0);
    h3s_scores_any(sc, pf, kq0, key0, len, tm);
    if (two) {
      h3_tile_qk<2, int, h3s_mma_s8>(ks + H3S_KBYTES / 2, qa, sc, 0);
      h3s_scores_any(sc, pf, kq1, key0 + H3S_KEYS, len, t1);
      tm[0] = fmaxf(tm[0], t1[0]), tm[1] = fmaxf(tm[1], t1[1]);
    }
    h3s_new_max(tm, lg, m, alpha, off);
    if constexpr (!FP8) l[0] = __fmul_rn(l[0], alpha[0]), l[1] = __fmul_rn(l[1], alpha[1]);
    h3s_exp<false, !FP8>(pf, 0.0f, off, l);
    if constexpr (FP8) h3s_pv_fp8(vs, two, pf, alpha, acc, l);
    else h3s_pv_bf16(vs + two * H3S_KBYTES, pf, alpha, acc);
    if (two) {
      const float one[2] = {1.0f, 1.0f};
      h3_tile_qk<2, int, h3s_mma_s8>(ks, qa, sc, 0);
      h3s_scores<false, true>(sc, pf, kq0, key0, len);
      h3s_exp<false, !FP8>(pf, 0.0f, off, l);
      if constexpr (FP8) h3s_pv_fp8(vs, 0, pf, one, acc, l);
      else h3s_pv_bf16(vs, pf, one, acc);
    }
  }
  h3s_store<FP8>(o, o_stride, n, h, r0, len, vscale, acc, l);
}

extern "C" __global__ void __launch_bounds__(H3S_THREADS, 1) h3cu_sage_fwd_fp8(H3_SAGE_FWD_PARAMS) {
  h3s_fwd<true>(qc, kc, vt, v, qd, kd, vscale, o, len, lp, v_stride, o_stride, group, scale);
}

extern "C" __global__ void __launch_bounds__(H3S_THREADS, 1) h3cu_sage_fwd_bf16(H3_SAGE_FWD_PARAMS) {
  h3s_fwd<false>(qc, kc, vt, v, qd, kd, vscale, o, len, lp, v_stride, o_stride, group, scale);
}


#ifndef H3_HOST_EMU
// ---- the one-warpgroup warpgroup-MMA form of pv = fp8: h3cu_sage_fwd_fp8_wg1 (H3_SAGE_FORM=wg1;
// GPU only, sm_90a; the host emulation has no warpgroup MMA, so tests/sage checks the mma form
// above and tests/gpu/test_gpu_ops every form on the GPU) and the same in clusters of 2 blocks,
// h3cu_sage_fwd_fp8_wg1c (pv = fp8's default; one body, h3s_wg1_fwd<CLUSTER>). The public
// SageAttention SM90 kernel's organisation (dev/sage-attention.md) on the pre-passes' layouts,
// with the mma form's scores, softmax blocks, P and V codes and output; T, a stage's P V, is
// summed in the tensor cores over its 128 keys and folded into O once (the two-level
// accumulation's inner level 128 keys here, 64 in the mma form).
//   h3cu_sage_fwd_fp8_wg1(tk, tv, qc, qd, kd, vscale, o, len, lp, o_stride, group, scale), and
//     _wg1c with the same: tk, tv the TMA maps (runtime/cuda/cuda_sage.c) of kc as bytes [Hk
//     lp][128] and vt as [Hk 128][lp], boxes of 128 x 128 bytes, 128-byte swizzle; the rest as
//     in H3_SAGE_FWD_PARAMS.
// wgmma's 8-bit A fragment (warp w % 4, lane 4 g + c: {A[16 w + g][4 c ..], A[16 w + g + 8][4
// c ..], A[16 w + g][16 + 4 c ..], A[16 w + g + 8][16 + 4 c ..]}) is mma.m16n8k32's, and its
// accumulators (d[4 n + e]: row 16 w + g (+ 8 for e >= 2), column 8 n + 2 c + (e & 1)) are the
// mma form's n-tiles, so vt's key order makes the accumulators of S the A fragments of P V,
// and the softmax and P words are the mma form's code (h3s_scores .. h3s_exp, h3s_pack_p8).
// wg1: grid (ceil(len / 64), Hq); wg1c: grid x rounded up to even (__cluster_dims__(2, 1,
// 1)). One warpgroup (128 threads), 3 blocks per SM (<= 168 registers, 74 KiB of shared memory
// each): no producer warp and no ordering between
// warpgroups; tensor work, softmax and loads overlap across the SM's blocks. Block x takes
// query rows 64 x .. + 63 of q head y (one q block: one delta dq; kv head h = y / group), warp
// w its rows 16 w .. + 15, and walks the ceil(len / 128) stages j of 128 keys (two 64-key
// tiles: k blocks 2 j, 2 j + 1, each its delta kd):
//   thread 0 first loads stage j + 1 by TMA into slot (j + 1) % 2 (h3s_wg1_load: once stage
//     j - 1 was released there), then every thread waits for stage j in slot j % 2;
//   S = Q K^T of the stage (both halves: 4 wgmma m64n128k32 s8, Q and K from shared memory;
//     S0, S1 the accumulators' two halves), one group (wg1c: thread 0 loads stage j + 1 only
//     now, so that its wait for the other block's release of stage j - 1 runs under the
//     products); once it is in, the stage's softmax (h3s_stage_softmax: both halves' scores and maxima,
//     one new maximum m' = max(m, the stage's keys) a row, P0 and P1 as e4m3 codes in register A
//     fragments);
//   T = P0 V0 + P1 V1 (4 wgmma m64n128k32 e4m3) and the rows' sums of P0 and P1 (4 m64n8k32
//     against a tile of ones), one group, waited; lane 0 of each warp releases the slot
//     (h3s_wg1_release); O = O * alpha + T (h3s_fold, fp32), l = l * alpha + the sums.
// A half past len runs masked (every key -inf: P 0; V^T's padding holds zero codes). Q sits in
// shared memory: the 16 registers it frees keep O, T and both halves' P codes within 168
// without spills (a variant with Q in registers at 2 blocks an SM measured 16 % slower:
// dev/sage-attention.md).
// Synchronisation, mbarriers (h3s_wg1_bars): slot s full (1 arrival + 32 KiB of TMA bytes; stage
// j waits for parity (j / 2) & 1); slot s empty (releases; thread 0 waits for parity (j / 2 -
// 1) & 1 before loading stage j >= 2 into it).
//   wg1: 4 releases, lane 0 of each warp. Warp 0 releases stage j - 1 before thread 0 waits,
//     the other warps after their last wgmma wait on it, so no slot is overwritten while read
//     and no phase is passed unseen (stage j + 2 needs every warp past stage j).
//   wg1c: blocks 2 i and 2 i + 1 (cluster ranks 0 and 1) are two 64-row tiles of one q head,
//     so they read the same stages, and each stage comes from L2 once per cluster: thread 0 of
//     rank 0 loads the K box, thread 0 of rank 1 the V^T box, each by TMA .multicast::cluster
//     into the slot of both blocks (the same shared-memory offsets; 16 KiB each); each block's
//     full barrier expects the whole 32 KiB from its own thread 0 (the other block's box may
//     land first: the transaction count is negative for a while, the phase still waits for
//     the arrival). Empty counts 8 releases: lane 0 of each warp of both blocks arrives on the
//     slot's barrier in its own block and in the other (through mapa), so a thread 0 that saw
//     a phase knows that neither block reads the slot and may multicast into both. Every full
//     phase needs both blocks' boxes, each loaded after its thread 0 saw the slot's previous
//     phase on its own barrier: so a warp's release of stage j (after its wait for stage j)
//     follows the phase of stage j - 2 on both blocks' empty barriers (no release falls into
//     an earlier phase), no box of stage j + 2 lands before both blocks finished stage j, and
//     a block leads the other by at most one stage (its thread 0 loads stage j + 1 once both
//     released stage j - 1; its other warps go on with their softmax meanwhile). Start:
//     thread 0 initialises the barriers (fence.mbarrier_init.release.cluster), then every
//     thread of both blocks passes a cluster barrier before the first multicast or remote
//     arrival. Exit: every thread arrives on a cluster barrier after its last release and
//     waits on it after its store, so a block leaves once the other's last arrivals on its
//     barriers are in (every box into it landed: it waited for its last stage). A block whose
//     rows are all past len (the last, when ceil(len / 64) is odd) computes and stores nothing
//     but loads its box of every stage and releases each stage once it is in, as its partner
//     needs (h3s_wg1c_idle).
// Shared memory (H3S_SMEM_WG1): 1 KiB of alignment slack, 2 slots of K and V^T [128][128],
// then Q [64][128], then the tile of ones [8][128]; each a tile of 128-byte rows with 16-byte
// chunk c of row r at chunk c ^ (r & 7) (TMA's 128B swizzle, the layout the wgmma descriptors
// read: 1024-byte atoms).
#define H3S_WG1_THREADS 128
#define H3S_WG1_ROWS 64   // query rows per block: one q block
#define H3S_WG1_STAGES 2  // the ring: 2 stages of 128 keys (64 KiB)
#define H3S_WG1_BLOCKS 3  // blocks per SM: 168 registers, 3 x 74 KiB of shared memory
#define H3S_WG1_QOFF (H3S_WG1_STAGES * 2 * H3S_KBYTES) // Q's offset from the slots
#define H3S_WG1_ONES (H3S_WG1_QOFF + H3S_WG1_ROWS * 128) // the tile of ones' offset (1 KiB)
#define H3S_SMEM_WG1 (1024 + H3S_WG1_ONES + 1024)
#define H3S_SLOT_DESC (2 * H3S_KBYTES >> 4) // a slot, in descriptor units
typedef h3_ring<H3S_WG1_STAGES> h3s_wg1_bars;
#define H3S_R8(d, i) "+r"((d)[i]), "+r"((d)[(i) + 1]), "+r"((d)[(i) + 2]), "+r"((d)[(i) + 3]), \
    "+r"((d)[(i) + 4]), "+r"((d)[(i) + 5]), "+r"((d)[(i) + 6]), "+r"((d)[(i) + 7])

// The shared-memory operands' wgmma descriptors as their low words: those of h3_wg_desc(addr,
// 16, 1024) (start address >> 4, leading byte offset 16; + n moves the start by 16 n bytes),
// whose high word (stride byte offset 1024, 128-byte swizzle) is H3S_DESC_HI for every tile
// (32-bit arithmetic on the low words only)
#define H3S_DESC_HI 0x40000040u
H3_DI unsigned h3s_desc(unsigned addr) { return (unsigned)h3_wg_desc(addr, 16, 1024); }

// d[64] (int32) (+)= A B^T, m64n128k32 s8, A and B from shared memory (descriptors' low words a,
// b; B's 128 rows are the stage's two tiles of K, so d[0 .. 31] is tile 0's S and d[32 .. 63]
// tile 1's, each in the m64n64 accumulator layout); acc = 0 overwrites d. One n128 product in
// place of two n64 ones reads Q from shared memory once a k-step instead of twice
H3_DI void h3s_wg_qk_ss(int *d, unsigned a, unsigned b, int acc) {
  asm volatile("{\n.reg .pred p;\n.reg .b64 da, db;\nsetp.ne.b32 p, %64, 0;\nmov.b64 da, {%65, %67};\n"
               "mov.b64 db, {%66, %67};\n"
               "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {" H3_WG_OPS64 "}, da, db, p;\n}\n"
               : H3S_R8(d, 0), H3S_R8(d, 8), H3S_R8(d, 16), H3S_R8(d, 24), H3S_R8(d, 32), H3S_R8(d, 40),
                 H3S_R8(d, 48), H3S_R8(d, 56)
               : "r"(acc), "r"(a), "r"(b), "r"(H3S_DESC_HI));
}

// d[64] (fp32) (+)= A B^T, m64n128k32 e4m3: A the 8-bit A fragment a[4] in registers, B from
// shared memory (descriptor's low word b); acc = 0 overwrites d
H3_DI void h3s_wg_pv(float *d, const unsigned *a, unsigned b, int acc) {
  asm volatile("{\n.reg .pred p;\n.reg .b64 db;\nsetp.ne.b32 p, %68, 0;\nmov.b64 db, {%69, %70};\n"
               "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {" H3_WG_OPS64 "}, "
               "{%64, %65, %66, %67}, db, p, 1, 1;\n}\n"
               : H3_WG_C64(d, 0)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(acc), "r"(b), "r"(H3S_DESC_HI));
}

// d[4] (fp32) (+)= A B^T, m64n8k32 e4m3: A the 8-bit A fragment a[4] in registers, B from shared
// memory (descriptor's low word b: the tile of ones, so d sums A's rows); acc = 0 overwrites d
H3_DI void h3s_wg_rowsum(float *d, const unsigned *a, unsigned b, int acc) {
  asm volatile("{\n.reg .pred p;\n.reg .b64 db;\nsetp.ne.b32 p, %8, 0;\nmov.b64 db, {%9, %10};\n"
               "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, "
               "{%4, %5, %6, %7}, db, p, 1, 1;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(acc), "r"(b), "r"(H3S_DESC_HI));
}

// pins the 64 int32 registers d where the call stands: reads of wgmma results after the wait
// that precedes it
H3_DI void h3s_wg_hold(int *d) {
#pragma unroll
  for (int i = 0; i < 64; i++) asm volatile("" : "+r"(d[i])::"memory");
}

// v as computed where the call stands: the compiler may not recompute it from its sources in a
// loop below (the descriptors' shared-memory addresses, else rebuilt every stage)
H3_DI unsigned h3s_pin(unsigned v) {
  asm volatile("" : "+r"(v));
  return v;
}

// *p, loaded where the call stands (the compiler may not sink it under a barrier wait)
H3_DI float h3s_ldg(const float *p) {
  float x;
  asm volatile("ld.global.nc.f32 %0, [%1];" : "=f"(x) : "l"(p));
  return x;
}

// S = Q K^T of a 128-key stage into sc (sc[0]: tile 0, sc[1]: tile 1): 4 k-steps of 32 dims of
// Q (descriptor dq) and the stage's K (descriptor dk; 32 bytes a k-step: 2 descriptor units),
// the first overwriting sc (no initial values to set)
H3_DI void h3s_wg1_qk(int sc[2][8][4], unsigned dq, unsigned dk) {
#pragma unroll
  for (int kk = 0; kk < 4; kk++) h3s_wg_qk_ss(&sc[0][0][0], dq + 2 * kk, dk + 2 * kk, kk);
}

// The block's 64 rows of Q codes at q (128 bytes a row) into shared memory at qs (generic
// pointer, 1024-aligned) in the 128-byte swizzle, and the tile of ones after them (8 rows of 128
// e4m3 1.0: h3s_wg_rowsum's B, any k-step), made visible to the wgmmas (async proxy) of the
// threads past the block's next barrier
H3_DI void h3s_wg1_load_q(unsigned char *qs, const signed char *q) {
#pragma unroll
  for (int i = threadIdx.x; i < H3S_WG1_ROWS * 8; i += H3S_WG1_THREADS) { // row i / 8, chunk i % 8
    const int row = i >> 3, ch = i & 7;
    *reinterpret_cast<uint4 *>(qs + row * 128 + 16 * (ch ^ (row & 7))) =
        *reinterpret_cast<const uint4 *>(q + 16 * i);
  }
  if (threadIdx.x < 1024 / 16)
    reinterpret_cast<uint4 *>(qs + H3S_WG1_ONES - H3S_WG1_QOFF)[threadIdx.x] =
        uint4{H3S_ONES8, H3S_ONES8, H3S_ONES8, H3S_ONES8};
  h3_fence_async_smem();
}

// T = P0 V0 + P1 V1 of a stage and ls its rows' sums of P (P codes pa0, pa1; V^T at descriptor
// dv, the tile of ones at d1): 4 wgmma m64n128k32 e4m3 (2 k-steps of 32 keys a half, at bytes
// 64 half + 32 kk of V^T's rows) and 4 m64n8k32 (ls: rows 16 w + g in ls[0] (= ls[1]), + 8 in
// ls[2]), the first of each overwriting, one group; both complete on return
H3_DI void h3s_wg1_pv(float t[64], float ls[4], const unsigned pa0[2][4], const unsigned pa1[2][4], unsigned dv,
                      unsigned d1) {
  h3_wg_fence();
#pragma unroll
  for (int kk = 0; kk < 2; kk++) {
    h3s_wg_pv(t, pa0[kk], dv + (unsigned)(32 * kk >> 4), kk);
    h3s_wg_rowsum(ls, pa0[kk], d1, kk);
  }
#pragma unroll
  for (int kk = 0; kk < 2; kk++) {
    h3s_wg_pv(t, pa1[kk], dv + (unsigned)((64 + 32 * kk) >> 4), 1);
    h3s_wg_rowsum(ls, pa1[kk], d1, 1);
  }
  h3_wg_commit();
  h3_wg_wait<0>();
  h3_wg_hold<64>(t);
  h3_wg_hold<4>(ls);
}

// A block's loads: the TMA maps, its slots ss (then Q), barriers, the kv head's first rows of K
// (krow) and V^T (vrow), the stage count nst and the cluster rank (wg1: 0)
struct h3s_wg1_ctx {
  const h3_tmap *tk, *tv;
  unsigned ss;
  h3s_wg1_bars bar;
  int krow, vrow, nst;
  unsigned rank;
};

// Thread 0: stage j (K rows krow + 128 j .. + 127 of tk, V^T columns 128 j .. + 127 of rows
// vrow .. + 127 of tv: 32 KiB) into slot j % 2 (K, then V^T), once the slot's releases of stage
// j - 2 are in (the empty barrier's phase (j / 2 - 1)), the full barrier expecting all 32 KiB.
// wg1c: only this block's box, rank 0 the K box and rank 1 the V^T box, each by multicast into
// both blocks
template <bool CLUSTER> H3_DI void h3s_wg1_load(const h3s_wg1_ctx &c, int j) {
  const int s = j % H3S_WG1_STAGES;
  if (j >= H3S_WG1_STAGES) h3_bar_wait(c.bar.empty(s), (unsigned)((j / H3S_WG1_STAGES - 1) & 1));
  const unsigned ks = c.ss + (unsigned)(s * 2 * H3S_KBYTES);
  h3_bar_expect(c.bar.full(s), 2 * H3S_KBYTES);
  if constexpr (CLUSTER) {
    if (c.rank == 0) h3_tma_both(ks, c.tk, 0, c.krow + H3S_STAGE_KEYS * j, c.bar.full(s));
    else h3_tma_both(ks + H3S_KBYTES, c.tv, H3S_STAGE_KEYS * j, c.vrow, c.bar.full(s));
  } else {
    h3_tma(ks, c.tk, 0, c.krow + H3S_STAGE_KEYS * j, c.bar.full(s));
    h3_tma(ks + H3S_KBYTES, c.tv, H3S_STAGE_KEYS * j, c.vrow, c.bar.full(s));
  }
}

// Every thread, once its warp's wgmmas that read slot s retired: lane 0 releases the slot (wg1c:
// in both blocks)
template <bool CLUSTER> H3_DI void h3s_wg1_release(const h3s_wg1_ctx &c, int s) {
  if ((threadIdx.x & 31) != 0) return;
  if constexpr (CLUSTER) h3_arrive_other(c.bar.empty(s), c.rank);
  h3_bar_arrive(c.bar.empty(s));
}

// wg1c's block past len: thread 0 loads its box of every stage, every warp releases each stage
// once it is in; then the exit barrier's arrival
H3_DI void h3s_wg1c_idle(const h3s_wg1_ctx &c) {
  for (int j = 0; j < c.nst; j++) { // as often in every thread
    if (threadIdx.x == 0 && j + 1 < c.nst) h3s_wg1_load<true>(c, j + 1);
    h3_bar_wait(c.bar.full(j & 1), (unsigned)((j >> 1) & 1));
    h3s_wg1_release<true>(c, j & 1);
  }
  h3_cluster_arrive();
}

// The block's 64 rows of q head n (kv head h) from q0 over the stages (the contract above);
// wg1c: the exit barrier's arrival after the last release
template <bool CLUSTER>
H3_DI void h3s_wg1_rows(const h3s_wg1_ctx &c, const float *qd, const float *kd,
                        const float *vscale, h3_bf16 *o, long long len, long long lp, long long o_stride, int n, int h,
                        long long q0, float scale) {
  const int tid = threadIdx.x, nst = c.nst;
  const float *kdh = kd + (long long)h * (lp / 64);
  const float dq = qd[(long long)n * (lp / 64) + blockIdx.x], sl2 = __fmul_rn(scale, 1.4426950408889634f);
  const unsigned dqs = h3s_pin(h3s_desc(c.ss + H3S_WG1_QOFF)), dks = h3s_pin(h3s_desc(c.ss));
  const unsigned dvs = dks + (H3S_KBYTES >> 4), d1 = h3s_pin(h3s_desc(c.ss + H3S_WG1_ONES));
  float acc[16][4], t[64], ls[4], m[2] = {-H3S_INF, -H3S_INF}, l[2] = {0.0f, 0.0f}, al[2];
  unsigned pa0[2][4], pa1[2][4];
  int sc[2][8][4]; // S of the stage's tiles
#pragma unroll
  for (int j = 0; j < 16; j++)
#pragma unroll
    for (int i = 0; i < 4; i++) acc[j][i] = 0.0f;
  float dk0 = h3s_ldg(kdh), dk1 = h3s_ldg(kdh + 1); // stage j's deltas (lp / 64 is even)
  for (int j = 0; j < nst; j++) { // as often in every thread
    const int s = j & 1;
    const long long key0 = (long long)H3S_STAGE_KEYS * j;
    if (!CLUSTER && tid == 0 && j + 1 < nst) h3s_wg1_load<CLUSTER>(c, j + 1);
    h3_bar_wait(c.bar.full(s), (unsigned)((j >> 1) & 1));
    h3_wg_fence();
    const unsigned dk = dks + (unsigned)s * H3S_SLOT_DESC;
    h3s_wg1_qk(sc, dqs, dk);
    h3_wg_commit();
    if (CLUSTER && tid == 0 && j + 1 < nst) h3s_wg1_load<CLUSTER>(c, j + 1); // waits under S
    float nk0 = 0.0f, nk1 = 0.0f; // stage j + 1's deltas, read under the products
    if (j + 1 < nst) nk0 = h3s_ldg(kdh + 2 * j + 2), nk1 = h3s_ldg(kdh + 2 * j + 3);
    const float kq0 = __fmul_rn(__fmul_rn(dq, dk0), sl2), kq1 = __fmul_rn(__fmul_rn(dq, dk1), sl2);
    // S complete, then the stage's softmax
    h3_wg_wait<0>();
    h3s_wg_hold(&sc[0][0][0]);
    if (kq0 > 0.0f && kq1 > 0.0f) { // the common path: scale > 0
      if (key0 + H3S_STAGE_KEYS <= len) h3s_stage_softmax<true, true>(sc[0], sc[1], pa0, pa1, kq0, kq1, key0, len, m, al);
      else h3s_stage_softmax<true, false>(sc[0], sc[1], pa0, pa1, kq0, kq1, key0, len, m, al);
    } else {
      h3s_stage_softmax<false, false>(sc[0], sc[1], pa0, pa1, kq0, kq1, key0, len, m, al);
    }
    h3s_wg1_pv(t, ls, pa0, pa1, dvs + (unsigned)s * H3S_SLOT_DESC, d1);
    h3s_wg1_release<CLUSTER>(c, s);
#pragma unroll
    for (int i = 0; i < 16; i++) h3s_fold(acc[i], t + 4 * i, al);
    l[0] = __fmaf_rn(l[0], al[0], ls[0]), l[1] = __fmaf_rn(l[1], al[1], ls[2]);
    dk0 = nk0, dk1 = nk1;
  }
  if constexpr (CLUSTER) h3_cluster_arrive();
  h3s_store<true>(o, o_stride, n, h, q0 + 16 * (tid >> 5), len, vscale, acc, l);
}

// The kernels' body (the contract above): barriers, Q, stage 0, then the block's rows (wg1c: or
// the idle block's loads) and, wg1c, the exit barrier
template <bool CLUSTER>
H3_DI void h3s_wg1_fwd(const h3_tmap *tk, const h3_tmap *tv, const signed char *qc, const float *qd, const float *kd,
                       const float *vscale, h3_bf16 *o, long long len, long long lp, long long o_stride, int group,
                       float scale) {
  extern __shared__ unsigned char h3s_wg1_raw[];
  __shared__ unsigned long long h3s_bar_words[2 * H3S_WG1_STAGES];
  const unsigned base = h3_smem_addr(h3s_wg1_raw), ss = (base + 1023u) & ~1023u; // the slots, then Q
  const int n = blockIdx.y, h = n / group;
  const h3s_wg1_ctx c{tk, tv, ss, h3s_wg1_bars{h3_smem_addr(h3s_bar_words)}, (int)(h * lp), h * 128,
                      (int)((len + H3S_STAGE_KEYS - 1) / H3S_STAGE_KEYS), CLUSTER ? h3_cluster_rank() : 0u};
  const long long q0 = (long long)blockIdx.x * H3S_WG1_ROWS;
  if (threadIdx.x == 0) {
    c.bar.init((CLUSTER ? 2 : 1) * H3S_WG1_THREADS / 32);
    h3_prefetch_map(tk);
    h3_prefetch_map(tv);
    if (!CLUSTER) h3s_wg1_load<CLUSTER>(c, 0);
  }
  h3s_wg1_load_q(h3s_wg1_raw + (ss - base) + H3S_WG1_QOFF, qc + ((long long)n * lp + q0) * 128);
  if constexpr (CLUSTER) { // both blocks' barriers are set before either block signals the other's
    h3_cluster_sync();
    if (threadIdx.x == 0) h3s_wg1_load<CLUSTER>(c, 0);
  } else {
    __syncthreads();
  }
  if (CLUSTER && q0 >= len) h3s_wg1c_idle(c);
  else h3s_wg1_rows<CLUSTER>(c, qd, kd, vscale, o, len, lp, o_stride, n, h, q0, scale);
  if constexpr (CLUSTER) h3_cluster_wait(); // the other block's last arrivals here are in
}

extern "C" __global__ void __launch_bounds__(H3S_WG1_THREADS, H3S_WG1_BLOCKS) h3cu_sage_fwd_fp8_wg1(
    const __grid_constant__ h3_tmap tk, const __grid_constant__ h3_tmap tv, const signed char *__restrict__ qc,
    const float *__restrict__ qd, const float *__restrict__ kd, const float *__restrict__ vscale,
    h3_bf16 *__restrict__ o, long long len, long long lp, long long o_stride, int group, float scale) {
  h3s_wg1_fwd<false>(&tk, &tv, qc, qd, kd, vscale, o, len, lp, o_stride, group, scale);
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(H3S_WG1_THREADS, H3S_WG1_BLOCKS)
    h3cu_sage_fwd_fp8_wg1c(const __grid_constant__ h3_tmap tk, const __grid_constant__ h3_tmap tv,
                           const signed char *__restrict__ qc, const float *__restrict__ qd,
                           const float *__restrict__ kd, const float *__restrict__ vscale, h3_bf16 *__restrict__ o,
                           long long len, long long lp, long long o_stride, int group, float scale) {
  h3s_wg1_fwd<true>(&tk, &tv, qc, qd, kd, vscale, o, len, lp, o_stride, group, scale);
}
#endif
