/* test_ops_model.c: CPU reference of the model ops (linear, attention and its paged /
 * block / sparse forms, index_topk, rope and its tables, timestep_embedding, router_topk,
 * moe, markov_draft) against independent computations of the ops.def contracts, plus the
 * properties the specs ask for: batch invariance of linear, segment isolation, paged ==
 * dense attention with scrambled pages, MSA == dense when every block is selected,
 * router weights summing to the scale. */
#include "harness.h"

static void test_linear(void) {
  T t;
  t_init(&t, 11);
  h3_value *x = t_in(&t, "x", TY(H3_BF16, 5, 24)), *w = t_in(&t, "w", TY(H3_BF16, 7, 24));
  h3_value *b = t_in(&t, "b", TY(H3_F32, 7)), *x1 = t_in(&t, "x1", TY(H3_BF16, 1, 24));
  h3_tensor in[3] = {t_rand(&t, x->type, -2, 2), t_rand(&t, w->type, -0.5, 0.5),
                     t_rand(&t, b->type, -1, 1)};
  h3_op *op = t_op(&t, H3_OP_LINEAR, 3, (h3_value *[]){x, w, b}, 0, NULL);
  h3_attr f32 = h3_attr_dtype(t.m, "dtype", H3_F32);
  h3_op *opf = t_op(&t, H3_OP_LINEAR, 2, (h3_value *[]){x, w}, 1, &f32);
  h3_tensor out[1], outf[1];
  CHECK(t_run(op, in, out) == H3_OK && t_run(opf, in, outf) == H3_OK, "run");
  CHECK(out[0].type.dtype == H3_BF16 && outf[0].type.dtype == H3_F32, "dtypes");
  for (int m = 0; m < 5; m++)
    for (int n = 0; n < 7; n++) {
      float s = 0.0f;
      for (int k = 0; k < 24; k++)
        s += (float)t_get(&in[0], m * 24 + k) * (float)t_get(&in[1], n * 24 + k);
      CHECK(t_get(&outf[0], m * 7 + n) == (double)s, "linear f32 [%d, %d]", m, n);
      CHECK(t_get(&out[0], m * 7 + n) == (double)rb(s + (float)t_get(&in[2], n)),
            "linear bias [%d, %d]", m, n);
    }
  /* batch invariance: row 3 alone gives the same bits as inside the batch */
  h3_op *op1 = t_op(&t, H3_OP_LINEAR, 3, (h3_value *[]){x1, w, b}, 0, NULL);
  h3_tensor in1[3] = {t_alloc(x1->type), in[1], in[2]}, out1[1];
  memcpy(in1[0].data, (char *)in[0].data + 3 * 24 * 2, 24 * 2);
  CHECK(t_run(op1, in1, out1) == H3_OK, "run");
  CHECK(memcmp(out1[0].data, (char *)out[0].data + 3 * 7 * 2, 7 * 2) == 0,
        "linear is not batch invariant");
  t_free_all(out, 1), t_free_all(outf, 1), t_free_all(out1, 1), t_free_all(in, 3);
  free(in1[0].data);
  t_free(&t);
}

/* fp64 reference attention of one (row, head) over a key list. */
static void ref_attention(const h3_tensor *q, int64_t qoff, const h3_tensor *k, const h3_tensor *v,
                          const int64_t *koff, int nk, int D, double scale, double *o) {
  double s[512], m = -1e300, l = 0;
  for (int j = 0; j < nk; j++) {
    double dot = 0;
    for (int d = 0; d < D; d++) dot += t_get(q, qoff + d) * t_get(k, koff[j] + d);
    s[j] = dot * scale;
    if (s[j] > m) m = s[j];
  }
  for (int d = 0; d < D; d++) o[d] = 0;
  for (int j = 0; j < nk; j++) {
    double p = exp(s[j] - m);
    l += p;
    for (int d = 0; d < D; d++) o[d] += p * t_get(v, koff[j] + d);
  }
  for (int d = 0; d < D; d++) o[d] /= l;
}

static void test_attention(void) {
  T t;
  t_init(&t, 12);
  const int T_ = 10, Hq = 4, Hk = 2, D = 8;
  h3_value *q = t_in(&t, "q", TY(H3_BF16, T_, Hq, D)), *k = t_in(&t, "k", TY(H3_BF16, T_, Hk, D));
  h3_value *v = t_in(&t, "v", TY(H3_BF16, T_, Hk, D));
  h3_tensor in[3] = {t_rand(&t, q->type, -2, 2), t_rand(&t, k->type, -2, 2),
                     t_rand(&t, v->type, -2, 2)};
  int64_t seg[1] = {6};
  h3_attr a[3] = {h3_attr_float(t.m, "scale", 0.35), h3_attr_ints(t.m, "segments", 1, seg),
                  h3_attr_int(t.m, "causal", 0)};
  h3_attr ac[2] = {h3_attr_float(t.m, "scale", 0.35), h3_attr_int(t.m, "causal", 1)};
  h3_op *op = t_op(&t, H3_OP_ATTENTION, 3, (h3_value *[]){q, k, v}, 3, a);
  h3_op *opc = t_op(&t, H3_OP_ATTENTION, 3, (h3_value *[]){q, k, v}, 2, ac);
  h3_tensor out[1], outc[1];
  CHECK(t_run(op, in, out) == H3_OK && t_run(opc, in, outc) == H3_OK, "run");
  double worst = 0;
  for (int r = 0; r < T_; r++)
    for (int h = 0; h < Hq; h++) {
      int64_t ko[16];
      int nk = 0, lo = r < 6 ? 0 : 6, hi = r < 6 ? 6 : T_;
      for (int j = lo; j < hi; j++) ko[nk++] = (j * Hk + h / 2) * D;
      double o[8], oc[8];
      ref_attention(&in[0], (r * Hq + h) * D, &in[1], &in[2], ko, nk, D, 0.35, o);
      nk = 0;
      for (int j = 0; j <= r; j++) ko[nk++] = (j * Hk + h / 2) * D;
      ref_attention(&in[0], (r * Hq + h) * D, &in[1], &in[2], ko, nk, D, 0.35, oc);
      for (int d = 0; d < D; d++) {
        double e1 = fabs(t_get(&out[0], (r * Hq + h) * D + d) - o[d]);
        double e2 = fabs(t_get(&outc[0], (r * Hq + h) * D + d) - oc[d]);
        worst = fmax(worst, fmax(e1 / (fabs(o[d]) + 0.05), e2 / (fabs(oc[d]) + 0.05)));
      }
    }
  CHECK(worst < 1.0 / 64, "attention vs fp64 reference: worst relative error %g", worst);
  /* segment isolation: changing rows 6.. does not change rows 0..5 */
  h3_tensor in2[3] = {t_alloc(q->type), t_alloc(k->type), t_alloc(v->type)}, out2[1];
  for (int i = 0; i < 3; i++) memcpy(in2[i].data, in[i].data, (size_t)h3_type_bytes(&in[i].type));
  for (int64_t i = 6 * Hk * D; i < T_ * Hk * D; i++)
    t_set(&in2[1], i, t_uniform(&t, -5, 5)), t_set(&in2[2], i, 3.0);
  CHECK(t_run(op, in2, out2) == H3_OK, "run");
  CHECK(memcmp(out2[0].data, out[0].data, 6 * Hq * D * 2) == 0, "segments leak");
  t_free_all(out, 1), t_free_all(outc, 1), t_free_all(out2, 1), t_free_all(in, 3),
      t_free_all(in2, 3);
  t_free(&t);
}

/* Paged caches with scrambled pages vs dense causal attention (bitwise: same key order);
 * index_topk + sparse_attention with every block selected == paged (bitwise). */
static void test_paged_sparse(void) {
  T t;
  t_init(&t, 13);
  const int T_ = 12, Hq = 4, Hk = 2, D = 8, page = 4, P = 6, NP = 4, Di = 8;
  h3_value *q = t_in(&t, "q", TY(H3_BF16, T_, Hq, D)), *k = t_in(&t, "k", TY(H3_BF16, T_, Hk, D));
  h3_value *v = t_in(&t, "v", TY(H3_BF16, T_, Hk, D));
  h3_value *kc = t_in(&t, "kc", TY(H3_BF16, P, page, Hk, D)),
           *vc = t_in(&t, "vc", TY(H3_BF16, P, page, Hk, D));
  h3_value *pos = t_in(&t, "pos", TY(H3_I32, T_)), *pt = t_in(&t, "pt", TY(H3_I32, NP));
  h3_value *iq = t_in(&t, "iq", TY(H3_BF16, T_, Hk, Di)),
           *ikc = t_in(&t, "ikc", TY(H3_BF16, P, page, Di));
  h3_tensor tq = t_rand(&t, q->type, -2, 2), tk = t_rand(&t, k->type, -2, 2),
            tv = t_rand(&t, v->type, -2, 2);
  h3_tensor tkc = t_rand(&t, kc->type, -9, 9), tvc = t_rand(&t, vc->type, -9, 9); /* stale junk */
  h3_tensor tpos = t_alloc(pos->type), tpt = t_alloc(pt->type);
  h3_tensor tiq = t_rand(&t, iq->type, -1, 1), tik = t_rand(&t, ikc->type, -1, 1);
  int32_t perm[4] = {5, 2, 4, 1};
  memcpy(tpt.data, perm, sizeof perm);
  for (int r = 0; r < T_; r++) {
    ((int32_t *)tpos.data)[r] = r;
    int64_t slot = perm[r / page] * page + r % page;
    memcpy((char *)tkc.data + slot * Hk * D * 2, (char *)tk.data + r * Hk * D * 2, Hk * D * 2);
    memcpy((char *)tvc.data + slot * Hk * D * 2, (char *)tv.data + r * Hk * D * 2, Hk * D * 2);
  }
  h3_attr sc = h3_attr_float(t.m, "scale", 0.4), causal[2] = {sc, h3_attr_int(t.m, "causal", 1)};
  h3_attr pa[2] = {sc, h3_attr_int(t.m, "page", page)};
  h3_op *dense = t_op(&t, H3_OP_ATTENTION, 3, (h3_value *[]){q, k, v}, 2, causal);
  h3_op *paged = t_op(&t, H3_OP_PAGED_ATTENTION, 5, (h3_value *[]){q, kc, vc, pos, pt}, 2, pa);
  h3_tensor od[1], op[1];
  h3_tensor din[3] = {tq, tk, tv}, pin[5] = {tq, tkc, tvc, tpos, tpt};
  CHECK(t_run(dense, din, od) == H3_OK && t_run(paged, pin, op) == H3_OK, "run");
  CHECK(memcmp(od[0].data, op[0].data, (size_t)h3_type_bytes(&od[0].type)) == 0,
        "paged attention over scrambled pages differs from dense causal attention");
  /* index_topk with topk >= blocks: every causal block, ascending, -1 padded */
  h3_attr ta[2] = {h3_attr_int(t.m, "block", page), h3_attr_int(t.m, "topk", 4)};
  h3_op *topk = t_op(&t, H3_OP_INDEX_TOPK, 4, (h3_value *[]){iq, ikc, pos, pt}, 2, ta);
  h3_tensor tin[4] = {tiq, tik, tpos, tpt}, osel[1];
  CHECK(t_run(topk, tin, osel) == H3_OK, "index_topk");
  for (int r = 0; r < T_; r++)
    for (int h = 0; h < Hk; h++)
      for (int s = 0; s < 4; s++) {
        int want = s <= r / page ? s : -1;
        CHECK(((int32_t *)osel[0].data)[(r * Hk + h) * 4 + s] == want, "sel[%d, %d, %d]", r, h, s);
      }
  h3_value *sel = t_in(&t, "sel", osel[0].type);
  h3_op *sparse =
      t_op(&t, H3_OP_SPARSE_ATTENTION, 6, (h3_value *[]){q, kc, vc, sel, pos, pt}, 2, pa);
  h3_tensor sin_[6] = {tq, tkc, tvc, osel[0], tpos, tpt}, osp[1];
  CHECK(t_run(sparse, sin_, osp) == H3_OK, "sparse");
  CHECK(memcmp(osp[0].data, op[0].data, (size_t)h3_type_bytes(&op[0].type)) == 0,
        "MSA != dense with all blocks");
  /* top-1 selection: the current block is forced; with topk 2 the best other block by max score */
  h3_attr t2[2] = {h3_attr_int(t.m, "block", page), h3_attr_int(t.m, "topk", 2)};
  h3_op *topk2 = t_op(&t, H3_OP_INDEX_TOPK, 4, (h3_value *[]){iq, ikc, pos, pt}, 2, t2);
  h3_tensor o2[1];
  CHECK(t_run(topk2, tin, o2) == H3_OK, "index_topk 2");
  for (int r = 8; r < T_; r++)
    for (int h = 0; h < Hk; h++) {
      double best[2] = {-1e30, -1e30};
      for (int b = 0; b < 2; b++)
        for (int j = b * page; j < (b + 1) * page; j++) {
          int64_t slot = perm[j / page] * page + j % page;
          double dot = 0;
          for (int d = 0; d < Di; d++)
            dot += t_get(&tiq, (r * Hk + h) * Di + d) * t_get(&tik, slot * Di + d);
          if (dot > best[b]) best[b] = dot;
        }
      int want0 = best[1] > best[0] ? 1 : 0;
      int32_t *s = (int32_t *)o2[0].data + (r * Hk + h) * 2;
      CHECK(s[0] == want0 && s[1] == 2, "top-2 row %d head %d: [%d, %d], want [%d, 2]", r, h, s[0],
            s[1], want0);
    }
  /* a page-table entry outside the cache is an error, not a read out of bounds */
  ((int32_t *)tpt.data)[1] = 6;
  const char *msg = t_run_error(paged, pin);
  CHECK(strstr(msg, "page_table[1] = 6 is outside [0, 6)") != NULL, "message: %s", msg);
  t_free_all(od, 1), t_free_all(op, 1), t_free_all(osel, 1), t_free_all(osp, 1), t_free_all(o2, 1);
  h3_tensor all[9] = {tq, tk, tv, tkc, tvc, tpos, tpt, tiq, tik};
  t_free_all(all, 9);
  t_free(&t);
}

static void test_block_attention(void) {
  T t;
  t_init(&t, 14);
  const int G = 3, Hq = 2, Hk = 1, D = 4, page = 2, P = 4, NP = 3, ctx = 3;
  h3_value *q = t_in(&t, "q", TY(H3_BF16, G, Hq, D)),
           *kc = t_in(&t, "kc", TY(H3_BF16, P, page, Hk, D));
  h3_value *vc = t_in(&t, "vc", TY(H3_BF16, P, page, Hk, D)), *cl = t_in(&t, "ctx", SCALAR(H3_I32));
  h3_value *pt = t_in(&t, "pt", TY(H3_I32, NP)), *kb = t_in(&t, "kb", TY(H3_BF16, G, Hk, D));
  h3_value *vb = t_in(&t, "vb", TY(H3_BF16, G, Hk, D));
  h3_tensor in[7] = {t_rand(&t, q->type, -2, 2),  t_rand(&t, kc->type, -2, 2),
                     t_rand(&t, vc->type, -2, 2), t_alloc(cl->type),
                     t_alloc(pt->type),           t_rand(&t, kb->type, -2, 2),
                     t_rand(&t, vb->type, -2, 2)};
  *(int32_t *)in[3].data = ctx;
  int32_t perm[3] = {3, 1, 2};
  memcpy(in[4].data, perm, sizeof perm);
  h3_attr a[2] = {h3_attr_float(t.m, "scale", 0.5), h3_attr_int(t.m, "page", page)};
  h3_op *op = t_op(&t, H3_OP_BLOCK_ATTENTION, 7, (h3_value *[]){q, kc, vc, cl, pt, kb, vb}, 2, a);
  h3_tensor out[1];
  CHECK(t_run(op, in, out) == H3_OK, "run");
  for (int r = 0; r < G; r++)
    for (int h = 0; h < Hq; h++) {
      /* keys: cached positions 0..2, then the 3 block rows: reference on a gathered copy */
      h3_tensor K = t_alloc(TY(H3_F32, 6, D)), V = t_alloc(TY(H3_F32, 6, D));
      for (int j = 0; j < 6; j++)
        for (int d = 0; d < D; d++) {
          int64_t src = j < ctx ? (perm[j / page] * page + j % page) * D + d : (j - ctx) * D + d;
          t_set(&K, j * D + d, t_get(j < ctx ? &in[1] : &in[5], src));
          t_set(&V, j * D + d, t_get(j < ctx ? &in[2] : &in[6], src));
        }
      int64_t ko[6] = {0, 4, 8, 12, 16, 20};
      double o[4];
      ref_attention(&in[0], (r * Hq + h) * D, &K, &V, ko, 6, D, 0.5, o);
      for (int d = 0; d < D; d++)
        CHECK(fabs(t_get(&out[0], (r * Hq + h) * D + d) - o[d]) <= 1.0 / 128 * fabs(o[d]) + 1e-3,
              "block attention [%d, %d, %d]: %g vs %g", r, h, d,
              t_get(&out[0], (r * Hq + h) * D + d), o[d]);
      free(K.data), free(V.data);
    }
  t_free_all(out, 1), t_free_all(in, 7);
  t_free(&t);
}

/* Batched block_attention (S sequences of G rows, ctx_len and page tables per row,
 * block_rows = G) and batched markov_draft (prev[S]): each sequence's rows are bitwise the
 * single-sequence op's on its slice (the single forms are checked against references above). */
static void test_draft_batched(void) {
  T t;
  t_init(&t, 17);
  enum { S = 3, G = 2, TT = S * G, Hq = 2, Hk = 1, D = 8, page = 2, P = 7, NP = 3 };
  const int ctx[S] = {3, 0, 6};
  const int32_t tables[S][NP] = {{3, 1, 2}, {6, 5, 4}, {2, 4, 6}};
  h3_value *q = t_in(&t, "q", TY(H3_BF16, TT, Hq, D)), *kc = t_in(&t, "kc", TY(H3_BF16, P, page, Hk, D));
  h3_value *vc = t_in(&t, "vc", TY(H3_BF16, P, page, Hk, D)), *cl = t_in(&t, "ctx", TY(H3_I32, TT));
  h3_value *pt = t_in(&t, "pt", TY(H3_I32, TT, NP)), *kb = t_in(&t, "kb", TY(H3_BF16, TT, Hk, D));
  h3_value *vb = t_in(&t, "vb", TY(H3_BF16, TT, Hk, D));
  h3_tensor in[7] = {t_rand(&t, q->type, -2, 2),  t_rand(&t, kc->type, -2, 2),
                     t_rand(&t, vc->type, -2, 2), t_alloc(cl->type),
                     t_alloc(pt->type),           t_rand(&t, kb->type, -2, 2),
                     t_rand(&t, vb->type, -2, 2)};
  for (int r = 0; r < TT; r++) {
    ((int32_t *)in[3].data)[r] = ctx[r / G];
    memcpy((int32_t *)in[4].data + r * NP, tables[r / G], sizeof tables[0]);
  }
  h3_attr a[3] = {h3_attr_float(t.m, "scale", 0.5), h3_attr_int(t.m, "page", page),
                  h3_attr_int(t.m, "block_rows", G)};
  h3_op *op = t_op(&t, H3_OP_BLOCK_ATTENTION, 7, (h3_value *[]){q, kc, vc, cl, pt, kb, vb}, 3, a);
  h3_tensor out[1];
  CHECK(t_run(op, in, out) == H3_OK, "batched block_attention");
  /* one sequence: q, kb, vb its G rows, ctx_len its scalar, its [NP] table */
  h3_value *q1 = t_in(&t, "q1", TY(H3_BF16, G, Hq, D)), *c1 = t_in(&t, "c1", SCALAR(H3_I32));
  h3_value *p1 = t_in(&t, "p1", TY(H3_I32, NP)), *kb1 = t_in(&t, "kb1", TY(H3_BF16, G, Hk, D));
  h3_value *vb1 = t_in(&t, "vb1", TY(H3_BF16, G, Hk, D));
  h3_op *one = t_op(&t, H3_OP_BLOCK_ATTENTION, 7, (h3_value *[]){q1, kc, vc, c1, p1, kb1, vb1}, 2, a);
  for (int s = 0; s < S; s++) {
    h3_tensor in1[7] = {t_alloc(q1->type), in[1], in[2], t_alloc(c1->type), t_alloc(p1->type),
                        t_alloc(kb1->type), t_alloc(vb1->type)};
    memcpy(in1[0].data, (uint16_t *)in[0].data + s * G * Hq * D, (size_t)G * Hq * D * 2);
    memcpy(in1[5].data, (uint16_t *)in[5].data + s * G * Hk * D, (size_t)G * Hk * D * 2);
    memcpy(in1[6].data, (uint16_t *)in[6].data + s * G * Hk * D, (size_t)G * Hk * D * 2);
    *(int32_t *)in1[3].data = ctx[s];
    memcpy(in1[4].data, tables[s], sizeof tables[0]);
    h3_tensor o1[1];
    CHECK(t_run(one, in1, o1) == H3_OK, "block_attention of sequence %d", s);
    CHECK(memcmp(o1[0].data, (uint16_t *)out[0].data + s * G * Hq * D, (size_t)G * Hq * D * 2) == 0,
          "batched block_attention: sequence %d differs from its own op", s);
    t_free_all(o1, 1);
    h3_tensor own[5] = {in1[0], in1[3], in1[4], in1[5], in1[6]};
    t_free_all(own, 5);
  }
  /* a ctx_len past the table, a negative one: errors naming them */
  ((int32_t *)in[3].data)[4] = 7;
  CHECK(strstr(t_run_error(op, in), "beyond the 6 positions") != NULL, "ctx_len past the table");
  ((int32_t *)in[3].data)[4] = -1;
  CHECK(strstr(t_run_error(op, in), "ctx_len[4] = -1 is negative") != NULL, "negative ctx_len");
  t_free_all(out, 1), t_free_all(in, 7);

  /* markov_draft over S chains of G rows */
  enum { V = 12, Rk = 4 };
  const int32_t prevs[S] = {5, 0, 11};
  h3_value *base = t_in(&t, "base", TY(H3_F32, TT, V)), *w1 = t_in(&t, "w1", TY(H3_BF16, V, Rk));
  h3_value *w2 = t_in(&t, "w2", TY(H3_BF16, V, Rk)), *pv = t_in(&t, "prev", TY(H3_I32, S));
  h3_tensor kin[4] = {t_rand(&t, base->type, -1, 1), t_rand(&t, w1->type, -1, 1),
                      t_rand(&t, w2->type, -1, 1), t_alloc(pv->type)};
  memcpy(kin[3].data, prevs, sizeof prevs);
  h3_op *mk = t_op(&t, H3_OP_MARKOV_DRAFT, 4, (h3_value *[]){base, w1, w2, pv}, 0, NULL);
  h3_tensor ko[2];
  CHECK(t_run(mk, kin, ko) == H3_OK, "batched markov_draft");
  h3_value *b1 = t_in(&t, "b1", TY(H3_F32, G, V)), *pv1 = t_in(&t, "pv1", SCALAR(H3_I32));
  h3_op *mk1 = t_op(&t, H3_OP_MARKOV_DRAFT, 4, (h3_value *[]){b1, w1, w2, pv1}, 0, NULL);
  for (int s = 0; s < S; s++) {
    h3_tensor k1[4] = {t_alloc(b1->type), kin[1], kin[2], t_alloc(pv1->type)};
    memcpy(k1[0].data, (float *)kin[0].data + s * G * V, (size_t)G * V * 4);
    *(int32_t *)k1[3].data = prevs[s];
    h3_tensor o1[2];
    CHECK(t_run(mk1, k1, o1) == H3_OK, "markov_draft of sequence %d", s);
    CHECK(memcmp(o1[0].data, (float *)ko[0].data + s * G * V, (size_t)G * V * 4) == 0 &&
              memcmp(o1[1].data, (int32_t *)ko[1].data + s * G, (size_t)G * 4) == 0,
          "batched markov_draft: sequence %d differs from its own op", s);
    t_free_all(o1, 2);
    h3_tensor own[2] = {k1[0], k1[3]};
    t_free_all(own, 2);
  }
  ((int32_t *)kin[3].data)[2] = V;
  CHECK(strstr(t_run_error(mk, kin), "prev[2] = 12 is outside") != NULL, "batched prev outside V");
  t_free_all(ko, 2), t_free_all(kin, 4);
  t_free(&t);
}

static void test_rope_and_tables(void) {
  T t;
  t_init(&t, 15);
  const int T_ = 6, H = 2, D = 8, R2 = 3;
  h3_value *x = t_in(&t, "x", TY(H3_BF16, T_, H, D)), *c = t_in(&t, "c", TY(H3_F32, T_, R2));
  h3_value *s = t_in(&t, "s", TY(H3_F32, T_, R2));
  h3_tensor in[3] = {t_rand(&t, x->type, -2, 2), t_rand(&t, c->type, -1, 1),
                     t_rand(&t, s->type, -1, 1)};
  h3_op *op = t_op(&t, H3_OP_ROPE, 3, (h3_value *[]){x, c, s}, 0, NULL);
  h3_tensor out[1];
  CHECK(t_run(op, in, out) == H3_OK, "rope");
  for (int r = 0; r < T_; r++)
    for (int h = 0; h < H; h++) {
      int64_t base = (r * H + h) * D;
      for (int i = 0; i < R2; i++) {
        float a = (float)t_get(&in[0], base + i), b = (float)t_get(&in[0], base + i + R2);
        float cs = (float)t_get(&in[1], r * R2 + i), sn = (float)t_get(&in[2], r * R2 + i);
        CHECK(t_get(&out[0], base + i) == (double)rb(a * cs - b * sn), "rope a [%d, %d, %d]", r, h,
              i);
        CHECK(t_get(&out[0], base + i + R2) == (double)rb(b * cs + a * sn), "rope b [%d, %d, %d]",
              r, h, i);
      }
      for (int i = 2 * R2; i < D; i++)
        CHECK(t_get(&out[0], base + i) == t_get(&in[0], base + i), "pass-through");
    }
  /* rope_pos_table: fp64 angles stored as f32 */
  h3_value *pos = t_in(&t, "pos", TY(H3_I32, 5));
  h3_tensor pin[1] = {t_alloc(pos->type)};
  for (int i = 0; i < 5; i++) ((int32_t *)pin[0].data)[i] = 37 * i + 3;
  h3_attr pa[2] = {h3_attr_float(t.m, "theta", 5e6), h3_attr_int(t.m, "dims", 8)};
  h3_op *pt = t_op(&t, H3_OP_ROPE_POS_TABLE, 1, &pos, 2, pa);
  h3_tensor po[2];
  CHECK(t_run(pt, pin, po) == H3_OK, "rope_pos_table");
  for (int r = 0; r < 5; r++)
    for (int i = 0; i < 4; i++) {
      double ang = (37.0 * r + 3) * pow(5e6, -2.0 * i / 8);
      CHECK(t_get(&po[0], r * 4 + i) == (double)(float)cos(ang) &&
                t_get(&po[1], r * 4 + i) == (double)(float)sin(ang),
            "rope_pos_table [%d, %d]", r, i);
    }
  /* rope_table: fp32 angles pos * inv_freq, bf16 cos/sin */
  h3_value *p3 = t_in(&t, "p3", TY(H3_F32, 4, 3)), *f = t_in(&t, "f", TY(H3_F32, 2));
  h3_tensor tin[2] = {t_rand(&t, p3->type, 0, 40), t_rand(&t, f->type, 0.01, 1)};
  h3_op *rt = t_op(&t, H3_OP_ROPE_TABLE, 2, (h3_value *[]){p3, f}, 0, NULL);
  h3_tensor to[2];
  CHECK(t_run(rt, tin, to) == H3_OK, "rope_table");
  for (int r = 0; r < 4; r++)
    for (int a = 0; a < 3; a++)
      for (int j = 0; j < 2; j++) {
        float ang = (float)t_get(&tin[0], r * 3 + a) * (float)t_get(&tin[1], j);
        int64_t o = r * 6 + a * 2 + j;
        CHECK(t_get(&to[0], o) == (double)rb(cosf(ang)) &&
                  t_get(&to[1], o) == (double)rb(sinf(ang)),
              "rope_table [%d, %d, %d]", r, a, j);
      }
  /* timestep_embedding: [cos, sin] halves */
  h3_value *tt = t_in(&t, "t", TY(H3_F32, 2));
  h3_tensor ttin[1] = {t_rand(&t, tt->type, 0, 1)};
  h3_attr da = h3_attr_int(t.m, "dim", 16);
  h3_op *te = t_op(&t, H3_OP_TIMESTEP_EMBEDDING, 1, &tt, 1, &da);
  h3_tensor teo[1];
  CHECK(t_run(te, ttin, teo) == H3_OK, "timestep_embedding");
  for (int m = 0; m < 2; m++)
    for (int j = 0; j < 8; j++) {
      double fj = exp(-log(10000.0) * j / 8), tv = t_get(&ttin[0], m);
      CHECK(fabs(t_get(&teo[0], m * 16 + j) - cos(tv * fj)) < 1e-5, "temb cos [%d, %d]", m, j);
      CHECK(fabs(t_get(&teo[0], m * 16 + 8 + j) - sin(tv * fj)) < 1e-5, "temb sin [%d, %d]", m, j);
    }
  t_free_all(out, 1), t_free_all(in, 3), t_free_all(pin, 1), t_free_all(po, 2);
  t_free_all(tin, 2), t_free_all(to, 2), t_free_all(ttin, 1), t_free_all(teo, 1);
  t_free(&t);
}

static float sig(float x) { return 1.0f / (1.0f + expf(-x)); }

static void test_router_moe_markov(void) {
  T t;
  t_init(&t, 16);
  const int T_ = 6, H = 16, E = 8, K = 2, F = 4;
  h3_value *h = t_in(&t, "h", TY(H3_BF16, T_, H)), *w = t_in(&t, "w", TY(H3_F32, E, H));
  h3_value *bias = t_in(&t, "bias", TY(H3_F32, E));
  h3_tensor in[3] = {t_rand(&t, h->type, -2, 2), t_rand(&t, w->type, -0.5, 0.5),
                     t_rand(&t, bias->type, -0.01, 0.01)};
  t_set(&in[2], 5, 10.0); /* a large bias forces expert 5, its weight still from sigmoid */
  h3_attr ra[2] = {h3_attr_int(t.m, "k", K), h3_attr_float(t.m, "scale", 2.0)};
  h3_op *r = t_op(&t, H3_OP_ROUTER_TOPK, 3, (h3_value *[]){h, w, bias}, 2, ra);
  h3_tensor ro[2];
  CHECK(t_run(r, in, ro) == H3_OK, "router");
  for (int i = 0; i < T_; i++) {
    int32_t *ids = (int32_t *)ro[0].data + i * K;
    float *wt = (float *)ro[1].data + i * K;
    CHECK(ids[0] < ids[1] && (ids[0] == 5 || ids[1] == 5), "row %d ids %d %d", i, ids[0], ids[1]);
    CHECK(fabs(wt[0] + wt[1] - 2.0) < 1e-6 && wt[0] >= 0 && wt[1] >= 0, "row %d weights sum %g", i,
          wt[0] + wt[1]);
    float s[8], best = -1e30f;
    int other = -1;
    for (int e = 0; e < E; e++) {
      float acc = 0.0f;
      for (int k = 0; k < H; k++)
        acc += (float)t_get(&in[0], i * H + k) * (float)t_get(&in[1], e * H + k);
      s[e] = sig(acc);
      if (e != 5 && s[e] + (float)t_get(&in[2], e) > best)
        best = s[e] + (float)t_get(&in[2], e), other = e;
    }
    int lo = other < 5 ? other : 5, hi = other < 5 ? 5 : other;
    CHECK(ids[0] == lo && ids[1] == hi, "row %d: ids %d %d want %d %d", i, ids[0], ids[1], lo, hi);
    float sum = s[lo] + s[hi];
    CHECK(wt[0] == (s[lo] / sum) * 2.0f && wt[1] == (s[hi] / sum) * 2.0f, "row %d weights", i);
  }
  /* moe on the router's choice vs a straight loop of the contract */
  h3_value *gu = t_in(&t, "gu", TY(H3_BF16, E, 2 * F, H)),
           *dn = t_in(&t, "dn", TY(H3_BF16, E, H, F));
  h3_value *ids = t_in(&t, "ids", ro[0].type), *wts = t_in(&t, "wts", ro[1].type);
  h3_tensor min_[5] = {in[0], t_rand(&t, gu->type, -1, 1), t_rand(&t, dn->type, -1, 1), ro[0],
                       ro[1]};
  t_set(&min_[1], 2 * F * H + 3, 40.0); /* pushes some gate values past the limit */
  h3_attr ma[2] = {h3_attr_float(t.m, "alpha", 1.702), h3_attr_float(t.m, "limit", 7.0)};
  h3_op *moe = t_op(&t, H3_OP_MOE, 5, (h3_value *[]){h, gu, dn, ids, wts}, 2, ma);
  h3_tensor mo[1];
  CHECK(t_run(moe, min_, mo) == H3_OK, "moe");
  for (int i = 0; i < T_; i++) {
    float acc[16] = {0};
    for (int s = 0; s < K; s++) {
      int e = ((int32_t *)ro[0].data)[i * K + s];
      float we = ((float *)ro[1].data)[i * K + s], u[8], a[4];
      for (int o = 0; o < 2 * F; o++) {
        float d = 0.0f;
        for (int k = 0; k < H; k++)
          d += (float)t_get(&in[0], i * H + k) * (float)t_get(&min_[1], (e * 2 * F + o) * H + k);
        u[o] = rb(d);
      }
      for (int o = 0; o < F; o++) {
        float g = fminf(u[o], 7.0f), up = fmaxf(-7.0f, fminf(u[F + o], 7.0f));
        a[o] = rb((g * sig(1.702f * g)) * (up + 1.0f));
      }
      for (int o = 0; o < H; o++) {
        float d = 0.0f;
        for (int k = 0; k < F; k++) d += a[k] * (float)t_get(&min_[2], (e * H + o) * F + k);
        acc[o] += we * rb(d);
      }
    }
    for (int o = 0; o < H; o++)
      CHECK(t_get(&mo[0], i * H + o) == (double)acc[o], "moe [%d, %d]", i, o);
  }
  /* markov_draft chain */
  const int G = 3, V = 10, Rk = 4;
  h3_value *base = t_in(&t, "base", TY(H3_F32, G, V)), *w1 = t_in(&t, "w1", TY(H3_BF16, V, Rk));
  h3_value *w2 = t_in(&t, "w2", TY(H3_BF16, V, Rk)), *prev = t_in(&t, "prev", SCALAR(H3_I32));
  h3_tensor kin[4] = {t_rand(&t, base->type, -1, 1), t_rand(&t, w1->type, -1, 1),
                      t_rand(&t, w2->type, -1, 1), t_alloc(prev->type)};
  *(int32_t *)kin[3].data = 7;
  h3_op *mk = t_op(&t, H3_OP_MARKOV_DRAFT, 4, (h3_value *[]){base, w1, w2, prev}, 0, NULL);
  h3_tensor ko[2];
  CHECK(t_run(mk, kin, ko) == H3_OK, "markov_draft");
  int p = 7;
  for (int k = 0; k < G; k++) {
    int best = 0;
    float bv = 0;
    for (int v = 0; v < V; v++) {
      float s = 0.0f;
      for (int i = 0; i < Rk; i++)
        s += (float)t_get(&kin[2], v * Rk + i) * (float)t_get(&kin[1], p * Rk + i);
      float z = (float)t_get(&kin[0], k * V + v) + s;
      CHECK(t_get(&ko[0], k * V + v) == (double)z, "markov z [%d, %d]", k, v);
      if (v == 0 || z > bv) best = v, bv = z;
    }
    CHECK(((int32_t *)ko[1].data)[k] == best, "markov draft %d", k);
    p = best;
  }
  *(int32_t *)kin[3].data = 10;
  const char *msg = t_run_error(mk, kin);
  CHECK(strstr(msg, "prev = 10 is outside the vocabulary [0, 10)") != NULL, "message: %s", msg);
  t_free_all(ro, 2), t_free_all(mo, 1), t_free_all(ko, 2), t_free_all(kin, 4), t_free_all(in, 3);
  free(min_[1].data), free(min_[2].data);
  t_free(&t);
}

int main(void) {
  test_linear();
  test_attention();
  test_paged_sparse();
  test_block_attention();
  test_draft_batched();
  test_rope_and_tables();
  test_router_moe_markov();
  return t_report("test_ops_model");
}
