/* emit_move.c: kernels that move rows of bytes: concat, pad, slice (when it is not a
 * contiguous view), set_index, scatter_rows and kv_write.
 *
 * Each op is seen as rows of bytes ([outer, axis * inner] for the axis ops, [N, row] for the
 * row writers) and copied in units of U bytes, U the largest power of two <= 16 dividing
 * every row length and offset involved (16 -> uint4 vector accesses). When a pointer is
 * not U-aligned at run time (a view at an odd offset) the same loop runs on bytes. Indices
 * are 64-bit: KV caches exceed 2^31 bytes.
 *   set_index: out[i + offset] = v; scatter_rows / kv_write: out[idx[t]] = v[t]. These are
 *   in place (operand 0 is copied into result 0 by the runtime first when their buffers
 *   differ); a row index outside [0, N) writes nothing; when several t name the same row
 *   the last one wins (each block checks the later indices), so results are deterministic.
 *   pad: the copied part moves in units, the `after` entries are filled element by element.
 */
#include "emit_internal.h"

#include <string.h>

static int unit_for(const int64_t *bytes, int n) {
  int u = 16;
  for (int i = 0; i < n; i++)
    while (u > 1 && bytes[i] % u != 0) u /= 2;
  return u;
}

static const char *unit_type(int u) {
  switch (u) {
  case 16: return "uint4";
  case 8: return "uint2";
  case 4: return "unsigned int";
  case 2: return "unsigned short";
  default: return "unsigned char";
  }
}

typedef void (*body_fn)(h3_strbuf *s, const emit_ctx *ec, int u, const int64_t *p);

/* Emits body(U) guarded by an alignment check of out0 and the inputs in0..in<n_in-1>
 * (`only` >= 0: just in<only>), with body(1) as the fallback. */
static void aligned_or_bytes(h3_strbuf *s, const emit_ctx *ec, int u, int n_in, int only,
                             body_fn body, const int64_t *p) {
  if (u == 1) {
    body(s, ec, 1, p);
    return;
  }
  h3_strbuf_append(s, "  if (((unsigned long long)out0");
  for (int i = 0; i < n_in; i++)
    if (only < 0 || i == only) h3_strbuf_printf(s, " | (unsigned long long)in%d", i);
  h3_strbuf_printf(s, ") & %d) {\n", u - 1);
  body(s, ec, 1, p);
  h3_strbuf_append(s, "  } else {\n");
  body(s, ec, u, p);
  h3_strbuf_append(s, "  }\n");
}

#define GRID_LOOP(var, total)                                                             \
  "    for (long long " var " = (long long)blockIdx.x * blockDim.x + threadIdx.x; " var    \
  " < " total "; " var " += (long long)gridDim.x * blockDim.x) {\n"

/* ---- concat: p = [n_in, outer, row bytes of each input...] ---- */
static void concat_body(h3_strbuf *s, const emit_ctx *ec, int u, const int64_t *p) {
  (void)ec;
  int n = (int)p[0];
  int64_t outer = p[1], total_row = 0;
  for (int i = 0; i < n; i++) total_row += p[2 + i] / u;
  const char *ut = unit_type(u);
  h3_strbuf_printf(s, "    %s *d = reinterpret_cast<%s *>(out0);\n", ut, ut);
  h3_strbuf_printf(s, "    const long long total = %lldll;\n", (long long)(outer * total_row));
  h3_strbuf_append(s, GRID_LOOP("t", "total"));
  h3_strbuf_printf(s, "      const long long row = t / %lldll, col = t %% %lldll;\n",
                   (long long)total_row, (long long)total_row);
  int64_t start = 0;
  for (int i = 0; i < n; i++) {
    int64_t w = p[2 + i] / u;
    if (i < n - 1) h3_strbuf_printf(s, "      %sif (col < %lldll) ", i ? "else " : "", (long long)(start + w));
    else h3_strbuf_append(s, n > 1 ? "      else " : "      ");
    h3_strbuf_printf(s, "d[t] = reinterpret_cast<const %s *>(in%d)[row * %lldll + (col - %lldll)];\n",
                     ut, i, (long long)w, (long long)start);
    start += w;
  }
  h3_strbuf_append(s, "    }\n");
}

/* ---- slice: p = [outer, src row bytes, dst row bytes, start offset bytes] ---- */
static void slice_body(h3_strbuf *s, const emit_ctx *ec, int u, const int64_t *p) {
  (void)ec;
  const char *ut = unit_type(u);
  h3_strbuf_printf(s, "    %s *d = reinterpret_cast<%s *>(out0);\n", ut, ut);
  h3_strbuf_printf(s, "    const %s *x = reinterpret_cast<const %s *>(in0);\n", ut, ut);
  h3_strbuf_printf(s, "    const long long total = %lldll;\n", (long long)(p[0] * (p[2] / u)));
  h3_strbuf_append(s, GRID_LOOP("t", "total"));
  h3_strbuf_printf(s, "      d[t] = x[(t / %lldll) * %lldll + %lldll + t %% %lldll];\n    }\n",
                   (long long)(p[2] / u), (long long)(p[1] / u), (long long)(p[3] / u),
                   (long long)(p[2] / u));
}

/* ---- pad copy part: p = [outer, src row bytes, dst row bytes] ---- */
static void pad_body(h3_strbuf *s, const emit_ctx *ec, int u, const int64_t *p) {
  (void)ec;
  const char *ut = unit_type(u);
  h3_strbuf_printf(s, "    %s *d = reinterpret_cast<%s *>(out0);\n", ut, ut);
  h3_strbuf_printf(s, "    const %s *x = reinterpret_cast<const %s *>(in0);\n", ut, ut);
  h3_strbuf_printf(s, "    const long long total = %lldll;\n", (long long)(p[0] * (p[1] / u)));
  h3_strbuf_append(s, GRID_LOOP("t", "total"));
  h3_strbuf_printf(s, "      d[(t / %lldll) * %lldll + t %% %lldll] = x[t];\n    }\n",
                   (long long)(p[1] / u), (long long)(p[2] / u), (long long)(p[1] / u));
}

/* ---- set_index: p = [N, row bytes, offset]; in0 = x, in1 = i, in2 = v ---- */
static void set_index_body(h3_strbuf *s, const emit_ctx *ec, int u, const int64_t *p) {
  (void)ec;
  const char *ut = unit_type(u);
  h3_strbuf_printf(s, "    const long long r = (long long)h3_ld(in1, 0) + %lldll;\n", (long long)p[2]);
  h3_strbuf_printf(s, "    if (r < 0 || r >= %lldll) return;\n", (long long)p[0]);
  h3_strbuf_printf(s, "    %s *d = reinterpret_cast<%s *>(out0) + r * %lldll;\n", ut, ut, (long long)(p[1] / u));
  h3_strbuf_printf(s, "    const %s *v = reinterpret_cast<const %s *>(in2);\n", ut, ut);
  h3_strbuf_printf(s, "    const long long total = %lldll;\n", (long long)(p[1] / u));
  h3_strbuf_append(s, GRID_LOOP("t", "total"));
  h3_strbuf_append(s, "      d[t] = v[t];\n    }\n");
}

/* ---- scatter rows: p = [N, row bytes, T, src operand, idx operand, block] ---- */
static void scatter_body(h3_strbuf *s, const emit_ctx *ec, int u, const int64_t *p) {
  (void)ec;
  const char *ut = unit_type(u);
  long long ru = (long long)(p[1] / u);
  h3_strbuf_printf(s, "    %s *d = reinterpret_cast<%s *>(out0) + r * %lldll;\n", ut, ut, ru);
  h3_strbuf_printf(s, "    const %s *v = reinterpret_cast<const %s *>(in%d) + t * %lldll;\n", ut, ut,
                   (int)p[3], ru);
  h3_strbuf_printf(s, "    for (long long c = threadIdx.x; c < %lldll; c += %d) d[c] = v[c];\n", ru,
                   (int)p[5]);
}

static int64_t prod(const h3_type *t, int from, int to) {
  int64_t n = 1;
  for (int i = from; i < to; i++) n *= t->dims[i];
  return n;
}

static h3_status norm_axis(emit_ctx *ec, const h3_type *t, int64_t *axis) {
  int64_t a = h3_op_attr_int(ec->op, "axis", 0);
  if (a < 0) a += t->rank;
  if (a < 0 || a >= t->rank) return emit_unsupported(ec, "axis out of range");
  *axis = a;
  return H3_OK;
}

h3_status emit_move(emit_ctx *ec) {
  const h3_op *op = ec->op;
  h3_strbuf *s = &ec->src;
  int n_in = op->n_operands;
  h3_type in_t[H3_KERNEL_MAX_ARGS];
  if (n_in > H3_KERNEL_MAX_ARGS - 2) {
    h3_diag_error(ec->d, op->span, "concatenate in groups: concat(concat(a, b, ..), concat(..), ..)",
                  "codegen: '%s' of %d operands; one kernel takes at most %d", ec->opname, n_in,
                  H3_KERNEL_MAX_ARGS - 2);
    return H3_ERR;
  }
  for (int i = 0; i < n_in; i++) in_t[i] = op->operands[i]->type;
  h3_type out_t = op->results[0]->type;
  size_t es = h3_dtype_size(out_t.dtype);
  bool inplace = op->code == H3_OP_SET_INDEX || op->code == H3_OP_SCATTER_ROWS ||
                 op->code == H3_OP_KV_WRITE;
  int block = EMIT_BLOCK;
  int64_t p[H3_KERNEL_MAX_ARGS + 4];
  int64_t work;
  ec->k->inplace = inplace;

  if (op->code == H3_OP_SCATTER_ROWS || op->code == H3_OP_KV_WRITE) {
    /* scatter_rows(x[N, ..], idx[T], v[T, ..]); kv_write(cache[P, page, ..], x[T, ..], slot[T]) */
    bool kv = op->code == H3_OP_KV_WRITE;
    const h3_type *x = &in_t[0];
    int lead = kv ? 2 : 1;
    if (x->rank < lead) return emit_unsupported(ec, "the destination has too few dims");
    int src = kv ? 1 : 2, idx = kv ? 2 : 1;
    int64_t rows = prod(x, 0, lead), row_bytes = prod(x, lead, x->rank) * (int64_t)es;
    int64_t t_rows = in_t[idx].rank ? in_t[idx].dims[0] : 1;
    int u = unit_for(&row_bytes, 1);
    int64_t ru = row_bytes / u;
    block = (int)((ru + 31) / 32 * 32);
    if (block < 32) block = 32;
    if (block > 256) block = 256;
    p[0] = rows, p[1] = row_bytes, p[2] = t_rows, p[3] = src, p[4] = idx, p[5] = block;
    emit_signature(ec, n_in, in_t, 1, &out_t, NULL, block, false);
    h3_strbuf_append(s, "  __shared__ int later;\n");
    h3_strbuf_printf(s, "  const long long t = blockIdx.x;\n  if (t >= %lldll) return;\n", (long long)t_rows);
    h3_strbuf_printf(s, "  const long long r = (long long)h3_ld(in%d, t);\n", idx);
    h3_strbuf_printf(s, "  if (r < 0 || r >= %lldll) return;\n", (long long)rows);
    h3_strbuf_append(s, "  if (threadIdx.x == 0) later = 0;\n  __syncthreads();\n");
    h3_strbuf_printf(s, "  for (long long t2 = t + 1 + threadIdx.x; t2 < %lldll; t2 += %d)\n"
                        "    if ((long long)h3_ld(in%d, t2) == r) later = 1;\n",
                     (long long)t_rows, block, idx);
    h3_strbuf_append(s, "  __syncthreads();\n  if (later) return;\n");
    aligned_or_bytes(s, ec, u, n_in, src, scatter_body, p);
    h3_strbuf_append(s, "}\n");
    ec->k->grid[0] = t_rows > 0 ? t_rows : 1;
    ec->k->grid[1] = ec->k->grid[2] = 1;
    ec->k->block[0] = block;
    ec->k->block[1] = ec->k->block[2] = 1;
    return emit_args(ec, n_in, 1, false);
  }

  emit_signature(ec, n_in, in_t, 1, &out_t, NULL, block, !inplace);
  if (op->code == H3_OP_CONCAT) {
    int64_t axis = 0;
    if (norm_axis(ec, &out_t, &axis) != H3_OK) return H3_ERR;
    int64_t inner = prod(&out_t, (int)axis + 1, out_t.rank) * (int64_t)es;
    p[0] = n_in, p[1] = prod(&out_t, 0, (int)axis);
    for (int i = 0; i < n_in; i++) p[2 + i] = in_t[i].dims[axis] * inner;
    int u = unit_for(p + 2, n_in);
    aligned_or_bytes(s, ec, u, n_in, -1, concat_body, p);
    work = h3_type_bytes(&out_t) / u;
  } else if (op->code == H3_OP_SLICE) {
    int64_t axis = 0;
    if (norm_axis(ec, &in_t[0], &axis) != H3_OK) return H3_ERR;
    int64_t inner = prod(&in_t[0], (int)axis + 1, in_t[0].rank) * (int64_t)es;
    p[0] = prod(&in_t[0], 0, (int)axis), p[1] = in_t[0].dims[axis] * inner;
    p[2] = out_t.dims[axis] * inner, p[3] = h3_op_attr_int(op, "start", 0) * inner;
    int u = unit_for(p + 1, 3);
    aligned_or_bytes(s, ec, u, 1, -1, slice_body, p);
    work = h3_type_bytes(&out_t) / u;
  } else if (op->code == H3_OP_PAD) {
    int64_t axis = 0;
    if (norm_axis(ec, &in_t[0], &axis) != H3_OK) return H3_ERR;
    int64_t inner_el = prod(&in_t[0], (int)axis + 1, in_t[0].rank);
    int64_t a = in_t[0].dims[axis], after = out_t.dims[axis] - a;
    p[0] = prod(&in_t[0], 0, (int)axis), p[1] = a * inner_el * (int64_t)es;
    p[2] = (a + after) * inner_el * (int64_t)es;
    int u = unit_for(p + 1, 2);
    aligned_or_bytes(s, ec, u, 1, -1, pad_body, p);
    h3_strbuf fill;
    h3_strbuf_init(&fill);
    emit_literal(&fill, out_t.dtype, h3_op_attr_float(op, "value", 0.0), false);
    h3_strbuf_printf(s, "  const long long nfill = %lldll;\n", (long long)(p[0] * after * inner_el));
    h3_strbuf_append(s, GRID_LOOP("e", "nfill"));
    h3_strbuf_printf(s, "      h3_st(out0, (e / %lldll) * %lldll + %lldll + e %% %lldll, (%s)%s);\n    }\n",
                     (long long)(after * inner_el), (long long)((a + after) * inner_el),
                     (long long)(a * inner_el), (long long)(after * inner_el),
                     emit_comptype(out_t.dtype), fill.data ? fill.data : "0");
    h3_strbuf_free(&fill);
    work = h3_type_bytes(&in_t[0]) / u;
    if (p[0] * after * inner_el > work) work = p[0] * after * inner_el;
  } else { /* set_index(x[N, ..], i, v[..]) */
    if (in_t[0].rank < 1) return emit_unsupported(ec, "set_index needs a tensor with rows");
    p[0] = in_t[0].dims[0], p[1] = prod(&in_t[0], 1, in_t[0].rank) * (int64_t)es;
    p[2] = h3_op_attr_int(op, "offset", 0);
    int u = unit_for(p + 1, 1);
    aligned_or_bytes(s, ec, u, n_in, 2, set_index_body, p);
    work = p[1] / u;
  }
  h3_strbuf_append(s, "}\n");
  emit_launch_1d(ec, work, block);
  return emit_args(ec, n_in, 1, false);
}
