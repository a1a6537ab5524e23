/* test_model.c: the tiny MiniMax-H3 model (models/minimax_h3.g) end to end on the CPU
 * backend with norm-modulate-fusion in the pipeline, at every tier.
 *   - the pass finds the sites the spec wires (§3 rule 1, with this pass's loop rule): in
 *     the trunk body one Plan A (norm1, on the loop-carried x) and one Plan B (norm2,
 *     absorbing gate_msa), in the final layer one Plan A with the fp32 modulate; the text
 *     graph's refiner norms have no modulate and stay rms_norm;
 *   - exact: `step` and the whole `sample` program (49 Euler steps) are bitwise equal to
 *     the same pipeline with the pass disabled (the unfused plan, same flags);
 *   - lossless: `step` runs, is finite, differs from exact (the tier is applied) and stays
 *     close to it (relative L2 < 1e-2). (`high` adds Cache-DiT's rewrite of the program,
 *     which its own tests cover; the fusion runs the same there as at lossless.)
 * Usage: normmod_model_test.
 */
#include "../common/case_data.h"
#include "../common/tiny_h3.h"
#include "nm_test.h"

#include "h3/frontend.h"
#include "h3/passes.h"
#include "h3/runtime.h"


typedef struct {
  int plan_a, plan_b, plan_a_f32, rms_norm;
} counts;

static int count_op(h3_op *op, void *ctx) {
  counts *c = ctx;
  if (op->code == H3_OP_NORM_MODULATE) {
    c->plan_a++;
    c->plan_a_f32 += strcmp(h3_op_attr_string(op, "modulate", ""), "f32") == 0;
  }
  c->plan_b += op->code == H3_OP_RESIDUAL_NORM_MODULATE;
  c->rms_norm += op->code == H3_OP_RMS_NORM;
  return 0;
}

static void check_counts(const h3_module *m, const char *tier) {
  counts step = {0}, text = {0};
  case_walk_graph(m, "step", count_op, &step);
  case_walk_graph(m, "text", count_op, &text);
  /* the q/k norms are rms_norm_rope ops (qk-norm-rope-fusion): no rms_norm is left in step */
  CHECK(step.plan_a == 2 && step.plan_b == 1 && step.plan_a_f32 == 1 && step.rms_norm == 0,
        "%s step: %d Plan A (%d fp32), %d Plan B, %d rms_norm (want 2 (1), 1, 0)", tier,
        step.plan_a, step.plan_a_f32, step.plan_b, step.rms_norm);
  CHECK(text.plan_a == 0 && text.plan_b == 0 && text.rms_norm > 0, "%s text graph changed", tier);
}


int main(void) {
  h3_module *unfused = tiny_h3_compile(H3_TIER_EXACT, "norm-modulate-fusion");
  h3_module *tiers[2] = {tiny_h3_compile(H3_TIER_EXACT, NULL), tiny_h3_compile(H3_TIER_LOSSLESS, NULL)};
  CHECK(unfused && tiers[0] && tiers[1], "compiling the tiny model");
  if (!unfused || !tiers[0] || !tiers[1]) return nm_report("normmod_model");
  static const char *names[2] = {"exact", "lossless"};
  h3_host_tensor ref[2], out[2][2];
  bool ok = tiny_h3_run(unfused, "step", 21, ref);
  CHECK(ok, "unfused step");
  for (int k = 0; k < 2 && ok; k++) {
    check_counts(tiers[k], names[k]);
    ok = tiny_h3_run(tiers[k], "step", 21, out[k]);
    CHECK(ok, "%s step", names[k]);
  }
  if (!ok) return nm_report("normmod_model");
  for (int i = 0; i < 2; i++) {
    CHECK(memcmp(ref[i].data, out[0][i].data, ref[i].bytes) == 0,
          "exact step %s is not bitwise equal to the unfused plan", ref[i].name);
    for (int k = 1; k < 2; k++) {
      const float *a = out[k][i].data, *e = out[0][i].data;
      double num = 0, den = 0;
      int64_t bad = 0, n = (int64_t)(ref[i].bytes / 4);
      for (int64_t j = 0; j < n; j++) {
        bad += !isfinite(a[j]);
        num += ((double)a[j] - e[j]) * ((double)a[j] - e[j]);
        den += (double)e[j] * e[j];
      }
      double rel = sqrt(num / (den > 0 ? den : 1));
      printf("%s step %s: relative L2 %.3e against exact\n", names[k], ref[i].name, rel);
      CHECK(bad == 0 && num > 0 && rel < 1e-2, "%s step %s: %lld non-finite, relative L2 %g",
            names[k], ref[i].name, (long long)bad, rel);
    }
  }
  h3_host_tensor sref[2], sout[2];
  ok = tiny_h3_run(unfused, "sample", 21, sref) && tiny_h3_run(tiers[0], "sample", 21, sout);
  CHECK(ok, "sample");
  if (!ok) return nm_report("normmod_model");
  for (int i = 0; i < 2; i++)
    CHECK(memcmp(sref[i].data, sout[i].data, sref[i].bytes) == 0,
          "exact sample %s is not bitwise equal to the unfused plan", sref[i].name);
  tiny_h3_outputs_free(ref, 2), tiny_h3_outputs_free(sref, 2), tiny_h3_outputs_free(sout, 2);
  for (int k = 0; k < 2; k++) {
    tiny_h3_outputs_free(out[k], 2);
    h3_module_free(tiers[k]);
  }
  h3_module_free(unfused);
  return nm_report("normmod_model");
}
