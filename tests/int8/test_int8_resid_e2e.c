/* test_int8_resid_e2e.c: the int8-resid-dequant pass end to end (docs/int8.md section 8).
 *   - the small H3 of int8_e2e.h (widths 256, one block), `step` graph, with the passes
 *     h3c --int8 enabled before this one, with and without int8-resid-dequant, at the
 *     exact and lossless tiers, --int8=rotate=0 and rotate=256: the pass rewrites one
 *     residual_norm_modulate per block to read out_proj's accumulators (no dequant_i8 left
 *     on its update), and the outputs are bitwise equal to the plan without it (the CPU
 *     backend, same random weights and inputs);
 *   - the full H3 with the same passes at both tiers: the step trunk's Plan B reads the
 *     accumulators (i32 update, quantize = 1 for fc1's input), and NVRTC compiles its CUDA
 *     kernel (exact: -fmad=false), skipped without libnvrtc.
 */
#include "int8_e2e.h"

#include "h3/kernels.h"
#include "h3/codegen.h"
#include "h3/op_registry.h"

#define BASE "int8-lowering,row-split,int8-fuse-quant,int8-dequant-split"
#define WITH BASE ",int8-resid-dequant"

typedef struct {
  int acc_b, bf16_b; /* residual_norm_modulate with an i32 / a bf16 update */
  const h3_op *last; /* the last one with an i32 update */
} resid_count;

static int count_op(h3_op *op, void *arg) {
  resid_count *c = arg;
  if (op->code != H3_OP_RESIDUAL_NORM_MODULATE) return 0;
  if (op->operands[1]->type.dtype == H3_I32) {
    c->acc_b++;
    c->last = op;
  } else {
    c->bf16_b++;
  }
  return 0;
}

static resid_count count(h3_module *m, const char *graph) {
  resid_count c = {0, 0, NULL};
  case_walk_graph(m, graph, count_op, &c);
  return c;
}

static void test_small(h3_tier tier, const char *int8) {
  printf("small H3 --int8=%s --quality %s\n", int8, h3_tier_name(tier));
  h3_module *m0 = small_h3(int8, tier, BASE), *m1 = small_h3(int8, tier, WITH);
  CHECK(m0 && m1, "compiling the small H3");
  if (m0 && m1) {
    resid_count c0 = count(m0, "step"), c1 = count(m1, "step");
    CHECK(c0.acc_b == 0 && c0.bf16_b == 1, "without the pass: %d i32 / %d bf16 updates", c0.acc_b,
          c0.bf16_b);
    CHECK(c1.acc_b == 1 && c1.bf16_b == 0, "with the pass: %d i32 / %d bf16 updates", c1.acc_b,
          c1.bf16_b);
    run_result r0 = run(m0, "step"), r1 = run(m1, "step");
    CHECK(same_bits(&r1, &r0), "step outputs differ with int8-resid-dequant");
    result_free(&r0, m0, "step");
    result_free(&r1, m1, "step");
  }
  h3_module_free(m0);
  h3_module_free(m1);
}

/* NVRTC compiles one kernel source in its tier's translation unit. */
static bool nvrtc_ok(const h3_kernel *k) {
  static const char *const opts[3] = {"-default-device", "-std=c++17", "-fmad=false"};
  const bool exact = k->tier != H3_TIER_LOSSLESS;
  h3_strbuf tu;
  h3_strbuf_init(&tu);
  h3_strbuf_append(&tu, h3_kernel_prelude());
  h3_strbuf_append(&tu, k->source);
  h3_nvrtc_job job;
  memset(&job, 0, sizeof job);
  job.label = "resid_acc.cu";
  job.source = tu.data;
  job.options = opts;
  job.n_options = exact ? 3 : 2;
  h3_kernel_cache off;
  memset(&off, 0, sizeof off);
  h3_diag d;
  h3_diag_init(&d);
  bool ok = !tu.oom && h3_nvrtc_compile(&job, 1, &off, 1, &d) == H3_OK && job.cubin_len > 0;
  if (!ok) h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  h3_nvrtc_job_free(&job);
  h3_strbuf_free(&tu);
  return ok;
}

static void test_full_h3(h3_tier tier) {
  h3_frontend_options fo = {.config = "full"};
  h3_pass_options o = h3_pass_options_default();
  o.tier = tier;
  o.int8 = "";
  o.enable = WITH;
  h3_module *m = minimax_h3_load(&fo, &o);
  bool ok = m != NULL;
  CHECK(ok, "full H3 --int8 at %s", h3_tier_name(tier));
  resid_count c = ok ? count(m, "step") : (resid_count){0, 0, NULL};
  printf("full H3 --quality %s, step: Plan B with accumulators %d, with a bf16 update %d\n",
         h3_tier_name(tier), c.acc_b, c.bf16_b);
  CHECK(c.acc_b == 1 && c.bf16_b == 0, "expected the trunk's Plan B on out_proj's accumulators");
  if (c.last) {
    const h3_op *op = c.last;
    CHECK(op->n_operands == 9 && h3_op_attr_int(op, "quantize", 0) == 1 &&
              op->operands[1]->def && op->operands[1]->def->code == H3_OP_MATMUL_I8,
          "the fused op: %d operands, quantize %lld", op->n_operands,
          (long long)h3_op_attr_int(op, "quantize", 0));
    h3_arena a;
    h3_arena_init(&a);
    h3_kernel k;
    h3_diag d;
    h3_diag_init(&d);
    bool emitted = h3_codegen_emit_op(op, tier, &a, &k, &d) == H3_OK;
    if (!emitted) h3_diag_print(&d, stderr);
    h3_diag_free(&d);
    CHECK(emitted && strstr(k.source, "const int * __restrict__ in1") &&
              strstr(k.source, "const float sxv = h3_ld(in7, row)"),
          "emitting the accumulator kernel");
    if (emitted && strcmp(h3_nvrtc_version(), "unavailable") != 0)
      CHECK(nvrtc_ok(&k), "NVRTC rejects the %s kernel", h3_tier_name(tier));
    else if (emitted)
      printf("  libnvrtc not found: NVRTC compile skipped\n");
    h3_arena_free(&a);
  }
  h3_module_free(m);
}

int main(void) {
  test_full_h3(H3_TIER_EXACT);
  test_full_h3(H3_TIER_LOSSLESS);
  test_small(H3_TIER_EXACT, "rotate=0");
  test_small(H3_TIER_LOSSLESS, "rotate=0");
  test_small(H3_TIER_EXACT, "rotate=256");
  test_small(H3_TIER_LOSSLESS, "rotate=256");
  return check_summary("test_int8_resid_e2e");
}
