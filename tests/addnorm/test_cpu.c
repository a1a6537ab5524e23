/* test_cpu.c: the CPU reference of add_rms_norm (runtime/cpu/ops_norm.c; made by
 * add-norm-fusion).
 *   - its two results are bitwise add(a, b) and rms_norm(add(a, b), w) run op by op on the
 *     CPU backend, on random non-zero inputs whose rows have very different norms, for the
 *     M3.1 post-attention norm (bf16 [3, 6144], offset 1.0, eps 1e-6), bf16 [5, 128] (f32
 *     w, no offset), bf16 [4, 20] (D % 8 != 0; f32 w, offset 0.5) and f32 [2, 64] (bf16 w);
 *     with 1 and 3 workers;
 *   - parsing rejects a and b of different types (also a broadcast b), a w of the wrong
 *     length, an f16 or rank-0 a (type inference) and a missing eps (the op's attributes),
 *     with a message naming them.
 */
#include "an_test.h"

#include "../common/check.h"

/* One case: a, b [rows, D] of dtype xd, w [D] of dtype wd. */
typedef struct {
  const char *name;
  int64_t rows, D;
  h3_dtype xd, wd;
  double offset; /* NaN: no offset attribute */
  double eps;
} an_case;

/* The IR of case c: graph @g with %x = add, %y = rms_norm(%x) and the fused %f, %g. */
static char *case_ir(const an_case *c) {
  char off[64] = "";
  if (!isnan(c->offset)) snprintf(off, sizeof off, ", offset = %.1f", c->offset);
  const char *xd = case_dtype(c->xd), *wd = case_dtype(c->wd);
  long long R = c->rows, D = c->D;
  char *s = malloc(2048);
  if (s)
    snprintf(s, 2048,
             "module @an config \"test\" {\n"
             "  graph @g(%%a: %s[%lld, %lld], %%b: %s[%lld, %lld], %%w: %s[%lld])"
             " -> (y: %s[%lld, %lld], g: %s[%lld, %lld]) {\n"
             "    %%x = add(%%a, %%b) : %s[%lld, %lld]\n"
             "    %%y = rms_norm(%%x, %%w) {eps = %.17g%s} : %s[%lld, %lld]\n"
             "    %%f, %%g = add_rms_norm(%%a, %%b, %%w) {eps = %.17g%s} : %s[%lld, %lld], %s[%lld, %lld]\n"
             "    return %%y, %%g\n  }\n}\n",
             xd, R, D, xd, R, D, wd, D, xd, R, D, xd, R, D, xd, R, D, c->eps, off, xd, R, D,
             c->eps, off, xd, R, D, xd, R, D);
  return s;
}

/* The number of elements where p and q (n of size es) differ; *first the first of them. */
static int64_t n_diff(const void *p, const void *q, int64_t n, size_t es, int64_t *first) {
  int64_t bad = 0;
  *first = -1;
  for (int64_t i = 0; i < n; i++)
    if (memcmp((const char *)p + i * es, (const char *)q + i * es, es) && bad++ == 0) *first = i;
  return bad;
}

static void check_case(const an_case *c) {
  char *text = case_ir(c);
  h3_module *m = text ? case_parse("an_case.ir", text) : NULL;
  free(text);
  CHECK(m != NULL, "%s: the case's IR", c->name);
  if (!m) return;
  h3_graph *g = m->graphs[0];
  const int64_t n = c->rows * c->D;
  const size_t es = h3_dtype_size(c->xd), bytes = (size_t)n * es;
  void *a = an_operand(c->xd, c->rows, c->D), *b = an_operand(c->xd, c->rows, c->D);
  void *w = case_random(an_rng(), c->wd, c->D, false);
  void *x = malloc(bytes), *y = malloc(bytes), *f1 = malloc(bytes), *g1 = malloc(bytes);
  void *f3 = malloc(bytes), *g3 = malloc(bytes);
  bool ok = case_run_cpu(case_op(g, "x"), (void *[]){a, b}, (void *[]){x}, 1) &&
            case_run_cpu(case_op(g, "y"), (void *[]){x, w}, (void *[]){y}, 1) &&
            case_run_cpu(case_op(g, "f"), (void *[]){a, b, w}, (void *[]){f1, g1}, 1) &&
            case_run_cpu(case_op(g, "f"), (void *[]){a, b, w}, (void *[]){f3, g3}, 3);
  CHECK(ok, "%s: running the ops", c->name);
  if (ok) {
    int64_t first, dx = n_diff(f1, x, n, es, &first);
    CHECK(dx == 0, "%s: x differs from add's in %lld of %lld elements (first %lld: %g vs %g)",
          c->name, (long long)dx, (long long)n, (long long)first,
          first >= 0 ? case_ld(f1, c->xd, first) : 0.0, first >= 0 ? case_ld(x, c->xd, first) : 0.0);
    int64_t dy = n_diff(g1, y, n, es, &first);
    CHECK(dy == 0, "%s: y differs from rms_norm's in %lld of %lld elements (first %lld: %g vs %g)",
          c->name, (long long)dy, (long long)n, (long long)first,
          first >= 0 ? case_ld(g1, c->xd, first) : 0.0, first >= 0 ? case_ld(y, c->xd, first) : 0.0);
    CHECK(memcmp(f1, f3, bytes) == 0 && memcmp(g1, g3, bytes) == 0, "%s: 3 workers differ from 1",
          c->name);
    printf("%s: x and y bitwise equal to add and rms_norm\n", c->name);
  }
  free(a), free(b), free(w), free(x), free(y), free(f1), free(g1), free(f3), free(g3);
  h3_module_free(m);
}

/* An op line (two results, bf16[4, 64] each) that must not type-check, and a piece of the
 * expected message. */
static void check_error(const char *op_text, const char *want) {
  char text[1024];
  snprintf(text, sizeof text,
           "module @e config \"test\" {\n"
           "  graph @g(%%a: bf16[4, 64], %%b32: f32[4, 64], %%w: bf16[64], %%w16: bf16[16], "
           "%%h: f16[4, 64], %%s: bf16[]) -> (y: bf16[4, 64]) {\n"
           "    %%x, %%y = %s : bf16[4, 64], bf16[4, 64]\n    return %%y\n  }\n}\n",
           op_text);
  CHECK(case_parse_fails_with("an_case.ir", text, want), "'%s' should fail with '%s'", op_text,
        want);
}

int main(void) {
  const an_case cases[] = {
      {"m31 post-attention norm bf16 [3, 6144]", 3, 6144, H3_BF16, H3_BF16, 1.0, 1e-6},
      {"bf16 [5, 128], f32 w", 5, 128, H3_BF16, H3_F32, NAN, 1e-5},
      {"bf16 [4, 20] (D % 8 != 0), f32 w", 4, 20, H3_BF16, H3_F32, 0.5, 1e-5},
      {"f32 [2, 64], bf16 w", 2, 64, H3_F32, H3_BF16, 1.0, 1e-6},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);

  check_error("add_rms_norm(%a, %b32, %w) {eps = 1e-06}",
              "a is bf16[4, 64] but b is f32[4, 64] (same type needed)");
  check_error("add_rms_norm(%a, %w, %w) {eps = 1e-06}",
              "a is bf16[4, 64] but b is bf16[64] (same type needed)");
  check_error("add_rms_norm(%a, %a, %w16) {eps = 1e-06}",
              "x has D = 64 but w is bf16[16] (w is [D])");
  check_error("add_rms_norm(%h, %h, %w) {eps = 1e-06}",
              "a must be a bf16 or f32 [.., D], got f16[4, 64]");
  check_error("add_rms_norm(%s, %s, %w) {eps = 1e-06}", "a must be a bf16 or f32 [.., D], got bf16[]");
  check_error("add_rms_norm(%a, %a, %w)", "missing attribute 'eps'");
  return check_summary("addnorm_cpu");
}
