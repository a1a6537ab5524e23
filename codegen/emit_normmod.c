/* emit_normmod.c: the CUDA kernels of the fused RMSNorm + indexed AdaLN ops
 * (norm_modulate = Plan A, residual_norm_modulate = Plan B; docs/models/accelerations.md §3).
 *
 * One block per row of x bf16[T, H] (H % 8 == 0: the pass only fuses such rows, other
 * shapes are an emitter limitation): at the exact tier rms_norm's block size for the row; at
 * lossless the fewest chunks per thread that 256 threads allow, as many for every thread
 * where H allows (H = 5376: 224 threads x 3 chunks, no idle warps). Thread tid owns chunks
 * u = tid + j*block (j < CH = ceil(H/8 / block)) of 8 elements; the sum of squares runs over
 * them in the block's order through the shared reduction of emit_reduce.c (emit_rms_accum /
 * emit_rms_finish), so at the exact tier r is bitwise rms_norm's r. Then, per element, with w = gamma + offset:
 *   exact "bf16": h = bf16((x*r)*w); c = bf16(1 + s); p = bf16(h*c); y = bf16(p + b)
 *   exact "f32":  h as above; y = bf16((h*(1 + s)) + b)
 *   lossless:     w_eff = fma(w, s, w) (fp32, one rounding of w*(1 + s)); y = bf16(fma(x*r,
 *                 w_eff, b)), with the lean reduction of emit_reduce.c: ss = fma(x, x, ss) in
 *                 the same order, r = rsqrt(fma(tot, fl(1/H), eps)) correctly rounded (fewer
 *                 instructions per element and per row: at [32768, 5376] the instruction
 *                 count, not DRAM, kept the kernel above a copy; dev/perf-memory-kernels.md)
 * with s, b the scale/shift rows of g = clamp(idx[row], 0, G). Plan B first forms
 * residual' = bf16(residual + bf16(gate[g]*update)) per element, stores it (out0, which may
 * be in0: each element is read before it is written, by the same thread) and feeds the
 * rounded values to the same code as Plan A, so Plan B = (U3; Plan A) bitwise. Every
 * operation is an explicit _rn intrinsic (the lossless fma too), so the kernels give the
 * same bits with or without -fmad=false.
 * Memory (dev/perf-memory-kernels.md): when every base pointer is 16-byte aligned (one
 * test per block; rows are then aligned too), each thread issues all of its 16-byte DRAM
 * loads before any arithmetic and keeps x as bf16 in registers until the modulate, widening
 * and packing bf16 pairs a 32-bit word at a time (h3_wbf8 / h3_pbf8);
 * otherwise the kernel calls @K@_elem, a __noinline__ device function with the same
 * parameters, whose element-by-element row does the same arithmetic in the same order and
 * reads x again instead of holding it (kept out of line so that it costs the vector row
 * nothing: inline, the vector row's loads waited behind the branch).
 * quantize = 1 (passes/int8_fuse_quant.c; results q i8[T, H], s f32[T] after y): each
 * thread also keeps the values it quantizes, v = the rounded y (exact: bf16, so the codes
 * are quantize_rows(y)'s) or the fp32 value before rounding (lossless), and its running
 * max of |v|; a second block reduction (fmaxf: exact in any order; warp xor butterfly,
 * then the warps' partials) gives the row's amax, then quantize_rows' arithmetic
 * (emit_int8.c, runtime/cpu/ops_q8fuse.c): s = max(amax / 127, 1e-30) (IEEE division),
 * q = clamp(rint(v / s), -128, 127), NaN -> 0, 8-byte stores of the codes; thread 0
 * writes s. When y has no uses (the pass leaves it a result, the quantizer was its only
 * reader) the kernel does not store it.
 * An i32 update (int8-resid-dequant: in1 = out_proj's accumulators acc i32[T, H], in7 =
 * s_x f32[T], in8 = s_w f32[H]) is loaded 8 at a time like the bf16 one and dequantized
 * in registers with dequant_i8's epilogue, u = bf16((float(acc) * s_x[row]) * s_w[col])
 * (__fmul_rn, one rounding: the value the unfused dequant_i8 stores), before U3.
 */
#include "emit_internal.h"

#include <string.h>

/* Emits the per-element modulate of chunk j (values v[k], r) into o[k]. */
static void emit_modulate(h3_strbuf *s, bool exact, bool mod_f32, const char *off, bool off_zero) {
  h3_strbuf_append(s, "#pragma unroll\n      for (int k = 0; k < 8; k++) {\n");
  if (!exact) {
    if (off_zero) /* w + 0 would only turn -0 into +0 */
      h3_strbuf_append(s, "        const float we = __fmaf_rn(w[k], sc[k], w[k]);\n");
    else
      h3_strbuf_printf(s, "        const float wo = __fadd_rn(w[k], %s);\n"
                          "        const float we = __fmaf_rn(wo, sc[k], wo);\n", off);
    h3_strbuf_append(s, "        o[k] = __fmaf_rn(__fmul_rn(v[k], r), we, sh[k]);\n");
  } else {
    h3_strbuf_printf(s, "        const float h = h3_rbf16(__fmul_rn(__fmul_rn(v[k], r), "
                        "__fadd_rn(w[k], %s)));\n", off);
    if (mod_f32)
      h3_strbuf_append(s, "        o[k] = __fadd_rn(__fmul_rn(h, __fadd_rn(1.0f, sc[k])), sh[k]);\n");
    else
      h3_strbuf_append(s, "        const float c = h3_rbf16(__fadd_rn(1.0f, sc[k]));\n"
                          "        o[k] = __fadd_rn(h3_rbf16(__fmul_rn(h, c)), sh[k]);\n");
  }
  h3_strbuf_append(s, "      }\n");
}

/* The staged row (lossless Plan B without a quantizer, an i32 update or idle chunks, and rows
 * of at most NM_STAGED_MAX_H): the residual's and the update's rows come into shared memory by
 * cp.async (no register held while they are in flight) instead of into registers. At [32768,
 * 5376] on the H200 it ran 1.025 x a copy of its bytes against 1.032-1.036 x for the register
 * row (dev/perf-memory-kernels.md). ptxas is asked for NM_STAGED_REG_BUDGET registers per
 * thread (__launch_bounds__'s blocks per SM = 65536 / (budget * block): 5 of 224 threads; 56
 * registers, no spills; with 6 blocks it spilled). */
#define NM_STAGED_MAX_H 8192
#define NM_STAGED_REG_BUDGET 56

/* What the row emitters need of the op. */
typedef struct {
  bool plan_b, exact, mod_f32;
  bool acc; /* Plan B with an i32 update (accumulators, scales in7 and in8) */
  bool quant, store_y; /* quantize = 1; y has users (else its store is skipped) */
  int first, block;
  bool staged;    /* the staged row (NM_STAGED_MAX_H); then every thread has all of its chunks */
  int min_blocks; /* __launch_bounds__'s blocks per SM, 0: none (NM_STAGED_REG_BUDGET) */
  int64_t H, gate_rows, units, chunks;
  double eps;
  const char *off;
  bool off_zero; /* offset == 0.0 (lossless: w_eff from gamma itself) */
} nm_shape;

/* for (j < chunks) { u = tid + j*block; if (u < units) { BODY } } opened; the caller
 * closes it with close_chunks. The test stays where every thread has all of its chunks: without
 * it ptxas batched the chunks' table loads and Plan A took 64 registers instead of 40 (183
 * against 171 us at [32768, 5376] on the H200). The staged row has no test (it was measured
 * so: hand-written, its loops had none). */
static void open_chunks(h3_strbuf *s, const nm_shape *n) {
  h3_strbuf_printf(s, "#pragma unroll\n    for (int j = 0; j < %lld; j++) {\n"
                      "      const int u = tid + j * %d;\n", (long long)n->chunks, n->block);
  if (n->staged)
    h3_strbuf_append(s, "      {\n");
  else
    h3_strbuf_printf(s, "      if (u < %lld) {\n", (long long)n->units);
}
static const char close_chunks[] = "      }\n    }\n";

/* Widens x (the 16-byte aligned bf16 array `xa`), gamma, scale and shift (wr, sr, hr) a pair
 * per word (h3_wbf8), modulates and stores y's chunk u with access path V. */
static void emit_widen_modulate_store(h3_strbuf *s, const nm_shape *n, const char *xa,
                                      const char *V) {
  h3_strbuf_printf(s, "        float v[8], w[8], sc[8], sh[8], o[8];\n"
                      "        h3_wbf8(%s, v);\n        h3_wbf8(wr, w);\n"
                      "        h3_wbf8(sr, sc);\n        h3_wbf8(hr, sh);\n", xa);
  emit_modulate(s, n->exact, n->mod_f32, n->off, n->off_zero);
  h3_strbuf_append(s, "        h3_pbf8(o, yr);\n");
  if (n->store_y) h3_strbuf_printf(s, "        h3_str8<%s>(y, u * 8, yr);\n", V);
  if (n->quant) /* the value to quantize: y (exact) or the fp32 value before rounding */
    h3_strbuf_printf(s, "#pragma unroll\n        for (int k = 0; k < 8; k++) {\n"
                        "          qv[j][k] = %s[k];\n          qm = fmaxf(qm, fabsf(h3_w(qv[j][k])));\n"
                        "        }\n", n->exact ? "yr" : "o");
}

/* quantize = 1: declares the row's kept values qv[chunks][8] (bf16 y at exact, fp32 at
 * lossless) and the thread's running max |v|, qm. */
static void emit_quant_decl(h3_strbuf *s, const nm_shape *n) {
  if (n->quant)
    h3_strbuf_printf(s, "    %s qv[%lld][8];\n    float qm = 0.0f;\n", n->exact ? "h3_bf16" : "float",
                     (long long)n->chunks);
}

/* quantize = 1, after the modulate: the row's amax over the block (fmaxf, order-free),
 * s = max(amax / 127, 1e-30), the codes of every kept value (quantize_rows' arithmetic,
 * emit_int8.c) stored 8 at a time with access path V, and s by thread 0. */
static void emit_quant_tail(h3_strbuf *s, const nm_shape *n, const char *V) {
  if (!n->quant) return;
  h3_strbuf_append(s, "#pragma unroll\n    for (int lo = 16; lo > 0; lo >>= 1) "
                      "qm = fmaxf(qm, __shfl_xor_sync(0xffffffffu, qm, lo));\n");
  if (n->block > 32)
    h3_strbuf_printf(s, "    if ((tid & 31) == 0) qpart[tid >> 5] = qm;\n    __syncthreads();\n"
                        "    float amax = 0.0f;\n#pragma unroll\n"
                        "    for (int w = 0; w < %d; w++) amax = fmaxf(amax, qpart[w]);\n",
                     n->block / 32);
  else /* one warp: qm >= 0 is the row's max already, = fmaxf(0, qm) */
    h3_strbuf_append(s, "    const float amax = qm;\n");
  h3_strbuf_append(s, "    float qsc = __fdiv_rn(amax, 127.0f);\n    if (qsc < 1e-30f) qsc = 1e-30f;\n");
  open_chunks(s, n);
  h3_strbuf_printf(s, "        __align__(8) signed char qr[8];\n#pragma unroll\n"
                      "        for (int k = 0; k < 8; k++) {\n"
                      "          const float c = rintf(__fdiv_rn(h3_w(qv[j][k]), qsc));\n"
                      "          qr[k] = c != c ? (signed char)0 : c <= -128.0f ? (signed char)-128\n"
                      "                : c >= 127.0f ? (signed char)127 : (signed char)c;\n"
                      "        }\n        h3_str8<%s>(qo, u * 8, qr);\n", V);
  h3_strbuf_append(s, close_chunks);
  h3_strbuf_append(s, "    if (tid == 0) so[row] = qsc;\n");
}

/* Plan B's U3 on the chunk arrays x (bf16, updated in place), u (the update: bf16, or i32
 * accumulators dequantized with s_x = sxv and s_w = w8[k]) and g (gate). Lossless: bf16x2
 * arithmetic (h3_u3bf8: the same values in a quarter of the instructions; about 1 us of 343 at
 * [32768, 5376] on the H200); exact: fp32 with the unfused chain's roundings (its NaN bits too). */
static void emit_u3(h3_strbuf *s, const nm_shape *n, const char *x, const char *u, const char *g) {
  if (n->acc) { /* dequant_i8's epilogue: values on the bf16 grid */
    h3_strbuf_printf(s, "        float uw[8];\n#pragma unroll\n        for (int k = 0; k < 8; k++) "
                        "uw[k] = h3_rbf16(__fmul_rn(__fmul_rn((float)%s[k], sxv), w8[k]));\n", u);
    if (!n->exact) /* packed exactly: every uw[k] is a bf16 value */
      h3_strbuf_append(s, "        __align__(16) h3_bf16 ub[8];\n        h3_pbf8(uw, ub);\n");
  }
  if (!n->exact) {
    h3_strbuf_printf(s, "        h3_u3bf8(%s, %s, %s);\n", x, g, n->acc ? "ub" : u);
    return;
  }
  /* bf16 operands widened a pair per word (h3_wbf8), the result packed back (h3_pbf8) */
  h3_strbuf_printf(s, "        float xw[8], gw[8];\n        h3_wbf8(%s, xw);\n"
                      "        h3_wbf8(%s, gw);\n", x, g);
  if (!n->acc) h3_strbuf_printf(s, "        float uw[8];\n        h3_wbf8(%s, uw);\n", u);
  h3_strbuf_append(s, "#pragma unroll\n        for (int k = 0; k < 8; k++) "
                      "xw[k] = __fadd_rn(xw[k], h3_rbf16(__fmul_rn(gw[k], uw[k])));\n");
  h3_strbuf_printf(s, "        h3_pbf8(xw, %s);\n", x);
}

/* The update's chunk u into array `dst` (declared by the caller) with access path V; the
 * accumulators also bring s_w's 8 columns into w8. */
static void emit_load_update(h3_strbuf *s, const nm_shape *n, const char *dst, const char *V) {
  h3_strbuf_printf(s, "        h3_ldr8<%s>(upd, u * 8, %s);\n", V, dst);
  if (n->acc)
    h3_strbuf_printf(s, "        __align__(16) float w8[8];\n        h3_ldr8<%s>(in8, u * 8, w8);\n", V);
}

/* The row's second pass, closing the row's block: per chunk, gamma and the table rows
 * (from L2) are loaded with access path V and y = modulate(x·r) is stored (quantize = 1: the
 * codes after it). vec: x is in registers (xr[j]); else it is read again from xs. */
static void emit_modulate_pass(h3_strbuf *s, const nm_shape *n, bool vec) {
  const char *V = vec ? "true" : "false";
  open_chunks(s, n);
  h3_strbuf_printf(s, "        __align__(16) h3_bf16 %swr[8], sr[8], hr[8], yr[8];\n", vec ? "" : "xr[8], ");
  if (!vec) h3_strbuf_append(s, "        h3_ldr8<false>(xs, u * 8, xr);\n");
  h3_strbuf_printf(s, "        h3_ldr8<%s>(in%d, u * 8, wr);\n        h3_ldr8<%s>(scr, u * 8, sr);\n"
                      "        h3_ldr8<%s>(shr, u * 8, hr);\n", V, n->first, V, V);
  emit_widen_modulate_store(s, n, vec ? "xr[j]" : "xr", V);
  h3_strbuf_append(s, close_chunks);
  emit_quant_tail(s, n, V);
  h3_strbuf_append(s, "  }\n");
}

/* The rest of a row whose x (Plan B: residual') is in registers, xr[j]: the sum of squares
 * over the chunks in rms_norm's order, r, then the modulate pass; closes the row's block. */
static void emit_norm_modulate_regs(h3_strbuf *s, const nm_shape *n) {
  h3_strbuf_append(s, "    float ss = 0.0f;\n");
  open_chunks(s, n);
  h3_strbuf_append(s, "        float v[8];\n        h3_wbf8(xr[j], v);\n    ");
  emit_rms_accum(s, 8, "v", !n->exact);
  h3_strbuf_append(s, close_chunks);
  emit_rms_finish(s, n->block, n->H, n->eps, !n->exact);
  emit_modulate_pass(s, n, true);
}

/* The row with 16-byte accesses (every base pointer is aligned, so every row is: H % 8 ==
 * 0): all of the thread's DRAM loads are issued first and x (Plan B: residual') stays in
 * registers, as bf16, from its load to the modulate. */
static void emit_vector_row(h3_strbuf *s, const nm_shape *n) {
  const long long C = (long long)n->chunks;
  h3_strbuf_printf(s, "  {\n    __align__(16) h3_bf16 xr[%lld][8]", C);
  if (n->plan_b) h3_strbuf_printf(s, ";\n    __align__(16) %s ur[%lld][8]", n->acc ? "int" : "h3_bf16", C);
  h3_strbuf_append(s, ";\n");
  emit_quant_decl(s, n);
  open_chunks(s, n);
  if (n->plan_b)
    h3_strbuf_append(s, "        h3_ldr8<true>(res, u * 8, xr[j]);\n"
                        "        h3_ldr8<true>(upd, u * 8, ur[j]);\n");
  else
    h3_strbuf_append(s, "        h3_ldr8<true>(x, u * 8, xr[j]);\n");
  h3_strbuf_append(s, close_chunks);
  if (n->plan_b) {
    /* U3 in registers, then the stores of residual' (which may overwrite the residual:
       every load of it came first). The gate's chunk (a table row: L1 / L2) is loaded here,
       not with the DRAM loads above: its address needs idx[row], and with it there the
       residual's loads waited for that load's latency (and 12 more registers stayed live) */
    open_chunks(s, n);
    h3_strbuf_append(s, "        __align__(16) h3_bf16 gr[8];\n        h3_ldr8<true>(gate, u * 8, gr);\n");
    if (n->acc) /* s_w's columns (L2-resident: one [H] row for every row of the GEMM) */
      h3_strbuf_append(s, "        __align__(16) float w8[8];\n        h3_ldr8<true>(in8, u * 8, w8);\n");
    emit_u3(s, n, "xr[j]", "ur[j]", "gr");
    h3_strbuf_append(s, "        h3_str8<true>(xo, u * 8, xr[j]);\n");
    h3_strbuf_append(s, close_chunks);
  }
  emit_norm_modulate_regs(s, n);
}

/* The staged row's loads, right after the row's guard and before its pointers (so that they
 * issue first): every chunk of the residual and the update into st = [residual row | update
 * row], 16 bytes per cp.async, one batch per thread. */
static void emit_staged_loads(h3_strbuf *s, const nm_shape *n) {
  const long long U = (long long)n->units;
  h3_strbuf_printf(s, "  __shared__ uint4 st[%lld];\n", 2 * U);
  open_chunks(s, n);
  h3_strbuf_printf(s, "        h3_cp16(&st[u], res + u * 8);\n        h3_cp16(&st[%lld + u], upd + u * 8);\n", U);
  h3_strbuf_append(s, close_chunks);
  h3_strbuf_append(s, "  h3_cp_commit();\n");
}

/* The staged row after its pointers: each thread waits for its own copies, reads its chunks
 * back (no barrier: only what it copied), forms residual' with the gate's chunk (L1 / L2)
 * and stores it, then the norm and the modulate as the vector row (residual' in registers). */
static void emit_staged_row(h3_strbuf *s, const nm_shape *n) {
  h3_strbuf_printf(s, "  {\n    __align__(16) h3_bf16 xr[%lld][8];\n    h3_cp_wait();\n",
                   (long long)n->chunks);
  open_chunks(s, n);
  h3_strbuf_printf(s, "        __align__(16) h3_bf16 gr[8], ur[8];\n"
                      "        *reinterpret_cast<uint4 *>(xr[j]) = st[u];\n"
                      "        *reinterpret_cast<uint4 *>(ur) = st[%lld + u];\n"
                      "        h3_ldr8<true>(gate, u * 8, gr);\n", (long long)n->units);
  emit_u3(s, n, "xr[j]", "ur", "gr");
  h3_strbuf_append(s, "        h3_str8<true>(xo, u * 8, xr[j]);\n");
  h3_strbuf_append(s, close_chunks);
  emit_norm_modulate_regs(s, n);
}

/* The row element by element (some base pointer is not 16-byte aligned): the same
 * arithmetic in the same order as the vector path, but x (Plan B: residual', stored first
 * and read back by the thread that wrote it) is loaded again for the modulate, so few
 * registers stay live and the kernel keeps the vector path's occupancy. */
static void emit_scalar_row(h3_strbuf *s, const nm_shape *n) {
  h3_strbuf_printf(s, "  {\n    %sh3_bf16 *xs = %s;\n", n->plan_b ? "" : "const ",
                   n->plan_b ? "xo" : "x");
  h3_strbuf_append(s, "    float ss = 0.0f;\n");
  emit_quant_decl(s, n);
  open_chunks(s, n);
  h3_strbuf_append(s, "        __align__(16) h3_bf16 xr[8];\n        float v[8];\n");
  if (n->plan_b) {
    h3_strbuf_printf(s, "        __align__(16) h3_bf16 gr[8];\n        __align__(16) %s ur[8];\n"
                        "        h3_ldr8<false>(res, u * 8, xr);\n", n->acc ? "int" : "h3_bf16");
    emit_load_update(s, n, "ur", "false");
    h3_strbuf_append(s, "        h3_ldr8<false>(gate, u * 8, gr);\n");
    emit_u3(s, n, "xr", "ur", "gr");
    h3_strbuf_append(s, "        h3_str8<false>(xs, u * 8, xr);\n");
  } else
    h3_strbuf_append(s, "        h3_ldr8<false>(xs, u * 8, xr);\n");
  h3_strbuf_append(s, "        h3_wbf8(xr, v);\n    ");
  emit_rms_accum(s, 8, "v", !n->exact);
  h3_strbuf_append(s, close_chunks);
  emit_rms_finish(s, n->block, n->H, n->eps, !n->exact);
  emit_modulate_pass(s, n, false);
}

/* The kernel's head, or (elem) `static __device__ __noinline__ void @K@_elem(` with the same
 * parameters: the element-by-element row kept out of the kernel's own code, so that the
 * vector row is scheduled as if it were alone (its 16-byte loads issue first; with both rows
 * inline they waited behind the alignment branch: 178.6 against 170.5 us at [32768, 5376] on
 * the H200, dev/perf-memory-kernels.md). Every pointer is __restrict__ but Plan B's in0
 * (residual) and out0 (residual'), which may be one buffer; nothing else aliases them. */
static void emit_head(emit_ctx *ec, const nm_shape *n, int n_in, const h3_type *in, int n_out,
                      const h3_type *out, bool elem) {
  h3_strbuf *s = &ec->src;
  if (elem)
    h3_strbuf_append(s, "static __device__ __noinline__ void @K@_elem(");
  else if (n->min_blocks)
    h3_strbuf_printf(s, "extern \"C\" __global__ void __launch_bounds__(%d, %d) @K@(", n->block,
                     n->min_blocks);
  else
    h3_strbuf_printf(s, "extern \"C\" __global__ void __launch_bounds__(%d) @K@(", n->block);
  for (int i = 0; i < n_in; i++)
    h3_strbuf_printf(s, "%sconst %s *%s in%d", i ? ", " : "", h3_kernel_ctype(in[i].dtype),
                     n->plan_b && i == 0 ? "" : " __restrict__", i);
  for (int i = 0; i < n_out; i++)
    h3_strbuf_printf(s, ", %s *%s out%d", h3_kernel_ctype(out[i].dtype),
                     n->plan_b && i == 0 ? "" : " __restrict__", i);
  h3_strbuf_append(s, ") {\n");
}

/* The row's shared arrays, guard, thread and (Plan B) residual and update rows (the kernel
 * and @K@_elem each declare them). */
static void emit_row_start(h3_strbuf *s, const nm_shape *n, int64_t T) {
  const long long H = (long long)n->H;
  h3_strbuf_printf(s, "  __shared__ float part[%d];\n", n->block / 32);
  if (n->quant && n->block > 32) h3_strbuf_printf(s, "  __shared__ float qpart[%d];\n", n->block / 32);
  h3_strbuf_printf(s, "  const long long row = blockIdx.x;\n  if (row >= %lldll) return;\n"
                      "  const int tid = threadIdx.x;\n", (long long)T);
  if (n->plan_b)
    h3_strbuf_printf(s, "  const h3_bf16 *res = in0 + row * %lldll;\n  const %s *upd = in1 + row * %lldll;\n",
                     H, n->acc ? "int" : "h3_bf16", H);
}

/* The row's table rows (g = clamp(idx[row])) and data pointers. */
static void emit_row_pointers(h3_strbuf *s, const nm_shape *n, int64_t G) {
  const int first = n->first, yout = n->plan_b ? 1 : 0;
  const long long H = (long long)n->H;
  h3_strbuf_printf(s, "  const int g = h3_clampi(in%d[row], %lld);\n", first + 3, (long long)G);
  h3_strbuf_printf(s, "  const h3_bf16 *scr = in%d + g * %lldll, *shr = in%d + g * %lldll;\n",
                   first + 1, H, first + 2, H);
  h3_strbuf_printf(s, "  h3_bf16 *y = out%d + row * %lldll;\n", yout, H);
  if (n->quant)
    h3_strbuf_printf(s, "  signed char *qo = out%d + row * %lldll;\n  float *so = out%d;\n",
                     yout + 1, H, yout + 2);
  if (n->plan_b) {
    h3_strbuf_printf(s, "  const int gq = h3_clampi(in%d[row], %lld);\n", first + 3,
                     (long long)n->gate_rows);
    h3_strbuf_printf(s, "  const h3_bf16 *gate = in2 + gq * %lldll;\n  h3_bf16 *xo = out0 + row * %lldll;\n",
                     H, H);
    if (n->acc) h3_strbuf_append(s, "  const float sxv = h3_ld(in7, row);\n");
  } else {
    h3_strbuf_printf(s, "  const h3_bf16 *x = in0 + row * %lldll;\n", H);
  }
}

h3_status emit_normmod(emit_ctx *ec) {
  const h3_op *op = ec->op;
  h3_strbuf *s = &ec->src;
  const bool plan_b = op->code == H3_OP_RESIDUAL_NORM_MODULATE;
  const int first = plan_b ? 3 : 1; /* operand index of gamma */
  const bool quant = h3_op_attr_int(op, "quantize", 0) != 0;
  const bool acc = plan_b && op->n_operands == 9 && op->operands[1]->type.dtype == H3_I32;
  const int n_in = plan_b ? (acc ? 9 : 7) : 5, yout = plan_b ? 1 : 0, n_out = yout + 1 + (quant ? 2 : 0);
  const h3_type *xt = &op->operands[0]->type;
  if (xt->rank != 2 || xt->dtype != H3_BF16 || op->n_operands != n_in || op->n_results != n_out)
    return emit_unsupported(ec, "x must be bf16[T, H]");
  if (acc && (op->operands[7]->type.dtype != H3_F32 || op->operands[8]->type.dtype != H3_F32))
    return emit_unsupported(ec, "an i32 update needs s_x f32[T] and s_w f32[H]");
  if (quant && (op->results[yout + 1]->type.dtype != H3_I8 || op->results[yout + 2]->type.dtype != H3_F32))
    return emit_unsupported(ec, "quantize = 1 needs results q i8[T, H] and s f32[T]");
  const int64_t T = xt->dims[0], H = xt->dims[1];
  if (H < 8 || H % 8 != 0)
    return emit_unsupported(ec, "H must be a positive multiple of 8 (the pass keeps other rows "
                                "as the unfused chain)");
  const int64_t G = op->operands[first + 1]->type.dims[0];
  const int64_t gate_rows = plan_b ? op->operands[2]->type.dims[0] : 0;
  if (T >= ((int64_t)1 << 31) || H >= ((int64_t)1 << 31) || G >= ((int64_t)1 << 31) ||
      gate_rows >= ((int64_t)1 << 31)) /* the row and table indices are int */
    return emit_unsupported(ec, "more than 2^31 rows or columns");
  nm_shape n;
  n.plan_b = plan_b;
  n.acc = acc;
  n.exact = ec->exact;
  n.mod_f32 = strcmp(h3_op_attr_string(op, "modulate", "bf16"), "f32") == 0;
  n.quant = quant;
  n.store_y = !quant || op->results[yout]->uses > 0;
  n.first = first;
  n.units = H / 8;
  if (n.exact) { /* rms_norm's block: its sum order */
    n.block = emit_row_block(n.units, 256);
    n.chunks = (n.units + n.block - 1) / n.block;
  } else { /* as few chunks per thread as 256 threads allow, as many for every thread where
              units divides evenly (else the last threads hold one chunk fewer) */
    n.chunks = (n.units + 255) / 256;
    n.block = emit_row_block((n.units + n.chunks - 1) / n.chunks, 256);
  }
  n.staged = plan_b && !n.exact && !quant && !acc && n.block * n.chunks == n.units &&
             H <= NM_STAGED_MAX_H;
  n.min_blocks = 0;
  if (n.staged) { /* NM_STAGED_REG_BUDGET, at most the SM's threads / blocks */
    n.min_blocks = 65536 / (NM_STAGED_REG_BUDGET * n.block);
    if (n.min_blocks > 2048 / n.block) n.min_blocks = 2048 / n.block;
    if (n.min_blocks > 32) n.min_blocks = 32;
  }
  n.H = H;
  n.gate_rows = gate_rows;
  n.eps = h3_op_attr_float(op, "eps", 1e-5);
  h3_type in_t[9], out_t[4];
  for (int i = 0; i < n_in; i++) in_t[i] = op->operands[i]->type;
  for (int i = 0; i < n_out; i++) out_t[i] = op->results[i]->type;
  h3_strbuf off;
  h3_strbuf_init(&off);
  const double offset = h3_op_attr_float(op, "offset", 0.0);
  emit_literal(&off, H3_F32, offset, false);
  n.off = off.data ? off.data : "0";
  n.off_zero = (float)offset == 0.0f;
  /* the element-by-element row, out of line: @K@_elem */
  emit_head(ec, &n, n_in, in_t, n_out, out_t, true);
  emit_row_start(s, &n, T);
  emit_row_pointers(s, &n, G);
  emit_scalar_row(s, &n);
  h3_strbuf_append(s, "}\n\n");
  /* the kernel: one alignment test (every row offset, row * H and g * H elements, is then
     a multiple of 16 bytes), the call when it fails, else the vector row */
  emit_head(ec, &n, n_in, in_t, n_out, out_t, false);
  h3_strbuf_append(s, "  if (!(h3_al8(in0) && h3_al8(out0)");
  for (int i = 1; i <= first + 2; i++) h3_strbuf_printf(s, " && h3_al8(in%d)", i);
  if (acc) h3_strbuf_append(s, " && h3_al8(in8)");
  if (plan_b) h3_strbuf_append(s, " && h3_al8(out1)");
  if (quant) h3_strbuf_printf(s, " && h3_al8(out%d)", yout + 1); /* 8-byte code stores */
  h3_strbuf_append(s, ")) {\n    @K@_elem(");
  for (int i = 0; i < n_in; i++) h3_strbuf_printf(s, "%sin%d", i ? ", " : "", i);
  for (int i = 0; i < n_out; i++) h3_strbuf_printf(s, ", out%d", i);
  h3_strbuf_append(s, ");\n    return;\n  }\n");
  emit_row_start(s, &n, T);
  if (n.staged) emit_staged_loads(s, &n);
  emit_row_pointers(s, &n, G);
  if (n.staged)
    emit_staged_row(s, &n);
  else
    emit_vector_row(s, &n);
  h3_strbuf_append(s, "}\n");
  bool oom = off.oom;
  h3_strbuf_free(&off);
  if (oom) return H3_ERR;
  ec->k->grid[0] = T > 0 ? T : 1;
  ec->k->grid[1] = ec->k->grid[2] = 1;
  ec->k->block[0] = n.block;
  ec->k->block[1] = ec->k->block[2] = 1;
  ec->k->shared_bytes = 0;
  return emit_args(ec, n_in, n_out, false);
}
