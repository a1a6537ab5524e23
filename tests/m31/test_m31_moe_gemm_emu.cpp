/* test_m31_moe_gemm_emu.cpp: moe's tiled grouped GEMMs (kernels/m31_moe_gemm.cu) run on the
 * host under tests/codegen/host_emu.h (a thread per CUDA thread; ldmatrix, mma and barriers
 * block-wide), launched as runtime/cuda/cuda_m31_moe.c launches them for many rows per
 * expert (the route and combine kernels of kernels/m31_moe.cu around them, the same grids
 * and scratch), and compared with the CPU backend's moe on random inputs: partial m-tiles,
 * experts of two m-tiles, an expert no row chose, repeated ids in a row (counted once),
 * several n-tiles, more k-steps than pipeline stages. f32 output within 1e-5 NMSE (on the GPU
 * the mma sums in another order than the reference: a flipped bf16 rounding moves a row by
 * one bf16 ulp; the emulated mma sums as the reference does).
 */
#include "emu_harness.h"

namespace moe_k {
#define H_T h3_bf16
#define W_T h3_bf16
#define B_T float
#define I_T int
#define O_T float
#define H3_MOE_ROUTE_NAME emu_moe_route
#define H3_MOE_MMA_NAME emu_moe_mma
#define H3_MOE_MMA_DOWN_NAME emu_moe_mma_down
#define H3_MOE_COMBINE_NAME emu_moe_combine
#include "m31_moe.cu"
} // namespace moe_k

namespace gemm_k {
#define H3_MOE_GEMM_NAME emu_moe_gemm
#define H3_MOE_GEMM_DOWN_NAME emu_moe_gemm_down
#include "m31_moe_gemm.cu"
} // namespace gemm_k

/* A moe case of make_moe_case (emu_harness.h) through the grouped GEMMs. */
static void test_moe_gemm(int64_t T, int64_t H, int64_t F, int64_t E, int k, bool repeats, int none) {
  moe_case c;
  if (!make_moe_case(c, T, H, F, E, k, repeats, none)) return;
  h3_module *m = c.m;
  const h3_op *op = c.op;
  std::vector<buf> &in = c.in;
  std::vector<buf> want = cpu_run(op, in);
  long long TT = T, HH = H, FF = F;
  int EE = (int)E;
  const h3_bf16 *h = (const h3_bf16 *)in[0].p(), *gu = (const h3_bf16 *)in[1].p();
  const h3_bf16 *dn = (const h3_bf16 *)in[2].p();
  const int *ids = (const int *)in[3].p();
  buf out = make(op->results[0]->type);
  std::vector<h3_bf16> act((size_t)(T * k * F)), y((size_t)(T * k * H));
  std::vector<int> lists((size_t)(E * T)), counts((size_t)E);
  /* the launcher's m-tile slots: min(ceil(T k / 128) + E, E ceil(T / 128)) */
  const long long slots = std::min((T * k + 127) / 128 + E, E * ((T + 127) / 128));
  emu_launch3(E, 1, 1, 256, [&] { moe_k::emu_moe_route(ids, lists.data(), counts.data(), TT, k); });
  emu_launch3(slots, F / 64, 1, 256, [&] {
    gemm_k::emu_moe_gemm(h, gu, lists.data(), counts.data(), act.data(), TT, HH, FF, k, EE, 1.702f, 7.0f);
  });
  emu_launch3(slots, H / 128, 1, 256, [&] {
    gemm_k::emu_moe_gemm_down(dn, lists.data(), counts.data(), act.data(), y.data(), TT, HH, FF, k, EE);
  });
  emu_launch3(T, (H + 255) / 256, 1, 256, [&] {
    moe_k::emu_moe_combine(ids, (const float *)in[4].p(), y.data(), (float *)out.p(), HH, k);
  });
  int most = 0, empty = 0;
  for (int c : counts) most = std::max(most, c), empty += c == 0;
  char what[128];
  snprintf(what, sizeof what, "moe gemm T %lld H %lld F %lld E %lld k %d%s (rows <= %d, %d empty)",
           (long long)T, (long long)H, (long long)F, (long long)E, k, repeats ? " repeats" : "", most, empty);
  compare(what, out, want[0], 1e-5);
  CHECK(none < 0 || empty >= 1, "%s: expert %d has rows", what, none);
  h3_module_free(m);
}

/* Each live m-tile costs (F / 64) (H / 64) + (H / 128) (F / 64) k-steps of 88 warp-collective
 * operations, about 0.3 s each here (a barrier of 256 host threads per operation), so the
 * shapes are small: one of the two widths 256, so that the 3-stage ring wraps in one step. */
int main(void) {
  elapsed();
  test_moe_gemm(150, 256, 128, 2, 2, true, -1); /* 2 m-tiles per expert (one partial), repeats */
  test_moe_gemm(70, 128, 256, 4, 2, false, 1);  /* ~47 rows of 3 experts, expert 1 empty */
  test_moe_gemm(64, 128, 128, 8, 4, true, -1);  /* the launcher's least: T k / E = 32 rows */
  return check_summary("m31_moe_gemm_emu");
}
