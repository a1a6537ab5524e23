/* test_nvfp4_emu.cpp: linear_nvfp4's tensor-core kernel (kernels/nvfp4_gemm.cu) run on the
 * host under tests/codegen/host_emu.h, launched as runtime/cuda/cuda_nvfp4.c launches it (its
 * shape from cu_nvfp4_shape_of, the scratch of cu_nvfp4_scratch_bytes zeroed, the vector-load
 * flag from K and the pointers' alignment), against the CPU op on random inputs: every code
 * (-0 and the subnormal 0.5 included), scales of both signs from e4m3 subnormals to 448, zero
 * scales, optionally a NaN scale byte (its column NaN, as on the CPU). The launch shapes:
 * M = 1 and 16 rows (the m1 kernel) with 2 to 4 K splits (the partials added by the last
 * block), 20 rows (m2), 33 and 64 rows (m4) with splits, 70 rows (two row blocks of m4, no
 * splits), 3 and 4 chunks per block, partial column groups and
 * n-tiles, K not a multiple of the chunk (byte loads, a partial last chunk, with and without
 * splits) and x misaligned (byte loads of whole chunks) (where the skinny form would run by
 * default these are the kernels of H3_NVFP4_FORM=tiled); and the skinny form at 1 to 8 rows,
 * fewer chunks than its warps and many per warp, partial blocks of weight rows, NaN scales, and
 * up to 12 turns a warp (its rings: weights two turns ahead in 3 slots, x one turn ahead in 2,
 * the loop unrolled by 6: odd and even turns, every tail of the unrolled loop, whole rounds,
 * warps whose last turn is past their chunks); the row-pair form at 5 to 16 rows with K
 * splits from 1 to 16, partial column groups and idle warps; and the warpgroup form at 5 to 16
 * rows (its wgmmas through emu_wgmma_bf16, B read through the descriptor and the swizzle),
 * splits from 1 to 12, partial column groups, its rings' rounds and tails. NMSE <= 1e-5 (fp32 sum order, then one bf16
 * rounding); NaN and Inf where the CPU's are; the counters back at 0 and a second launch
 * bitwise the same.
 */
#include "emu_harness.h"

extern "C" {
#include "cuda_nvfp4.h"
#include "h3/nvfp4.h"
}

namespace nvfp4_k {
#define O_T h3_bf16
#define H3_NVFP4_NAME emu_nvfp4
#include "nvfp4_gemm.cu"
#undef H3_NVFP4_NAME
#undef O_T
} // namespace nvfp4_k

#include <cstring>

/* A random NVFP4 weight [N, K]: every code byte; scales e4m3 magnitudes 0 .. 0x7e (448), 1 in
 * 16 zero, 3 in 10 negative. */
static void random_weight(uint8_t *pk, uint8_t *sc, int64_t N, int64_t K) {
  for (int64_t i = 0; i < N * K / 2; i++) pk[i] = (uint8_t)(urand() * 256);
  for (int64_t i = 0; i < N * K / 16; i++) {
    uint8_t b = (uint8_t)(urand() * 0x7f);
    sc[i] = urand() < 0.0625 ? 0 : (uint8_t)(b | (urand() < 0.3 ? 0x80 : 0));
  }
}

/* The form a case runs: the tiled kernels, the skinny form, the row-pair form or the warpgroup
 * form (each launched as cuda_nvfp4.c launches it; the last three must apply) */
enum form { TILED, SKINNY, ROWS, WG };

/* x [M, K] bf16 against a random NVFP4 weight [N, K]; misalign: x one element off 16 bytes;
 * nan_col >= 0: a NaN scale byte in that weight row; through form f; splits > 0: the row-pair or
 * warpgroup form launched with that many K splits instead of their launcher's (the kernels take
 * any that leaves no split empty: small weights get many splits and one turn a warp, so their
 * rings' steady state needs this) */
static void test_nvfp4(int64_t M, int64_t N, int64_t K, bool misalign, int64_t nan_col, form f = TILED,
                       int64_t splits = 0) {
  std::string text = "module @m config \"test\" {\n  graph @g(%x: " + ty("bf16", {M, K}) + ", %p: " +
                     ty("u8", {N, K / 2}) + ", %s: " + ty("u8", {N, K / 16}) + ", %g: f32[1]) -> (y: " +
                     ty("bf16", {M, N}) + ") {\n    %y = linear_nvfp4(%x, %p, %s, %g) : " + ty("bf16", {M, N}) +
                     "\n    return %y\n  }\n}\n";
  h3_module *m = parse(text);
  CHECK(m, "linear_nvfp4 IR");
  if (!m) return;
  const h3_op *op = first_op(m);
  std::vector<buf> in;
  for (int i = 0; i < 4; i++) in.push_back(make(op->operands[i]->type));
  fill_random(in[0], -2, 2);
  uint8_t *pk = (uint8_t *)in[1].p(), *sc = (uint8_t *)in[2].p();
  random_weight(pk, sc, N, K);
  if (nan_col >= 0) sc[nan_col * (K / 16) + K / 32] = 0x7f;
  *(float *)in[3].p() = 0.37f;
  std::vector<buf> want = cpu_run(op, in);
  std::vector<unsigned char> xs((size_t)(M * K + 16) * 2);
  h3_bf16 *x = (h3_bf16 *)(xs.data() + (misalign ? 2 : 0));
  memcpy(x, in[0].p(), (size_t)(M * K) * 2);
  const cu_nvfp4_shape sh = cu_nvfp4_shape_of(M, N, K);
  std::vector<unsigned char> scratch(cu_nvfp4_scratch_bytes(M, N, K) + 16, 0);
  float *part = (float *)scratch.data();
  unsigned *cnt = (unsigned *)(scratch.data() + ((size_t)(sh.splits * M * N) * 4 + 255) / 256 * 256);
  int vec = K % CU_NVFP4_KC == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)pk % 16 == 0 && (uintptr_t)sc % 4 == 0;
  CHECK(sh.smem <= (1u << 20), "staging fits the emulation's shared memory");
  long long MM = M, NN = N, KK = K;
  buf got[2] = {make(op->results[0]->type), make(op->results[0]->type)};
  auto kernel = sh.mt == 1 ? nvfp4_k::emu_nvfp4_m1 : sh.mt == 2 ? nvfp4_k::emu_nvfp4_m2 : nvfp4_k::emu_nvfp4_m4;
  CHECK(f != SKINNY || cu_nvfp4_skinny_applies(M, K, vec), "M %lld K %lld: the skinny form applies", (long long)M,
        (long long)K);
  CHECK((f != ROWS && f != WG) || cu_nvfp4_rows_applies(M, K, vec), "M %lld K %lld: the row-pair form applies",
        (long long)M, (long long)K);
  const float *gp = (const float *)in[3].p();
  const int64_t rsplits = splits > 0 ? splits : f == WG ? cu_nvfp4_wg_splits(N, K) : cu_nvfp4_rows_splits(N, K);
  const int64_t rcols = f == WG ? cu_nvfp4_wg_cols(N) : cu_nvfp4_rows_cols(N);
  if ((f == ROWS || f == WG) && splits > 0) /* room for the forced splits' partials */
    scratch.resize(cu_nvfp4_rows_part(M, N, K) + (size_t)(rsplits * M * N) * 4 + 256 + (size_t)rcols * 4, 0);
  float *rpart = (float *)(scratch.data() + cu_nvfp4_rows_part(M, N, K));
  unsigned *rcnt = (unsigned *)(scratch.data() + (splits > 0 ? scratch.size() - (size_t)rcols * 4
                                                             : cu_nvfp4_rows_counters(M, N, K)));
  CHECK((f != ROWS && f != WG) || rsplits == 1 || splits > 0 ||
            cu_nvfp4_rows_counters(M, N, K) + rcols * 4 <= cu_nvfp4_scratch_bytes(M, N, K),
        "M %lld N %lld K %lld: the row-pair form's partials and counters fit the scratch", (long long)M,
        (long long)N, (long long)K);
  for (int run = 0; run < 2; run++)
    if (f == SKINNY)
      emu_launch3((N + 15) / 16, 1, 1, CU_NVFP4_SK_THREADS, [&] {
        nvfp4_k::emu_nvfp4_sk(x, pk, sc, gp, (h3_bf16 *)got[run].p(), MM, NN, KK);
      });
    else if (f == ROWS)
      emu_launch3(rcols, rsplits, 1, CU_NVFP4_SK_THREADS, [&] {
        (M <= 8 ? nvfp4_k::emu_nvfp4_sx : nvfp4_k::emu_nvfp4_sx16)(x, pk, sc, gp, (h3_bf16 *)got[run].p(),
                                                                  rsplits > 1 ? rpart : nullptr,
                                                                  rsplits > 1 ? rcnt : nullptr, MM, NN, KK);
      });
    else if (f == WG)
      emu_launch3(rcols, rsplits, 1, CU_NVFP4_SK_THREADS, [&] {
        (M <= 8 ? nvfp4_k::emu_nvfp4_wg : nvfp4_k::emu_nvfp4_wg16)(x, pk, sc, gp, (h3_bf16 *)got[run].p(),
                                                                  rsplits > 1 ? rpart : nullptr,
                                                                  rsplits > 1 ? rcnt : nullptr, MM, NN, KK);
      });
    else
      emu_launch3(sh.cols, sh.splits, sh.mblocks, CU_NVFP4_THREADS, [&] {
        kernel(x, pk, sc, gp, (h3_bf16 *)got[run].p(), sh.splits > 1 ? part : nullptr, sh.splits > 1 ? cnt : nullptr,
               MM, NN, KK, sh.cps, vec);
      });
  char what[128];
  if (f == SKINNY)
    snprintf(what, sizeof what, "M %lld N %lld K %lld (skinny%s)", (long long)M, (long long)N, (long long)K,
             nan_col >= 0 ? ", NaN scale" : "");
  else if (f == ROWS || f == WG)
    snprintf(what, sizeof what, "M %lld N %lld K %lld (%s: %lld x %lld%s)", (long long)M, (long long)N, (long long)K,
             f == WG ? "warpgroup" : "row pairs", (long long)rcols, (long long)rsplits,
             nan_col >= 0 ? ", NaN scale" : "");
  else
    snprintf(what, sizeof what, "M %lld N %lld K %lld (m%d: %lld x %lld x %lld, cps %d%s%s)", (long long)M,
             (long long)N, (long long)K, sh.mt, (long long)sh.cols, (long long)sh.splits, (long long)sh.mblocks,
             sh.cps, vec ? ", vec" : "", nan_col >= 0 ? ", NaN scale" : "");
  compare(what, got[0], want[0], 1e-5);
  CHECK(memcmp(got[0].p(), got[1].p(), (size_t)(M * N) * 2) == 0, "%s: a second launch differs", what);
  int64_t left = 0;
  for (int64_t i = 0; f == TILED && sh.splits > 1 && i < sh.cols * sh.mblocks; i++) left += cnt[i] != 0;
  for (int64_t i = 0; (f == ROWS || f == WG) && rsplits > 1 && i < rcols; i++) left += rcnt[i] != 0;
  CHECK(left == 0, "%s: %lld counters not back at 0", what, (long long)left);
  h3_module_free(m);
}

/* The dequantized form's kernel (H3_NVFP4_NAME_dq) on a random NVFP4 weight [N, K] (every
 * code, scales of both signs from subnormals to 448, zero scales, a NaN scale byte): w_b
 * bitwise e2m1 * e4m3 of the CPU's h3_nvfp4_unscaled (NaN where the scale is). */
static void test_dequant(int64_t N, int64_t K) {
  std::vector<uint8_t> pk((size_t)(N * K / 2)), sc((size_t)(N * K / 16));
  random_weight(pk.data(), sc.data(), N, K);
  sc[sc.size() / 2] = 0xff;
  std::vector<uint16_t> wb((size_t)(N * K), 0x1234);
  long long NN = N, KK = K;
  emu_launch3((N * (K / 8) + 255) / 256, 1, 1, 256,
              [&] { nvfp4_k::emu_nvfp4_dq(pk.data(), sc.data(), (h3_bf16 *)wb.data(), NN, KK); });
  int64_t bad = 0, nan = 0;
  for (int64_t n = 0; n < N; n++)
    for (int64_t k = 0; k < K; k++) {
      const float want = h3_nvfp4_unscaled(pk.data(), sc.data(), K, n, k);
      const uint16_t got = wb[(size_t)(n * K + k)];
      if (want != want) {
        nan++;
        bad += (got & 0x7f80) != 0x7f80 || !(got & 0x7f);
      } else {
        bad += got != h3_f32_to_bf16(want) || h3_bf16_to_f32(got) != want;
      }
    }
  CHECK(bad == 0 && nan == 16, "dequantize N %lld K %lld: %lld of %lld weights differ from the CPU's (%lld NaN)",
        (long long)N, (long long)K, (long long)bad, (long long)(N * K), (long long)nan);
  printf("  dequantize N %lld K %lld: %lld weights bitwise the CPU's, %lld NaN (%.1f s)\n", (long long)N,
         (long long)K, (long long)(N * K), (long long)nan, elapsed());
}

int main(void) {
  elapsed();
  /* the dequantized form (M > 64, the default there): its weight kernel; its GEMM is
     cuBLASLt's */
  CHECK(!cu_nvfp4_dequant_applies(64, 256, true) && cu_nvfp4_dequant_applies(65, 256, true) &&
            !cu_nvfp4_dequant_applies(65, 320, true) && !cu_nvfp4_dequant_applies(65, 256, false),
        "the dequantized form applies above 64 rows, whole chunks, aligned pointers only");
  CHECK(cu_nvfp4_slab_rows(3692, 18432) == 1920 && cu_nvfp4_slab_rows(6144, 18432) == 3072 && cu_nvfp4_slab_rows(24576, 6144) == 8192 &&
            cu_nvfp4_slab_rows(6144, 8192) == 6144 && cu_nvfp4_slab_rows(7000, 18432) == 3584 &&
            cu_nvfp4_slab_rows(100, 256) == 100 && cu_nvfp4_slab_rows(1 << 20, 1 << 20) == 128,
        "the dequantized form's slabs: the fewest of at most 128 MiB of w_b, equal in multiples of 128 "
        "rows, at least 128, at most N");
  test_dequant(24, 512);
  test_dequant(3, 256);
  test_dequant(5, 48); /* K a multiple of 16 only */
  test_nvfp4(1, 256, 1024, false, -1);  /* decode: 4 splits of one chunk */
  test_nvfp4(16, 200, 768, false, 7);   /* a partial column group and n-tile; 3 splits; NaN */
  test_nvfp4(64, 136, 512, false, -1);  /* 4 m-tiles, 2 splits */
  test_nvfp4(20, 128, 512, false, -1);  /* 2 m-tiles (4 rows in the second), 2 splits */
  test_nvfp4(70, 64, 1024, false, -1);  /* two row blocks (6 rows in the second), 4 chunks, no splits */
  test_nvfp4(1, 16, 12288, false, -1);  /* 16 splits of 3 chunks (the pipeline's steady state) */
  test_nvfp4(2, 64, 272, false, -1);    /* byte loads, a 16-k last chunk, 2 splits */
  test_nvfp4(5, 40, 64, false, -1);     /* byte loads, one partial chunk, partial tiles */
  test_nvfp4(33, 24, 48, false, 3);     /* three m-tiles, K of three blocks; NaN */
  test_nvfp4(3, 128, 512, true, -1);    /* x misaligned: byte loads of whole chunks */
  /* the skinny form: x rows full and partial, fewer chunks than warps, several per warp (its
     pipeline's steady state), a partial last block of weight rows */
  CHECK(CU_NVFP4_SK_THREADS == 32 * H3NS_WARPS, "the skinny form's block: %d threads", 32 * H3NS_WARPS);
  CHECK(!cu_nvfp4_skinny_applies(0, 256, true) && !cu_nvfp4_skinny_applies(9, 256, true) &&
            !cu_nvfp4_skinny_applies(4, 272, true) && !cu_nvfp4_skinny_applies(4, 256, false) &&
            cu_nvfp4_skinny_applies(1, 256, true) && cu_nvfp4_skinny_applies(8, 256, true),
        "the skinny form applies to M 1 to 8, whole chunks, aligned pointers only");
  /* turns a warp (ceil(chunks / 4)) and the unrolled loop's tail (turns % 6) in the comments */
  test_nvfp4(1, 64, 4096, false, -1, SKINNY); /* decode: 16 chunks, 4 per warp; 4 turns, tail 4 */
  test_nvfp4(8, 200, 768, false, 7, SKINNY); /* 3 chunks (warp 3 idle), 12.5 row blocks; NaN */
  test_nvfp4(3, 48, 2560, false, -1, SKINNY); /* 10 chunks: warps of 3 and 2 turns; tail 3 */
  test_nvfp4(8, 40, 256, false, 3, SKINNY); /* one chunk; NaN */
  test_nvfp4(5, 16, 9216, false, -1, SKINNY); /* 36 chunks: 9 per warp; a round, tail 3 */
  test_nvfp4(2, 32, 2048, false, -1, SKINNY); /* 8 chunks: 2 turns, tail 2 */
  test_nvfp4(7, 23, 4352, false, -1, SKINNY); /* 17 chunks: 5 turns (warps 1-3 4 chunks), tail 5 */
  test_nvfp4(1, 48, 6144, false, -1, SKINNY); /* 24 chunks: 6 turns, one whole round */
  test_nvfp4(4, 40, 6912, false, 21, SKINNY); /* 27 chunks: 7 turns (warp 3 6 chunks), tail 1; NaN */
  test_nvfp4(6, 16, 11264, false, -1, SKINNY); /* 44 chunks: 11 turns, a round, tail 5 */
  test_nvfp4(1, 16, 12288, false, -1, SKINNY); /* 48 chunks: 12 turns, two whole rounds */
  /* the row-pair form: 5-8 rows (one n-tile, a ring of 4 units: the loop's round is 2 turns) and
     9-16 (two n-tiles, a ring of 2: a round is 1 turn); K splits from one to 16 (partials added
     by the column group's last block), partial column groups (N not a multiple of 32, N < 32,
     a last group of 16 rows or fewer), fewer chunks than a split's warps and many, NaN */
  CHECK(!cu_nvfp4_rows_applies(4, 256, true) && !cu_nvfp4_rows_applies(17, 256, true) &&
            !cu_nvfp4_rows_applies(8, 272, true) && !cu_nvfp4_rows_applies(8, 256, false) &&
            cu_nvfp4_rows_applies(5, 256, true) && cu_nvfp4_rows_applies(16, 256, true),
        "the row-pair form applies to M 5 to 16, whole chunks, aligned pointers only");
  CHECK(cu_nvfp4_rows_splits(6144, 18432) == 2 && cu_nvfp4_rows_splits(24576, 6144) == 1 &&
            cu_nvfp4_rows_splits(6144, 12288) == 2 && cu_nvfp4_rows_splits(16, 20480) == 10,
        "the row-pair form's splits at the draft's fc, gate_up, down and a narrow weight");
  CHECK(cu_nvfp4_wg_splits(6144, 18432) == 4 && cu_nvfp4_wg_splits(6144, 8192) == 4 &&
            cu_nvfp4_wg_splits(24576, 6144) == 1 && cu_nvfp4_wg_splits(6144, 12288) == 4 &&
            cu_nvfp4_wg_splits(16, 20480) == 16 && cu_nvfp4_wg_splits(64, 768) == 3 &&
            cu_nvfp4_wg_smem(8) == 13312 && cu_nvfp4_wg_smem(16) == 25600,
        "the warpgroup form's splits (every split non-empty) and shared memory (GPU only: tests/gpu)");
  test_nvfp4(5, 64, 2048, false, -1, ROWS);    /* 8 chunks: S 2, a turn a warp */
  test_nvfp4(8, 200, 768, false, 7, ROWS);     /* 3 chunks (a split's warp idle); a 8-row last group; NaN */
  test_nvfp4(5, 16, 9216, false, -1, ROWS);    /* one group of 16 rows; 36 chunks in 9 splits */
  test_nvfp4(6, 40, 4352, false, 21, ROWS);    /* 17 chunks; NaN */
  test_nvfp4(7, 1000, 6144, false, -1, ROWS);  /* 32 groups, 24 chunks in 6 splits */
  test_nvfp4(5, 500, 11264, false, -1, ROWS);  /* 16 groups, 44 chunks */
  test_nvfp4(8, 1024, 3072, false, -1, ROWS);  /* 32 groups, 12 chunks: one turn a warp */
  test_nvfp4(9, 48, 2560, false, -1, ROWS);    /* two n-tiles; 10 chunks */
  test_nvfp4(16, 96, 768, false, 50, ROWS);    /* 3 chunks; NaN */
  test_nvfp4(12, 16, 20480, false, -1, ROWS);  /* 80 chunks in 10 splits */
  test_nvfp4(13, 300, 5120, false, -1, ROWS);  /* 10 groups, a partial last; 20 chunks */
  test_nvfp4(16, 600, 6144, false, 3, ROWS);   /* 19 groups, 24 chunks; NaN */
  /* many turns a warp (splits forced): the weight ring's rounds (4 units: 2 turns at 2-8 rows;
     2 units: 1 turn at 9-16) and their tails, warps whose last turn is past their chunks */
  test_nvfp4(7, 40, 6912, false, -1, ROWS, 1);  /* 27 chunks: 7 turns, 14 units: 3 rounds, tail 2 */
  test_nvfp4(6, 16, 11264, false, 5, ROWS, 1);  /* 44 chunks: 11 turns, tail 2; NaN */
  test_nvfp4(8, 48, 5120, false, -1, ROWS, 2);  /* 20 chunks in 2 splits: 3 turns, tail 2 */
  test_nvfp4(5, 64, 4096, false, -1, ROWS, 1);  /* 16 chunks: 4 turns, 2 whole rounds */
  test_nvfp4(12, 40, 6912, false, -1, ROWS, 1); /* 27 chunks: 7 turns */
  test_nvfp4(16, 16, 4352, false, 9, ROWS, 2);  /* 17 chunks in 2 splits: 3 turns; NaN */
  /* the warpgroup form: 5-8 rows (m64n8k16) and 9-16 (m64n16k16); its splits (every one
     non-empty; one chunk a split: the prologue alone), partial column groups (N not a multiple
     of 64, N < 64), NaN; then splits forced: the weight ring's rounds of 3 chunks and their
     tails, x's ring of 3 buffers over many chunks, uneven splits */
  test_nvfp4(5, 64, 2048, false, -1, WG);    /* 8 chunks in 8 splits */
  test_nvfp4(8, 200, 768, false, 7, WG);     /* 3 chunks in 3 splits, a last group of 8 rows; NaN */
  test_nvfp4(6, 1000, 6144, false, -1, WG);  /* 16 groups, 24 chunks in 12 splits */
  test_nvfp4(9, 48, 2560, false, -1, WG);    /* 10 chunks in 10 splits */
  test_nvfp4(16, 96, 768, false, 50, WG);    /* 3 chunks; NaN */
  test_nvfp4(13, 300, 5120, false, -1, WG);  /* 5 groups, a partial last; 20 chunks in 10 splits */
  test_nvfp4(7, 40, 6912, false, -1, WG, 1); /* 27 chunks: 9 rounds */
  test_nvfp4(5, 64, 1024, false, -1, WG, 1); /* 4 chunks: a round and a tail of 1 */
  test_nvfp4(12, 130, 4352, false, 129, WG, 1); /* 17 chunks, a last group of 2 rows; NaN */
  test_nvfp4(16, 16, 4352, false, 9, WG, 2);    /* 17 chunks in 2 splits (9, 8); NaN */
  test_nvfp4(8, 64, 5120, false, -1, WG, 3);    /* 20 chunks in 3 splits (7, 7, 6) */
  return check_summary("nvfp4_emu");
}
