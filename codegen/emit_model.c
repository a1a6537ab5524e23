/* emit_model.c: kernels for the model-specific ops: timestep_embedding, rope_table,
 * rope_pos_table, rope and randn.
 *
 * All are grid-stride loops over output elements (rope over chunks of 8 when the rotated
 * half and the head dim allow 16-byte accesses). Math per ops.def, fp32 with _rn
 * intrinsics (rope_pos_table in fp64), one rounding when stored:
 *   timestep_embedding: f_j = exp(-ln(10000) * j / half); [cos(t f), sin(t f)]
 *   rope_table: angle[s, a*F + j] = pos[s, a] * inv_freq[j]; cos, sin
 *   rope_pos_table: angle = pos * theta^(-2i/dims) (fp64); cos, sin stored as f32
 *   rope (neox rotate-half over [0, R), R/2 = cos's last dim): a = x[i], b = x[i + R/2]
 *     -> (a cos - b sin, b cos + a sin); dims [R, D) copied
 *   randn: h3_rng_normal(seed, fnv1a(stream), element index) from include/h3/rng.h, the
 *     CPU's generator compiled from the same text (seed is the kernel's last argument).
 */
#include "emit_internal.h"
#include "h3/rng.h"

#include <string.h>

#define LOOP_E(total)                                                                    \
  "  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < " total      \
  "; e += (long long)gridDim.x * blockDim.x) {\n"

static h3_status emit_timestep(emit_ctx *ec) {
  const h3_op *op = ec->op;
  h3_type in_t = op->operands[0]->type, out_t = op->results[0]->type;
  int64_t dim = out_t.dims[out_t.rank - 1], half = dim / 2;
  int64_t total = h3_type_numel(&out_t);
  h3_strbuf *s = &ec->src;
  emit_signature(ec, 1, &in_t, 1, &out_t, NULL, EMIT_BLOCK, true);
  h3_strbuf_printf(s, "  const long long total = %lldll;\n", (long long)total);
  h3_strbuf_append(s, LOOP_E("total"));
  h3_strbuf_printf(s, "    const long long m = e / %lldll, c = e %% %lldll;\n", (long long)dim,
                   (long long)dim);
  h3_strbuf_printf(s, "    const long long j = c < %lldll ? c : c - %lldll;\n", (long long)half,
                   (long long)half);
  if (half > 0)
    h3_strbuf_printf(s, "    const float f = expf(__fdiv_rn(__fmul_rn(-0x1.26bb1cp+3f, (float)j), "
                        "%lld.0f));\n", (long long)half);
  else
    h3_strbuf_append(s, "    const float f = 0.0f;\n");
  h3_strbuf_append(s, "    const float a = __fmul_rn(h3_ld(in0, m), f);\n");
  h3_strbuf_printf(s, "    h3_st(out0, e, c < %lldll ? cosf(a) : (c < %lldll ? sinf(a) : 0.0f));\n  }\n}\n",
                   (long long)half, (long long)(2 * half));
  emit_launch_1d(ec, total, EMIT_BLOCK);
  return emit_args(ec, 1, 1, false);
}

static h3_status emit_rope_table(emit_ctx *ec) {
  const h3_op *op = ec->op;
  h3_type in_t[2] = {op->operands[0]->type, op->operands[1]->type};
  h3_type out_t[2] = {op->results[0]->type, op->results[1]->type};
  if (in_t[0].rank != 2 || in_t[1].rank != 1) return emit_unsupported(ec, "expects pos[S, A], inv_freq[F]");
  int64_t a = in_t[0].dims[1], f = in_t[1].dims[0], total = h3_type_numel(&out_t[0]);
  h3_strbuf *s = &ec->src;
  emit_signature(ec, 2, in_t, 2, out_t, NULL, EMIT_BLOCK, true);
  h3_strbuf_printf(s, "  const long long total = %lldll;\n", (long long)total);
  h3_strbuf_append(s, LOOP_E("total"));
  h3_strbuf_printf(s, "    const long long row = e / %lldll, c = e %% %lldll;\n", (long long)(a * f),
                   (long long)(a * f));
  h3_strbuf_printf(s, "    const float ang = __fmul_rn(h3_ld(in0, row * %lldll + c / %lldll), "
                      "h3_ld(in1, c %% %lldll));\n", (long long)a, (long long)f, (long long)f);
  h3_strbuf_append(s, "    h3_st(out0, e, cosf(ang));\n    h3_st(out1, e, sinf(ang));\n  }\n}\n");
  emit_launch_1d(ec, total, EMIT_BLOCK);
  return emit_args(ec, 2, 2, false);
}

static h3_status emit_rope_pos_table(emit_ctx *ec) {
  const h3_op *op = ec->op;
  h3_type in_t = op->operands[0]->type;
  h3_type out_t[2] = {op->results[0]->type, op->results[1]->type};
  int64_t half = out_t[0].dims[out_t[0].rank - 1], total = h3_type_numel(&out_t[0]);
  int64_t dims = h3_op_attr_int(op, "dims", 2 * half);
  h3_strbuf theta;
  h3_strbuf_init(&theta);
  emit_literal(&theta, H3_F64, h3_op_attr_float(op, "theta", 10000.0), false);
  h3_strbuf *s = &ec->src;
  emit_signature(ec, 1, &in_t, 2, out_t, NULL, EMIT_BLOCK, true);
  h3_strbuf_printf(s, "  const long long total = %lldll;\n", (long long)total);
  h3_strbuf_append(s, LOOP_E("total"));
  h3_strbuf_printf(s, "    const long long t = e / %lldll, i = e %% %lldll;\n", (long long)half,
                   (long long)half);
  h3_strbuf_printf(s, "    const double inv = pow(%s, __ddiv_rn(-2.0 * (double)i, %lld.0));\n",
                   theta.data ? theta.data : "10000.0", (long long)dims);
  h3_strbuf_append(s, "    const double ang = __dmul_rn((double)h3_ld(in0, t), inv);\n"
                      "    h3_st(out0, e, (float)cos(ang));\n    h3_st(out1, e, (float)sin(ang));\n  }\n}\n");
  h3_strbuf_free(&theta);
  emit_launch_1d(ec, total, EMIT_BLOCK);
  return emit_args(ec, 1, 2, false);
}

/* `arr[0..vec) = ptr[at ..]` as one 8-wide load or a single element. */
static void load(h3_strbuf *s, int vec, const char *arr, const char *ptr, const char *at) {
  if (vec == 8) h3_strbuf_printf(s, "      h3_ld8(%s, %s, %s);\n", ptr, at, arr);
  else h3_strbuf_printf(s, "      %s[0] = h3_ld(%s, %s);\n", arr, ptr, at);
}

/* rope: one work unit per (row = token·head, chunk): a rotated chunk j < half/vec loads the
 * pair (x[i], x[i + half]) once and writes both outputs (a = x[i], b = x[i + half]:
 * lo = a·cos − b·sin, hi = b·cos + a·sin, one rounding each); the dims [R, D) are copied
 * chunk by chunk. Every x element is read once. */
static h3_status emit_rope(emit_ctx *ec) {
  const h3_op *op = ec->op;
  h3_type in_t[3] = {op->operands[0]->type, op->operands[1]->type, op->operands[2]->type};
  h3_type out_t = op->results[0]->type;
  const h3_type *x = &in_t[0], *cs = &in_t[1];
  if (x->rank != 3 || cs->rank != 2) return emit_unsupported(ec, "expects x[T, H, D], cos[T, R/2]");
  int64_t h = x->dims[1], dd = x->dims[2], half = cs->dims[1], r = 2 * half;
  if (r > dd) return emit_unsupported(ec, "the rotated dims exceed the head dim");
  int vec = (half % 8 == 0 && dd % 8 == 0) ? 8 : 1;
  int64_t rows = x->dims[0] * h, rot = half / vec, per_row = rot + (dd - r) / vec;
  h3_strbuf *s = &ec->src;
  emit_signature(ec, 3, in_t, 1, &out_t, NULL, EMIT_BLOCK, true);
  h3_strbuf_printf(s, "  const long long n = %lldll;\n", (long long)(rows * per_row));
  h3_strbuf_append(s, LOOP_E("n"));
  h3_strbuf_printf(s, "    const long long row = e / %lldll, j = e %% %lldll;\n", (long long)per_row,
                   (long long)per_row);
  h3_strbuf_printf(s, "    const long long base = row * %lldll;\n", (long long)dd);
  h3_strbuf_printf(s, "    float a[%d], b[%d], c[%d], sn[%d], o[%d];\n", vec, vec, vec, vec, vec);
  h3_strbuf_printf(s, "    if (j < %lldll) {\n", (long long)rot);
  h3_strbuf_printf(s, "      const long long pa = base + j * %d, pb = pa + %lldll;\n", vec,
                   (long long)half);
  h3_strbuf_printf(s, "      const long long ti = (row / %lldll) * %lldll + j * %d;\n", (long long)h,
                   (long long)half, vec);
  load(s, vec, "a", "in0", "pa");
  load(s, vec, "b", "in0", "pb");
  load(s, vec, "c", "in1", "ti");
  load(s, vec, "sn", "in2", "ti");
  h3_strbuf_printf(s, "#pragma unroll\n      for (int k = 0; k < %d; k++)\n"
                      "        o[k] = __fsub_rn(__fmul_rn(a[k], c[k]), __fmul_rn(b[k], sn[k]));\n",
                   vec);
  if (vec == 8) h3_strbuf_append(s, "      h3_st8(out0, pa, o);\n");
  else h3_strbuf_append(s, "      h3_st(out0, pa, o[0]);\n");
  h3_strbuf_printf(s, "#pragma unroll\n      for (int k = 0; k < %d; k++)\n"
                      "        o[k] = __fadd_rn(__fmul_rn(b[k], c[k]), __fmul_rn(a[k], sn[k]));\n",
                   vec);
  if (vec == 8) h3_strbuf_append(s, "      h3_st8(out0, pb, o);\n    } else {\n");
  else h3_strbuf_append(s, "      h3_st(out0, pb, o[0]);\n    } else {\n");
  h3_strbuf_printf(s, "      const long long pc = base + %lldll + (j - %lldll) * %d;\n", (long long)r,
                   (long long)rot, vec);
  load(s, vec, "o", "in0", "pc");
  if (vec == 8) h3_strbuf_append(s, "      h3_st8(out0, pc, o);\n    }\n  }\n}\n");
  else h3_strbuf_append(s, "      h3_st(out0, pc, o[0]);\n    }\n  }\n}\n");
  emit_launch_1d(ec, rows * per_row, EMIT_BLOCK);
  return emit_args(ec, 3, 1, false);
}

static h3_status emit_randn(emit_ctx *ec) {
  const h3_op *op = ec->op;
  h3_type out_t = op->results[0]->type;
  const char *stream = h3_op_attr_string(op, "stream", "");
  unsigned int sid = h3_rng_stream_hash(stream);
  int64_t total = h3_type_numel(&out_t);
  h3_strbuf *s = &ec->src;
  emit_signature(ec, 0, NULL, 1, &out_t, "unsigned long long seed", EMIT_BLOCK, true);
  h3_strbuf_printf(s, "  const long long total = %lldll;\n", (long long)total);
  h3_strbuf_append(s, LOOP_E("total"));
  h3_strbuf_printf(s, "    h3_st(out0, e, h3_rng_normal(seed, %uu, (unsigned long long)e));\n  }\n}\n",
                   sid);
  emit_launch_1d(ec, total, EMIT_BLOCK);
  return emit_args(ec, 0, 1, true);
}

h3_status emit_model(emit_ctx *ec) {
  switch (ec->op->code) {
  case H3_OP_TIMESTEP_EMBEDDING: return emit_timestep(ec);
  case H3_OP_ROPE_TABLE: return emit_rope_table(ec);
  case H3_OP_ROPE_POS_TABLE: return emit_rope_pos_table(ec);
  case H3_OP_ROPE: return emit_rope(ec);
  default: return emit_randn(ec);
  }
}
