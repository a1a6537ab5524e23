/* test_sage_emu.cpp: sage_attention's CUDA kernels (kernels/sage_quant.cu, sage_attention.cu)
 * run on the host under tests/codegen/host_emu.h (a thread per CUDA thread; ldmatrix, the
 * m16n8k32 int8 / e4m3 and m16n8k16 bf16 mma, shuffles and barriers block-wide), launched as
 * runtime/cuda/cuda_sage.c launches them (per segment: colstats, quant q, quant k, quant_v,
 * fwd), on random bf16 q, k, v (keys with per-channel offsets, as real keys have: smoothing
 * matters), head_dim 128:
 *   - the pre-passes' results bitwise against ops.def's contract computed here: kbar (the
 *     segment's fp32 sum in row order / n), the int8 codes and deltas of every 64-row block of
 *     q and of the smoothed k, vscale and V^T's e4m3 codes in the kernel's key order (byte p
 *     of a 32-key group holds key 8 (2 (p / 16) + (p % 4) / 2) + 2 ((p % 16) / 4) + p % 2),
 *     zero codes in the padding rows;
 *   - the output against the CPU backend's op (runtime/cpu/ops_sage.c): the same codes,
 *     maxima over the same key blocks, P and V roundings; the kernel's scores in log2 units
 *     and 2^x (exp2f here, ex2.approx on the GPU) move P by ~1e-7 relative, so a rare P code
 *     lands one step away (more often for bf16's finer steps), and the fp32 sums run in
 *     another order (fp8: l as P times ones and O per n-tile in the mma's order, then one
 *     fma per tile; bf16: l per lane then the quad): NMSE <= 1e-7, at most 2 % of the bf16
 *     outputs differ, and at most 1 % of the (row, head) pairs by more than a bf16 step
 *     somewhere (a P code one e4m3 step away on a heavy key moves its row by a percent or
 *     two: seen once in 900 rows of the 450-row case).
 * Cases: pv fp8 and bf16 with smoothing, two segments (130 + 70 rows: a partial query tile,
 * partial key tiles, the second segment's blocks from its own start), GQA (4 q heads on 2 kv
 * heads); pv fp8 without smoothing on one segment of 100 rows; pv fp8 on 450 rows (4 stages of
 * 128 keys: the 3-stage ring wraps), 2 q heads on 1 kv head; 192 rows (a last stage whose
 * second tile is past len); a negative scale (the paths for kq <= 0), pv fp8 and bf16; and the
 * row maxima from the int32 dots against the float path.
 */
#include "emu_harness.h"

#include <algorithm>

namespace sage_k {
#include "sage_quant.cu"
#include "sage_attention.cu"
} // namespace sage_k

/* The op's scratch for one segment (cuda_sage.c's parts, lp = len rounded up to 128) */
struct scratch {
  std::vector<float> qd, kd, kbar, vscale;
  std::vector<signed char> qc, kc;
  std::vector<unsigned char> vt;
};

/* One segment of rows [0, len) at q, k, v, o as cuda_sage.c's run_segment launches it. */
static void emu_segment(const h3_bf16 *q, const h3_bf16 *k, const h3_bf16 *v, h3_bf16 *o, long long len, int hq,
                        int hk, int smooth, int fp8, float scale, scratch &sc) {
  const long long lp = (len + 127) / 128 * 128, qs = hq * 128LL, ks = hk * 128LL;
  sc.qd.assign((size_t)(hq * lp / 64), -1.0f), sc.kd.assign((size_t)(hk * lp / 64), -1.0f);
  sc.kbar.assign((size_t)hk * 128, -1.0f), sc.vscale.assign((size_t)hk * 128, -1.0f);
  sc.qc.assign((size_t)(hq * lp * 128), 99), sc.kc.assign((size_t)(hk * lp * 128), 99);
  sc.vt.assign((size_t)(hk * 128 * lp), 0x55);
  float *kbar = smooth ? sc.kbar.data() : nullptr;
  if (smooth || fp8)
    emu_launch3(4, hk, 1, 256, [&] {
      sage_k::h3cu_sage_colstats(k, v, ks, len, hk, smooth, fp8, sc.kbar.data(), sc.vscale.data());
    });
  emu_launch3(lp / 64, hq, 1, 256, [&] { sage_k::h3cu_sage_quant(q, qs, nullptr, len, lp, sc.qc.data(), sc.qd.data()); });
  emu_launch3(lp / 64, hk, 1, 256, [&] { sage_k::h3cu_sage_quant(k, ks, kbar, len, lp, sc.kc.data(), sc.kd.data()); });
  if (fp8)
    emu_launch3(lp / 64, hk, 1, 256, [&] { sage_k::h3cu_sage_quant_v(v, ks, sc.vscale.data(), len, lp, sc.vt.data()); });
  emu_launch3((len + 127) / 128, hq, 1, 256, [&] {
    if (fp8)
      sage_k::h3cu_sage_fwd_fp8(sc.qc.data(), sc.kc.data(), sc.vt.data(), v, sc.qd.data(), sc.kd.data(),
                                sc.vscale.data(), o, len, lp, ks, qs, hq / hk, scale);
    else
      sage_k::h3cu_sage_fwd_bf16(sc.qc.data(), sc.kc.data(), sc.vt.data(), v, sc.qd.data(), sc.kd.data(),
                                 sc.vscale.data(), o, len, lp, ks, qs, hq / hk, scale);
  });
}

static float f32(const h3_bf16 *x, long long i) { return h3_bf16_to_f32(x[i].bits); }

/* delta and codes of n values as ops.def fixes them; mismatches against the kernel's counted */
static int64_t check_block(const std::vector<float> &x, float delta, const signed char *codes, long long stride) {
  float a = 0.0f;
  for (float y : x) a = std::max(a, std::fabs(y));
  const float want = a > 0.0f ? a / 127.0f : 1.0f;
  int64_t bad = delta != want;
  for (size_t i = 0; i < x.size(); i++) {
    float c = std::nearbyint(x[i] / want);
    c = c > 127.0f ? 127.0f : c < -127.0f ? -127.0f : c;
    bad += codes[(long long)(i / 128) * stride + (long long)(i % 128)] != (signed char)c;
  }
  return bad;
}

/* The contract's kbar (the fp32 sum of k over the rows in order, / len) and delta_v (amax |v| /
 * 448, 1 when 0) of kv head h, dim d; v's rows v_stride elements apart */
static void colstats_want(const h3_bf16 *k, const h3_bf16 *v, long long v_stride, long long len, int hk, int h, int d,
                          float *kbar, float *dv) {
  float sum = 0.0f, a = 0.0f;
  for (long long r = 0; r < len; r++)
    sum += f32(k, (r * hk + h) * 128 + d), a = std::max(a, std::fabs(f32(v, r * v_stride + h * 128 + d)));
  *kbar = sum / (float)len;
  *dv = a > 0.0f ? a / 448.0f : 1.0f;
}

/* The pre-passes' results of one segment against the contract: the number of mismatches. */
static int64_t check_codes(const h3_bf16 *q, const h3_bf16 *k, const h3_bf16 *v, long long len, int hq, int hk,
                           bool smooth, bool fp8, const scratch &sc) {
  const long long lp = (len + 127) / 128 * 128, nb = lp / 64;
  int64_t bad = 0;
  std::vector<float> kbar((size_t)hk * 128, 0.0f), dv((size_t)hk * 128, 1.0f);
  for (int h = 0; h < hk; h++)
    for (int d = 0; d < 128; d++) {
      float kb, dq;
      colstats_want(k, v, hk * 128LL, len, hk, h, d, &kb, &dq);
      if (smooth) kbar[h * 128 + d] = kb, bad += sc.kbar[h * 128 + d] != kb;
      if (fp8) dv[h * 128 + d] = dq, bad += sc.vscale[h * 128 + d] != dq;
    }
  for (int w = 0; w < 2; w++) { /* q, then k less kbar */
    const int H = w ? hk : hq;
    const h3_bf16 *x = w ? k : q;
    const signed char *codes = w ? sc.kc.data() : sc.qc.data();
    const float *deltas = w ? sc.kd.data() : sc.qd.data();
    for (int h = 0; h < H; h++)
      for (long long b = 0; b < nb; b++) {
        std::vector<float> blk;
        for (long long r = 64 * b; r < std::min(len, 64 * b + 64); r++)
          for (int d = 0; d < 128; d++) blk.push_back(f32(x, (r * H + h) * 128 + d) - (w ? kbar[h * 128 + d] : 0.0f));
        const signed char *c = codes + ((long long)h * lp + 64 * b) * 128;
        if (!blk.empty()) bad += check_block(blk, deltas[h * nb + b], c, 128);
        for (long long i = (long long)blk.size(); i < 64 * 128; i++) bad += c[i] != 0; /* padding */
      }
  }
  for (int h = 0; fp8 && h < hk; h++)
    for (int d = 0; d < 128; d++)
      for (long long p = 0; p < lp; p++) { /* byte p: key 32 (p / 32) + the group's order */
        const int g = (int)(p % 32);
        const long long r = p / 32 * 32 + 8 * (2 * (g / 16) + (g % 4) / 2) + 2 * ((g % 16) / 4) + g % 2;
        const uint8_t want = r < len ? h3_e4m3_from_f32(f32(v, (r * hk + h) * 128 + d) / dv[h * 128 + d]) : 0;
        bad += sc.vt[((size_t)h * 128 + d) * lp + p] != want;
      }
  return bad;
}

struct sage_case {
  const char *name;
  int64_t T, cut, hq, hk; /* cut: the second segment's start (0: one segment) */
  bool fp8, smooth;
  float scale = 0.08838834764f; /* 1 / sqrt(128); < 0 takes the kernels' paths for kq <= 0 */
};

static void test_case(const sage_case &c) {
  const std::string seg = c.cut ? ", segments = [" + std::to_string(c.cut) + "]" : "";
  char scale[32];
  snprintf(scale, sizeof scale, "%.9g", (double)c.scale);
  h3_module *m;
  std::vector<buf> in;
  const h3_op *op = qkv_case(&m, c.name, "sage_attention", c.T, c.hq, c.hk, "scale = " + std::string(scale) + seg + ", pv = \"" +
                             (c.fp8 ? "fp8" : "bf16") + "\", smooth = " + (c.smooth ? "1" : "0"), in);
  if (!op) return;
  std::vector<double> bias(128);
  for (double &b : bias) b = 6 * urand() - 3;
  for (int64_t i = 0; i < h3_type_numel(&in[1].type); i++)
    h3_weights_store(in[1].p(), H3_BF16, (size_t)i, 2 * urand() - 1 + bias[(size_t)(i % 128)]);
  std::vector<buf> want = cpu_run(op, in);
  buf out = make(op->results[0]->type);
  const h3_bf16 *q = (const h3_bf16 *)in[0].p(), *k = (const h3_bf16 *)in[1].p(), *v = (const h3_bf16 *)in[2].p();
  int64_t bad = 0, lo = 0;
  scratch sc;
  for (int64_t hi : {c.cut ? c.cut : c.T, c.T}) {
    if (hi <= lo) continue;
    const long long qo = lo * c.hq * 128, ko = lo * c.hk * 128;
    emu_segment(q + qo, k + ko, v + ko, (h3_bf16 *)out.p() + qo, hi - lo, (int)c.hq, (int)c.hk, c.smooth, c.fp8,
                c.scale, sc);
    bad += check_codes(q + qo, k + ko, v + ko, hi - lo, (int)c.hq, (int)c.hk, c.smooth, c.fp8, sc);
    lo = hi;
  }
  fprintf(stderr, "  %-40s %lld code / scale mismatches\n", c.name, (long long)bad);
  CHECK(bad == 0, "%s: %lld codes or scales differ from the contract", c.name, (long long)bad);
  compare(c.name, out, want[0], 1e-7);
  /* outputs a bf16 step apart (2^-7 of the larger magnitude; near 0, 1e-3 of the RMS), and
     rows (row, head) with a larger difference: a P code one e4m3 step away on a key that
     carries a good part of the row's weight moves the row by a percent or two */
  int64_t n = h3_type_numel(&out.type), differ = 0, far_rows = 0;
  double ms = 0;
  for (int64_t i = 0; i < n; i++) ms += ld(want[0], i) * ld(want[0], i);
  const double floor = 1e-3 * std::sqrt(ms / (double)n);
  for (int64_t row = 0; row < n / 128; row++) {
    bool far = false;
    for (int64_t i = row * 128; i < row * 128 + 128; i++) {
      const double a = ld(out, i), b = ld(want[0], i);
      differ += a != b, far |= std::fabs(a - b) > std::max(std::ldexp(std::max(std::fabs(a), std::fabs(b)), -7), floor);
    }
    far_rows += far;
  }
  CHECK(differ * 50 <= n && far_rows * 100 <= n / 128, "%s: %lld of %lld outputs differ from the CPU's; %lld rows "
        "by more than a bf16 step", c.name, (long long)differ, (long long)n, (long long)far_rows);
  h3_module_free(m);
}

/* A row's largest score from the int32 dots (3-way integer maxima: the wgmma forms' and the mma
 * form's full tiles) against the float path, on random dots over the whole range
 * |dot| <= 128 * 127 * 127 (extremes included) and kq > 0: equal bit for bit */
static void test_dots_max(void) {
  int64_t bad = 0;
  for (int trial = 0; trial < 2000; trial++) {
    int sc[8][4];
    float pf[8][4];
    const int span = trial % 2 ? 2064512 : 4000; /* the extremes; typical dots */
    for (auto &row : sc)
      for (int &x : row) x = (int)std::lround((2 * urand() - 1) * span);
    if (trial % 7 == 0) sc[trial % 8][trial % 4] = trial % 14 ? 2064512 : -2064512;
    const float kq = (float)(1e-6 + urand() * 1e-3);
    sage_k::h3s_scores<true, true>(sc, pf, kq, 0, 64);
    for (int r = 0; r < 2; r++)
      bad += sage_k::h3s_row_max<true>(pf, r, kq) != __fmul_rn(sage_k::h3s_row_max_dots(sc, r), kq);
  }
  fprintf(stderr, "  row maxima from the int32 dots: %lld of 4000 differ\n", (long long)bad);
  CHECK(bad == 0, "row maxima from the int32 dots: %lld of 4000 differ from the float path", (long long)bad);
}

/* The wgmma forms' stage softmax (h3s_stage_softmax<POS, FULL>: kq > 0, the int32 dots' maxima and
 * one fma a score) against its general path <false, false> (the one the kq <= 0 stages and the
 * mma form's helpers take), a warp of 32 lanes on random stages: full ones and stages cut at
 * random len (a partial first or second tile), running maxima from -inf or a row's earlier
 * value. The new maxima and alphas must be equal bit for bit (max t is exact either way); the
 * P codes may differ by one e4m3 step where the two roundings of t straddle a step: at most 1 in
 * 20000 (none seen; t off by 1e-5 relative in one tile shows as ~1 in 10000) */
static void test_stage_softmax(void) {
  int64_t codes = 0, bad_codes = 0, bad_max = 0;
  for (int trial = 0; trial < 300; trial++) {
    const bool full = trial % 3 != 0;
    const long long len = full ? 128 : 1 + (long long)(urand() * 127);
    const float kq0 = (float)(2e-5 + urand() * 4e-4), kq1 = (float)(2e-5 + urand() * 4e-4);
    const int span = trial % 2 ? 60000 : 2064512;
    int sc[32][2][8][4];
    float m0[32][2];
    for (int lane = 0; lane < 32; lane++)
      for (int t = 0; t < 2; t++)
        for (auto &row : sc[lane][t])
          for (int &x : row) x = (int)std::lround((2 * urand() - 1) * span);
    for (int g = 0; g < 8; g++) /* a row's running maximum: the same in its quad's lanes */
      for (int r = 0; r < 2; r++) {
        const float mr = trial % 4 == 0 ? -INFINITY : (float)((2 * urand() - 1) * 30);
        for (int c = 0; c < 4; c++) m0[4 * g + c][r] = mr;
      }
    unsigned pa[2][32][2][2][4]; /* [path][lane][tile][k-step][word] */
    float m[2][32][2], al[2][32][2];
    emu_launch3(1, 1, 1, 32, [&] {
      const int lane = (int)threadIdx.x;
      for (int path = 0; path < 2; path++) {
        float mm[2] = {m0[lane][0], m0[lane][1]}, a[2];
        if (path == 1) sage_k::h3s_stage_softmax<false, false>(sc[lane][0], sc[lane][1], pa[1][lane][0],
                                                                pa[1][lane][1], kq0, kq1, 0, len, mm, a);
        else if (full) sage_k::h3s_stage_softmax<true, true>(sc[lane][0], sc[lane][1], pa[0][lane][0], pa[0][lane][1],
                                                              kq0, kq1, 0, len, mm, a);
        else sage_k::h3s_stage_softmax<true, false>(sc[lane][0], sc[lane][1], pa[0][lane][0], pa[0][lane][1], kq0,
                                                     kq1, 0, len, mm, a);
        for (int r = 0; r < 2; r++) m[path][lane][r] = mm[r], al[path][lane][r] = a[r];
      }
    });
    for (int lane = 0; lane < 32; lane++) {
      for (int r = 0; r < 2; r++)
        bad_max += std::memcmp(&m[0][lane][r], &m[1][lane][r], 4) != 0 ||
                   std::memcmp(&al[0][lane][r], &al[1][lane][r], 4) != 0;
      const unsigned *fast = &pa[0][lane][0][0][0], *general = &pa[1][lane][0][0][0];
      for (int w = 0; w < 16; w++)
        for (int b = 0; b < 4; b++) {
          const int x = (int)(fast[w] >> (8 * b) & 0xff), y = (int)(general[w] >> (8 * b) & 0xff);
          codes++;
          if (x != y) bad_codes += std::abs(x - y) == 1 ? 1 : 1000000; /* one step, or a real error */
        }
    }
  }
  fprintf(stderr, "  stage softmax, fast path against the general one: %lld of %lld P codes a step apart, "
          "%lld maxima / alphas differ\n", (long long)(bad_codes % 1000000), (long long)codes, (long long)bad_max);
  CHECK(bad_max == 0 && bad_codes * 20000 <= codes, "stage softmax: %lld maxima or alphas differ, P codes off by "
        "%lld (one step each counts 1, a larger difference 1e6) of %lld", (long long)bad_max, (long long)bad_codes,
        (long long)codes);
}

/* h3cu_sage_colstats alone over chunk counts the attention cases do not reach (its next chunk
 * is loaded while the current one is summed): kbar (the in-order fp32 sum / len) and vscale
 * (amax / 448) bitwise against the contract, rows a chunk of 256 apart and around its edges;
 * v read in place from a qkv-like [len, 3 hk 128] tensor (its columns 2 hk 128 ..: a v_view) */
static void test_colstats(void) {
  int64_t bad = 0;
  for (long long len : {1LL, 255LL, 256LL, 257LL, 1000LL, 1300LL}) {
    const int hk = 3;
    const long long vs = 3LL * hk * 128, v0 = 2LL * hk * 128;
    std::vector<h3_bf16> k((size_t)(len * hk * 128)), v((size_t)(len * vs));
    for (size_t i = 0; i < k.size(); i++) k[i].bits = h3_f32_to_bf16((float)(2 * urand() - 1 + (i % 128) * 0.01));
    for (size_t i = 0; i < v.size(); i++) v[i].bits = h3_f32_to_bf16((float)((2 * urand() - 1) * (1 + i % 7)));
    std::vector<float> kbar((size_t)hk * 128, -1.0f), vscale(kbar.size(), -1.0f);
    emu_launch3(4, hk, 1, 256, [&] {
      sage_k::h3cu_sage_colstats(k.data(), v.data() + v0, vs, len, hk, 1, 1, kbar.data(), vscale.data());
    });
    for (int h = 0; h < hk; h++)
      for (int d = 0; d < 128; d++) {
        float kb, dv;
        colstats_want(k.data(), v.data() + v0, vs, len, hk, h, d, &kb, &dv);
        bad += (kbar[h * 128 + d] != kb) + (vscale[h * 128 + d] != dv);
      }
  }
  fprintf(stderr, "  colstats over 1-1300 rows: %lld of 4608 kbar / vscale differ\n", (long long)bad);
  CHECK(bad == 0, "colstats: %lld kbar / vscale values differ from the contract", (long long)bad);
}

int main(void) {
  elapsed();
  test_colstats();
  test_dots_max();
  test_stage_softmax();
  test_case({"fp8 smooth, segments 130 + 70, GQA 4/2", 200, 130, 4, 2, true, true});
  test_case({"bf16 smooth, segments 130 + 70, GQA 4/2", 200, 130, 4, 2, false, true});
  test_case({"fp8 no smoothing, 100 rows", 100, 0, 2, 2, true, false});
  test_case({"fp8 smooth, 450 rows (the 3-stage ring wraps), GQA 2/1", 450, 0, 2, 1, true, true});
  test_case({"fp8 smooth, 192 rows (a last stage of one full tile)", 192, 0, 2, 1, true, true});
  test_case({"fp8 smooth, 130 rows, negative scale", 130, 0, 2, 1, true, true, -0.08838834764f});
  test_case({"bf16 smooth, 130 rows, negative scale", 130, 0, 2, 1, false, true, -0.08838834764f});
  return check_summary("sage_emu");
}
