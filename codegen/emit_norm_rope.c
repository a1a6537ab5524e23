/* emit_norm_rope.c: the CUDA kernel of rms_norm_rope (ops.def; made by qk-norm-rope-fusion):
 * per-head RMSNorm + RoPE of attention q/k, reading x bf16[T, C] at columns
 * [start, start + heads*D) in place and writing y bf16[T, heads, D].
 *
 * Layout: one head row (t, h) of D values per group of LANES lanes of a warp (LANES = 16
 * when the row has at most 16 chunks, else 32), 256 threads per block, so 16 (or 8) rows
 * per block; consecutive rows are consecutive heads of a token, so a block reads a
 * contiguous stretch of x. Lane l owns chunk l of the row: 8 elements with 16-byte
 * accesses when D % 8 == 0, else one element (at most 32 chunks: the pass fuses only such
 * rows). Row ids are 32-bit and (t, h) = (row / heads, row % heads) divide by a
 * compile-time constant: no 64-bit division. A group past the last row works on the last
 * row and stores nothing, so every lane reaches every shuffle.
 * The write form rms_norm_rope_write (made by kv-write-fusion; operands cache, x, w, cos,
 * sin, slot) computes the same rows and stores row (t, h) at the cache's flat row slot[t]
 * (head h's D values of it) instead of y's row, in place; as kv_write, a slot outside the
 * cache or written again by a later token stores nothing there. With a v cache (operand 6)
 * the group also copies the row's v values, x[t, v_start + h*D ..], to the v cache's same
 * row (loaded before the norm's work, stored with k's row). With q's weight too (operand 7)
 * the grid runs q's T*q_heads rows first (q_start's columns, weight wq, stored to result 2
 * as rms_norm_rope stores them), then k's rows; a warp may hold a q row and a k row (both
 * run every shuffle; only k's rows scan slots or copy v).
 *
 * Numerics (bitwise the kernels of slice + rms_norm + rope, emit_reduce.c/emit_model.c):
 *   - the sum of squares is rms_norm's one-warp reduction of the same row (emit_rms_accum
 *     over the lane's chunk, emit_rms_finish with block LANES: same bits as rms_norm's
 *     block of 32 whose lanes past the row's chunks hold 0);
 *   - n = bf16((x*r)*(w + offset)) as rms_norm rounds its result, kept in registers;
 *   - rope on n: a = n[i], b = n[i + R/2] (i < R/2) -> a*cos - b*sin at i, b*cos + a*sin at
 *     i + R/2, one rounding each (rope's _rn sequence); dims [R, D) copied. The partner
 *     value comes from the lane that owns it by __shfl_sync: when R/2 % 8 == 0 (the H3
 *     head: D = 128, R = 96) chunk j < R/16 pairs with chunk j + R/16 (one shuffle per
 *     element, cos/sin with 16-byte loads); otherwise each element fetches both candidate
 *     partners (i + R/2 and i - R/2; the register index is a compile-time constant) and
 *     uses the one its position needs.
 * The int8 form (x = i32[T, C] accumulators, in4 = s_x f32[T], in5 = s_w f32[C], in6 =
 * bias?[C]; made by int8-qk-norm-rope) loads the lane's accumulators with the same
 * accesses and turns each into dequant_i8's value first: bf16((float(acc) * s_x[t]) *
 * s_w[c] (+ bias[c])) with __fmul_rn / __fadd_rn, one rounding, the operations and order
 * of dequant_i8's kernel (emit_fused.c, linear_int8's epilogue); from there on the row is
 * the bf16 row dequant_i8 would have stored.
 * The sage_quant = 1 form (either x; sage-q-fusion) runs the same row code in blocks of
 * sage_attention's 64-row Q blocks and adds their int8 codes and deltas
 * (emit_norm_rope_sage.c).
 */
#include "emit_internal.h"

#include <string.h>

/* floor(a / b) for b > 0 */
static int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* Rope with R/2 % 8 == 0: lane pairs (l, l + ROT) with ROT = R/16 chunks. The lanes' cos / sin
 * chunks are loaded first (rope_paired_loads, before the norm's reduction: their round trip
 * overlaps x's), then rope_paired rotates. */
static void rope_paired_loads(h3_strbuf *s, int64_t half, int cs) {
  const int rot = (int)(half / 8);
  h3_strbuf_printf(s, "  float c[8], sn[8];\n"
                      "  if (lane < %d) {\n    const int j = lane < %d ? lane : lane - %d;\n"
                      "    h3_ld8(in%d, (long long)t * %lldll + j * 8, c);\n"
                      "    h3_ld8(in%d, (long long)t * %lldll + j * 8, sn);\n  }\n",
                   2 * rot, rot, rot, cs, (long long)half, cs + 1, (long long)half);
}

static void rope_paired(h3_strbuf *s, int lanes, int64_t half) {
  const int rot = (int)(half / 8);
  h3_strbuf_printf(s, "  const int src = lane < %d ? lane + %d : (lane < %d ? lane - %d : lane);\n"
                      "  float p[8];\n#pragma unroll\n  for (int k = 0; k < 8; k++) "
                      "p[k] = __shfl_sync(0xffffffffu, h[k], src, %d);\n",
                   rot, rot, 2 * rot, rot, lanes);
  /* lane < ROT: (a, b) = (own, partner) -> a*c - b*s; else (b, a) = (own, partner) ->
     b*c + a*s: own*c first, partner*s second, as rope's kernel multiplies */
  h3_strbuf_printf(s, "  if (lane < %d) {\n#pragma unroll\n    for (int k = 0; k < 8; k++) {\n"
                      "      const float hc = __fmul_rn(h[k], c[k]), ps = __fmul_rn(p[k], sn[k]);\n"
                      "      o[k] = lane < %d ? __fsub_rn(hc, ps) : __fadd_rn(hc, ps);\n"
                      "    }\n  } else {\n#pragma unroll\n"
                      "    for (int k = 0; k < 8; k++) o[k] = h[k];\n  }\n",
                   2 * rot, rot);
}

/* Rope for any R/2: element k of the lane (dim i = lane*vec + k) takes its partner from
 * dim i + R/2 (i < R/2) or i - R/2 (R/2 <= i < R); both are fetched (shuffles must be
 * uniform), the register index of each is a constant of k. */
static void rope_general(h3_strbuf *s, int lanes, int vec, int64_t half, int cs) {
  const int hf = (int)half;
  for (int k = 0; k < vec; k++) {
    const int qu = floor_div(k + hf, vec), ru = k + hf - qu * vec;
    const int qd = floor_div(k - hf, vec), rd = k - hf - qd * vec;
    h3_strbuf_printf(s, "  {\n    const float up = __shfl_sync(0xffffffffu, h[%d], (lane + %d) & %d, %d);\n"
                        "    const float dn = __shfl_sync(0xffffffffu, h[%d], (lane + %d) & %d, %d);\n"
                        "    const int i = lane * %d + %d;\n",
                     ru, qu, lanes - 1, lanes, rd, qd, lanes - 1, lanes, vec, k);
    h3_strbuf_printf(s, "    if (i < %d) {\n"
                        "      const float c = h3_ld(in%d, (long long)t * %dll + i), "
                        "sn = h3_ld(in%d, (long long)t * %dll + i);\n"
                        "      o[%d] = __fsub_rn(__fmul_rn(h[%d], c), __fmul_rn(up, sn));\n"
                        "    } else if (i < %d) {\n"
                        "      const float c = h3_ld(in%d, (long long)t * %dll + (i - %d)), "
                        "sn = h3_ld(in%d, (long long)t * %dll + (i - %d));\n"
                        "      o[%d] = __fadd_rn(__fmul_rn(h[%d], c), __fmul_rn(dn, sn));\n"
                        "    } else {\n      o[%d] = h[%d];\n    }\n  }\n",
                     hf, cs, hf, cs + 1, hf, k, k, 2 * hf, cs, hf, hf, cs + 1, hf, hf, k, k, k, k);
  }
}

/* The int8 form: v[k] holds float(acc) (one RNE conversion, as dequant_i8 converts);
 * replaced by dequant_i8's value rounded to bf16. */
static void emit_dequant(h3_strbuf *s, int vec, bool bias) {
  h3_strbuf_printf(s, "    const float sx = h3_ld(in4, (long long)t);\n    float sw[%d]%s;\n", vec,
                   bias ? ", bs[8]" : "");
  if (vec == 8) {
    h3_strbuf_append(s, "    h3_ld8(in5, col + lane * 8, sw);\n");
    if (bias) h3_strbuf_append(s, "    h3_ld8(in6, col + lane * 8, bs);\n");
  } else {
    h3_strbuf_append(s, "    sw[0] = h3_ld(in5, col + lane);\n");
    if (bias) h3_strbuf_append(s, "    bs[0] = h3_ld(in6, col + lane);\n");
  }
  h3_strbuf_printf(s, "#pragma unroll\n    for (int k = 0; k < %d; k++) v[k] = h3_rbf16(%s__fmul_rn("
                      "__fmul_rn(v[k], sx), sw[k])%s);\n",
                   vec, bias ? "__fadd_rn(" : "", bias ? ", bs[k])" : "");
}

/* rms_norm_rope_write: where row (t, hd) goes. The slot is read once per group; a slot
 * outside the cache's rows, or one that a later token writes again (kv_write's rule: the
 * last write wins), stores nothing. The later tokens' slots are scanned by the group's
 * lanes and the verdict reduced over the group with shuffles every lane runs (xor offsets
 * below the group's width stay inside the group). */
static void emit_write_target(h3_strbuf *s, int lanes, int64_t T, int64_t H, int64_t D,
                              int64_t cache_rows, bool with_q) {
  /* q's rows skip the scan (a prefill's T*q_heads groups would each walk the later slots) */
  h3_strbuf_printf(s, "  const long long sl = (long long)h3_ld(in5, (long long)t);\n"
                      "  int dup = 0;\n"
                      "  for (unsigned t2 = t + 1u + (unsigned)lane; %st2 < %lldu; t2 += %du)\n"
                      "    dup |= (long long)h3_ld(in5, (long long)t2) == sl;\n"
                      "#pragma unroll\n  for (int o = %d; o > 0; o >>= 1) "
                      "dup |= __shfl_xor_sync(0xffffffffu, dup, o);\n",
                   with_q ? "!is_q && " : "", (long long)T, lanes, lanes / 2);
  if (!with_q) {
    h3_strbuf_printf(s, "  const bool store = live && !dup && sl >= 0 && sl < %lldll;\n"
                        "  h3_bf16 *y = out0 + (store ? sl : 0ll) * %lldll + (long long)hd * %lldll;\n",
                     (long long)cache_rows, (long long)(H * D), (long long)D);
    return;
  }
  /* q's rows (is_q) store to result 2 whatever the slots */
  h3_strbuf_printf(s, "  const bool store = live && (is_q || (!dup && sl >= 0 && sl < %lldll));\n"
                      "  h3_bf16 *y = is_q ? out2 + (long long)row * %lldll\n"
                      "                    : out0 + (store ? sl : 0ll) * %lldll + (long long)hd * %lldll;\n",
                   (long long)cache_rows, (long long)D, (long long)(H * D), (long long)D);
}

/* The group's row: (t, hd) of y's rows; with q (rms_norm_rope_write with wq) the q rows come
 * first, then the k rows, each part with its own head count and first column. */
static void emit_row_head(h3_strbuf *s, int rows_per_block, int lanes, int64_t rows, int64_t H,
                          int64_t q_rows, int64_t HQ) {
  const int64_t all = q_rows + rows;
  h3_strbuf_printf(s, "  const unsigned wrow = blockIdx.x * %du + (threadIdx.x / %du);\n"
                      "  const bool live = wrow < %lldu;\n",
                   rows_per_block, lanes, (long long)all);
  if (!q_rows) {
    h3_strbuf_printf(s, "  const unsigned row = live ? wrow : %lldu;\n"
                        "  const unsigned t = row / %lldu, hd = row - t * %lldu;\n",
                     (long long)(all > 0 ? all - 1 : 0), (long long)H, (long long)H);
  } else {
    h3_strbuf_printf(s, "  const unsigned grow = live ? wrow : %lldu;\n"
                        "  const bool is_q = grow < %lldu;\n"
                        "  const unsigned row = is_q ? grow : grow - %lldu;\n"
                        "  const unsigned t = is_q ? row / %lldu : row / %lldu;\n"
                        "  const unsigned hd = row - t * (is_q ? %lldu : %lldu);\n",
                     (long long)(all > 0 ? all - 1 : 0), (long long)q_rows, (long long)q_rows, (long long)HQ,
                     (long long)H, (long long)HQ, (long long)H);
  }
  h3_strbuf_printf(s, "  const int lane = threadIdx.x & %d;\n", lanes - 1);
}

h3_status emit_norm_rope(emit_ctx *ec) {
  const h3_op *op = ec->op;
  h3_strbuf *s = &ec->src;
  /* the write form's operands: cache, x, w, cos, sin, slot; x is operand b */
  const bool write = op->code == H3_OP_RMS_NORM_ROPE_WRITE;
  const int b = write ? 1 : 0, n_in = op->n_operands;
  const h3_type *xt = &op->operands[b]->type, *ct = &op->operands[b + 2]->type;
  const h3_type *wt = &op->operands[b + 1]->type, *cache = &op->operands[0]->type;
  const bool acc = !write && n_in > 4; /* the int8 form: x is i32, dequantized on load */
  const bool with_v = write && n_in >= 7; /* and v's columns into operand 6, the v cache */
  const bool with_q = write && n_in == 8; /* and q's rows with operand 7, q's weight */
  const bool sage = !write && h3_op_attr_int(op, "sage_quant", 0) != 0; /* and q's sage codes */
  if ((write ? n_in < 6 || cache->rank < 3 : n_in != 4 && n_in != 6 && n_in != 7) ||
      xt->rank != 2 || ct->rank != 2 || wt->rank != 1)
    return emit_unsupported(ec, "expects x[T, C], w[D], cos[T, R/2], sin[T, R/2] (and s_x, s_w, "
                                "bias? with i32 x; cache[P, page, ..] and slot[T] when writing)");
  const int64_t T = xt->dims[0], D = wt->dims[0], C = xt->dims[1];
  const int64_t H = h3_op_attr_int(op, "heads", 1);
  const int64_t start = h3_op_attr_int(op, "start", 0), half = ct->dims[1];
  const int vec = D % 8 == 0 ? 8 : 1;
  const int64_t units = D / vec;
  if (D < 1 || units > 32)
    return emit_unsupported(ec, "head rows of more than 32 chunks (the pass keeps such heads "
                                "as rms_norm + rope)");
  const int64_t HQ = with_q ? h3_op_attr_int(op, "q_heads", 1) : 0;
  if ((T * (H + HQ)) >= ((int64_t)1 << 31)) return emit_unsupported(ec, "2^31 head rows or more");
  const int lanes = units <= 16 ? 16 : 32, rows_per_block = 256 / lanes;
  const int64_t rows = T * H, q_rows = T * HQ;
  const int n_out = write ? n_in - 5 : sage ? 3 : 1; /* k's cache, v's cache?, q?; y, codes, deltas */
  h3_type in_t[8], out_t[3];
  for (int i = 0; i < n_in; i++) in_t[i] = op->operands[i]->type;
  for (int i = 0; i < n_out; i++) out_t[i] = op->results[i]->type;
  /* the write form updates the caches in place: out0 is in0's buffer, out1 in6's (no
     __restrict__) */
  ec->k->inplace = write;
  emit_signature(ec, n_in, in_t, n_out, out_t, NULL, 256, !write);
  if (q_rows + rows == 0) h3_strbuf_append(s, "  return; /* no rows (T = 0): nothing to read */\n");
  if (sage) emit_sage_q_open(s, op, lanes, vec, T, H);
  else emit_row_head(s, rows_per_block, lanes, rows, H, q_rows, HQ);
  if (with_q)
    h3_strbuf_printf(s, "  const long long col = (is_q ? %lldll : %lldll) + (long long)hd * %lldll;\n",
                     (long long)h3_op_attr_int(op, "q_start", 0), (long long)start, (long long)D);
  else
    h3_strbuf_printf(s, "  const long long col = %lldll + (long long)hd * %lldll;\n", (long long)start,
                     (long long)D);
  h3_strbuf_printf(s, "  const %s *x = in%d + (long long)t * %lldll + col;\n", acc ? "int" : "h3_bf16", b,
                   (long long)C);
  if (write)
    emit_write_target(s, lanes, T, H, D, cache->dims[0] * cache->dims[1], with_q);
  /* v's chunk (k's rows only) loaded before the norm's work, stored after it: raw bits, as
     kv_write copies (NaN payloads included) */
  const char *k_row = with_q ? "!is_q && " : "";
  if (with_v) {
    h3_strbuf_printf(s, "  const h3_bf16 *xv = in1 + (long long)t * %lldll + %lldll + (long long)hd * %lldll;\n"
                        "  h3_bf16 *yv = out1 + (store ? sl : 0ll) * %lldll + (long long)hd * %lldll;\n",
                     (long long)C, (long long)h3_op_attr_int(op, "v_start", 0), (long long)D,
                     (long long)(H * D), (long long)D);
    if (vec == 8)
      h3_strbuf_printf(s, "  __align__(16) h3_bf16 vv[8];\n"
                          "  const bool va = h3_al8(xv + lane * 8) && h3_al8(yv + lane * 8);\n"
                          "  if (%slane < %lld) {\n"
                          "    if (va) h3_ldr8<true>(xv, lane * 8, vv);\n"
                          "    else h3_ldr8<false>(xv, lane * 8, vv);\n  }\n",
                       k_row, (long long)units);
    else
      h3_strbuf_printf(s, "  h3_bf16 vv[1];\n  if (%slane < %lld) vv[0] = xv[lane];\n", k_row,
                       (long long)units);
  }
  if (!write)
    h3_strbuf_printf(s, "  const bool store = live;\n"
                        "  h3_bf16 *y = out0 + (long long)row * %lldll;\n", (long long)D);
  const bool paired = vec == 8 && half % 8 == 0;
  if (paired) rope_paired_loads(s, half, b + 2);
  /* the sum of squares over the lane's chunk, in rms_norm's order */
  h3_strbuf_printf(s, "  float v[%d], w[%d], h[%d], o[%d];\n  float ss = 0.0f;\n"
                      "  if (lane < %lld) {\n",
                   vec, vec, vec, vec, (long long)units);
  if (vec == 8) h3_strbuf_append(s, "    h3_ld8(x, lane * 8, v);\n");
  else h3_strbuf_append(s, "    v[0] = (float)h3_ld(x, lane);\n");
  /* the norm's weight: w (operand b + 1), q's rows wq (operand 7) */
  for (int q = 0; q <= (with_q ? 1 : 0); q++) {
    const char *guard = !with_q ? "" : q ? "    else " : "    if (!is_q) ";
    if (vec == 8) h3_strbuf_printf(s, "%s%sh3_ld8(in%d, lane * 8, w);\n", with_q ? "" : "    ", guard, q ? 7 : b + 1);
    else h3_strbuf_printf(s, "%s%sw[0] = h3_ld(in%d, lane);\n", with_q ? "" : "    ", guard, q ? 7 : b + 1);
  }
  if (acc) emit_dequant(s, vec, n_in > 6);
  emit_rms_accum(s, vec, "v", false);
  h3_strbuf_printf(s, "  } else {\n#pragma unroll\n    for (int k = 0; k < %d; k++) v[k] = w[k] = 0.0f;\n"
                      "  }\n", vec);
  emit_rms_finish(s, lanes, D, h3_op_attr_float(op, "eps", 1e-5), false);
  /* n = rms_norm's bf16 result, in registers */
  h3_strbuf off;
  h3_strbuf_init(&off);
  emit_literal(&off, H3_F32, h3_op_attr_float(op, "offset", 0.0), false);
  h3_strbuf_printf(s, "#pragma unroll\n  for (int k = 0; k < %d; k++) "
                      "h[k] = h3_rbf16(__fmul_rn(__fmul_rn(v[k], r), __fadd_rn(w[k], %s)));\n",
                   vec, off.data ? off.data : "0");
  bool oom = off.oom;
  h3_strbuf_free(&off);
  if (oom) return H3_ERR;
  if (paired) rope_paired(s, lanes, half);
  else rope_general(s, lanes, vec, half, b + 2);
  if (vec == 8) h3_strbuf_printf(s, "  if (store && lane < %lld) h3_st8(y, lane * 8, o);\n", (long long)units);
  else h3_strbuf_printf(s, "  if (store && lane < %lld) h3_st(y, lane, o[0]);\n", (long long)units);
  if (with_v && vec == 8)
    h3_strbuf_printf(s, "  if (store && %slane < %lld) {\n"
                        "    if (va) h3_str8<true>(yv, lane * 8, vv);\n"
                        "    else h3_str8<false>(yv, lane * 8, vv);\n  }\n",
                     k_row, (long long)units);
  else if (with_v)
    h3_strbuf_printf(s, "  if (store && %slane < %lld) yv[lane] = vv[0];\n", k_row, (long long)units);
  if (sage) {
    emit_sage_q_close(ec, lanes, vec, units, H, D);
    h3_strbuf_append(s, "}\n");
    ec->k->block[0] = 256;
    ec->k->block[1] = ec->k->block[2] = 1;
    ec->k->shared_bytes = 0;
    return emit_args(ec, n_in, n_out, false);
  }
  h3_strbuf_append(s, "}\n");
  const int64_t blocks = (q_rows + rows + rows_per_block - 1) / rows_per_block;
  ec->k->grid[0] = blocks > 0 ? blocks : 1;
  ec->k->grid[1] = ec->k->grid[2] = 1;
  ec->k->block[0] = 256;
  ec->k->block[1] = ec->k->block[2] = 1;
  ec->k->shared_bytes = 0;
  return emit_args(ec, n_in, n_out, false);
}
