/* nvfp4_bench.c: the DSpark draft's NVFP4 GEMM (linear_nvfp4, docs/nvfp4.md) against
 * cuBLASLt's bf16 GEMM (h3's linear) at the draft's shapes, on the cuda backend (issue 19,
 * item 4), timed with CUDA events, one line per (weight, M):
 *
 *   nvfp4_bench [--rows M,M,...] [--iters N] [--warm-seconds W] [--no-skinny] [--no-lm-head] [--hot]
 *
 * Every run of an op (warm-up and timed) starts with the card's L2 emptied: a one-row linear
 * over a 256 MiB bf16 weight runs first, outside the timed run (it reads, so the L2 holds clean
 * lines: nothing is written back during the timed op), as in a model whose other ops read
 * their own weights in between: an NVFP4 weight of 28-85 MB would otherwise stay in the H200's
 * 60 MB L2 from one run to the next. --hot: runs back to back, the L2 as the previous run left
 * it.
 *
 * Weights: random Gaussian bf16 [N, K] quantized on the host (h3_nvfp4_quantize); x uniform
 * in [-1, 1). For each shape: linear_nvfp4(x, packed, scale, g) and linear(x, w_b) * g with
 * w_b = e2m1 * e4m3 (the same weight, exact in bf16) through cuBLASLt; the NMSE between the
 * two results (equal up to summation order), each median time, the NVFP4 kernel's weight
 * bandwidth (packed + scale bytes / time) and the speed-up over bf16. At M <= 16 also
 * (unless --no-skinny) the skinny bf16 kernel (h3's linear under H3_LINEAR_FORM=skinny,
 * kernels/skinny_gemm.cu) on the same x and w_b: its median time, its speed-up over
 * cuBLASLt, its weight bandwidth (N K 2 bytes / time) and the NMSE of its f32 result against
 * cuBLASLt's ("-" where not run). Then lm_head [200064, 6144] at M = 1, bf16 only (random
 * w_b; the nvfp4 columns "-"; not with --no-lm-head). Columns:
 *
 *   weight M N K | nvfp4 ms  bf16 ms  speed-up  GB/s  nmse | tiled ms  vs bf16  tl GB/s  tl nmse
 *   | rows ms  vs bf16  rw GB/s  rw nmse | wg ms  vs bf16  wg GB/s  wg nmse
 *   | single ms  vs bf16  sg GB/s  sg nmse | skinny ms  vs bf16  sk GB/s  sk nmse
 *
 * where nvfp4 is linear_nvfp4 as it runs by default (its skinny form at 1-4 rows, its row-pair
 * form at 5-8, its warpgroup form at 9-16, its dequantized form above 64 rows, else its tiled
 * kernels: docs/nvfp4.md), tiled the same op under H3_NVFP4_FORM=tiled where the default is
 * another form, rows and wg under H3_NVFP4_FORM=rows and wg (the row-pair and the warpgroup
 * form, at 5-16 rows), single under H3_NVFP4_FORM=skinny where the skinny form applies and is
 * not the default (5-8 rows: one weight tile a warp) ("-" between), each NMSE against the
 * default's result. Lines "h3bench NAME ms" for scripts (nvfp4_, nvfp4tiled_, nvfp4rows_,
 * nvfp4wg_, nvfp4single_, bf16_, skinny_ +
 * weight _m + M). Exit 77 without a GPU, 1 when a result is off (NMSE above
 * bf16's limit) or the device lacks the memory.
 */
#include "gpu_common.h"

#include "cuda_nvfp4.h"
#include "cuda_skinny_gemm.h"

#include "h3/bf16.h"
#include "h3/cuda_backend.h"
#include "h3/nvfp4.h"
#include "h3/op_registry.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  h3_backend *b;
  h3_module *m;
  h3_graph *g;
  h3_builder bld;
  h3_diag d;
  gpu_op_run evict; /* the L2's eviction (evict.op NULL: --hot) */
  h3_tensor evict_in[2], evict_out;
} bench;

/* Median ms of op (gpu_time_op_cold, or gpu_time_op under --hot); -1 on error. */
static double time_op(bench *x, const h3_op *op, const h3_tensor *in, int n_in, const h3_tensor *out, int iters,
                      double warm_s) {
  return gpu_time_op_cold(x->b, op, in, n_in, out, iters, 3, warm_s, x->evict.op ? &x->evict : NULL, &x->d);
}

static h3_value *input(bench *x, const char *name, h3_dtype dt, int rank, const int64_t *dims) {
  return h3_graph_add_input(x->m, x->g, name, h3_type_make(dt, rank, dims), (h3_span){0});
}

static void *upload(bench *x, const void *host, size_t bytes) {
  void *dev = x->b->ops->alloc(x->b, bytes ? bytes : 1);
  if (dev && x->b->ops->upload(x->b, dev, host, bytes, &x->d) != H3_OK) {
    x->b->ops->release(x->b, dev);
    return NULL;
  }
  return dev;
}

/* got's NMSE against want (host tensors of type t: gpu_compare's), NaN where a NaN or Inf
 * of one is not the other's (so that no limit accepts it). */
static double nmse_of(const h3_type *t, const void *got, const void *want) {
  const gpu_cmp c = gpu_compare(t, got, want);
  return c.mismatched_special ? NAN : c.nmse;
}

/* The skinny kernel's columns for linear(x, w) -> f32 [M, N] = lop's: a second op on the same
 * values, prepared (at its first run) under H3_LINEAR_FORM=skinny; its median ms (< 0: failed)
 * and in *e its NMSE against want (cuBLASLt's result, host f32 [M, N]). */
static double time_skinny(bench *x, h3_value *xv, h3_value *wv, const h3_tensor *lin, const float *want,
                          int iters, double warm_s, double *e) {
  h3_attr f32 = h3_attr_dtype(x->m, "dtype", H3_F32);
  const h3_op *sop = h3_build_op(&x->bld, H3_OP_LINEAR, 2, (h3_value *[]){xv, wv}, 1, &f32, 0, &x->d);
  const int64_t M = xv->type.dims[0], N = wv->type.dims[0];
  h3_type yt = h3_type_make(H3_F32, 2, (int64_t[]){M, N});
  h3_tensor out = {yt, x->b->ops->alloc(x->b, (size_t)h3_type_bytes(&yt))};
  float *got = malloc((size_t)(M * N) * 4);
  setenv("H3_LINEAR_FORM", "skinny", 1);
  double ts = sop && out.data && got ? time_op(x, sop, lin, 2, &out, iters, warm_s) : -1;
  unsetenv("H3_LINEAR_FORM");
  *e = -1;
  if (ts >= 0 && x->b->ops->download(x->b, got, out.data, (size_t)(M * N) * 4, &x->d) == H3_OK)
    *e = nmse_of(&yt, got, want);
  free(got);
  if (out.data) x->b->ops->release(x->b, out.data);
  return ts;
}

/* linear_nvfp4 `qop` once more under H3_NVFP4_FORM=form (the form is picked at every run):
 * its median ms (< 0: failed) and in *e its NMSE against the default form's bf16 result
 * `want16` (host bf16 [M, N]). */
static double time_nvfp4_form(bench *x, const char *form, const h3_op *qop, const h3_tensor *qin,
                              const h3_tensor *qout, const uint16_t *want16, int iters, double warm_s, double *e) {
  const int64_t M = qop->operands[0]->type.dims[0], N = qop->operands[1]->type.dims[0];
  uint16_t *got = malloc((size_t)(M * N) * 2);
  setenv("H3_NVFP4_FORM", form, 1);
  double t = got ? time_op(x, qop, qin, 4, qout, iters, warm_s) : -1;
  unsetenv("H3_NVFP4_FORM");
  *e = -1;
  if (t >= 0 && x->b->ops->download(x->b, got, qout->data, (size_t)(M * N) * 2, &x->d) == H3_OK)
    *e = nmse_of(&qout->type, got, want16);
  free(got);
  return t;
}

/* The 4 columns of a form of linear_nvfp4 (time t ms, NMSE e, the bf16 time tl, the weight's
 * bytes); "-" where not run. */
static void print_form(double t, double e, double tl, double wbytes, bool run) {
  if (run)
    printf(" %10.4f %8.2f %8.0f %9.2g", t, t > 0 && tl > 0 ? tl / t : 0.0, t > 0 ? wbytes / (t * 1e-3) / 1e9 : 0.0, e);
  else
    printf(" %10s %8s %8s %9s", "-", "-", "-", "-");
}

/* The skinny columns of one line (M > 16 or not run: "-"), its h3bench line; false when it
 * failed. */
static bool print_skinny(const char *name, int64_t M, int64_t N, int64_t K, double tl, double ts, double e,
                         bool run) {
  if (M > CU_SKINNY_MAX_ROWS || !run) {
    printf(" %10s %8s %8s %9s\n", "-", "-", "-", "-");
    return true;
  }
  printf(" %10.4f %8.2f %8.0f %9.2g\n", ts, ts > 0 && tl > 0 ? tl / ts : 0.0,
         ts > 0 ? (double)(N * K * 2) / (ts * 1e-3) / 1e9 : 0.0, e);
  printf("h3bench skinny_%s_m%lld %.5f\n", name, (long long)M, ts);
  return ts >= 0 && e >= 0 && e <= gpu_nmse_limit(H3_BF16);
}

/* lm_head [200064, 6144] at M = 1 through cuBLASLt (f32 out) and the skinny kernel; x uniform
 * in [-1, 1), the weight's rows 1024 random ones in [-0.02, 0.02) over and over (drawing all
 * 1.2e9 would take the host seconds); false when it failed. */
static bool lm_head(bench *x, gpu_rng *r, int iters, double warm_s) {
  const int64_t N = 200064, K = 6144, M = 1;
  h3_value *xv = input(x, "x", H3_BF16, 2, (int64_t[]){M, K});
  h3_value *wv = input(x, "w", H3_BF16, 2, (int64_t[]){N, K});
  h3_attr f32 = h3_attr_dtype(x->m, "dtype", H3_F32);
  const h3_op *lop = h3_build_op(&x->bld, H3_OP_LINEAR, 2, (h3_value *[]){xv, wv}, 1, &f32, 0, &x->d);
  h3_type yt = h3_type_make(H3_F32, 2, (int64_t[]){M, N});
  const h3_type rt = h3_type_make(H3_BF16, 2, (int64_t[]){1024, K});
  void *rows = gpu_host_random(r, &rt, -0.02, 0.02, 1), *hx = gpu_host_random(r, &xv->type, -1.0, 1.0, 1);
  void *hw = rows ? malloc((size_t)(N * K) * 2) : NULL;
  for (int64_t n = 0; hw && n < N; n += 1024)
    memcpy((char *)hw + n * K * 2, rows, (size_t)((N - n < 1024 ? N - n : 1024) * K) * 2);
  void *dw = hw ? upload(x, hw, (size_t)(N * K) * 2) : NULL, *dx = hx ? upload(x, hx, (size_t)K * 2) : NULL;
  h3_tensor lin[2] = {{xv->type, dx}, {wv->type, dw}};
  h3_tensor lout = {yt, x->b->ops->alloc(x->b, (size_t)h3_type_bytes(&yt))};
  float *c = malloc((size_t)N * 4);
  double tl = lop && dw && dx && lout.data && c ? time_op(x, lop, lin, 2, &lout, iters, warm_s) : -1;
  double ts = -1, e = -1;
  if (tl >= 0 && x->b->ops->download(x->b, c, lout.data, (size_t)N * 4, &x->d) == H3_OK)
    ts = time_skinny(x, xv, wv, lin, c, iters, warm_s, &e);
  printf("%-10s %6lld %7lld %7lld %10s %10.4f %9s %8s %9s", "lm_head", (long long)M, (long long)N, (long long)K, "-", tl,
         "-", "-", "-");
  for (int f = 0; f < 4; f++) print_form(0, 0, 0, 0, false);
  bool ok = print_skinny("lm_head", M, N, K, tl, ts, e, true) && tl >= 0;
  printf("h3bench bf16_lm_head_m1 %.5f\n", tl);
  free(rows), free(hw), free(hx), free(c);
  if (dw) x->b->ops->release(x->b, dw);
  if (dx) x->b->ops->release(x->b, dx);
  if (lout.data) x->b->ops->release(x->b, lout.data);
  return ok;
}

/* The eviction op: linear(x [1, 8192], w [16384, 8192] bf16 zeros) -> f32 [1, 16384], a read
 * of 256 MiB; false when the device lacks the memory. */
static bool make_evict(bench *x) {
  const int64_t N = 16384, K = 8192;
  h3_value *xv = input(x, "evict_x", H3_BF16, 2, (int64_t[]){1, K});
  h3_value *wv = input(x, "evict_w", H3_BF16, 2, (int64_t[]){N, K});
  h3_attr f32 = h3_attr_dtype(x->m, "dtype", H3_F32);
  x->evict.op = h3_build_op(&x->bld, H3_OP_LINEAR, 2, (h3_value *[]){xv, wv}, 1, &f32, 0, &x->d);
  void *zeros = calloc((size_t)(N * K), 2);
  x->evict_in[0] = (h3_tensor){xv->type, zeros ? upload(x, zeros, (size_t)K * 2) : NULL};
  x->evict_in[1] = (h3_tensor){wv->type, zeros ? upload(x, zeros, (size_t)(N * K) * 2) : NULL};
  const h3_type yt = h3_type_make(H3_F32, 2, (int64_t[]){1, N});
  x->evict_out = (h3_tensor){yt, x->b->ops->alloc(x->b, (size_t)h3_type_bytes(&yt))};
  free(zeros);
  x->evict.in = x->evict_in, x->evict.n_in = 2, x->evict.out = &x->evict_out;
  return x->evict.op && x->evict_in[0].data && x->evict_in[1].data && x->evict_out.data;
}

static void free_evict(bench *x) {
  for (int i = 0; i < 2; i++)
    if (x->evict_in[i].data) x->b->ops->release(x->b, x->evict_in[i].data);
  if (x->evict_out.data) x->b->ops->release(x->b, x->evict_out.data);
}

static int parse_rows(const char *s, int64_t *rows, int cap) {
  int n = 0;
  for (const char *p = s; *p && n < cap;) {
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end == p || v < 1) return -1;
    rows[n++] = v;
    p = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return -1;
  }
  return n;
}

int main(int argc, char **argv) {
  int64_t rows[16] = {1, 8, 16, 64, 576};
  int n_rows = 5, iters = 20;
  double warm_s = 0.5;
  bool skinny = true, head = true, hot = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--no-skinny")) skinny = false;
    else if (!strcmp(argv[i], "--hot")) hot = true;
    else if (!strcmp(argv[i], "--no-lm-head")) head = false;
    else if (i + 1 < argc && !strcmp(argv[i], "--rows")) n_rows = parse_rows(argv[++i], rows, 16);
    else if (i + 1 < argc && !strcmp(argv[i], "--iters")) iters = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--warm-seconds")) warm_s = atof(argv[++i]);
    else n_rows = -1;
    if (n_rows < 1 || iters < 1 || !(warm_s >= 0 && warm_s <= 600)) {
      fprintf(stderr, "usage: nvfp4_bench [--rows M,M,...] [--iters N >= 1] [--warm-seconds 0..600] [--no-skinny] "
                      "[--no-lm-head] [--hot]\n");
      return 2;
    }
  }
  setvbuf(stdout, NULL, _IOLBF, 0); /* each line out at once, also into a file a timeout cuts short */
  gpu_require();
  bench x;
  h3_diag_init(&x.d);
  h3_cuda_options co = {0};
  h3_backend_options bo = {.threads = 1, .seed = 1};
  x.b = h3_backend_cuda_new(&bo, &co, &x.d);
  if (!x.b) {
    h3_diag_print(&x.d, stderr);
    return 1;
  }
  x.m = h3_module_new("bench", "small");
  x.g = h3_module_add_graph(x.m, "g", H3_GRAPH_FUNCTION, (h3_span){0});
  x.bld = (h3_builder){x.m, &x.g->body, NULL, {0}};
  x.evict = (gpu_op_run){0};
  x.evict_in[0].data = x.evict_in[1].data = x.evict_out.data = NULL;
  if (!hot && !make_evict(&x)) {
    fprintf(stderr, "nvfp4_bench: no device memory for the L2's eviction (--hot runs without it)\n");
    h3_diag_print(&x.d, stderr);
    free_evict(&x);
    h3_module_free(x.m);
    h3_backend_free(x.b);
    return 1;
  }
  printf("device: %s; the DSpark draft's NVFP4 weights (small / full widths) against bf16; %s\n",
         h3_backend_device_name(x.b), hot ? "runs back to back (--hot)" : "the L2 emptied before every run");
  printf("%-10s %6s %7s %7s %10s %10s %9s %8s %9s", "weight", "M", "N", "K", "nvfp4 ms", "bf16 ms", "speed-up", "GB/s",
         "nmse");
  static const char *const forms[5] = {"tiled", "rows", "wg", "single", "skinny"}, *const tags[5] = {"tl", "rw", "wg",
                                                                                                   "sg", "sk"};
  for (int f = 0; f < 5; f++) {
    char ms[16], gb[16], nm[16];
    snprintf(ms, sizeof ms, "%s ms", forms[f]), snprintf(gb, sizeof gb, "%s GB/s", tags[f]);
    snprintf(nm, sizeof nm, "%s nmse", tags[f]);
    printf(" %10s %8s %8s %9s", ms, "vs bf16", gb, nm);
  }
  printf("\n");
  /* dspark.fc [H, 3H], o_proj [H, nq d], gate_up [2 F_d, H], down [H, F_d] at H = 6144 */
  static const char *const names[4] = {"fc", "o_proj", "gate_up", "down"};
  static const int64_t shapes[4][2] = {{6144, 18432}, {6144, 8192}, {24576, 6144}, {6144, 12288}};
  gpu_rng r;
  gpu_rng_seed(&r, 7);
  int rc = 0;
  for (int s = 0; s < 4 && rc == 0; s++) {
    int64_t N = shapes[s][0], K = shapes[s][1];
    float *w = malloc((size_t)(N * K) * sizeof *w);
    uint8_t *pk = malloc((size_t)(N * K / 2)), *sc = malloc((size_t)(N * K / 16));
    uint16_t *wb = malloc((size_t)(N * K) * sizeof *wb);
    float g = 0;
    int64_t bad;
    if (!w || !pk || !sc || !wb) return 1;
    for (int64_t i = 0; i < N * K; i += 2) { /* Box-Muller pairs of gpu_uniform (N K even), scale 1/sqrt(K) */
      double u1 = gpu_uniform(&r, 1e-12, 1.0), u2 = gpu_uniform(&r, 0.0, 1.0);
      double rad = sqrt(-2.0 * log(u1) / (double)K), a = 6.283185307179586 * u2;
      w[i] = (float)(rad * cos(a)), w[i + 1] = (float)(rad * sin(a));
    }
    if (!h3_nvfp4_quantize(w, false, N, K, pk, sc, &g, &bad)) return 1;
    for (int64_t n = 0; n < N; n++)
      for (int64_t k = 0; k < K; k++) wb[n * K + k] = h3_f32_to_bf16(h3_nvfp4_unscaled(pk, sc, K, n, k));
    void *dpk = upload(&x, pk, (size_t)(N * K / 2)), *dsc = upload(&x, sc, (size_t)(N * K / 16));
    void *dg = upload(&x, &g, sizeof g), *dwb = upload(&x, wb, (size_t)(N * K) * 2);
    for (int ri = 0; ri < n_rows && rc == 0; ri++) {
      int64_t M = rows[ri];
      h3_value *xv = input(&x, "x", H3_BF16, 2, (int64_t[]){M, K});
      h3_value *pv = input(&x, "p", H3_U8, 2, (int64_t[]){N, K / 2});
      h3_value *sv = input(&x, "s", H3_U8, 2, (int64_t[]){N, K / 16});
      h3_value *gv = input(&x, "g", H3_F32, 1, (int64_t[]){1});
      h3_value *wv = input(&x, "w", H3_BF16, 2, (int64_t[]){N, K});
      const h3_op *qop = h3_build_op(&x.bld, H3_OP_LINEAR_NVFP4, 4, (h3_value *[]){xv, pv, sv, gv}, 0, NULL, 0, &x.d);
      h3_attr f32 = h3_attr_dtype(x.m, "dtype", H3_F32);
      const h3_op *lop = h3_build_op(&x.bld, H3_OP_LINEAR, 2, (h3_value *[]){xv, wv}, 1, &f32, 0, &x.d);
      h3_type xt = xv->type, yq = h3_type_make(H3_BF16, 2, (int64_t[]){M, N});
      h3_type yl = h3_type_make(H3_F32, 2, (int64_t[]){M, N});
      void *hx = gpu_host_random(&r, &xt, -1.0, 1.0, 1);
      void *dx = hx ? upload(&x, hx, (size_t)h3_type_bytes(&xt)) : NULL;
      h3_tensor qin[4] = {{xt, dx}, {pv->type, dpk}, {sv->type, dsc}, {gv->type, dg}};
      h3_tensor lin[2] = {{xt, dx}, {wv->type, dwb}};
      h3_tensor qout = {yq, x.b->ops->alloc(x.b, (size_t)h3_type_bytes(&yq))};
      h3_tensor lout = {yl, x.b->ops->alloc(x.b, (size_t)h3_type_bytes(&yl))};
      double tq = qop && lop && dx && dpk && dsc && dg && dwb && qout.data && lout.data
                      ? time_op(&x, qop, qin, 4, &qout, iters, warm_s) : -1;
      double tl = tq >= 0 ? time_op(&x, lop, lin, 2, &lout, iters, warm_s) : -1;
      double e = -1;
      float *a = malloc((size_t)(M * N) * 4), *c = malloc((size_t)(M * N) * 4);
      uint16_t *q16 = malloc((size_t)(M * N) * 2);
      if (tl >= 0 && a && c && q16 && x.b->ops->download(x.b, q16, qout.data, (size_t)(M * N) * 2, &x.d) == H3_OK &&
          x.b->ops->download(x.b, c, lout.data, (size_t)(M * N) * 4, &x.d) == H3_OK) {
        double num = 0, den = 0;
        for (int64_t i = 0; i < M * N; i++) {
          a[i] = h3_bf16_to_f32(q16[i]);
          double want = (double)h3_bf16_to_f32(h3_f32_to_bf16(c[i] * g));
          num += (a[i] - want) * (a[i] - want), den += want * want;
        }
        e = den > 0 ? num / den : num;
      }
      const double wbytes = (double)(N * K / 2 + N * K / 16);
      double gbs = tq > 0 ? wbytes / (tq * 1e-3) / 1e9 : 0;
      double ts = -1, es = -1, tn = -1, en = -1, tr = -1, er = -1, tw = -1, ew = -1, tg = -1, eg = -1;
      if (skinny && e >= 0 && M <= CU_SKINNY_MAX_ROWS) ts = time_skinny(&x, xv, wv, lin, c, iters, warm_s, &es);
      const bool tiled_too = e >= 0 && (cu_nvfp4_skinny_applies(M, K, true) || cu_nvfp4_rows_applies(M, K, true) ||
                                        cu_nvfp4_dequant_applies(M, K, true));
      const bool single_too = e >= 0 && cu_nvfp4_rows_applies(M, K, true) && cu_nvfp4_skinny_applies(M, K, true);
      const bool rows_too = e >= 0 && cu_nvfp4_rows_applies(M, K, true);
      if (tiled_too) tn = time_nvfp4_form(&x, "tiled", qop, qin, &qout, q16, iters, warm_s, &en);
      if (rows_too) tr = time_nvfp4_form(&x, "rows", qop, qin, &qout, q16, iters, warm_s, &er);
      if (rows_too) tw = time_nvfp4_form(&x, "wg", qop, qin, &qout, q16, iters, warm_s, &ew);
      if (single_too) tg = time_nvfp4_form(&x, "skinny", qop, qin, &qout, q16, iters, warm_s, &eg);
      printf("%-10s %6lld %7lld %7lld %10.4f %10.4f %9.2f %8.0f %9.2g", names[s], (long long)M,
             (long long)N, (long long)K, tq, tl, tq > 0 && tl > 0 ? tl / tq : 0.0, gbs, e);
      print_form(tn, en, tl, wbytes, tiled_too);
      print_form(tr, er, tl, wbytes, rows_too);
      print_form(tw, ew, tl, wbytes, rows_too);
      print_form(tg, eg, tl, wbytes, single_too);
      bool sk = print_skinny(names[s], M, N, K, tl, ts, es, skinny);
      printf("h3bench nvfp4_%s_m%lld %.5f\nh3bench bf16_%s_m%lld %.5f\n", names[s], (long long)M, tq, names[s],
             (long long)M, tl);
      if (tiled_too) printf("h3bench nvfp4tiled_%s_m%lld %.5f\n", names[s], (long long)M, tn);
      if (rows_too) printf("h3bench nvfp4rows_%s_m%lld %.5f\nh3bench nvfp4wg_%s_m%lld %.5f\n", names[s], (long long)M,
                           tr, names[s], (long long)M, tw);
      if (single_too) printf("h3bench nvfp4single_%s_m%lld %.5f\n", names[s], (long long)M, tg);
      if (tq < 0 || tl < 0 || !(e >= 0 && e <= gpu_nmse_limit(H3_BF16)) || !sk ||
          (tiled_too && !(tn >= 0 && en >= 0 && en <= gpu_nmse_limit(H3_BF16))) ||
          (rows_too && !(tr >= 0 && er >= 0 && er <= gpu_nmse_limit(H3_BF16))) ||
          (rows_too && !(tw >= 0 && ew >= 0 && ew <= gpu_nmse_limit(H3_BF16))) ||
          (single_too && !(tg >= 0 && eg >= 0 && eg <= gpu_nmse_limit(H3_BF16)))) {
        h3_diag_print(&x.d, stderr);
        rc = 1;
      }
      free(a), free(c), free(q16), free(hx);
      x.b->ops->release(x.b, dx), x.b->ops->release(x.b, qout.data), x.b->ops->release(x.b, lout.data);
    }
    x.b->ops->release(x.b, dpk), x.b->ops->release(x.b, dsc), x.b->ops->release(x.b, dg);
    x.b->ops->release(x.b, dwb);
    free(w), free(pk), free(sc), free(wb);
  }
  if (rc == 0 && head && !lm_head(&x, &r, iters, warm_s)) {
    h3_diag_print(&x.d, stderr);
    rc = 1;
  }
  free_evict(&x);
  h3_module_free(x.m);
  h3_backend_free(x.b);
  return rc;
}
