/* op_infer_normmod.c: result type inference of the fused RMSNorm + indexed AdaLN ops of
 * ops.def: norm_modulate (Plan A) and residual_norm_modulate (Plan B) of
 * docs/models/accelerations.md §3. Both are bf16-only (the kernels' dispatch contract): x and the
 * residual/update [T, H], gamma [H], the scale/shift/gate tables [G, H] (G rows of AdaLN
 * modulation, indexed per row by idx i32[T]); residual_norm_modulate's update may instead be
 * int32 accumulators with their scales (want_acc_update). The attributes `tier` ("exact" or
 * "lossless") and `modulate` ("bf16" or "f32") must name a known variant.
 */
#include "op_infer.h"

#include <string.h>

/* Operand i is a bf16 tensor of `rank` dims (shape text for the message). */
static int want_bf16(const h3_op *op, int i, const char *name, int rank, const char *shape,
                     char *why, size_t why_len) {
  if (TY(i)->dtype != H3_BF16 || TY(i)->rank != rank)
    FAIL("%s: %s must be bf16%s, got %s", OPN, name, shape, TS(TY(i)));
  return 0;
}

/* A [G, H] table whose H matches x's (operand 0). */
static int want_table(const h3_op *op, int i, const char *name, char *why, size_t why_len) {
  if (want_bf16(op, i, name, 2, "[G, H]", why, why_len)) return -1;
  if (TY(i)->dims[0] < 1) FAIL("%s: %s has no rows (it is %s)", OPN, name, TS(TY(i)));
  return h3_infer_want_dim(op, 0, "x", 1, i, name, 1, "H", "[G, H]", why, why_len);
}

/* The operands from gamma on (at `first`): gamma[H], scale[G, H], shift[G, H], idx i32[T];
 * and the attributes. x [T, H] is operand 0. */
static int want_norm_part(const h3_op *op, int first, char *why, size_t why_len) {
  if (want_bf16(op, 0, "x", 2, "[T, H]", why, why_len)) return -1;
  if (want_bf16(op, first, "gamma", 1, "[H]", why, why_len)) return -1;
  if (h3_infer_want_dim(op, 0, "x", 1, first, "gamma", 0, "H", "[H]", why, why_len)) return -1;
  if (want_table(op, first + 1, "scale", why, why_len)) return -1;
  if (want_table(op, first + 2, "shift", why, why_len)) return -1;
  if (TY(first + 1)->dims[0] != TY(first + 2)->dims[0])
    FAIL("%s: scale has G = %lld rows but shift has %lld (one AdaLN table height)", OPN,
         LL(TY(first + 1)->dims[0]), LL(TY(first + 2)->dims[0]));
  if (h3_infer_want_i32(op, first + 3, "idx", 1, "[T]", why, why_len)) return -1;
  if (h3_infer_want_dim(op, 0, "x", 0, first + 3, "idx", 0, "T", "[T]", why, why_len)) return -1;
  if (h3_op_attr_tier(op, "tier", H3_TIER_HIGH) == H3_TIER_HIGH)
    FAIL("%s: tier must be exact or lossless", OPN);
  const char *mod = h3_op_attr_string(op, "modulate", "bf16");
  if (strcmp(mod, "bf16") != 0 && strcmp(mod, "f32") != 0)
    FAIL("%s: modulate = \"%s\" must be \"bf16\" (every step rounded) or \"f32\" (one rounding)",
         OPN, mod);
  return 0;
}

/* quantize = 1 (passes/int8_fuse_quant.c) appends the int8 rows of y and their scales:
 * q i8[T, H], s f32[T] at out[n], out[n + 1]; returns the new result count. */
static int quant_results(const h3_op *op, int n, h3_type *out, char *why, size_t why_len) {
  const int64_t qz = h3_op_attr_int(op, "quantize", 0);
  if (qz != 0 && qz != 1) FAIL("%s: quantize = %lld must be 0 or 1", OPN, LL(qz));
  if (!qz) return n;
  out[n] = *TY(0);
  out[n].dtype = H3_I8;
  out[n + 1] = *TY(0);
  out[n + 1].dtype = H3_F32;
  out[n + 1].rank = 1;
  return n + 2;
}

H3_INFER_DECL(h3_infer_norm_modulate) {
  if (want_norm_part(op, 1, why, why_len)) return -1;
  out[0] = *TY(0);
  return quant_results(op, 1, out, why, why_len);
}

/* The int8 form of residual_norm_modulate (passes/int8_resid_dequant.c): update is
 * out_proj's accumulators acc i32[T, H], dequantized with s_x f32[T] (operand 7) and
 * s_w f32[H] (operand 8) as dequant_i8 does. */
static int want_acc_update(const h3_op *op, char *why, size_t why_len) {
  const h3_type *x = TY(0), *acc = TY(1);
  if (op->n_operands != 9)
    FAIL("%s: an i32 update (out_proj's accumulators) needs the operands s_x f32[T] and "
         "s_w f32[H] after idx (9 operands, got %d)", OPN, op->n_operands);
  if (acc->rank != 2 || acc->dims[0] != x->dims[0] || acc->dims[1] != x->dims[1])
    FAIL("%s: update (accumulators) is %s but residual is %s (same shape needed)", OPN, TS(acc),
         TS(x));
  h3_type sx = h3_type_make(H3_F32, 1, x->dims), sw = h3_type_make(H3_F32, 1, x->dims + 1);
  if (!h3_type_equal(TY(7), &sx))
    FAIL("%s: s_x must be %s (one scale per row), got %s", OPN, TS(&sx), TS(TY(7)));
  if (!h3_type_equal(TY(8), &sw))
    FAIL("%s: s_w must be %s (one scale per column), got %s", OPN, TS(&sw), TS(TY(8)));
  return 0;
}

H3_INFER_DECL(h3_infer_residual_norm_modulate) {
  if (want_norm_part(op, 3, why, why_len)) return -1;
  if (TY(1)->dtype == H3_I32) {
    if (want_acc_update(op, why, why_len)) return -1;
  } else if (op->n_operands != 7) {
    FAIL("%s: %d operands, but s_x and s_w only come with an i32 update (accumulators)", OPN,
         op->n_operands);
  } else if (!h3_type_equal(TY(1), TY(0))) {
    FAIL("%s: update is %s but residual is %s (same type needed)", OPN, TS(TY(1)), TS(TY(0)));
  }
  if (want_table(op, 2, "gate", why, why_len)) return -1;
  out[0] = out[1] = *TY(0);
  return quant_results(op, 2, out, why, why_len);
}
