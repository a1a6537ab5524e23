/* emit_normmod.c: the CUDA kernels of the fused RMSNorm + indexed AdaLN ops
 * (norm_modulate = Plan A, residual_norm_modulate = Plan B; spec/accelerations.md §3).
 *
 * One block per row of x bf16[T, H] (H % 8 == 0: the pass only fuses such rows, other
 * shapes are an emitter limitation), with rms_norm's block size for the row. Thread tid
 * owns chunks u = tid + j*block (j < CH = ceil(H/8 / block)) of 8 elements, loaded once
 * with 16-byte accesses and kept in registers; the sum of squares runs over them in
 * rms_norm's order through the shared reduction of emit_reduce.c (emit_rms_accum /
 * emit_rms_finish), so r is bitwise rms_norm's r. Then, per element, with w = gamma + offset:
 *   exact "bf16": h = bf16((x*r)*w); c = bf16(1 + s); p = bf16(h*c); y = bf16(p + b)
 *   exact "f32":  h as above; y = bf16((h*(1 + s)) + b)
 *   lossless:     w_eff = w*(1 + s) (fp32); y = bf16(fma(x*r, w_eff, b))
 * with s, b the scale/shift rows of g = clamp(idx[row], 0, G). Plan B first forms
 * residual' = bf16(residual + bf16(gate[g]*update)) per element, stores it (out0, which may
 * be in0: each element is read before it is written, by the same thread) and feeds the
 * rounded values to the same code as Plan A, so Plan B = (U3; Plan A) bitwise. Every
 * operation is an explicit _rn intrinsic (the lossless fma too), so the kernels give the
 * same bits with or without -fmad=false.
 */
#include "emit_internal.h"

#include <string.h>

/* Emits the per-element modulate of chunk j (values v[j][k], r) into o[k]. */
static void emit_modulate(h3_strbuf *s, bool exact, bool mod_f32, const char *off) {
  h3_strbuf_append(s, "#pragma unroll\n      for (int k = 0; k < 8; k++) {\n");
  if (!exact) {
    h3_strbuf_printf(s, "        const float we = __fmul_rn(__fadd_rn(w[k], %s), __fadd_rn(1.0f, sc[k]));\n"
                        "        o[k] = __fmaf_rn(__fmul_rn(v[j][k], r), we, sh[k]);\n",
                     off);
  } else {
    h3_strbuf_printf(s, "        const float h = h3_rbf16(__fmul_rn(__fmul_rn(v[j][k], r), "
                        "__fadd_rn(w[k], %s)));\n", off);
    if (mod_f32)
      h3_strbuf_append(s, "        o[k] = __fadd_rn(__fmul_rn(h, __fadd_rn(1.0f, sc[k])), sh[k]);\n");
    else
      h3_strbuf_append(s, "        const float c = h3_rbf16(__fadd_rn(1.0f, sc[k]));\n"
                          "        o[k] = __fadd_rn(h3_rbf16(__fmul_rn(h, c)), sh[k]);\n");
  }
  h3_strbuf_append(s, "      }\n");
}

/* Plan B's signature: every pointer __restrict__ but in0 (residual) and out0 (residual'),
 * which may be one buffer; nothing else aliases them. */
static void signature_b(emit_ctx *ec, const h3_type *in, const h3_type *out, int block) {
  h3_strbuf *s = &ec->src;
  h3_strbuf_printf(s, "extern \"C\" __global__ void __launch_bounds__(%d) @K@(", block);
  for (int i = 0; i < 7; i++)
    h3_strbuf_printf(s, "%sconst %s *%s in%d", i ? ", " : "", h3_codegen_ctype(in[i].dtype),
                     i ? " __restrict__" : "", i);
  for (int i = 0; i < 2; i++)
    h3_strbuf_printf(s, ", %s *%s out%d", h3_codegen_ctype(out[i].dtype), i ? " __restrict__" : "", i);
  h3_strbuf_append(s, ") {\n");
}

h3_status emit_normmod(emit_ctx *ec) {
  const h3_op *op = ec->op;
  h3_strbuf *s = &ec->src;
  const bool plan_b = op->code == H3_OP_RESIDUAL_NORM_MODULATE;
  const int first = plan_b ? 3 : 1; /* operand index of gamma */
  const int n_in = plan_b ? 7 : 5, n_out = plan_b ? 2 : 1;
  const h3_type *xt = &op->operands[0]->type;
  if (xt->rank != 2 || xt->dtype != H3_BF16 || op->n_operands != n_in || op->n_results != n_out)
    return emit_unsupported(ec, "x must be bf16[T, H]");
  const int64_t T = xt->dims[0], H = xt->dims[1];
  if (H < 8 || H % 8 != 0)
    return emit_unsupported(ec, "H must be a positive multiple of 8 (the pass keeps other rows "
                                "as the unfused chain)");
  if (T >= ((int64_t)1 << 31) || H >= ((int64_t)1 << 31))
    return emit_unsupported(ec, "more than 2^31 rows or columns");
  const int64_t units = H / 8;
  const int block = emit_row_block(units, 256);
  const int64_t chunks = (units + block - 1) / block;
  const int64_t G = op->operands[first + 1]->type.dims[0];
  const int64_t gate_rows = plan_b ? op->operands[2]->type.dims[0] : 0;
  const bool mod_f32 = strcmp(h3_op_attr_string(op, "modulate", "bf16"), "f32") == 0;
  h3_type in_t[7], out_t[2];
  for (int i = 0; i < n_in; i++) in_t[i] = op->operands[i]->type;
  for (int i = 0; i < n_out; i++) out_t[i] = op->results[i]->type;
  if (plan_b)
    signature_b(ec, in_t, out_t, block);
  else
    emit_signature(ec, n_in, in_t, n_out, out_t, NULL, block, true);

  h3_strbuf_printf(s, "  __shared__ float part[%d];\n", block / 32);
  h3_strbuf_printf(s, "  const long long row = blockIdx.x;\n  if (row >= %lldll) return;\n"
                      "  const int tid = threadIdx.x;\n", (long long)T);
  h3_strbuf_printf(s, "  const long long g = h3_clampi(h3_ld(in%d, row), %lldll);\n", first + 3,
                   (long long)G);
  h3_strbuf_printf(s, "  const h3_bf16 *scr = in%d + g * %lldll, *shr = in%d + g * %lldll;\n",
                   first + 1, (long long)H, first + 2, (long long)H);
  h3_strbuf_printf(s, "  h3_bf16 *y = out%d + row * %lldll;\n", n_out - 1, (long long)H);
  if (plan_b) {
    h3_strbuf_printf(s, "  const long long gg = h3_clampi(h3_ld(in%d, row), %lldll);\n",
                     first + 3, (long long)gate_rows);
    h3_strbuf_printf(s, "  const h3_bf16 *res = in0 + row * %lldll, *upd = in1 + row * %lldll, "
                        "*gate = in2 + gg * %lldll;\n  h3_bf16 *xo = out0 + row * %lldll;\n",
                     (long long)H, (long long)H, (long long)H, (long long)H);
  } else {
    h3_strbuf_printf(s, "  const h3_bf16 *x = in0 + row * %lldll;\n", (long long)H);
  }
  /* pass 1: every load first (Plan B: U3 in registers, then the stores of residual', which
     may overwrite the residual: no load may follow a store), then the sum of squares over
     the chunks in rms_norm's order */
  h3_strbuf_printf(s, "  float v[%lld][8];\n  float ss = 0.0f;\n", (long long)chunks);
  h3_strbuf_printf(s, "#pragma unroll\n  for (int j = 0; j < %lld; j++) {\n"
                      "    const int u = tid + j * %d;\n    if (u < %lld) {\n",
                   (long long)chunks, block, (long long)units);
  if (plan_b) {
    h3_strbuf_append(s, "      float a[8], b[8], c[8];\n"
                        "      h3_ld8(res, u * 8, a);\n      h3_ld8(upd, u * 8, b);\n"
                        "      h3_ld8(gate, u * 8, c);\n"
                        "#pragma unroll\n      for (int k = 0; k < 8; k++) "
                        "v[j][k] = h3_rbf16(__fadd_rn(a[k], h3_rbf16(__fmul_rn(c[k], b[k]))));\n"
                        "    }\n  }\n");
    h3_strbuf_printf(s, "#pragma unroll\n  for (int j = 0; j < %lld; j++) {\n"
                        "    const int u = tid + j * %d;\n    if (u < %lld) {\n"
                        "      h3_st8(xo, u * 8, v[j]);\n",
                     (long long)chunks, block, (long long)units);
  } else {
    h3_strbuf_append(s, "      h3_ld8(x, u * 8, v[j]);\n");
  }
  h3_strbuf_append(s, "  ");
  emit_rms_accum(s, 8, "v[j]");
  h3_strbuf_append(s, "    }\n  }\n");
  emit_rms_finish(s, block, H, h3_op_attr_float(op, "eps", 1e-5));
  /* pass 2: modulate from registers */
  h3_strbuf off;
  h3_strbuf_init(&off);
  emit_literal(&off, H3_F32, h3_op_attr_float(op, "offset", 0.0), false);
  h3_strbuf_printf(s, "#pragma unroll\n  for (int j = 0; j < %lld; j++) {\n"
                      "    const int u = tid + j * %d;\n    if (u < %lld) {\n"
                      "      float w[8], sc[8], sh[8], o[8];\n"
                      "      h3_ld8(in%d, u * 8, w);\n      h3_ld8(scr, u * 8, sc);\n"
                      "      h3_ld8(shr, u * 8, sh);\n",
                   (long long)chunks, block, (long long)units, first);
  emit_modulate(s, ec->exact, mod_f32, off.data ? off.data : "0");
  h3_strbuf_append(s, "      h3_st8(y, u * 8, o);\n    }\n  }\n}\n");
  bool oom = off.oom;
  h3_strbuf_free(&off);
  if (oom) return H3_ERR;
  ec->k->grid[0] = T > 0 ? T : 1;
  ec->k->grid[1] = ec->k->grid[2] = 1;
  ec->k->block[0] = block;
  ec->k->block[1] = ec->k->block[2] = 1;
  ec->k->shared_bytes = 0;
  return emit_args(ec, n_in, n_out, false);
}
