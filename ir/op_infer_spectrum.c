/* op_infer_spectrum.c: result type inference of the step-skipping ops of ops.def:
 * spectrum_update and spectrum_forecast (Spectrum's running-sum state R [P, ..F] and its
 * per-step coefficient tables) and cache_dit_decide (Cache-DiT's reuse flag). The
 * coefficient table of a spectrum op is a flat list of rows; its length must be a
 * multiple of the row width (P for update, P + Q for forecast). The `branch` control op
 * has no inference: the verifier checks it against its two callees.
 */
#include "op_infer.h"

/* R is f32[P, ..F] with P >= 1 and h (operand ih) has the shape ..F. */
static int want_state(const h3_op *op, int ih, const char *hname, char *why, size_t why_len) {
  const h3_type *r = TY(0), *h = TY(ih);
  if (r->dtype != H3_F32 || r->rank < 2 || r->dims[0] < 1)
    FAIL("%s: R must be f32[P, ..F] with P >= 1 (the running sums), got %s", OPN, TS(r));
  if (!h3_dtype_is_float(h->dtype) || h->rank != r->rank - 1)
    FAIL("%s: %s must be a float tensor of the feature shape ..F of R %s, got %s", OPN, hname,
         TS(r), TS(h));
  for (int i = 0; i < h->rank; i++)
    if (h->dims[i] != r->dims[i + 1])
      FAIL("%s: %s is %s but R is %s (R is [P, ..F], %s is [..F])", OPN, hname, TS(h), TS(r),
           hname);
  return 0;
}

/* coeffs holds whole rows of `width` values and at least one row. */
static int want_table(const h3_op *op, int64_t width, char *why, size_t why_len) {
  const h3_attr *c = h3_op_attr(op, "coeffs");
  if (!c || c->n < width || c->n % width != 0)
    FAIL("%s: coeffs has %d values, not a positive multiple of the row width %lld", OPN,
         c ? c->n : 0, LL(width));
  return 0;
}

H3_INFER_DECL(h3_infer_spectrum_update) {
  if (want_state(op, 1, "h", why, why_len)) return -1;
  if (h3_infer_want_i32(op, 2, "k", 0, "[]", why, why_len)) return -1;
  if (want_table(op, TY(0)->dims[0], why, why_len)) return -1;
  out[0] = *TY(0);
  return 1;
}

H3_INFER_DECL(h3_infer_spectrum_forecast) {
  const h3_type *r = TY(0);
  if (r->dtype != H3_F32 || r->rank < 2 || r->dims[0] < 1)
    FAIL("%s: R must be f32[P, ..F] with P >= 1 (the running sums), got %s", OPN, TS(r));
  if (h3_infer_want_i32(op, 1, "k", 0, "[]", why, why_len)) return -1;
  int64_t width = r->dims[0];
  if (op->n_operands == 3) {
    const h3_type *q = TY(2);
    bool ok = h3_dtype_is_float(q->dtype) && q->rank == r->rank && q->dims[0] >= 1;
    for (int i = 1; ok && i < r->rank; i++) ok = q->dims[i] == r->dims[i];
    if (!ok)
      FAIL("%s: hist must be a float [Q, ..F] with the feature shape of R %s, got %s", OPN, TS(r),
           TS(q));
    width += q->dims[0];
  }
  if (want_table(op, width, why, why_len)) return -1;
  h3_dtype dt = (h3_dtype)h3_op_attr_int(op, "dtype", H3_BF16);
  if (!h3_dtype_is_float(dt)) FAIL("%s: dtype must be a float type", OPN);
  out[0] = h3_type_make(dt, r->rank - 1, r->dims + 1);
  return 1;
}

H3_INFER_DECL(h3_infer_cache_dit_decide) {
  if (!h3_dtype_is_float(TY(0)->dtype))
    FAIL("%s: rf must be a float tensor, got %s", OPN, TS(TY(0)));
  if (!h3_type_equal(TY(0), TY(1)))
    FAIL("%s: rf is %s but rf_prev is %s (same type needed)", OPN, TS(TY(0)), TS(TY(1)));
  if (h3_infer_want_i32(op, 2, "k", 0, "[]", why, why_len)) return -1;
  if (h3_infer_want_i32(op, 3, "n", 0, "[]", why, why_len)) return -1;
  if (h3_op_attr_int(op, "max_consecutive", 0) < 0 || h3_op_attr_int(op, "warmup", 0) < 0)
    FAIL("%s: warmup and max_consecutive must be >= 0", OPN);
  out[0] = h3_type_make(H3_I32, 0, NULL);
  return 1;
}
