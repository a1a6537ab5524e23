/* emit_norm_rope_sage.c: the sage_quant = 1 form of rms_norm_rope's kernel (ops.def; made by
 * sage-q-fusion): the rows of emit_norm_rope.c, cut into sage_attention's Q blocks, and their
 * int8 codes and deltas (results 1 and 2, include/h3/sage.h's padded layout) beside y.
 *
 * Layout: one block of 256 threads per (64-row block of the padded rows, head): grid (P / 64,
 * heads). Block x belongs to the segment whose padded rows hold it (a chain of compile-time
 * comparisons over the op's segments); it covers rows r0 .. r0 + 63 of that segment. The
 * threads form groups of LANES lanes as in emit_norm_rope.c, 256 / LANES rows a pass, and
 * LANES / 4 passes cover the 64 rows; each pass runs emit_norm_rope.c's row code on row
 * (s0 + r, head) (a row past the segment's len works on its last row and stores nothing, so
 * every lane reaches every shuffle) and keeps the bf16 values it stores, qv[pass][k] (0 for
 * rows past len and lanes past the row's chunks). Then the block's amax: fmaxf over the
 * thread's values, a warp xor butterfly, the 8 warps' partials through shared memory (fmaxf is
 * order-free: the same value as sage_quant.cu's reduction and the CPU's loop); the delta and
 * codes by the prelude's h3_sage_delta / h3_sage_code, the functions h3cu_sage_quant applies
 * (the CPU rule's operations, runtime/cpu/ops_sage_q.c) on the same bf16 values, so the codes
 * and deltas are theirs bit for bit. Every row of the padded block
 * gets its codes (zeros past len), thread 0 its delta.
 */
#include "emit_internal.h"

#include "h3/sage.h"

enum { SAGE_Q_THREADS = 256 }; /* a block: emit_norm_rope.c's 256 threads */

/* The segment of block x (bx): blk (the block within the segment), s0, len, lp and pad
 * (P_i, the padded rows before it), as constants of the op's segments. */
static void segment_lookup(h3_strbuf *s, const h3_op *op, int64_t T) {
  const h3_attr *seg = h3_op_attr(op, "segments");
  int64_t lo = 0, hi = 0, pad = 0;
  int i = 0;
  h3_strbuf_append(s, "  const unsigned bx = blockIdx.x, hd = blockIdx.y;\n");
  for (int n = 0; h3_sage_next_segment(seg, T, &i, &lo, &hi); n++) {
    const int64_t lp = h3_sage_padded(hi - lo);
    if (n == 0)
      h3_strbuf_printf(s, "  unsigned blk = bx;\n  long long s0 = 0, len = %lldll, lp = %lldll, pad = 0;\n",
                       (long long)hi, (long long)lp);
    else
      h3_strbuf_printf(s, "  if (bx >= %lldu) { blk = bx - %lldu; s0 = %lldll; len = %lldll; lp = %lldll; "
                          "pad = %lldll; }\n",
                       (long long)(pad / H3_SAGE_QBLOCK), (long long)(pad / H3_SAGE_QBLOCK), (long long)lo,
                       (long long)(hi - lo), (long long)lp, (long long)pad);
    pad += lp;
  }
  if (pad == 0) /* T = 0: no segment (the kernel returned already) */
    h3_strbuf_append(s, "  unsigned blk = bx;\n  long long s0 = 0, len = 1, lp = 128, pad = 0;\n");
}

void emit_sage_q_open(h3_strbuf *s, const h3_op *op, int lanes, int vec, int64_t T, int64_t H) {
  const int rpp = SAGE_Q_THREADS / lanes, passes = H3_SAGE_QBLOCK / rpp;
  segment_lookup(s, op, T);
  h3_strbuf_printf(s, "  const int lane = threadIdx.x & %d;\n"
                      "  float qv[%d][%d], amax = 0.0f;\n"
                      "#pragma unroll\n  for (int pass = 0; pass < %d; pass++) {\n"
                      "  const long long rs = (long long)blk * %d + pass * %d + threadIdx.x / %d;\n"
                      "  const bool live = rs < len;\n"
                      "  const unsigned t = (unsigned)(s0 + (live ? rs : len - 1));\n"
                      "  const unsigned row = t * %lldu + hd;\n",
                   lanes - 1, passes, vec, passes, H3_SAGE_QBLOCK, rpp, lanes, (long long)H);
}

void emit_sage_q_close(emit_ctx *ec, int lanes, int vec, int64_t units, int64_t H, int64_t D) {
  h3_strbuf *s = &ec->src;
  const int rpp = SAGE_Q_THREADS / lanes, passes = H3_SAGE_QBLOCK / rpp;
  /* the stored bf16 values of the pass (0 where nothing is stored), then the pass ends */
  h3_strbuf_printf(s, "#pragma unroll\n  for (int k = 0; k < %d; k++) {\n"
                      "    qv[pass][k] = store && lane < %lld ? h3_rbf16(o[k]) : 0.0f;\n"
                      "    amax = fmaxf(amax, fabsf(qv[pass][k]));\n  }\n  }\n",
                   vec, (long long)units);
  h3_strbuf_printf(s, "  __shared__ float qpart[%d];\n"
                      "#pragma unroll\n  for (int o = 16; o > 0; o >>= 1) "
                      "amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));\n"
                      "  if ((threadIdx.x & 31) == 0) qpart[threadIdx.x >> 5] = amax;\n"
                      "  __syncthreads();\n"
                      "#pragma unroll\n  for (int w = 0; w < %d; w++) amax = fmaxf(amax, qpart[w]);\n"
                      "  const float delta = h3_sage_delta(amax);\n",
                   SAGE_Q_THREADS / 32, SAGE_Q_THREADS / 32);
  h3_strbuf_printf(s, "  if (threadIdx.x == 0) out2[%lldll * pad / %d + hd * (lp / %d) + blk] = delta;\n",
                   (long long)H, H3_SAGE_QBLOCK, H3_SAGE_QBLOCK);
  /* every row of the padded block: its codes (rs < lp always: the grid covers lp rows) */
  h3_strbuf_printf(s, "#pragma unroll\n  for (int pass = 0; pass < %d; pass++) {\n"
                      "    const long long rs = (long long)blk * %d + pass * %d + threadIdx.x / %d;\n"
                      "    signed char *dst = out1 + (%lldll * pad + hd * lp + rs) * %lldll + lane * %d;\n"
                      "    __align__(8) signed char c[%d];\n"
                      "#pragma unroll\n    for (int k = 0; k < %d; k++) c[k] = h3_sage_code(qv[pass][k], delta);\n",
                   passes, H3_SAGE_QBLOCK, rpp, lanes, (long long)H, (long long)D, vec, vec, vec);
  if (vec == 8)
    h3_strbuf_printf(s, "    if (lane < %lld)\n"
                        "      *reinterpret_cast<uint2 *>(dst) = *reinterpret_cast<const uint2 *>(c);\n  }\n",
                     (long long)units);
  else
    h3_strbuf_printf(s, "    if (lane < %lld) dst[0] = c[0];\n  }\n", (long long)units);
  const int64_t blocks = h3_sage_q_rows(h3_op_attr(ec->op, "segments"), ec->op->results[0]->type.dims[0]) /
                         H3_SAGE_QBLOCK;
  ec->k->grid[0] = blocks > 0 ? blocks : 1;
  ec->k->grid[1] = H;
  ec->k->grid[2] = 1;
}
