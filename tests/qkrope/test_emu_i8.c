/* test_emu_i8.c: the int8 form of rms_norm_rope (int8-qk-norm-rope: x = int32 accumulators
 * with s_x, s_w, bias?) against the pair it replaces, dequant_i8 to bf16 then the bf16 form,
 * for the graphs of kernels/emu_i8.ir (the H3 head on qkv's accumulators; a bias, single
 * elements per lane; a bias with 8-wide chunks):
 *   - CPU backend: the int8 form == dequant_i8 + rms_norm_rope, bitwise;
 *   - the emitted CUDA C run on the host (tests/codegen/host_emu.h): the int8-form kernel ==
 *     the dequant_i8 kernel + the bf16-form kernel, bitwise.
 * Accumulators are random int32 of up to 2^26 in magnitude (beyond fp32's exact integers, so
 * the conversion's rounding is exercised), never zero rows; scales random positive.
 */
#include "qk_emu.h"
#include "qk_test.h"

#include "h3/backend.h"
#include "h3/codegen.h"
#include "h3/op_registry.h"

#include <stdio.h>


static int64_t differ(const uint16_t *a, const uint16_t *b, int64_t n) {
  int64_t k = 0;
  for (int64_t i = 0; i < n; i++) k += a[i] != b[i];
  return k;
}

/* Random operands for the graph's inputs: i32 accumulators, positive f32 scales, others
 * as case_random (unscaled). */
static void *input(const h3_value *v, bool scale) {
  const int64_t n = h3_type_numel(&v->type);
  if (v->type.dtype == H3_I32) {
    int32_t *p = malloc((size_t)n * 4 + 16);
    for (int64_t i = 0; p && i < n; i++) {
      int32_t a = (int32_t)case_uniform(qk_rng(), -67108864.0, 67108864.0);
      p[i] = a ? a : 1;
    }
    return p;
  }
  if (scale) {
    float *p = malloc((size_t)n * 4 + 16);
    for (int64_t i = 0; p && i < n; i++) p[i] = (float)case_uniform(qk_rng(), 1e-6, 1e-4);
    return p;
  }
  return case_random(qk_rng(), v->type.dtype, n, false);
}

static void test_graph(h3_graph *g) {
  h3_op *dq = NULL, *norm = NULL, *fused = NULL;
  for (h3_op *op = g->body.first; op; op = op->next) {
    if (op->code == H3_OP_DEQUANT_I8) dq = op;
    if (op->code == H3_OP_RMS_NORM_ROPE) *(op->n_operands > 4 ? &fused : &norm) = op;
  }
  CHECK(dq && norm && fused && emu_kernel_index(dq) >= 0 && emu_kernel_index(norm) >= 0 &&
            emu_kernel_index(fused) >= 0,
        "@%s: the graph's ops and kernels", g->name);
  if (!dq || !norm || !fused || emu_kernel_index(fused) < 0) return;
  void *in[8] = {0};
  for (int i = 0; i < g->n_inputs && i < 8; i++)
    in[i] = input(g->inputs[i], g->inputs[i]->type.dtype == H3_F32 && g->inputs[i]->type.rank == 1 &&
                                    i < 3);
  const int64_t nd = h3_type_numel(&dq->results[0]->type), n = h3_type_numel(&fused->results[0]->type);
  void *dq_in[4], *norm_in[4], *f_in[7];
  for (int i = 0; i < dq->n_operands; i++) dq_in[i] = in[i];
  const int nw = dq->n_operands; /* w, cos, sin follow the dequant's operands */
  for (int i = 0; i < fused->n_operands; i++)
    f_in[i] = i == 0 ? in[0] : i < 4 ? in[nw + i - 1] : in[i - 3];
  uint16_t *d = calloc((size_t)nd + 8, 2), *y = calloc((size_t)n + 8, 2), *f = calloc((size_t)n + 8, 2);
  emu_run_op(dq, dq_in, (void *[]){d});
  norm_in[0] = d;
  for (int i = 1; i < 4; i++) norm_in[i] = f_in[i];
  emu_run_op(norm, norm_in, (void *[]){y});
  emu_run_op(fused, f_in, (void *[]){f});
  int64_t bad = differ(y, f, n);
  fprintf(stderr, "graph @%s: %lld outputs; kernels: %lld differ\n", g->name, (long long)n,
          (long long)bad);
  CHECK(bad == 0, "@%s: int8-form kernel != dequant_i8 + rms_norm_rope kernels in %lld of %lld",
        g->name, (long long)bad, (long long)n);
  uint16_t *cd = cpu_result(dq, dq_in);
  if (cd) norm_in[0] = cd;
  uint16_t *cy = cd ? cpu_result(norm, norm_in) : NULL, *cf = cpu_result(fused, f_in);
  CHECK(cy && cf, "@%s: the CPU results", g->name);
  if (cy && cf) {
    CHECK(differ(cy, cf, n) == 0, "@%s: CPU int8 form != CPU dequant_i8 + rms_norm_rope in %lld",
          g->name, (long long)differ(cy, cf, n));
    CHECK(differ(cd, d, nd) == 0, "@%s: dequant_i8 kernel != CPU (%lld)", g->name,
          (long long)differ(cd, d, nd));
  }
  free(cd), free(cy), free(cf), free(d), free(y), free(f);
  for (int i = 0; i < 8; i++) free(in[i]);
}

int main(void) {
  const char *path = H3_SOURCE_DIR "/tests/qkrope/kernels/emu_i8.ir";
  h3_module *m = emu_load(path);
  CHECK(m != NULL, "cannot read %s", path);
  if (!m) return check_summary("qkrope_emu_i8");
  CHECK(emu_kernels.n == emu_count(), "%d kernel ops, %d emitted", emu_kernels.n, emu_count());
  for (int i = 0; emu_kernels.n == emu_count() && i < m->n_graphs; i++)
    test_graph(m->graphs[i]);
  CHECK(m->n_graphs == 3, "the three graphs of emu_i8.ir (%d)", m->n_graphs);
  emu_unload(m);
  return check_summary("qkrope_emu_i8");
}
