/* test_int8_e2e.c: --int8 end to end on the CPU backend, on a small H3: the tiny config
 * with the widths raised to multiples of 256 (dim 256, 2 heads of 128, ffn 256, text_dim
 * 256) so that the lowering rule applies, and one block (layers 1).
 *   - the `step` graph compiled with the default pipeline and with --int8 (rotate 0 and
 *     256), per tier (exact, lossless), on the same random weights and inputs: the
 *     relative L2 of both velocity outputs against bf16 of the same tier is reported and
 *     must be <= 5e-2;
 *   - weights are quantized at load: the runtime holds bf16 - lowered bf16 + int8 + scales;
 *   - row splitting is bitwise neutral: --int8=max_rows=16,min_split_n=1 (every GEMM of 64
 *     rows in 4 chunks, the text graph's 8-row GEMMs unsplit) equals max_rows=0, and so
 *     does the split plan after H3_INT8_MAX_ROWS-style re-chunking to 0 and to 24 (a
 *     remainder chunk);
 *   - the `sample` program (4 steps) with --int8=rotate=256 runs to the end; its relative
 *     L2 against bf16 is reported.
 */
#include "int8_e2e.h"

static void test_step_accuracy(h3_tier tier) {
  h3_module *ref_m = small_h3(NULL, tier, NULL);
  CHECK(ref_m != NULL, "bf16 compile");
  if (!ref_m) return;
  run_result ref = run(ref_m, "step");
  const char *variants[] = {"rotate=0", "rotate=256"};
  for (int v = 0; v < 2 && ref.n; v++) {
    h3_module *m = small_h3(variants[v], tier, "int8-lowering,row-split");
    CHECK(m != NULL, "int8 compile (%s)", variants[v]);
    if (!m) continue;
    h3_int8_summary s;
    h3_int8_summarize(m, &s);
    CHECK(s.n_gemms == 9 && s.n_layers == 9, "small H3 lowers 9 layers (5 text + 4 step), got %lld",
          (long long)s.n_layers);
    run_result r = run(m, "step");
    if (r.n) {
      double ev = rel_l2(&r, &ref, 0), ea = rel_l2(&r, &ref, 1);
      printf("  step, one block, --quality %s --int8=%s: relative L2 vs bf16: v_video %.3e, "
             "v_audio %.3e\n", h3_tier_name(tier), variants[v], ev, ea);
      CHECK(ev <= 5e-2 && ea <= 5e-2, "relative L2 %g / %g above 5e-2", ev, ea);
      size_t want = ref.weight_bytes - (size_t)s.bf16_bytes + (size_t)(s.int8_bytes + s.scale_bytes);
      CHECK(r.weight_bytes == want, "runtime weight bytes %zu, want %zu (bf16 lowered layers released)",
            r.weight_bytes, want);
    }
    result_free(&r, m, "step");
    h3_module_free(m);
  }
  result_free(&ref, ref_m, "step");
  h3_module_free(ref_m);
}

static void test_split_neutral(void) {
  const char *lower = "int8-lowering,row-split";
  h3_module *plain = small_h3("max_rows=0", H3_TIER_EXACT, lower),
            *split = small_h3("max_rows=16,min_split_n=1", H3_TIER_EXACT, lower);
  CHECK(plain && split, "compile");
  if (!plain || !split) return;
  h3_int8_summary s0, s1;
  h3_int8_summarize(plain, &s0);
  h3_int8_summarize(split, &s1);
  CHECK(s0.n_split == 0 && s1.n_split == 4, "splits: %d unsplit plan, %d split plan (want 0, 4)",
        s0.n_split, s1.n_split);
  run_result a = run(plain, "step"), b = run(split, "step");
  CHECK(same_bits(&a, &b), "row chunks of 16 change the step's outputs");
  h3_int8_set_max_rows(split, 24); /* 64 rows: 2 x 24 + 16 */
  run_result c = run(split, "step");
  CHECK(same_bits(&a, &c), "row chunks of 24 (with a remainder) change the step's outputs");
  h3_int8_set_max_rows(split, 0);
  h3_int8_summarize(split, &s1);
  CHECK(s1.n_split == 0, "max_rows 0 leaves %d GEMMs split", s1.n_split);
  run_result e = run(split, "step");
  CHECK(same_bits(&a, &e), "re-chunked to 0: outputs differ");
  result_free(&a, plain, "step");
  result_free(&b, split, "step");
  result_free(&c, split, "step");
  result_free(&e, split, "step");
  h3_module_free(plain);
  h3_module_free(split);
}

static void test_sample(void) {
  h3_module *ref_m = small_h3(NULL, H3_TIER_EXACT, NULL),
            *m = small_h3("rotate=256", H3_TIER_EXACT, "int8-lowering,row-split");
  CHECK(ref_m && m, "compile");
  if (ref_m && m) {
    run_result ref = run(ref_m, "sample"), r = run(m, "sample");
    if (ref.n && r.n) {
      double ev = rel_l2(&r, &ref, 0), ea = rel_l2(&r, &ref, 1);
      printf("  sample (4 steps, text + 1 block), --int8=rotate=256: relative L2 vs bf16: video "
             "%.3e, audio %.3e\n", ev, ea);
      CHECK(isfinite(ev) && isfinite(ea), "non-finite outputs");
    }
    result_free(&ref, ref_m, "sample");
    result_free(&r, m, "sample");
  }
  h3_module_free(ref_m);
  h3_module_free(m);
}

int main(void) {
  test_step_accuracy(H3_TIER_EXACT);
  test_step_accuracy(H3_TIER_LOSSLESS);
  test_split_neutral();
  test_sample();
  return check_summary("test_int8_e2e");
}
