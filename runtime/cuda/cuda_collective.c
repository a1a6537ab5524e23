/* cuda_collective.c: the ops of a parallel plan (ops.def, "several ranks") on the cuda
 * backend: shard, all_gather, all_to_all and all_reduce, queued on the backend's stream (so
 * a graph call that holds them is captured as a CUDA graph like any other).
 *
 * The data-moving ops copy boxes: a range along one axis of a row-major tensor, whole along
 * the others, is `outer` rows of `width` bytes `pitch` bytes apart: one cudaMemcpy2DAsync
 * to or from a contiguous buffer. shard is such a copy (no communication); all_gather
 * gathers the ranks' contiguous operands (ncclAllGather), straight into the result when the
 * axis is the outermost non-1 one, else into scratch and then box by box into the result;
 * all_to_all packs the N parts of its operand into contiguous chunks, exchanges chunk j with
 * rank j (grouped ncclSend / ncclRecv) and unpacks the received chunks into their boxes.
 * all_reduce sums in fp32 for 16-bit floats (widened into scratch, one ncclAllReduce, one
 * rounding into the result) and natively for f32, f64 and integers: NCCL adds in its own
 * order, not rank order, so the result equals the CPU's rank-order sum only within fp32
 * rounding (bitwise for integers and for one rank).
 *
 * Without a communicator (h3_cuda_join_ranks not called) the backend is the one rank of
 * ranks = 1 and each exchange is a device copy. Scratch: cu_collective_scratch_bytes, owned
 * by the op's record.
 */
#include "cuda_collective.h"
#include "cuda_nccl.h"

typedef struct {
  size_t outer, width, pitch, start; /* bytes, but outer: rows */
} box;

/* The range [off, off + len) along axis of a row-major tensor of type t. */
static box box_of(const h3_type *t, int axis, int64_t off, int64_t len) {
  size_t inner = h3_dtype_size(t->dtype), outer = 1;
  for (int a = axis + 1; a < t->rank; a++) inner *= (size_t)t->dims[a];
  for (int a = 0; a < axis; a++) outer *= (size_t)t->dims[a];
  return (box){outer, (size_t)len * inner, (size_t)t->dims[axis] * inner, (size_t)off * inner};
}

/* dst (contiguous) <- box b of src. */
static h3_status pack(cu_state *s, void *dst, const void *src, box b, h3_diag *d) {
  if (!b.outer || !b.width) return H3_OK;
  CU_CHECK(d, cudaMemcpy2DAsync(dst, b.width, (const char *)src + b.start, b.pitch, b.width, b.outer,
                                cudaMemcpyDeviceToDevice, s->stream), "collective copy");
  return H3_OK;
}

/* box b of dst <- src (contiguous). */
static h3_status unpack(cu_state *s, void *dst, box b, const void *src, h3_diag *d) {
  if (!b.outer || !b.width) return H3_OK;
  CU_CHECK(d, cudaMemcpy2DAsync((char *)dst + b.start, b.pitch, src, b.width, b.width, b.outer,
                                cudaMemcpyDeviceToDevice, s->stream), "collective copy");
  return H3_OK;
}

static h3_status copy(cu_state *s, void *dst, const void *src, size_t bytes, h3_diag *d) {
  if (dst != src && bytes)
    CU_CHECK(d, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s->stream), "collective copy");
  return H3_OK;
}

static int axis_attr(const h3_op *op, const char *name) { return (int)h3_op_attr_int(op, name, 0); }

/* whether all_gather's axis has only 1s outside it: the ranks' parts are contiguous */
static bool gathers_in_place(const h3_op *op) {
  return box_of(&op->operands[0]->type, axis_attr(op, "axis"), 0, 0).outer == 1;
}

static bool is_half(h3_dtype t) { return t == H3_BF16 || t == H3_F16; }

bool cu_collective_supports(const h3_op *op) {
  if (op->code != H3_OP_ALL_REDUCE) return true;
  h3_dtype x = op->operands[0]->type.dtype, y = op->results[0]->type.dtype;
  if (x == y && cu_nccl_reduces(x)) return true;
  return (is_half(x) || x == H3_F32) && (is_half(y) || y == H3_F32);
}

size_t cu_collective_scratch_bytes(const h3_op *op) {
  const h3_type *x = &op->operands[0]->type, *y = &op->results[0]->type;
  switch (op->code) {
  case H3_OP_ALL_GATHER: return gathers_in_place(op) ? 0 : (size_t)h3_type_bytes(y);
  case H3_OP_ALL_TO_ALL: return 2 * (size_t)h3_type_bytes(x); /* packed send, received */
  case H3_OP_ALL_REDUCE:
    return is_half(x->dtype) || is_half(y->dtype) ? (size_t)h3_type_numel(x) * 4 : 0;
  default: return 0;
  }
}

h3_status cu_collective_run(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in,
                            const h3_tensor *out, h3_diag *d) {
  int64_t n = h3_op_attr_int(op, "ranks", 1);
  if (n != s->ranks) {
    char hint[120];
    snprintf(hint, sizeof hint, "run the plan with h3exec --backend cuda --gpus %lld", (long long)n);
    return cu_op_error(d, op, hint, "the plan was compiled for %lld ranks but runs on %d", (long long)n,
                       s->ranks);
  }
  if (cu_collective_scratch_bytes(op) && !scratch)
    return cu_op_error(d, op, NULL, "no scratch (the op was not prepared)");
  const h3_type *xt = &in[0].type, *yt = &out[0].type;
  size_t xb = (size_t)h3_type_bytes(xt);
  cu_mark_busy(s);
  switch (op->code) {
  case H3_OP_SHARD: {
    int axis = axis_attr(op, "axis");
    int64_t len = yt->dims[axis];
    return pack(s, out[0].data, in[0].data, box_of(xt, axis, s->rank * len, len), d);
  }
  case H3_OP_ALL_GATHER: {
    int axis = axis_attr(op, "axis");
    void *recv = gathers_in_place(op) ? out[0].data : scratch;
    h3_status st = s->nccl ? cu_nccl_all_gather(s->nccl, in[0].data, recv, xb, s->stream, d)
                           : copy(s, recv, in[0].data, xb, d);
    for (int64_t j = 0; st == H3_OK && recv != out[0].data && j < n; j++)
      st = unpack(s, out[0].data, box_of(yt, axis, j * xt->dims[axis], xt->dims[axis]),
                  (char *)recv + j * xb, d);
    return st;
  }
  case H3_OP_ALL_TO_ALL: {
    int split = axis_attr(op, "split_axis"), concat = axis_attr(op, "concat_axis");
    int64_t part = xt->dims[split] / n, m = xt->dims[concat];
    size_t chunk = xb / (size_t)n;
    char *send = scratch, *recv = send + xb;
    h3_status st = H3_OK;
    for (int64_t j = 0; st == H3_OK && j < n; j++) /* part j of x, for rank j */
      st = pack(s, send + j * chunk, in[0].data, box_of(xt, split, j * part, part), d);
    if (st == H3_OK)
      st = s->nccl ? cu_nccl_all_to_all(s->nccl, send, recv, chunk, s->stream, d)
                   : copy(s, recv, send, xb, d);
    for (int64_t j = 0; st == H3_OK && j < n; j++) /* rank j's part r, at j along concat */
      st = unpack(s, out[0].data, box_of(yt, concat, j * m, m), recv + j * chunk, d);
    return st;
  }
  case H3_OP_ALL_REDUCE: {
    int64_t count = h3_type_numel(xt);
    bool widen = xt->dtype != yt->dtype || is_half(xt->dtype); /* an fp32 sum, one rounding */
    const void *src = widen && xt->dtype != H3_F32 ? scratch : in[0].data;
    void *dst = widen && yt->dtype != H3_F32 ? scratch : out[0].data;
    h3_dtype t = widen ? H3_F32 : xt->dtype;
    if (src == scratch && cu_convert(s, in[0].data, xt->dtype, scratch, H3_F32, count, d) != H3_OK)
      return H3_ERR;
    h3_status st = s->nccl ? cu_nccl_all_reduce(s->nccl, src, dst, (size_t)count, t, s->stream, d)
                           : copy(s, dst, src, (size_t)count * h3_dtype_size(t), d);
    if (st == H3_OK && dst == scratch) st = cu_convert(s, scratch, H3_F32, out[0].data, yt->dtype, count, d);
    return st;
  }
  default: return cu_op_error(d, op, NULL, "not a collective op");
  }
}
