/* m31_topk_check.c: index_topk on the cuda backend at M3.1 small's shapes (4 index heads x 128,
 * block = page = 128, top-16, 129-entry page tables: max_ctx 16384), each case's selections
 * against the CPU reference (bitwise) and its device time (median of N runs of the op, CUDA
 * events, after 3 warm-up runs). Cases: prefill of 2048 rows at 0 and at 2048 (real selection
 * from 17 blocks on), 128 rows at 3000, 9 verify rows at 5000 (one table, a row per block),
 * batch-64 decode (a table per row) at 2k and 4k contexts, batch-1 decode at 2047 and 16383.
 * Scrambled page tables; the keys uniform in [-2, 2).
 *
 *   dev/m31_topk_check.sh [BUILD_DIR]        builds BUILD_DIR/m31_topk_check (default build)
 *   BUILD_DIR/m31_topk_check [N]             N timed runs per case (default 50); exit 77
 *                                            without a GPU, 1 when a selection differs
 *
 * Not part of the product or of CI (dev/README.md).
 */
#include "gpu_common.h"

#include "h3/cuda_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HI 4
#define DI 128
#define PAGE 128
#define NP 129
#define TOPK 16

typedef struct {
  const char *name;
  int T, pos0, step; /* row t at pos0 + step * t */
  bool batch;        /* a page table per row */
} topk_case;

/* One index_topk op over the case's shapes, loaded (its scratch prepared) into b. */
static h3_plan *load_op(h3_backend *b, const topk_case *c, const h3_op **op, h3_diag *d) {
  int64_t P = (c->batch ? c->T : 1) * NP + 1;
  h3_module *m = h3_module_new("m31_topk", "small");
  h3_graph *g = h3_module_add_graph(m, "g", H3_GRAPH_FUNCTION, (h3_span){0});
  h3_builder bld = {m, &g->body, NULL, {0}};
  h3_type pt = c->batch ? h3_type_make(H3_I32, 2, (int64_t[]){c->T, NP}) : h3_type_make(H3_I32, 1, (int64_t[]){NP});
  h3_value *v[4] = {
      h3_graph_add_input(m, g, "iq", h3_type_make(H3_BF16, 3, (int64_t[]){c->T, HI, DI}), (h3_span){0}),
      h3_graph_add_input(m, g, "ikc", h3_type_make(H3_BF16, 3, (int64_t[]){P, PAGE, DI}), (h3_span){0}),
      h3_graph_add_input(m, g, "pos", h3_type_make(H3_I32, 1, (int64_t[]){c->T}), (h3_span){0}),
      h3_graph_add_input(m, g, "pt", pt, (h3_span){0}),
  };
  h3_attr a[2] = {h3_attr_int(m, "block", PAGE), h3_attr_int(m, "topk", TOPK)};
  *op = h3_build_op(&bld, H3_OP_INDEX_TOPK, 4, v, 2, a, 0, d);
  if (!*op) {
    h3_module_free(m);
    return NULL;
  }
  return gpu_plan_load(b, m, H3_TIER_LOSSLESS);
}

/* Host operands: random iq and keys, the positions, a scrambled table (rows of it). */
static void make_inputs(const h3_op *op, const topk_case *c, void **in) {
  gpu_rng r;
  gpu_rng_seed(&r, 20261203u + (uint64_t)c->T);
  in[0] = gpu_host_random(&r, &op->operands[0]->type, -2.0, 2.0, 0);
  in[1] = gpu_host_random(&r, &op->operands[1]->type, -2.0, 2.0, 0);
  int32_t *pos = malloc((size_t)c->T * sizeof *pos);
  int64_t rows = c->batch ? c->T : 1, P = rows * NP + 1;
  int32_t *pt = malloc((size_t)(rows * NP) * sizeof *pt);
  for (int t = 0; pos && t < c->T; t++) pos[t] = c->pos0 + c->step * t;
  for (int64_t i = 0; pt && i < rows * NP; i++) pt[i] = (int32_t)(1 + (i * 7 + 3) % (P - 1));
  in[2] = pos, in[3] = pt;
}

/* Device milliseconds of one run (synchronised before and after); -1 on error. */
static double run_ms(h3_backend *b, const h3_op *op, const h3_tensor *in, const h3_tensor *out,
                     h3_diag *d) {
  if (b->ops->sync(b, d) != H3_OK) return -1;
  h3_backend_reset_busy(b);
  if (b->ops->run_op(b, op, in, 4, out, 1, d) != H3_OK || b->ops->sync(b, d) != H3_OK) return -1;
  return h3_backend_busy_seconds(b) * 1e3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Runs one case: 1 when the selections differ or a step fails. */
static int run_case(h3_backend *b, const topk_case *c, int iters) {
  h3_diag d;
  h3_diag_init(&d);
  const h3_op *op = NULL;
  h3_plan *plan = load_op(b, c, &op, &d);
  void *in[4] = {0}, *want = NULL, *got = NULL;
  gpu_buf bi[4] = {{0}}, bo = {0};
  h3_tensor ti[4], to, hi[4], ho;
  int bad = 1;
  double *ms = calloc((size_t)iters, sizeof *ms);
  if (!plan || !ms) goto done;
  make_inputs(op, c, in);
  const h3_type *st = &op->results[0]->type;
  size_t sbytes = (size_t)h3_type_bytes(st);
  bool ok = in[0] && in[1] && in[2] && in[3] && (want = malloc(sbytes)) && (got = malloc(sbytes));
  for (int i = 0; ok && i < 4; i++) {
    ok = gpu_buf_alloc(b, &bi[i], (size_t)h3_type_bytes(&op->operands[i]->type), &d) &&
         gpu_buf_upload(b, &bi[i], in[i], &d);
    ti[i] = (h3_tensor){op->operands[i]->type, bi[i].p};
    hi[i] = (h3_tensor){op->operands[i]->type, in[i]};
  }
  ok = ok && gpu_buf_alloc(b, &bo, sbytes, &d) && gpu_buf_poison(b, &bo, &d);
  to = (h3_tensor){*st, bo.p}, ho = (h3_tensor){*st, want};
  for (int w = 0; ok && w < 3; w++) ok = run_ms(b, op, ti, &to, &d) >= 0;
  for (int it = 0; ok && it < iters; it++) ok = (ms[it] = run_ms(b, op, ti, &to, &d)) >= 0;
  bool guards = false;
  ok = ok && gpu_buf_download(b, &bo, got, &guards, &d) && guards &&
       h3_cpu_run_op(op, hi, 4, &ho, 1, 1, 1, &d) == H3_OK;
  if (!ok) {
    gpu_check(false, "index_topk %s: a step failed", c->name);
    goto done;
  }
  gpu_cmp cmp = gpu_compare(st, got, want);
  qsort(ms, (size_t)iters, sizeof *ms, cmp_double);
  int tiles = (c->T + 64 / HI - 1) / (64 / HI);
  gpu_check(cmp.int_diff == 0, "index_topk %-22s T %4d, positions %5d..%5d, %s: %lld of %lld "
            "selections differ; %.1f us (median of %d)", c->name, c->T, c->pos0,
            c->pos0 + c->step * (c->T - 1), !c->batch && tiles >= 4 ? "rows form" : "row per block",
            (long long)cmp.int_diff, (long long)cmp.n, ms[iters / 2] * 1e3, iters);
  bad = cmp.int_diff != 0;
done:
  h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  for (int i = 0; i < 4; i++) gpu_buf_free(b, &bi[i]), free(in[i]);
  gpu_buf_free(b, &bo);
  free(want), free(got), free(ms);
  h3_plan_free(plan);
  return bad;
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 50;
  if (iters < 1) {
    fprintf(stderr, "usage: m31_topk_check [N]\n");
    return 2;
  }
  gpu_require();
  h3_diag d;
  h3_diag_init(&d);
  h3_backend_options bo = {.threads = 1, .seed = 1};
  h3_cuda_options co = {.attention = "flash"};
  h3_backend *b = h3_backend_cuda_new(&bo, &co, &d);
  if (!b) {
    h3_diag_print(&d, stderr);
    return 1;
  }
  printf("device: %s\n", h3_backend_device_name(b));
  const topk_case cases[] = {
      {"prefill 2048 at 0", 2048, 0, 1, false},   {"prefill 2048 at 2048", 2048, 2048, 1, false},
      {"prefill 128 at 3000", 128, 3000, 1, false}, {"verify 9 at 5000", 9, 5000, 1, false},
      {"decode b64 at 2k", 64, 2047, -1, true},   {"decode b64 at 4k", 64, 4095, -1, true},
      {"decode b1 at 2047", 1, 2047, 1, false},   {"decode b1 at 16383", 1, 16383, 1, false},
  };
  int bad = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) bad |= run_case(b, &cases[i], iters);
  h3_backend_free(b);
  h3_diag_free(&d);
  printf("%d passed, %d failed\n", gpu_passed, gpu_failed);
  return bad || gpu_failed ? 1 : 0;
}
