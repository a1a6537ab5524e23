/* test_nvrtc.c: NVRTC compiles the norm+modulate kernels for sm_90 (no GPU needed), in the
 * translation units a plan gives them (exact: -fmad=false; lossless: contraction allowed),
 * next to the kernels of the unfused chains, at the H3 shape [32768, 5376] with a 12-row
 * AdaLN table and at [3, 2056]. Checks the launch rule (one block per row: 256 threads at
 * exact, rms_norm's; lossless: the fewest chunks per thread, as many for every thread), the
 * names (h3_<op>_<hash of the source>), that only the lossless kernels use an fma, and
 * that Plan B's residual pointers (in0, out0: one buffer when updated in place) are the
 * only ones without __restrict__; the quantize = 1 kernels (int8-fuse-quant) with their
 * code / scale results and y's store only where y has uses; and that the GPU test's argument binding (nm_bind) gives
 * every kernel of both graphs its own operands and results (check_binding).
 */
#include "nm_build.h"
#include "nm_test.h"

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
    CHECK(strcmp(k->tier, tiers[i]) == 0, "%s: tier %s", names[i], k->tier);
    const bool lossless = strcmp(tiers[i], "lossless") == 0;
    const int block = lossless ? lossless_block : 256;
    CHECK(k->grid[0] == T && k->block[0] == block && !k->inplace, "%s: launch %lld x %lld, not %lld x %d",
          names[i], (long long)k->grid[0], (long long)k->block[0], (long long)T, block);
    CHECK(h3_codegen_name_matches(k->name, k->op, k->source), "%s: name %s", names[i], k->name);
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
