/* op_infer_model.c: result type inference of the model ops of ops.def (timestep
 * embedding, rope tables and rope, the attention family over dense and paged KV, the
 * sparse indexer, MoE routing and experts, DSpark's Markov head). Shapes are checked
 * exactly as ops.def states them; each failure names the operand, the dim and the
 * expected layout.
 */
#include "op_infer.h"

#include <string.h>

/* Checks q[T, Hq, D] against a kv head count hk and head dim d. */
static int want_gqa(const h3_op *op, int64_t hk, int64_t d, const char *kv, char *why,
                    size_t why_len) {
  const h3_type *q = TY(0);
  if (hk < 1 || q->dims[1] % hk != 0)
    FAIL("%s: q has Hq = %lld heads, not a multiple of %s's Hk = %lld", OPN, LL(q->dims[1]), kv, LL(hk));
  if (q->dims[2] != d) FAIL("%s: q has D = %lld but %s has D = %lld", OPN, LL(q->dims[2]), kv, LL(d));
  return 0;
}

/* Checks the paged cache pair kc/vc = [P, page, Hk, D] (operands ik, iv) and `page`. */
static int want_cache(const h3_op *op, int ik, int iv, char *why, size_t why_len) {
  if (h3_infer_want_rank(op, ik, "kc", 4, "[P, page, Hk, D]", why, why_len)) return -1;
  if (!h3_type_equal(TY(ik), TY(iv)))
    FAIL("%s: kc is %s but vc is %s (same type needed)", OPN, TS(TY(ik)), TS(TY(iv)));
  int64_t page = h3_op_attr_int(op, "page", 0);
  if (page != TY(ik)->dims[1])
    FAIL("%s: page = %lld but kc has page = %lld (kc is [P, page, Hk, D])", OPN, LL(page), LL(TY(ik)->dims[1]));
  return want_gqa(op, TY(ik)->dims[2], TY(ik)->dims[3], "kc", why, why_len);
}

/* page_table (operand it): i32[NP] for every row, or i32[R, NP] with R dividing T (the rows
 * of operand 0): row t reads table t / (T / R). R = T: a table per row (a batch of one-row
 * sequences); 1 < R < T: R sequences of T / R consecutive rows each (a batched extend). */
static int want_table(const h3_op *op, int it, char *why, size_t why_len) {
  const h3_type *pt = TY(it);
  if (pt->dtype != H3_I32 || (pt->rank != 1 && pt->rank != 2))
    FAIL("%s: page_table must be i32[NP] or i32[R, NP], got %s", OPN, TS(pt));
  if (pt->rank == 2 && (pt->dims[0] < 1 || TY(0)->dims[0] % pt->dims[0]))
    FAIL("%s: page_table %s has %lld tables for T = %lld rows (the tables must divide the rows)", OPN,
         TS(pt), LL(pt->dims[0]), LL(TY(0)->dims[0]));
  return 0;
}

/* pos i32[T] (operand ip) matching q's T, and the page table (operand it). */
static int want_pos_table(const h3_op *op, int ip, int it, char *why, size_t why_len) {
  if (h3_infer_want_i32(op, ip, "pos", 1, "[T]", why, why_len)) return -1;
  if (h3_infer_want_dim(op, 0, "q", 0, ip, "pos", 0, "T", "[T]", why, why_len)) return -1;
  return want_table(op, it, why, why_len);
}

H3_INFER_DECL(h3_infer_timestep_embedding) {
  int64_t dim = h3_op_attr_int(op, "dim", 0);
  if (TY(0)->rank != 1 || !h3_dtype_is_float(TY(0)->dtype))
    FAIL("timestep_embedding: t must be a float [M], got %s", TS(TY(0)));
  if (dim < 2 || dim % 2) FAIL("timestep_embedding: dim = %lld must be even and positive", LL(dim));
  int64_t d[2] = {TY(0)->dims[0], dim};
  out[0] = h3_type_make(H3_F32, 2, d);
  return 1;
}

H3_INFER_DECL(h3_infer_rope_table) {
  if (h3_infer_want_rank(op, 0, "pos", 2, "[S, A]", why, why_len)) return -1;
  if (h3_infer_want_rank(op, 1, "inv_freq", 1, "[F]", why, why_len)) return -1;
  int64_t d[2] = {TY(0)->dims[0], TY(0)->dims[1] * TY(1)->dims[0]};
  h3_dtype dt = (h3_dtype)h3_op_attr_int(op, "dtype", H3_BF16);
  out[0] = out[1] = h3_type_make(dt, 2, d);
  return 2;
}

H3_INFER_DECL(h3_infer_rope_pos_table) {
  if (h3_infer_want_i32(op, 0, "pos", 1, "[T]", why, why_len)) return -1;
  int64_t dims = h3_op_attr_int(op, "dims", 0);
  if (dims < 2 || dims % 2) FAIL("rope_pos_table: dims = %lld must be even and positive", LL(dims));
  int64_t d[2] = {TY(0)->dims[0], dims / 2};
  out[0] = out[1] = h3_type_make(H3_F32, 2, d);
  return 2;
}

H3_INFER_DECL(h3_infer_rope) {
  if (h3_infer_want_rank(op, 0, "x", 3, "[T, H, D]", why, why_len)) return -1;
  if (h3_infer_want_rank(op, 1, "cos", 2, "[T, R/2]", why, why_len)) return -1;
  if (!h3_type_same_shape(TY(1), TY(2)))
    FAIL("rope: cos is %s but sin is %s (same shape needed)", TS(TY(1)), TS(TY(2)));
  if (h3_infer_want_dim(op, 0, "x", 0, 1, "cos", 0, "T", "[T, R/2]", why, why_len)) return -1;
  if (2 * TY(1)->dims[1] > TY(0)->dims[2])
    FAIL("rope: cos %s rotates R = %lld dims but x has D = %lld (x is [T, H, D])", TS(TY(1)), LL(2 * TY(1)->dims[1]), LL(TY(0)->dims[2]));
  out[0] = *TY(0);
  return 1;
}

H3_INFER_DECL(h3_infer_attention) {
  if (h3_infer_want_rank(op, 0, "q", 3, "[T, Hq, D]", why, why_len)) return -1;
  if (h3_infer_want_rank(op, 1, "k", 3, "[T, Hk, D]", why, why_len)) return -1;
  if (h3_op_attr(op, "v_view")) {
    if (h3_infer_attention_v_view(op, why, why_len)) return -1;
  } else if (!h3_type_same_shape(TY(1), TY(2)))
    FAIL("attention: k is %s but v is %s (same shape needed)", TS(TY(1)), TS(TY(2)));
  if (h3_infer_want_dim(op, 0, "q", 0, 1, "k", 0, "T", "[T, Hk, D]", why, why_len)) return -1;
  if (want_gqa(op, TY(1)->dims[1], TY(1)->dims[2], "k", why, why_len)) return -1;
  int64_t causal = h3_op_attr_int(op, "causal", 0);
  if (causal != 0 && causal != 1) FAIL("attention: causal = %lld, expected 0 or 1", LL(causal));
  const h3_attr *seg = h3_op_attr(op, "segments");
  int64_t t = TY(0)->dims[0], prev = -1;
  for (int i = 0; seg && i < seg->n; i++) {
    if (seg->ints[i] <= prev || seg->ints[i] < 0 || seg->ints[i] > t)
      FAIL("attention: segments must ascend strictly within [0, T = %lld], got %lld at position %d", LL(t), LL(seg->ints[i]), i);
    prev = seg->ints[i];
  }
  out[0] = *TY(0);
  return 1;
}

/* sage_attention and sol_attention: attention's shapes (their schemas have no causal and no
 * v_view), then their own attributes (and sage's q codes, op_infer_sage_q.c). */
H3_INFER_DECL(h3_infer_sage_attention) {
  int r = h3_infer_attention(op, out, why, why_len);
  if (r < 0) return r;
  const char *pv = h3_op_attr_string(op, "pv", "fp8");
  if (strcmp(pv, "fp8") && strcmp(pv, "bf16")) FAIL("sage_attention: pv = \"%s\", expected fp8 or bf16", pv);
  int64_t smooth = h3_op_attr_int(op, "smooth", 1);
  if (smooth != 0 && smooth != 1) FAIL("sage_attention: smooth = %lld, expected 0 or 1", LL(smooth));
  return h3_infer_sage_q_operands(op, why, why_len) < 0 ? -1 : r;
}

H3_INFER_DECL(h3_infer_sol_attention) {
  int r = h3_infer_attention(op, out, why, why_len);
  if (r < 0) return r;
  const char *th = h3_op_attr_string(op, "thresh", "diag");
  if (strcmp(th, "diag") && strcmp(th, "exact")) FAIL("sol_attention: thresh = \"%s\", expected diag or exact", th);
  if (h3_op_attr_int(op, "sink_tokens", 0) < 0 || h3_op_attr_int(op, "sink_start", 0) < 0)
    FAIL("sol_attention: sink_tokens and sink_start must be >= 0");
  return r;
}

H3_INFER_DECL(h3_infer_kv_write) {
  const h3_type *c = TY(0), *x = TY(1);
  if (c->rank < 2) FAIL("kv_write: cache must be [P, page, ..], got %s", TS(c));
  bool ok = x->rank == c->rank - 1 && x->dtype == c->dtype;
  for (int i = 1; ok && i < x->rank; i++) ok = x->dims[i] == c->dims[i + 1];
  if (!ok) FAIL("kv_write: x is %s but cache %s needs rows of the same dtype and shape (x is [T, ..])", TS(x), TS(c));
  if (h3_infer_want_i32(op, 2, "slot", 1, "[T]", why, why_len)) return -1;
  if (h3_infer_want_dim(op, 1, "x", 0, 2, "slot", 0, "T", "[T]", why, why_len)) return -1;
  out[0] = *c;
  return 1;
}

H3_INFER_DECL(h3_infer_paged_attention) {
  if (h3_infer_want_rank(op, 0, "q", 3, "[T, Hq, D]", why, why_len)) return -1;
  if (want_cache(op, 1, 2, why, why_len)) return -1;
  if (want_pos_table(op, 3, 4, why, why_len)) return -1;
  out[0] = *TY(0);
  return 1;
}

H3_INFER_DECL(h3_infer_block_attention) {
  if (h3_infer_want_rank(op, 0, "q", 3, "[T, Hq, D]", why, why_len)) return -1;
  if (want_cache(op, 1, 2, why, why_len)) return -1;
  const h3_type *ctx = TY(3);
  int64_t T = TY(0)->dims[0], G = h3_op_attr_int(op, "block_rows", T);
  if (ctx->dtype != H3_I32 || ctx->rank > 1 || (ctx->rank == 1 && ctx->dims[0] != T))
    FAIL("block_attention: ctx_len must be i32[] or i32[T] (T = %lld), got %s", LL(T), TS(ctx));
  if (G < 1 || T % G)
    FAIL("block_attention: block_rows = %lld must divide the %lld rows", LL(G), LL(T));
  if (want_table(op, 4, why, why_len)) return -1;
  if (h3_infer_want_rank(op, 5, "kb", 3, "[T, Hk, D]", why, why_len)) return -1;
  if (!h3_type_same_shape(TY(5), TY(6)))
    FAIL("block_attention: kb is %s but vb is %s (same shape needed)", TS(TY(5)), TS(TY(6)));
  if (h3_infer_want_dim(op, 0, "q", 0, 5, "kb", 0, "T", "[T, Hk, D]", why, why_len)) return -1;
  if (h3_infer_want_dim(op, 1, "kc", 2, 5, "kb", 1, "Hk", "[T, Hk, D]", why, why_len)) return -1;
  if (h3_infer_want_dim(op, 1, "kc", 3, 5, "kb", 2, "D", "[T, Hk, D]", why, why_len)) return -1;
  out[0] = *TY(0);
  return 1;
}

H3_INFER_DECL(h3_infer_index_topk) {
  if (h3_infer_want_rank(op, 0, "iq", 3, "[T, Hi, D]", why, why_len)) return -1;
  if (h3_infer_want_rank(op, 1, "ikc", 3, "[P, page, D]", why, why_len)) return -1;
  if (h3_infer_want_dim(op, 0, "iq", 2, 1, "ikc", 2, "D", "[P, page, D]", why, why_len)) return -1;
  if (h3_infer_want_i32(op, 2, "pos", 1, "[T]", why, why_len)) return -1;
  if (h3_infer_want_dim(op, 0, "iq", 0, 2, "pos", 0, "T", "[T]", why, why_len)) return -1;
  if (want_table(op, 3, why, why_len)) return -1;
  int64_t block = h3_op_attr_int(op, "block", 0), topk = h3_op_attr_int(op, "topk", 0);
  if (block < 1) FAIL("index_topk: block = %lld must be positive", LL(block));
  if (topk < 1) FAIL("index_topk: topk = %lld must be positive", LL(topk));
  int64_t d[3] = {TY(0)->dims[0], TY(0)->dims[1], topk};
  out[0] = h3_type_make(H3_I32, 3, d);
  return 1;
}

H3_INFER_DECL(h3_infer_sparse_attention) {
  if (h3_infer_want_rank(op, 0, "q", 3, "[T, Hq, D]", why, why_len)) return -1;
  if (want_cache(op, 1, 2, why, why_len)) return -1;
  if (h3_infer_want_i32(op, 3, "sel", 3, "[T, Hk, topk]", why, why_len)) return -1;
  if (h3_infer_want_dim(op, 0, "q", 0, 3, "sel", 0, "T", "[T, Hk, topk]", why, why_len)) return -1;
  if (h3_infer_want_dim(op, 1, "kc", 2, 3, "sel", 1, "Hk", "[T, Hk, topk]", why, why_len)) return -1;
  if (want_pos_table(op, 4, 5, why, why_len)) return -1;
  out[0] = *TY(0);
  return 1;
}

H3_INFER_DECL(h3_infer_router_topk) {
  if (h3_infer_want_rank(op, 0, "h", 2, "[T, H]", why, why_len)) return -1;
  const h3_type *w = TY(1), *b = TY(2);
  if (w->dtype != H3_F32 || w->rank != 2) FAIL("router_topk: w must be f32[E, H], got %s", TS(w));
  if (h3_infer_want_dim(op, 0, "h", 1, 1, "w", 1, "H", "[E, H]", why, why_len)) return -1;
  if (b->dtype != H3_F32 || b->rank != 1 || b->dims[0] != w->dims[0])
    FAIL("router_topk: bias must be f32[E] with E = %lld, got %s", LL(w->dims[0]), TS(b));
  int64_t k = h3_op_attr_int(op, "k", 0);
  if (k < 1 || k > w->dims[0]) FAIL("router_topk: k = %lld must be in [1, E = %lld]", LL(k), LL(w->dims[0]));
  int64_t d[2] = {TY(0)->dims[0], k};
  out[0] = h3_type_make(H3_I32, 2, d);
  out[1] = h3_type_make(H3_F32, 2, d);
  return 2;
}

H3_INFER_DECL(h3_infer_moe) {
  if (h3_infer_want_rank(op, 0, "h", 2, "[T, H]", why, why_len)) return -1;
  if (h3_infer_want_rank(op, 1, "gate_up", 3, "[E, 2F, H]", why, why_len)) return -1;
  if (h3_infer_want_rank(op, 2, "down", 3, "[E, H, F]", why, why_len)) return -1;
  const h3_type *gu = TY(1), *dn = TY(2);
  if (h3_infer_want_dim(op, 0, "h", 1, 1, "gate_up", 2, "H", "[E, 2F, H]", why, why_len)) return -1;
  if (h3_infer_want_dim(op, 0, "h", 1, 2, "down", 1, "H", "[E, H, F]", why, why_len)) return -1;
  if (h3_infer_want_dim(op, 1, "gate_up", 0, 2, "down", 0, "E", "[E, H, F]", why, why_len)) return -1;
  if (gu->dims[1] != 2 * dn->dims[2])
    FAIL("moe: gate_up has 2F = %lld but down has F = %lld (down is [E, H, F])", LL(gu->dims[1]), LL(dn->dims[2]));
  if (h3_infer_want_i32(op, 3, "ids", 2, "[T, k]", why, why_len)) return -1;
  if (TY(4)->dtype != H3_F32 || !h3_type_same_shape(TY(3), TY(4)))
    FAIL("moe: weights must be f32 of ids' shape %s, got %s", TS(TY(3)), TS(TY(4)));
  if (h3_infer_want_dim(op, 0, "h", 0, 3, "ids", 0, "T", "[T, k]", why, why_len)) return -1;
  int64_t ranks = h3_op_attr_int(op, "ranks", 1);
  if (ranks < 1 || ranks > H3_COMM_MAX_RANKS)
    FAIL("moe: ranks = %lld, expected 1 to %d", LL(ranks), H3_COMM_MAX_RANKS);
  out[0] = *TY(0);
  out[0].dtype = H3_F32;
  return 1;
}

H3_INFER_DECL(h3_infer_spec_accept) {
  const h3_type *x = TY(0), *dr = TY(1);
  if (x->dtype != H3_F32 || x->rank != 2 || x->dims[1] < 1)
    FAIL("spec_accept: logits must be f32[S*(G+1), V], got %s", TS(x));
  if (dr->dtype != H3_I32 || dr->rank != 1) FAIL("spec_accept: draft must be i32[S*G], got %s", TS(dr));
  const h3_type *t = TY(2);
  if (t->dtype != H3_F32 || t->rank != 1 || t->dims[0] < 1)
    FAIL("spec_accept: temperature must be f32[S], got %s", TS(t));
  int64_t S = t->dims[0];
  if (dr->dims[0] % S || x->dims[0] != dr->dims[0] + S)
    FAIL("spec_accept: %lld sequences need logits of S*(G+1) rows and a draft of S*G, got %s and %s",
         LL(S), TS(x), TS(dr));
  static const char *const ints[2] = {"seed", "pos"};
  for (int i = 3; i < 5; i++) {
    if (h3_infer_want_i32(op, i, ints[i - 3], 1, "[S]", why, why_len)) return -1;
    if (h3_infer_want_dim(op, 2, "temperature", 0, i, ints[i - 3], 0, "S", "[S]", why, why_len)) return -1;
  }
  int64_t d[2] = {S, dr->dims[0] / S + 1};
  out[0] = h3_type_make(H3_I32, 1, &S);
  out[1] = h3_type_make(H3_I32, 2, d);
  out[2] = h3_type_make(H3_F32, 2, d);
  return 3;
}

H3_INFER_DECL(h3_infer_markov_draft) {
  const h3_type *base = TY(0);
  if (base->dtype != H3_F32 || base->rank != 2) FAIL("markov_draft: base must be f32[G, V], got %s", TS(base));
  if (h3_infer_want_rank(op, 1, "w1", 2, "[V, r]", why, why_len)) return -1;
  if (!h3_type_same_shape(TY(1), TY(2)))
    FAIL("markov_draft: w1 is %s but w2 is %s (both [V, r])", TS(TY(1)), TS(TY(2)));
  if (h3_infer_want_dim(op, 0, "base", 1, 1, "w1", 0, "V", "[V, r]", why, why_len)) return -1;
  const h3_type *prev = TY(3);
  if (prev->dtype != H3_I32 || prev->rank > 1 || (prev->rank == 1 && (prev->dims[0] < 1 || base->dims[0] % prev->dims[0])))
    FAIL("markov_draft: prev must be i32[] or i32[S] with S dividing the %lld rows, got %s",
         LL(base->dims[0]), TS(prev));
  out[0] = *base;
  int64_t g = base->dims[0];
  out[1] = h3_type_make(H3_I32, 1, &g);
  return 2;
}
