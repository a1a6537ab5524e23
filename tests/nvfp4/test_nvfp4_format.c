/* test_nvfp4_format.c: the NVFP4 format library (include/h3/nvfp4.h, runtime/nvfp4.c)
 * against the spec (docs/models/minimax_m3_1.md §6, §8 item 4), with references written
 * here independently of the library (brute-force nearest values over the code tables):
 *   - e4m3: all 256 codes decoded to the OCP E4M3FN values and encoded back; RNE at every
 *     midpoint between neighbours (ties to the even code) and one ulp either side;
 *     saturation at 448 (infinities included), NaN -> 0x7f; random values equal the brute
 *     force nearest code;
 *   - e2m1: the table, round trips, ties to the even code, clamping at +-6;
 *   - e2m1 * e4m3: all 16 x 254 finite products are exact in bf16 and lie in [2^-10, 2688];
 *   - the quantizer on Gaussian weights (several shapes and seeds): every scale is the
 *     brute-force e4m3 of amax_b / 6 / g, every code the brute-force e2m1 of w / S_b; the
 *     per-element bound |w - w'| <= h(code) * S_b, h = half the larger e2m1 gap next to
 *     the code (0.25 up to 1.5, 0.5 for 2 and 3, 1 for 4 and 6; 1 also covers the clamp,
 *     |w| / S_b <= 6 * (1 + 2^-4) when s_b is normal), plus 6 * 2^-10 * g when s_b is
 *     subnormal (its absolute rounding); so |w - w'| <= S_b for normal s_b; relative
 *     Frobenius error <= 0.12; blocks spread over 2^-25 .. 1 reach subnormal and zero scales;
 *   - tensors built on the grid (g a power of two, a +-6 code in every block, one block
 *     with s_b = 448) round-trip exactly, from fp32 and from bf16;
 *   - an all-zero tensor, a single nonzero block, a single nonzero element, an amax so
 *     small that g underflows; NaN and infinities are refused (index given, outputs kept).
 */
#include "h3/bf16.h"
#include "h3/nvfp4.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/check.h"

static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};

/* ---- independent references ---------------------------------------------------------------- */
/* The OCP E4M3FN value of a code from its definition, in double. */
static double e4m3_ref(int c) {
  int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
  double v = e == 0 ? m / 8.0 * pow(2, -6) : (1 + m / 8.0) * pow(2, e - 7);
  return s ? -v : v;
}

/* Nearest finite e4m3 code of v >= 0 by brute force (ties: the even code), saturating. */
static int e4m3_nearest(double v) {
  int best = 0;
  for (int c = 1; c <= 0x7e; c++) {
    double dc = fabs(e4m3_ref(c) - v), db = fabs(e4m3_ref(best) - v);
    if (dc < db || (dc == db && (c & 1) == 0)) best = c;
  }
  return best;
}

/* Nearest e2m1 code of v by brute force, after clamping to [-6, 6]; 0 for a zero result. */
static int e2m1_nearest(double v) {
  double a = fmin(fabs(v), 6.0);
  int best = 0;
  for (int c = 1; c < 8; c++) {
    double dc = fabs(mag[c] - a), db = fabs(mag[best] - a);
    if (dc < db || (dc == db && (c & 1) == 0)) best = c;
  }
  return best && v < 0 ? best | 8 : best;
}

/* Half the larger gap between magnitude c and its neighbours (the provable bound). */
static double half_gap(int c) {
  double lo = c > 0 ? mag[c] - mag[c - 1] : 0, hi = c < 7 ? mag[c + 1] - mag[c] : 0;
  return 0.5 * fmax(lo, hi);
}

static uint64_t rng_state;
static uint64_t next_u64(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static double uniform01(void) { return (double)((next_u64() >> 11) + 1) / 9007199254740994.0; }
static double gauss(void) { return sqrt(-2 * log(uniform01())) * cos(6.283185307179586 * uniform01()); }

/* ---- codecs ------------------------------------------------------------------------------- */
static void test_e4m3(void) {
  for (int c = 0; c < 256; c++) {
    float v = h3_e4m3_to_f32((uint8_t)c);
    if ((c & 0x7f) == 0x7f) {
      CHECK(v != v, "code 0x%02x must be NaN, got %g", c, v);
      continue;
    }
    CHECK((double)v == e4m3_ref(c) && (signbit(v) != 0) == (c >> 7), "code 0x%02x: %g, expected %g", c,
          v, e4m3_ref(c));
    CHECK(h3_e4m3_from_f32(v) == c, "code 0x%02x: encode(%g) = 0x%02x", c, v,
          h3_e4m3_from_f32(v));
  }
  CHECK(h3_e4m3_to_f32(0x7e) == 448.0f && h3_e4m3_to_f32(0x01) == 0x1p-9f &&
            h3_e4m3_to_f32(0x08) == 0x1p-6f && h3_e4m3_to_f32(0x38) == 1.0f,
        "landmark values");
  /* every midpoint between neighbours, and one fp32 ulp either side, both signs */
  for (int c = 0; c < 0x7e; c++) {
    float lo = h3_e4m3_to_f32((uint8_t)c), hi = h3_e4m3_to_f32((uint8_t)(c + 1));
    float mid = 0.5f * (lo + hi); /* exact: both have few significant bits */
    int even = c & 1 ? c + 1 : c;
    for (int s = 0; s < 2; s++) {
      float sg = s ? -1.0f : 1.0f;
      int sb = s ? 0x80 : 0;
      CHECK(h3_e4m3_from_f32(sg * mid) == (even | sb), "midpoint %g -> 0x%02x, expected 0x%02x",
            sg * mid, h3_e4m3_from_f32(sg * mid), even | sb);
      CHECK(h3_e4m3_from_f32(sg * nextafterf(mid, 0)) == (c | sb), "below midpoint %g", sg * mid);
      CHECK(h3_e4m3_from_f32(sg * nextafterf(mid, 1e9f)) == ((c + 1) | sb), "above midpoint %g",
            sg * mid);
    }
  }
  float sat[] = {448.0f, 455.0f, 464.0f, 480.0f, 1e30f, INFINITY};
  for (int i = 0; i < 6; i++) {
    CHECK(h3_e4m3_from_f32(sat[i]) == 0x7e, "%g must saturate to 448", sat[i]);
    CHECK(h3_e4m3_from_f32(-sat[i]) == 0xfe, "%g must saturate to -448", -sat[i]);
  }
  CHECK(h3_e4m3_from_f32(NAN) == 0x7f, "NaN -> 0x7f");
  CHECK(h3_e4m3_from_f32(0x1p-11f) == 0 && h3_e4m3_from_f32(0x1p-10f) == 0 &&
            h3_e4m3_from_f32(nextafterf(0x1p-10f, 1)) == 1,
        "below the smallest subnormal: 2^-10 ties to 0");
  for (int i = 0; i < 200000; i++) {
    double v = ldexp(uniform01(), (int)(next_u64() % 24) - 14);
    int want = e4m3_nearest((float)v);
    CHECK(h3_e4m3_from_f32((float)v) == want, "%.9g -> 0x%02x, expected 0x%02x", v,
          h3_e4m3_from_f32((float)v), want);
  }
}

static void test_e2m1(void) {
  for (int c = 0; c < 16; c++) {
    float v = h3_e2m1_to_f32((uint8_t)c);
    CHECK(fabs(v) == mag[c & 7] && (c < 8 || c == 8 || v < 0), "code %d: %g", c, v);
    CHECK(h3_e2m1_from_f32(v) == (c == 8 ? 0 : c), "code %d: encode(%g) = %d", c, v,
          h3_e2m1_from_f32(v));
  }
  const float ties[][2] = {{0.25f, 0}, {0.75f, 2}, {1.25f, 2}, {1.75f, 4},
                           {2.5f, 4},  {3.5f, 6},  {5.0f, 6}};
  for (int i = 0; i < 7; i++) {
    CHECK(h3_e2m1_from_f32(ties[i][0]) == (int)ties[i][1], "tie %g", ties[i][0]);
    CHECK(h3_e2m1_from_f32(-ties[i][0]) == (ties[i][1] ? (int)ties[i][1] | 8 : 0), "tie -%g",
          ties[i][0]);
  }
  CHECK(h3_e2m1_from_f32(7.0f) == 7 && h3_e2m1_from_f32(-1e30f) == 15 &&
            h3_e2m1_from_f32(INFINITY) == 7,
        "clamping at 6");
  CHECK(h3_e2m1_from_f32(-0.1f) == 0, "a negative value rounding to zero gives code 0");
  for (int i = 0; i < 100000; i++) {
    float v = (float)((uniform01() - 0.5) * 16);
    CHECK(h3_e2m1_from_f32(v) == e2m1_nearest(v), "%g", v);
  }
}

/* §6: e2m1 * e4m3 is exact in bf16, in [2^-10, 2688] when nonzero. */
static void test_products(void) {
  int n = 0;
  for (int a = 0; a < 16; a++)
    for (int s = 0; s < 256; s++) {
      if ((s & 0x7f) == 0x7f) continue;
      float p = h3_e2m1_to_f32((uint8_t)a) * h3_e4m3_to_f32((uint8_t)s);
      double exact = (a & 8 ? -mag[a & 7] : mag[a & 7]) * e4m3_ref(s);
      CHECK((double)p == exact, "fp32 product %d x 0x%02x inexact", a, s);
      CHECK(h3_bf16_round(p) == p, "%d x 0x%02x = %g is not exact in bf16", a, s, p);
      CHECK(p == 0 || (fabsf(p) >= 0x1p-10f && fabsf(p) <= 2688.0f), "%g out of range", p);
      n++;
    }
  CHECK(n == 16 * 254, "%d products", n);
}

/* ---- the quantizer ------------------------------------------------------------------------ */
typedef struct {
  double max_ratio;   /* max |w - w'| / bound */
  double max_over_S;  /* max |w - w'| / S_b over blocks with normal s_b */
  int subnormal, zero;
} bound_stats;

/* Checks the codes and scales against the brute-force references and the error bound. */
static void check_quantized(const float *w, int64_t N, int64_t K, const uint8_t *packed,
                            const uint8_t *scale, float g, bound_stats *bs, const char *what) {
  double amax = 0;
  for (int64_t i = 0; i < N * K; i++) amax = fmax(amax, fabs(w[i]));
  CHECK(g == (float)((float)amax / 2688.0f), "%s: g = %g, amax = %g", what, g, amax);
  int64_t nb = K / 16;
  for (int64_t n = 0; n < N; n++)
    for (int64_t b = 0; b < nb; b++) {
      float amax_b = 0;
      for (int k = 0; k < 16; k++) amax_b = fmaxf(amax_b, fabsf(w[n * K + b * 16 + k]));
      int s = scale[n * nb + b];
      int want = e4m3_nearest(amax_b / 6.0f / g);
      CHECK(s == want, "%s: block (%lld, %lld): scale 0x%02x, expected 0x%02x", what,
            (long long)n, (long long)b, s, want);
      float Sf = h3_e4m3_to_f32((uint8_t)s) * g;
      double S = e4m3_ref(s) * (double)g;
      bool normal = s >= 8;
      bs->subnormal += s > 0 && !normal;
      bs->zero += s == 0;
      for (int k = 0; k < 16; k++) {
        int64_t i = n * K + b * 16 + k;
        int c = h3_nvfp4_code(packed, K, n, b * 16 + k);
        int cw = Sf == 0 ? 0 : e2m1_nearest(w[i] / Sf);
        CHECK(c == cw, "%s: element %lld: code %d, expected %d", what, (long long)i, c, cw);
        double wq = (c & 8 ? -mag[c & 7] : mag[c & 7]) * S, err = fabs(w[i] - wq);
        double bound = (half_gap(c & 7) * S + (normal ? 0 : 6 * 0x1p-10 * g)) * (1 + 0x1p-16);
        CHECK(err <= bound + 1e-37, "%s: element %lld: |w - w'| = %g > %g (code %d, s 0x%02x)",
              what, (long long)i, err, bound, c, s);
        if (bound > 0) bs->max_ratio = fmax(bs->max_ratio, err / bound);
        if (normal) bs->max_over_S = fmax(bs->max_over_S, err / S);
      }
    }
}

static double rel_frobenius(const float *w, const float *wq, int64_t n) {
  double e = 0, r = 0;
  for (int64_t i = 0; i < n; i++) e += (w[i] - (double)wq[i]) * (w[i] - (double)wq[i]), r += (double)w[i] * w[i];
  return sqrt(e / r);
}

typedef struct {
  uint8_t *packed, *scale;
  float *deq;
} qbuf;

static qbuf qalloc(int64_t N, int64_t K) {
  qbuf q = {malloc((size_t)(N * K / 2)), malloc((size_t)(N * K / 16)),
            malloc((size_t)(N * K) * sizeof(float))};
  if (!q.packed || !q.scale || !q.deq) exit(1);
  return q;
}
static void qfree(qbuf *q) { free(q->packed), free(q->scale), free(q->deq); }

static void test_gaussian(void) {
  const int64_t shapes[][2] = {{1, 16}, {7, 48}, {64, 192}, {128, 64}, {33, 512}, {256, 128}};
  double worst_rel = 0, worst_ratio = 0, worst_S = 0;
  for (int si = 0; si < 6; si++)
    for (uint64_t seed = 1; seed <= 3; seed++) {
      int64_t N = shapes[si][0], K = shapes[si][1];
      rng_state = seed * 0x9E3779B97F4A7C15ull + (uint64_t)si;
      float *w = malloc((size_t)(N * K) * sizeof(float));
      qbuf q = qalloc(N, K);
      double sigma = ldexp(1, (int)(next_u64() % 9) - 6);
      for (int64_t i = 0; i < N * K; i++) w[i] = (float)(sigma * gauss());
      float g = 0;
      int64_t bad = -1;
      CHECK(h3_nvfp4_quantize(w, false, N, K, q.packed, q.scale, &g, &bad), "refused");
      char what[64];
      snprintf(what, sizeof what, "gaussian [%lld, %lld] seed %llu", (long long)N, (long long)K,
               (unsigned long long)seed);
      bound_stats bs = {0};
      check_quantized(w, N, K, q.packed, q.scale, g, &bs, what);
      h3_nvfp4_dequantize(q.packed, q.scale, g, N, K, q.deq);
      double rel = rel_frobenius(w, q.deq, N * K);
      CHECK(rel <= 0.12, "%s: relative Frobenius error %g > 0.12", what, rel);
      CHECK(rel > 0, "%s: no quantization error at all", what);
      CHECK(bs.max_over_S <= 1.0, "%s: |w - w'| / S_b = %g > 1", what, bs.max_over_S);
      worst_rel = fmax(worst_rel, rel), worst_ratio = fmax(worst_ratio, bs.max_ratio);
      worst_S = fmax(worst_S, bs.max_over_S);
      qfree(&q), free(w);
    }
  printf("gaussian: worst relative Frobenius error %.4f (bound 0.12), worst |w - w'| / bound "
         "%.3f, worst |w - w'| / S_b %.3f\n", worst_rel, worst_ratio, worst_S);
}

/* Blocks scaled by 2^0 .. 2^-25: scales reach e4m3's subnormals and zero. */
static void test_dynamic_range(void) {
  int64_t N = 16, K = 256;
  rng_state = 77;
  float *w = malloc((size_t)(N * K) * sizeof(float));
  qbuf q = qalloc(N, K);
  for (int64_t i = 0; i < N * K; i++) w[i] = (float)(ldexp(gauss(), -(int)((i / 16) % 26)));
  float g;
  int64_t bad;
  CHECK(h3_nvfp4_quantize(w, false, N, K, q.packed, q.scale, &g, &bad), "refused");
  bound_stats bs = {0};
  check_quantized(w, N, K, q.packed, q.scale, g, &bs, "dynamic range");
  CHECK(bs.subnormal > 0 && bs.zero > 0, "subnormal scales %d, zero scales %d", bs.subnormal,
        bs.zero);
  qfree(&q), free(w);
}

/* w = e2m1 * s_b * g on the grid round-trips exactly (fp32 and bf16 inputs). */
static void test_on_grid(void) {
  for (int trial = 0; trial < 20; trial++) {
    int64_t N = 1 + (int64_t)(next_u64() % 9), K = 16 * (1 + (int64_t)(next_u64() % 12)), nb = K / 16;
    float g = ldexpf(1.0f, -(int)(next_u64() % 20));
    uint8_t *codes = malloc((size_t)(N * K)), *scales = malloc((size_t)(N * nb));
    float *w = malloc((size_t)(N * K) * sizeof(float));
    uint16_t *wb = malloc((size_t)(N * K) * sizeof(uint16_t));
    qbuf q = qalloc(N, K);
    for (int64_t n = 0; n < N; n++)
      for (int64_t b = 0; b < nb; b++) {
        int64_t blk = n * nb + b;
        bool zero = blk == 1; /* one all-zero block when there are two or more */
        scales[blk] = zero ? 0 : blk == 0 ? 0x7e : (uint8_t)(1 + next_u64() % 0x7d);
        for (int k = 0; k < 16; k++) {
          uint8_t c = (uint8_t)(next_u64() % 16);
          if (c == 8 || zero) c = 0;
          codes[n * K + b * 16 + k] = c;
        }
        if (!zero) codes[n * K + b * 16 + next_u64() % 16] = next_u64() & 1 ? 7 : 15;
      }
    for (int64_t i = 0; i < N * K; i++) {
      w[i] = h3_e2m1_to_f32(codes[i]) * h3_e4m3_to_f32(scales[i / 16]) * g;
      wb[i] = h3_f32_to_bf16(w[i]);
      CHECK(h3_bf16_to_f32(wb[i]) == w[i], "grid value %g not exact in bf16", w[i]);
    }
    for (int src = 0; src < 2; src++) {
      float gq;
      int64_t bad;
      CHECK(h3_nvfp4_quantize(src ? (const void *)wb : w, src == 1, N, K, q.packed, q.scale, &gq,
                              &bad),
            "refused");
      CHECK(gq == g, "g %g, expected %g", gq, g);
      CHECK(memcmp(q.scale, scales, (size_t)(N * nb)) == 0, "scales differ (trial %d)", trial);
      int same = 1;
      for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) same &= h3_nvfp4_code(q.packed, K, n, k) == codes[n * K + k];
      CHECK(same, "codes differ (trial %d, %s input)", trial, src ? "bf16" : "fp32");
      h3_nvfp4_dequantize(q.packed, q.scale, gq, N, K, q.deq);
      CHECK(memcmp(q.deq, w, (size_t)(N * K) * sizeof(float)) == 0, "w' != w on the grid");
    }
    free(codes), free(scales), free(w), free(wb), qfree(&q);
  }
}

static void test_edges(void) {
  int64_t N = 4, K = 64;
  float w[256] = {0};
  qbuf q = qalloc(N, K);
  float g = -1;
  int64_t bad = -1;
  memset(q.packed, 0xaa, 128), memset(q.scale, 0xaa, 16);
  CHECK(h3_nvfp4_quantize(w, false, N, K, q.packed, q.scale, &g, &bad), "zero refused");
  int zero = g == 1.0f;
  for (int i = 0; i < 128; i++) zero &= q.packed[i] == 0;
  for (int i = 0; i < 16; i++) zero &= q.scale[i] == 0;
  CHECK(zero, "all-zero tensor: g = 1 and every code and scale 0 (g = %g)", g);

  /* a single nonzero block: the others stay zero */
  rng_state = 5;
  for (int k = 0; k < 16; k++) w[2 * K + 32 + k] = (float)gauss();
  CHECK(h3_nvfp4_quantize(w, false, N, K, q.packed, q.scale, &g, &bad), "refused");
  bound_stats bs = {0};
  check_quantized(w, N, K, q.packed, q.scale, g, &bs, "single block");
  int others = 1;
  for (int b = 0; b < 16; b++) others &= (b == 2 * 4 + 2) == (q.scale[b] != 0);
  CHECK(others && q.scale[10] == 0x7e, "only block (2, 2) has a scale, 448 (0x%02x)", q.scale[10]);

  /* a single nonzero element: code +-6, s_b = 448, w' = 2688 * g */
  memset(w, 0, sizeof w);
  w[77] = -3.25f;
  CHECK(h3_nvfp4_quantize(w, false, N, K, q.packed, q.scale, &g, &bad), "refused");
  CHECK(h3_nvfp4_code(q.packed, K, 1, 13) == 15 && q.scale[1 * 4 + 0] == 0x7e,
        "single element: code %d scale 0x%02x", h3_nvfp4_code(q.packed, K, 1, 13), q.scale[4]);
  h3_nvfp4_dequantize(q.packed, q.scale, g, N, K, q.deq);
  CHECK(fabsf(q.deq[77] + 3.25f) <= 3.25f * 0x1p-22f, "single element: w' = %g", q.deq[77]);

  /* amax so small that g underflows: quantized as zero */
  w[77] = 0x1p-140f;
  CHECK(h3_nvfp4_quantize(w, false, N, K, q.packed, q.scale, &g, &bad) && g == 1.0f &&
            q.scale[4] == 0 && q.packed[77 / 2] == 0,
        "g underflow: quantized as zero");

  /* NaN and infinities: refused with the index, outputs untouched */
  const float poison[] = {NAN, INFINITY, -INFINITY};
  for (int i = 0; i < 3; i++) {
    memset(w, 0, sizeof w);
    w[5] = 1.0f;
    w[100 + i] = poison[i];
    w[200] = poison[i];
    memset(q.packed, 0xaa, 128), memset(q.scale, 0xaa, 16);
    g = 123.0f;
    bad = -1;
    bool ok = h3_nvfp4_quantize(w, false, N, K, q.packed, q.scale, &g, &bad);
    int kept = g == 123.0f;
    for (int j = 0; j < 128; j++) kept &= q.packed[j] == 0xaa;
    for (int j = 0; j < 16; j++) kept &= q.scale[j] == 0xaa;
    CHECK(!ok && bad == 100 + i && kept, "%g: ok %d, index %lld, outputs kept %d", poison[i], ok,
          (long long)bad, kept);
  }
  uint16_t wb[64] = {0};
  wb[9] = 0x7fc0; /* bf16 NaN */
  CHECK(!h3_nvfp4_quantize(wb, true, 1, 64, q.packed, q.scale, &g, &bad) && bad == 9,
        "bf16 NaN refused");
  qfree(&q);
}

int main(void) {
  rng_state = 0x1234567;
  test_e4m3();
  test_e2m1();
  test_products();
  test_gaussian();
  test_dynamic_range();
  test_on_grid();
  test_edges();
  return check_summary("nvfp4_format");
}
