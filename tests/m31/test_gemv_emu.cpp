/* test_gemv_emu.cpp: the few-row linear (kernels/gemv.cu, the decode steps' projections and
 * lm_head) run on the host under tests/codegen/host_emu.h (a thread per CUDA thread, mma and
 * barriers block-wide), launched as runtime/cuda/cuda_gemv.c launches it, and compared with
 * the CPU backend's linear on random inputs: 1, 5 and 16 rows (the mma's 16 padded with
 * zeros), N not a multiple of the block's 32 outputs, K chunks not a multiple of the block's
 * 8 warps (and fewer chunks than warps), bf16 and f32 outputs, with and without bias. Within
 * a bf16-level NMSE (1e-5; the mma sums in another order than the reference on the GPU).
 */
#include "emu_harness.h"

namespace gemv_bf16 {
#define Y_T h3_bf16
#define H3_GEMV_NAME emu_gemv_bf16
#include "gemv.cu"
#undef Y_T
#undef H3_GEMV_NAME
} // namespace gemv_bf16
namespace gemv_f32 {
#define Y_T float
#define H3_GEMV_NAME emu_gemv_f32
#include "gemv.cu"
} // namespace gemv_f32

static void test_gemv(int64_t M, int64_t N, int64_t K, bool bias, const char *yt) {
  const bool f32 = !strcmp(yt, "f32");
  std::string args = "%x: " + ty("bf16", {M, K}) + ", %w: " + ty("bf16", {N, K});
  if (bias) args += ", %b: " + ty(yt, {N});
  std::string text = "module @m config \"test\" {\n  graph @g(" + args + ") -> (y: " + ty(yt, {M, N}) +
                     ") {\n    %y = linear(%x, %w" + (bias ? ", %b" : "") + ")" + (f32 ? " {dtype = f32}" : "") + " : " + ty(yt, {M, N}) +
                     "\n    return %y\n  }\n}\n";
  h3_module *m = parse(text);
  CHECK(m, "linear IR");
  if (!m) return;
  const h3_op *op = first_op(m);
  std::vector<buf> in;
  for (int i = 0; i < op->n_operands; i++) in.push_back(make(op->operands[i]->type)), fill_random(in.back(), -1, 1);
  std::vector<buf> want = cpu_run(op, in);
  buf got = make(op->results[0]->type);
  long long MM = M, NN = N, KK = K;
  const h3_bf16 *x = (const h3_bf16 *)in[0].p(), *w = (const h3_bf16 *)in[1].p();
  emu_launch3((N + 31) / 32, 1, 1, H3G_THREADS, [&] {
    if (f32)
      gemv_f32::emu_gemv_f32(x, w, bias ? (const float *)in[2].p() : nullptr, (float *)got.p(), MM, NN, KK);
    else
      gemv_bf16::emu_gemv_bf16(x, w, bias ? (const h3_bf16 *)in[2].p() : nullptr, (h3_bf16 *)got.p(), MM, NN, KK);
  });
  char what[96];
  snprintf(what, sizeof what, "gemv M %lld N %lld K %lld %s%s", (long long)M, (long long)N, (long long)K, yt,
           bias ? " bias" : "");
  compare(what, got, want[0], 1e-5);
  h3_module_free(m);
}

int main(void) {
  elapsed();
  test_gemv(1, 40, 1280, false, "bf16");  /* 10 chunks over 8 warps; a partial n block */
  test_gemv(5, 64, 384, true, "f32");     /* fewer chunks than warps */
  test_gemv(16, 32, 256, true, "bf16");   /* all 16 rows of the mma */
  test_gemv(3, 70, 1152, false, "f32");   /* 9 chunks; N past two blocks */
  return check_summary("gemv_emu");
}
