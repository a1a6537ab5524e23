/* test_emu_quant.c: the emitted CUDA C of norm_modulate / residual_norm_modulate with
 * quantize = 1 (int8-fuse-quant; codegen/emit_normmod.c) run on the host under
 * tests/codegen/host_emu.h, for the four graphs of kernels/quant_ops.ir (H = 5376, 2056,
 * 256, 64: blocks of 256 threads with 2-3 chunks each, a chunk owned by thread 0 alone,
 * one warp, a warp with idle lanes). Two input sets per graph, never zero:
 *   - "dit": nm_test.h's DiT-like rows (N(0, 1) with outlier channels 40x larger);
 *   - "grid": nm_inputs_grid (x, update on a 2^-5 grid with outlier channels up to 32,
 *     gate = +-0.5), so every partial sum of x^2 (Plan B: of residual'^2) is exact in fp32
 *     and the kernel's tree reduction gives the CPU's r bit for bit.
 * Checks:
 *   - exact (both input sets): the fused kernel's y == the plain norm_modulate kernel's
 *     bitwise (Plan B: residual' and y), and its codes and scales == the standalone
 *     quantize_rows kernel run on that y and == the CPU's quantize_rows op on it, bitwise
 *     (docs/models/accelerations.md §4.1 rule 4); the same for the fp32 modulate;
 *   - lossless: y == the plain lossless kernel's; on "grid" every result of every fused
 *     kernel == the CPU backend's op (h3_cpu_run_op: the fp32 values before rounding are
 *     quantized) bitwise; on "dit" the codes are within 1 of the CPU's (the CPU sums x^2
 *     in another order) and the code flip rate against exact is reported; the
 *     dequantized rows of both tiers pass the admission rule against fp64 (spec §2 rule 4);
 *   - y without uses: the kernel leaves y's buffer untouched and gives the same q, s
 *     (Plan B: the same residual');
 *   - the element-by-element path (x 2 bytes off 16-byte alignment, or q 1 byte off 8)
 *     and Plan B in place (out0 == in0) give the same bits.
 */
#include "../common/case_data.h"
#include "emu_kernels.h"
#include "nm_test.h"

#include "h3/backend.h"
#include "h3/codegen.h"
#include "h3/op_registry.h"

static void **buf; /* by value id */
#define SENTINEL 0xa5

/* Result r of the op named `name` (its buffer of the graph run). */
static void *res(const h3_graph *g, const char *name, int r) {
  h3_op *op = case_op(g, name);
  return op && r < op->n_results ? buf[op->results[r]->id] : NULL;
}

static size_t bytes_of(const h3_graph *g, const char *name, int r) {
  return (size_t)h3_type_bytes(&case_op(g, name)->results[r]->type);
}

static void free_all(void **p, int n) {
  for (int i = 0; i < n; i++) free(p[i]);
}

typedef struct {
  const char *fused, *plain, *quant; /* fused op, plain op (its last result is y), quantizer */
  bool plan_b, exact;
} site;

static const site sites[] = {
    {"qa", "ae", "aeq", false, true},  {"qf", "fe", "feq", false, true},
    {"qb", "be0", "beq", true, true},  {"ql", "al", NULL, false, false},
    {"qbl", "bl0", NULL, true, false},
};
/* y-unused twin of a fused op */
static const char *twin(const char *fused) {
  return !strcmp(fused, "qa") ? "qan" : !strcmp(fused, "ql") ? "qln" : !strcmp(fused, "qb") ? "qbn"
         : !strcmp(fused, "qbl") ? "qbln" : NULL;
}

/* The fused op's operand buffers (x, ... in operand order). */
static void operands(const h3_op *op, void **in) {
  for (int i = 0; i < op->n_operands; i++) in[i] = buf[op->operands[i]->id];
}

static void check_site(const h3_graph *g, const site *s, bool grid, int64_t T, int64_t H) {
  const int64_t n = T * H;
  const int yi = s->plan_b ? 1 : 0;
  const h3_op *f = case_op(g, s->fused);
  const char *set = grid ? "grid" : "dit";
  /* y (and residual') == the plain kernel's */
  for (int r = 0; r <= yi; r++)
    CHECK(memcmp(res(g, s->fused, r), res(g, s->plain, r), (size_t)n * 2) == 0,
          "@%s %s %s: result %d != the plain kernel's", g->name, set, s->fused, r);
  const int8_t *q = res(g, s->fused, yi + 1);
  const float *sc = res(g, s->fused, yi + 2);
  if (s->exact) {
    /* == the standalone quantize_rows kernel on the plain y, and == the CPU op on y */
    CHECK(memcmp(q, res(g, s->quant, 0), (size_t)n) == 0 &&
              memcmp(sc, res(g, s->quant, 1), (size_t)T * 4) == 0,
          "@%s %s %s: codes / scales != norm_modulate + quantize_rows kernels", g->name, set, s->fused);
    void *yin[1] = {res(g, s->fused, yi)}, *cq[2] = {NULL, NULL};
    CHECK(case_cpu_results(case_op(g, s->quant), yin, cq, 2), "cpu quantize_rows");
    CHECK(cq[0] && cq[1] && memcmp(q, cq[0], (size_t)n) == 0 && memcmp(sc, cq[1], (size_t)T * 4) == 0,
          "@%s %s %s: codes / scales != the CPU's quantize_rows of y", g->name, set, s->fused);
    free_all(cq, 2);
  }
  /* the CPU backend's op: bitwise on grid inputs, codes within 1 on DiT rows (lossless) */
  void *in[8], *cpu[4] = {NULL, NULL, NULL, NULL};
  operands(f, in);
  CHECK(case_cpu_results(f, in, cpu, 2), "cpu %s", s->fused);
  if (cpu[f->n_results - 1]) {
    if (grid) {
      for (int r = 0; r < f->n_results; r++)
        CHECK(memcmp(res(g, s->fused, r), cpu[r], bytes_of(g, s->fused, r)) == 0,
              "@%s grid %s: result %d != the CPU op", g->name, s->fused, r);
    } else if (!s->exact) {
      int64_t diff = 0, far = 0;
      const int8_t *cq = cpu[yi + 1];
      for (int64_t i = 0; i < n; i++) {
        diff += q[i] != cq[i];
        far += abs(q[i] - cq[i]) > 1;
      }
      fprintf(stderr, "  @%s dit %s: %lld of %lld codes differ from the CPU op (at most "
                      "1 allowed: the CPU sums x^2 in another order)\n", g->name, s->fused, (long long)diff,
              (long long)n);
      CHECK(far == 0, "@%s dit %s: %lld codes more than 1 from the CPU's", g->name, s->fused,
            (long long)far);
    }
  }
  free_all(cpu, f->n_results);

  /* y without uses: not stored, same q, s (and residual') */
  const char *t = twin(s->fused);
  if (t) {
    const uint8_t *ty = res(g, t, yi);
    bool untouched = true;
    for (int64_t i = 0; i < n * 2; i++) untouched &= ty[i] == SENTINEL;
    CHECK(case_op(g, t)->results[yi]->uses == 0 && untouched, "@%s %s: y stored although unused",
          g->name, t);
    CHECK(memcmp(res(g, t, yi + 1), q, (size_t)n) == 0 && memcmp(res(g, t, yi + 2), sc, (size_t)T * 4) == 0,
          "@%s %s: codes / scales differ from %s's", g->name, t, s->fused);
    if (s->plan_b)
      CHECK(memcmp(res(g, t, 0), res(g, s->fused, 0), (size_t)n * 2) == 0,
            "@%s %s: residual' differs from %s's", g->name, t, s->fused);
  }

  /* the element-by-element path: x 2 bytes off, then q 1 byte off; Plan B also in place */
  for (int variant = 0; variant < (s->plan_b ? 3 : 2); variant++) {
    void *out[4], *ob[4] = {NULL, NULL, NULL, NULL};
    uint8_t *xb = malloc((size_t)n * 2 + 16);
    bool ok = xb != NULL;
    operands(f, in);
    for (int r = 0; r < f->n_results; r++) {
      ok &= (ob[r] = malloc(bytes_of(g, s->fused, r) + 16)) != NULL;
      out[r] = ob[r];
    }
    if (!ok) {
      CHECK(ok, "out of memory");
      free(xb), free_all(ob, 4);
      continue;
    }
    uint16_t *x = (uint16_t *)(xb + (variant == 0 ? 2 : 0));
    memcpy(x, in[0], (size_t)n * 2);
    in[0] = x;
    if (variant == 1) out[yi + 1] = (uint8_t *)ob[yi + 1] + 1;
    if (variant == 2) out[0] = x; /* residual' in place */
    emu_run_op(f, in, out);
    bool same = true;
    for (int r = 0; r < f->n_results; r++)
      same &= memcmp(out[r], res(g, s->fused, r), bytes_of(g, s->fused, r)) == 0;
    CHECK(same, "@%s %s %s: %s gives other bits", g->name, set, s->fused,
          variant == 0 ? "x off alignment" : variant == 1 ? "q off alignment" : "in place");
    free(xb), free_all(ob, 4);
  }
}

static void test_graph(const h3_graph *g, bool grid, uint64_t seed) {
  const h3_type *xt = &g->inputs[0]->type;
  const int64_t T = xt->dims[0], H = xt->dims[1], G = g->inputs[3]->type.dims[0];
  fprintf(stderr, "graph @%s, %s inputs: T = %lld, H = %lld, G = %lld\n", g->name,
          grid ? "grid" : "dit", (long long)T, (long long)H, (long long)G);
  nm_inputs in;
  CHECK(nm_inputs_make(&in, T, H, G, 0.25, seed), "out of memory");
  if (grid) nm_inputs_grid(&in);
  void *data[7] = {in.x, in.update, in.gamma, in.gate, in.scale, in.shift, in.idx};
  for (int i = 0; i < 7; i++) buf[g->inputs[i]->id] = data[i];
  for (h3_op *op = g->body.first; op; op = op->next) { /* the graph, kernel by kernel */
    if (op->code == H3_OP_RETURN) break;
    void *ins[8], *outs[4];
    for (int r = 0; r < op->n_results; r++) {
      size_t b = (size_t)h3_type_bytes(&op->results[r]->type) + 16;
      buf[op->results[r]->id] = malloc(b);
      if (buf[op->results[r]->id]) memset(buf[op->results[r]->id], SENTINEL, b);
      outs[r] = buf[op->results[r]->id];
    }
    operands(op, ins);
    CHECK(emu_kernel_index(op) >= 0, "op %s is not a kernel", h3_opcode_name(op->code));
    if (emu_kernel_index(op) >= 0) emu_run_op(op, ins, outs);
  }
  for (size_t i = 0; i < sizeof sites / sizeof sites[0]; i++) check_site(g, &sites[i], grid, T, H);
  /* the lossless codes against the exact ones (spec §4.1 rule 4 asks for the rate) */
  const int8_t *qe = res(g, "qa", 1), *ql = res(g, "ql", 1);
  int64_t flips = 0;
  for (int64_t i = 0; i < T * H; i++) flips += qe[i] != ql[i];
  fprintf(stderr, "  lossless codes vs exact: %lld of %lld flipped (%.3f %%)\n", (long long)flips,
          (long long)(T * H), 100.0 * (double)flips / (double)(T * H));
  /* the dequantized rows of both tiers against fp64 (the admission rule, spec §2 rule 4) */
  double *y64 = malloc((size_t)(T * H) * sizeof(double));
  uint16_t *u3 = malloc((size_t)(T * H) * 2);
  CHECK(y64 && u3, "out of memory");
  for (int plan = 0; y64 && u3 && plan < 2; plan++) {
    if (plan) nm_u3(&in, in.x, u3);
    nm_ref64(&in, plan ? u3 : in.x, 1e-5, 0.0, y64);
    const int yi = plan;
    const char *e = plan ? "qb" : "qa", *c = plan ? "qbl" : "ql";
    nm_err ex = nm_qerror(res(g, e, yi + 1), res(g, e, yi + 2), H, y64, T * H),
           ca = nm_qerror(res(g, c, yi + 1), res(g, c, yi + 2), H, y64, T * H);
    char label[64];
    snprintf(label, sizeof label, "%s int8 rows, exact", plan ? "Plan B" : "Plan A");
    nm_print_err(label, ex);
    snprintf(label, sizeof label, "%s int8 rows, lossless", plan ? "Plan B" : "Plan A");
    nm_print_err(label, ca);
    nm_verdict v = nm_admit(ex, ca);
    CHECK(nm_passes(v), "@%s %s: lossless int8 rows fail admission (rms %d max %d mean %d)",
          g->name, c, v.rms_ok, v.max_ok, v.mean_ok);
  }
  free(y64), free(u3);
  for (h3_op *op = g->body.first; op; op = op->next)
    for (int r = 0; r < op->n_results; r++) {
      free(buf[op->results[r]->id]);
      buf[op->results[r]->id] = NULL;
    }
  nm_inputs_free(&in);
}

int main(void) {
  const char *path = H3_SOURCE_DIR "/tests/normmod/kernels/quant_ops.ir";
  h3_module *m = emu_load(path);
  CHECK(m != NULL, "cannot read %s", path);
  if (!m) return nm_report("normmod_emu_quant");
  CHECK(emu_kernels.n == emu_count(), "%d kernel ops, %d emitted", emu_kernels.n, emu_count());
  buf = calloc((size_t)m->next_value_id + 1, sizeof *buf);
  for (int i = 0; buf && emu_kernels.n == emu_count() && i < m->n_graphs; i++)
    for (int grid = 0; grid < 2; grid++)
      test_graph(m->graphs[i], grid, 21 + (uint64_t)i);
  free(buf);
  emu_unload(m);
  return nm_report("normmod_emu_quant");
}
