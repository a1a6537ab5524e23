/* test_nvrtc.c: NVRTC compiles the kernels of kernels/emu_ops.ir (add_rms_norm next to the
 * unfused add and rms_norm) for sm_90 (no GPU needed), once per tier: each kernel emitted
 * at the tier, the translation unit compiled with the tier's options
 * (h3_nvrtc_tier_options, as plans are built). Also checks each add_rms_norm kernel's
 * launch (a 256-thread block of 8 warp rows for rows of at most 32 chunks, else a block of
 * up to 256 threads per row), which equals its graph's rms_norm kernel's; its name
 * (h3_add_rms_norm_<hash of the source>); that it is not in place and uses no fma.
 * Exit 77 when NVRTC is unavailable.
 */
#include "../common/case_data.h"
#include "../common/check.h"

#include "h3/codegen.h"
#include "h3/kernel.h"
#include "h3/kernels.h"
#include "h3/op_registry.h"

#include <stdlib.h>
#include <string.h>

/* The launch rule of rms_norm / add_rms_norm over x (rows of D). */
static void expected_launch(const h3_type *x, int64_t *grid, int64_t *block) {
  const int64_t D = x->dims[x->rank - 1], rows = h3_type_numel(x) / D;
  const int64_t units = D % 8 ? D : D / 8, b = (units + 31) / 32 * 32;
  if (b == 32) *grid = (rows + 7) / 8, *block = 256;
  else *grid = rows, *block = b > 256 ? 256 : b;
}

/* Checks graph g's add_rms_norm kernel f against its rms_norm kernel n. */
static void check_fused(const char *g, const h3_op *op, const h3_kernel *f, const h3_kernel *n) {
  int64_t grid, block;
  expected_launch(&op->operands[0]->type, &grid, &block);
  CHECK(f->grid[0] == grid && f->block[0] == block && f->grid[0] == n->grid[0] &&
            f->block[0] == n->block[0] && f->grid[1] == 1 && f->block[1] == 1,
        "@%s: launch %lld x %lld, rms_norm's %lld x %lld, want %lld x %lld", g,
        (long long)f->grid[0], (long long)f->block[0], (long long)n->grid[0],
        (long long)n->block[0], (long long)grid, (long long)block);
  CHECK(h3_kernel_name_matches(f->name, "add_rms_norm", f->source), "@%s: kernel name %s", g,
        f->name);
  CHECK(!f->inplace && !strstr(f->source, "__fmaf_rn") && !strstr(f->source, "fmaf("),
        "@%s: in place %d, or an fma in the kernel", g, f->inplace);
}

/* Emits every kernel of m at `tier` into one translation unit and compiles it. */
static void check_tier(h3_module *m, h3_tier tier) {
  h3_diag d;
  h3_diag_init(&d);
  h3_arena a;
  h3_arena_init(&a);
  h3_strbuf tu;
  h3_strbuf_init(&tu);
  h3_strbuf_append(&tu, h3_kernel_prelude());
  int n_fused = 0;
  for (int gi = 0; gi < m->n_graphs; gi++) {
    h3_kernel norm = {0}, fused = {0};
    const h3_op *fop = NULL;
    bool have_norm = false;
    for (h3_op *op = m->graphs[gi]->body.first; op; op = op->next) {
      if (h3_exec_classify(op) != H3_EXEC_KERNEL) continue;
      h3_kernel k;
      const bool ok = h3_codegen_emit_op(op, tier, &a, &k, &d) == H3_OK;
      CHECK(ok, "@%s: emitting %s", m->graphs[gi]->name, h3_opcode_name(op->code));
      if (!ok) continue;
      h3_strbuf_append(&tu, k.source);
      if (op->code == H3_OP_RMS_NORM) norm = k, have_norm = true;
      if (op->code == H3_OP_ADD_RMS_NORM) fused = k, fop = op;
    }
    CHECK(fop && have_norm, "@%s: an add_rms_norm and an rms_norm kernel", m->graphs[gi]->name);
    if (fop && have_norm) check_fused(m->graphs[gi]->name, fop, &fused, &norm), n_fused++;
  }
  CHECK(n_fused == 5, "five add_rms_norm kernels (%d)", n_fused);
  char label[64];
  snprintf(label, sizeof label, "addnorm_emu_ops_%s.cu", h3_tier_name(tier));
  h3_nvrtc_job job;
  memset(&job, 0, sizeof job);
  job.label = label;
  job.source = tu.data;
  job.options = h3_nvrtc_tier_options(tier, &job.n_options);
  h3_kernel_cache off;
  memset(&off, 0, sizeof off);
  const bool ok = !tu.oom && h3_nvrtc_compile(&job, 1, &off, 1, &d) == H3_OK && job.cubin;
  CHECK(ok, "NVRTC: %s", label);
  if (ok) printf("%s: %zu bytes of cubin\n", label, job.cubin_len);
  if (d.errors) h3_diag_print(&d, stderr);
  h3_nvrtc_job_free(&job);
  h3_strbuf_free(&tu);
  h3_arena_free(&a);
  h3_diag_free(&d);
}

int main(void) {
  if (strcmp(h3_nvrtc_version(), "unavailable") == 0 || !h3_cuda_include_dir()) {
    fprintf(stderr, "NVRTC or the CUDA headers are unavailable: skipped\n");
    return 77;
  }
  const char *path = H3_SOURCE_DIR "/tests/addnorm/kernels/emu_ops.ir";
  h3_module *m = case_load_ir(path);
  CHECK(m != NULL, "cannot read %s", path);
  if (m) {
    check_tier(m, H3_TIER_EXACT);
    check_tier(m, H3_TIER_LOSSLESS);
  }
  h3_module_free(m);
  return check_summary("addnorm_nvrtc");
}
