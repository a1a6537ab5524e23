/* test_cpu_write.c: the CPU reference of rms_norm_rope_write (runtime/cpu/ops_norm_rope.c;
 * made by kv-write-fusion).
 *   - bitwise equal to kv_write(cache, rms_norm_rope(..), slot) (with the reshape to
 *     [T, heads*D] when the cache row is flat) run op by op on the CPU backend, on random
 *     non-zero inputs and a random cache, for the M3.1 k (the k columns of qkv [T, 9216]:
 *     4 x 128, rope dims 64, offset 1.0, eps 1e-6, f32 tables), the M3.1 indexer's ik
 *     (1 x 128 into a flat [P, page, 128] cache) and 2 heads of 20 into a flat row of 40
 *     (f16 tables, no offset); with 1 and 3 workers, in place (the result is the cache) and
 *     not (the operand cache is then untouched);
 *   - the v form (operand 6 the v cache, v_start; results (cache', vcache')): the M3.1 k with
 *     its v (qkv's v columns at 8704, right after k's at 8192) and 2 x 20 into flat rows of
 *     40 with v at 60 of x [T, 100]: result 0 bitwise kv_write(cache, rms_norm_rope(..)) and
 *     result 1 bitwise kv_write(vcache, reshape(slice(x, axis 1, v_start, heads*D)), slot)
 *     (no reshape when the row is flat: the slice is [T, heads*D]), run op by op; 1 and 3
 *     workers; both results in place over their operands (cache and v cache) and not;
 *   - the slots come in scrambled order and hold duplicates: a written row is the head rows
 *     of the last token with that slot (kv_write's rule; for v, x's v columns of that token),
 *     every other row of the cache (and of the v cache) is untouched;
 *   - a slot outside [0, P*page) is an error with kv_write's message, not a crash (both
 *     forms);
 *   - type inference rejects a cache row of the wrong size and a bad slot operand; in the v
 *     form a v cache of another type than the cache's (another shape of as many values,
 *     another dtype), a v cache without v_start, v columns past x's C (v_start at the edge
 *     is accepted) and v_start without the v cache.
 */
#include "qk_test.h"

#include "h3/backend.h"

/* One case: x bf16[T, C] read at [start, start + H*D); w bf16[D]; cos/sin [T, half];
 * cache bf16[P, page, H, D] (flat: [P, page, H*D]); slot[T] in [0, P*page); v_start >= 0:
 * the v form, the v cache of the cache's type gets x's columns [v_start, v_start + H*D). */
typedef struct {
  const char *name;
  int64_t T, C, start, H, D, half, P, page;
  bool flat;
  h3_dtype cd;   /* cos/sin's dtype */
  double offset; /* NaN: no offset attribute */
  double eps;
  int32_t slot[8];
  int64_t v_start; /* -1: the 6-operand form */
} wr_case;

/* The IR of case c: graph @g with %y (rms_norm_rope, [reshape,] kv_write) and %f (the fused
 * op), both returned; in the v form also the v cache %vc (last input), %yv (slice,
 * [reshape,] kv_write into %vc) and the fused op's second result %fv, returned after them. */
static char *wr_ir(const wr_case *c) {
  char attrs[160], fattrs[192], ct[64], rows[96] = "", vin[96] = "", vout[160] = "", vchain[512] = "";
  char fres[16] = "%f", fvc[8] = "", fty[140], ret[32] = "%y, %f";
  long long T = c->T, H = c->H, D = c->D, F = c->half;
  const bool v = c->v_start >= 0;
  int n = snprintf(attrs, sizeof attrs, "start = %lld, heads = %lld, eps = %.17g", (long long)c->start,
                   H, c->eps);
  if (!isnan(c->offset)) n += snprintf(attrs + n, sizeof attrs - (size_t)n, ", offset = %.1f", c->offset);
  if (c->flat) {
    snprintf(ct, sizeof ct, "bf16[%lld, %lld, %lld]", (long long)c->P, (long long)c->page, H * D);
    snprintf(rows, sizeof rows, "    %%r = reshape(%%n) {shape = [%lld, %lld]} : bf16[%lld, %lld]\n",
             T, H * D, T, H * D);
  } else {
    snprintf(ct, sizeof ct, "bf16[%lld, %lld, %lld, %lld]", (long long)c->P, (long long)c->page, H, D);
  }
  snprintf(fty, sizeof fty, "%s", ct);
  snprintf(fattrs, sizeof fattrs, "%s", attrs); /* the fused op's: with v_start */
  if (v) {
    snprintf(fattrs + n, sizeof fattrs - (size_t)n, ", v_start = %lld", (long long)c->v_start);
    snprintf(vin, sizeof vin, ", %%vc: %s", ct);
    snprintf(vout, sizeof vout, ", yv: %s, fv: %s", ct, ct);
    int k = snprintf(vchain, sizeof vchain,
                     "    %%v = slice(%%x) {axis = 1, start = %lld, len = %lld} : bf16[%lld, %lld]\n",
                     (long long)c->v_start, H * D, T, H * D);
    if (!c->flat)
      k += snprintf(vchain + k, sizeof vchain - (size_t)k,
                    "    %%v3 = reshape(%%v) {shape = [%lld, %lld, %lld]} : bf16[%lld, %lld, %lld]\n",
                    T, H, D, T, H, D);
    snprintf(vchain + k, sizeof vchain - (size_t)k, "    %%yv = kv_write(%%vc, %s, %%slot) : %s\n",
             c->flat ? "%v" : "%v3", ct);
    snprintf(fres, sizeof fres, "%%f, %%fv");
    snprintf(fvc, sizeof fvc, ", %%vc");
    snprintf(fty, sizeof fty, "%s, %s", ct, ct);
    snprintf(ret, sizeof ret, "%%y, %%f, %%yv, %%fv");
  }
  const char *cd = case_dtype(c->cd);
  size_t cap = 8192;
  char *s = malloc(cap);
  if (!s) return NULL;
  snprintf(s, cap,
           "module @kw config \"test\" {\n"
           "  graph @g(%%c: %s, %%x: bf16[%lld, %lld], %%w: bf16[%lld], %%cs: %s[%lld, %lld], "
           "%%sn: %s[%lld, %lld], %%slot: i32[%lld]%s) -> (y: %s, f: %s%s) {\n"
           "    %%n = rms_norm_rope(%%x, %%w, %%cs, %%sn) {%s} : bf16[%lld, %lld, %lld]\n%s"
           "    %%y = kv_write(%%c, %s, %%slot) : %s\n%s"
           "    %s = rms_norm_rope_write(%%c, %%x, %%w, %%cs, %%sn, %%slot%s) {%s} : %s\n"
           "    return %s\n  }\n}\n",
           ct, T, (long long)c->C, D, cd, T, F, cd, T, F, T, vin, ct, ct, vout,
           attrs, T, H, D, rows, c->flat ? "%r" : "%n", ct, vchain, fres, fvc, fattrs, fty, ret);
  return s;
}

/* The first error message of running op on in[] (into scratch results of `bytes` each), or
 * "" when it ran. */
static void run_error(const h3_op *op, void *const *in, int64_t bytes, char *msg, size_t len) {
  h3_tensor ti[7], to[2];
  for (int i = 0; i < op->n_operands; i++) ti[i] = (h3_tensor){op->operands[i]->type, in[i]};
  for (int r = 0; r < op->n_results; r++)
    to[r] = (h3_tensor){op->results[r]->type, calloc(1, (size_t)bytes)};
  h3_diag d;
  h3_diag_init(&d);
  h3_status st = h3_cpu_run_op(op, ti, op->n_operands, to, op->n_results, 1, 7, &d);
  snprintf(msg, len, "%s", st == H3_ERR && d.head ? d.head->message : "");
  h3_diag_free(&d);
  for (int r = 0; r < op->n_results; r++) free(to[r].data);
}

/* Cache rows (of H*D values) of f that differ from kv_write's rule applied to cache and
 * the head rows n [T, H*D] at slot[]. */
static int64_t rule_errors(const wr_case *c, const uint16_t *cache, const uint16_t *n,
                           const uint16_t *f) {
  const int64_t row = c->H * c->D;
  int64_t bad = 0;
  for (int64_t r = 0; r < c->P * c->page; r++) {
    const uint16_t *want = cache + r * row;
    for (int64_t t = 0; t < c->T; t++)
      if (c->slot[t] == r) want = n + t * row; /* the last token with slot r wins */
    bad += memcmp(f + r * row, want, (size_t)row * 2) != 0;
  }
  return bad;
}

/* Elements in which a and b (n bf16) differ; the first such at *first. */
static int64_t count_diff(const uint16_t *a, const uint16_t *b, int64_t n, int64_t *first) {
  int64_t diff = 0;
  *first = -1;
  for (int64_t i = 0; i < n; i++)
    if (a[i] != b[i] && diff++ == 0) *first = i;
  return diff;
}

static void check_case(const wr_case *c) {
  char *text = wr_ir(c);
  h3_module *m = text ? case_parse("kw_case.ir", text) : NULL;
  free(text);
  CHECK(m != NULL, "%s: the case's IR", c->name);
  if (!m) return;
  h3_graph *g = m->graphs[0];
  const bool v = c->v_start >= 0;
  const int64_t nc = c->P * c->page * c->H * c->D, nr = c->T * c->H * c->D, row = c->H * c->D;
  const size_t cb = (size_t)nc * 2;
  uint16_t *cache = case_random(qk_rng(), H3_BF16, nc, false);
  uint16_t *x = case_random(qk_rng(), H3_BF16, c->T * c->C, true);
  void *w = case_random(qk_rng(), H3_BF16, c->D, false);
  void *cs = case_random(qk_rng(), c->cd, c->T * c->half, false);
  void *sn = case_random(qk_rng(), c->cd, c->T * c->half, false);
  int32_t *slot = malloc((size_t)c->T * 4);
  memcpy(slot, c->slot, (size_t)c->T * 4);
  uint16_t *n = malloc((size_t)nr * 2), *r = malloc((size_t)nr * 2);
  uint16_t *y = malloc(cb), *f1 = malloc(cb), *f3 = malloc(cb), *fi = malloc(cb);
  uint16_t *c0 = malloc(cb); /* the cache as drawn: a result into another buffer keeps it */
  memcpy(fi, cache, cb);
  memcpy(c0, cache, cb);
  /* the v form: the v cache, its copies and results, x's v columns (slice, reshape, gathered
     here for the slot rule) */
  uint16_t *vcache = NULL, *vc0 = NULL, *sv = NULL, *sv3 = NULL, *xv = NULL, *yv = NULL;
  uint16_t *fv1 = NULL, *fv3 = NULL, *fvi = NULL;
  if (v) {
    vcache = case_random(qk_rng(), H3_BF16, nc, false);
    vc0 = malloc(cb), yv = malloc(cb), fv1 = malloc(cb), fv3 = malloc(cb), fvi = malloc(cb);
    sv = malloc((size_t)nr * 2), sv3 = malloc((size_t)nr * 2), xv = malloc((size_t)nr * 2);
    memcpy(vc0, vcache, cb);
    memcpy(fvi, vcache, cb);
    for (int64_t t = 0; t < c->T; t++)
      memcpy(xv + t * row, x + t * c->C + c->v_start, (size_t)row * 2);
  }
  void *const fin[7] = {cache, x, w, cs, sn, slot, vcache};
  bool ok = case_run_cpu(case_op(g, "n"), (void *[]){x, w, cs, sn}, (void *[]){n}, 1) &&
            (!c->flat || case_run_cpu(case_op(g, "r"), (void *[]){n}, (void *[]){r}, 1)) &&
            case_run_cpu(case_op(g, "y"), (void *[]){cache, c->flat ? r : n, slot}, (void *[]){y}, 1);
  if (ok && v) /* v op by op: slice, [reshape,] kv_write */
    ok = case_run_cpu(case_op(g, "v"), (void *[]){x}, (void *[]){sv}, 1) &&
         (c->flat || case_run_cpu(case_op(g, "v3"), (void *[]){sv}, (void *[]){sv3}, 1)) &&
         case_run_cpu(case_op(g, "yv"), (void *[]){vcache, c->flat ? sv : sv3, slot}, (void *[]){yv}, 1);
  ok = ok && case_run_cpu(case_op(g, "f"), fin, (void *[]){f1, fv1}, 1) &&
       case_run_cpu(case_op(g, "f"), fin, (void *[]){f3, fv3}, 3) &&
       case_run_cpu(case_op(g, "f"), (void *[]){fi, x, w, cs, sn, slot, fvi}, (void *[]){fi, fvi}, 1);
  CHECK(ok, "%s: running the ops", c->name);
  if (ok) {
    int64_t first;
    int64_t diff = count_diff(y, f1, nc, &first);
    CHECK(diff == 0, "%s: %lld of %lld cache elements differ from the unfused ops (first %lld)",
          c->name, (long long)diff, (long long)nc, (long long)first);
    CHECK(memcmp(f1, f3, cb) == 0, "%s: 3 workers differ from 1", c->name);
    CHECK(memcmp(f1, fi, cb) == 0, "%s: in place differs", c->name);
    CHECK(memcmp(cache, c0, cb) == 0, "%s: the operand cache changed (result not in place)", c->name);
    const int64_t bad = rule_errors(c, cache, n, f1);
    CHECK(bad == 0, "%s: %lld cache rows break the slot rule", c->name, (long long)bad);
    if (v) {
      diff = count_diff(yv, fv1, nc, &first);
      CHECK(diff == 0, "%s: %lld of %lld v cache elements differ from slice + reshape + kv_write "
            "(first %lld)", c->name, (long long)diff, (long long)nc, (long long)first);
      CHECK(memcmp(fv1, fv3, cb) == 0, "%s: v: 3 workers differ from 1", c->name);
      CHECK(memcmp(fv1, fvi, cb) == 0, "%s: v: in place differs", c->name);
      CHECK(memcmp(vcache, vc0, cb) == 0, "%s: the operand v cache changed (result not in place)",
            c->name);
      CHECK(memcmp(sv, xv, (size_t)nr * 2) == 0, "%s: slice != x's v columns", c->name);
      const int64_t vbad = rule_errors(c, vcache, xv, fv1);
      CHECK(vbad == 0, "%s: %lld v cache rows break the slot rule", c->name, (long long)vbad);
    }
    printf("%s: bitwise equal to kv_write(rms_norm_rope)%s; %lld tokens into %lld rows\n", c->name,
           v ? " and kv_write(reshape(slice))" : "", (long long)c->T, (long long)(c->P * c->page));
  }
  /* slot P*page (one past the cache) and -1: kv_write's error */
  const int32_t bad_slot[2] = {(int32_t)(c->P * c->page), -1};
  for (int k = 0; k < 2; k++) {
    slot[k] = bad_slot[k];
    char msg[512], want[128];
    run_error(case_op(g, "f"), fin, (int64_t)cb + 16, msg, sizeof msg);
    snprintf(want, sizeof want, "row index %d (entry %d) is outside [0, %lld)", bad_slot[k], k,
             (long long)(c->P * c->page));
    CHECK(strstr(msg, want) != NULL, "%s: slot %d: message '%s', want '%s'", c->name, bad_slot[k],
          msg, want);
    slot[k] = c->slot[k];
  }
  free(cache), free(x), free(w), free(cs), free(sn), free(slot), free(n), free(r);
  free(y), free(f1), free(f3), free(fi), free(c0);
  free(vcache), free(vc0), free(sv), free(sv3), free(xv), free(yv), free(fv1), free(fv3), free(fvi);
  h3_module_free(m);
}

/* An op line with `results` (1 or 2) results of the cache's type that must not type-check,
 * and a piece of the expected message; want NULL: one that must type-check. */
static void check_infer(const char *op_text, int results, const char *want) {
  char text[1280];
  const char *ct = "bf16[2, 4, 2, 16]";
  snprintf(text, sizeof text,
           "module @e config \"test\" {\n"
           "  graph @g(%%x: bf16[4, 64], %%w: bf16[16], %%c: f32[4, 4], %%s: f32[4, 4], %%sl: i32[4], "
           "%%sl3: i32[3], %%slf: f32[4], %%kc: bf16[2, 4, 2, 16], %%kc3: bf16[2, 4, 3, 16], "
           "%%kf: bf16[2, 4, 32], %%vc: bf16[2, 4, 2, 16], %%vf: f32[2, 4, 2, 16]) -> (y: %s) {\n"
           "    %s = %s : %s%s%s\n    return %%y\n  }\n}\n",
           ct, results == 2 ? "%y, %yv" : "%y", op_text, ct, results == 2 ? ", " : "",
           results == 2 ? ct : "");
  if (!want) {
    h3_module *m = case_parse("kw_case.ir", text);
    CHECK(m != NULL, "'%s' should type-check", op_text);
    h3_module_free(m);
    return;
  }
  CHECK(case_parse_fails_with("kw_case.ir", text, want), "'%s' should fail with '%s'", op_text,
        want);
}

static void check_error(const char *op_text, const char *want) { check_infer(op_text, 1, want); }

int main(void) {
  const wr_case cases[] = {
      {"m31 k (4 x 128, R 64, offset 1, f32 tables)", 6, 9216, 8192, 4, 128, 32, 4, 4, false,
       H3_F32, 1.0, 1e-6, {9, 2, 9, 15, 0, 2}, -1},
      {"m31 indexer ik (1 x 128, flat cache)", 5, 128, 0, 1, 128, 32, 3, 4, true, H3_F32, 1.0,
       1e-6, {5, 11, 0, 5, 7}, -1},
      {"2 x 20 into a flat row of 40 (R 10, f16 tables)", 7, 60, 20, 2, 20, 5, 2, 3, true, H3_F16,
       NAN, 1e-5, {4, 1, 3, 1, 0, 4, 1}, -1},
      {"m31 k with v (v at 8704 of qkv [T, 9216])", 7, 9216, 8192, 4, 128, 32, 4, 4, false, H3_F32,
       1.0, 1e-6, {12, 3, 7, 12, 0, 15, 3}, 8704},
      {"2 x 20 with v at 60 into flat rows of 40 (f16 tables)", 7, 100, 20, 2, 20, 5, 2, 3, true,
       H3_F16, NAN, 1e-5, {2, 5, 2, 0, 5, 4, 2}, 60},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);

  check_error("rms_norm_rope_write(%kc3, %x, %w, %c, %s, %sl) {start = 0, heads = 2, eps = 1e-06}",
              "cache must be bf16[P, page, ..] with rows of heads*D = 2*16 values");
  check_error("rms_norm_rope_write(%kf, %x, %w, %c, %s, %sl) {start = 0, heads = 1, eps = 1e-06}",
              "rows of heads*D = 1*16 values, got bf16[2, 4, 32]");
  check_error("rms_norm_rope_write(%kc, %x, %w, %c, %s, %sl3) {start = 0, heads = 2, eps = 1e-06}",
              "x has T = 4 but slot has T = 3");
  check_error("rms_norm_rope_write(%kc, %x, %w, %c, %s, %slf) {start = 0, heads = 2, eps = 1e-06}",
              "slot must be i32[T]");
  /* the v form: x [4, 64], 2 heads of 16 (rows of 32 values) */
  check_infer("rms_norm_rope_write(%kc, %x, %w, %c, %s, %sl, %vc) {start = 0, heads = 2, "
              "eps = 1e-06, v_start = 32}",
              2, NULL);
  check_infer("rms_norm_rope_write(%kc, %x, %w, %c, %s, %sl, %kf) {start = 0, heads = 2, "
              "eps = 1e-06, v_start = 32}",
              2, "the v cache is bf16[2, 4, 32] but the cache bf16[2, 4, 2, 16] (same type needed)");
  check_infer("rms_norm_rope_write(%kc, %x, %w, %c, %s, %sl, %vf) {start = 0, heads = 2, "
              "eps = 1e-06, v_start = 32}",
              2, "the v cache is f32[2, 4, 2, 16] but the cache bf16[2, 4, 2, 16] (same type needed)");
  check_infer("rms_norm_rope_write(%kc, %x, %w, %c, %s, %sl, %vc) {start = 0, heads = 2, "
              "eps = 1e-06}",
              2, "(v_start is required with a v cache)");
  check_infer("rms_norm_rope_write(%kc, %x, %w, %c, %s, %sl, %vc) {start = 0, heads = 2, "
              "eps = 1e-06, v_start = 33}",
              2, "v's columns [v_start, v_start + heads*D) = [33, 33 + 32) must lie in x's C = 64");
  check_error("rms_norm_rope_write(%kc, %x, %w, %c, %s, %sl) {start = 0, heads = 2, eps = 1e-06, "
              "v_start = 32}",
              "v_start without a v cache (operand 7)");
  return check_summary("qkrope_cpu_write");
}
