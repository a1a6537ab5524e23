/* test_emu_acc.c: the emitted CUDA C of residual_norm_modulate reading out_proj's int32
 * accumulators (int8-resid-dequant; codegen/emit_normmod.c) run on the host under
 * tests/codegen/host_emu.h, for the three graphs of kernels/acc_ops.ir (H = 5376, 2056,
 * 256). Inputs: nm_test.h's DiT-like rows and tables, accumulators uniform in
 * [-2^21, 2^21] (an int8 GEMM over K = 128-ish columns of outliers), s_x and s_w such that
 * the update is O(1); never zero. Checks, per graph and variant (exact, lossless, exact fp32
 * modulate, quantize = 1 at both tiers):
 *   - the fused kernel's results (residual', y, and q, s) == those of the unfused pair of
 *     kernels (dequant_i8, then the op on its bf16 update) bitwise;
 *   - the CPU backend: dequant_i8 == the emitted dequant kernel, and the fused op == the
 *     unfused op on that update, every result bitwise;
 *   - the element-by-element path (acc 4 bytes off 16-byte alignment) and residual' in
 *     place (out0 == in0) give the same bits.
 */
#include "../common/case_data.h"
#include "emu_kernels.h"
#include "nm_test.h"

#include "h3/backend.h"
#include "h3/codegen.h"
#include "h3/op_registry.h"

static void **buf; /* by value id */

static size_t nbytes(const h3_value *v) { return (size_t)h3_type_bytes(&v->type); }

static void free_all(void **p, int n) {
  for (int i = 0; i < n; i++) free(p[i]);
}

static void operands(const h3_op *op, void **in) {
  for (int i = 0; i < op->n_operands; i++) in[i] = buf[op->operands[i]->id];
}

/* Every result of a and b equal bitwise (buffers of the graph run, or given arrays). */
static bool same_results(const h3_op *a, void *const *ra, void *const *rb) {
  bool same = true;
  for (int r = 0; r < a->n_results; r++) same &= memcmp(ra[r], rb[r], nbytes(a->results[r])) == 0;
  return same;
}

static void results(const h3_op *op, void **r) {
  for (int i = 0; i < op->n_results; i++) r[i] = buf[op->results[i]->id];
}

static void check_variant(const h3_graph *g, const char *v) {
  char an[16], bn[16];
  snprintf(an, sizeof an, "a%s0", v);
  snprintf(bn, sizeof bn, "b%s0", v);
  const h3_op *a = case_op(g, an), *b = case_op(g, bn), *dq = case_op(g, "u");
  CHECK(a && b && dq && a->n_results == b->n_results && a->n_operands == 9,
        "@%s: ops %s / %s missing", g->name, an, bn);
  if (!a || !b || !dq || a->n_operands != 9) return;
  void *ra[4], *rb[4], *in[10];
  results(a, ra);
  results(b, rb);
  CHECK(same_results(a, ra, rb), "@%s %s: the fused kernel != dequant_i8 + the bf16 op", g->name, an);

  /* the CPU backend: fused op == unfused op on the CPU's own update, bitwise */
  void *cu[1] = {NULL}, *ca[4] = {NULL, NULL, NULL, NULL}, *cb[4] = {NULL, NULL, NULL, NULL};
  operands(dq, in);
  bool ok = case_cpu_results(dq, in, cu, 2);
  CHECK(ok && memcmp(cu[0], buf[dq->results[0]->id], nbytes(dq->results[0])) == 0,
        "@%s: the CPU's dequant_i8 != the kernel's", g->name);
  operands(a, in);
  ok = ok && case_cpu_results(a, in, ca, 2);
  operands(b, in);
  in[1] = cu[0];
  ok = ok && case_cpu_results(b, in, cb, 2);
  CHECK(ok && same_results(a, ca, cb), "@%s %s: CPU fused != CPU unfused", g->name, an);
  free_all(cu, 1), free_all(ca, a->n_results), free_all(cb, b->n_results);

  /* acc 4 bytes off alignment (element-by-element path), then residual' in place */
  const int64_t T = a->operands[0]->type.dims[0], H = a->operands[0]->type.dims[1];
  for (int variant = 0; variant < 2; variant++) {
    void *ob[4] = {NULL, NULL, NULL, NULL};
    int32_t *ab = malloc((size_t)(T * H) * 4 + 16);
    uint16_t *xb = malloc((size_t)(T * H) * 2 + 16);
    ok = ab && xb;
    for (int r = 0; r < a->n_results; r++) ok &= (ob[r] = malloc(nbytes(a->results[r]) + 16)) != NULL;
    if (!ok) {
      CHECK(ok, "out of memory");
      free(ab), free(xb), free_all(ob, 4);
      continue;
    }
    operands(a, in);
    int32_t *acc = ab + (variant == 0 ? 1 : 0);
    memcpy(acc, in[1], (size_t)(T * H) * 4);
    memcpy(xb, in[0], (size_t)(T * H) * 2);
    in[0] = xb;
    in[1] = acc;
    void *out[4] = {variant == 1 ? (void *)xb : ob[0], ob[1], ob[2], ob[3]};
    emu_run_op(a, in, out);
    CHECK(same_results(a, out, ra), "@%s %s: %s gives other bits", g->name, an,
          variant == 0 ? "acc off alignment" : "in place");
    free(ab), free(xb), free_all(ob, 4);
  }
}

static void test_graph(const h3_graph *g, uint64_t seed) {
  const h3_type *xt = &g->inputs[0]->type;
  const int64_t T = xt->dims[0], H = xt->dims[1], G = g->inputs[5]->type.dims[0];
  fprintf(stderr, "graph @%s: T = %lld, H = %lld, G = %lld\n", g->name, (long long)T, (long long)H,
          (long long)G);
  nm_inputs in;
  int32_t *acc = malloc((size_t)(T * H) * 4);
  float *sx = malloc((size_t)T * 4), *sw = malloc((size_t)H * 4);
  CHECK(nm_inputs_make(&in, T, H, G, 0.25, seed) && acc && sx && sw, "out of memory");
  if (!acc || !sx || !sw || !in.idx) {
    free(acc), free(sx), free(sw), nm_inputs_free(&in);
    return;
  }
  nm_rng r = {seed * 31 + 7};
  for (int64_t i = 0; i < T * H; i++) acc[i] = (int32_t)(nm_next(&r) % (1u << 22)) - (1 << 21);
  for (int64_t t = 0; t < T; t++) sx[t] = (float)(1e-3 * (0.5 + nm_uniform(&r)));
  for (int64_t k = 0; k < H; k++) sw[k] = (float)(1e-3 * (0.5 + nm_uniform(&r)));
  void *data[9] = {in.x, acc, sx, sw, in.gamma, in.gate, in.scale, in.shift, in.idx};
  for (int i = 0; i < 9; i++) buf[g->inputs[i]->id] = data[i];
  for (h3_op *op = g->body.first; op; op = op->next) { /* the graph, kernel by kernel */
    if (op->code == H3_OP_RETURN) break;
    void *ins[10], *outs[4];
    for (int k = 0; k < op->n_results; k++) {
      size_t b = nbytes(op->results[k]) + 16;
      buf[op->results[k]->id] = malloc(b);
      if (buf[op->results[k]->id]) memset(buf[op->results[k]->id], 0xa5, b);
      outs[k] = buf[op->results[k]->id];
    }
    operands(op, ins);
    CHECK(emu_kernel_index(op) >= 0, "op %s is not a kernel", h3_opcode_name(op->code));
    if (emu_kernel_index(op) >= 0) emu_run_op(op, ins, outs);
  }
  const char *variants[5] = {"e", "l", "f", "q", "ql"};
  for (int i = 0; i < 5; i++) check_variant(g, variants[i]);
  for (h3_op *op = g->body.first; op; op = op->next)
    for (int k = 0; k < op->n_results; k++) {
      free(buf[op->results[k]->id]);
      buf[op->results[k]->id] = NULL;
    }
  free(acc), free(sx), free(sw);
  nm_inputs_free(&in);
}

int main(void) {
  const char *path = H3_SOURCE_DIR "/tests/normmod/kernels/acc_ops.ir";
  h3_module *m = emu_load(path);
  CHECK(m != NULL, "cannot read %s", path);
  if (!m) return nm_report("normmod_emu_acc");
  CHECK(emu_kernels.n == emu_count(), "%d kernel ops, %d emitted", emu_kernels.n, emu_count());
  buf = calloc((size_t)m->next_value_id + 1, sizeof *buf);
  for (int i = 0; buf && emu_kernels.n == emu_count() && i < m->n_graphs; i++)
    test_graph(m->graphs[i], 41 + (uint64_t)i);
  free(buf);
  emu_unload(m);
  return nm_report("normmod_emu_acc");
}
