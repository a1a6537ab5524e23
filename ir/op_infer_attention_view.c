/* op_infer_attention_view.c: the checks of attention's optional v_view attribute (ops.def,
 * made by the attention-v-view pass, passes/attention_v_view.c). With
 * v_view = [start, row_stride], attention's operand v is the 2D tensor x[T, C] that holds
 * v's columns (the qkv projection) and the backends read row t, kv head h, dim d of v at
 * x[t*row_stride + start + h*D + d]. The rules: x has k's T rows; row_stride is x's own row
 * length C (the view reads x in its layout); the columns [start, start + Hk*D) lie inside
 * C; start and row_stride are multiples of 8, so every v row starts 16-byte aligned for
 * bf16 / f16 (the GPU kernels' vector loads) whenever x's base is.
 */
#include "op_infer.h"

bool h3_op_v_view(const h3_op *op, int64_t *start, int64_t *row_stride) {
  const h3_attr *a = h3_op_attr(op, "v_view");
  if (!a || a->kind != H3_ATTR_INTS || a->n != 2) return false;
  *start = a->ints[0];
  *row_stride = a->ints[1];
  return true;
}

int h3_infer_attention_v_view(const h3_op *op, char *why, size_t why_len) {
  const h3_attr *a = h3_op_attr(op, "v_view");
  const h3_type *k = TY(1), *x = TY(2);
  if (a->n != 2)
    FAIL("attention: v_view must be [start, row_stride], got %d values", a->n);
  const int64_t start = a->ints[0], rs = a->ints[1];
  if (x->rank != 2)
    FAIL("attention: with v_view, v must be the 2D tensor [T, C] holding v's columns, got %s",
         TS(x));
  if (x->dims[0] != k->dims[0])
    FAIL("attention: with v_view, v %s has T = %lld rows but k %s has T = %lld", TS(x),
         LL(x->dims[0]), TS(k), LL(k->dims[0]));
  if (rs != x->dims[1])
    FAIL("attention: v_view row_stride = %lld but v %s has rows of C = %lld elements "
         "(row_stride must be v's row length)", LL(rs), TS(x), LL(x->dims[1]));
  if (start < 0 || start % 8 != 0 || rs % 8 != 0)
    FAIL("attention: v_view start = %lld and row_stride = %lld must be non-negative multiples "
         "of 8 (16-byte aligned rows)", LL(start), LL(rs));
  const int64_t width = k->dims[1] * k->dims[2];
  if (start > x->dims[1] || width > x->dims[1] - start)
    FAIL("attention: v_view columns [start, start + Hk*D) = [%lld, %lld) must lie in v's "
         "C = %lld (k is %s)", LL(start), LL(start + width), LL(x->dims[1]), TS(k));
  return 0;
}
