/* ops_movement.c: CPU reference of the data-movement ops: reshape, slice, concat, pad,
 * gather, index, set_index, scatter_rows and kv_write.
 *
 * No arithmetic: bytes are copied (memmove, so an output the memory plan placed over its
 * source is fine). Where an operand's dtype differs from the result's (only possible for
 * the value written by set_index / scatter_rows / kv_write), elements are converted with
 * one rounding. Dynamic indices (index, set_index, scatter_rows, kv_write) outside their
 * range are errors naming the op, the index and the range; gather clamps as ops.def says.
 */
#include "cpu_internal.h"

static int norm_axis(int64_t axis, int rank) { return (int)(axis < 0 ? axis + rank : axis); }

/* Copies n elements, converting when the dtypes differ. */
static void copy_elems(void *dst, h3_dtype dt, int64_t di, const void *src, h3_dtype sdt,
                       int64_t si, int64_t n) {
  if (dt == sdt) {
    size_t es = h3_dtype_size(dt);
    memmove((char *)dst + di * es, (const char *)src + si * es, (size_t)n * es);
    return;
  }
  for (int64_t k = 0; k < n; k++) {
    if (h3cpu_is_float(dt))
      h3cpu_st64(dst, dt, di + k, h3cpu_ld64(src, sdt, si + k));
    else
      h3cpu_sti(dst, dt, di + k, h3cpu_ldi(src, sdt, si + k));
  }
}

/* out = x (unless the planner made them the same buffer). */
static void copy_whole(const h3_tensor *o, const h3_tensor *x) {
  if (o->data != x->data)
    copy_elems(o->data, o->type.dtype, 0, x->data, x->type.dtype, 0, h3cpu_numel(o));
}

H3_CPU_KERNEL(h3cpu_reshape) {
  (void)c, (void)op, (void)n_in, (void)n_out;
  copy_whole(&out[0], &in[0]);
  return H3_OK;
}

H3_CPU_KERNEL(h3cpu_slice) {
  (void)c, (void)n_in, (void)n_out;
  const h3_type *t = &in[0].type;
  int axis = norm_axis(h3_op_attr_int(op, "axis", 0), t->rank);
  int64_t start = h3_op_attr_int(op, "start", 0), len = h3_op_attr_int(op, "len", 0);
  int64_t inner = h3cpu_inner(t, axis + 1), outer = 1;
  for (int d = 0; d < axis; d++) outer *= t->dims[d];
  int64_t n_axis = t->dims[axis];
  for (int64_t r = 0; r < outer; r++)
    copy_elems(out[0].data, out[0].type.dtype, r * len * inner, in[0].data, t->dtype,
               (r * n_axis + start) * inner, len * inner);
  return H3_OK;
}

H3_CPU_KERNEL(h3cpu_concat) {
  (void)c, (void)n_out;
  const h3_type *ot = &out[0].type;
  int axis = norm_axis(h3_op_attr_int(op, "axis", 0), ot->rank);
  int64_t inner = h3cpu_inner(ot, axis + 1), outer = 1;
  for (int d = 0; d < axis; d++) outer *= ot->dims[d];
  int64_t o_axis = ot->dims[axis];
  int64_t base = 0;
  for (int k = 0; k < n_in; k++) {
    int64_t nk = in[k].type.dims[axis];
    for (int64_t r = 0; r < outer; r++)
      copy_elems(out[0].data, ot->dtype, (r * o_axis + base) * inner, in[k].data, in[k].type.dtype,
                 r * nk * inner, nk * inner);
    base += nk;
  }
  return H3_OK;
}

H3_CPU_KERNEL(h3cpu_pad) {
  (void)c, (void)n_in, (void)n_out;
  const h3_type *ot = &out[0].type;
  int axis = norm_axis(h3_op_attr_int(op, "axis", 0), ot->rank);
  double value = h3_op_attr_float(op, "value", 0.0);
  int64_t inner = h3cpu_inner(ot, axis + 1), outer = 1;
  for (int d = 0; d < axis; d++) outer *= ot->dims[d];
  int64_t n_in_axis = in[0].type.dims[axis], o_axis = ot->dims[axis];
  for (int64_t r = outer - 1; r >= 0; r--) { /* back to front: safe if out overlays in */
    int64_t ob = r * o_axis * inner;
    copy_elems(out[0].data, ot->dtype, ob, in[0].data, in[0].type.dtype, r * n_in_axis * inner,
               n_in_axis * inner);
    for (int64_t k = n_in_axis * inner; k < o_axis * inner; k++)
      h3cpu_st64(out[0].data, ot->dtype, ob + k, value);
  }
  return H3_OK;
}

H3_CPU_KERNEL(h3cpu_gather) {
  (void)c, (void)op, (void)n_in, (void)n_out;
  const h3_type *tt = &in[0].type;
  int64_t rows = tt->dims[0], row = h3cpu_inner(tt, 1);
  int64_t n = h3cpu_numel(&in[1]);
  for (int64_t i = 0; i < n; i++) {
    int64_t r = h3cpu_ldi(in[1].data, in[1].type.dtype, i);
    r = h3_sc_clamp_row(r, rows);
    copy_elems(out[0].data, out[0].type.dtype, i * row, in[0].data, tt->dtype, r * row, row);
  }
  return H3_OK;
}

/* Reads the dynamic row index of index / set_index and checks it. */
static int dyn_row(const h3_cpu_ctx *c, const h3_op *op, const h3_tensor *x, const h3_tensor *i,
                   int64_t *row) {
  int64_t r = h3cpu_ldi(i->data, i->type.dtype, 0) + h3_op_attr_int(op, "offset", 0);
  if (r < 0 || r >= x->type.dims[0]) {
    h3cpu_error(c, op, "the index comes from a loop counter or an input value",
                "row %lld is outside [0, %lld)", (long long)r, (long long)x->type.dims[0]);
    return 0;
  }
  *row = r;
  return 1;
}

H3_CPU_KERNEL(h3cpu_index) {
  (void)n_in, (void)n_out;
  int64_t r, row = h3cpu_inner(&in[0].type, 1);
  if (!dyn_row(c, op, &in[0], &in[1], &r)) return H3_ERR;
  copy_elems(out[0].data, out[0].type.dtype, 0, in[0].data, in[0].type.dtype, r * row, row);
  return H3_OK;
}

H3_CPU_KERNEL(h3cpu_set_index) {
  (void)n_in, (void)n_out;
  int64_t r, row = h3cpu_inner(&in[0].type, 1);
  if (!dyn_row(c, op, &in[0], &in[1], &r)) return H3_ERR;
  copy_whole(&out[0], &in[0]);
  copy_elems(out[0].data, out[0].type.dtype, r * row, in[2].data, in[2].type.dtype, 0, row);
  return H3_OK;
}

/* Writes rows v[t] to out's flat rows idx[t] (after out = x). */
static h3_status write_rows(const h3_cpu_ctx *c, const h3_op *op, const h3_tensor *o,
                            const h3_tensor *x, const h3_tensor *idx, const h3_tensor *v,
                            int64_t n_rows, int64_t row) {
  int64_t T = h3cpu_numel(idx);
  for (int64_t t = 0; t < T; t++) {
    int64_t r = h3cpu_ldi(idx->data, idx->type.dtype, t);
    if (r < 0 || r >= n_rows) {
      h3cpu_error(c, op, "slots come from the page table and positions; check them",
                  "row index %lld (entry %lld) is outside [0, %lld)", (long long)r, (long long)t,
                  (long long)n_rows);
      return H3_ERR;
    }
  }
  copy_whole(o, x);
  for (int64_t t = 0; t < T; t++) {
    int64_t r = h3cpu_ldi(idx->data, idx->type.dtype, t);
    copy_elems(o->data, o->type.dtype, r * row, v->data, v->type.dtype, t * row, row);
  }
  return H3_OK;
}

H3_CPU_KERNEL(h3cpu_scatter_rows) {
  (void)n_in, (void)n_out;
  const h3_type *xt = &in[0].type;
  return write_rows(c, op, &out[0], &in[0], &in[1], &in[2], xt->dims[0], h3cpu_inner(xt, 1));
}

H3_CPU_KERNEL(h3cpu_kv_write) {
  (void)n_in, (void)n_out;
  const h3_type *ct = &in[0].type; /* [P, page, ..] */
  int64_t rows = ct->dims[0] * (ct->rank > 1 ? ct->dims[1] : 1);
  return write_rows(c, op, &out[0], &in[0], &in[2], &in[1], rows, h3cpu_inner(ct, 2));
}
