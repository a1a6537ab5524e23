/* test_ops_basic.c: CPU reference of the elementwise, data-movement, reduction and
 * generator ops, and `fused` regions at both tiers, against independent computations of
 * the ops.def contracts (random inputs, fixed seed). */
#include "harness.h"

static void test_binary_broadcast(void) {
  T t;
  t_init(&t, 1);
  h3_value *a = t_in(&t, "a", TY(H3_BF16, 4, 8)), *b = t_in(&t, "b", TY(H3_BF16, 8));
  h3_tensor in[2] = {t_rand(&t, a->type, -3, 3), t_rand(&t, b->type, 0.5, 2)};
  h3_opcode codes[] = {H3_OP_ADD, H3_OP_SUB, H3_OP_MUL, H3_OP_DIV, H3_OP_MAX, H3_OP_MIN};
  for (int c = 0; c < 6; c++) {
    h3_op *op = t_op(&t, codes[c], 2, (h3_value *[]){a, b}, 0, NULL);
    h3_tensor out[1];
    CHECK(t_run(op, in, out) == H3_OK, "run");
    CHECK(out[0].type.dtype == H3_BF16, "dtype");
    for (int64_t i = 0; i < 32; i++) {
      float x = (float)t_get(&in[0], i), y = (float)t_get(&in[1], i % 8), e;
      switch (codes[c]) {
      case H3_OP_ADD: e = x + y; break;
      case H3_OP_SUB: e = x - y; break;
      case H3_OP_MUL: e = x * y; break;
      case H3_OP_DIV: e = x / y; break;
      case H3_OP_MAX: e = x > y ? x : y; break;
      default: e = x < y ? x : y; break;
      }
      CHECK(t_get(&out[0], i) == rb(e), "%s[%lld]: %g vs %g", h3_opcode_name(codes[c]),
            (long long)i, t_get(&out[0], i), (double)rb(e));
    }
    t_free_all(out, 1);
  }
  /* a [4, 1] column broadcast against [1, 8] into f32 */
  h3_value *col = t_in(&t, "col", TY(H3_F32, 4, 1)), *row = t_in(&t, "row", TY(H3_F32, 1, 8));
  h3_tensor in2[2] = {t_rand(&t, col->type, -1, 1), t_rand(&t, row->type, -1, 1)};
  h3_op *op = t_op(&t, H3_OP_MUL, 2, (h3_value *[]){col, row}, 0, NULL);
  h3_tensor out[1];
  CHECK(t_run(op, in2, out) == H3_OK, "run");
  for (int r = 0; r < 4; r++)
    for (int k = 0; k < 8; k++)
      CHECK(t_get(&out[0], r * 8 + k) ==
                (double)((float)t_get(&in2[0], r) * (float)t_get(&in2[1], k)),
            "outer product [%d, %d]", r, k);
  t_free_all(out, 1);
  t_free_all(in, 2);
  t_free_all(in2, 2);
  t_free(&t);
}

static void test_int_ops(void) {
  T t;
  t_init(&t, 2);
  h3_value *a = t_in(&t, "a", TY(H3_I32, 6)), *b = t_in(&t, "b", TY(H3_I32, 6));
  h3_tensor in[2] = {t_alloc(a->type), t_alloc(b->type)};
  int32_t av[6] = {-7, 7, -7, 7, 5, -1}, bv[6] = {2, 2, -2, -2, 5, 3};
  int32_t div[6] = {-4, 3, 3, -4, 1, -1}, mod[6] = {1, 1, -1, -1, 0, 2};
  memcpy(in[0].data, av, sizeof av);
  memcpy(in[1].data, bv, sizeof bv);
  h3_op *d = t_op(&t, H3_OP_DIV, 2, (h3_value *[]){a, b}, 0, NULL);
  h3_op *m = t_op(&t, H3_OP_MOD, 2, (h3_value *[]){a, b}, 0, NULL);
  h3_tensor od[1], om[1];
  CHECK(t_run(d, in, od) == H3_OK && t_run(m, in, om) == H3_OK, "run");
  for (int i = 0; i < 6; i++) {
    CHECK(((int32_t *)od[0].data)[i] == div[i], "floor div %d / %d = %d", av[i], bv[i],
          ((int32_t *)od[0].data)[i]);
    CHECK(((int32_t *)om[0].data)[i] == mod[i], "python mod %d %% %d = %d", av[i], bv[i],
          ((int32_t *)om[0].data)[i]);
  }
  ((int32_t *)in[1].data)[2] = 0;
  const char *msg = t_run_error(d, in);
  CHECK(strstr(msg, "div: integer division by zero") != NULL, "message: %s", msg);
  t_free_all(od, 1);
  t_free_all(om, 1);
  t_free_all(in, 2);
  t_free(&t);
}

static void test_unary_and_cast(void) {
  T t;
  t_init(&t, 3);
  h3_value *x = t_in(&t, "x", TY(H3_BF16, 64));
  h3_tensor in[1] = {t_rand(&t, x->type, 0.1, 4)};
  h3_opcode codes[] = {H3_OP_NEG,  H3_OP_EXP,     H3_OP_LOG,  H3_OP_SQRT, H3_OP_RSQRT, H3_OP_ABS,
                       H3_OP_SILU, H3_OP_SIGMOID, H3_OP_TANH, H3_OP_COS,  H3_OP_SIN};
  for (int c = 0; c < 11; c++) {
    h3_op *op = t_op(&t, codes[c], 1, &x, 0, NULL);
    h3_tensor out[1];
    CHECK(t_run(op, in, out) == H3_OK, "run");
    for (int64_t i = 0; i < 64; i++) {
      double v = t_get(&in[0], i), e;
      switch (codes[c]) {
      case H3_OP_NEG: e = -v; break;
      case H3_OP_EXP: e = exp(v); break;
      case H3_OP_LOG: e = log(v); break;
      case H3_OP_SQRT: e = sqrt(v); break;
      case H3_OP_RSQRT: e = 1 / sqrt(v); break;
      case H3_OP_ABS: e = fabs(v); break;
      case H3_OP_SILU: e = v / (1 + exp(-v)); break;
      case H3_OP_SIGMOID: e = 1 / (1 + exp(-v)); break;
      case H3_OP_TANH: e = tanh(v); break;
      case H3_OP_COS: e = cos(v); break;
      default: e = sin(v); break;
      }
      /* one bf16 rounding of an fp32 result within 1 ulp: |err| <= 2^-8 relative (+tiny) */
      CHECK(fabs(t_get(&out[0], i) - e) <= fabs(e) * (1.0 / 128) + 1e-6, "%s(%g) = %g, want %g",
            h3_opcode_name(codes[c]), v, t_get(&out[0], i), e);
    }
    t_free_all(out, 1);
  }
  /* cast f32 -> bf16 ties to even; f32 -> i32 truncation toward zero */
  h3_value *f = t_in(&t, "f", TY(H3_F32, 6));
  h3_tensor fin[1] = {t_alloc(f->type)};
  float fv[6] = {1.00390625f, 1.01171875f, -2.5f, 2.75f, -0.99f, 3.999f};
  memcpy(fin[0].data, fv, sizeof fv);
  h3_attr to_bf16 = h3_attr_dtype(t.m, "dtype", H3_BF16),
          to_i32 = h3_attr_dtype(t.m, "dtype", H3_I32);
  h3_op *cb = t_op(&t, H3_OP_CAST, 1, &f, 1, &to_bf16),
        *ci = t_op(&t, H3_OP_CAST, 1, &f, 1, &to_i32);
  h3_tensor ob[1], oi[1];
  CHECK(t_run(cb, fin, ob) == H3_OK && t_run(ci, fin, oi) == H3_OK, "run");
  /* 1 + 2^-8 is a tie between 1 and 1 + 2^-7: even -> 1; 1 + 3*2^-8 -> 1 + 2^-6 (even) */
  CHECK(t_get(&ob[0], 0) == 1.0 && t_get(&ob[0], 1) == 1.015625, "bf16 ties: %g %g",
        t_get(&ob[0], 0), t_get(&ob[0], 1));
  int32_t want_i[6] = {1, 1, -2, 2, 0, 3};
  for (int i = 0; i < 6; i++) CHECK(((int32_t *)oi[0].data)[i] == want_i[i], "trunc %g", fv[i]);
  /* clamp with both bounds */
  h3_attr cl[2] = {h3_attr_float(t.m, "lo", -1.0), h3_attr_float(t.m, "hi", 2.5)};
  h3_op *cop = t_op(&t, H3_OP_CLAMP, 1, &f, 2, cl);
  h3_tensor oc[1];
  CHECK(t_run(cop, fin, oc) == H3_OK, "clamp");
  float want_c[6] = {1.00390625f, 1.01171875f, -1.0f, 2.5f, -0.99f, 2.5f};
  for (int i = 0; i < 6; i++) CHECK(t_get(&oc[0], i) == want_c[i], "clamp %g", fv[i]);
  t_free_all(ob, 1), t_free_all(oi, 1), t_free_all(oc, 1), t_free_all(fin, 1), t_free_all(in, 1);
  t_free(&t);
}

static void test_const_iota_sigma_randn(void) {
  T t;
  t_init(&t, 4);
  int64_t shape[2] = {3, 5};
  h3_attr ca[3] = {h3_attr_float(t.m, "value", 0.1), h3_attr_dtype(t.m, "dtype", H3_BF16),
                   h3_attr_ints(t.m, "shape", 2, shape)};
  h3_op *c = t_op(&t, H3_OP_CONST, 0, NULL, 3, ca);
  h3_attr ia[2] = {h3_attr_int(t.m, "n", 7), h3_attr_dtype(t.m, "dtype", H3_I32)};
  h3_op *io = t_op(&t, H3_OP_IOTA, 0, NULL, 2, ia);
  h3_tensor oc[1], oi[1];
  CHECK(t_run(c, NULL, oc) == H3_OK && t_run(io, NULL, oi) == H3_OK, "run");
  for (int i = 0; i < 15; i++) CHECK(t_get(&oc[0], i) == (double)rb(0.1f), "const");
  for (int i = 0; i < 7; i++) CHECK(((int32_t *)oi[0].data)[i] == i, "iota");
  /* sigma grid check values of docs/models/accelerations.md §1 */
  h3_attr sv[2] = {h3_attr_int(t.m, "n", 50), h3_attr_float(t.m, "shift", 12.0)};
  h3_attr sa[2] = {h3_attr_int(t.m, "n", 50), h3_attr_float(t.m, "shift", 3.0)};
  h3_op *sgv = t_op(&t, H3_OP_SIGMA_SCHEDULE, 0, NULL, 2, sv);
  h3_op *sga = t_op(&t, H3_OP_SIGMA_SCHEDULE, 0, NULL, 2, sa);
  h3_tensor ov[1], oa[1];
  CHECK(t_run(sgv, NULL, ov) == H3_OK && t_run(sga, NULL, oa) == H3_OK, "run");
  double vw[] = {1, 0.99827, 0.99647}, vt[] = {0.43902, 0.33803, 0.2, 0};
  double aw[] = {1, 0.99310, 0.98601}, at[] = {0.11321, 0.05882, 0};
  for (int i = 0; i < 3; i++) {
    CHECK(fabs(t_get(&ov[0], i) - vw[i]) < 5e-6, "video sigma %d = %.6f", i, t_get(&ov[0], i));
    CHECK(fabs(t_get(&oa[0], i) - aw[i]) < 5e-6, "audio sigma %d = %.6f", i, t_get(&oa[0], i));
  }
  for (int i = 0; i < 4; i++)
    CHECK(fabs(t_get(&ov[0], 46 + i) - vt[i]) < 5e-6, "video sigma %d = %.6f", 46 + i,
          t_get(&ov[0], 46 + i));
  for (int i = 0; i < 3; i++)
    CHECK(fabs(t_get(&oa[0], 47 + i) - at[i]) < 5e-6, "audio sigma %d = %.6f", 47 + i,
          t_get(&oa[0], 47 + i));
  /* randn: reproducible per seed, differs by seed and by stream, moments of N(0, 1) */
  int64_t rs[1] = {20000};
  h3_attr r1[2] = {h3_attr_ints(t.m, "shape", 1, rs), h3_attr_string(t.m, "stream", "video")};
  h3_attr r2[2] = {h3_attr_ints(t.m, "shape", 1, rs), h3_attr_string(t.m, "stream", "audio")};
  h3_op *rv = t_op(&t, H3_OP_RANDN, 0, NULL, 2, r1), *ra = t_op(&t, H3_OP_RANDN, 0, NULL, 2, r2);
  h3_tensor x1[1], x2[1], x3[1], x4[1];
  t_run_seed(rv, NULL, x1, 7), t_run_seed(rv, NULL, x2, 7), t_run_seed(rv, NULL, x3, 8);
  t_run_seed(ra, NULL, x4, 7);
  CHECK(memcmp(x1[0].data, x2[0].data, 80000) == 0, "randn same seed differs");
  CHECK(memcmp(x1[0].data, x3[0].data, 80000) != 0, "randn ignores the seed");
  CHECK(memcmp(x1[0].data, x4[0].data, 80000) != 0, "randn ignores the stream");
  double mean = 0, var = 0;
  for (int i = 0; i < 20000; i++) mean += t_get(&x1[0], i) / 20000;
  for (int i = 0; i < 20000; i++)
    var += (t_get(&x1[0], i) - mean) * (t_get(&x1[0], i) - mean) / 20000;
  CHECK(fabs(mean) < 0.03 && fabs(var - 1) < 0.05, "randn moments mean %g var %g", mean, var);
  t_free_all(oc, 1), t_free_all(oi, 1), t_free_all(ov, 1), t_free_all(oa, 1);
  t_free_all(x1, 1), t_free_all(x2, 1), t_free_all(x3, 1), t_free_all(x4, 1);
  t_free(&t);
}

static void test_movement(void) {
  T t;
  t_init(&t, 5);
  h3_value *x = t_in(&t, "x", TY(H3_BF16, 4, 6)), *y = t_in(&t, "y", TY(H3_BF16, 2, 6));
  h3_tensor in[2] = {t_rand(&t, x->type, -2, 2), t_rand(&t, y->type, -2, 2)};
  h3_attr sl[3] = {h3_attr_int(t.m, "axis", 1), h3_attr_int(t.m, "start", 2),
                   h3_attr_int(t.m, "len", 3)};
  h3_op *s = t_op(&t, H3_OP_SLICE, 1, &x, 3, sl);
  h3_attr ax0 = h3_attr_int(t.m, "axis", 0);
  h3_op *c = t_op(&t, H3_OP_CONCAT, 2, (h3_value *[]){x, y}, 1, &ax0);
  h3_attr pd[3] = {h3_attr_int(t.m, "axis", 1), h3_attr_int(t.m, "after", 2),
                   h3_attr_float(t.m, "value", 0.5)};
  h3_op *p = t_op(&t, H3_OP_PAD, 1, &x, 3, pd);
  int64_t rs[3] = {2, 3, 4};
  h3_attr ra = h3_attr_ints(t.m, "shape", 3, rs);
  h3_op *rsh = t_op(&t, H3_OP_RESHAPE, 1, &x, 1, &ra);
  h3_tensor ors[1];
  CHECK(t_run(rsh, in, ors) == H3_OK && ors[0].type.rank == 3, "reshape");
  CHECK(memcmp(ors[0].data, in[0].data, 48) == 0, "reshape keeps the elements in order");
  t_free_all(ors, 1);
  h3_tensor os[1], ocat[1], op[1];
  CHECK(t_run(s, in, os) == H3_OK && t_run(c, in, ocat) == H3_OK && t_run(p, in, op) == H3_OK,
        "run");
  for (int r = 0; r < 4; r++)
    for (int k = 0; k < 3; k++)
      CHECK(t_get(&os[0], r * 3 + k) == t_get(&in[0], r * 6 + 2 + k), "slice");
  for (int i = 0; i < 24; i++) CHECK(t_get(&ocat[0], i) == t_get(&in[0], i), "concat x");
  for (int i = 0; i < 12; i++) CHECK(t_get(&ocat[0], 24 + i) == t_get(&in[1], i), "concat y");
  for (int r = 0; r < 4; r++)
    for (int k = 0; k < 8; k++)
      CHECK(t_get(&op[0], r * 8 + k) == (k < 6 ? t_get(&in[0], r * 6 + k) : 0.5), "pad");
  /* gather with clamping, index, set_index, scatter_rows */
  h3_value *idx = t_in(&t, "idx", TY(H3_I32, 3)), *i0 = t_in(&t, "i", SCALAR(H3_I32));
  h3_value *v = t_in(&t, "v", TY(H3_BF16, 6)), *rows = t_in(&t, "rows", TY(H3_I32, 2));
  h3_tensor gi[2] = {in[0], t_alloc(idx->type)};
  int32_t iv[3] = {3, -5, 9};
  memcpy(gi[1].data, iv, sizeof iv);
  h3_op *g = t_op(&t, H3_OP_GATHER, 2, (h3_value *[]){x, idx}, 0, NULL);
  h3_tensor og[1];
  CHECK(t_run(g, gi, og) == H3_OK, "gather");
  int want_row[3] = {3, 0, 3};
  for (int r = 0; r < 3; r++)
    for (int k = 0; k < 6; k++)
      CHECK(t_get(&og[0], r * 6 + k) == t_get(&in[0], want_row[r] * 6 + k), "gather row %d", r);
  h3_attr off = h3_attr_int(t.m, "offset", 1);
  h3_op *ix = t_op(&t, H3_OP_INDEX, 2, (h3_value *[]){x, i0}, 1, &off);
  h3_tensor ii[2] = {in[0], t_alloc(i0->type)};
  *(int32_t *)ii[1].data = 2;
  h3_tensor oix[1];
  CHECK(t_run(ix, ii, oix) == H3_OK, "index");
  for (int k = 0; k < 6; k++) CHECK(t_get(&oix[0], k) == t_get(&in[0], 18 + k), "index row 3");
  *(int32_t *)ii[1].data = 3;
  const char *msg = t_run_error(ix, ii);
  CHECK(strstr(msg, "index: row 4 is outside [0, 4)") != NULL, "message: %s", msg);
  *(int32_t *)ii[1].data = 0;
  h3_op *si = t_op(&t, H3_OP_SET_INDEX, 3, (h3_value *[]){x, i0, v}, 1, &off);
  h3_tensor sin_[3] = {in[0], ii[1], t_rand(&t, v->type, -1, 1)}, osi[1];
  CHECK(t_run(si, sin_, osi) == H3_OK, "set_index");
  for (int i = 0; i < 24; i++)
    CHECK(t_get(&osi[0], i) == (i / 6 == 1 ? t_get(&sin_[2], i % 6) : t_get(&in[0], i)),
          "set_index %d", i);
  h3_op *sc = t_op(&t, H3_OP_SCATTER_ROWS, 3, (h3_value *[]){x, rows, y}, 0, NULL);
  h3_tensor scin[3] = {in[0], t_alloc(rows->type), in[1]}, osc[1];
  ((int32_t *)scin[1].data)[0] = 3, ((int32_t *)scin[1].data)[1] = 0;
  CHECK(t_run(sc, scin, osc) == H3_OK, "scatter_rows");
  for (int i = 0; i < 24; i++) {
    int r = i / 6;
    double e = r == 3 ? t_get(&in[1], i % 6) : r == 0 ? t_get(&in[1], 6 + i % 6) : t_get(&in[0], i);
    CHECK(t_get(&osc[0], i) == e, "scatter_rows %d", i);
  }
  ((int32_t *)scin[1].data)[1] = 4;
  msg = t_run_error(sc, scin);
  CHECK(strstr(msg, "scatter_rows: row index 4 (entry 1) is outside [0, 4)") != NULL, "message: %s",
        msg);
  t_free_all(os, 1), t_free_all(ocat, 1), t_free_all(op, 1), t_free_all(og, 1), t_free_all(oix, 1);
  t_free_all(osi, 1), t_free_all(osc, 1), t_free_all(in, 2);
  free(gi[1].data), free(ii[1].data), free(sin_[2].data), free(scin[1].data);
  t_free(&t);
}

static void test_kv_write(void) {
  T t;
  t_init(&t, 6);
  h3_value *cache = t_in(&t, "cache", TY(H3_BF16, 3, 4, 2, 4)),
           *x = t_in(&t, "x", TY(H3_BF16, 2, 2, 4));
  h3_value *slot = t_in(&t, "slot", TY(H3_I32, 2));
  h3_tensor in[3] = {t_rand(&t, cache->type, -1, 1), t_rand(&t, x->type, -1, 1),
                     t_alloc(slot->type)};
  ((int32_t *)in[2].data)[0] = 5, ((int32_t *)in[2].data)[1] = 11;
  h3_op *op = t_op(&t, H3_OP_KV_WRITE, 3, (h3_value *[]){cache, x, slot}, 0, NULL);
  h3_tensor out[1];
  CHECK(t_run(op, in, out) == H3_OK, "kv_write");
  for (int i = 0; i < 96; i++) {
    int row = i / 8;
    double e = row == 5    ? t_get(&in[1], i % 8)
               : row == 11 ? t_get(&in[1], 8 + i % 8)
                           : t_get(&in[0], i);
    CHECK(t_get(&out[0], i) == e, "kv_write element %d", i);
  }
  /* in place: out aliases the cache */
  h3_tensor alias[1] = {in[0]};
  h3_diag d;
  h3_diag_init(&d);
  CHECK(h3_cpu_run_op(op, in, 3, alias, 1, 1, 0, &d) == H3_OK, "in place");
  CHECK(memcmp(in[0].data, out[0].data, 192) == 0, "in-place kv_write differs");
  h3_diag_free(&d);
  ((int32_t *)in[2].data)[1] = 12;
  const char *msg = t_run_error(op, in);
  CHECK(strstr(msg, "kv_write: row index 12 (entry 1) is outside [0, 12)") != NULL, "message: %s",
        msg);
  t_free_all(out, 1), t_free_all(in, 3);
  t_free(&t);
}

static void test_reductions(void) {
  T t;
  t_init(&t, 7);
  h3_value *x = t_in(&t, "x", TY(H3_BF16, 5, 32)), *w = t_in(&t, "w", TY(H3_BF16, 32));
  h3_tensor in[2] = {t_rand(&t, x->type, -3, 3), t_rand(&t, w->type, -0.2, 0.2)};
  h3_attr na[2] = {h3_attr_float(t.m, "eps", 1e-6), h3_attr_float(t.m, "offset", 1.0)};
  h3_op *n = t_op(&t, H3_OP_RMS_NORM, 2, (h3_value *[]){x, w}, 2, na);
  h3_op *s = t_op(&t, H3_OP_REDUCE_SUM, 1, &x, 0, NULL);
  h3_op *am = t_op(&t, H3_OP_ARGMAX, 1, &x, 0, NULL);
  h3_tensor on[1], os[1], oa[1];
  CHECK(t_run(n, in, on) == H3_OK && t_run(s, in, os) == H3_OK, "run");
  for (int r = 0; r < 5; r++) {
    float ss = 0.0f, sum = 0.0f;
    for (int k = 0; k < 32; k++) {
      float v = (float)t_get(&in[0], r * 32 + k);
      ss += v * v;
      sum += v;
    }
    float inv = 1.0f / sqrtf(ss / 32.0f + 1e-6f);
    for (int k = 0; k < 32; k++) {
      float e = rb(((float)t_get(&in[0], r * 32 + k) * inv) * ((float)t_get(&in[1], k) + 1.0f));
      CHECK(t_get(&on[0], r * 32 + k) == e, "rms_norm [%d, %d]", r, k);
    }
    CHECK(t_get(&os[0], r) == (double)rb(sum), "reduce_sum row %d", r);
  }
  /* argmax ties: first index */
  for (int i = 0; i < 160; i++) t_set(&in[0], i, (i % 32) == 7 || (i % 32) == 20 ? 5.0 : -1.0);
  CHECK(t_run(am, in, oa) == H3_OK, "argmax");
  for (int r = 0; r < 5; r++) CHECK(((int32_t *)oa[0].data)[r] == 7, "argmax tie row %d", r);
  t_free_all(on, 1), t_free_all(os, 1), t_free_all(oa, 1), t_free_all(in, 2);
  t_free(&t);
}

/* fused region: y = bf16(bf16(x * s) + b) with x, s, b bf16: exact = unfused bitwise;
 * lossless = one rounding of fp32 (x*s + b). */
static void test_fused(void) {
  T t;
  t_init(&t, 8);
  h3_type ty = TY(H3_BF16, 16, 8);
  h3_value *x = t_in(&t, "x", ty), *s = t_in(&t, "s", ty), *b = t_in(&t, "b", ty);
  h3_tensor in[3] = {t_rand(&t, ty, -4, 4), t_rand(&t, ty, 0.5, 1.5), t_rand(&t, ty, -4, 4)};
  for (int tier = 0; tier < 2; tier++) {
    h3_attr fa[2] = {h3_attr_string(t.m, "kernel", "h3_fused_0"),
                     h3_attr_tier(t.m, "tier", tier ? H3_TIER_LOSSLESS : H3_TIER_EXACT)};
    h3_op *f = h3_build_op_typed(&t.b, H3_OP_FUSED, 3, (h3_value *[]){x, s, b}, 2, fa, 1, &ty, 1);
    h3_region *r = &f->regions[0];
    h3_value *ra = h3_region_add_arg(t.m, r, ty, "x", (h3_span){0});
    h3_value *rs = h3_region_add_arg(t.m, r, ty, "s", (h3_span){0});
    h3_value *rb_ = h3_region_add_arg(t.m, r, ty, "b", (h3_span){0});
    h3_builder inner = {t.m, r, NULL, {0}};
    h3_diag d;
    h3_diag_init(&d);
    h3_op *mul = h3_build_op(&inner, H3_OP_MUL, 2, (h3_value *[]){ra, rs}, 0, NULL, 0, &d);
    h3_op *add =
        h3_build_op(&inner, H3_OP_ADD, 2, (h3_value *[]){mul->results[0], rb_}, 0, NULL, 0, &d);
    h3_build_op_typed(&inner, H3_OP_YIELD, 1, add->results, 0, NULL, 0, NULL, 0);
    h3_diag_free(&d);
    h3_tensor out[1];
    CHECK(t_run(f, in, out) == H3_OK, "fused %d", tier);
    int differ = 0;
    for (int i = 0; i < 128; i++) {
      float xv = (float)t_get(&in[0], i), sv = (float)t_get(&in[1], i),
            bv = (float)t_get(&in[2], i);
      float exact = rb(rb(xv * sv) + bv), lossless = rb(xv * sv + bv);
      CHECK(t_get(&out[0], i) == (tier ? lossless : exact), "fused tier %d element %d", tier, i);
      differ += exact != lossless;
    }
    if (tier) CHECK(differ > 0, "random inputs should show a lossless/exact difference");
    t_free_all(out, 1);
  }
  t_free_all(in, 3);
  t_free(&t);
}

int main(void) {
  test_binary_broadcast();
  test_int_ops();
  test_unary_and_cast();
  test_const_iota_sigma_randn();
  test_movement();
  test_kv_write();
  test_reductions();
  test_fused();
  return t_report("test_ops_basic");
}
