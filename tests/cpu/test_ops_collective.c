/* test_ops_collective.c: shard, all_gather, all_to_all and all_reduce (ops.def, "several
 * ranks") on the cpu backend with N ranks as threads sharing one h3_comm: each rank's result
 * against an independent index computation of the contract, on random inputs (a different
 * one per rank, never zeros), for N = 1, 2, 3, 4 and several axes and dtypes. Also: the
 * roundtrips (shard then all_gather, all_to_all there and back) give x back bit for bit;
 * all_reduce is the rank-ordered widened sum rounded once, the same bits on every rank and
 * in a second run; a plan's rank count that differs from the backend's is an error that
 * says how to run it; a rank that aborts makes the others fail instead of waiting forever.
 */
#include "harness.h"

#include "h3/comm.h"

#include <pthread.h>

#define MAXN 4

/* One collective run: N backends of one communicator, each running op on its input. */
typedef struct {
  h3_backend *b;
  const h3_op *op;
  const h3_tensor *in; /* [n_in] */
  int n_in;
  h3_tensor out;
  h3_status st;
  bool abort_instead; /* this rank aborts the communicator instead of running the op */
  h3_comm *comm;
  char msg[256];
} rank_job;

static void *rank_main(void *p) {
  rank_job *j = p;
  if (j->abort_instead) {
    h3_comm_abort(j->comm);
    return NULL;
  }
  h3_diag d;
  h3_diag_init(&d);
  j->st = j->b->ops->run_op(j->b, j->op, j->in, j->n_in, &j->out, 1, &d);
  snprintf(j->msg, sizeof j->msg, "%s", j->st != H3_OK && d.head ? d.head->message : "");
  h3_diag_free(&d);
  return NULL;
}

/* Runs op on n ranks (x[r * op's operand count + i]: rank r's input i); out[r] get the
 * results. `abort_rank` >= 0 makes that rank abort instead. Returns the number of ranks that
 * failed. */
static int run_ranks(const h3_op *op, int n, const h3_tensor *x, h3_tensor *out, int abort_rank,
                     char msgs[][256]) {
  int n_in = op->n_operands;
  h3_diag d;
  h3_diag_init(&d);
  h3_comm *comm = h3_comm_new(n, &d);
  rank_job job[MAXN];
  pthread_t th[MAXN];
  for (int r = 0; r < n; r++) {
    h3_backend_options bo = {.threads = 1 + r % 2, .seed = 1, .comm = comm, .rank = r};
    out[r] = t_alloc(op->results[0]->type);
    job[r] = (rank_job){h3_backend_cpu_new(&bo, &d), op, &x[r * n_in], n_in, out[r], H3_OK,
                        r == abort_rank, comm, ""};
  }
  for (int r = 0; r < n; r++) pthread_create(&th[r], NULL, rank_main, &job[r]);
  int failed = 0;
  for (int r = 0; r < n; r++) {
    pthread_join(th[r], NULL);
    failed += job[r].st != H3_OK;
    if (msgs) memcpy(msgs[r], job[r].msg, sizeof job[r].msg);
    h3_backend_free(job[r].b);
  }
  h3_comm_free(comm);
  h3_diag_free(&d);
  return failed;
}

static h3_attr ai(T *t, const char *k, int64_t v) { return h3_attr_int(t->m, k, v); }

/* Linear index of coordinates c in type ty. */
static int64_t at(const h3_type *ty, const int64_t *c) {
  int64_t i = 0;
  for (int a = 0; a < ty->rank; a++) i = i * ty->dims[a] + c[a];
  return i;
}

/* Coordinates of linear index i in ty. */
static void coords(const h3_type *ty, int64_t i, int64_t *c) {
  for (int a = ty->rank - 1; a >= 0; a--) {
    c[a] = i % ty->dims[a];
    i /= ty->dims[a];
  }
}

static bool same_bits(const h3_tensor *a, const h3_tensor *b) {
  return h3_type_equal(&a->type, &b->type) &&
         memcmp(a->data, b->data, (size_t)h3_type_bytes(&a->type)) == 0;
}

/* Random inputs of type ty, one per rank, no element zero (floats: |v| in [0.25, 4); ints:
 * |v| in [1, 1000)). */
static void rand_inputs(T *t, h3_type ty, int n, h3_tensor *x) {
  bool ints = !h3_dtype_is_float(ty.dtype);
  for (int r = 0; r < n; r++) {
    x[r] = t_alloc(ty);
    for (int64_t i = 0; i < h3_type_numel(&ty); i++) {
      double v = ints ? (double)(1 + t_next(t) % 999) : t_uniform(t, 0.25, 4.0);
      t_set(&x[r], i, t_next(t) & 1 ? v : -v);
    }
  }
}

static void gather_case(T *t, int n, h3_dtype dt, int axis) {
  h3_type ty = TY(dt, 3, 4, 5);
  h3_value *xv = t_in(t, "x", ty);
  h3_attr a[2] = {ai(t, "ranks", n), ai(t, "axis", axis)};
  h3_op *g = t_op(t, H3_OP_ALL_GATHER, 1, &xv, 2, a);
  h3_op *s = t_op(t, H3_OP_SHARD, 1, &g->results[0], 2, a);
  h3_tensor x[MAXN], out[MAXN], back[MAXN];
  rand_inputs(t, ty, n, x);
  CHECK(run_ranks(g, n, x, out, -1, NULL) == 0, "all_gather n=%d axis=%d failed", n, axis);
  const h3_type *ot = &g->results[0]->type;
  for (int r = 0; r < n; r++) {
    int bad = 0;
    for (int64_t i = 0; i < h3_type_numel(ot); i++) {
      int64_t c[H3_MAX_RANK];
      coords(ot, i, c);
      int j = (int)(c[axis] / ty.dims[axis]);
      c[axis] %= ty.dims[axis];
      bad += t_get(&out[r], i) != t_get(&x[j], at(&ty, c));
    }
    CHECK(bad == 0, "all_gather n=%d axis=%d rank %d: %d wrong elements", n, axis, r, bad);
  }
  /* shard of the gathered tensor is each rank's x again */
  CHECK(run_ranks(s, n, out, back, -1, NULL) == 0, "shard n=%d failed", n);
  for (int r = 0; r < n; r++)
    CHECK(same_bits(&back[r], &x[r]), "shard(all_gather(x)) != x on rank %d (n=%d axis=%d)", r, n,
          axis);
  t_free_all(x, n), t_free_all(out, n), t_free_all(back, n);
}

static void all_to_all_case(T *t, int n, h3_dtype dt, int split, int concat) {
  int64_t d[3] = {4, 4, 3};
  d[split] *= n; /* split divides by n */
  h3_type ty = h3_type_make(dt, 3, d);
  h3_value *xv = t_in(t, "x", ty);
  h3_attr a[3] = {ai(t, "ranks", n), ai(t, "split_axis", split), ai(t, "concat_axis", concat)};
  h3_op *op = t_op(t, H3_OP_ALL_TO_ALL, 1, &xv, 3, a);
  h3_attr inv[3] = {ai(t, "ranks", n), ai(t, "split_axis", concat), ai(t, "concat_axis", split)};
  h3_op *back_op = t_op(t, H3_OP_ALL_TO_ALL, 1, &op->results[0], 3, inv);
  h3_tensor x[MAXN], out[MAXN], back[MAXN];
  rand_inputs(t, ty, n, x);
  CHECK(run_ranks(op, n, x, out, -1, NULL) == 0, "all_to_all n=%d failed", n);
  const h3_type *ot = &op->results[0]->type;
  int64_t part = ty.dims[split] / n;
  for (int r = 0; r < n; r++) {
    int bad = 0;
    for (int64_t i = 0; i < h3_type_numel(ot); i++) {
      int64_t c[H3_MAX_RANK];
      coords(ot, i, c);
      int j = (int)(c[concat] / ty.dims[concat]); /* from rank j, its part r */
      c[concat] %= ty.dims[concat];
      c[split] += r * part;
      bad += t_get(&out[r], i) != t_get(&x[j], at(&ty, c));
    }
    CHECK(bad == 0, "all_to_all n=%d split=%d concat=%d rank %d: %d wrong", n, split, concat, r,
          bad);
  }
  CHECK(run_ranks(back_op, n, out, back, -1, NULL) == 0, "inverse all_to_all n=%d failed", n);
  for (int r = 0; r < n; r++)
    CHECK(same_bits(&back[r], &x[r]), "all_to_all there and back != x on rank %d (n=%d)", r, n);
  t_free_all(x, n), t_free_all(out, n), t_free_all(back, n);
}

/* all_reduce of x's of dtype dt into result dtype rt (its `dtype`, when it differs). */
static void all_reduce_case(T *t, int n, h3_dtype dt, h3_dtype rt) {
  h3_type ty = TY(dt, 6, 7);
  h3_value *xv = t_in(t, "x", ty);
  h3_attr a[2] = {ai(t, "ranks", n), h3_attr_dtype(t->m, "dtype", rt)};
  h3_op *op = t_op(t, H3_OP_ALL_REDUCE, 1, &xv, rt == dt ? 1 : 2, a);
  h3_tensor x[MAXN], out[MAXN], again[MAXN];
  rand_inputs(t, ty, n, x);
  CHECK(run_ranks(op, n, x, out, -1, NULL) == 0, "all_reduce n=%d failed", n);
  CHECK(run_ranks(op, n, x, again, -1, NULL) == 0, "all_reduce n=%d (again) failed", n);
  h3_tensor want = t_alloc(op->results[0]->type);
  for (int64_t i = 0; i < h3_type_numel(&ty); i++) {
    if (dt == H3_F64) {
      double s = t_get(&x[0], i);
      for (int j = 1; j < n; j++) s += t_get(&x[j], i);
      t_set(&want, i, s);
    } else if (dt == H3_I32) {
      int64_t s = 0;
      for (int j = 0; j < n; j++) s += (int64_t)t_get(&x[j], i);
      t_set(&want, i, (double)s);
    } else {
      float s = (float)t_get(&x[0], i);
      for (int j = 1; j < n; j++) s += (float)t_get(&x[j], i);
      t_set(&want, i, s); /* one rounding of the fp32 sum */
    }
  }
  for (int r = 0; r < n; r++) {
    CHECK(same_bits(&out[r], &want), "all_reduce %s n=%d rank %d != the rank-ordered sum",
          h3_dtype_name(dt), n, r);
    CHECK(same_bits(&out[r], &again[r]), "all_reduce n=%d rank %d differs between runs", n, r);
  }
  free(want.data);
  t_free_all(x, n), t_free_all(out, n), t_free_all(again, n);
}

/* moe {ranks = n}: rank r holds experts [r*E/n, (r+1)*E/n) of E (ids global); with top-2
 * routing the rank-ordered fp32 sum of the ranks' outputs is bitwise the one-rank moe over
 * all E experts (each row's two contributions are added in ascending id order either way). */
static void moe_case(T *t, int n) {
  const int64_t T_ = 5, H = 8, F = 4, E = 2 * n, k = 2;
  h3_type ty[5] = {TY(H3_BF16, T_, H), {H3_BF16, 3, {E, 2 * F, H}}, {H3_BF16, 3, {E, H, F}},
                   TY(H3_I32, T_, k), TY(H3_F32, T_, k)};
  h3_value *v[5], *vp[5];
  for (int i = 0; i < 5; i++) {
    v[i] = t_in(t, "x", ty[i]);
    h3_type p = ty[i];
    if (i == 1 || i == 2) p.dims[0] = E / n;
    vp[i] = t_in(t, "x", p);
  }
  h3_attr ma[3] = {h3_attr_float(t->m, "alpha", 1.702), h3_attr_float(t->m, "limit", 7.0),
                   ai(t, "ranks", n)};
  h3_op *whole = t_op(t, H3_OP_MOE, 5, v, 2, ma), *part = t_op(t, H3_OP_MOE, 5, vp, 3, ma);
  h3_tensor in[5], x[MAXN * 5], out[MAXN], want; /* t_run allocates want */
  for (int i = 0; i < 5; i++) {
    in[i] = t_alloc(ty[i]);
    for (int64_t j = 0; j < h3_type_numel(&ty[i]); j++)
      t_set(&in[i], j, i == 3 ? (double)(j % k == 0 ? t_next(t) % (E / 2) : E / 2 + t_next(t) % (E / 2))
                              : t_uniform(t, -1.0, 1.0));
  }
  for (int r = 0; r < n; r++)
    for (int i = 0; i < 5; i++) {
      x[r * 5 + i] = in[i]; /* the expert weights: rank r's slice, a view of its experts */
      if (i == 1 || i == 2) {
        x[r * 5 + i].type = vp[i]->type;
        x[r * 5 + i].data = (char *)in[i].data + r * h3_type_bytes(&vp[i]->type);
      }
    }
  CHECK(t_run(whole, in, &want) == H3_OK, "moe over all %lld experts", (long long)E);
  CHECK(run_ranks(part, n, x, out, -1, NULL) == 0, "moe {ranks = %d} failed", n);
  h3_tensor sum = t_alloc(want.type);
  for (int64_t i = 0; i < h3_type_numel(&want.type); i++) {
    float s = (float)t_get(&out[0], i);
    for (int r = 1; r < n; r++) s += (float)t_get(&out[r], i);
    t_set(&sum, i, s);
  }
  CHECK(same_bits(&sum, &want), "moe {ranks = %d}: the ranks' sum != the one-rank moe", n);
  t_free_all(in, 5), t_free_all(out, n);
  free(sum.data), free(want.data);
}

/* A plan of 2 ranks on a backend without a communicator; a rank that aborts. */
static void error_cases(T *t) {
  h3_value *xv = t_in(t, "x", TY(H3_F32, 4, 2));
  h3_attr a[2] = {ai(t, "ranks", 2), ai(t, "axis", 0)};
  h3_op *g = t_op(t, H3_OP_ALL_GATHER, 1, &xv, 2, a);
  h3_tensor x[MAXN], out[MAXN];
  rand_inputs(t, xv->type, 2, x);
  const char *msg = t_run_error(g, x);
  CHECK(strstr(msg, "compiled for 2 ranks but runs on 1") != NULL, "got '%s'", msg);
  char msgs[MAXN][256];
  CHECK(run_ranks(g, 2, x, out, 0, msgs) == 1, "an aborted communicator must fail rank 1");
  CHECK(strstr(msgs[1], "another rank failed") != NULL, "got '%s'", msgs[1]);
  t_free_all(x, 2), t_free_all(out, 2);
}

int main(void) {
  T t;
  t_init(&t, 23);
  for (int n = 1; n <= MAXN; n++) {
    for (int axis = 0; axis < 3; axis++) gather_case(&t, n, axis == 1 ? H3_F32 : H3_BF16, axis);
    all_to_all_case(&t, n, H3_BF16, 1, 0); /* Ulysses: [rows/N, heads, D] -> [rows, heads/N, D] */
    all_to_all_case(&t, n, H3_BF16, 0, 1); /* and back */
    all_to_all_case(&t, n, H3_I32, 2, 0);
    all_reduce_case(&t, n, H3_BF16, H3_BF16);
    all_reduce_case(&t, n, H3_F32, H3_F32);
    all_reduce_case(&t, n, H3_F32, H3_BF16); /* a split linear's fp32 partial sums */
    all_reduce_case(&t, n, H3_F64, H3_F64);
    all_reduce_case(&t, n, H3_I32, H3_I32);
    if (n > 1) moe_case(&t, n);
  }
  error_cases(&t);
  t_free(&t);
  return t_report("test_ops_collective");
}
