/* test_emu.c: the emitted CUDA C of rms_norm_rope run on the host under
 * tests/codegen/host_emu.h (a real thread per CUDA thread, barriers for __syncthreads and
 * the shuffles), next to the kernels h3 emits for the unfused chain (slice, rms_norm, rope;
 * the reshape is a view), for the graphs of kernels/emu_ops.ir: the H3 head 56 x 128 with
 * rope dims 96 on 3 tokens, the tiny H3 head 4 x 16 with rope dims 12, the M3.1 form, a
 * head of 20 single elements, a 256-wide head and a block with a dead row group.
 *   - the fused kernel == the unfused kernels, bitwise (the GPU form of the pass's claim:
 *     same reduction order, same roundings, same rope arithmetic);
 *   - the fused kernel agrees with the CPU backend's rms_norm_rope within 2 bf16 ulps or
 *     2^-6 of its head row's largest |value| (the GPU sums x^2 in a tree, the CPU in
 *     ascending order; one ulp of the normed value moves a rotated output by up to that);
 *   - the unfused chain's kernels agree with the CPU chain the same way (the baseline).
 * Inputs are random and never zero, with rows of very different norms.
 */
#include "qk_emu.h"
#include "qk_test.h"

#include "h3/backend.h"
#include "h3/codegen.h"
#include "h3/op_registry.h"


static void test_graph(h3_graph *g) {
  h3_op *slice = case_op(g, "q"), *norm = case_op(g, "n"), *rope = case_op(g, "y"), *fused = case_op(g, "f");
  CHECK(slice && norm && rope && fused && emu_kernel_index(slice) >= 0 && emu_kernel_index(norm) >= 0 &&
            emu_kernel_index(rope) >= 0 && emu_kernel_index(fused) >= 0,
        "@%s: the graph's ops and kernels", g->name);
  if (!slice || !norm || !rope || !fused || emu_kernel_index(fused) < 0) return;
  const h3_type *yt = &fused->results[0]->type, *xt = &g->inputs[0]->type;
  const int64_t rows = yt->dims[0] * yt->dims[1], D = yt->dims[2], n = rows * D;
  const h3_dtype wd = g->inputs[1]->type.dtype, cd = g->inputs[2]->type.dtype;
  const int64_t nc = h3_type_numel(&g->inputs[2]->type);
  fprintf(stderr, "graph @%s: %lld head rows of %lld\n", g->name, (long long)rows, (long long)D);
  void *x = case_random(qk_rng(), H3_BF16, h3_type_numel(xt), true), *w = case_random(qk_rng(), wd, D, false);
  void *cs = case_random(qk_rng(), cd, nc, false), *sn = case_random(qk_rng(), cd, nc, false);
  uint16_t *q = calloc((size_t)n + 8, 2), *nn = calloc((size_t)n + 8, 2);
  uint16_t *y = calloc((size_t)n + 8, 2), *f = calloc((size_t)n + 8, 2);
  emu_run_op(slice, (void *[]){x}, (void *[]){q});
  emu_run_op(norm, (void *[]){q, w}, (void *[]){nn}); /* the reshape is a view: the same buffer */
  emu_run_op(rope, (void *[]){nn, cs, sn}, (void *[]){y});
  emu_run_op(fused, (void *[]){x, w, cs, sn}, (void *[]){f});
  int64_t diff = 0, first = -1;
  for (int64_t i = 0; i < n; i++)
    if (y[i] != f[i] && diff++ == 0) first = i;
  CHECK(diff == 0, "@%s: fused kernel != unfused kernels in %lld of %lld elements (first %lld)",
        g->name, (long long)diff, (long long)n, (long long)first);
  uint16_t *cf = cpu_result(fused, (void *[]){x, w, cs, sn});
  uint16_t *cq = cpu_result(slice, (void *[]){x});
  uint16_t *cn = cq ? cpu_result(norm, (void *[]){cq, w}) : NULL;
  uint16_t *cy = cn ? cpu_result(rope, (void *[]){cn, cs, sn}) : NULL;
  CHECK(cf && cy, "@%s: the CPU results", g->name);
  if (cf && cy) {
    int64_t mu_f, mu_y;
    const int64_t far_f = count_far(f, cf, rows, D, &mu_f), far_y = count_far(y, cy, rows, D, &mu_y);
    fprintf(stderr, "  fused vs cpu op: max %lld ulps; unfused kernels vs cpu chain: max %lld ulps\n",
            (long long)mu_f, (long long)mu_y);
    CHECK(far_f == 0, "@%s: %lld elements of the fused kernel far from the CPU op", g->name,
          (long long)far_f);
    CHECK(far_y == 0, "@%s: %lld elements of the unfused kernels far from the CPU chain", g->name,
          (long long)far_y);
  }
  free(cf), free(cq), free(cn), free(cy);
  free(x), free(w), free(cs), free(sn), free(q), free(nn), free(y), free(f);
}

int main(void) {
  const char *path = H3_SOURCE_DIR "/tests/qkrope/kernels/emu_ops.ir";
  h3_module *m = emu_load(path);
  CHECK(m != NULL, "cannot read %s", path);
  if (!m) return check_summary("qkrope_emu");
  CHECK(emu_kernels.n == emu_count(), "%d kernel ops, %d emitted", emu_kernels.n, emu_count());
  for (int i = 0; emu_kernels.n == emu_count() && i < m->n_graphs; i++)
    test_graph(m->graphs[i]);
  CHECK(m->n_graphs == 6, "the six graphs of emu_ops.ir (%d)", m->n_graphs);
  emu_unload(m);
  return check_summary("qkrope_emu");
}
