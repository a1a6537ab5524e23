/* test_rng.c: h3's Philox-4x32-10 generator (include/h3/rng.h, runtime/rng.c).
 *
 * - Philox-4x32-10 known-answer vectors (the Random123 distribution's kat_vectors) and
 *   FNV-1a 32 test vectors (from the FNV reference);
 * - the uniform map: exact endpoints, strictly inside (0, 1), symmetric;
 * - h3_rng_log and h3_rng_cos2pi against libm in double over the whole 2^23-point grid
 *   the generator can produce (max error in ulps / absolute);
 * - normal and uniform distributions: moments and a Kolmogorov-Smirnov distance;
 * - counters: element index high word, streams, seeds give different numbers;
 * - the bulk fills of rng.c (FMA-dispatched) equal the inline per-element functions
 *   compiled here for the generic target, bit for bit.
 */
#include "h3/rng.h"

#include "io_test.h"

#include <math.h>

static void test_kat(void) {
  static const unsigned int kat[3][10] = {
      /* counter c0..c3, key k0 k1, expected out0..out3 */
      {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
       0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
      {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
       0x94fdcceb, 0x5001e420, 0x24126ea1},
  };
  for (int i = 0; i < 3; i++) {
    h3_philox_out o =
        h3_philox4x32_10(kat[i][0], kat[i][1], kat[i][2], kat[i][3], kat[i][4], kat[i][5]);
    for (int k = 0; k < 4; k++) CHECK(o.w[k] == kat[i][6 + k]);
  }
  /* the counter layout: (index lo, index hi, stream, 0), key (seed lo, seed hi) */
  h3_philox_out a = h3_rng_block(0xa4093822299f31d0ull, 0x13198a2e, 0x85a308d3243f6a88ull);
  h3_philox_out b =
      h3_philox4x32_10(0x243f6a88, 0x85a308d3, 0x13198a2e, 0, 0x299f31d0, 0xa4093822);
  for (int k = 0; k < 4; k++) CHECK(a.w[k] == b.w[k]);
  CHECK(h3_rng_stream_hash("") == 0x811c9dc5u);
  CHECK(h3_rng_stream_hash("a") == 0xe40c292cu);
  CHECK(h3_rng_stream_hash("foobar") == 0xbf9cf968u);
  CHECK(h3_rng_stream_id("foobar") == 0xbf9cf968u);
}

static void test_uniform_map(void) {
  CHECK(h3_rng_u01(0) == 0x1p-24f);
  CHECK(h3_rng_u01(0xffffffffu) == 1.0f - 0x1p-24f);
  CHECK(h3_rng_sym(0) == -1.0f + 0x1p-23f);
  CHECK(h3_rng_sym(0xffffffffu) == 1.0f - 0x1p-23f);
  for (uint32_t k = 0; k < (1u << 23); k += 4099) {
    float u = h3_rng_u01(k << 9), v = h3_rng_u01(((1u << 23) - 1 - k) << 9);
    CHECK(u > 0.0f && u < 1.0f);
    CHECK(u + v == 1.0f);                               /* symmetric around 0.5 */
    CHECK(h3_rng_sym(k << 9) == 2.0f * u - 1.0f);       /* 2u - 1 exactly */
    CHECK(h3_rng_u01((k << 9) | 0x1ffu) == u);          /* low 9 bits unused */
  }
}

static double ulp_of(double x) {
  float f = (float)fabs(x);
  return (double)nextafterf(f, INFINITY) - (double)f;
}

static void test_math(void) {
  double max_log = 0, max_cos = 0;
  for (uint32_t k = 0; k < (1u << 23); k++) {
    float u = h3_rng_u01(k << 9);
    double l = log((double)u);
    double e = fabs((double)h3_rng_log(u) - l) / ulp_of(l);
    if (l != 0 && e > max_log) max_log = e;
    double c = cos(2 * M_PI * (double)u);
    double ec = fabs((double)h3_rng_cos2pi(u) - c);
    if (ec > max_cos) max_cos = ec;
  }
  /* other positive normal floats: log stays accurate beyond (0, 1) */
  for (float x = 1e-30f; x < 1e30f; x *= 1.37f) {
    double l = log((double)x);
    double e = fabs((double)h3_rng_log(x) - l) / ulp_of(l);
    if (e > max_log) max_log = e;
  }
  printf("log: max error %.3f ulp; cos2pi: max abs error %.3g\n", max_log, max_cos);
  CHECK(max_log < 2.0);
  CHECK(max_cos < 1.2e-7);
  CHECK(h3_rng_cos2pi(0.5f) == -1.0f);
  CHECK(h3_rng_cos2pi(0.25f) == 0.0f);
  CHECK(fabsf(h3_rng_cos2pi(0x1p-24f) - 1.0f) <= 0x1p-24f);
}

/* KS distance of n sorted samples against a CDF. */
static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double ks(double *s, int n, double (*cdf)(double)) {
  qsort(s, (size_t)n, sizeof *s, cmp_double);
  double dmax = 0;
  for (int i = 0; i < n; i++) {
    double f = cdf(s[i]);
    double d1 = fabs(f - (double)i / n), d2 = fabs((double)(i + 1) / n - f);
    if (d1 > dmax) dmax = d1;
    if (d2 > dmax) dmax = d2;
  }
  return dmax;
}

static double normal_cdf(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }
static double uniform_cdf(double x) { return x < 0 ? 0 : x > 1 ? 1 : x; }

static void test_distributions(void) {
  enum { N = 400000 };
  double *s = malloc(N * sizeof *s);
  float *f = malloc(N * sizeof *f);
  uint32_t stream = h3_rng_stream_id("noise.video");
  h3_rng_fill_normal(20240601, stream, 0, N, f);
  double m1 = 0, m2 = 0, m3 = 0, m4 = 0;
  for (int i = 0; i < N; i++) {
    double x = f[i];
    s[i] = x;
    m1 += x;
    m2 += x * x;
    m3 += x * x * x;
    m4 += x * x * x * x;
  }
  m1 /= N, m2 /= N, m3 /= N, m4 /= N;
  double dn = ks(s, N, normal_cdf);
  printf("normal: mean %.5f var %.5f skew %.5f kurt %.5f KS %.5f\n", m1, m2, m3, m4, dn);
  /* bounds of about 5 standard errors; KS: 1.95/sqrt(N) is the 0.1% critical value */
  CHECK(fabs(m1) < 5 / sqrt(N));
  CHECK(fabs(m2 - 1) < 5 * sqrt(2.0 / N));
  CHECK(fabs(m3) < 5 * sqrt(15.0 / N));
  CHECK(fabs(m4 - 3) < 5 * sqrt(96.0 / N));
  CHECK(dn < 1.95 / sqrt(N));

  h3_rng_fill_uniform(7, stream, 1000, N, f);
  double u1 = 0, u2 = 0;
  for (int i = 0; i < N; i++) {
    s[i] = f[i];
    u1 += f[i];
    u2 += (double)f[i] * f[i];
    CHECK(f[i] > 0.0f && f[i] < 1.0f);
  }
  u1 /= N, u2 /= N;
  double du = ks(s, N, uniform_cdf);
  printf("uniform: mean %.5f E[u^2] %.5f KS %.5f\n", u1, u2, du);
  CHECK(fabs(u1 - 0.5) < 5 * sqrt(1.0 / 12 / N));
  CHECK(fabs(u2 - 1.0 / 3) < 5 * sqrt(4.0 / 45 / N));
  CHECK(du < 1.95 / sqrt(N));
  free(s);
  free(f);
}

static void test_counters(void) {
  uint32_t st = h3_rng_stream_id("blocks.0.attn.qkv_proj.weight");
  uint32_t st2 = h3_rng_stream_id("blocks.1.attn.qkv_proj.weight");
  CHECK(st != st2);
  float a = h3_rng_normal(1, st, 5), b = h3_rng_normal(1, st2, 5), c = h3_rng_normal(2, st, 5);
  float e = h3_rng_normal(1, st, 5 + (1ull << 32)), f = h3_rng_normal(1, st, 6);
  CHECK(a != b && a != c && a != e && a != f);
  CHECK(a == h3_rng_normal(1, st, 5));
  /* seeds differing only in the high word */
  CHECK(h3_rng_normal(1, st, 5) != h3_rng_normal(1 + (1ull << 32), st, 5));
  /* a start offset is the same as skipping elements */
  float x[64], y[32];
  h3_rng_fill_normal(99, st, 0, 64, x);
  h3_rng_fill_normal(99, st, 32, 32, y);
  CHECK(memcmp(x + 32, y, sizeof y) == 0);
  /* streams are uncorrelated */
  enum { N = 100000 };
  double sxy = 0;
  for (int i = 0; i < N; i++)
    sxy += (double)h3_rng_normal(3, st, (uint64_t)i) * h3_rng_normal(3, st2, (uint64_t)i);
  CHECK(fabs(sxy / N) < 5 / sqrt(N));
}

static int same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* The bulk fills (possibly FMA-target code) equal the inline functions compiled here. */
static void test_fill_equals_inline(void) {
  enum { N = 50000 };
  float *f = malloc(N * sizeof *f);
  uint64_t seed = 0x0123456789abcdefull;
  uint32_t st = h3_rng_stream_id("x");
  h3_rng_fill_normal(seed, st, 77, N, f);
  for (int i = 0; i < N; i++)
    CHECK(same_bits(f[i], h3_rng_normal(seed, st, 77 + (uint64_t)i)));
  h3_rng_fill_uniform(seed, st, 77, N, f);
  for (int i = 0; i < N; i++) CHECK(f[i] == h3_rng_uniform(seed, st, 77 + (uint64_t)i));
  const int kinds[3] = {H3_RNG_INIT_NORMAL, H3_RNG_INIT_UNIFORM, H3_RNG_INIT_ONES_PLUS_NORMAL};
  for (int k = 0; k < 3; k++) {
    h3_rng_fill_init(kinds[k], 0.037f, seed, st, 5, N, f);
    for (int i = 0; i < N; i++)
      CHECK(same_bits(f[i],
                      h3_rng_init_value(kinds[k], 0.037f, seed, st, 5 + (uint64_t)i)));
  }
  free(f);
}

int main(void) {
  test_kat();
  test_uniform_map();
  test_math();
  test_distributions();
  test_counters();
  test_fill_equals_inline();
  if (io_failures) fprintf(stderr, "%d failure(s)\n", io_failures);
  return io_failures ? 1 : 0;
}
