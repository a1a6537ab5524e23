/* test_emu_sage.c: the emitted CUDA C of rms_norm_rope's sage_quant = 1 form (sage-q-fusion)
 * run on the host under tests/codegen/host_emu.h, next to the plain rms_norm_rope kernel on the
 * same operands, for the graphs of kernels/emu_sage.ir (the H3 head with two segments, the tiny
 * head, single-element lanes, a 256-wide head, the int8 form):
 *   - the fused kernel's y == the plain kernel's y, bitwise (the same row code);
 *   - its codes and deltas == sage_attention's Q rule applied to that y (tests/common/
 *     sage_q_rule.h: what kernels/sage_quant.cu computes from the y it would read), bitwise,
 *     padding rows and blocks without rows included (the outputs are poisoned first);
 *   - the CPU op: y == the plain CPU op's, codes and deltas == the rule on its y, bitwise
 *     (the CPU and GPU y may differ by the sum order of the norm, so each side's codes are
 *     checked against its own y).
 * Inputs random and never zero (rows of very different norms); accumulators up to 2^26,
 * positive scales for the int8 form.
 */
#include "qk_emu.h"
#include "qk_test.h"

#include "../common/sage_q_rule.h"
#include "h3/backend.h"
#include "h3/codegen.h"
#include "h3/op_registry.h"

#include <stdio.h>

/* A random operand for graph input v (i: its position): i32 accumulators, positive f32 scales
 * (the int8 form's s_x and s_w), else case_random (x scaled by rows). */
static void *input(const h3_value *v, int i) {
  const int64_t n = h3_type_numel(&v->type);
  if (v->type.dtype == H3_I32 || (v->type.dtype == H3_F32 && v->type.rank == 1 && i >= 4)) {
    char *p = malloc((size_t)n * 4 + 16);
    for (int64_t j = 0; p && j < n; j++) {
      if (v->type.dtype == H3_F32) {
        ((float *)p)[j] = (float)case_uniform(qk_rng(), 1e-6, 1e-4);
      } else {
        int32_t a = (int32_t)case_uniform(qk_rng(), -67108864.0, 67108864.0);
        ((int32_t *)p)[j] = a ? a : 1;
      }
    }
    return p;
  }
  return case_random(qk_rng(), v->type.dtype, n, i == 0);
}

static int64_t differ(const void *a, const void *b, size_t bytes) {
  int64_t k = 0;
  for (size_t i = 0; i < bytes; i++) k += ((const uint8_t *)a)[i] != ((const uint8_t *)b)[i];
  return k;
}

static void test_graph(h3_graph *g) {
  h3_op *plain = case_op(g, "y"), *fused = case_op(g, "f");
  CHECK(plain && fused && fused->n_results == 3 && emu_kernel_index(plain) >= 0 && emu_kernel_index(fused) >= 0,
        "@%s: the graph's ops and kernels", g->name);
  if (!plain || !fused || fused->n_results != 3 || emu_kernel_index(fused) < 0) return;
  const h3_type *yt = &fused->results[0]->type;
  const int64_t T = yt->dims[0], H = yt->dims[1], D = yt->dims[2], n = T * H * D;
  const int64_t nc = h3_type_numel(&fused->results[1]->type), nd = h3_type_numel(&fused->results[2]->type);
  const h3_attr *seg = h3_op_attr(fused, "segments");
  fprintf(stderr, "graph @%s: %lld head rows of %lld, %lld codes, %lld deltas\n", g->name, (long long)(T * H),
          (long long)D, (long long)nc, (long long)nd);
  void *in[8] = {0};
  for (int i = 0; i < g->n_inputs && i < 8; i++) in[i] = input(g->inputs[i], i);
  uint16_t *y = calloc((size_t)n + 8, 2), *f = calloc((size_t)n + 8, 2);
  int8_t *fc = malloc((size_t)nc + 16);
  float *fd = malloc((size_t)nd * 4 + 16);
  memset(fc, 0x55, (size_t)nc + 16); /* poison: every code must be written */
  for (int64_t i = 0; i < nd; i++) fd[i] = -1.0f;
  emu_run_op(plain, in, (void *[]){y});
  emu_run_op(fused, in, (void *[]){f, fc, fd});
  const int64_t dy = differ(y, f, (size_t)n * 2), dq = sage_q_rule_diff(f, T, H, D, seg, fc, fd);
  fprintf(stderr, "  kernel: y %lld bytes differ, codes / deltas %lld differ from the rule\n", (long long)dy,
          (long long)dq);
  CHECK(dy == 0, "@%s: the fused kernel's y != the plain kernel's in %lld bytes", g->name, (long long)dy);
  CHECK(dq == 0, "@%s: the fused kernel's codes / deltas differ from the Q rule in %lld", g->name, (long long)dq);
  void *cy[4] = {0}, *cf[4] = {0};
  const bool ok = case_cpu_results(plain, in, cy, 1) && case_cpu_results(fused, in, cf, 1);
  CHECK(ok, "@%s: the CPU results", g->name);
  if (ok) {
    const int64_t cdy = differ(cy[0], cf[0], (size_t)n * 2);
    const int64_t cdq = sage_q_rule_diff(cf[0], T, H, D, seg, cf[1], cf[2]);
    int64_t mu;
    const int64_t far = count_far(f, cf[0], T * H, D, &mu);
    fprintf(stderr, "  cpu: y %lld bytes differ, codes / deltas %lld; kernel vs cpu y: max %lld ulps\n",
            (long long)cdy, (long long)cdq, (long long)mu);
    CHECK(cdy == 0 && cdq == 0, "@%s: the CPU op's y (%lld) or codes / deltas (%lld) differ", g->name,
          (long long)cdy, (long long)cdq);
    CHECK(far == 0, "@%s: %lld elements of the kernel's y far from the CPU's", g->name, (long long)far);
  }
  for (int i = 0; i < 4; i++) free(cy[i]), free(cf[i]);
  for (int i = 0; i < 8; i++) free(in[i]);
  free(y), free(f), free(fc), free(fd);
}

int main(void) {
  const char *path = H3_SOURCE_DIR "/tests/qkrope/kernels/emu_sage.ir";
  h3_module *m = emu_load(path);
  CHECK(m != NULL, "cannot read %s", path);
  if (!m) return check_summary("qkrope_emu_sage");
  CHECK(emu_kernels.n == emu_count(), "%d kernel ops, %d emitted", emu_kernels.n, emu_count());
  for (int i = 0; emu_kernels.n == emu_count() && i < m->n_graphs; i++) test_graph(m->graphs[i]);
  CHECK(m->n_graphs == 5, "the five graphs of emu_sage.ir (%d)", m->n_graphs);
  emu_unload(m);
  return check_summary("qkrope_emu_sage");
}
