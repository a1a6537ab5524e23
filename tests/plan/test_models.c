/* test_models.c: both models at their full configs, through the front end, the default
 * pass pipeline (exact and lossless; H3 also with h3c's --int8 passes, rotate 0 and 256) and
 * the plan builder: every kernel of every plan compiles with NVRTC (cache disabled, so it
 * really compiles), every op that needs a kernel or library call names one, and the plans
 * read back and write the same bytes.
 */
#include "../codegen/cg_test.h"
#include "h3/frontend.h"
#include "h3/passes.h"
#include "h3/plan.h"

/* int8: NULL, or the --int8 option text ("" = the defaults) with H3_INT8_PASSES enabled */
static void one(const char *model, h3_tier tier, const char *int8) {
  char path[512];
  snprintf(path, sizeof path, "%s/models/%s", H3_SOURCE_DIR, model);
  h3_diag d;
  h3_diag_init(&d);
  h3_frontend_options fo = {0};
  fo.config = "full";
  h3_module *m = h3_frontend_load(path, &fo, &d);
  CHECK(m != NULL);
  h3_pass_options po = h3_pass_options_default();
  po.tier = tier;
  if (int8) po.int8 = int8, po.enable = H3_INT8_PASSES;
  if (m) CHECK(h3_pass_pipeline_run(m, &po, &d) == H3_OK);
  h3_plan_options o = {0};
  o.quality = tier;
  h3_plan *p = NULL;
  if (m && d.errors == 0) CHECK(h3_plan_build(&p, m, &o, &d) == H3_OK);
  else h3_module_free(m);
  if (p) {
    fprintf(stderr, "%s (%s%s%s): %d kernels in %d units, %d library calls, %lld weight tensors\n",
            model, h3_tier_name(o.quality), int8 ? ", --int8=" : "", int8 ? int8 : "", p->n_kernels, p->n_tus,
            p->n_libcalls, (long long)p->n_weights);
    CHECK(p->n_kernels > 10 && p->n_libcalls > 0 && p->n_weights > 100);
    CHECK(h3_plan_compile_kernels(p, &d) == H3_OK);
    for (int i = 0; i < p->n_tus; i++) CHECK(p->tus[i].cubin && p->tus[i].cubin_len > 0);
    int lossless = 0;
    for (int i = 0; i < p->n_kernels; i++) lossless += p->kernels[i].k.tier == H3_TIER_LOSSLESS;
    if (tier == H3_TIER_EXACT) CHECK(lossless == 0);
    h3_strbuf y;
    h3_strbuf_init(&y);
    CHECK(h3_plan_to_yaml(p, &y) == H3_OK);
    h3_plan *q = h3_plan_read_text(model, y.data, y.len, &d);
    CHECK(q != NULL);
    if (q) {
      h3_strbuf y2;
      h3_strbuf_init(&y2);
      CHECK(h3_plan_to_yaml(q, &y2) == H3_OK);
      CHECK(y2.len == y.len && memcmp(y.data, y2.data, y.len) == 0);
      h3_strbuf_free(&y2);
    }
    h3_plan_free(q);
    h3_strbuf_free(&y);
  }
  if (d.errors) h3_diag_print(&d, stderr);
  CHECK(d.errors == 0);
  h3_plan_free(p);
  h3_diag_free(&d);
}

int main(void) {
  setenv("H3_KERNEL_CACHE", "0", 1);
  one("minimax_h3.g", H3_TIER_LOSSLESS, NULL);
  one("minimax_h3.g", H3_TIER_EXACT, NULL);
  one("minimax_h3.g", H3_TIER_LOSSLESS, "");
  one("minimax_h3.g", H3_TIER_EXACT, "");
  one("minimax_h3.g", H3_TIER_LOSSLESS, "rotate=256");
  one("minimax_m3_1.g", H3_TIER_LOSSLESS, NULL);
  one("minimax_m3_1.g", H3_TIER_EXACT, NULL);
  return cg_report("test_models");
}
