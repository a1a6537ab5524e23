/* ops_collective.c: CPU reference of the ops of a parallel plan (ops.def, "several ranks"):
 * shard, all_gather, all_to_all and all_reduce, with the ranks as threads of one process
 * sharing an h3_comm (include/h3/comm.h).
 *
 * Every op moves boxes: a box of the source (a range along one axis, whole along the
 * others) is copied to a box of the same shape in the result. The collectives read the
 * peers' operands between h3_comm_exchange and h3_comm_release, so no rank reuses a buffer
 * another still reads. all_reduce adds the peers' values in rank order 0 .. N-1, widened,
 * then rounds once: every rank computes the same bits.
 */
#include "cpu_internal.h"

#include "h3/comm.h"

/* Copies the box `box` (dims of t's rank) from src at offsets so[] into dst at offsets do[];
 * src and dst have t's dtype and their own dims. The last dim runs are memcpy'd. */
static void copy_box(void *dst, const h3_type *dt, const int64_t *doff, const void *src,
                     const h3_type *st, const int64_t *soff, const int64_t *box) {
  int rank = dt->rank;
  size_t es = h3_dtype_size(dt->dtype);
  if (rank == 0) {
    memcpy(dst, src, es);
    return;
  }
  int64_t idx[H3_MAX_RANK] = {0}, runs = 1;
  for (int a = 0; a < rank - 1; a++) runs *= box[a];
  for (int64_t r = 0; r < runs && box[rank - 1] > 0; r++) {
    int64_t di = 0, si = 0;
    for (int a = 0; a < rank; a++) {
      int64_t k = a < rank - 1 ? idx[a] : 0;
      di = di * dt->dims[a] + doff[a] + k;
      si = si * st->dims[a] + soff[a] + k;
    }
    memcpy((char *)dst + di * (int64_t)es, (const char *)src + si * (int64_t)es,
           (size_t)box[rank - 1] * es);
    for (int a = rank - 2; a >= 0; a--) { /* next index of the box, last axis fastest */
      if (++idx[a] < box[a]) break;
      idx[a] = 0;
    }
  }
}

bool h3cpu_ranks_ok(const h3_cpu_ctx *c, const h3_op *op, int64_t *n) {
  *n = h3_op_attr_int(op, "ranks", 1);
  int have = c->comm ? h3_comm_ranks(c->comm) : 1;
  if (*n == have) return true;
  char hint[120];
  snprintf(hint, sizeof hint, "run the plan with h3exec --backend cpu --gpus %lld", (long long)*n);
  h3cpu_error(c, op, hint, "the plan was compiled for %lld ranks but runs on %d", (long long)*n,
              have);
  return false;
}

/* Checks the rank count (*n) and exchanges x with the other ranks: peers[j] is rank j's x
 * until release. False after reporting (wrong rank count, or another rank failed). */
static bool exchange(const h3_cpu_ctx *c, const h3_op *op, const void *x, int64_t *n,
                     const void **peers) {
  if (!h3cpu_ranks_ok(c, op, n)) return false;
  if (!c->comm) {
    peers[0] = x;
    return true;
  }
  if (h3_comm_exchange(c->comm, c->rank, x, peers)) return true;
  h3cpu_error(c, op, "the first error of the failing rank says why", "another rank failed");
  return false;
}

static bool release(const h3_cpu_ctx *c, const h3_op *op) {
  if (!c->comm || h3_comm_release(c->comm, c->rank)) return true;
  h3cpu_error(c, op, "the first error of the failing rank says why", "another rank failed");
  return false;
}

H3_CPU_KERNEL(h3cpu_shard) {
  (void)n_in, (void)n_out;
  int64_t n;
  if (!h3cpu_ranks_ok(c, op, &n)) return H3_ERR;
  int axis = (int)h3_op_attr_int(op, "axis", 0);
  int64_t soff[H3_MAX_RANK] = {0}, doff[H3_MAX_RANK] = {0};
  soff[axis] = c->rank * out[0].type.dims[axis];
  copy_box(out[0].data, &out[0].type, doff, in[0].data, &in[0].type, soff, out[0].type.dims);
  return H3_OK;
}

H3_CPU_KERNEL(h3cpu_all_gather) {
  (void)n_in, (void)n_out;
  int64_t n;
  const void *peers[H3_COMM_MAX_RANKS];
  if (!exchange(c, op, in[0].data, &n, peers)) return H3_ERR;
  int axis = (int)h3_op_attr_int(op, "axis", 0);
  int64_t soff[H3_MAX_RANK] = {0}, doff[H3_MAX_RANK] = {0};
  for (int64_t j = 0; j < n; j++) {
    doff[axis] = j * in[0].type.dims[axis];
    copy_box(out[0].data, &out[0].type, doff, peers[j], &in[0].type, soff, in[0].type.dims);
  }
  return release(c, op) ? H3_OK : H3_ERR;
}

H3_CPU_KERNEL(h3cpu_all_to_all) {
  (void)n_in, (void)n_out;
  int64_t n;
  const void *peers[H3_COMM_MAX_RANKS];
  if (!exchange(c, op, in[0].data, &n, peers)) return H3_ERR;
  int split = (int)h3_op_attr_int(op, "split_axis", 0);
  int concat = (int)h3_op_attr_int(op, "concat_axis", 0);
  int64_t box[H3_MAX_RANK], soff[H3_MAX_RANK] = {0}, doff[H3_MAX_RANK] = {0};
  for (int a = 0; a < in[0].type.rank; a++) box[a] = in[0].type.dims[a];
  box[split] /= n; /* part r of every rank's x, at rank j's place along concat */
  soff[split] = c->rank * box[split];
  for (int64_t j = 0; j < n; j++) {
    doff[concat] = j * box[concat];
    copy_box(out[0].data, &out[0].type, doff, peers[j], &in[0].type, soff, box);
  }
  return release(c, op) ? H3_OK : H3_ERR;
}

H3_CPU_KERNEL(h3cpu_all_reduce) {
  (void)n_in, (void)n_out;
  int64_t n;
  const void *peers[H3_COMM_MAX_RANKS];
  if (!exchange(c, op, in[0].data, &n, peers)) return H3_ERR;
  h3_dtype t = in[0].type.dtype;
  int64_t count = h3cpu_numel(&out[0]);
  for (int64_t i = 0; i < count; i++) {
    if (t == H3_F64) {
      double acc = h3cpu_ld64(peers[0], t, i);
      for (int64_t j = 1; j < n; j++) acc += h3cpu_ld64(peers[j], t, i);
      h3cpu_st64(out[0].data, t, i, acc);
    } else if (h3cpu_is_float(t)) { /* rounded once, to the result's dtype */
      float acc = h3cpu_ld(peers[0], t, i);
      for (int64_t j = 1; j < n; j++) acc += h3cpu_ld(peers[j], t, i);
      h3cpu_st(out[0].data, out[0].type.dtype, i, acc);
    } else {
      int64_t acc = h3cpu_ldi(peers[0], t, i);
      for (int64_t j = 1; j < n; j++) acc += h3cpu_ldi(peers[j], t, i);
      h3cpu_sti(out[0].data, t, i, acc);
    }
  }
  return release(c, op) ? H3_OK : H3_ERR;
}
