/* test_skinny_emu.cpp: the skinny linear's kernels (kernels/skinny_gemm.cu) run on the host
 * under tests/codegen/host_emu.h, launched as runtime/cuda/cuda_skinny_gemm.c launches them
 * (the shape of cu_skinny_shape_of, the scratch of cu_skinny_scratch_bytes zeroed), against
 * the CPU linear on random bf16 x and w in [-2, -0.25] u [0.25, 2] (never zero) and a random
 * bias of y's dtype. Shapes: M = 1, 3, 16 (kernels m1, m4, m16) and 5, 8, 2; N = 64 and 40 (K
 * split 16 and 8 ways: partials added by the last block), N not a multiple of the block's
 * columns (a last block with part of a pair and N odd), K = 4096 at M = 16, K not a multiple
 * of the 256-k load unit, a last split of 8 k, blocks of 64 columns (N = 16900); bias and
 * none, bf16 and f32 y. NMSE <= 1e-5 (fp32 sum order, one rounding), no
 * NaN or Inf, the counters back at 0 and a second launch bitwise the same. The streaming form
 * (one row, H3_LINEAR_FORM=stream) in grids of 1, 3 and the launcher's blocks: the same bits
 * in every grid; K of 1 to 48 segments (chunks of 1, 2 and 4 segments; 1 to 12 chunks a row:
 * the finish's rounds of 8 partials), N odd, bias and none, bf16 and f32 y. And which linears
 * each H3_LINEAR_FORM value hands to which form (cu_skinny_form_of).
 */
#include "emu_harness.h"

extern "C" {
#include "cuda_skinny_gemm.h"
}

namespace skinny_bf16 {
#define O_T h3_bf16
#define H3_SKINNY_NAME emu_skinny
#include "skinny_gemm.cu"
#undef H3_SKINNY_NAME
#undef O_T
} // namespace skinny_bf16

namespace skinny_f32 {
#define O_T float
#define H3_SKINNY_NAME emu_skinny_f32
#include "skinny_gemm.cu"
#undef H3_SKINNY_NAME
#undef O_T
} // namespace skinny_f32

#include <cstring>

/* uniform in [-2, -0.25] u [0.25, 2] */
static void fill_nonzero(buf &b) {
  for (int64_t i = 0; i < h3_type_numel(&b.type); i++) {
    double v = 0.25 + 1.75 * urand();
    h3_weights_store(b.p(), b.type.dtype, (size_t)i, urand() < 0.5 ? -v : v);
  }
}

template <typename O, typename F>
static void launch(F kernels, const cu_skinny_shape &sh, std::vector<buf> &in, bool bias, buf &y,
                   unsigned char *scratch, long long M, long long N, long long K) {
  float *part = sh.splits > 1 ? (float *)scratch : nullptr;
  unsigned *cnt = sh.splits > 1 ? (unsigned *)(scratch + ((size_t)(sh.splits * M * N) * 4 + 255) / 256 * 256) : nullptr;
  auto kernel = kernels(sh.mr);
  emu_launch3(sh.cols, sh.splits, 1, CU_SKINNY_THREADS, [&] {
    kernel((const h3_bf16 *)in[0].p(), (const h3_bf16 *)in[1].p(), bias ? (const O *)in[2].p() : nullptr,
           (O *)y.p(), part, cnt, M, N, K, sh.cpb, sh.kr);
  });
}

/* linear(x [M, K] bf16, w [N, K] bf16 (, bias [N])) -> y [M, N] of dtype yd as a module, its
 * random inputs (never zero) and the CPU's y; NULL when the IR does not parse. */
static h3_module *linear_case(int64_t M, int64_t N, int64_t K, bool bias, const char *yd, std::vector<buf> &in,
                              std::vector<buf> &want) {
  std::string yt = ty(yd, {M, N}), sig = "%x: " + ty("bf16", {M, K}) + ", %w: " + ty("bf16", {N, K});
  if (bias) sig += ", %b: " + ty(yd, {N});
  std::string attr = strcmp(yd, "f32") ? "" : " {dtype = f32}";
  std::string text = "module @m config \"test\" {\n  graph @g(" + sig + ") -> (y: " + yt + ") {\n    %y = linear(%x, %w" +
                     (bias ? ", %b" : "") + ")" + attr + " : " + yt + "\n    return %y\n  }\n}\n";
  h3_module *m = parse(text);
  CHECK(m, "linear IR");
  if (!m) return nullptr;
  const h3_op *op = first_op(m);
  for (int i = 0; i < op->n_operands; i++) in.push_back(make(op->operands[i]->type));
  for (auto &b : in) fill_nonzero(b);
  want = cpu_run(op, in);
  return m;
}

static void test_skinny(int64_t M, int64_t N, int64_t K, bool bias, const char *yd) {
  std::vector<buf> in, want;
  h3_module *m = linear_case(M, N, K, bias, yd, in, want);
  if (!m) return;
  const h3_op *op = first_op(m);
  const cu_skinny_shape sh = cu_skinny_shape_of(M, N, K);
  CHECK(sh.smem <= (1u << 20), "x fits the emulation's shared memory");
  std::vector<unsigned char> scratch(cu_skinny_scratch_bytes(M, N, K) + 16, 0);
  buf got[2] = {make(op->results[0]->type), make(op->results[0]->type)};
  const bool f32 = !strcmp(yd, "f32");
  for (int run = 0; run < 2; run++) {
    if (f32)
      launch<float>([](int mr) {
        using namespace skinny_f32;
        return mr == 1 ? emu_skinny_f32_m1 : mr == 2 ? emu_skinny_f32_m2 : mr == 4 ? emu_skinny_f32_m4
               : mr == 8 ? emu_skinny_f32_m8 : emu_skinny_f32_m16;
      }, sh, in, bias, got[run], scratch.data(), M, N, K);
    else
      launch<h3_bf16>([](int mr) {
        using namespace skinny_bf16;
        return mr == 1 ? emu_skinny_m1 : mr == 2 ? emu_skinny_m2 : mr == 4 ? emu_skinny_m4
               : mr == 8 ? emu_skinny_m8 : emu_skinny_m16;
      }, sh, in, bias, got[run], scratch.data(), M, N, K);
  }
  char what[160];
  snprintf(what, sizeof what, "M %lld N %lld K %lld %s%s (m%d: %lld x %lld, cpb %d, kr %d)", (long long)M,
           (long long)N, (long long)K, yd, bias ? " bias" : "", sh.mr, (long long)sh.cols, (long long)sh.splits,
           sh.cpb, sh.kr);
  compare(what, got[0], want[0], 1e-5);
  CHECK(memcmp(got[0].p(), got[1].p(), (size_t)h3_type_bytes(&got[0].type)) == 0, "%s: a second launch differs", what);
  int64_t left = 0;
  const unsigned *cnt = (const unsigned *)(scratch.data() + ((size_t)(sh.splits * M * N) * 4 + 255) / 256 * 256);
  for (int64_t i = 0; sh.splits > 1 && i < sh.cols; i++) left += cnt[i] != 0;
  CHECK(left == 0, "%s: %lld counters not back at 0", what, (long long)left);
  h3_module_free(m);
}

/* The streaming form (M = 1, K a multiple of 256) in grids of `blocks` (1: every unit in one
 * block; a few; the launcher's at 132 SMs): against the CPU, and every grid and a second
 * launch the same bits as the first; the tickets back at 0. */
static void test_stream(int64_t N, int64_t K, bool bias, const char *yd) {
  std::vector<buf> in, want;
  h3_module *m = linear_case(1, N, K, bias, yd, in, want);
  if (!m) return;
  const h3_op *op = first_op(m);
  const bool f32 = !strcmp(yd, "f32");
  const int64_t grids[3] = {1, 3, cu_skinny_stream_blocks(N, K, 132)};
  const size_t part_bytes = ((size_t)(cu_skinny_stream_chunks(K) * N) * 4 + 255) / 256 * 256;
  std::vector<unsigned char> scratch(cu_skinny_stream_scratch_bytes(N, K) + 16, 0);
  float *part = (float *)scratch.data();
  unsigned *cnt = (unsigned *)(scratch.data() + part_bytes);
  buf first = make(op->results[0]->type);
  for (int g = 0; g < 4; g++) {
    const int64_t blocks = grids[g < 3 ? g : 2];
    buf y = make(op->results[0]->type);
    for (int64_t i = 0; i < cu_skinny_stream_chunks(K) * N; i++) part[i] = NAN; /* a partial read early shows */
    emu_launch3(blocks, 1, 1, CU_SKINNY_THREADS, [&] {
      if (f32)
        skinny_f32::emu_skinny_f32_st((const h3_bf16 *)in[0].p(), (const h3_bf16 *)in[1].p(),
                                      bias ? (const float *)in[2].p() : nullptr, (float *)y.p(), part, cnt, N, K);
      else
        skinny_bf16::emu_skinny_st((const h3_bf16 *)in[0].p(), (const h3_bf16 *)in[1].p(),
                                   bias ? (const h3_bf16 *)in[2].p() : nullptr, (h3_bf16 *)y.p(), part, cnt, N, K);
    });
    char what[160];
    snprintf(what, sizeof what, "stream N %lld K %lld %s%s, %lld blocks%s", (long long)N, (long long)K, yd,
             bias ? " bias" : "", (long long)blocks, g == 3 ? " (again)" : "");
    if (g == 0) {
      compare(what, y, want[0], 1e-5);
      memcpy(first.p(), y.p(), (size_t)h3_type_bytes(&y.type));
    } else {
      CHECK(memcmp(first.p(), y.p(), (size_t)h3_type_bytes(&y.type)) == 0, "%s: not the bits of 1 block", what);
    }
    int64_t left = 0;
    for (int64_t p = 0; p < (N + 1) / 2; p++) left += cnt[p] != 0;
    CHECK(left == 0, "%s: %lld tickets not back at 0", what, (long long)left);
  }
  h3_module_free(m);
}

/* cu_skinny_form_of: which linears each H3_LINEAR_FORM value (and none) hands to which form */
static void test_forms(void) {
  static const struct {
    int64_t M, N, K;
    int forced, want;
  } c[] = {
      {1, 200064, 6144, -1, CU_LINEAR_LIBRARY}, /* unset: cuBLASLt, an lm_head of one row too */
      {1, 24576, 6144, -1, CU_LINEAR_LIBRARY},
      {4, 64, 256, -1, CU_LINEAR_LIBRARY},
      {2, 200064, 6144, -1, CU_LINEAR_LIBRARY}, /* two rows */
      {1, 200064, 6000, -1, CU_LINEAR_LIBRARY}, /* K not a multiple of 256 */
      {1, 64, 256, 1, CU_LINEAR_STREAM},        /* stream: every one-row linear */
      {3, 64, 256, 1, CU_LINEAR_LIBRARY},
      {16, 64, 8, 0, CU_LINEAR_SKINNY},         /* skinny: up to 16 rows */
      {17, 64, 8, 0, CU_LINEAR_LIBRARY},
      {1, 64, 12, 0, CU_LINEAR_LIBRARY},        /* K not a multiple of 8 */
      {1, 200064, 6144, 2, CU_LINEAR_LIBRARY},  /* library: none */
  };
  for (const auto &t : c) {
    const int got = cu_skinny_form_of(t.M, t.N, t.K, t.forced);
    CHECK(got == t.want, "form of M %lld N %lld K %lld (forced %d): %d, want %d", (long long)t.M, (long long)t.N,
          (long long)t.K, t.forced, got, t.want);
  }
}

int main(void) {
  elapsed();
  test_forms();
  test_stream(64, 6144, false, "bf16"); /* 24 segments: 6 chunks of 4 */
  test_stream(101, 768, true, "f32");   /* 3 segments: 3 chunks of 1; N odd: the last pair one row */
  test_stream(600, 1536, true, "bf16"); /* 6 segments: 3 chunks of 2 */
  test_stream(37, 12288, false, "f32"); /* 12 chunks: two rounds of 8 partials; N odd */
  test_stream(50, 256, false, "bf16");  /* 1 chunk: every unit completes its pair */
  test_skinny(1, 64, 6144, false, "bf16");  /* small N: 16 K splits */
  test_skinny(3, 40, 2048, true, "bf16");   /* rows of m4, 8 splits, a partial block */
  test_skinny(16, 24, 4096, true, "f32");   /* m16, 16 splits */
  test_skinny(5, 101, 1000, false, "f32");  /* m8, N odd, K not a multiple of 256 */
  test_skinny(1, 16900, 16, true, "bf16");  /* 64 columns per block (the last of 4), one K split */
  test_skinny(8, 72, 264, true, "bf16");    /* a K split of 8 k */
  test_skinny(16, 16, 24, false, "bf16");   /* a tiny one: 3 slots per row, one split */
  return check_summary("skinny_emu");
}
