/* nm_build.h: the kernel set of the NVRTC and GPU tests of norm+modulate (header-only).
 *
 * nm_module(T, H, G, fuse) builds two graphs on x bf16[T, H]. @g: the unfused Plan A
 * chain (rms_norm, gathers, const 1, add, mul, add -> %y) and the final layer's
 * fp32-modulate chain on the same norm output (-> %yf), returned as the graph's outputs;
 * then Plan A exact (%ae), lossless (%al), exact with modulate "f32" (%fe), and Plan B
 * exact (%be) and lossless (%bl), two results each; then the int8-fuse-quant forms
 * (quantize = 1, results q i8[T, H] and s f32[T] after y): the standalone quantizers of
 * %ae and %be's y (%aeq, %beq), Plan A exact / lossless (%qa, %ql) and Plan B exact /
 * lossless (%qb, %qbl) whose y has no uses (not stored), and Plan A exact with y returned
 * (%qy, the third output). @u: the unfused Plan B chain (U3 ->
 * %x1, then norm and modulate -> %y). With `fuse`, elementwise-fusion runs at --quality
 * exact, so the unfused chains are what the exact pipeline runs without norm-modulate-
 * fusion: exact elementwise groups around the rms_norm kernel. nm_emit() emits every
 * kernel op of one graph (its own
 * `tier` wins; standalone ops are exact, as in plan_build.c) and nm_compile() compiles the
 * exact kernels with -fmad=false and the lossless ones without (plan_write.c's options),
 * through NVRTC with the kernel cache off.
 */
#ifndef H3_NM_BUILD_H
#define H3_NM_BUILD_H

#include "h3/kernels.h"
#include "h3/codegen.h"
#include "h3/op_registry.h"
#include "h3/passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char nm_graph_tmpl[] =
    "module @nm config \"test\" {\n"
    "  graph @g(%x: bf16[@T@, @H@], %u: bf16[@T@, @H@], %w: bf16[@H@], %gt: bf16[@G@, @H@],"
    " %sc: bf16[@G@, @H@], %sh: bf16[@G@, @H@], %idx: i32[@T@])"
    " -> (y: bf16[@T@, @H@], yf: bf16[@T@, @H@], qy: bf16[@T@, @H@]) {\n"
    "    %h = rms_norm(%x, %w) {eps = 1e-05} : bf16[@T@, @H@]\n"
    "    %g1 = gather(%sc, %idx) : bf16[@T@, @H@]\n"
    "    %one = const() {value = 1.0, dtype = bf16} : bf16[]\n"
    "    %c = add(%one, %g1) : bf16[@T@, @H@]\n"
    "    %p = mul(%h, %c) : bf16[@T@, @H@]\n"
    "    %g2 = gather(%sh, %idx) : bf16[@T@, @H@]\n"
    "    %y = add(%p, %g2) : bf16[@T@, @H@]\n"
    "    %f0 = cast(%h) {dtype = f32} : f32[@T@, @H@]\n"
    "    %f2 = cast(%g1) {dtype = f32} : f32[@T@, @H@]\n"
    "    %f3 = const() {value = 1.0, dtype = f32} : f32[]\n"
    "    %f4 = add(%f3, %f2) : f32[@T@, @H@]\n"
    "    %f5 = mul(%f0, %f4) : f32[@T@, @H@]\n"
    "    %f7 = cast(%g2) {dtype = f32} : f32[@T@, @H@]\n"
    "    %f8 = add(%f5, %f7) : f32[@T@, @H@]\n"
    "    %yf = cast(%f8) {dtype = bf16} : bf16[@T@, @H@]\n"
    "    %ae = norm_modulate(%x, %w, %sc, %sh, %idx) {eps = 1e-05, tier = exact}"
    " : bf16[@T@, @H@]\n"
    "    %al = norm_modulate(%x, %w, %sc, %sh, %idx) {eps = 1e-05, tier = lossless}"
    " : bf16[@T@, @H@]\n"
    "    %fe = norm_modulate(%x, %w, %sc, %sh, %idx) {eps = 1e-05, tier = exact,"
    " modulate = \"f32\"} : bf16[@T@, @H@]\n"
    "    %be, %be1 = residual_norm_modulate(%x, %u, %gt, %w, %sc, %sh, %idx) {eps = 1e-05,"
    " tier = exact} : bf16[@T@, @H@], bf16[@T@, @H@]\n"
    "    %bl, %bl1 = residual_norm_modulate(%x, %u, %gt, %w, %sc, %sh, %idx) {eps = 1e-05,"
    " tier = lossless} : bf16[@T@, @H@], bf16[@T@, @H@]\n"
    "    %aeq, %aes = quantize_rows(%ae) : i8[@T@, @H@], f32[@T@]\n"
    "    %beq, %bes = quantize_rows(%be1) : i8[@T@, @H@], f32[@T@]\n"
    "    %qa, %qa_q, %qa_s = norm_modulate(%x, %w, %sc, %sh, %idx) {eps = 1e-05,"
    " tier = exact, quantize = 1} : bf16[@T@, @H@], i8[@T@, @H@], f32[@T@]\n"
    "    %ql, %ql_q, %ql_s = norm_modulate(%x, %w, %sc, %sh, %idx) {eps = 1e-05,"
    " tier = lossless, quantize = 1} : bf16[@T@, @H@], i8[@T@, @H@], f32[@T@]\n"
    "    %qb, %qb_y, %qb_q, %qb_s = residual_norm_modulate(%x, %u, %gt, %w, %sc, %sh, %idx)"
    " {eps = 1e-05, tier = exact, quantize = 1} : bf16[@T@, @H@], bf16[@T@, @H@],"
    " i8[@T@, @H@], f32[@T@]\n"
    "    %qbl, %qbl_y, %qbl_q, %qbl_s = residual_norm_modulate(%x, %u, %gt, %w, %sc, %sh, %idx)"
    " {eps = 1e-05, tier = lossless, quantize = 1} : bf16[@T@, @H@], bf16[@T@, @H@],"
    " i8[@T@, @H@], f32[@T@]\n"
    "    %qy, %qy_q, %qy_s = norm_modulate(%x, %w, %sc, %sh, %idx) {eps = 1e-05,"
    " tier = exact, quantize = 1} : bf16[@T@, @H@], i8[@T@, @H@], f32[@T@]\n"
    "    return %y, %yf, %qy\n  }\n"
    "  graph @u(%x: bf16[@T@, @H@], %u: bf16[@T@, @H@], %w: bf16[@H@], %gt: bf16[@G@, @H@],"
    " %sc: bf16[@G@, @H@], %sh: bf16[@G@, @H@], %idx: i32[@T@])"
    " -> (x1: bf16[@T@, @H@], y: bf16[@T@, @H@]) {\n"
    "    %ga = gather(%gt, %idx) : bf16[@T@, @H@]\n"
    "    %q = mul(%ga, %u) : bf16[@T@, @H@]\n"
    "    %x1 = add(%x, %q) : bf16[@T@, @H@]\n"
    "    %h = rms_norm(%x1, %w) {eps = 1e-05} : bf16[@T@, @H@]\n"
    "    %g1 = gather(%sc, %idx) : bf16[@T@, @H@]\n"
    "    %one = const() {value = 1.0, dtype = bf16} : bf16[]\n"
    "    %c = add(%one, %g1) : bf16[@T@, @H@]\n"
    "    %p = mul(%h, %c) : bf16[@T@, @H@]\n"
    "    %g2 = gather(%sh, %idx) : bf16[@T@, @H@]\n"
    "    %y = add(%p, %g2) : bf16[@T@, @H@]\n"
    "    return %x1, %y\n  }\n}\n";

/* Replaces @T@, @H@ and @G@ in tmpl (malloc'd result). */
static inline char *nm_instantiate(const char *tmpl, int64_t T, int64_t H, int64_t G) {
  size_t cap = strlen(tmpl) * 2 + 64, n = 0;
  char *buf = malloc(cap);
  if (!buf) return NULL;
  for (const char *p = tmpl; *p && n + 24 < cap; p++) {
    if (p[0] == '@' && p[1] && p[2] == '@' && strchr("THG", p[1])) {
      int64_t v = p[1] == 'T' ? T : p[1] == 'H' ? H : G;
      n += (size_t)snprintf(buf + n, cap - n, "%lld", (long long)v);
      p += 2;
    } else {
      buf[n++] = *p;
    }
  }
  buf[n] = 0;
  return buf;
}

static inline h3_module *nm_module(int64_t T, int64_t H, int64_t G, bool fuse) {
  char *text = nm_instantiate(nm_graph_tmpl, T, H, G);
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = text ? h3_module_parse("nm_kernels.ir", text, strlen(text), &d) : NULL;
  if (m && fuse) {
    h3_pass_options o = h3_pass_options_default();
    o.tier = H3_TIER_EXACT;
    o.passes = "elementwise-fusion";
    o.verify_each = true;
    if (h3_pass_pipeline_run(m, &o, &d) != H3_OK) {
      h3_module_free(m);
      m = NULL;
    }
  }
  if (!m) h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  free(text);
  return m;
}

/* The graph's ops that run as kernels, in order, with their emitted kernels. */
typedef struct {
  int n;
  h3_op *ops[64];
  h3_kernel k[64];
} nm_kernel_set;

static inline bool nm_emit(h3_module *m, int graph, h3_arena *a, nm_kernel_set *ks) {
  ks->n = 0;
  h3_diag d;
  h3_diag_init(&d);
  bool ok = true;
  for (h3_op *op = m->graphs[graph]->body.first; op && ok; op = op->next) {
    if (h3_exec_classify(op) != H3_EXEC_KERNEL) continue;
    if (ks->n == 64) return false;
    ks->ops[ks->n] = op;
    ok = h3_codegen_emit_op(op, H3_TIER_EXACT, a, &ks->k[ks->n], &d) == H3_OK;
    ks->n++;
  }
  if (!ok) h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  return ok;
}

/* Compiles the exact and the lossless kernels (jobs[0], jobs[1]; a job without kernels
 * gets no source). Free with h3_nvrtc_job_free and free(src[i]). */
static inline bool nm_compile(const nm_kernel_set *ks, h3_nvrtc_job jobs[2], char *src[2]) {
  static const char *const opts[2][3] = {{"-default-device", "-std=c++17", "-fmad=false"},
                                         {"-default-device", "-std=c++17", NULL}};
  int n_jobs = 0;
  bool ok = true;
  for (int t = 0; t < 2; t++) {
    h3_strbuf tu;
    h3_strbuf_init(&tu);
    h3_strbuf_append(&tu, h3_kernel_prelude());
    int count = 0;
    for (int i = 0; i < ks->n; i++) {
      if ((ks->k[i].tier == H3_TIER_LOSSLESS) != (t == 1)) continue;
      bool dup = false;
      for (int j = 0; j < i; j++) dup |= strcmp(ks->k[j].name, ks->k[i].name) == 0;
      if (!dup) h3_strbuf_append(&tu, ks->k[i].source);
      count++;
    }
    memset(&jobs[t], 0, sizeof jobs[t]);
    src[t] = NULL;
    if (tu.oom) ok = false;
    if (!count || tu.oom) {
      h3_strbuf_free(&tu);
      continue;
    }
    src[t] = tu.data;
    jobs[t].label = t ? "normmod_lossless.cu" : "normmod_exact.cu";
    jobs[t].source = tu.data;
    jobs[t].options = opts[t];
    jobs[t].n_options = t ? 2 : 3;
    n_jobs++;
  }
  h3_kernel_cache off;
  memset(&off, 0, sizeof off);
  h3_diag d;
  h3_diag_init(&d);
  for (int t = 0; t < 2 && ok; t++)
    if (src[t]) ok = h3_nvrtc_compile(&jobs[t], 1, &off, 1, &d) == H3_OK && jobs[t].cubin;
  if (!ok) h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  return ok && n_jobs > 0;
}

/* The kernel arguments of op in launch order (operands, then results), by value id:
 * args[i] = by_id[id of argument i], at most NM_MAX_ARGS of them (a fused elementwise group
 * may have several results: @g's gather group returns %g1, %g2 and %y). Returns the count,
 * or -1 when op has more arguments than fit. Every launch of the GPU test binds through
 * here, so the host test (test_nvrtc.c) checks the same binding on the same kernel sets. */
#define NM_MAX_ARGS 16
static inline int nm_bind(const h3_op *op, const unsigned long long *by_id,
                          unsigned long long args[NM_MAX_ARGS]) {
  if (op->n_operands < 0 || op->n_results < 0 || op->n_operands + op->n_results > NM_MAX_ARGS)
    return -1;
  int n = 0;
  for (int i = 0; i < op->n_operands; i++) args[n++] = by_id[op->operands[i]->id];
  for (int i = 0; i < op->n_results; i++) args[n++] = by_id[op->results[i]->id];
  return n;
}

/* Index of the op whose result 0 is named `name`, or -1. */
static inline int nm_find(const nm_kernel_set *ks, const char *name) {
  for (int i = 0; i < ks->n; i++)
    if (ks->ops[i]->n_results && ks->ops[i]->results[0]->name &&
        strcmp(ks->ops[i]->results[0]->name, name) == 0)
      return i;
  return -1;
}

#endif
