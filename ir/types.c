/* types.c: dtypes and tensor types of the IR (ir.h), their promotion and broadcasting
 * (op_registry.h).
 *
 * Promotion (ops.def): floats rank bf16 < f16 < f32 < f64 and any float beats any int;
 * ints rank u8, i8 < i32 < i64, and u8 mixed with i8 gives i32 (the smallest type that
 * holds both). Broadcasting is numpy's: shapes align at their last dim; a dim of 1 or a
 * missing dim stretches.
 */
#include "h3/ir.h"
#include "h3/op_registry.h"

#include <stdint.h>
#include <string.h>

static const struct {
  const char *name;
  size_t size;
} dtype_table[H3_DTYPE_COUNT] = {
    [H3_BF16] = {"bf16", 2}, [H3_F16] = {"f16", 2}, [H3_F32] = {"f32", 4},
    [H3_F64] = {"f64", 8},   [H3_I8] = {"i8", 1},   [H3_I32] = {"i32", 4},
    [H3_I64] = {"i64", 8},   [H3_U8] = {"u8", 1},
};

const char *h3_dtype_name(h3_dtype t) {
  return (unsigned)t < H3_DTYPE_COUNT ? dtype_table[t].name : "?";
}

int h3_dtype_from_name(const char *s, h3_dtype *out) {
  for (int i = 0; i < H3_DTYPE_COUNT; i++)
    if (strcmp(s, dtype_table[i].name) == 0) {
      *out = (h3_dtype)i;
      return 1;
    }
  return 0;
}

size_t h3_dtype_size(h3_dtype t) { return (unsigned)t < H3_DTYPE_COUNT ? dtype_table[t].size : 0; }

bool h3_dtype_is_float(h3_dtype t) { return t == H3_BF16 || t == H3_F16 || t == H3_F32 || t == H3_F64; }

int64_t h3_type_numel(const h3_type *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++)
    if (__builtin_mul_overflow(n, t->dims[i], &n)) return INT64_MAX;
  return n;
}

int64_t h3_type_bytes(const h3_type *t) {
  int64_t b;
  return __builtin_mul_overflow(h3_type_numel(t), (int64_t)h3_dtype_size(t->dtype), &b) ? INT64_MAX : b;
}

bool h3_type_fits(const h3_type *t) {
  for (int i = 0; i < t->rank; i++)
    if (t->dims[i] < 0) return false;
  return h3_type_bytes(t) <= H3_MAX_TENSOR_BYTES;
}

bool h3_type_equal(const h3_type *a, const h3_type *b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

bool h3_type_same_shape(const h3_type *a, const h3_type *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

h3_type h3_type_make(h3_dtype dt, int rank, const int64_t *dims) {
  h3_type t;
  memset(&t, 0, sizeof t);
  t.dtype = dt;
  t.rank = rank < 0 ? 0 : rank > H3_MAX_RANK ? H3_MAX_RANK : rank;
  for (int i = 0; i < t.rank; i++) t.dims[i] = dims[i];
  return t;
}

void h3_type_print(h3_strbuf *b, const h3_type *t) {
  h3_strbuf_append(b, h3_dtype_name(t->dtype));
  h3_strbuf_append(b, "[");
  for (int i = 0; i < t->rank; i++)
    h3_strbuf_printf(b, i ? ", %lld" : "%lld", (long long)t->dims[i]);
  h3_strbuf_append(b, "]");
}

const char *h3_type_str(const h3_type *t, char *buf, size_t len) {
  h3_strbuf b;
  h3_strbuf_init(&b);
  h3_type_print(&b, t);
  snprintf(buf, len, "%s", b.data ? b.data : "?");
  h3_strbuf_free(&b);
  return buf;
}

/* Rank of a dtype within its family for promotion. */
static int float_rank(h3_dtype t) {
  switch (t) {
  case H3_BF16: return 0;
  case H3_F16: return 1;
  case H3_F32: return 2;
  default: return 3; /* f64 */
  }
}

static int int_rank(h3_dtype t) {
  switch (t) {
  case H3_U8:
  case H3_I8: return 0;
  case H3_I32: return 1;
  default: return 2; /* i64 */
  }
}

h3_dtype h3_dtype_promote(h3_dtype a, h3_dtype b) {
  if (a == b) return a;
  bool fa = h3_dtype_is_float(a), fb = h3_dtype_is_float(b);
  if (fa && fb) return float_rank(a) >= float_rank(b) ? a : b;
  if (fa) return a;
  if (fb) return b;
  int ra = int_rank(a), rb = int_rank(b);
  if (ra == 0 && rb == 0) return H3_I32; /* u8 with i8 */
  return ra >= rb ? a : b;
}

int h3_broadcast_shapes(const h3_type *a, const h3_type *b, h3_type *out) {
  int rank = a->rank > b->rank ? a->rank : b->rank;
  h3_type r;
  memset(&r, 0, sizeof r);
  r.dtype = h3_dtype_promote(a->dtype, b->dtype);
  r.rank = rank;
  for (int i = 0; i < rank; i++) {
    int ia = a->rank - rank + i, ib = b->rank - rank + i;
    int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    if (da == db || db == 1)
      r.dims[i] = da;
    else if (da == 1)
      r.dims[i] = db;
    else
      return -1;
  }
  *out = r;
  return 0;
}
