/* attention_bench.c: H3's attention and block GEMMs on the cuda backend, timed with CUDA
 * events, printed as one table (and as "h3bench name ms tflops" lines for
 * bench/peers_table.py, which sets them against PyTorch measured in the same run).
 *
 *   attention_bench [--rows S] [--used U] [--heads H] [--iters N] [--warm-seconds W]
 *                   [--check] [--flash-only | --gemm-only | --sage [--accuracy] | --sol [--tau X]]
 *                   [--qkv FILE]
 * Defaults: the full H3 shape, S = 32704 packed rows, U = 32700 live rows (segments [U]),
 * 56 heads of 128, bf16, operands uniform in [-1, 1); the four block GEMMs (qkv, out_proj,
 * fc1, fc2) at M = S through cuBLASLt. Each time is the median of N = 10 runs after at least
 * 2 warm-up runs and W = 1 s of the op (the reference attention, about 10 s a run at the
 * full shape: one run, no warm-up; it is timed for the record and checked against).
 * Attention FLOPs = 4 * (U^2 + (S-U)^2) * H * 128. --check compares flash and cudnn against
 * the reference kernel (NMSE). --flash-only times h3's flash kernel alone (no
 * cudnn, no GEMMs; with --check, also the reference for the comparison). --gemm-only times
 * the four GEMMs alone (bench/gemm_rounds.py alternates such runs with PyTorch's). --sage
 * times h3's flash kernel and then sage_attention (pv fp8 through the mma.sync kernel, through
 * the one-warpgroup warpgroup-MMA one, H3_SAGE_FORM=wg1, row sage_fp8_wg1, its clusters of 2 blocks,
 * H3_SAGE_FORM=wg1c, row sage_fp8_wg1c (the default); then pv bf16; smoothing on) on
 * the same q, k, v (no cudnn, no GEMMs), and prints each
 * one's speed-up over flash ("h3bench sage_fp8_speedup X"; issue 20 asks >= 1.5 for fp8) and
 * its NMSE against flash's output
 * (quantization error: an NMSE above 1e-2 or a NaN / Inf fails). --sol times h3's flash kernel
 * and then sol_attention (tau X, default 1, thresh diag) on the same q, k, v: one untimed run
 * with H3_SOL_STATS set first (the backend prints the exact-block density on stderr, "h3 sol:
 * ... pairs exact (P %)"), then the timing, its speed-up over flash ("h3bench sol_speedup X")
 * and its NMSE against flash (informative: sol approximates; a NaN / Inf fails); then one run
 * at tau = -inf (every block exact: dense attention), which must match flash within bf16's
 * NMSE limit; each through the mma.sync kernel (rows sol, sol_dense), the warp-specialised
 * one (H3_SOL_FORM=ws: rows sol_ws, sol_ws_dense; "h3bench sol_ws_speedup X") and it with two
 * exact key blocks a turn (H3_SOL_FORM=wsp: rows sol_wsp, sol_wsp_dense). --accuracy (with
 * --sage): also the reference kernel's output (fp32 sums, one run) and each Sage form's cosine
 * similarity and relative L1 (sum |a - r| / sum |r|) against it over the live rows, checked
 * against issue 20's bounds (cosine >= 0.999, relative L1 <= 0.03; "h3bench cos_sage_<form>
 * X", "h3bench l1_sage_<form> X"). --qkv FILE: q, k and v from a safetensors file instead of
 * random values: operands a0, a1, a2 of one attention op as `h3exec --dump-ops
 * attention+operands` writes them (the op with the most rows that has all three, bf16 [S, H,
 * 128]; S
 * and H from the file, the live rows --used or S - 4 as H3 full's 32700 of 32704; a plan
 * compiled with `--disable-pass attention-v-view`, so that v is not a view of the qkv
 * projection). Exit 77 without a GPU.
 */
#include "gpu_common.h"

#include "h3/bf16.h"
#include "h3/cuda_backend.h"
#include "h3/op_registry.h"
#include "h3/safetensors.h"

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
} bench;

static h3_value *input(bench *x, const char *name, int rank, const int64_t *dims) {
  return h3_graph_add_input(x->m, x->g, name, h3_type_make(H3_BF16, rank, dims), (h3_span){0});
}

static void *device_random(bench *x, const h3_type *t, gpu_rng *r) {
  size_t bytes = (size_t)h3_type_bytes(t);
  void *host = gpu_host_random(r, t, -1.0, 1.0, 1);
  void *dev = x->b->ops->alloc(x->b, bytes);
  if (!host || !dev || x->b->ops->upload(x->b, dev, host, bytes, &x->d) != H3_OK) {
    free(host);
    return NULL;
  }
  free(host);
  return dev;
}

static void row(const char *name, double ms, double flops) {
  double tf = ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0;
  printf("%-28s %10.3f ms %9.1f TFLOP/s\n", name, ms, tf);
  printf("h3bench %s %.4f %.2f\n", name, ms, tf);
}

static double nmse_dev(bench *x, const void *a, const void *b, const h3_type *t) {
  size_t bytes = (size_t)h3_type_bytes(t);
  void *ha = malloc(bytes), *hb = malloc(bytes);
  double r = -1;
  if (ha && hb && x->b->ops->download(x->b, ha, a, bytes, &x->d) == H3_OK &&
      x->b->ops->download(x->b, hb, b, bytes, &x->d) == H3_OK) {
    gpu_cmp c = gpu_compare(t, ha, hb);
    r = c.mismatched_special ? INFINITY : c.nmse;
  }
  free(ha), free(hb);
  return r;
}

/* The operands a0, a1, a2 of the attention op with the most rows in the dump at path (`h3exec
 * --dump-ops attention+operands`: names "op<ID>.attention.L<LINE>.a<I>.n<RUN>"; the first such
 * op of that size) with bf16 [S, H, 128] shapes, copied into fresh host buffers qkv[3] (freed
 * by the caller); S and H out. false after a message on stderr. */
static bool read_qkv(const char *path, void *qkv[3], int64_t *S, int64_t *H) {
  h3_diag d;
  h3_diag_init(&d);
  h3_safetensors *st = h3_safetensors_open(path, &d);
  h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  if (!st) return false;
  const h3_st_tensor *best[3] = {NULL, NULL, NULL};
  for (int i = 0; i < h3_safetensors_count(st); i++) {
    const h3_st_tensor *a = h3_safetensors_at(st, i);
    const char *at = strstr(a->name, ".attention.");
    const char *dot = at ? strstr(at + 11, ".a0.") : NULL;
    if (!dot || a->type.dtype != H3_BF16 || a->type.rank != 3 || a->type.dims[2] != 128 || strlen(a->name) >= 512 ||
        (best[0] && a->type.dims[0] <= best[0]->type.dims[0]))
      continue;
    const h3_st_tensor *t[3] = {a, NULL, NULL};
    char name[512];
    bool ok = true;
    for (int j = 1; ok && j < 3; j++) {
      snprintf(name, sizeof name, "%s", a->name);
      name[dot - a->name + 2] = (char)('0' + j);
      t[j] = h3_safetensors_find(st, name);
      ok = t[j] && t[j]->type.dtype == H3_BF16 && t[j]->type.rank == 3 && t[j]->type.dims[0] == a->type.dims[0] &&
           t[j]->type.dims[1] == a->type.dims[1] && t[j]->type.dims[2] == 128;
    }
    if (ok) best[0] = t[0], best[1] = t[1], best[2] = t[2];
  }
  bool ok = best[0] != NULL;
  for (int j = 0; ok && j < 3; j++) {
    qkv[j] = malloc(best[j]->nbytes);
    if (qkv[j]) memcpy(qkv[j], best[j]->data, best[j]->nbytes);
    else ok = false;
  }
  if (ok) {
    *S = best[0]->type.dims[0], *H = best[0]->type.dims[1];
    printf("q, k, v: %s and its a1, a2 (%lld rows, %lld heads)\n", best[0]->name, (long long)*S, (long long)*H);
  } else {
    fprintf(stderr, "attention_bench: %s holds no attention op with operands a0, a1, a2 of bf16 [S, H, 128] "
                    "(hint: h3exec --dump-ops attention+operands with a plan compiled with --disable-pass "
                    "attention-v-view)\n", path);
  }
  h3_safetensors_close(st);
  return ok;
}

/* Cosine similarity and relative L1 (sum |a - r| / sum |r|) of the first n elements of device
 * bf16 tensors a against r; false when a download failed or a value is not finite. */
static bool accuracy(bench *x, const void *a, const void *r, int64_t n, double *cos, double *l1) {
  uint16_t *ha = malloc((size_t)n * 2), *hr = malloc((size_t)n * 2);
  bool ok = ha && hr && x->b->ops->download(x->b, ha, a, (size_t)n * 2, &x->d) == H3_OK &&
            x->b->ops->download(x->b, hr, r, (size_t)n * 2, &x->d) == H3_OK;
  double ar = 0, aa = 0, rr = 0, d1 = 0, r1 = 0;
  for (int64_t i = 0; ok && i < n; i++) {
    const double va = h3_bf16_to_f32(ha[i]), vr = h3_bf16_to_f32(hr[i]);
    ok = isfinite(va) && isfinite(vr);
    ar += va * vr, aa += va * va, rr += vr * vr, d1 += fabs(va - vr), r1 += fabs(vr);
  }
  *cos = ok && aa > 0 && rr > 0 ? ar / sqrt(aa * rr) : 0;
  *l1 = ok && r1 > 0 ? d1 / r1 : INFINITY;
  free(ha), free(hr);
  return ok;
}

/* --sol: flash (aop) into out[0], then sol_attention (tau; att: scale, then the segments when
 * aop has them) into out[1] against it, then tau = -inf within bf16's NMSE limit, through each
 * form of the kernel (H3_SOL_FORM: mma, rows sol and sol_dense; ws, rows sol_ws and
 * sol_ws_dense; wsp, rows sol_wsp and sol_wsp_dense); the TFLOP/s column of the sol rows
 * counts dense attention's FLOPs (an effective rate). 0: ok. */
static int sol_vs_flash(bench *x, const h3_op *aop, const h3_attr att[2], double tau, const h3_tensor *in,
                        const h3_tensor *out, double flops, int64_t iters, double warm_s) {
  static const char *const forms[3] = {"mma", "ws", "wsp"}, *const names[3] = {"sol", "sol_ws", "sol_wsp"};
  int nseg = aop->n_attrs > 1 ? 1 : 0, rc = 0;
  double flash_ms = gpu_time_op(x->b, aop, in, 3, &out[0], (int)iters, 2, warm_s, &x->d);
  row("attention_flash", flash_ms, flops);
  for (int f = 0; f < 3; f++) {
    setenv("H3_SOL_FORM", forms[f], 1);
    for (int dense = 0; dense < 2; dense++) {
      h3_attr sat[3] = {att[0], h3_attr_float(x->m, "tau", dense ? -INFINITY : tau), att[1]};
      const h3_op *sop = h3_build_op(&x->bld, H3_OP_SOL_ATTENTION, 3, aop->operands, 2 + nseg, sat, 0, &x->d);
      if (!dense && !f && sop) {
        setenv("H3_SOL_STATS", "1", 1);
        if (x->b->ops->run_op(x->b, sop, in, 3, &out[1], 1, &x->d) != H3_OK) sop = NULL;
        unsetenv("H3_SOL_STATS");
      }
      double ms = sop ? gpu_time_op(x->b, sop, in, 3, &out[1], dense ? 1 : (int)iters, dense ? 0 : 2,
                                    dense ? 0 : warm_s, &x->d) : -1;
      double e = ms >= 0 ? nmse_dev(x, out[1].data, out[0].data, &out[0].type) : -1;
      double lim = dense ? gpu_nmse_limit(H3_BF16) : INFINITY;
      int ok = flash_ms > 0 && ms > 0 && e >= 0 && e < lim;
      char name[32];
      snprintf(name, sizeof name, "%s%s", names[f], dense ? "_dense" : "");
      row(name, ms, flops);
      printf("%s tau %g: %.2fx flash (%.3f ms vs %.3f ms), nmse vs flash %.3g%s: %s\n", names[f],
             dense ? -INFINITY : tau, ms > 0 ? flash_ms / ms : 0, ms, flash_ms, e, dense ? " (limit bf16's)" : "",
             ok ? "ok" : "FAIL");
      printf("h3bench %s_speedup %.3f\nh3bench nmse_%s %.3g\n", name, ms > 0 ? flash_ms / ms : 0, name, e);
      rc |= !ok;
    }
  }
  unsetenv("H3_SOL_FORM");
  return rc;
}

int main(int argc, char **argv) {
  int64_t S = 32704, U = 32700, H = 56, D = 128, iters = 10;
  double warm_s = 1.0;
  int check = 0, flash_only = 0, gemm_only = 0, sage = 0, sol = 0, acc = 0, used_set = 0;
  double tau = 1.0;
  const char *qkv_path = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--check")) check = 1;
    else if (!strcmp(argv[i], "--flash-only")) flash_only = 1;
    else if (!strcmp(argv[i], "--gemm-only")) gemm_only = 1;
    else if (!strcmp(argv[i], "--sage")) sage = flash_only = 1;
    else if (!strcmp(argv[i], "--sol")) sol = flash_only = 1;
    else if (i + 1 < argc && !strcmp(argv[i], "--tau")) tau = atof(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--rows")) S = atoll(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--used")) U = atoll(argv[++i]), used_set = 1;
    else if (!strcmp(argv[i], "--accuracy")) acc = 1;
    else if (i + 1 < argc && !strcmp(argv[i], "--qkv")) qkv_path = argv[++i];
    else if (i + 1 < argc && !strcmp(argv[i], "--heads")) H = atoll(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--iters")) iters = atoll(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--warm-seconds")) warm_s = atof(argv[++i]);
    else {
      fprintf(stderr, "usage: attention_bench [--rows S] [--used U] [--heads H] [--iters N] "
                      "[--warm-seconds W] [--check] [--flash-only | --gemm-only | --sage [--accuracy] | --sol "
                      "[--tau X]] [--qkv FILE]\n");
      return 2;
    }
  }
  void *qkv[3] = {NULL, NULL, NULL};
  if (qkv_path) {
    gpu_require(); /* before reading ~1.4 GB that only a GPU run needs */
    if (!read_qkv(qkv_path, qkv, &S, &H)) return 2;
    if (!used_set) U = S > 4 ? S - 4 : S;
  }
  if (U > S || U < 1 || H < 1 || iters < 1 || !(warm_s >= 0 && warm_s <= 600) || (flash_only && gemm_only) ||
      (sage && sol) || (acc && !sage)) {
    fprintf(stderr, "attention_bench: need 1 <= used <= rows, heads >= 1, iters >= 1, "
                    "0 <= warm-seconds <= 600, one of --flash-only, --gemm-only, --sage, --sol; --accuracy "
                    "with --sage\n");
    for (int i = 0; i < 3; i++) free(qkv[i]);
    return 2;
  }
  gpu_require();
  bench x;
  h3_diag_init(&x.d);
  h3_cuda_options co = {.attention = "flash"};
  h3_backend_options bo = {.threads = 1, .seed = 1};
  x.b = h3_backend_cuda_new(&bo, &co, &x.d);
  if (!x.b) {
    h3_diag_print(&x.d, stderr);
    return 1;
  }
  x.m = h3_module_new("bench", "full");
  x.g = h3_module_add_graph(x.m, "g", H3_GRAPH_FUNCTION, (h3_span){0});
  x.bld = (h3_builder){x.m, &x.g->body, NULL, {0}};
  printf("device: %s; rows %lld (live %lld), %lld heads x %lld, bf16\n", h3_backend_device_name(x.b),
         (long long)S, (long long)U, (long long)H, (long long)D);
  gpu_rng r;
  gpu_rng_seed(&r, 99);
  int rc = 0;
  /* attention */
  int64_t qd[3] = {S, H, D};
  h3_value *q = input(&x, "q", 3, qd), *k = input(&x, "k", 3, qd), *v = input(&x, "v", 3, qd);
  h3_attr att[2] = {h3_attr_float(x.m, "scale", 1.0 / sqrt((double)D)),
                    h3_attr_ints(x.m, "segments", 1, &U)};
  const h3_op *aop = h3_build_op(&x.bld, H3_OP_ATTENTION, 3, (h3_value *[]){q, k, v}, U < S ? 2 : 1, att, 0, &x.d);
  h3_type qt = h3_type_make(H3_BF16, 3, qd);
  h3_tensor in[3], out[3];
  for (int i = 0; i < 3; i++) {
    in[i] = (h3_tensor){qt, qkv[i] ? x.b->ops->alloc(x.b, (size_t)h3_type_bytes(&qt)) : device_random(&x, &qt, &r)};
    if (qkv[i] && in[i].data &&
        x.b->ops->upload(x.b, in[i].data, qkv[i], (size_t)h3_type_bytes(&qt), &x.d) != H3_OK) {
      x.b->ops->release(x.b, in[i].data);
      in[i].data = NULL;
    }
    free(qkv[i]);
  }
  for (int i = 0; i < 3; i++) out[i] = (h3_tensor){qt, x.b->ops->alloc(x.b, (size_t)h3_type_bytes(&qt))};
  const char *impls[3] = {"flash", "cudnn", "reference"};
  double flops = 4.0 * ((double)U * U + (double)(S - U) * (S - U)) * (double)H * (double)D;
  for (int i = 0; aop && !gemm_only && !sage && !sol && i < (check ? 3 : 2); i++) {
    if (!in[0].data || !in[1].data || !in[2].data || !out[i].data) break;
    if (flash_only && i == 1) continue;
    h3_backend_set_option(x.b, "attention", impls[i], &x.d);
    char name[64];
    snprintf(name, sizeof name, "attention_%s", impls[i]);
    double ms = gpu_time_op(x.b, aop, in, 3, &out[i], i == 2 ? 1 : (int)iters, i == 2 ? 0 : 2, i == 2 ? 0 : warm_s, &x.d);
    if (ms < 0) rc = 1;
    row(name, ms, flops);
  }
  /* --check: flash (and cudnn) against the reference, each within bf16's NMSE limit; the
     h3bench lines carry them to bench/block_peers.py's table */
  for (int i = 0; check && !gemm_only && !sage && !sol && out[2].data && i < 2; i++) {
    if (flash_only && i == 1) continue;
    double e = nmse_dev(&x, out[i].data, out[2].data, &qt), lim = gpu_nmse_limit(H3_BF16);
    int ok = e >= 0 && e <= lim; /* -1: download failed, inf: NaN / Inf mismatch */
    printf("nmse %s vs reference %.3g (limit %.0e): %s\n", impls[i], e, lim, ok ? "ok" : "FAIL");
    printf("h3bench nmse_%s %.3g\nh3bench nmse_limit %.0e\n", impls[i], e, lim);
    if (!ok) rc = 1;
  }
  /* --sage: sage_attention on the same inputs, against flash (out[0]): pv fp8 through the
     mma.sync kernel, the one-warpgroup warpgroup-MMA one and its clusters (H3_SAGE_FORM), then
     pv bf16 */
  double flash_ms = -1;
  enum { N_SAGE = 4 };
  static const char *const sage_form[N_SAGE] = {"fp8", "fp8_wg1", "fp8_wg1c", "bf16"};
  static const char *const sage_env[N_SAGE] = {"mma", "wg1", "wg1c", "mma"};
  const h3_op *sop = NULL;
  const bool have_in = in[0].data && in[1].data && in[2].data;
  for (int i = 0; sage && i < N_SAGE && aop && have_in && out[0].data && out[1].data; i++) {
    if (i == 0) {
      flash_ms = gpu_time_op(x.b, aop, in, 3, &out[0], (int)iters, 2, warm_s, &x.d);
      row("attention_flash", flash_ms, flops);
    }
    if (i == 0 && acc) { /* the reference kernel's output, once (~10 s at the full shape) */
      const bool ran = out[2].data && h3_backend_set_option(x.b, "attention", "reference", &x.d) == H3_OK &&
                       x.b->ops->run_op(x.b, aop, in, 3, &out[2], 1, &x.d) == H3_OK &&
                       x.b->ops->sync(x.b, &x.d) == H3_OK;
      h3_backend_set_option(x.b, "attention", "flash", &x.d);
      if (!ran) {
        printf("reference attention: FAIL (see the diagnostics)\n");
        rc = 1, acc = 0;
      }
    }
    if (i == 0 || i == N_SAGE - 1) { /* pv fp8 for all but the last, then bf16 */
      h3_attr sat[3] = {att[0], h3_attr_string(x.m, "pv", i ? "bf16" : "fp8"), att[1]};
      sop = h3_build_op(&x.bld, H3_OP_SAGE_ATTENTION, 3, (h3_value *[]){q, k, v}, U < S ? 3 : 2, sat, 0, &x.d);
    }
    setenv("H3_SAGE_FORM", sage_env[i], 1);
    double ms = sop ? gpu_time_op(x.b, sop, in, 3, &out[1], (int)iters, 2, warm_s, &x.d) : -1;
    double e = ms >= 0 ? nmse_dev(&x, out[1].data, out[0].data, &qt) : -1;
    char name[64];
    snprintf(name, sizeof name, "sage_%s", sage_form[i]);
    row(name, ms, flops);
    int ok = flash_ms > 0 && ms > 0 && e >= 0 && e <= 1e-2;
    printf("sage %s: %.2fx flash (%.3f ms vs %.3f ms), nmse vs flash %.3g (limit 1e-02): %s\n", sage_form[i],
           ms > 0 ? flash_ms / ms : 0, ms, flash_ms, e, ok ? "ok" : "FAIL");
    printf("h3bench sage_%s_speedup %.3f\nh3bench nmse_sage_%s %.3g\n", sage_form[i], ms > 0 ? flash_ms / ms : 0,
           sage_form[i], e);
    if (!ok) rc = 1;
    double cs = 0, l1 = INFINITY;
    if (acc && ms > 0) { /* the live rows against the reference */
      const bool got = accuracy(&x, out[1].data, out[2].data, U * H * D, &cs, &l1);
      const bool met = got && cs >= 0.999 && l1 <= 0.03;
      printf("sage %s vs the fp32 reference: cosine %.6f (>= 0.999), relative L1 %.4f (<= 0.03): %s\n", sage_form[i],
             cs, l1, met ? "ok" : "FAIL");
      printf("h3bench cos_sage_%s %.6f\nh3bench l1_sage_%s %.5f\n", sage_form[i], cs, sage_form[i], l1);
      if (!met) rc = 1;
    }
  }
  if (sol && aop && have_in && out[0].data && out[1].data && sol_vs_flash(&x, aop, att, tau, in, out, flops, iters, warm_s) != 0)
    rc = 1;
  for (int i = 0; i < 3; i++) x.b->ops->release(x.b, in[i].data), x.b->ops->release(x.b, out[i].data);
  /* the four block GEMMs: qkv [S, 5376] x [21504, 5376], out_proj [S, 7168] x [5376, 7168],
     fc1 [S, 5376] x [28672, 5376], fc2 [S, 14336] x [5376, 14336] */
  const int64_t gemm[4][3] = {{5376, 21504}, {7168, 5376}, {5376, 28672}, {14336, 5376}};
  const char *gname[4] = {"gemm_qkv", "gemm_out_proj", "gemm_fc1", "gemm_fc2"};
  double total_ms = 0, total_flops = 0;
  for (int i = 0; i < 4 && rc == 0 && !flash_only; i++) {
    int64_t K = gemm[i][0], N = gemm[i][1];
    h3_value *xv = input(&x, "x", 2, (int64_t[]){S, K}), *wv = input(&x, "w", 2, (int64_t[]){N, K});
    const h3_op *lop = h3_build_op(&x.bld, H3_OP_LINEAR, 2, (h3_value *[]){xv, wv}, 0, NULL, 0, &x.d);
    h3_type xt = xv->type, wt = wv->type, yt = h3_type_make(H3_BF16, 2, (int64_t[]){S, N});
    h3_tensor gin[2] = {{xt, device_random(&x, &xt, &r)}, {wt, device_random(&x, &wt, &r)}};
    h3_tensor gout = {yt, x.b->ops->alloc(x.b, (size_t)h3_type_bytes(&yt))};
    double ms = lop && gin[0].data && gin[1].data && gout.data ? gpu_time_op(x.b, lop, gin, 2, &gout, (int)iters, 2, warm_s, &x.d) : -1;
    if (ms < 0) rc = 1;
    double f = 2.0 * (double)S * (double)K * (double)N;
    row(gname[i], ms, f);
    total_ms += ms;
    total_flops += f;
    x.b->ops->release(x.b, gin[0].data), x.b->ops->release(x.b, gin[1].data), x.b->ops->release(x.b, gout.data);
  }
  if (rc == 0 && !flash_only) row("gemm_block_total", total_ms, total_flops);
  h3_diag_print(&x.d, stderr);
  h3_diag_free(&x.d);
  h3_module_free(x.m);
  h3_backend_free(x.b);
  return rc;
}
