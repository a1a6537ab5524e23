/* test_cpu.c: the CPU attention with a v view (runtime/cpu/ops_attention.c, attention's
 * v_view attribute of ops.def).
 *   - attention(q, k, x) {v_view = [start, C]} is bitwise equal to the ops it replaces,
 *     slice(x) -> reshape -> attention, run op by op on the CPU backend, on random non-zero
 *     inputs: the H3 head (D = 128, the v columns of a qkv row, live/pad segments), GQA with
 *     causal masking in f32, f16 with two segment boundaries, v's columns first in the row
 *     (start = 0) and a view in the middle of a wider row; with 1 and 3 workers;
 *   - the result is not all zero and is close to an fp64 softmax attention computed here
 *     from q, k and x (relative L2 < 1e-2), so the view reads the right elements;
 *   - type inference rejects bad views with a message naming the rule.
 * Usage: vview_cpu_test.
 */
#include "../common/case_data.h"
#include "../common/check.h"

#include "h3/backend.h"
#include "h3/bf16.h"
#include "h3/ir.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* One case: q [T, Hq, D], k [T, Hk, D], x [T, C] holding v at columns [start, start+Hk*D). */
typedef struct {
  const char *name;
  int64_t T, Hq, Hk, D, C, start;
  h3_dtype dt;
  int causal;
  const char *segments; /* "" or e.g. "[29]" */
} vv_case;

/* the data generator state (tests/common/case_data.h) */
static uint64_t rng = 0x9e3779b97f4a7c15ull;

/* The case's IR: %v3 = reshape(slice(%x)) -> %a = attention(%q, %k, %v3); %b = the same
 * attention with %x and v_view; both returned. */
static char *case_ir(const vv_case *c) {
  char att[128];
  snprintf(att, sizeof att, "scale = 0.3%s%s%s", c->causal ? ", causal = 1" : "",
           c->segments[0] ? ", segments = " : "", c->segments);
  const char *t = case_dtype(c->dt);
  long long T = c->T, Hq = c->Hq, Hk = c->Hk, D = c->D, C = c->C, S = c->start;
  size_t cap = 4096;
  char *s = malloc(cap);
  if (!s) return NULL;
  snprintf(s, cap,
           "module @vv config \"test\" {\n"
           "  graph @g(%%q: %s[%lld, %lld, %lld], %%k: %s[%lld, %lld, %lld], %%x: %s[%lld, %lld])"
           " -> (a: %s[%lld, %lld, %lld], b: %s[%lld, %lld, %lld]) {\n"
           "    %%v = slice(%%x) {axis = 1, start = %lld, len = %lld} : %s[%lld, %lld]\n"
           "    %%v3 = reshape(%%v) {shape = [%lld, %lld, %lld]} : %s[%lld, %lld, %lld]\n"
           "    %%a = attention(%%q, %%k, %%v3) {%s} : %s[%lld, %lld, %lld]\n"
           "    %%b = attention(%%q, %%k, %%x) {%s, v_view = [%lld, %lld]} : %s[%lld, %lld, %lld]\n"
           "    return %%a, %%b\n  }\n}\n",
           t, T, Hq, D, t, T, Hk, D, t, T, C, t, T, Hq, D, t, T, Hq, D, S, Hk * D, t, T, Hk * D,
           T, Hk, D, t, T, Hk, D, att, t, T, Hq, D, att, S, C, t, T, Hq, D);
  return s;
}

/* Row t's key range [lo, hi) under the case's segments and causal mask. */
static void key_range(const vv_case *c, int64_t t, int64_t *lo, int64_t *hi) {
  *lo = 0, *hi = c->T;
  const char *p = c->segments;
  while (*p) {
    if (*p < '0' || *p > '9') {
      p++;
      continue;
    }
    char *end;
    int64_t b = strtoll(p, &end, 10);
    p = end;
    if (b <= t && b > *lo) *lo = b;
    if (b > t && b < *hi) *hi = b;
  }
  if (c->causal && *hi > t + 1) *hi = t + 1;
}

/* Relative L2 distance of o from softmax attention in fp64 on q, k and v read from x. */
static double ref_distance(const vv_case *c, const void *q, const void *k, const void *x,
                           const void *o) {
  double num = 0, den = 0;
  int64_t group = c->Hq / c->Hk;
  double *p = malloc((size_t)c->T * sizeof *p);
  for (int64_t t = 0; p && t < c->T; t++)
    for (int64_t h = 0; h < c->Hq; h++) {
      int64_t kvh = h / group, lo, hi;
      key_range(c, t, &lo, &hi);
      double m = -INFINITY, l = 0;
      for (int64_t j = lo; j < hi; j++) {
        double dot = 0;
        for (int64_t d = 0; d < c->D; d++)
          dot += case_ld(q, c->dt, (t * c->Hq + h) * c->D + d) * case_ld(k, c->dt, (j * c->Hk + kvh) * c->D + d);
        p[j] = dot * 0.3;
        if (p[j] > m) m = p[j];
      }
      for (int64_t j = lo; j < hi; j++) l += p[j] = exp(p[j] - m);
      for (int64_t d = 0; d < c->D; d++) {
        double want = 0;
        for (int64_t j = lo; j < hi; j++)
          want += p[j] * case_ld(x, c->dt, j * c->C + c->start + kvh * c->D + d);
        want /= l;
        double got = case_ld(o, c->dt, (t * c->Hq + h) * c->D + d);
        num += (got - want) * (got - want);
        den += want * want;
      }
    }
  free(p);
  return sqrt(num / (den > 0 ? den : 1));
}

static void check_case(const vv_case *c) {
  char *text = case_ir(c);
  h3_module *m = text ? case_parse("vview_case.ir", text) : NULL;
  free(text);
  CHECK(m != NULL, "%s: the case's IR", c->name);
  if (!m) return;
  h3_graph *g = m->graphs[0];
  const int64_t n = c->T * c->Hq * c->D, nv = c->T * c->Hk * c->D;
  const size_t es = h3_dtype_size(c->dt);
  void *q = case_random(&rng, c->dt, n, false), *k = case_random(&rng, c->dt, nv, false),
       *x = case_random(&rng, c->dt, c->T * c->C, false);
  void *v = malloc((size_t)nv * es), *v3 = malloc((size_t)nv * es);
  void *a = malloc((size_t)n * es), *b1 = malloc((size_t)n * es), *b3 = malloc((size_t)n * es);
  bool ok = q && k && x && v && v3 && a && b1 && b3 &&
            case_run_cpu(case_op(g, "v"), (void *[]){x}, (void *[]){v}, 1) &&
            case_run_cpu(case_op(g, "v3"), (void *[]){v}, (void *[]){v3}, 1) &&
            case_run_cpu(case_op(g, "a"), (void *[]){q, k, v3}, (void *[]){a}, 1) &&
            case_run_cpu(case_op(g, "b"), (void *[]){q, k, x}, (void *[]){b1}, 1) &&
            case_run_cpu(case_op(g, "b"), (void *[]){q, k, x}, (void *[]){b3}, 3);
  CHECK(ok, "%s: running the ops", c->name);
  if (ok) {
    int64_t diff = 0, first = -1;
    for (int64_t i = 0; i < n; i++)
      if (memcmp((char *)a + i * es, (char *)b1 + i * es, es) != 0 && diff++ == 0) first = i;
    CHECK(diff == 0, "%s: %lld of %lld elements differ from attention on the slice (first %lld: "
          "%g vs %g)", c->name, (long long)diff, (long long)n, (long long)first,
          first >= 0 ? case_ld(b1, c->dt, first) : 0.0, first >= 0 ? case_ld(a, c->dt, first) : 0.0);
    CHECK(memcmp(b1, b3, (size_t)n * es) == 0, "%s: 3 workers differ from 1", c->name);
    bool nonzero = false;
    for (int64_t i = 0; i < n && !nonzero; i++) nonzero = case_ld(b1, c->dt, i) != 0.0;
    CHECK(nonzero, "%s: the result is all zero", c->name);
    double rel = ref_distance(c, q, k, x, b1);
    printf("%s: bitwise equal to attention on the slice; relative L2 to fp64 %.2e\n", c->name, rel);
    CHECK(rel < 1e-2, "%s: relative L2 to the fp64 reference %g", c->name, rel);
  }
  free(q), free(k), free(x), free(v), free(v3), free(a), free(b1), free(b3);
  h3_module_free(m);
}

/* An attention line that must not type-check, and a piece of the expected message. */
static void check_error(const char *op_text, const char *want) {
  char text[1024];
  snprintf(text, sizeof text,
           "module @e config \"test\" {\n"
           "  graph @g(%%q: bf16[4, 2, 16], %%k: bf16[4, 2, 16], %%x: bf16[4, 96], "
           "%%x5: bf16[5, 96], %%v: bf16[4, 2, 16], %%x3: bf16[4, 3, 32]) -> (y: bf16[4, 2, 16]) {\n"
           "    %%y = %s : bf16[4, 2, 16]\n    return %%y\n  }\n}\n",
           op_text);
  CHECK(case_parse_fails_with("vview_case.ir", text, want), "'%s' should fail with '%s'",
        op_text, want);
}

int main(void) {
  const vv_case cases[] = {
      {"h3 head (3 x 128, v columns of qkv, segments [29])", 37, 3, 3, 128, 1152, 768, H3_BF16, 0, "[29]"},
      {"gqa causal f32 (4 q / 2 kv heads of 16)", 20, 4, 2, 16, 128, 96, H3_F32, 1, ""},
      {"f16, segments [5, 12], D = 24", 17, 2, 2, 24, 144, 96, H3_F16, 0, "[5, 12]"},
      {"v columns first (start 0)", 9, 2, 2, 16, 96, 0, H3_BF16, 0, ""},
      {"view in the middle of a wider row", 11, 1, 1, 32, 200, 56, H3_BF16, 1, "[3]"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);

  check_error("attention(%q, %k, %x) {scale = 0.5, v_view = [4, 96]}", "multiples of 8");
  check_error("attention(%q, %k, %x) {scale = 0.5, v_view = [-8, 96]}", "non-negative");
  check_error("attention(%q, %k, %x) {scale = 0.5, v_view = [72, 96]}", "must lie in v's C = 96");
  check_error("attention(%q, %k, %x) {scale = 0.5, v_view = [0, 88]}", "row_stride = 88");
  check_error("attention(%q, %k, %x) {scale = 0.5, v_view = [0]}", "[start, row_stride]");
  check_error("attention(%q, %k, %x5) {scale = 0.5, v_view = [0, 96]}", "T = 5 rows");
  check_error("attention(%q, %k, %v) {scale = 0.5, v_view = [0, 32]}", "must be the 2D tensor");
  check_error("attention(%q, %k, %x3) {scale = 0.5, v_view = [0, 32]}", "must be the 2D tensor");
  check_error("attention(%q, %k, %x) {scale = 0.5}", "(same shape needed)");
  return check_summary("vview_cpu");
}
