/* op_infer.c: result type inference of the generic ops (constants and generators,
 * elementwise, data movement, reductions and norms, linear), as ops.def specifies them.
 * Every failure is a one-line reason naming the op, the operand and what was expected,
 * because the front end shows it to users as the shape error of their program.
 */
#include "op_infer.h"

#include <string.h>

/* ---- shared checks ------------------------------------------------------------------------ */
int h3_infer_want_rank(const h3_op *op, int i, const char *name, int rank, const char *shape,
                       char *why, size_t why_len) {
  if (TY(i)->rank != rank) FAIL("%s: %s must be %s (rank %d), got %s", OPN, name, shape, rank, TS(TY(i)));
  return 0;
}

int h3_infer_want_i32(const h3_op *op, int i, const char *name, int rank, const char *shape,
                      char *why, size_t why_len) {
  if (TY(i)->dtype != H3_I32 || TY(i)->rank != rank)
    FAIL("%s: %s must be i32%s, got %s", OPN, name, shape, TS(TY(i)));
  return 0;
}

int h3_infer_want_dim(const h3_op *op, int a, const char *an, int ad, int b, const char *bn,
                      int bd, const char *label, const char *bshape, char *why, size_t why_len) {
  int64_t x = TY(a)->dims[ad], y = TY(b)->dims[bd];
  if (x != y) FAIL("%s: %s has %s = %lld but %s has %s = %lld (%s is %s)", OPN, an, label, LL(x), bn, label, LL(y), bn, bshape);
  return 0;
}

int h3_infer_quant_linear_result(const h3_op *op, const h3_type *x, int64_t n, h3_type *out,
                                 char *why, size_t why_len) {
  const h3_attr *dt = h3_op_attr(op, "dtype");
  h3_dtype od = dt ? (h3_dtype)dt->i : H3_BF16;
  if (!h3_dtype_is_float(od)) FAIL("%s: dtype = %s, expected a float result dtype", OPN, h3_dtype_name(od));
  out[0] = *x;
  out[0].dims[x->rank - 1] = n;
  out[0].dtype = od;
  return 1;
}

static h3_dtype result_dtype(const h3_op *op, h3_dtype def) {
  const h3_attr *a = h3_op_attr(op, "dtype");
  return a ? (h3_dtype)a->i : def;
}

/* Type from an INTS attribute holding a shape. */
static int shape_attr(const h3_op *op, const char *name, h3_dtype dt, h3_type *out, char *why,
                      size_t why_len) {
  const h3_attr *a = h3_op_attr(op, name);
  memset(out, 0, sizeof *out);
  out->dtype = dt;
  if (!a) return 0; /* rank 0 */
  if (a->n > H3_MAX_RANK) FAIL("%s: %s has %d dims, at most %d are supported", OPN, name, a->n, H3_MAX_RANK);
  for (int i = 0; i < a->n; i++) {
    if (a->ints[i] < 0) FAIL("%s: %s[%d] = %lld is negative", OPN, name, i, LL(a->ints[i]));
    out->dims[i] = a->ints[i];
  }
  out->rank = a->n;
  return 0;
}

static int want_axis(const h3_op *op, int64_t axis, int rank, char *why, size_t why_len) {
  if (axis < 0 || axis >= rank)
    FAIL("%s: axis %lld is out of range for rank %d (the IR takes 0 <= axis < rank)", OPN, LL(axis), rank);
  return 0;
}

/* ---- constants and generators ------------------------------------------------------------ */
H3_INFER_DECL(h3_infer_const) {
  h3_dtype dt = (h3_dtype)h3_op_attr_int(op, "dtype", H3_F32);
  return shape_attr(op, "shape", dt, &out[0], why, why_len) ? -1 : 1;
}

H3_INFER_DECL(h3_infer_iota) {
  int64_t n = h3_op_attr_int(op, "n", 0);
  if (n < 0) FAIL("iota: n = %lld is negative", LL(n));
  out[0] = h3_type_make(result_dtype(op, H3_I32), 1, &n);
  return 1;
}

H3_INFER_DECL(h3_infer_randn) {
  return shape_attr(op, "shape", H3_F32, &out[0], why, why_len) ? -1 : 1;
}

H3_INFER_DECL(h3_infer_sigma_schedule) {
  int64_t n = h3_op_attr_int(op, "n", 0);
  if (n < 2) FAIL("sigma_schedule: n = %lld, needs at least 2 steps", LL(n));
  out[0] = h3_type_make(H3_F32, 1, &n);
  return 1;
}

/* ---- elementwise --------------------------------------------------------------------------- */
H3_INFER_DECL(h3_infer_binary) {
  const h3_type *a = TY(0), *b = TY(1);
  h3_type r;
  if (h3_broadcast_shapes(a, b, &r) != 0) {
    int rank = a->rank > b->rank ? a->rank : b->rank, axis = 0;
    int64_t da = 1, db = 1;
    for (int i = rank - 1; i >= 0; i--) {
      int ia = a->rank - rank + i, ib = b->rank - rank + i;
      da = ia >= 0 ? a->dims[ia] : 1;
      db = ib >= 0 ? b->dims[ib] : 1;
      if (da != db && da != 1 && db != 1) {
        axis = i - rank;
        break;
      }
    }
    FAIL("%s: cannot broadcast %s with %s (dim %d from the end: %lld vs %lld)", OPN, TS(a), TS(b), -axis, LL(da), LL(db));
  }
  if (op->code == H3_OP_MOD && (h3_dtype_is_float(a->dtype) || h3_dtype_is_float(b->dtype)))
    FAIL("mod: needs integer tensors, got %s and %s", TS(a), TS(b));
  r.dtype = result_dtype(op, r.dtype);
  out[0] = r;
  return 1;
}

H3_INFER_DECL(h3_infer_unary) {
  (void)why;
  (void)why_len;
  out[0] = *TY(0);
  out[0].dtype = result_dtype(op, out[0].dtype);
  return 1;
}

H3_INFER_DECL(h3_infer_unary_float) {
  out[0] = *TY(0);
  out[0].dtype = result_dtype(op, out[0].dtype);
  if (!h3_dtype_is_float(out[0].dtype))
    FAIL("%s: x is %s but %s needs a float result (cast x or set dtype)", OPN, TS(TY(0)), OPN);
  return 1;
}

H3_INFER_DECL(h3_infer_clamp) {
  const h3_attr *lo = h3_op_attr(op, "lo"), *hi = h3_op_attr(op, "hi");
  if (lo && hi && lo->f > hi->f) FAIL("clamp: lo = %g is above hi = %g", lo->f, hi->f);
  return h3_infer_unary(op, out, why, why_len);
}

H3_INFER_DECL(h3_infer_cast) { return h3_infer_unary(op, out, why, why_len); }

/* ---- data movement ----------------------------------------------------------------------------- */
H3_INFER_DECL(h3_infer_reshape) {
  h3_type t;
  if (shape_attr(op, "shape", TY(0)->dtype, &t, why, why_len)) return -1;
  int64_t a = h3_type_numel(TY(0)), b = h3_type_numel(&t);
  if (a != b) FAIL("reshape: x is %s (%lld elements) but shape %s holds %lld", TS(TY(0)), LL(a), TS(&t) + strlen(h3_dtype_name(t.dtype)), LL(b));
  out[0] = t;
  return 1;
}

H3_INFER_DECL(h3_infer_slice) {
  const h3_type *x = TY(0);
  int64_t axis = h3_op_attr_int(op, "axis", 0), start = h3_op_attr_int(op, "start", 0),
          len = h3_op_attr_int(op, "len", 0);
  if (want_axis(op, axis, x->rank, why, why_len)) return -1;
  if (start < 0 || len < 0 || start > x->dims[axis] - len)
    FAIL("slice: [%lld, %lld) is outside axis %lld of x %s (size %lld)", LL(start), LL(start + len), LL(axis), TS(x), LL(x->dims[axis]));
  out[0] = *x;
  out[0].dims[axis] = len;
  return 1;
}

H3_INFER_DECL(h3_infer_concat) {
  const h3_type *x0 = TY(0);
  int64_t axis = h3_op_attr_int(op, "axis", 0);
  if (want_axis(op, axis, x0->rank, why, why_len)) return -1;
  h3_type r = *x0;
  for (int i = 1; i < op->n_operands; i++) {
    const h3_type *x = TY(i);
    if (x->dtype != x0->dtype || x->rank != x0->rank)
      FAIL("concat: input %d is %s but input 0 is %s (same dtype and rank needed)", i, TS(x), TS(x0));
    for (int d = 0; d < x->rank; d++)
      if (d != axis && x->dims[d] != x0->dims[d])
        FAIL("concat: input %d is %s but input 0 is %s (dims other than axis %lld must match)", i, TS(x), TS(x0), LL(axis));
    r.dims[axis] += x->dims[axis];
  }
  out[0] = r;
  return 1;
}

H3_INFER_DECL(h3_infer_pad) {
  int64_t axis = h3_op_attr_int(op, "axis", 0), after = h3_op_attr_int(op, "after", 0);
  if (want_axis(op, axis, TY(0)->rank, why, why_len)) return -1;
  if (after < 0) FAIL("pad: after = %lld is negative", LL(after));
  out[0] = *TY(0);
  out[0].dims[axis] += after;
  return 1;
}

H3_INFER_DECL(h3_infer_gather) {
  const h3_type *t = TY(0), *idx = TY(1);
  if (t->rank < 1) FAIL("gather: table must be [N, ..], got %s", TS(t));
  if (idx->dtype != H3_I32) FAIL("gather: idx must be i32, got %s", TS(idx));
  if (idx->rank + t->rank - 1 > H3_MAX_RANK)
    FAIL("gather: result rank %d exceeds %d (idx %s, table %s)", idx->rank + t->rank - 1, H3_MAX_RANK, TS(idx), TS(t));
  h3_type r = *idx;
  r.dtype = t->dtype;
  for (int i = 1; i < t->rank; i++) r.dims[r.rank++] = t->dims[i];
  out[0] = r;
  return 1;
}

/* x[N, ..] minus its leading dim. */
static h3_type drop_lead(const h3_type *x) {
  h3_type r = *x;
  r.rank = x->rank - 1;
  for (int i = 0; i < r.rank; i++) r.dims[i] = x->dims[i + 1];
  r.dims[r.rank] = 0;
  return r;
}

H3_INFER_DECL(h3_infer_index) {
  if (TY(0)->rank < 1) FAIL("index: x must be [N, ..], got %s", TS(TY(0)));
  if (h3_infer_want_i32(op, 1, "i", 0, "[]", why, why_len)) return -1;
  out[0] = drop_lead(TY(0));
  return 1;
}

H3_INFER_DECL(h3_infer_set_index) {
  if (TY(0)->rank < 1) FAIL("set_index: x must be [N, ..], got %s", TS(TY(0)));
  if (h3_infer_want_i32(op, 1, "i", 0, "[]", why, why_len)) return -1;
  h3_type row = drop_lead(TY(0));
  if (!h3_type_equal(&row, TY(2)))
    FAIL("set_index: v is %s but a row of x %s is %s", TS(TY(2)), TS(TY(0)), TS(&row));
  out[0] = *TY(0);
  return 1;
}

H3_INFER_DECL(h3_infer_scatter_rows) {
  const h3_type *x = TY(0), *idx = TY(1), *v = TY(2);
  if (x->rank < 1) FAIL("scatter_rows: x must be [N, ..], got %s", TS(x));
  if (h3_infer_want_i32(op, 1, "idx", 1, "[T]", why, why_len)) return -1;
  h3_type want = *x;
  want.dims[0] = idx->dims[0];
  if (!h3_type_equal(&want, v))
    FAIL("scatter_rows: v is %s but x %s with idx %s needs %s", TS(v), TS(x), TS(idx), TS(&want));
  out[0] = *x;
  return 1;
}

/* ---- reductions and norms ------------------------------------------------------------------ */
H3_INFER_DECL(h3_infer_rms_norm) {
  const h3_type *x = TY(0), *w = TY(1);
  if (x->rank < 1) FAIL("rms_norm: x must be [.., D], got %s", TS(x));
  if (w->rank != 1 || w->dims[0] != x->dims[x->rank - 1])
    FAIL("rms_norm: x has D = %lld but w is %s (w is [D])", LL(x->dims[x->rank - 1]), TS(w));
  out[0] = *x;
  out[0].dtype = result_dtype(op, x->dtype);
  return 1;
}

/* add_rms_norm(a[.., D], b, w[D]) -> (x, y): a and b one type, bf16 or f32; x and y of it. */
H3_INFER_DECL(h3_infer_add_rms_norm) {
  const h3_type *a = TY(0), *b = TY(1), *w = TY(2);
  if (a->rank < 1 || (a->dtype != H3_BF16 && a->dtype != H3_F32))
    FAIL("add_rms_norm: a must be a bf16 or f32 [.., D], got %s", TS(a));
  if (!h3_type_equal(a, b)) FAIL("add_rms_norm: a is %s but b is %s (same type needed)", TS(a), TS(b));
  if (w->rank != 1 || w->dims[0] != a->dims[a->rank - 1])
    FAIL("add_rms_norm: x has D = %lld but w is %s (w is [D])", LL(a->dims[a->rank - 1]), TS(w));
  out[0] = out[1] = *a;
  return 2;
}

H3_INFER_DECL(h3_infer_argmax) {
  const h3_type *x = TY(0);
  if (x->rank < 1 || x->dims[x->rank - 1] < 1) FAIL("argmax: x must be [.., N] with N >= 1, got %s", TS(x));
  out[0] = *x;
  out[0].rank = x->rank - 1;
  out[0].dims[out[0].rank] = 0;
  out[0].dtype = H3_I32;
  return 1;
}

/* sample_tokens(logits f32[R, V], temperature f32[R], seed i32[R], pos i32[R])
   -> (token i32[R], margin f32[R]) */
H3_INFER_DECL(h3_infer_sample_tokens) {
  const h3_type *x = TY(0), *t = TY(1);
  if (x->dtype != H3_F32 || x->rank != 2 || x->dims[1] < 1)
    FAIL("sample_tokens: logits must be f32[R, V] with V >= 1, got %s", TS(x));
  if (t->dtype != H3_F32 || t->rank != 1) FAIL("sample_tokens: temperature must be f32[R], got %s", TS(t));
  if (h3_infer_want_dim(op, 0, "logits", 0, 1, "temperature", 0, "R", "[R]", why, why_len)) return -1;
  static const char *const ints[2] = {"seed", "pos"};
  for (int i = 2; i < 4; i++) {
    if (h3_infer_want_i32(op, i, ints[i - 2], 1, "[R]", why, why_len)) return -1;
    if (h3_infer_want_dim(op, 0, "logits", 0, i, ints[i - 2], 0, "R", "[R]", why, why_len)) return -1;
  }
  out[0] = h3_type_make(H3_I32, 1, &x->dims[0]);
  out[1] = h3_type_make(H3_F32, 1, &x->dims[0]);
  return 2;
}

H3_INFER_DECL(h3_infer_reduce_sum) {
  const h3_type *x = TY(0);
  if (x->rank < 1) FAIL("reduce_sum: x must be [.., N], got %s", TS(x));
  out[0] = *x;
  out[0].rank = x->rank - 1;
  out[0].dims[out[0].rank] = 0;
  out[0].dtype = result_dtype(op, x->dtype);
  return 1;
}

/* ---- matmul-like ------------------------------------------------------------------------------ */
H3_INFER_DECL(h3_infer_linear) {
  const h3_type *x = TY(0), *w = TY(1);
  if (x->rank < 1) FAIL("linear: x must be [.., K], got %s", TS(x));
  if (w->rank != 2) FAIL("linear: w must be [N, K], got %s", TS(w));
  int64_t k = x->dims[x->rank - 1];
  if (k != w->dims[1])
    FAIL("linear: x has K = %lld but w has K = %lld (w is [N, K])", LL(k), LL(w->dims[1]));
  if (op->n_operands == 3) {
    const h3_type *b = TY(2);
    if (b->rank != 1 || b->dims[0] != w->dims[0])
      FAIL("linear: w has N = %lld but bias is %s (bias is [N])", LL(w->dims[0]), TS(b));
  }
  out[0] = *x;
  out[0].dims[x->rank - 1] = w->dims[0];
  out[0].dtype = result_dtype(op, x->dtype);
  return 1;
}
