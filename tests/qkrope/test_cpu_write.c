/* test_cpu_write.c: the CPU reference of rms_norm_rope_write (runtime/cpu/ops_norm_rope.c;
 * made by kv-write-fusion).
 *   - bitwise equal to kv_write(cache, rms_norm_rope(..), slot) (with the reshape to
 *     [T, heads*D] when the cache row is flat) run op by op on the CPU backend, on random
 *     non-zero inputs and a random cache, for the M3.1 k (the k columns of qkv [T, 9216]:
 *     4 x 128, rope dims 64, offset 1.0, eps 1e-6, f32 tables), the M3.1 indexer's ik
 *     (1 x 128 into a flat [P, page, 128] cache) and 2 heads of 20 into a flat row of 40
 *     (f16 tables, no offset); with 1 and 3 workers and in place (the result is the cache);
 *   - the slots come in scrambled order and hold duplicates: a written row is the head rows
 *     of the last token with that slot (kv_write's rule), every other row of the cache is
 *     untouched;
 *   - a slot outside [0, P*page) is an error with kv_write's message, not a crash;
 *   - type inference rejects a cache row of the wrong size and a bad slot operand.
 */
#include "qk_test.h"

#include "h3/backend.h"

/* One case: x bf16[T, C] read at [start, start + H*D); w bf16[D]; cos/sin [T, half];
 * cache bf16[P, page, H, D] (flat: [P, page, H*D]); slot[T] in [0, P*page). */
typedef struct {
  const char *name;
  int64_t T, C, start, H, D, half, P, page;
  bool flat;
  h3_dtype cd;   /* cos/sin's dtype */
  double offset; /* NaN: no offset attribute */
  double eps;
  int32_t slot[8];
} wr_case;

/* The IR of case c: graph @g with %y (rms_norm_rope, [reshape,] kv_write) and %f (the fused
 * op), both returned. */
static char *wr_ir(const wr_case *c) {
  char attrs[160], ct[64], rows[96] = "";
  long long T = c->T, H = c->H, D = c->D, F = c->half;
  int n = snprintf(attrs, sizeof attrs, "start = %lld, heads = %lld, eps = %.17g", (long long)c->start,
                   H, c->eps);
  if (!isnan(c->offset)) snprintf(attrs + n, sizeof attrs - (size_t)n, ", offset = %.1f", c->offset);
  if (c->flat) {
    snprintf(ct, sizeof ct, "bf16[%lld, %lld, %lld]", (long long)c->P, (long long)c->page, H * D);
    snprintf(rows, sizeof rows, "    %%r = reshape(%%n) {shape = [%lld, %lld]} : bf16[%lld, %lld]\n",
             T, H * D, T, H * D);
  } else {
    snprintf(ct, sizeof ct, "bf16[%lld, %lld, %lld, %lld]", (long long)c->P, (long long)c->page, H, D);
  }
  const char *cd = case_dtype(c->cd);
  size_t cap = 4096;
  char *s = malloc(cap);
  if (!s) return NULL;
  snprintf(s, cap,
           "module @kw config \"test\" {\n"
           "  graph @g(%%c: %s, %%x: bf16[%lld, %lld], %%w: bf16[%lld], %%cs: %s[%lld, %lld], "
           "%%sn: %s[%lld, %lld], %%slot: i32[%lld]) -> (y: %s, f: %s) {\n"
           "    %%n = rms_norm_rope(%%x, %%w, %%cs, %%sn) {%s} : bf16[%lld, %lld, %lld]\n%s"
           "    %%y = kv_write(%%c, %s, %%slot) : %s\n"
           "    %%f = rms_norm_rope_write(%%c, %%x, %%w, %%cs, %%sn, %%slot) {%s} : %s\n"
           "    return %%y, %%f\n  }\n}\n",
           ct, T, (long long)c->C, D, cd, T, F, cd, T, F, T, ct, ct, attrs, T, H, D, rows,
           c->flat ? "%r" : "%n", ct, attrs, ct);
  return s;
}

/* The first error message of running op on in[] (into a scratch result), or "" when it ran. */
static void run_error(const h3_op *op, void *const *in, int64_t bytes, char *msg, size_t len) {
  h3_tensor ti[6], to = {op->results[0]->type, calloc(1, (size_t)bytes)};
  for (int i = 0; i < op->n_operands; i++) ti[i] = (h3_tensor){op->operands[i]->type, in[i]};
  h3_diag d;
  h3_diag_init(&d);
  h3_status st = h3_cpu_run_op(op, ti, op->n_operands, &to, 1, 1, 7, &d);
  snprintf(msg, len, "%s", st == H3_ERR && d.head ? d.head->message : "");
  h3_diag_free(&d);
  free(to.data);
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

static void check_case(const wr_case *c) {
  char *text = wr_ir(c);
  h3_module *m = text ? case_parse("kw_case.ir", text) : NULL;
  free(text);
  CHECK(m != NULL, "%s: the case's IR", c->name);
  if (!m) return;
  h3_graph *g = m->graphs[0];
  const int64_t nc = c->P * c->page * c->H * c->D, nr = c->T * c->H * c->D;
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
  memcpy(fi, cache, cb);
  void *const fin[6] = {cache, x, w, cs, sn, slot};
  bool ok = case_run_cpu(case_op(g, "n"), (void *[]){x, w, cs, sn}, (void *[]){n}, 1) &&
            (!c->flat || case_run_cpu(case_op(g, "r"), (void *[]){n}, (void *[]){r}, 1)) &&
            case_run_cpu(case_op(g, "y"), (void *[]){cache, c->flat ? r : n, slot}, (void *[]){y}, 1) &&
            case_run_cpu(case_op(g, "f"), fin, (void *[]){f1}, 1) &&
            case_run_cpu(case_op(g, "f"), fin, (void *[]){f3}, 3) &&
            case_run_cpu(case_op(g, "f"), (void *[]){fi, x, w, cs, sn, slot}, (void *[]){fi}, 1);
  CHECK(ok, "%s: running the ops", c->name);
  if (ok) {
    int64_t diff = 0, first = -1;
    for (int64_t i = 0; i < nc; i++)
      if (y[i] != f1[i] && diff++ == 0) first = i;
    CHECK(diff == 0, "%s: %lld of %lld cache elements differ from the unfused ops (first %lld)",
          c->name, (long long)diff, (long long)nc, (long long)first);
    CHECK(memcmp(f1, f3, cb) == 0, "%s: 3 workers differ from 1", c->name);
    CHECK(memcmp(f1, fi, cb) == 0, "%s: in place differs", c->name);
    const int64_t bad = rule_errors(c, cache, n, f1);
    CHECK(bad == 0, "%s: %lld cache rows break the slot rule", c->name, (long long)bad);
    printf("%s: bitwise equal to kv_write(rms_norm_rope); %lld tokens into %lld rows\n", c->name,
           (long long)c->T, (long long)(c->P * c->page));
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
  free(y), free(f1), free(f3), free(fi);
  h3_module_free(m);
}

/* An op line that must not type-check, and a piece of the expected message. */
static void check_error(const char *op_text, const char *want) {
  char text[1024];
  snprintf(text, sizeof text,
           "module @e config \"test\" {\n"
           "  graph @g(%%x: bf16[4, 64], %%w: bf16[16], %%c: f32[4, 4], %%s: f32[4, 4], %%sl: i32[4], "
           "%%sl3: i32[3], %%slf: f32[4], %%kc: bf16[2, 4, 2, 16], %%kc3: bf16[2, 4, 3, 16], "
           "%%kf: bf16[2, 4, 32]) -> (y: bf16[2, 4, 2, 16]) {\n"
           "    %%y = %s : bf16[2, 4, 2, 16]\n    return %%y\n  }\n}\n",
           op_text);
  CHECK(case_parse_fails_with("kw_case.ir", text, want), "'%s' should fail with '%s'", op_text,
        want);
}

int main(void) {
  const wr_case cases[] = {
      {"m31 k (4 x 128, R 64, offset 1, f32 tables)", 6, 9216, 8192, 4, 128, 32, 4, 4, false,
       H3_F32, 1.0, 1e-6, {9, 2, 9, 15, 0, 2}},
      {"m31 indexer ik (1 x 128, flat cache)", 5, 128, 0, 1, 128, 32, 3, 4, true, H3_F32, 1.0,
       1e-6, {5, 11, 0, 5, 7}},
      {"2 x 20 into a flat row of 40 (R 10, f16 tables)", 7, 60, 20, 2, 20, 5, 2, 3, true, H3_F16,
       NAN, 1e-5, {4, 1, 3, 1, 0, 4, 1}},
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
  return check_summary("qkrope_cpu_write");
}
