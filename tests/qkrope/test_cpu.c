/* test_cpu.c: the CPU reference of rms_norm_rope (runtime/cpu/ops_norm_rope.c).
 *   - bitwise equal to the unfused chain slice -> reshape -> rms_norm -> rope run op by op
 *     on the CPU backend, on random non-zero inputs with rows of very different norms, for
 *     the H3 head (56 x 128, rope dims 96, qkv width 21504, the k columns), the tiny H3
 *     head (4 x 16, rope dims 12), the M3.1 form (offset 1.0, f32 tables, GQA k) and heads
 *     whose width is not a multiple of 8 (f32 w, f16 tables); with 1 and 3 workers;
 *   - close to an fp64 evaluation of the same math (relative L2 < 1e-2): the chain itself
 *     computes a normed, rotated head;
 *   - type inference rejects bad operands and attributes with a message naming them.
 */
#include "qk_test.h"

#include "h3/backend.h"

/* Relative L2 distance of f from the fp64 norm + rope of the case's inputs. */
static double ref_distance(const qk_case *c, const uint16_t *x, const void *w, const void *cs,
                           const void *sn, const uint16_t *f) {
  double num = 0, den = 0, off = isnan(c->offset) ? 0.0 : c->offset;
  double *n = malloc((size_t)c->D * sizeof *n);
  for (int64_t t = 0; n && t < c->T; t++)
    for (int64_t h = 0; h < c->H; h++) {
      const uint16_t *row = x + t * c->C + c->start + h * c->D;
      double ss = 0;
      for (int64_t k = 0; k < c->D; k++) ss += (double)h3_bf16_to_f32(row[k]) * h3_bf16_to_f32(row[k]);
      double r = 1.0 / sqrt(ss / (double)c->D + c->eps);
      for (int64_t k = 0; k < c->D; k++)
        n[k] = h3_bf16_to_f32(row[k]) * r * (case_ld(w, c->wd, k) + off);
      for (int64_t k = 0; k < c->D; k++) {
        double want = n[k];
        if (k < 2 * c->half) {
          int64_t i = k < c->half ? k : k - c->half;
          double co = case_ld(cs, c->cd, t * c->half + i), si = case_ld(sn, c->cd, t * c->half + i);
          want = k < c->half ? n[k] * co - n[k + c->half] * si : n[k] * co + n[k - c->half] * si;
        }
        double got = h3_bf16_to_f32(f[(t * c->H + h) * c->D + k]);
        num += (got - want) * (got - want);
        den += want * want;
      }
    }
  free(n);
  return sqrt(num / (den > 0 ? den : 1));
}

static void check_case(const qk_case *c) {
  char *text = qk_ir(c);
  h3_module *m = text ? case_parse("qk_case.ir", text) : NULL;
  free(text);
  CHECK(m != NULL, "%s: the case's IR", c->name);
  if (!m) return;
  h3_graph *g = m->graphs[0];
  const int64_t n = c->T * c->H * c->D;
  uint16_t *x = case_random(qk_rng(), H3_BF16, c->T * c->C, true);
  void *w = case_random(qk_rng(), c->wd, c->D, false);
  void *cs = case_random(qk_rng(), c->cd, c->T * c->half, false);
  void *sn = case_random(qk_rng(), c->cd, c->T * c->half, false);
  uint16_t *q = malloc((size_t)n * 2), *q3 = malloc((size_t)n * 2), *nn = malloc((size_t)n * 2);
  uint16_t *y = malloc((size_t)n * 2), *f1 = malloc((size_t)n * 2), *f3 = malloc((size_t)n * 2);
  bool ok = case_run_cpu(case_op(g, "q"), (void *[]){x}, (void *[]){q}, 1) &&
            case_run_cpu(case_op(g, "q3"), (void *[]){q}, (void *[]){q3}, 1) &&
            case_run_cpu(case_op(g, "n"), (void *[]){q3, w}, (void *[]){nn}, 1) &&
            case_run_cpu(case_op(g, "y"), (void *[]){nn, cs, sn}, (void *[]){y}, 1) &&
            case_run_cpu(case_op(g, "f"), (void *[]){x, w, cs, sn}, (void *[]){f1}, 1) &&
            case_run_cpu(case_op(g, "f"), (void *[]){x, w, cs, sn}, (void *[]){f3}, 3);
  CHECK(ok, "%s: running the ops", c->name);
  if (ok) {
    int64_t diff = 0, first = -1;
    for (int64_t i = 0; i < n; i++)
      if (y[i] != f1[i] && diff++ == 0) first = i;
    CHECK(diff == 0, "%s: %lld of %lld elements differ from the chain (first %lld: %g vs %g)",
          c->name, (long long)diff, (long long)n, (long long)first,
          first >= 0 ? h3_bf16_to_f32(f1[first]) : 0.0, first >= 0 ? h3_bf16_to_f32(y[first]) : 0.0);
    CHECK(memcmp(f1, f3, (size_t)n * 2) == 0, "%s: 3 workers differ from 1", c->name);
    double rel = ref_distance(c, x, w, cs, sn, f1);
    printf("%s: bitwise equal to the chain; relative L2 to fp64 %.2e\n", c->name, rel);
    CHECK(rel < 1e-2, "%s: relative L2 to the fp64 reference %g", c->name, rel);
  }
  free(x), free(w), free(cs), free(sn), free(q), free(q3), free(nn), free(y), free(f1), free(f3);
  h3_module_free(m);
}

/* An op line that must not type-check, and a piece of the expected message. */
static void check_error(const char *op_text, const char *want) {
  char text[1024];
  snprintf(text, sizeof text,
           "module @e config \"test\" {\n"
           "  graph @g(%%x: bf16[4, 64], %%w: bf16[16], %%c: bf16[4, 6], %%s: bf16[4, 6], %%c9: bf16[4, 9], "
           "%%x32: f32[4, 64], %%sf: f32[4, 6]) -> (y: bf16[4, 2, 16]) {\n"
           "    %%y = %s : bf16[4, 2, 16]\n    return %%y\n  }\n}\n",
           op_text);
  CHECK(case_parse_fails_with("qk_case.ir", text, want), "'%s' should fail with '%s'", op_text,
        want);
}

int main(void) {
  const qk_case cases[] = {
      {"h3 full head k (56 x 128, R 96)", 3, 21504, 7168, 56, 128, 48, H3_BF16, H3_BF16, NAN, 1e-5},
      {"h3 tiny head q (4 x 16, R 12)", 8, 192, 0, 4, 16, 6, H3_BF16, H3_BF16, NAN, 1e-5},
      {"m31 k (2 x 16, R 8, offset 1, f32 tables)", 5, 128, 64, 2, 16, 4, H3_BF16, H3_F32, 1.0, 1e-6},
      {"odd head (2 x 20, R 10, f32 w, f16 tables)", 4, 60, 20, 2, 20, 5, H3_F32, H3_F16, 0.5, 1e-5},
      {"wide head (1 x 256, R 192)", 2, 512, 256, 1, 256, 96, H3_BF16, H3_BF16, NAN, 1e-5},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);

  check_error("rms_norm_rope(%x, %w, %c, %s) {start = 48, heads = 2, eps = 1e-05}",
              "must lie in x's C = 64");
  check_error("rms_norm_rope(%x, %w, %c, %s) {start = 0, heads = 0, eps = 1e-05}",
              "heads = 0 must be positive");
  check_error("rms_norm_rope(%x, %w, %c9, %c9) {start = 0, heads = 2, eps = 1e-05}",
              "rotates R = 18 dims but w has D = 16");
  check_error("rms_norm_rope(%x32, %w, %c, %s) {start = 0, heads = 2, eps = 1e-05}",
              "x must be bf16[T, C]");
  check_error("rms_norm_rope(%x, %w, %c, %sf) {start = 0, heads = 2, eps = 1e-05}",
              "(same type needed)");
  check_error("rms_norm_rope(%x, %w, %c, %s) {heads = 2, eps = 1e-05}", "start");
  return check_summary("qkrope_cpu");
}
