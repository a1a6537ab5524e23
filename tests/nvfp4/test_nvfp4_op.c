/* test_nvfp4_op.c: the CPU reference of linear_nvfp4 (runtime/cpu/ops_nvfp4.c) against the
 * ops.def contract, every run with 1 and 2 threads (bitwise equal, tests/cpu/harness.h):
 *   - bitwise equal to a straight loop written here: w_b = e2m1(code) * e4m3(s_b) decoded
 *     from the code tables' definitions, acc = acc + x * w_b in fp32 with k ascending
 *     (compiled with -ffp-contract=off), y = round(acc * g); bf16 and f32 results, 2-D and
 *     3-D x, weights from the quantizer (Gaussian) and from random codes and scales;
 *   - bitwise equal to the ordinary linear op on the dequantized bf16 w_b (dtype f32), times
 *     g, rounded once; within bf16 tolerance of linear(x, bf16(w')) with w' = w_b * g, the
 *     dequantize-then-GEMM form;
 *   - the shape errors of the inference (K % 16, packed, scale, global, x's dtype, dtype);
 *   - the op runs on the cuda backend as a deferred op that backend does not have yet
 *     (h3_exec_classify), so it reports it as not supported (tests/gpu counts it).
 */
#include "cpu_internal.h"
#include "harness.h"

#include "h3/kernel.h"
#include "h3/nvfp4.h"

static const float mag[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};

/* e4m3 from its definition (bias 7, subnormals m/8 * 2^-6), finite codes only. */
static float e4m3_def(uint8_t c) {
  int e = (c >> 3) & 15, m = c & 7;
  float v = e ? ldexpf(1 + m / 8.0f, e - 7) : ldexpf(m / 8.0f, -6);
  return c & 0x80 ? -v : v;
}

/* The contract as a straight loop: out[M, N] of dtype od. */
static void reference(const h3_tensor *x, const uint8_t *packed, const uint8_t *scale, float g,
                      int64_t M, int64_t N, int64_t K, const h3_tensor *out) {
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; k++) {
        uint8_t byte = packed[n * (K / 2) + k / 2], c = k % 2 ? byte >> 4 : byte & 15;
        float wb = (c & 8 ? -mag[c & 7] : mag[c & 7]) * e4m3_def(scale[n * (K / 16) + k / 16]);
        acc = acc + (float)t_get(x, m * K + k) * wb;
      }
      t_set(out, m * N + n, acc * g);
    }
}

typedef struct {
  h3_tensor in[4];
  int64_t M, N, K;
} nv_case;

/* x random bf16; the weight from the quantizer (gaussian) or random codes and scales. */
static nv_case make_case(T *t, h3_type xt, int64_t N, bool gaussian) {
  nv_case c = {.K = xt.dims[xt.rank - 1], .N = N};
  c.M = h3_type_numel(&xt) / c.K;
  c.in[0] = t_rand(t, xt, -2, 2);
  c.in[1] = t_alloc(TY(H3_U8, N, c.K / 2));
  c.in[2] = t_alloc(TY(H3_U8, N, c.K / 16));
  c.in[3] = t_alloc(TY(H3_F32, 1));
  uint8_t *p = c.in[1].data, *s = c.in[2].data;
  float *g = c.in[3].data;
  if (gaussian) {
    float *w = malloc((size_t)(N * c.K) * sizeof *w);
    for (int64_t i = 0; i < N * c.K; i++)
      w[i] = (float)(sqrt(-2 * log(t_uniform(t, 1e-12, 1))) * cos(6.2831853 * t_uniform(t, 0, 1)) * 0.05);
    int64_t bad;
    CHECK(h3_nvfp4_quantize(w, false, N, c.K, p, s, g, &bad), "quantizer refused");
    free(w);
  } else {
    for (int64_t i = 0; i < N * c.K / 2; i++) p[i] = (uint8_t)(t_next(t) & 0xff);
    for (int64_t i = 0; i < N * c.K / 16; i++) s[i] = (uint8_t)(t_next(t) % 0x7f); /* finite */
    *g = (float)t_uniform(t, 1e-4, 1e-2);
  }
  return c;
}

static h3_op *build(T *t, const nv_case *c, h3_dtype od) {
  h3_value *v[4];
  const char *names[4] = {"x", "packed", "scale", "global"};
  for (int i = 0; i < 4; i++) v[i] = t_in(t, names[i], c->in[i].type);
  h3_attr dt = h3_attr_dtype(t->m, "dtype", od);
  return t_op(t, H3_OP_LINEAR_NVFP4, 4, v, od != H3_BF16, &dt);
}

static void test_against_loop(void) {
  const int64_t shapes[][3] = {{1, 16, 1}, {5, 64, 24}, {17, 192, 64}, {64, 128, 48}, {3, 512, 7}};
  for (int si = 0; si < 5; si++)
    for (int variant = 0; variant < 4; variant++) {
      T t;
      t_init(&t, (uint64_t)(si * 4 + variant + 1));
      int64_t M = shapes[si][0], K = shapes[si][1], N = shapes[si][2];
      h3_type xt = variant == 3 && M > 1 ? TY(H3_BF16, 1, M, K) : TY(H3_BF16, M, K);
      nv_case c = make_case(&t, xt, N, variant % 2 == 0);
      h3_dtype od = variant == 2 ? H3_F32 : H3_BF16;
      h3_op *op = build(&t, &c, od);
      h3_tensor out[1], want = t_alloc(op->results[0]->type);
      CHECK(t_run(op, c.in, out) == H3_OK, "run failed");
      reference(&c.in[0], c.in[1].data, c.in[2].data, *(float *)c.in[3].data, c.M, N, K, &want);
      CHECK(memcmp(out[0].data, want.data, (size_t)h3_type_bytes(&want.type)) == 0,
            "[%lld, %lld] x [%lld, %lld] variant %d: differs from the straight loop", (long long)M,
            (long long)K, (long long)N, (long long)K, variant);
      t_free_all(out, 1), free(want.data), t_free_all(c.in, 4), t_free(&t);
    }
}

/* linear_nvfp4 == linear(x, w_b) {dtype = f32} * g rounded (bitwise), and ~= linear(x, w'). */
static void test_against_linear(void) {
  double worst = 0;
  for (int trial = 0; trial < 6; trial++) {
    T t;
    t_init(&t, 100 + (uint64_t)trial);
    int64_t M = 1 + trial * 5, K = 64 * (1 + trial % 3), N = 32 + trial * 8;
    nv_case c = make_case(&t, TY(H3_BF16, M, K), N, trial % 2 == 0);
    float g = *(float *)c.in[3].data;
    h3_op *op = build(&t, &c, H3_BF16);
    h3_tensor y[1];
    CHECK(t_run(op, c.in, y) == H3_OK, "run failed");

    h3_tensor wb = t_alloc(TY(H3_BF16, N, K)), wq = t_alloc(TY(H3_BF16, N, K));
    float *deq = malloc((size_t)(N * K) * sizeof *deq);
    h3_nvfp4_dequantize(c.in[1].data, c.in[2].data, g, N, K, deq);
    for (int64_t n = 0; n < N; n++)
      for (int64_t k = 0; k < K; k++) {
        float u = h3_nvfp4_unscaled(c.in[1].data, c.in[2].data, K, n, k);
        CHECK(h3_bf16_round(u) == u, "w_b not exact in bf16");
        t_set(&wb, n * K + k, u);
        t_set(&wq, n * K + k, deq[n * K + k]);
      }
    h3_value *lx = t_in(&t, "lx", c.in[0].type), *lw = t_in(&t, "lw", wb.type);
    h3_attr f32 = h3_attr_dtype(t.m, "dtype", H3_F32);
    h3_op *lin32 = t_op(&t, H3_OP_LINEAR, 2, (h3_value *[]){lx, lw}, 1, &f32);
    h3_op *lin = t_op(&t, H3_OP_LINEAR, 2, (h3_value *[]){lx, lw}, 0, NULL);
    h3_tensor a[1], b[1];
    CHECK(t_run(lin32, (h3_tensor[]){c.in[0], wb}, a) == H3_OK, "linear failed");
    CHECK(t_run(lin, (h3_tensor[]){c.in[0], wq}, b) == H3_OK, "linear failed");
    int same = 1;
    double e = 0, r = 0;
    for (int64_t i = 0; i < M * N; i++) {
      same &= h3_f32_to_bf16(((float *)a[0].data)[i] * g) == ((uint16_t *)y[0].data)[i];
      double d = t_get(&y[0], i) - t_get(&b[0], i);
      e += d * d, r += t_get(&b[0], i) * t_get(&b[0], i);
    }
    CHECK(same, "trial %d: != linear(x, w_b) * g", trial);
    double nmse = r > 0 ? e / r : e;
    worst = fmax(worst, nmse);
    CHECK(nmse <= 1e-4, "trial %d: NMSE %g vs dequantize + linear", trial, nmse);
    free(deq), free(wb.data), free(wq.data), t_free_all(y, 1), t_free_all(a, 1), t_free_all(b, 1);
    t_free_all(c.in, 4), t_free(&t);
  }
  printf("linear_nvfp4 vs linear(x, bf16(w')): worst NMSE %.3g\n", worst);
}

/* Builds linear_nvfp4 over inputs of these types; returns the inference message or "". */
static const char *build_error(h3_type x, h3_type p, h3_type s, h3_type g, int dt) {
  static char msg[512];
  T t;
  t_init(&t, 1);
  h3_value *v[4] = {t_in(&t, "x", x), t_in(&t, "p", p), t_in(&t, "s", s), t_in(&t, "g", g)};
  h3_attr a = h3_attr_dtype(t.m, "dtype", H3_I32);
  h3_diag d;
  h3_diag_init(&d);
  h3_op *op = h3_build_op(&t.b, H3_OP_LINEAR_NVFP4, 4, v, dt, &a, 0, &d);
  snprintf(msg, sizeof msg, "%s", !op && d.head ? d.head->message : "");
  h3_diag_free(&d);
  t_free(&t);
  return msg;
}

static void test_errors(void) {
  h3_type x = TY(H3_BF16, 4, 64), p = TY(H3_U8, 8, 32), s = TY(H3_U8, 8, 4), g = TY(H3_F32, 1);
  CHECK(!*build_error(x, p, s, g, 0), "a good op was refused: %s", build_error(x, p, s, g, 0));
  struct {
    const char *want;
    h3_type x, p, s, g;
    int dt;
  } bad[] = {
      {"K = 24 must be a positive multiple of 16", TY(H3_BF16, 4, 24), TY(H3_U8, 8, 12),
       TY(H3_U8, 8, 1), g, 0},
      {"x must be bf16[.., K]", TY(H3_F32, 4, 64), p, s, g, 0},
      {"packed must be u8[N, 32]", x, TY(H3_U8, 8, 64), s, g, 0},
      {"packed must be u8[N, 32]", x, TY(H3_I8, 8, 32), s, g, 0},
      {"scale must be u8[8, 4]", x, p, TY(H3_U8, 8, 2), g, 0},
      {"scale must be u8[8, 4]", x, p, TY(H3_U8, 4, 4), g, 0},
      {"global must be f32[1]", x, p, s, TY(H3_F32, 8), 0},
      {"global must be f32[1]", x, p, s, TY(H3_BF16, 1), 0},
      {"expected a float result dtype", x, p, s, g, 1},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *m = build_error(bad[i].x, bad[i].p, bad[i].s, bad[i].g, bad[i].dt);
    CHECK(strstr(m, bad[i].want) && strstr(m, "linear_nvfp4"), "case %zu: got '%s', want '%s'", i,
          m, bad[i].want);
  }
}

static void test_cuda_kind(void) {
  T t;
  t_init(&t, 9);
  nv_case c = make_case(&t, TY(H3_BF16, 2, 32), 4, false);
  h3_op *op = build(&t, &c, H3_BF16);
  CHECK(h3_exec_classify(op) == H3_EXEC_DEFERRED, "linear_nvfp4 must be deferred on cuda");
  t_free_all(c.in, 4), t_free(&t);
}

int main(void) {
  test_against_loop();
  test_against_linear();
  test_errors();
  test_cuda_kind();
  return t_report("nvfp4_op");
}
