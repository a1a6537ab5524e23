/* test_nvrtc.c: NVRTC compiles the rms_norm_rope kernels of kernels/emu_ops.ir for sm_90
 * (no GPU needed), next to the unfused chain's kernels, in both translation-unit flavours
 * of a plan (exact: -fmad=false; lossless: contraction allowed; the kernel uses _rn
 * intrinsics only, so both give the same bits). Also checks the launch rule (256 threads,
 * 16 head rows per block for heads of at most 16 chunks, else 8) and the name
 * (h3_rms_norm_rope_<hash of the source>). Exit 77 when NVRTC is unavailable.
 */
#include "qk_test.h"

#include "h3/kernels.h"
#include "h3/codegen.h"
#include "h3/op_registry.h"

#include <stdio.h>

int main(void) {
  if (strcmp(h3_nvrtc_version(), "unavailable") == 0 || !h3_cuda_include_dir()) {
    fprintf(stderr, "NVRTC or the CUDA headers are unavailable: skipped\n");
    return 77;
  }
  const char *path = H3_SOURCE_DIR "/tests/qkrope/kernels/emu_ops.ir";
  h3_diag d;
  h3_diag_init(&d);
  size_t len = 0;
  char *text = h3_read_file(path, &len, &d);
  h3_module *m = text ? h3_module_parse(path, text, len, &d) : NULL;
  free(text);
  CHECK(m != NULL, "cannot read %s", path);
  if (!m) {
    h3_diag_print(&d, stderr);
    return check_summary("qkrope_nvrtc");
  }
  h3_arena a;
  h3_arena_init(&a);
  h3_strbuf tu;
  h3_strbuf_init(&tu);
  h3_strbuf_append(&tu, h3_kernel_prelude());
  int fused = 0;
  for (int gi = 0; gi < m->n_graphs; gi++)
    for (h3_op *op = m->graphs[gi]->body.first; op; op = op->next) {
      if (h3_exec_classify(op) != H3_EXEC_KERNEL) continue;
      h3_kernel k;
      bool ok = h3_codegen_emit_op(op, H3_TIER_EXACT, &a, &k, &d) == H3_OK;
      CHECK(ok, "@%s: emitting %s", m->graphs[gi]->name, h3_opcode_name(op->code));
      if (!ok) continue;
      h3_strbuf_append(&tu, k.source);
      if (op->code != H3_OP_RMS_NORM_ROPE) continue;
      fused++;
      const h3_type *y = &op->results[0]->type;
      const int64_t units = y->dims[2] % 8 ? y->dims[2] : y->dims[2] / 8; /* chunks per row */
      const int64_t rows = y->dims[0] * y->dims[1], per = units <= 16 ? 16 : 8;
      CHECK(k.block[0] == 256 && k.grid[0] == (rows + per - 1) / per,
            "@%s: launch %lld x %lld for %lld rows", m->graphs[gi]->name, (long long)k.grid[0],
            (long long)k.block[0], (long long)rows);
      CHECK(h3_kernel_name_matches(k.name, "rms_norm_rope", k.source), "@%s: kernel name %s",
            m->graphs[gi]->name, k.name);
      CHECK(!strstr(k.source, "__fmaf_rn") && !strstr(k.source, "fmaf("),
            "@%s: the kernel must not use an fma", m->graphs[gi]->name);
    }
  CHECK(fused == m->n_graphs, "one fused kernel per graph (%d)", fused);
  static const char *const opts[2][3] = {{"-default-device", "-std=c++17", "-fmad=false"},
                                         {"-default-device", "-std=c++17", NULL}};
  h3_kernel_cache off;
  memset(&off, 0, sizeof off);
  for (int t = 0; t < 2 && !tu.oom; t++) {
    h3_nvrtc_job job;
    memset(&job, 0, sizeof job);
    job.label = t ? "qkrope_lossless.cu" : "qkrope_exact.cu";
    job.source = tu.data;
    job.options = opts[t];
    job.n_options = t ? 2 : 3;
    bool ok = h3_nvrtc_compile(&job, 1, &off, 1, &d) == H3_OK && job.cubin;
    CHECK(ok, "NVRTC: %s", job.label);
    if (ok) printf("%s: %zu bytes of cubin\n", job.label, job.cubin_len);
    h3_nvrtc_job_free(&job);
  }
  CHECK(!tu.oom, "out of memory");
  if (d.errors) h3_diag_print(&d, stderr);
  h3_strbuf_free(&tu);
  h3_arena_free(&a);
  h3_diag_free(&d);
  h3_module_free(m);
  return check_summary("qkrope_nvrtc");
}
