/* test_nvrtc.c: NVRTC compiles the rms_norm_rope kernels of kernels/emu_ops.ir and the
 * rms_norm_rope_write kernels of kernels/emu_write.ir for sm_90 (no GPU needed), each file's
 * kernels with the unfused chain's in one translation unit (a kernel of the same source and
 * so the same name, as v's kv_write of a @v_* graph next to k's, once), in both flavours of a plan
 * (exact: -fmad=false; lossless: contraction allowed; the kernel uses _rn intrinsics only,
 * so both give the same bits). Also checks the launch rule (256 threads, 16 head rows per
 * block for heads of at most 16 chunks, else 8), the name (h3_<op>_<hash of the source>)
 * and, for the write form, that the kernel is in place without __restrict__ (its result is
 * the cache buffer it reads); for its v form (the v cache as operand 6: the graphs @v_* of
 * emu_write.ir), that the arguments are in0..in6, out0 (the cache), out1 (the v cache), the
 * body uses out1, and result 1 is in place over operand 6 (h3_op_inplace_operand); for its
 * q form (q's weight as operand 7: the graphs @q_*), that the arguments are in0..in7, out0,
 * out1, out2 (q), the signature ends in7 (wq, its dtype), out0..out2 with no __restrict__,
 * the body uses out2, results 0 and 1 are in place over operands 0 and 6 and result 2 over
 * none (a fresh buffer), and the grid covers q's T*q_heads rows and k's T*heads rows; for
 * rms_norm_rope's sage_quant = 1 form (kernels/emu_sage.ir, beside the plain op), that the
 * grid is (the padded rows' 64-row blocks, heads), the results out0 (y), out1 (the codes,
 * signed char) and out2 (the deltas, float), and the block's amax goes through shared memory.
 * Exit 77 when NVRTC is unavailable.
 */
#include "qk_test.h"

#include "h3/kernels.h"
#include "h3/codegen.h"
#include "h3/op_registry.h"
#include "h3/sage.h"

#include <stdio.h>

/* The sage_quant = 1 form of rms_norm_rope: its launch, results and block reduction. */
static void check_sage_kernel(const char *gname, const h3_op *op, const h3_kernel *k) {
  const int64_t T = op->results[0]->type.dims[0], H = op->results[0]->type.dims[1];
  const int64_t blocks = h3_sage_q_rows(h3_op_attr(op, "segments"), T) / H3_SAGE_QBLOCK;
  CHECK(k->block[0] == 256 && k->grid[0] == blocks && k->grid[1] == H, "@%s: the sage form's launch (%lld, %lld) "
        "x %lld, want (%lld, %lld) x 256", gname, (long long)k->grid[0], (long long)k->grid[1],
        (long long)k->block[0], (long long)blocks, (long long)H);
  CHECK(k->n_args == op->n_operands + 3 && !strcmp(k->args[k->n_args - 1], "out2") &&
            strstr(k->source, "h3_bf16 * __restrict__ out0, signed char * __restrict__ out1, "
                              "float * __restrict__ out2)") &&
            strstr(k->source, "__shared__ float qpart[8]"),
        "@%s: the sage form's results out0..out2 (y, codes, deltas) and its shared amax", gname);
}

/* Checks the kernel k of op (rms_norm_rope or rms_norm_rope_write) of graph gname; 1 for the
 * v form of rms_norm_rope_write, 2 for its q form, 3 for rms_norm_rope's sage form, else 0. */
static int check_kernel(const char *gname, const h3_op *op, const h3_kernel *k) {
  if (h3_op_attr_int(op, "sage_quant", 0)) {
    check_sage_kernel(gname, op, k);
    return 3;
  }
  const bool write = op->code == H3_OP_RMS_NORM_ROPE_WRITE;
  const bool q = write && op->n_operands == 8; /* and q's rows (first in the grid) */
  const int b = write ? 1 : 0; /* x, w are operands b, b + 1 */
  const int64_t D = op->operands[b + 1]->type.dims[0];
  const int64_t units = D % 8 ? D : D / 8; /* chunks per row */
  const int64_t rows = op->operands[b]->type.dims[0] *
                       (h3_op_attr_int(op, "heads", 1) + (q ? h3_op_attr_int(op, "q_heads", 1) : 0));
  const int64_t per = units <= 16 ? 16 : 8;
  CHECK(k->block[0] == 256 && k->grid[0] == (rows + per - 1) / per,
        "@%s: launch %lld x %lld for %lld rows", gname, (long long)k->grid[0],
        (long long)k->block[0], (long long)rows);
  CHECK(h3_kernel_name_matches(k->name, h3_opcode_name(op->code), k->source),
        "@%s: kernel name %s", gname, k->name);
  CHECK(!strstr(k->source, "__fmaf_rn") && !strstr(k->source, "fmaf("),
        "@%s: the kernel must not use an fma", gname);
  CHECK(k->inplace == write && (!write || !strstr(k->source, "__restrict__")),
        "@%s: in place %d, the write form is in place without __restrict__", gname, k->inplace);
  if (q) { /* the q form: three results, q's a fresh buffer */
    bool args = k->n_args == 11;
    for (int i = 0; args && i < 11; i++) {
      char want[8];
      snprintf(want, sizeof want, i < 8 ? "in%d" : "out%d", i < 8 ? i : i - 8);
      args = strcmp(k->args[i], want) == 0;
    }
    CHECK(args, "@%s: the q form's arguments are in0..in7, out0, out1, out2 (%d)", gname, k->n_args);
    char sig[128];
    snprintf(sig, sizeof sig, "const %s * in7, h3_bf16 * out0, h3_bf16 * out1, h3_bf16 * out2)",
             h3_kernel_ctype(op->operands[7]->type.dtype));
    CHECK(strstr(k->source, sig) != NULL, "@%s: the q form's signature ends '%s' (wq, the caches, "
          "q), none __restrict__", gname, sig);
    const char *body = strstr(k->source, ") {");
    CHECK(body && strstr(body, "out2") && strstr(body, "out1") && strstr(body, "in7"),
          "@%s: the q form's body reads in7 and writes out1 and out2", gname);
    CHECK(op->n_results == 3 && h3_op_inplace_operand(op, 0) == 0 &&
              h3_op_inplace_operand(op, 1) == 6 && h3_op_inplace_operand(op, 2) == -1,
          "@%s: the q form's results are in place over operands 0 and 6, q over none", gname);
    return 2;
  }
  if (!write || op->n_operands != 7) return 0;
  /* the v form: two results, the v cache's over operand 6 */
  bool args = k->n_args == 9;
  for (int i = 0; args && i < 9; i++) {
    char want[8];
    snprintf(want, sizeof want, i < 7 ? "in%d" : "out%d", i < 7 ? i : i - 7);
    args = strcmp(k->args[i], want) == 0;
  }
  CHECK(args, "@%s: the v form's arguments are in0..in6, out0, out1 (%d)", gname, k->n_args);
  CHECK(strstr(k->source, "const h3_bf16 * in6, h3_bf16 * out0, h3_bf16 * out1)") != NULL,
        "@%s: the v form's signature ends in6 (the v cache), out0, out1, none __restrict__", gname);
  const char *body = strstr(k->source, ") {"); /* after the signature */
  CHECK(body && strstr(body, "out1"), "@%s: the v form's body writes out1", gname);
  CHECK(op->n_results == 2 && h3_op_inplace_operand(op, 0) == 0 && h3_op_inplace_operand(op, 1) == 6,
        "@%s: the v form's results are in place over operands 0 and 6", gname);
  return 1;
}

/* Emits the kernels of kernels/<stem>.ir into one translation unit (checking those of op
 * `fused`, per_graph in each graph, n_v of them in the v form, n_q in the q form and n_sage
 * in the sage form) and compiles it with NVRTC in both flavours. */
static void check_file(const char *stem, h3_opcode fused, int per_graph, int n_v, int n_q, int n_sage) {
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/qkrope/kernels/%s.ir", H3_SOURCE_DIR, stem);
  h3_module *m = case_load_ir(path);
  CHECK(m != NULL, "cannot read %s", path);
  if (!m) return;
  h3_diag d;
  h3_diag_init(&d);
  h3_arena a;
  h3_arena_init(&a);
  h3_strbuf tu;
  h3_strbuf_init(&tu);
  h3_strbuf_append(&tu, h3_kernel_prelude());
  int n_fused = 0, v_form = 0, q_form = 0, sage_form = 0;
  for (int gi = 0; gi < m->n_graphs; gi++)
    for (h3_op *op = m->graphs[gi]->body.first; op; op = op->next) {
      if (h3_exec_classify(op) != H3_EXEC_KERNEL) continue;
      h3_kernel k;
      bool ok = h3_codegen_emit_op(op, H3_TIER_EXACT, &a, &k, &d) == H3_OK;
      CHECK(ok, "@%s: emitting %s", m->graphs[gi]->name, h3_opcode_name(op->code));
      if (!ok) continue;
      if (!strstr(tu.data, k.name)) h3_strbuf_append(&tu, k.source); /* once, as a plan keeps it */
      if (op->code == H3_OP_RMS_NORM_ROPE || op->code == H3_OP_RMS_NORM_ROPE_WRITE) {
        const int form = check_kernel(m->graphs[gi]->name, op, &k);
        v_form += form == 1;
        q_form += form == 2;
        sage_form += form == 3;
      }
      n_fused += op->code == fused;
    }
  CHECK(n_fused == per_graph * m->n_graphs, "%s: %d %s kernels per graph (%d in all)", stem, per_graph,
        h3_opcode_name(fused), n_fused);
  CHECK(v_form == n_v, "%s: %d kernels in the v form, want %d", stem, v_form, n_v);
  CHECK(q_form == n_q, "%s: %d kernels in the q form, want %d", stem, q_form, n_q);
  CHECK(sage_form == n_sage, "%s: %d kernels in the sage form, want %d", stem, sage_form, n_sage);
  static const char *const opts[2][3] = {{"-default-device", "-std=c++17", "-fmad=false"},
                                         {"-default-device", "-std=c++17", NULL}};
  h3_kernel_cache off;
  memset(&off, 0, sizeof off);
  for (int t = 0; t < 2 && !tu.oom; t++) {
    char label[256];
    snprintf(label, sizeof label, "qkrope_%s_%s.cu", stem, t ? "lossless" : "exact");
    h3_nvrtc_job job;
    memset(&job, 0, sizeof job);
    job.label = label;
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
}

int main(void) {
  if (strcmp(h3_nvrtc_version(), "unavailable") == 0 || !h3_cuda_include_dir()) {
    fprintf(stderr, "NVRTC or the CUDA headers are unavailable: skipped\n");
    return 77;
  }
  check_file("emu_ops", H3_OP_RMS_NORM_ROPE, 1, 0, 0, 0);
  check_file("emu_write", H3_OP_RMS_NORM_ROPE_WRITE, 1, 3, 3, 0);
  check_file("emu_sage", H3_OP_RMS_NORM_ROPE, 2, 0, 0, 5);
  return check_summary("qkrope_nvrtc");
}
