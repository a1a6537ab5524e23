/* op_infer_collective.c: result type inference of the ops of a parallel plan (ops.def,
 * "several ranks"): shard, all_gather, all_to_all, all_reduce. Each names its rank count N
 * (`ranks`, 1 <= N <= H3_COMM_MAX_RANKS); an axis that is split must divide by N.
 */
#include "op_infer.h"

/* `ranks` within [1, H3_COMM_MAX_RANKS]; returns N or -1 after writing why. */
static int64_t want_ranks(const h3_op *op, char *why, size_t why_len) {
  int64_t n = h3_op_attr_int(op, "ranks", 0);
  if (n < 1 || n > H3_COMM_MAX_RANKS)
    FAIL("%s: ranks = %lld, expected 1 to %d", OPN, LL(n), H3_COMM_MAX_RANKS);
  return n;
}

/* Attribute `name` is an axis of x; returns it or -1 after writing why. */
static int want_axis_attr(const h3_op *op, const char *name, char *why, size_t why_len) {
  int64_t a = h3_op_attr_int(op, name, -1);
  if (a < 0 || a >= TY(0)->rank)
    FAIL("%s: %s = %lld is not an axis of x %s (0 <= axis < rank)", OPN, name, LL(a), TS(TY(0)));
  return (int)a;
}

/* x's dim `axis` divides by n. */
static int want_divisible(const h3_op *op, int axis, int64_t n, char *why, size_t why_len) {
  if (TY(0)->dims[axis] % n != 0)
    FAIL("%s: x %s has %lld entries along axis %d, not a multiple of ranks = %lld", OPN,
         TS(TY(0)), LL(TY(0)->dims[axis]), axis, LL(n));
  return 0;
}

H3_INFER_DECL(h3_infer_shard) {
  int64_t n = want_ranks(op, why, why_len);
  int axis = n < 0 ? -1 : want_axis_attr(op, "axis", why, why_len);
  if (axis < 0 || want_divisible(op, axis, n, why, why_len)) return -1;
  out[0] = *TY(0);
  out[0].dims[axis] /= n;
  return 1;
}

H3_INFER_DECL(h3_infer_all_gather) {
  int64_t n = want_ranks(op, why, why_len);
  int axis = n < 0 ? -1 : want_axis_attr(op, "axis", why, why_len);
  if (axis < 0) return -1;
  out[0] = *TY(0);
  out[0].dims[axis] *= n;
  return 1;
}

H3_INFER_DECL(h3_infer_all_to_all) {
  int64_t n = want_ranks(op, why, why_len);
  int split = n < 0 ? -1 : want_axis_attr(op, "split_axis", why, why_len);
  int concat = split < 0 ? -1 : want_axis_attr(op, "concat_axis", why, why_len);
  if (concat < 0 || want_divisible(op, split, n, why, why_len)) return -1;
  if (split == concat)
    FAIL("%s: split_axis and concat_axis are both %d; they must differ", OPN, split);
  out[0] = *TY(0);
  out[0].dims[split] /= n;
  out[0].dims[concat] *= n;
  return 1;
}

H3_INFER_DECL(h3_infer_all_reduce) {
  if (want_ranks(op, why, why_len) < 0) return -1;
  out[0] = *TY(0);
  out[0].dtype = (h3_dtype)h3_op_attr_int(op, "dtype", TY(0)->dtype);
  bool narrow = TY(0)->dtype != H3_F64 && h3_dtype_is_float(TY(0)->dtype) &&
                out[0].dtype != H3_F64 && h3_dtype_is_float(out[0].dtype);
  if (out[0].dtype != TY(0)->dtype && !narrow)
    FAIL("%s: dtype %s of an x of %s: the sum of 16-bit or f32 floats rounds to one of them", OPN,
         h3_dtype_name(out[0].dtype), h3_dtype_name(TY(0)->dtype));
  return 1;
}
