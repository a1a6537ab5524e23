/* emit_int8.c: the CUDA kernel of quantize_rows (ops.def; INT8 linear lowering,
 * docs/int8.md), for activations (one launch per GEMM input) and for the load-time weight
 * quantization (rows of W[.., N, K]).
 *
 * One block of 256 threads per row; thread t owns the elements k = g*256 + t of the row,
 * g < G = ceil(K / 256), kept in registers (G is a compile-time constant: the kernel is
 * specialised to the op's static shape). With rotate = 256 each 256-group passes through
 * shared memory for the 4 butterfly stages of H256 (strides 1, 4, 16, 64), each thread
 * computing its own output of the H4 step with the same IEEE _rn operations, in the same
 * order, as the CPU reference (runtime/cpu/ops_int8.c), so the codes are bitwise equal.
 * amax is a max (exact in any order): per-thread, then an xor-butterfly over the warp,
 * then the 8 warp partials. s = max(amax / 127, 1e-30); q = clamp(rint(v / s), -128,
 * 127), NaN -> 0; thread 0 writes s.
 */
#include "emit_internal.h"

#define QBLOCK 256

h3_status emit_int8(emit_ctx *ec) {
  const h3_op *op = ec->op;
  h3_type in_t = op->operands[0]->type;
  h3_type out_t[2] = {op->results[0]->type, op->results[1]->type};
  if (in_t.rank < 1) return emit_unsupported(ec, "the input must have at least one dim");
  int64_t k = in_t.dims[in_t.rank - 1];
  int64_t rows = k > 0 ? h3_type_numel(&in_t) / k : 0;
  int64_t rot = h3_op_attr_int(op, "rotate", 0);
  if (k <= 0) return emit_unsupported(ec, "an empty row");
  if (rows >= ((int64_t)1 << 31)) return emit_unsupported(ec, "more than 2^31 rows");
  if (rot != 0 && (rot != QBLOCK || k % QBLOCK != 0))
    return emit_unsupported(ec, "rotate must be 0, or 256 with K % 256 == 0");
  int64_t groups = (k + QBLOCK - 1) / QBLOCK;
  if (groups > 512) return emit_unsupported(ec, "rows longer than 131072 elements");
  bool ragged = k % QBLOCK != 0;
  h3_strbuf *s = &ec->src;
  emit_signature(ec, 1, &in_t, 2, out_t, NULL, QBLOCK, true);
  if (rot) h3_strbuf_printf(s, "  __shared__ float buf[%d];\n", QBLOCK);
  h3_strbuf_printf(s, "  __shared__ float part[%d];\n", QBLOCK / 32);
  h3_strbuf_printf(s, "  const long long row = blockIdx.x;\n  if (row >= %lldll) return;\n",
                   (long long)rows);
  h3_strbuf_printf(s, "  const %s *x = in0 + row * %lldll;\n", h3_kernel_ctype(in_t.dtype),
                   (long long)k);
  h3_strbuf_printf(s, "  signed char *q = out0 + row * %lldll;\n  const int t = threadIdx.x;\n",
                   (long long)k);
  h3_strbuf_printf(s, "  float v[%lld];\n#pragma unroll\n  for (int g = 0; g < %lld; g++) {\n",
                   (long long)groups, (long long)groups);
  h3_strbuf_printf(s, "    const long long k = (long long)g * %d + t;\n", QBLOCK);
  if (ragged)
    h3_strbuf_printf(s, "    float a = k < %lldll ? h3_ld(x, k) : 0.0f;\n", (long long)k);
  else
    h3_strbuf_append(s, "    float a = h3_ld(x, k);\n");
  if (rot)
    h3_strbuf_append(
        s, "    buf[t] = a;\n"
           "    __syncthreads();\n"
           "#pragma unroll\n"
           "    for (int st = 1; st < 256; st *= 4) {\n"
           "      const int dg = (t / st) % 4, base = t - dg * st;\n"
           "      const float p0 = buf[base], p1 = buf[base + st], p2 = buf[base + 2 * st],"
           " p3 = buf[base + 3 * st];\n"
           "      const float ab = __fadd_rn(p0, p1), cmd = __fsub_rn(p2, p3);\n"
           "      const float amb = __fsub_rn(p0, p1), cpd = __fadd_rn(p2, p3);\n"
           "      const float y = dg == 0 ? __fmul_rn(0.5f, __fadd_rn(ab, cmd))\n"
           "                    : dg == 1 ? __fmul_rn(0.5f, __fsub_rn(ab, cmd))\n"
           "                    : dg == 2 ? __fmul_rn(0.5f, __fadd_rn(amb, cpd))\n"
           "                              : __fmul_rn(0.5f, __fsub_rn(cpd, amb));\n"
           "      __syncthreads();\n"
           "      buf[t] = y;\n"
           "      __syncthreads();\n"
           "    }\n"
           "    a = buf[t];\n");
  h3_strbuf_append(s, "    v[g] = a;\n  }\n");
  h3_strbuf_printf(s, "  float m = 0.0f;\n#pragma unroll\n  for (int g = 0; g < %lld; g++) "
                      "m = fmaxf(m, fabsf(v[g]));\n", (long long)groups);
  h3_strbuf_printf(s, "#pragma unroll\n  for (int o = 16; o > 0; o >>= 1) "
                      "m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));\n"
                      "  if ((t & 31) == 0) part[t >> 5] = m;\n  __syncthreads();\n"
                      "  float amax = 0.0f;\n"
                      "#pragma unroll\n  for (int w = 0; w < %d; w++) amax = fmaxf(amax, part[w]);\n",
                   QBLOCK / 32);
  h3_strbuf_append(s, "  float sc = __fdiv_rn(amax, 127.0f);\n  if (sc < 1e-30f) sc = 1e-30f;\n");
  h3_strbuf_printf(s, "#pragma unroll\n  for (int g = 0; g < %lld; g++) {\n"
                      "    const long long k = (long long)g * %d + t;\n",
                   (long long)groups, QBLOCK);
  if (ragged) h3_strbuf_printf(s, "    if (k >= %lldll) break;\n", (long long)k);
  h3_strbuf_append(s, "    const float c = rintf(__fdiv_rn(v[g], sc));\n"
                      "    q[k] = c != c ? (signed char)0 : c <= -128.0f ? (signed char)-128\n"
                      "         : c >= 127.0f ? (signed char)127 : (signed char)c;\n  }\n"
                      "  if (t == 0) out1[row] = sc;\n}\n");
  ec->k->grid[0] = rows > 0 ? rows : 1;
  ec->k->grid[1] = ec->k->grid[2] = 1;
  ec->k->block[0] = QBLOCK;
  ec->k->block[1] = ec->k->block[2] = 1;
  ec->k->shared_bytes = 0;
  return emit_args(ec, 1, 2, false);
}
