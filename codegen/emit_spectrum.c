/* emit_spectrum.c: CUDA kernels of the step-skipping ops (ops.def, docs/step-skipping.md).
 *
 * spectrum_update and spectrum_forecast read their coefficient table from a __constant__
 * array named after the kernel (`@K@_coef`, so identical kernels dedupe and different
 * tables never clash in one translation unit); the row is the device scalar k (a row
 * outside the table writes nothing: the CPU reference reports it). Both are grid-stride
 * loops over the feature elements with explicit __fmul_rn / __fadd_rn in the CPU's order,
 * so they equal the CPU reference bitwise:
 *   update:   out[m][e] = R[m][e] + c_m * h[e]             (in place: out may be R)
 *   forecast: acc = 0; acc += c_m * R[m][e] (m ascending); acc += c_q * hist[q][e]; one
 *             rounding to the result dtype.
 * cache_dit_decide is one block: fp64 partial sums per thread over a fixed stride, a fixed
 * shared-memory tree, then the rule; deterministic, not bitwise the CPU's block order.
 */
#include "emit_internal.h"

#include <string.h>

#define LOOP_E(total)                                                                    \
  "  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < " total      \
  "; e += (long long)gridDim.x * blockDim.x) {\n"

/* `__constant__ float @K@_coef[n] = {...};` from the op's coeffs. */
static void emit_table(emit_ctx *ec, const h3_attr *a) {
  h3_strbuf *s = &ec->src;
  h3_strbuf_printf(s, "__constant__ float @K@_coef[%d] = {", a->n);
  for (int i = 0; i < a->n; i++) {
    if (i) h3_strbuf_append(s, i % 8 ? ", " : ",\n    ");
    emit_literal(s, H3_F32, a->floats[i], false);
  }
  h3_strbuf_append(s, "};\n");
}

static h3_status emit_update(emit_ctx *ec) {
  const h3_op *op = ec->op;
  const h3_attr *tab = h3_op_attr(op, "coeffs");
  h3_type in_t[3] = {op->operands[0]->type, op->operands[1]->type, op->operands[2]->type};
  h3_type out_t = op->results[0]->type;
  int64_t p = in_t[0].dims[0], f = h3_type_numel(&in_t[1]);
  if (!tab || p < 1) return emit_unsupported(ec, "no coefficient table");
  h3_strbuf *s = &ec->src;
  emit_table(ec, tab);
  emit_signature(ec, 3, in_t, 1, &out_t, NULL, EMIT_BLOCK, false);
  h3_strbuf_printf(s, "  const long long k = h3_ld(in2, 0), F = %lldll;\n", (long long)f);
  h3_strbuf_printf(s, "  if (k < 0 || k >= %lldll) return;\n", (long long)(tab->n / p));
  h3_strbuf_printf(s, "  const float *c = @K@_coef + k * %lldll;\n", (long long)p);
  h3_strbuf_append(s, LOOP_E("F"));
  h3_strbuf_append(s, "    const float h = h3_ld(in1, e);\n");
  h3_strbuf_printf(s, "#pragma unroll\n    for (int m = 0; m < %lld; m++)\n", (long long)p);
  h3_strbuf_append(s, "      out0[m * F + e] = __fadd_rn(in0[m * F + e], __fmul_rn(c[m], h));\n"
                      "  }\n}\n");
  ec->k->inplace = true;
  emit_launch_1d(ec, f, EMIT_BLOCK);
  return emit_args(ec, 3, 1, false);
}

static h3_status emit_forecast(emit_ctx *ec) {
  const h3_op *op = ec->op;
  const h3_attr *tab = h3_op_attr(op, "coeffs");
  int n_in = op->n_operands;
  h3_type in_t[3];
  for (int i = 0; i < n_in; i++) in_t[i] = op->operands[i]->type;
  h3_type out_t = op->results[0]->type;
  int64_t p = in_t[0].dims[0], q = n_in == 3 ? in_t[2].dims[0] : 0, f = h3_type_numel(&out_t);
  if (!tab || p < 1) return emit_unsupported(ec, "no coefficient table");
  h3_strbuf *s = &ec->src;
  emit_table(ec, tab);
  emit_signature(ec, n_in, in_t, 1, &out_t, NULL, EMIT_BLOCK, true);
  h3_strbuf_printf(s, "  const long long k = h3_ld(in1, 0), F = %lldll;\n", (long long)f);
  h3_strbuf_printf(s, "  if (k < 0 || k >= %lldll) return;\n", (long long)(tab->n / (p + q)));
  h3_strbuf_printf(s, "  const float *c = @K@_coef + k * %lldll;\n", (long long)(p + q));
  h3_strbuf_append(s, LOOP_E("F"));
  h3_strbuf_append(s, "    float acc = 0.0f;\n");
  h3_strbuf_printf(s, "#pragma unroll\n    for (int m = 0; m < %lld; m++)\n", (long long)p);
  h3_strbuf_append(s, "      acc = __fadd_rn(acc, __fmul_rn(c[m], in0[m * F + e]));\n");
  if (q > 0) {
    h3_strbuf_printf(s, "#pragma unroll\n    for (int j = 0; j < %lld; j++)\n", (long long)q);
    h3_strbuf_printf(s, "      acc = __fadd_rn(acc, __fmul_rn(c[%lld + j], h3_ld(in2, j * F + e)));\n",
                     (long long)p);
  }
  h3_strbuf_append(s, "    h3_st(out0, e, acc);\n  }\n}\n");
  emit_launch_1d(ec, f, EMIT_BLOCK);
  return emit_args(ec, n_in, 1, false);
}

static h3_status emit_decide(emit_ctx *ec) {
  const h3_op *op = ec->op;
  h3_type in_t[4];
  for (int i = 0; i < 4; i++) in_t[i] = op->operands[i]->type;
  h3_type out_t = op->results[0]->type;
  int64_t n = h3_type_numel(&in_t[0]);
  h3_strbuf *s = &ec->src;
  emit_signature(ec, 4, in_t, 1, &out_t, NULL, EMIT_BLOCK, true);
  h3_strbuf_printf(s, "  __shared__ double num[%d], den[%d];\n", EMIT_BLOCK, EMIT_BLOCK);
  h3_strbuf_append(s, "  double a = 0.0, b = 0.0;\n");
  h3_strbuf_printf(s, "  for (long long e = threadIdx.x; e < %lldll; e += %d) {\n", (long long)n,
                   EMIT_BLOCK);
  h3_strbuf_append(s, "    const float x = h3_ld(in0, e), y = h3_ld(in1, e);\n"
                      "    a += (double)fabsf(__fsub_rn(x, y));\n"
                      "    b += (double)fabsf(y);\n  }\n"
                      "  num[threadIdx.x] = a;\n  den[threadIdx.x] = b;\n  __syncthreads();\n");
  h3_strbuf_printf(s, "  for (int w = %d; w > 0; w >>= 1) {\n", EMIT_BLOCK / 2);
  h3_strbuf_append(s, "    if (threadIdx.x < w) {\n"
                      "      num[threadIdx.x] += num[threadIdx.x + w];\n"
                      "      den[threadIdx.x] += den[threadIdx.x + w];\n    }\n"
                      "    __syncthreads();\n  }\n"
                      "  if (threadIdx.x != 0) return;\n");
  h3_strbuf_printf(s, "  const long long step = h3_ld(in2, 0) + %lldll, cached = h3_ld(in3, 0);\n",
                   (long long)h3_op_attr_int(op, "offset", 0));
  h3_strbuf_append(s, "  const double thr = ");
  emit_literal(s, H3_F64, h3_op_attr_float(op, "threshold", 0), false);
  h3_strbuf_printf(s, ";\n  out0[0] = step >= %lldll && den[0] > 0.0 && num[0] / den[0] < thr && "
                      "cached < %lldll;\n}\n",
                   (long long)h3_op_attr_int(op, "warmup", 0),
                   (long long)h3_op_attr_int(op, "max_consecutive", 0));
  ec->k->grid[0] = ec->k->grid[1] = ec->k->grid[2] = 1;
  ec->k->block[0] = EMIT_BLOCK;
  ec->k->block[1] = ec->k->block[2] = 1;
  ec->k->shared_bytes = 0;
  return emit_args(ec, 4, 1, false);
}

h3_status emit_spectrum(emit_ctx *ec) {
  switch (ec->op->code) {
  case H3_OP_SPECTRUM_UPDATE: return emit_update(ec);
  case H3_OP_SPECTRUM_FORECAST: return emit_forecast(ec);
  case H3_OP_CACHE_DIT_DECIDE: return emit_decide(ec);
  default: return emit_unsupported(ec, "not a step-skipping op");
  }
}
