/* test_gpu.c: every kernel of tests/codegen/all_ops.ir run on a real GPU (label gpu) and
 * compared with the CPU backend on the same random inputs, with the rules of op_check.h.
 * The CUDA driver is opened with dlopen, so the test builds and links on machines without
 * one; there it exits 77 (skipped). Kernels are compiled by NVRTC in one translation unit
 * (cache off) and launched with their recorded launch rule; in-place kernels get out0 =
 * in0 first, as the runtime does.
 *   h3_codegen_gpu_test [ALL_OPS_IR]   (default: tests/codegen/all_ops.ir of the source folder it
 *                                      was built in)
 */
#include "h3/kernels.h"
#include "h3/backend.h"
#include "op_check.h"

#include "../common/cuda_driver.h"

int main(int argc, char **argv) {
  if (!cuda_driver_open(NULL, 0)) {
    fprintf(stderr, "test_gpu: no usable CUDA driver/GPU; skipped\n");
    return 77;
  }
  /* argv[1]: the IR file by path (a checkout other than the one it was built in) */
  h3_module *m = cg_load_ir(argc > 1 ? argv[1] : "all_ops.ir");
  CHECK(m != NULL);
  if (!m) return cg_report("test_gpu");
  cg_oplist ops = cg_kernel_ops(m);
  h3_arena a;
  h3_arena_init(&a);
  h3_kernel *ks = calloc((size_t)ops.n + 1, sizeof *ks);
  h3_strbuf tu;
  h3_strbuf_init(&tu);
  h3_strbuf_append(&tu, h3_kernel_prelude());
  h3_diag d;
  h3_diag_init(&d);
  for (int i = 0; i < ops.n; i++) {
    CHECK(h3_codegen_emit_op(ops.ops[i], H3_TIER_EXACT, &a, &ks[i], &d) == H3_OK);
    bool dup = false;
    for (int j = 0; j < i; j++) dup |= strcmp(ks[j].name, ks[i].name) == 0;
    if (!dup) h3_strbuf_append(&tu, ks[i].source);
  }
  const char *opts[] = {"-default-device", "-std=c++17", "-fmad=false"};
  h3_nvrtc_job job;
  memset(&job, 0, sizeof job);
  job.label = "gpu_test.cu";
  job.source = tu.data;
  job.options = opts;
  job.n_options = 3;
  h3_kernel_cache off = {0};
  CHECK(h3_nvrtc_compile(&job, 1, &off, 1, &d) == H3_OK);
  CUmodule mod;
  bool loaded = job.cubin && cu.mod_load(&mod, job.cubin) == CUDA_SUCCESS;
  CHECK(loaded);
  int tested = 0;
  const uint64_t seed = 1234567;
  for (int i = 0; loaded && i < ops.n; i++) {
    const h3_op *op = ops.ops[i];
    const h3_kernel *k = &ks[i];
    CUfunction fn;
    if (cu.mod_fn(&fn, mod, k->name) != CUDA_SUCCESS) {
      CHECK(!"kernel not found in the module");
      continue;
    }
    int n_in = op->n_operands, n_out = op->n_results;
    h3_tensor in[16], cpu_out[4];
    void *host_out[4];
    CUdeviceptr dptr[24];
    void *params[24];
    int np = 0;
    make_inputs(op, in);
    for (int j = 0; j < n_in; j++) {
      size_t bytes = (size_t)h3_type_bytes(&in[j].type);
      CHECK(cu.alloc(&dptr[np], bytes + 16) == CUDA_SUCCESS);
      CHECK(cu.htod(dptr[np], in[j].data, bytes) == CUDA_SUCCESS);
      params[np] = &dptr[np];
      np++;
    }
    for (int j = 0; j < n_out; j++) {
      size_t bytes = (size_t)h3_type_bytes(&op->results[j]->type);
      cpu_out[j].type = op->results[j]->type;
      cpu_out[j].data = calloc(1, bytes + 16);
      host_out[j] = calloc(1, bytes + 16);
      CHECK(cu.alloc(&dptr[np], bytes + 16) == CUDA_SUCCESS);
      if (k->inplace && j == 0) CHECK(cu.htod(dptr[np], in[0].data, bytes) == CUDA_SUCCESS);
      params[np] = &dptr[np];
      np++;
    }
    uint64_t s = seed;
    if (op->code == H3_OP_RANDN) params[np] = &s;
    CUresult r = cu.launch(fn, (unsigned)k->grid[0], (unsigned)k->grid[1], (unsigned)k->grid[2],
                           (unsigned)k->block[0], (unsigned)k->block[1], (unsigned)k->block[2],
                           (unsigned)k->shared_bytes, NULL, params, NULL);
    CHECK(r == CUDA_SUCCESS && cu.sync() == CUDA_SUCCESS);
    CHECK(h3_cpu_run_op(op, in, n_in, cpu_out, n_out, 1, seed, &d) == H3_OK);
    for (int j = 0; j < n_out; j++) {
      CHECK(cu.dtoh(host_out[j], dptr[n_in + j], (size_t)h3_type_bytes(&op->results[j]->type)) == CUDA_SUCCESS);
      int64_t bad = compare(op, j, host_out[j], cpu_out[j].data);
      if (bad) fprintf(stderr, "op %d (%s): %lld elements differ\n", i, h3_opcode_name(op->code), (long long)bad);
      CHECK(bad == 0);
      CHECK(nonzero(op, j, cpu_out[j].data));
    }
    tested++;
    for (int j = 0; j < n_in + n_out; j++) cu.free_(dptr[j]);
    for (int j = 0; j < n_in; j++) free(in[j].data);
    for (int j = 0; j < n_out; j++) {
      free(cpu_out[j].data);
      free(host_out[j]);
    }
  }
  if (d.errors) h3_diag_print(&d, stderr);
  CHECK(d.errors == 0);
  fprintf(stderr, "%d kernels run on the GPU and compared with the cpu backend\n", tested);
  CHECK(tested == ops.n);
  h3_diag_free(&d);
  h3_nvrtc_job_free(&job);
  h3_strbuf_free(&tu);
  free(ks);
  free(ops.ops);
  h3_arena_free(&a);
  h3_module_free(m);
  return cg_report("test_gpu");
}
