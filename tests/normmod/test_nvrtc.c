/* test_nvrtc.c: NVRTC compiles the norm+modulate kernels for sm_90 (no GPU needed), in the
 * translation units a plan gives them (exact: -fmad=false; lossless: contraction allowed),
 * next to the kernels of the unfused chains, at the H3 shape [32768, 5376] with a 12-row
 * AdaLN table and at [3, 2056]. Checks the launch rule (one block per row: 256 threads at
 * exact, rms_norm's; lossless: the fewest chunks per thread, as many for every thread), the
 * names (h3_<op>_<hash of the source>), that only the lossless kernels use an fma, and
 * that Plan B's residual pointers (in0, out0: one buffer when updated in place) are the
 * only ones without __restrict__; the quantize = 1 kernels (int8-fuse-quant) with their
 * code / scale results and y's store only where y has uses; the staged row (cp.async into
 * shared memory, __launch_bounds__(block, 5)) exactly for lossless Plan B without a quantizer
 * and without idle chunks; at the H3 shape what ptxas reports (through NVRTC's -v log) for the
 * measured forms: lossless Plan A <= 40 registers, the staged Plan B <= 56, no spills; and
 * that the GPU test's argument binding (nm_bind) gives every kernel of both graphs its own
 * operands and results (check_binding).
 */
#include "nm_build.h"
#include "nm_test.h"

#include <nvrtc.h>

/* What ptxas reports for kernel k compiled alone (the prelude and its source, the lossless
 * tier's options): registers, spill store bytes, shared memory bytes; false when NVRTC fails
 * or the log lacks the lines. */
typedef struct {
  int regs, spill, smem;
} ptxas_use;
static bool ptxas_usage(const h3_kernel *k, ptxas_use *u) {
  size_t n1 = strlen(h3_kernel_prelude()), n2 = strlen(k->source);
  char *src = malloc(n1 + n2 + 1), inc[4200];
  if (!src) return false;
  memcpy(src, h3_kernel_prelude(), n1);
  memcpy(src + n1, k->source, n2 + 1);
  snprintf(inc, sizeof inc, "-I%s", h3_cuda_include_dir() ? h3_cuda_include_dir() : ".");
  const char *opts[] = {"-default-device", "-std=c++17", "--gpu-architecture=" H3_TARGET_ARCH, inc,
                        "--ptxas-options=-v"};
  nvrtcProgram p;
  bool ok = nvrtcCreateProgram(&p, src, "usage.cu", 0, NULL, NULL) == NVRTC_SUCCESS;
  free(src);
  if (!ok) return false;
  ok = nvrtcCompileProgram(p, 5, opts) == NVRTC_SUCCESS;
  size_t len = 0;
  char *log = ok && nvrtcGetProgramLogSize(p, &len) == NVRTC_SUCCESS ? malloc(len + 1) : NULL;
  ok = log && nvrtcGetProgramLog(p, log) == NVRTC_SUCCESS;
  nvrtcDestroyProgram(&p);
  char want[160];
  snprintf(want, sizeof want, "Function properties for %s\n", k->name);
  const char *at = ok ? strstr(log, want) : NULL, *used = at ? strstr(at, "Used ") : NULL;
  const char *frame = at ? strstr(at, "bytes stack frame, ") : NULL;
  ok = used && frame && sscanf(frame + 19, "%d", &u->spill) == 1 &&
       sscanf(used, "Used %d registers", &u->regs) == 1;
  /* "Used R registers, used 1 barriers[, S bytes cumulative stack size], M bytes smem" */
  const char *eol = ok ? strchr(used, '\n') : NULL, *sm = ok ? strstr(used, " bytes smem") : NULL;
  u->smem = 0;
  if (sm && (!eol || sm < eol)) {
    while (sm > used && sm[-1] >= '0' && sm[-1] <= '9') sm--;
    u->smem = atoi(sm);
  }
  free(log);
  return ok;
}

/* The GPU test's argument binding (nm_bind) on every kernel of both graphs: operands then
 * results, each the pointer of its own value. @g's exact fusion gives a group with three
 * results (%g1, %g2 and %y, since the fp32 chain also reads both gathers); an earlier
 * harness bound results into a two-slot array, so the third overwrote operand 0 (the
 * scale table) and the unfused reference of the exact-tier check read garbage. */
static void check_binding(h3_module *m, bool fuse) {
  unsigned long long *by_id = calloc((size_t)m->next_value_id + 1, sizeof *by_id);
  CHECK(by_id != NULL, "allocation");
  if (!by_id) return;
  for (int v = 0; v <= m->next_value_id; v++) by_id[v] = 0x1000ull + (unsigned long long)v * 64;
  int most = 0;
  for (int g = 0; g < 2; g++) {
    h3_arena a;
    h3_arena_init(&a);
    nm_kernel_set *ks = calloc(1, sizeof *ks);
    CHECK(ks && nm_emit(m, g, &a, ks), "emitting graph %d", g);
    for (int i = 0; ks && i < ks->n; i++) {
      const h3_op *op = ks->ops[i];
      unsigned long long args[NM_MAX_ARGS + 1];
      args[NM_MAX_ARGS] = 0xdeadull;
      const int n = nm_bind(op, by_id, args);
      CHECK(n == op->n_operands + op->n_results, "%s: bound %d arguments", ks->k[i].name, n);
      for (int j = 0; j < n; j++) {
        const h3_value *v = j < op->n_operands ? op->operands[j] : op->results[j - op->n_operands];
        CHECK(args[j] == by_id[v->id], "%s: argument %d bound to the wrong value", ks->k[i].name, j);
      }
      CHECK(args[NM_MAX_ARGS] == 0xdeadull, "%s: binding wrote past its array", ks->k[i].name);
      if (op->n_results > most) most = op->n_results;
    }
    free(ks);
    h3_arena_free(&a);
  }
  if (fuse) CHECK(most >= 3, "no kernel with three results: the binding case is not covered");
  free(by_id);
}

/* lossless_block: the lossless kernels' block (the fewest chunks per thread that 256 threads
 * allow, the same number for every thread where H allows: 672 chunks of 8 -> 3 x 224, 257 ->
 * 2 x 160 (the last one 97)). */
static void check_shape(int64_t T, int64_t H, int64_t G, bool fuse, int lossless_block) {
  fprintf(stderr, "[%lld, %lld], G = %lld\n", (long long)T, (long long)H, (long long)G);
  h3_module *m = nm_module(T, H, G, fuse);
  CHECK(m != NULL, "module");
  if (!m) return;
  check_binding(m, fuse);
  h3_arena a;
  h3_arena_init(&a);
  nm_kernel_set *ks = calloc(1, sizeof *ks);
  CHECK(ks && nm_emit(m, 0, &a, ks), "emitting");
  const char *names[10] = {"ae", "al", "fe", "be", "bl", "qa", "ql", "qb", "qbl", "qy"};
  const char *tiers[10] = {"exact", "lossless", "exact", "exact", "lossless",
                           "exact", "lossless", "exact", "lossless", "exact"};
  for (int i = 0; ks && i < 10; i++) {
    int j = nm_find(ks, names[i]);
    CHECK(j >= 0, "no kernel for %%%s", names[i]);
    if (j < 0) continue;
    const h3_kernel *k = &ks->k[j];
    CHECK(strcmp(h3_tier_name(k->tier), tiers[i]) == 0, "%s: tier %s", names[i], h3_tier_name(k->tier));
    const bool lossless = strcmp(tiers[i], "lossless") == 0;
    const int block = lossless ? lossless_block : 256;
    CHECK(k->grid[0] == T && k->block[0] == block && !k->inplace, "%s: launch %lld x %lld, not %lld x %d",
          names[i], (long long)k->grid[0], (long long)k->block[0], (long long)T, block);
    CHECK(h3_kernel_name_matches(k->name, k->op, k->source), "%s: name %s", names[i], k->name);
    CHECK((strstr(k->source, "__fmaf_rn") != NULL) == (strcmp(tiers[i], "lossless") == 0),
          "%s: fma use does not match the tier", names[i]);
    const h3_op *op = ks->ops[j];
    const bool plan_b = op->code == H3_OP_RESIDUAL_NORM_MODULATE, quant = names[i][0] == 'q';
    if (plan_b)
      CHECK(strstr(k->source, "const h3_bf16 * in0, const h3_bf16 * __restrict__ in1") &&
                strstr(k->source, "h3_bf16 * out0, h3_bf16 * __restrict__ out1"),
            "%s: restrict qualifiers", names[i]);
    /* quantize = 1: two more results (codes, scales), the second block reduction, the
       8-byte code stores on the vector path; y stored only when it has uses (%qy) */
    CHECK(k->n_args == op->n_operands + op->n_results &&
              op->n_results == (plan_b ? 2 : 1) + (quant ? 2 : 0),
          "%s: %d arguments", names[i], k->n_args);
    if (quant)
      CHECK(strstr(k->source, plan_b ? "signed char * __restrict__ out2, float * __restrict__ out3"
                                     : "signed char * __restrict__ out1, float * __restrict__ out2") &&
                strstr(k->source, "qpart[tid >> 5] = qm") && strstr(k->source, "h3_str8<true>(qo, u * 8, qr)"),
            "%s: no quantizer in the kernel", names[i]);
    const bool stores_y = strstr(k->source, "h3_str8<true>(y, u * 8, yr)") != NULL;
    CHECK(stores_y == (!quant || !strcmp(names[i], "qy")), "%s: y %s", names[i],
          stores_y ? "stored although unused" : "not stored");
    /* the staged row (residual and update rows by cp.async into shared memory, 5 blocks per
       SM asked of ptxas): lossless Plan B without a quantizer where every thread has all of
       its chunks; every other kernel keeps its rows in registers */
    const bool staged = strstr(k->source, "h3_cp16(") != NULL;
    const bool want_staged = plan_b && lossless && !quant && H / 8 % lossless_block == 0 && H <= 8192;
    CHECK(staged == want_staged, "%s: %s row", names[i], staged ? "staged" : "register");
    char bound[64], any[64];
    snprintf(bound, sizeof bound, "__launch_bounds__(%d, %d)", block, 65536 / (56 * block));
    snprintf(any, sizeof any, "__launch_bounds__(%d, ", block);
    CHECK(want_staged ? strstr(k->source, bound) != NULL : strstr(k->source, any) == NULL,
          "%s: blocks-per-SM bound", names[i]);
    /* ptxas at the H3 shape: the measured forms' registers without spills (Plan A lossless 40
       registers, 7 rows of 224 per SM; the staged Plan B 56, 5 rows, and its 21 KiB of rows) */
    if (H == 5376 && (!strcmp(names[i], "al") || !strcmp(names[i], "bl"))) {
      ptxas_use use;
      CHECK(ptxas_usage(k, &use), "%s: no ptxas report", names[i]);
      const bool a = names[i][0] == 'a';
      CHECK(use.spill == 0 && use.regs <= (a ? 40 : 56) && (a || use.smem >= 2 * 5376 * 2),
            "%s: ptxas reports %d registers, %d bytes spilled, %d bytes of shared memory", names[i],
            use.regs, use.spill, use.smem);
    }
  }
  h3_nvrtc_job jobs[2];
  char *src[2] = {NULL, NULL};
  bool ok = ks && nm_compile(ks, jobs, src);
  CHECK(ok && src[0] && src[1], "NVRTC failed (see the log above)");
  for (int t = 0; ok && t < 2; t++) {
    CHECK(jobs[t].cubin_len > 0, "empty cubin");
    h3_nvrtc_job_free(&jobs[t]);
    free(src[t]);
  }
  free(ks);
  h3_arena_free(&a);
  h3_module_free(m);
}

int main(void) {
  if (strcmp(h3_nvrtc_version(), "unavailable") == 0) {
    fprintf(stderr, "normmod_nvrtc: libnvrtc not found; skipped\n");
    return 77;
  }
  check_shape(32768, 5376, 12, true, 224);
  check_shape(3, 2056, 2, false, 160);
  return nm_report("normmod_nvrtc");
}
