/* test_ops_sage.c: the CPU reference of `sage_attention` (ops.def) against its contract and
 * against exact attention:
 *   - bitwise equal to a second emulation written here row by row (it recomputes every
 *     segment's smoothing, codes and scales for each query row), for pv fp8 and bf16, smooth
 *     on and off, two segments, GQA, rows not a multiple of 64;
 *   - against attention in fp64 on the same q / k / v (keys with a large per-channel offset,
 *     as real keys have), with smoothing: pv fp8 cosine >= 0.999 and relative L1 <= 0.05,
 *     pv bf16 >= 0.9999 and <= 0.015 (issue 20's 0.999 / 0.03 are for the model's own
 *     q / k / v at 32704 keys, where the fp8 rounding of P and V averages out over many more
 *     keys than these random rows of 64 .. 260: measured on the GPU); without smoothing
 *     the error is larger;
 *   - an all-zero query block (delta 1), and 1 thread against 2 (harness.h).
 */
#include "harness.h"
#include "h3/nvfp4.h"

enum { BLK = 64, SOFTMAX_KEYS = 128 }; /* quantization rows; keys per softmax block */

static float rne(float x) { return nearbyintf(x); }

/* The contract, row by row: row t, q head n; q, k, v fp32 copies [T, H, D]. */
static void emulate(const float *q, const float *k, const float *v, int64_t T, int64_t Hq, int64_t Hk,
                    int64_t D, const int64_t *seg, float scale, bool fp8, bool smooth,
                    double *out) {
  for (int64_t t = 0; t < T; t++)
    for (int64_t n = 0; n < Hq; n++) {
      int s = 0;
      while (seg[s + 1] <= t) s++;
      int64_t s0 = seg[s], s1 = seg[s + 1], h = n / (Hq / Hk), len = s1 - s0;
      float *kt = malloc(sizeof(float) * (size_t)(len * D)), dvv[512];
      for (int64_t d = 0; d < D; d++) {
        float sum = 0;
        for (int64_t r = s0; r < s1 && smooth; r++) sum += k[(r * Hk + h) * D + d];
        float kb = smooth ? sum / (float)len : 0.0f, a = 0;
        for (int64_t r = s0; r < s1; r++) {
          kt[(r - s0) * D + d] = k[(r * Hk + h) * D + d] - kb;
          a = fmaxf(a, fabsf(v[(r * Hk + h) * D + d]));
        }
        dvv[d] = a > 0 ? a / 448.0f : 1.0f;
      }
      int64_t qb = s0 + (t - s0) / BLK * BLK, qe = qb + BLK < s1 ? qb + BLK : s1;
      float qa = 0;
      for (int64_t r = qb; r < qe; r++)
        for (int64_t d = 0; d < D; d++) qa = fmaxf(qa, fabsf(q[(r * Hq + n) * D + d]));
      float dq = qa > 0 ? qa / 127.0f : 1.0f, m = -INFINITY, l = 0, o[512] = {0};
      for (int64_t k0 = 0; k0 < len; k0 += SOFTMAX_KEYS) {
        int64_t k1 = k0 + SOFTMAX_KEYS < len ? k0 + SOFTMAX_KEYS : len;
        float S[SOFTMAX_KEYS], mt = m, dk = 1.0f;
        for (int64_t r = k0; r < k1; r++) {
          if (r % BLK == 0) { /* key r opens a k block (k0 is one too): its delta */
            int64_t b1 = r + BLK < len ? r + BLK : len;
            float ka = 0;
            for (int64_t rr = r; rr < b1; rr++)
              for (int64_t d = 0; d < D; d++) ka = fmaxf(ka, fabsf(kt[rr * D + d]));
            dk = ka > 0 ? ka / 127.0f : 1.0f;
          }
          int32_t dot = 0;
          for (int64_t d = 0; d < D; d++) {
            float qc = fminf(127.0f, fmaxf(-127.0f, rne(q[(t * Hq + n) * D + d] / dq)));
            float kc = fminf(127.0f, fmaxf(-127.0f, rne(kt[r * D + d] / dk)));
            dot += (int32_t)qc * (int32_t)kc;
          }
          S[r - k0] = (float)dot * (dq * dk) * scale;
          mt = fmaxf(mt, S[r - k0]);
        }
        float al = expf(m - mt);
        l *= al;
        for (int64_t d = 0; d < D; d++) o[d] *= al;
        for (int64_t r = k0; r < k1; r++) {
          float p = expf(S[r - k0] - mt);
          l += fp8 ? h3_e4m3_to_f32(h3_e4m3_from_f32(p * 448.0f)) : p;
          for (int64_t d = 0; d < D; d++) {
            float vv = v[((s0 + r) * Hk + h) * D + d];
            if (fp8)
              o[d] += h3_e4m3_to_f32(h3_e4m3_from_f32(p * 448.0f)) * h3_e4m3_to_f32(h3_e4m3_from_f32(vv / dvv[d]));
            else
              o[d] += h3_bf16_to_f32(h3_f32_to_bf16(p)) * vv;
          }
        }
        m = mt;
      }
      for (int64_t d = 0; d < D; d++) out[(t * Hq + n) * D + d] = fp8 ? o[d] * dvv[d] / l : o[d] / l;
      free(kt);
    }
}

/* Exact attention in fp64 over the segment. */
static void exact(const float *q, const float *k, const float *v, int64_t T, int64_t Hq, int64_t Hk,
                  int64_t D, const int64_t *seg, float scale, double *out) {
  for (int64_t t = 0; t < T; t++)
    for (int64_t n = 0; n < Hq; n++) {
      int s = 0;
      while (seg[s + 1] <= t) s++;
      int64_t s0 = seg[s], s1 = seg[s + 1], h = n / (Hq / Hk);
      double m = -INFINITY, l = 0, *S = malloc(sizeof(double) * (size_t)(s1 - s0));
      for (int64_t r = s0; r < s1; r++) {
        double dot = 0;
        for (int64_t d = 0; d < D; d++) dot += (double)q[(t * Hq + n) * D + d] * k[(r * Hk + h) * D + d];
        S[r - s0] = dot * scale;
        if (S[r - s0] > m) m = S[r - s0];
      }
      for (int64_t d = 0; d < D; d++) out[(t * Hq + n) * D + d] = 0;
      for (int64_t r = s0; r < s1; r++) {
        double p = exp(S[r - s0] - m);
        l += p;
        for (int64_t d = 0; d < D; d++) out[(t * Hq + n) * D + d] += p * v[(r * Hk + h) * D + d];
      }
      for (int64_t d = 0; d < D; d++) out[(t * Hq + n) * D + d] /= l;
      free(S);
    }
}

typedef struct {
  int64_t T, Hq, Hk, D, cut; /* cut: the second segment's start (0: one segment) */
  double kbias;              /* per-channel key offsets uniform in [-kbias, kbias] */
} shape;

/* Runs sage_attention; returns its output as doubles (malloc'd). */
static double *run_sage(T *t, const shape *c, h3_tensor *in, bool fp8, bool smooth) {
  static int calls;
  char nm[3][16];
  for (int i = 0; i < 3; i++) snprintf(nm[i], sizeof nm[i], "%c%d", "qkv"[i], calls);
  calls++;
  h3_value *v[3] = {t_in(t, nm[0], in[0].type), t_in(t, nm[1], in[1].type), t_in(t, nm[2], in[2].type)};
  h3_attr a[4] = {h3_attr_float(t->m, "scale", 1.0 / sqrt((double)c->D)),
                  h3_attr_string(t->m, "pv", fp8 ? "fp8" : "bf16"), h3_attr_int(t->m, "smooth", smooth),
                  h3_attr_ints(t->m, "segments", 1, &c->cut)};
  h3_op *op = t_op(t, H3_OP_SAGE_ATTENTION, 3, v, c->cut ? 4 : 3, a);
  h3_tensor out[1];
  CHECK(t_run(op, in, out) == H3_OK, "sage_attention T %lld", (long long)c->T);
  int64_t n = h3_type_numel(&out[0].type);
  double *r = malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; i++) r[i] = t_get(&out[0], i);
  t_free_all(out, 1);
  return r;
}

static void check_shape(const shape *c) {
  T t;
  t_init(&t, 31);
  h3_type qt = TY(H3_BF16, c->T, c->Hq, c->D), kt = TY(H3_BF16, c->T, c->Hk, c->D);
  h3_tensor in[3] = {t_rand(&t, qt, -1.5, 1.5), t_rand(&t, kt, -1.5, 1.5), t_rand(&t, kt, -1, 1)};
  for (int64_t h = 0; h < c->Hk; h++) /* a per-channel offset on the keys */
    for (int64_t d = 0; d < c->D; d++) {
      double b = t_uniform(&t, -c->kbias, c->kbias);
      for (int64_t r = 0; r < c->T; r++) t_set(&in[1], (r * c->Hk + h) * c->D + d, t_get(&in[1], (r * c->Hk + h) * c->D + d) + b);
    }
  int64_t nq = h3_type_numel(&qt), nk = h3_type_numel(&kt);
  float *q = malloc(sizeof(float) * (size_t)nq), *k = malloc(sizeof(float) * (size_t)nk), *v = malloc(sizeof(float) * (size_t)nk);
  for (int64_t i = 0; i < nq; i++) q[i] = (float)t_get(&in[0], i);
  for (int64_t i = 0; i < nk; i++) k[i] = (float)t_get(&in[1], i), v[i] = (float)t_get(&in[2], i);
  int64_t seg[3] = {0, c->cut ? c->cut : c->T, c->T};
  int nseg = c->cut ? 2 : 1;
  seg[nseg] = c->T;
  double *ex = malloc(sizeof(double) * (size_t)nq), *em = malloc(sizeof(double) * (size_t)nq);
  float scale = (float)(1.0 / sqrt((double)c->D));
  exact(q, k, v, c->T, c->Hq, c->Hk, c->D, seg, scale, ex);
  double err[2][2] = {{0}};
  for (int f = 0; f < 2; f++)
    for (int sm = 0; sm < 2; sm++) {
      double *got = run_sage(&t, c, in, f == 0, sm == 1);
      emulate(q, k, v, c->T, c->Hq, c->Hk, c->D, seg, scale, f == 0, sm == 1, em);
      int64_t bad = 0;
      double dot = 0, ng = 0, ne = 0, l1 = 0, l1e = 0;
      for (int64_t i = 0; i < nq; i++) {
        bad += got[i] != (double)h3_bf16_to_f32(h3_f32_to_bf16((float)em[i]));
        dot += got[i] * ex[i], ng += got[i] * got[i], ne += ex[i] * ex[i];
        l1 += fabs(got[i] - ex[i]), l1e += fabs(ex[i]);
      }
      double cs = dot / sqrt(ng * ne), rl1 = l1 / l1e;
      err[f][sm] = rl1;
      printf("  T %lld Hq %lld Hk %lld D %lld seg %lld kbias %.1f pv %s smooth %d: cos %.6f rel L1 %.4f, "
             "%lld of %lld differ from the emulation\n", (long long)c->T, (long long)c->Hq, (long long)c->Hk,
             (long long)c->D, (long long)c->cut, c->kbias, f ? "bf16" : "fp8", sm, cs, rl1, (long long)bad,
             (long long)nq);
      CHECK(bad == 0, "sage pv %s smooth %d: %lld values differ from the contract's emulation", f ? "bf16" : "fp8",
            sm, (long long)bad);
      if (sm) /* fp8 P and V: 3 mantissa bits; short random rows average little of it out */
        CHECK(f ? cs >= 0.9999 && rl1 <= 0.015 : cs >= 0.999 && rl1 <= 0.05, "sage pv %s: cos %.6f, rel L1 %.4f vs exact",
              f ? "bf16" : "fp8", cs, rl1);
      free(got);
    }
  if (c->kbias > 1) /* smoothing helps when keys share a large offset */
    CHECK(err[0][1] < err[0][0], "smoothing does not reduce the error (%.4f vs %.4f)", err[0][1], err[0][0]);
  free(q), free(k), free(v), free(ex), free(em);
  t_free_all(in, 3);
  t_free(&t);
}

static void test_zero_block(void) {
  T t;
  t_init(&t, 32);
  shape c = {70, 2, 1, 16, 0, 0};
  h3_type qt = TY(H3_BF16, c.T, c.Hq, c.D), kt = TY(H3_BF16, c.T, c.Hk, c.D);
  h3_tensor in[3] = {t_alloc(qt), t_rand(&t, kt, -1, 1), t_rand(&t, kt, -1, 1)}; /* q all zero */
  double *got = run_sage(&t, &c, in, true, true);
  int finite = 1;
  for (int64_t i = 0; i < h3_type_numel(&qt); i++) finite &= isfinite(got[i]);
  CHECK(finite, "an all-zero query block gives finite outputs (the keys' mean)");
  free(got);
  t_free_all(in, 3);
  t_free(&t);
}

int main(void) {
  shape cases[] = {{150, 4, 2, 32, 90, 4.0}, {260, 2, 2, 128, 200, 3.0}, {64, 2, 1, 64, 0, 0.5}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_shape(&cases[i]);
  test_zero_block();
  return t_report("test_ops_sage");
}
