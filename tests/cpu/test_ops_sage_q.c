/* test_ops_sage_q.c: the CPU reference of sage-q-fusion's form (ops.def): rms_norm_rope
 * {sage_quant = 1} writing q's codes and deltas, and sage_attention reading them (operands 3
 * and 4), against the unfused pair rms_norm_rope + sage_attention:
 *   - the fused norm's y is the plain norm's, bitwise;
 *   - its codes and deltas are the Q rule of ops.def computed here from y (per segment, q
 *     head and 64-row block from the segment's start: delta = amax / 127, codes round-half-even
 *     in [-127, 127]) in include/h3/sage.h's padded layout, zero codes past a segment's rows;
 *   - sage_attention fed them is the unfused sage_attention of the same q, bitwise (pv fp8 and
 *     bf16, smoothing on and off);
 *   - a bad layout (codes of another size) is a type error that names the expected type.
 * Shapes: two segments with partial blocks (130 + 70 rows: block 2 of the first segment holds
 * 2 rows, block 3 none), GQA 4 / 2, D 32; segment boundaries at 0 and T and one segment of
 * 64 rows exactly; the bf16 q of random x rows of mixed magnitude.
 */
#include "harness.h"
#include "../common/sage_q_rule.h"

typedef struct {
  int64_t T, Hq, Hk, D, half;
  int n_seg;
  int64_t seg[3];
} shape;

static void check_shape(const shape *c) {
  T t;
  t_init(&t, 41);
  const int64_t C = (c->Hq + 2 * c->Hk) * c->D;
  h3_value *x = t_in(&t, "x", TY(H3_BF16, c->T, C)), *w = t_in(&t, "w", TY(H3_BF16, c->D));
  h3_value *cs = t_in(&t, "cs", TY(H3_BF16, c->T, c->half)), *sn = t_in(&t, "sn", TY(H3_BF16, c->T, c->half));
  h3_value *k = t_in(&t, "k", TY(H3_BF16, c->T, c->Hk, c->D)), *v = t_in(&t, "v", TY(H3_BF16, c->T, c->Hk, c->D));
  h3_tensor in[6] = {t_rand(&t, x->type, -2, 2), t_rand(&t, w->type, 0.5, 1.5), t_rand(&t, cs->type, -1, 1),
                     t_rand(&t, sn->type, -1, 1), t_rand(&t, k->type, -1.5, 1.5), t_rand(&t, v->type, -1, 1)};
  for (int64_t r = 0; r < c->T; r++) /* rows of mixed magnitude */
    for (int64_t i = 0; i < C; i++) t_set(&in[0], r * C + i, t_get(&in[0], r * C + i) * (1 + r % 7) * 0.3);
  const h3_attr seg = h3_attr_ints(t.m, "segments", c->n_seg, c->seg);
  h3_attr na[5] = {h3_attr_int(t.m, "start", 0), h3_attr_int(t.m, "heads", c->Hq), h3_attr_float(t.m, "eps", 1e-5),
                   h3_attr_int(t.m, "sage_quant", 1), seg};
  h3_op *plain = t_op(&t, H3_OP_RMS_NORM_ROPE, 4, (h3_value *[]){x, w, cs, sn}, 3, na);
  h3_op *fused = t_op(&t, H3_OP_RMS_NORM_ROPE, 4, (h3_value *[]){x, w, cs, sn}, c->n_seg ? 5 : 4, na);
  h3_tensor y[1], f[3];
  CHECK(t_run(plain, in, y) == H3_OK && t_run(fused, in, f) == H3_OK, "T %lld: the norms run", (long long)c->T);
  CHECK(memcmp(y[0].data, f[0].data, (size_t)h3_type_bytes(&y[0].type)) == 0, "T %lld: fused y != plain y",
        (long long)c->T);
  const int64_t bad = sage_q_rule_diff(f[0].data, c->T, c->Hq, c->D, c->n_seg ? &seg : NULL, f[1].data, f[2].data);
  CHECK(bad == 0, "T %lld: %lld codes / deltas differ from the Q rule", (long long)c->T, (long long)bad);
  h3_value *q = fused->results[0], *qc = fused->results[1], *qd = fused->results[2];
  for (int pv = 0; pv < 2; pv++)
    for (int sm = 0; sm < 2; sm++) {
      h3_attr sa[4] = {h3_attr_float(t.m, "scale", 1.0 / sqrt((double)c->D)),
                       h3_attr_string(t.m, "pv", pv ? "bf16" : "fp8"), h3_attr_int(t.m, "smooth", sm), seg};
      const int n_attr = c->n_seg ? 4 : 3;
      h3_op *att = t_op(&t, H3_OP_SAGE_ATTENTION, 3, (h3_value *[]){q, k, v}, n_attr, sa);
      h3_op *attf = t_op(&t, H3_OP_SAGE_ATTENTION, 5, (h3_value *[]){q, k, v, qc, qd}, n_attr, sa);
      h3_tensor ain[5] = {f[0], in[4], in[5], f[1], f[2]}, o[1], of[1];
      CHECK(t_run(att, ain, o) == H3_OK && t_run(attf, ain, of) == H3_OK, "T %lld: the attentions run",
            (long long)c->T);
      CHECK(memcmp(o[0].data, of[0].data, (size_t)h3_type_bytes(&o[0].type)) == 0,
            "T %lld pv %s smooth %d: sage_attention with q's codes != without", (long long)c->T,
            pv ? "bf16" : "fp8", sm);
      t_free_all(o, 1), t_free_all(of, 1);
    }
  printf("  T %lld Hq %lld Hk %lld D %lld, %d boundaries: fused == unfused, bitwise\n", (long long)c->T,
         (long long)c->Hq, (long long)c->Hk, (long long)c->D, c->n_seg);
  t_free_all(in, 6), t_free_all(y, 1), t_free_all(f, 3);
  t_free(&t);
}

/* q's codes of the wrong size: the verifier's message names the expected type. */
static void check_bad_layout(void) {
  T t;
  t_init(&t, 42);
  h3_value *q = t_in(&t, "q", TY(H3_BF16, 70, 2, 16)), *k = t_in(&t, "k", TY(H3_BF16, 70, 2, 16));
  h3_value *qc = t_in(&t, "qc", TY(H3_I8, 70 * 2 * 16)), *qd = t_in(&t, "qd", TY(H3_F32, 4));
  h3_attr sc = h3_attr_float(t.m, "scale", 0.25);
  h3_diag d;
  h3_diag_init(&d);
  h3_op *op = h3_build_op(&t.b, H3_OP_SAGE_ATTENTION, 5, (h3_value *[]){q, k, k, qc, qd}, 1, &sc, 0, &d);
  CHECK(!op && d.head && strstr(d.head->message, "i8[4096]"), "bad codes: %s",
        d.head ? d.head->message : "(accepted)");
  h3_diag_free(&d);
  t_free(&t);
}

int main(void) {
  const shape cases[] = {
      {200, 4, 2, 32, 12, 1, {130}}, {150, 2, 1, 16, 6, 3, {0, 64, 150}}, {64, 2, 2, 16, 8, 0, {0}}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_shape(&cases[i]);
  check_bad_layout();
  return t_report("test_ops_sage_q");
}
