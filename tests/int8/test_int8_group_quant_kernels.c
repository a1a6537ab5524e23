/* test_int8_group_quant_kernels.c: the row kernel of a fused group ending in quantize_rows
 * (int8-fuse-group-quant; codegen/emit_fused.c), without a GPU (docs/int8.md, section `int8-fuse-group-quant`).
 *   - host numerics: the triples of tests/int8/kernels/group_quant_ops.ir (group -> g,
 *     standalone quantize_rows(g), group with the quantizer), compiled as host C++ under
 *     tests/codegen/host_emu.h, on random inputs: the CPU interpreter's fused quantizer ==
 *     the CPU's quantize_rows of the CPU's g (codes and scales bitwise, exact and
 *     lossless); the emitted row kernel == quantize_rows (CPU) of the emitted group's own g,
 *     and == the emitted standalone quantize_rows kernel on it, bitwise; where the group has
 *     no transcendental, kernel == CPU bitwise;
 *   - NVRTC: the row kernels of the full H3 plans (`h3c --int8`, exact and lossless: the
 *     block's and the refiner's SwiGLU groups) compile for sm_90 in one translation unit.
 */
#include "h3/kernels.h"
#include "h3/backend.h"
#include "h3/frontend.h"
#include "h3/passes.h"
#include "op_check.h"
#include "full_h3_kernels.h"

int emu_count(void);
void emu_run(int i, void **args);

static bool has_quant(const h3_op *op) {
  if (op->code != H3_OP_FUSED) return false;
  for (const h3_op *o = op->regions[0].first; o; o = o->next)
    if (o->code == H3_OP_QUANTIZE_ROWS) return true;
  return false;
}

static bool has_silu(const h3_op *op) {
  for (const h3_op *o = op->regions[0].first; o; o = o->next)
    if (o->code == H3_OP_SILU) return true;
  return false;
}

static h3_tensor alloc_result(const h3_op *op, int r) {
  return (h3_tensor){op->results[r]->type, calloc(1, (size_t)h3_type_bytes(&op->results[r]->type) + 16)};
}

static bool cpu_run(const h3_op *op, const h3_tensor *in, const h3_tensor *out) {
  h3_diag d;
  h3_diag_init(&d);
  h3_status st = h3_cpu_run_op(op, in, op->n_operands, out, op->n_results, 1, 0, &d);
  if (d.errors) h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  return st == H3_OK;
}

static bool same(const h3_tensor *a, const h3_tensor *b) {
  return memcmp(a->data, b->data, (size_t)h3_type_bytes(&a->type)) == 0;
}

/* One triple at kernel index i: group P (-> g), quantize_rows Q (g), fused group F. */
static void check_triple(const cg_oplist *ops, int i) {
  const h3_op *p = ops->ops[i], *q = ops->ops[i + 1], *f = ops->ops[i + 2];
  CHECK(p->code == H3_OP_FUSED && q->code == H3_OP_QUANTIZE_ROWS && has_quant(f));
  CHECK(p->n_operands == f->n_operands && p->n_operands <= 8);
  h3_tensor in[8];
  make_inputs(f, in);
  void *args[10];
  for (int k = 0; k < f->n_operands; k++) args[k] = in[k].data;
  /* cpu: g, quantize_rows(g), the fused quantizer */
  h3_tensor g = alloc_result(p, 0), qs[2] = {alloc_result(q, 0), alloc_result(q, 1)},
            fq[2] = {alloc_result(f, 0), alloc_result(f, 1)};
  CHECK(cpu_run(p, in, &g) && cpu_run(q, &g, qs) && cpu_run(f, in, fq));
  CHECK(same(&qs[0], &fq[0]) && same(&qs[1], &fq[1]));
  CHECK(nonzero(f, 0, fq[0].data) && nonzero(f, 1, fq[1].data));
  /* emulated: the group's g, the standalone kernel and the cpu op on it, the row kernel */
  h3_tensor eg = alloc_result(p, 0), eq[2] = {alloc_result(q, 0), alloc_result(q, 1)},
            cq[2] = {alloc_result(q, 0), alloc_result(q, 1)},
            ef[2] = {alloc_result(f, 0), alloc_result(f, 1)};
  args[p->n_operands] = eg.data;
  emu_run(i, args);
  void *qargs[3] = {eg.data, eq[0].data, eq[1].data};
  emu_run(i + 1, qargs);
  CHECK(cpu_run(q, &eg, cq));
  args[f->n_operands] = ef[0].data;
  args[f->n_operands + 1] = ef[1].data;
  emu_run(i + 2, args);
  bool own = same(&ef[0], &cq[0]) && same(&ef[1], &cq[1]);
  bool kern = same(&ef[0], &eq[0]) && same(&ef[1], &eq[1]);
  bool cpu = same(&ef[0], &fq[0]) && same(&ef[1], &fq[1]);
  fprintf(stderr, "  %s (%s) [%s]: row kernel == quantize_rows(its g) %s, == the standalone "
          "kernel %s, == cpu %s\n", h3_op_attr_string(f, "name", "?"),
          h3_tier_name(h3_op_attr_tier(f, "tier", H3_TIER_HIGH)), h3_type_str(&f->results[0]->type, (char[64]){0}, 64),
          own ? "yes" : "NO", kern ? "yes" : "NO", cpu ? "yes" : "no");
  CHECK(own && kern);
  if (!has_silu(f)) CHECK(cpu);
  h3_tensor *all[] = {&g, &qs[0], &qs[1], &fq[0], &fq[1], &eg, &eq[0], &eq[1], &cq[0], &cq[1],
                      &ef[0], &ef[1]};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) free(all[k]->data);
  for (int k = 0; k < f->n_operands; k++) free(in[k].data);
}

static void test_host_numerics(void) {
  h3_module *m = cg_load_ir(H3_SOURCE_DIR "/tests/int8/kernels/group_quant_ops.ir");
  CHECK(m != NULL);
  if (!m) return;
  cg_oplist ops = cg_kernel_ops(m);
  CHECK(ops.n == emu_count() && ops.n == 15);
  for (int i = 0; i + 2 < ops.n && ops.n == emu_count(); i += 3) check_triple(&ops, i);
  free(ops.ops);
  h3_module_free(m);
}

/* A row kernel: 256 threads per row, more than one row. */
static void check_row_kernel(const h3_op *op, const h3_kernel *k, void *ctx) {
  (void)op, (void)ctx;
  CHECK(k->block[0] == 256 && k->grid[0] > 1);
}

/* The group quantize row kernels of the full H3 (h3c --int8's passes) at `tier`. */
static int emit_full_h3(h3_tier tier, h3_arena *a, h3_strbuf *src) {
  h3_pass_options o = h3_pass_options_default();
  o.tier = tier;
  o.int8 = "";
  o.enable = "int8-lowering,row-split,int8-fuse-quant,int8-fuse-group-quant,int8-dequant-split";
  int distinct = 0;
  return full_h3_kernels(&o, tier, has_quant, check_row_kernel, NULL, a, src,
                         &distinct);
}

static void test_nvrtc_full_h3(void) {
  h3_arena a;
  h3_arena_init(&a);
  h3_strbuf src;
  h3_strbuf_init(&src);
  h3_strbuf_append(&src, h3_kernel_prelude());
  int e0 = emit_full_h3(H3_TIER_EXACT, &a, &src), e1 = emit_full_h3(H3_TIER_LOSSLESS, &a, &src);
  /* the block's SwiGLU (step) and the refiner's (text), per tier */
  fprintf(stderr, "group quantize kernels of the full H3: exact %d, lossless %d\n", e0, e1);
  CHECK(e0 == 2 && e1 == 2);
  CHECK(cg_compile_tu(src.data, true, NULL));
  h3_strbuf_free(&src);
  h3_arena_free(&a);
}

int main(void) {
  test_host_numerics();
  test_nvrtc_full_h3();
  return cg_report("test_int8_group_quant_kernels");
}
