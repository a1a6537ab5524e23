/* test_emu.c: the emitted CUDA C of add_rms_norm run on the host under
 * tests/codegen/host_emu.h (a thread per CUDA thread, barriers for __syncthreads and the
 * shuffles), next to the kernels h3 emits for the unfused add and rms_norm, for the graphs
 * of kernels/emu_ops.ir: both layouts (a block per row: D = 6144, 300, f32 520; a warp per
 * row: D = 128 over 13 rows with dead warps in the last block, D = 20).
 *   - the fused kernel's x == the add kernel's result and its y == the rms_norm kernel's
 *     (run on that x), bitwise: the same rounding of a + b, the same reduction order;
 *   - against the CPU backend's add_rms_norm: x bitwise; y within the rule tests/codegen
 *     applies to rms_norm (op_check.h compare: the GPU sums x^2 in a tree, the CPU in
 *     ascending order);
 *   - nothing is stored past the last row (the dead warps of a block work on the last row
 *     and store nothing).
 * Inputs are random and never zero, with rows of very different norms (an_test.h).
 */
#include "an_test.h"
#include "emu_kernels.h"
#include "op_check.h"

#define SENTINEL 0xa5

/* A buffer of `cap` bytes filled with SENTINEL. */
static void *sentinel_buffer(size_t cap) {
  void *p = malloc(cap);
  if (p) memset(p, SENTINEL, cap);
  return p;
}

/* Whether bytes [from, cap) of p all still hold SENTINEL. */
static bool untouched(const void *p, size_t from, size_t cap) {
  for (size_t i = from; i < cap; i++)
    if (((const unsigned char *)p)[i] != SENTINEL) return false;
  return true;
}

static void test_graph(h3_graph *g) {
  h3_op *add = case_op(g, "x"), *norm = case_op(g, "y"), *fused = case_op(g, "f");
  CHECK(add && norm && fused && emu_kernel_index(add) >= 0 && emu_kernel_index(norm) >= 0 &&
        emu_kernel_index(fused) >= 0);
  if (!add || !norm || !fused || emu_kernel_index(fused) < 0) return;
  const h3_type *xt = &fused->results[0]->type;
  const int64_t D = xt->dims[xt->rank - 1], n = h3_type_numel(xt), rows = n / D;
  const h3_dtype dt = xt->dtype, wd = fused->operands[2]->type.dtype;
  const size_t bytes = (size_t)n * h3_dtype_size(dt);
  /* room for 8 more rows: a warp-per-row block that stored a dead warp's row would show */
  const size_t cap = bytes + 8 * (size_t)D * h3_dtype_size(dt);
  fprintf(stderr, "graph @%s: %lld rows of %lld (%s)\n", g->name, (long long)rows, (long long)D,
          case_dtype(dt));
  void *a = an_operand(dt, rows, D), *b = an_operand(dt, rows, D);
  void *w = case_random(an_rng(), wd, D, false);
  void *x = sentinel_buffer(cap), *y = sentinel_buffer(cap);
  void *fx = sentinel_buffer(cap), *fy = sentinel_buffer(cap);
  emu_run_op(add, (void *[]){a, b}, (void *[]){x});
  emu_run_op(norm, (void *[]){x, w}, (void *[]){y});
  emu_run_op(fused, (void *[]){a, b, w}, (void *[]){fx, fy});
  const bool same_x = memcmp(fx, x, bytes) == 0, same_y = memcmp(fy, y, bytes) == 0;
  if (!same_x || !same_y)
    fprintf(stderr, "  @%s: fused kernel x %s the add kernel's, y %s the rms_norm kernel's\n",
            g->name, same_x ? "==" : "!=", same_y ? "==" : "!=");
  CHECK(same_x && same_y);
  CHECK(untouched(fx, bytes, cap) && untouched(fy, bytes, cap));
  void *c[2] = {NULL, NULL};
  const bool ran = case_cpu_results(fused, (void *[]){a, b, w}, c, 1);
  CHECK(ran);
  if (ran) {
    const bool cpu_x = memcmp(fx, c[0], bytes) == 0;
    const int64_t far = compare(norm, 0, fy, c[1]);
    if (!cpu_x || far)
      fprintf(stderr, "  @%s: x %s the CPU op's; %lld elements of y beyond rms_norm's rule\n",
              g->name, cpu_x ? "==" : "!=", (long long)far);
    CHECK(cpu_x && far == 0);
  }
  free(c[0]), free(c[1]), free(a), free(b), free(w), free(x), free(y), free(fx), free(fy);
}

int main(void) {
  const char *path = H3_SOURCE_DIR "/tests/addnorm/kernels/emu_ops.ir";
  h3_module *m = emu_load(path);
  CHECK(m != NULL);
  if (!m) return cg_report("addnorm_emu");
  CHECK(emu_kernels.n == emu_count() && m->n_graphs == 5);
  for (int i = 0; emu_kernels.n == emu_count() && i < m->n_graphs; i++) test_graph(m->graphs[i]);
  emu_unload(m);
  return cg_report("addnorm_emu");
}
