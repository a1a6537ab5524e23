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
 *   - the q form (operand 7 q's norm weight wq [D], q_start, q_heads; results (cache',
 *     vcache', q)): the M3.1 q, k and v of qkv [T, 9216] (q 64 x 128 at 0, k 4 x 128 at 8192,
 *     v at 8704) and 3 q heads of 20 (single-element lanes on a GPU; f32 wq) beside 2 x 20 k
 *     and v in flat rows of 40: results 0 and 1 as in the v form, and result 2 (a fresh
 *     buffer, filled with 0xffff before the run) bitwise rms_norm_rope(x, wq, cos, sin)
 *     {start = q_start, heads = q_heads, eps, offset} run on its own; 1 and 3 workers; the
 *     caches in place and not;
 *   - the slots come in scrambled order and hold duplicates: a written row is the head rows
 *     of the last token with that slot (kv_write's rule; for v, x's v columns of that token),
 *     every other row of the cache (and of the v cache) is untouched;
 *   - a slot outside [0, P*page) is an error with kv_write's message, not a crash (all three
 *     forms);
 *   - type inference rejects a cache row of the wrong size and a bad slot operand; in the v
 *     form a v cache of another type than the cache's (another shape of as many values,
 *     another dtype), a v cache without v_start, v columns past x's C (v_start at the edge
 *     is accepted) and v_start without the v cache; in the q form a wq of another length
 *     than k's D, q_heads 0 or missing, q_start missing, q columns past x's C (q columns
 *     ending at C, and an f32 wq, are accepted), and q_start / q_heads with 7 operands (no
 *     wq).
 */
#include "qk_test.h"

#include "h3/backend.h"

/* One case: x bf16[T, C] read at [start, start + H*D); w bf16[D]; cos/sin [T, half];
 * cache bf16[P, page, H, D] (flat: [P, page, H*D]); slot[T] in [0, P*page); v_start >= 0:
 * the v form, the v cache of the cache's type gets x's columns [v_start, v_start + H*D);
 * q_heads > 0 (with v_start): the q form, q = bf16[T, q_heads, D] of x's columns
 * [q_start, q_start + q_heads*D) normed with wq (qd[D]). */
typedef struct {
  const char *name;
  int64_t T, C, start, H, D, half, P, page;
  bool flat;
  h3_dtype cd;   /* cos/sin's dtype */
  double offset; /* NaN: no offset attribute */
  double eps;
  int32_t slot[8];
  int64_t v_start; /* -1: the 6-operand form */
  int64_t q_start, q_heads; /* q_heads 0: no q (6 or 7 operands) */
  h3_dtype qd;              /* wq's dtype */
} wr_case;

/* The IR of case c: graph @g with %y (rms_norm_rope, [reshape,] kv_write) and %f (the fused
 * op), both returned; in the v form also the v cache %vc (an input after %slot), %yv (slice,
 * [reshape,] kv_write into %vc) and the fused op's second result %fv, returned after them;
 * in the q form also q's weight %wq (the last input), %q (rms_norm_rope of q's columns with
 * %wq) and the fused op's third result %fq, returned last. */
static char *wr_ir(const wr_case *c) {
  char attrs[160], fattrs[256], ct[64], rows[96] = "", vin[96] = "", vout[160] = "", vchain[512] = "";
  char fres[24] = "%f", fvc[16] = "", fty[200], ret[48] = "%y, %f", qchain[320] = "", qt[64] = "";
  long long T = c->T, H = c->H, D = c->D, F = c->half, HQ = c->q_heads;
  const bool v = c->v_start >= 0, q = c->q_heads > 0;
  char off[32] = "";
  if (!isnan(c->offset)) snprintf(off, sizeof off, ", offset = %.1f", c->offset);
  int n = snprintf(attrs, sizeof attrs, "start = %lld, heads = %lld, eps = %.17g%s", (long long)c->start,
                   H, c->eps, off);
  if (c->flat) {
    snprintf(ct, sizeof ct, "bf16[%lld, %lld, %lld]", (long long)c->P, (long long)c->page, H * D);
    snprintf(rows, sizeof rows, "    %%r = reshape(%%n) {shape = [%lld, %lld]} : bf16[%lld, %lld]\n",
             T, H * D, T, H * D);
  } else {
    snprintf(ct, sizeof ct, "bf16[%lld, %lld, %lld, %lld]", (long long)c->P, (long long)c->page, H, D);
  }
  snprintf(fty, sizeof fty, "%s", ct);
  snprintf(fattrs, sizeof fattrs, "%s", attrs); /* the fused op's: with v_start (and q's) */
  if (v) {
    n += snprintf(fattrs + n, sizeof fattrs - (size_t)n, ", v_start = %lld", (long long)c->v_start);
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
  if (q) { /* q: rms_norm_rope of its columns with wq, the fused op's result 2 */
    snprintf(qt, sizeof qt, "bf16[%lld, %lld, %lld]", T, HQ, D);
    snprintf(fattrs + n, sizeof fattrs - (size_t)n, ", q_start = %lld, q_heads = %lld",
             (long long)c->q_start, HQ);
    snprintf(vin + strlen(vin), sizeof vin - strlen(vin), ", %%wq: %s[%lld]", case_dtype(c->qd), D);
    snprintf(vout + strlen(vout), sizeof vout - strlen(vout), ", q: %s, fq: %s", qt, qt);
    snprintf(qchain, sizeof qchain,
             "    %%q = rms_norm_rope(%%x, %%wq, %%cs, %%sn) {start = %lld, heads = %lld, eps = %.17g%s} : %s\n",
             (long long)c->q_start, HQ, c->eps, off, qt);
    snprintf(fres, sizeof fres, "%%f, %%fv, %%fq");
    snprintf(fvc, sizeof fvc, ", %%vc, %%wq");
    snprintf(fty, sizeof fty, "%s, %s, %s", ct, ct, qt);
    snprintf(ret, sizeof ret, "%%y, %%f, %%yv, %%fv, %%q, %%fq");
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
           "    %%y = kv_write(%%c, %s, %%slot) : %s\n%s%s"
           "    %s = rms_norm_rope_write(%%c, %%x, %%w, %%cs, %%sn, %%slot%s) {%s} : %s\n"
           "    return %s\n  }\n}\n",
           ct, T, (long long)c->C, D, cd, T, F, cd, T, F, T, vin, ct, ct, vout,
           attrs, T, H, D, rows, c->flat ? "%r" : "%n", ct, vchain, qchain, fres, fvc, fattrs, fty, ret);
  return s;
}

/* The first error message of running op on in[] (into zeroed scratch results of each
 * result's bytes), or "" when it ran. */
static void run_error(const h3_op *op, void *const *in, char *msg, size_t len) {
  h3_tensor ti[8], to[3];
  for (int i = 0; i < op->n_operands; i++) ti[i] = (h3_tensor){op->operands[i]->type, in[i]};
  for (int r = 0; r < op->n_results; r++)
    to[r] = (h3_tensor){op->results[r]->type,
                        calloc(1, (size_t)h3_type_bytes(&op->results[r]->type) + 16)};
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
  /* the q form: q's weight, the unfused q and the fused op's (fresh buffers, 0xffff first:
     an element it does not write shows) */
  const bool q = c->q_heads > 0;
  const int64_t nq = c->T * c->q_heads * c->D;
  const size_t qb = (size_t)(nq ? nq : 1) * 2;
  void *wq = NULL;
  uint16_t *yq = NULL, *fq1 = NULL, *fq3 = NULL, *fqi = NULL;
  if (q) {
    wq = case_random(qk_rng(), c->qd, c->D, false);
    yq = malloc(qb), fq1 = malloc(qb), fq3 = malloc(qb), fqi = malloc(qb);
    memset(fq1, 0xff, qb);
    memset(fq3, 0xff, qb);
    memset(fqi, 0xff, qb);
  }
  void *const fin[8] = {cache, x, w, cs, sn, slot, vcache, wq};
  bool ok = case_run_cpu(case_op(g, "n"), (void *[]){x, w, cs, sn}, (void *[]){n}, 1) &&
            (!c->flat || case_run_cpu(case_op(g, "r"), (void *[]){n}, (void *[]){r}, 1)) &&
            case_run_cpu(case_op(g, "y"), (void *[]){cache, c->flat ? r : n, slot}, (void *[]){y}, 1);
  if (ok && v) /* v op by op: slice, [reshape,] kv_write */
    ok = case_run_cpu(case_op(g, "v"), (void *[]){x}, (void *[]){sv}, 1) &&
         (c->flat || case_run_cpu(case_op(g, "v3"), (void *[]){sv}, (void *[]){sv3}, 1)) &&
         case_run_cpu(case_op(g, "yv"), (void *[]){vcache, c->flat ? sv : sv3, slot}, (void *[]){yv}, 1);
  if (ok && q) /* q on its own: rms_norm_rope of q's columns with wq */
    ok = case_run_cpu(case_op(g, "q"), (void *[]){x, wq, cs, sn}, (void *[]){yq}, 1);
  ok = ok && case_run_cpu(case_op(g, "f"), fin, (void *[]){f1, fv1, fq1}, 1) &&
       case_run_cpu(case_op(g, "f"), fin, (void *[]){f3, fv3, fq3}, 3) &&
       case_run_cpu(case_op(g, "f"), (void *[]){fi, x, w, cs, sn, slot, fvi, wq},
                    (void *[]){fi, fvi, fqi}, 1);
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
    if (q) {
      diff = count_diff(yq, fq1, nq, &first);
      CHECK(diff == 0, "%s: %lld of %lld q elements differ from rms_norm_rope (first %lld)",
            c->name, (long long)diff, (long long)nq, (long long)first);
      CHECK(memcmp(fq1, fq3, qb) == 0, "%s: q: 3 workers differ from 1", c->name);
      CHECK(memcmp(fq1, fqi, qb) == 0, "%s: q: the caches in place change q", c->name);
    }
    printf("%s: bitwise equal to kv_write(rms_norm_rope)%s%s; %lld tokens into %lld rows\n", c->name,
           v ? " and kv_write(reshape(slice))" : "", q ? " and rms_norm_rope (q)" : "",
           (long long)c->T, (long long)(c->P * c->page));
  }
  /* slot P*page (one past the cache) and -1: kv_write's error */
  const int32_t bad_slot[2] = {(int32_t)(c->P * c->page), -1};
  for (int k = 0; k < 2; k++) {
    slot[k] = bad_slot[k];
    char msg[512], want[128];
    run_error(case_op(g, "f"), fin, msg, sizeof msg);
    snprintf(want, sizeof want, "row index %d (entry %d) is outside [0, %lld)", bad_slot[k], k,
             (long long)(c->P * c->page));
    CHECK(strstr(msg, want) != NULL, "%s: slot %d: message '%s', want '%s'", c->name, bad_slot[k],
          msg, want);
    slot[k] = c->slot[k];
  }
  free(cache), free(x), free(w), free(cs), free(sn), free(slot), free(n), free(r);
  free(y), free(f1), free(f3), free(fi), free(c0);
  free(vcache), free(vc0), free(sv), free(sv3), free(xv), free(yv), free(fv1), free(fv3), free(fvi);
  free(wq), free(yq), free(fq1), free(fq3), free(fqi);
  h3_module_free(m);
}

/* An op line that defines `lhs` (results of the types `types`) and must not type-check, and
 * a piece of the expected message; want NULL: one that must type-check. x bf16[4, 64], D 16. */
static void check_op(const char *op_text, const char *lhs, const char *types, const char *want) {
  char text[1536];
  snprintf(text, sizeof text,
           "module @e config \"test\" {\n"
           "  graph @g(%%x: bf16[4, 64], %%w: bf16[16], %%c: f32[4, 4], %%s: f32[4, 4], %%sl: i32[4], "
           "%%sl3: i32[3], %%slf: f32[4], %%kc: bf16[2, 4, 2, 16], %%kc3: bf16[2, 4, 3, 16], "
           "%%kf: bf16[2, 4, 32], %%vc: bf16[2, 4, 2, 16], %%vf: f32[2, 4, 2, 16], %%wq: bf16[16], "
           "%%wq8: bf16[8], %%wqf: f32[16]) -> (y: bf16[2, 4, 2, 16]) {\n"
           "    %s = %s : %s\n    return %%y\n  }\n}\n",
           lhs, op_text, types);
  if (!want) {
    h3_module *m = case_parse("kw_case.ir", text);
    CHECK(m != NULL, "'%s' should type-check", op_text);
    h3_module_free(m);
    return;
  }
  CHECK(case_parse_fails_with("kw_case.ir", text, want), "'%s' should fail with '%s'", op_text,
        want);
}

/* An op line with `results` (1 or 2) results of the cache's type. */
static void check_infer(const char *op_text, int results, const char *want) {
  const char *ct = "bf16[2, 4, 2, 16]";
  check_op(op_text, results == 2 ? "%y, %yv" : "%y",
           results == 2 ? "bf16[2, 4, 2, 16], bf16[2, 4, 2, 16]" : ct, want);
}

static void check_error(const char *op_text, const char *want) { check_infer(op_text, 1, want); }

/* A q-form op line (8 operands): results (cache, v cache, q bf16[4, q_heads, 16]). */
static void check_q(const char *op_text, int q_heads, const char *want) {
  char types[96];
  snprintf(types, sizeof types, "bf16[2, 4, 2, 16], bf16[2, 4, 2, 16], bf16[4, %d, 16]", q_heads);
  check_op(op_text, "%y, %yv, %yq", types, want);
}

int main(void) {
  const wr_case cases[] = {
      {"m31 k (4 x 128, R 64, offset 1, f32 tables)", 6, 9216, 8192, 4, 128, 32, 4, 4, false,
       H3_F32, 1.0, 1e-6, {9, 2, 9, 15, 0, 2}, -1, 0, 0, H3_BF16},
      {"m31 indexer ik (1 x 128, flat cache)", 5, 128, 0, 1, 128, 32, 3, 4, true, H3_F32, 1.0,
       1e-6, {5, 11, 0, 5, 7}, -1, 0, 0, H3_BF16},
      {"2 x 20 into a flat row of 40 (R 10, f16 tables)", 7, 60, 20, 2, 20, 5, 2, 3, true, H3_F16,
       NAN, 1e-5, {4, 1, 3, 1, 0, 4, 1}, -1, 0, 0, H3_BF16},
      {"m31 k with v (v at 8704 of qkv [T, 9216])", 7, 9216, 8192, 4, 128, 32, 4, 4, false, H3_F32,
       1.0, 1e-6, {12, 3, 7, 12, 0, 15, 3}, 8704, 0, 0, H3_BF16},
      {"2 x 20 with v at 60 into flat rows of 40 (f16 tables)", 7, 100, 20, 2, 20, 5, 2, 3, true,
       H3_F16, NAN, 1e-5, {2, 5, 2, 0, 5, 4, 2}, 60, 0, 0, H3_BF16},
      /* the q form: qkv's q (64 x 128 at 0) beside k and v */
      {"m31 q, k, v (q 64 x 128 at 0, k at 8192, v at 8704)", 7, 9216, 8192, 4, 128, 32, 4, 4, false,
       H3_F32, 1.0, 1e-6, {6, 14, 6, 1, 14, 9, 6}, 8704, 0, 64, H3_BF16},
      {"3 q heads of 20 at 100 (f32 wq) with 2 x 20 k, v at 60, flat rows of 40 (f16 tables)", 7,
       160, 20, 2, 20, 5, 2, 3, true, H3_F16, NAN, 1e-5, {3, 0, 5, 3, 0, 1, 3}, 60, 100, 3, H3_F32},
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
  /* the q form: k 2 x 16 at 0, v at 32, q of D = 16 */
  check_q("rms_norm_rope_write(%kc, %x, %w, %c, %s, %sl, %vc, %wq) {start = 0, heads = 2, "
          "eps = 1e-06, v_start = 32, q_start = 48, q_heads = 1}",
          1, NULL);
  check_q("rms_norm_rope_write(%kc, %x, %w, %c, %s, %sl, %vc, %wqf) {start = 0, heads = 2, "
          "eps = 1e-06, offset = 1.0, v_start = 32, q_start = 0, q_heads = 4}",
          4, NULL);
  check_q("rms_norm_rope_write(%kc, %x, %w, %c, %s, %sl, %vc, %wq8) {start = 0, heads = 2, "
          "eps = 1e-06, v_start = 32, q_start = 48, q_heads = 1}",
          1, "q's norm weight must be a bf16, f16 or f32 [16] (k's D), got bf16[8]");
  check_q("rms_norm_rope_write(%kc, %x, %w, %c, %s, %sl, %vc, %sl) {start = 0, heads = 2, "
          "eps = 1e-06, v_start = 32, q_start = 48, q_heads = 1}",
          1, "q's norm weight must be a bf16, f16 or f32 [16] (k's D), got i32[4]");
  check_q("rms_norm_rope_write(%kc, %x, %w, %c, %s, %sl, %vc, %wq) {start = 0, heads = 2, "
          "eps = 1e-06, v_start = 32, q_start = 0, q_heads = 0}",
          1, "q's columns [q_start, q_start + q_heads*D) = [0, 0 + 0*16) must lie in x's C = 64 "
             "(q_start and q_heads >= 1 are required with q's weight)");
  check_q("rms_norm_rope_write(%kc, %x, %w, %c, %s, %sl, %vc, %wq) {start = 0, heads = 2, "
          "eps = 1e-06, v_start = 32, q_start = 0}",
          1, "= [0, 0 + 0*16) must lie in x's C = 64 (q_start and q_heads >= 1 are required");
  check_q("rms_norm_rope_write(%kc, %x, %w, %c, %s, %sl, %vc, %wq) {start = 0, heads = 2, "
          "eps = 1e-06, v_start = 32, q_heads = 1}",
          1, "= [-1, -1 + 1*16) must lie in x's C = 64 (q_start and q_heads >= 1 are required");
  check_q("rms_norm_rope_write(%kc, %x, %w, %c, %s, %sl, %vc, %wq) {start = 0, heads = 2, "
          "eps = 1e-06, v_start = 32, q_start = 49, q_heads = 1}",
          1, "q's columns [q_start, q_start + q_heads*D) = [49, 49 + 1*16) must lie in x's C = 64");
  check_q("rms_norm_rope_write(%kc, %x, %w, %c, %s, %sl, %vc, %wq) {start = 0, heads = 2, "
          "eps = 1e-06, v_start = 32, q_start = 16, q_heads = 4}",
          4, "q's columns [q_start, q_start + q_heads*D) = [16, 16 + 4*16) must lie in x's C = 64");
  check_infer("rms_norm_rope_write(%kc, %x, %w, %c, %s, %sl, %vc) {start = 0, heads = 2, "
              "eps = 1e-06, v_start = 32, q_start = 48, q_heads = 1}",
              2, "q_start / q_heads without q's norm weight (operand 8)");
  check_infer("rms_norm_rope_write(%kc, %x, %w, %c, %s, %sl, %vc) {start = 0, heads = 2, "
              "eps = 1e-06, v_start = 32, q_heads = 1}",
              2, "q_start / q_heads without q's norm weight (operand 8)");
  check_error("rms_norm_rope_write(%kc, %x, %w, %c, %s, %sl) {start = 0, heads = 2, "
              "eps = 1e-06, q_start = 48, q_heads = 1}",
              "q_start / q_heads without q's norm weight (operand 8)");
  return check_summary("qkrope_cpu_write");
}
