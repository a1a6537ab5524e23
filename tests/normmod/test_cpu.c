/* test_cpu.c: the numeric contract of norm_modulate / residual_norm_modulate on the CPU
 * backend (docs/models/accelerations.md §2 rule 4, §3, §9 items 1-3).
 *
 * 1. Graph level (pass + executor + CPU kernels): a graph with the block's two norm sites
 *    (Plan A on an input, Plan B after a gated residual add whose residual dies there) and
 *    the final layer's fp32 form on the next gated add (so Plan B with modulate "f32"),
 *    compiled unfused, and with the default pipeline at exact and lossless. exact: the pass
 *    made 1 norm_modulate + 2 residual_norm_modulate and every output is bitwise equal to
 *    the unfused plan; the memory plan updated both residuals in place (result 0 at
 *    operand 0's offset, a chain of two). lossless: same ops, outputs close to exact.
 * 2. Op level, on DiT-like rows with outlier channels (T = 96, H = 5376):
 *    - Plan B's residual' equals an independent U3 bitwise in both tiers, and Plan B's
 *      output equals Plan A run on that U3 result bitwise (Plan B = (U3; Plan A)), also
 *      when residual' is written in place over the residual;
 *    - lossless Plan A / Plan B / the fp32-modulate (final layer) form pass the admission
 *      inequalities against their exact variants, errors taken against an fp64 evaluation
 *      of the same math from the same bf16 inputs (nm_test.h);
 *    - a deliberately biased variant (the lossless fp32 value truncated to bf16 instead of
 *      rounded to nearest even) fails the mean test on outputs that lean positive (AdaLN
 *      shift with mean 0.5: truncation toward zero is sign-symmetric, so on sign-balanced
 *      outputs its bias cancels); a floor-rounding variant fails it on any inputs.
 * 3. NaN / Inf inputs (in x, a scale entry, a shift entry): the lossless outputs have their
 *    NaN / Inf at exactly the exact plan's positions.
 */
#include "nm_test.h"

#include "h3/backend.h"
#include "h3/passes.h"
#include "h3/runtime.h"

/* ---- modules from IR text ----------------------------------------------------------------- */
static h3_module *parse(const char *text) {
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = h3_module_parse("normmod_test.ir", text, strlen(text), &d);
  if (!m) h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  return m;
}

static h3_module *compile(const char *text, h3_tier tier, const char *passes) {
  h3_module *m = parse(text);
  h3_diag d;
  h3_diag_init(&d);
  h3_pass_options o = h3_pass_options_default();
  o.tier = tier;
  o.passes = passes;
  o.verify_each = true;
  if (m && h3_pass_pipeline_run(m, &o, &d) != H3_OK) {
    h3_diag_print(&d, stderr);
    h3_module_free(m);
    m = NULL;
  }
  h3_diag_free(&d);
  return m;
}

/* The ops of graph 0's body of code `code`, in order. */
static int find_ops(const h3_module *m, h3_opcode code, h3_op **out, int cap) {
  int n = 0;
  for (h3_op *op = m->graphs[0]->body.first; op; op = op->next)
    if (op->code == code) {
      if (n < cap) out[n] = op;
      n++;
    }
  return n;
}

/* ---- 1. graph level ----------------------------------------------------------------------- */
#define GT 40
#define GH 256
#define GG 6

/* Replaces @T@, @H@ and @G@ in tmpl; the result lives in buf. */
static const char *instantiate(char *buf, size_t cap, const char *tmpl, int64_t T, int64_t H,
                               int64_t G) {
  size_t n = 0;
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

static const char graph_tmpl[] =
    "module @nm config \"test\" {\n"
    "  graph @g(%x: bf16[@T@, @H@], %a: bf16[@T@, @H@], %w1: bf16[@H@], %w2: bf16[@H@],"
    " %gt: bf16[@G@, @H@], %sc: bf16[@G@, @H@], %sh: bf16[@G@, @H@], %idx: i32[@T@])"
    " -> (y1: bf16[@T@, @H@], y: bf16[@T@, @H@], x2: bf16[@T@, @H@], yf: bf16[@T@, @H@]) {\n"
    "    %h0 = rms_norm(%x, %w1) {eps = 1e-05} : bf16[@T@, @H@]\n"
    "    %g0 = gather(%sc, %idx) : bf16[@T@, @H@]\n"
    "    %one = const() {value = 1.0, dtype = bf16} : bf16[]\n"
    "    %c0 = add(%one, %g0) : bf16[@T@, @H@]\n"
    "    %p0 = mul(%h0, %c0) : bf16[@T@, @H@]\n"
    "    %s0 = gather(%sh, %idx) : bf16[@T@, @H@]\n"
    "    %y1 = add(%p0, %s0) : bf16[@T@, @H@]\n"
    "    %r = neg(%x) : bf16[@T@, @H@]\n"
    "    %ga = gather(%gt, %idx) : bf16[@T@, @H@]\n"
    "    %u = mul(%ga, %a) : bf16[@T@, @H@]\n"
    "    %x1 = add(%r, %u) : bf16[@T@, @H@]\n"
    "    %h = rms_norm(%x1, %w2) {eps = 1e-05} : bf16[@T@, @H@]\n"
    "    %g1 = gather(%sh, %idx) : bf16[@T@, @H@]\n"
    "    %one2 = const() {value = 1.0, dtype = bf16} : bf16[]\n"
    "    %c = add(%one2, %g1) : bf16[@T@, @H@]\n"
    "    %p = mul(%h, %c) : bf16[@T@, @H@]\n"
    "    %g2 = gather(%sc, %idx) : bf16[@T@, @H@]\n"
    "    %y = add(%p, %g2) : bf16[@T@, @H@]\n"
    "    %g3 = gather(%gt, %idx) : bf16[@T@, @H@]\n"
    "    %v = mul(%g3, %y) : bf16[@T@, @H@]\n"
    "    %x2 = add(%x1, %v) : bf16[@T@, @H@]\n"
    "    %n = rms_norm(%x2, %w1) {eps = 1e-05} : bf16[@T@, @H@]\n"
    "    %f0 = cast(%n) {dtype = f32} : f32[@T@, @H@]\n"
    "    %f1 = gather(%sc, %idx) : bf16[@T@, @H@]\n"
    "    %f2 = cast(%f1) {dtype = f32} : f32[@T@, @H@]\n"
    "    %f3 = const() {value = 1.0, dtype = f32} : f32[]\n"
    "    %f4 = add(%f3, %f2) : f32[@T@, @H@]\n"
    "    %f5 = mul(%f0, %f4) : f32[@T@, @H@]\n"
    "    %f6 = gather(%sh, %idx) : bf16[@T@, @H@]\n"
    "    %f7 = cast(%f6) {dtype = f32} : f32[@T@, @H@]\n"
    "    %f8 = add(%f5, %f7) : f32[@T@, @H@]\n"
    "    %yf = cast(%f8) {dtype = bf16} : bf16[@T@, @H@]\n"
    "    return %y1, %y, %x2, %yf\n  }\n}\n";

static char graph_text[8192];

/* Runs graph g of m on the CPU with the given host inputs; out gets the outputs. */
static bool run_graph(const h3_module *m, h3_host_tensor *in, h3_host_tensor *out) {
  h3_diag d;
  h3_diag_init(&d);
  h3_backend_options bo = {.threads = 2, .seed = 1};
  h3_backend *b = h3_backend_create("cpu", &bo, &d);
  h3_weights *w = b ? h3_weights_random(m, 1, &d) : NULL;
  h3_runtime *rt = w ? h3_runtime_new(m, b, w, NULL, &d) : NULL;
  bool ok = rt && h3_runtime_run(rt, m->graphs[0], in, out, &d) == H3_OK;
  if (!ok) h3_diag_print(&d, stderr);
  h3_runtime_free(rt);
  h3_weights_free(w);
  h3_backend_free(b);
  h3_diag_free(&d);
  return ok;
}

static void host_input(h3_host_tensor *t, const h3_value *v, const void *data) {
  t->name = v->name;
  t->type = v->type;
  t->bytes = (size_t)h3_type_bytes(&v->type);
  t->data = malloc(t->bytes);
  if (t->data) memcpy(t->data, data, t->bytes);
}

static void test_graph(void) {
  instantiate(graph_text, sizeof graph_text, graph_tmpl, GT, GH, GG);
  nm_inputs in;
  CHECK(nm_inputs_make(&in, GT, GH, GG, 0.0, 7), "out of memory");
  h3_module *mods[3] = {compile(graph_text, H3_TIER_EXACT, "verify,dce,memory-plan,verify"),
                        compile(graph_text, H3_TIER_EXACT, NULL),
                        compile(graph_text, H3_TIER_LOSSLESS, NULL)};
  CHECK(mods[0] && mods[1] && mods[2], "a module did not compile");
  if (!mods[0] || !mods[1] || !mods[2]) return;
  h3_host_tensor out[3][4];
  for (int k = 0; k < 3; k++) {
    h3_op *ops[4];
    if (k > 0) {
      CHECK(find_ops(mods[k], H3_OP_NORM_MODULATE, ops, 4) == 1, "module %d: Plan A count", k);
      CHECK(find_ops(mods[k], H3_OP_RMS_NORM, ops, 4) == 0, "module %d: rms_norm left", k);
      CHECK(find_ops(mods[k], H3_OP_RESIDUAL_NORM_MODULATE, ops, 4) == 2, "module %d: Plan B", k);
      for (int i = 0; i < 2; i++) /* both residuals die at their Plan B op: in place */
        CHECK(ops[i]->results[0]->offset >= 0 &&
                  ops[i]->results[0]->offset == ops[i]->operands[0]->offset,
              "module %d: residual' at %lld, residual at %lld (not in place)", k,
              (long long)ops[i]->results[0]->offset, (long long)ops[i]->operands[0]->offset);
      CHECK(strcmp(h3_op_attr_string(ops[1], "modulate", ""), "f32") == 0,
            "module %d: the final-layer form lost its fp32 modulate", k);
    }
    const h3_graph *g = mods[k]->graphs[0];
    const void *data[8] = {in.x, in.update, in.gamma, in.gamma, in.gate, in.scale, in.shift, in.idx};
    h3_host_tensor *hin = calloc(8, sizeof *hin); /* h3_host_tensors_free frees the array */
    CHECK(hin != NULL, "out of memory");
    if (!hin) return;
    for (int i = 0; i < 8; i++) host_input(&hin[i], g->inputs[i], data[i]);
    CHECK(run_graph(mods[k], hin, out[k]), "module %d did not run", k);
    h3_host_tensors_free(hin, 8);
  }
  for (int i = 0; i < 4; i++) {
    CHECK(memcmp(out[0][i].data, out[1][i].data, out[0][i].bytes) == 0,
          "exact %s is not bitwise equal to the unfused plan", out[0][i].name);
    const uint16_t *e = out[1][i].data, *l = out[2][i].data;
    double num = 0, den = 0;
    int64_t n = (int64_t)(out[1][i].bytes / 2), same = 0;
    for (int64_t j = 0; j < n; j++) {
      double a = nm_f(e[j]), b = nm_f(l[j]);
      num += (a - b) * (a - b);
      den += a * a;
      same += e[j] == l[j];
    }
    CHECK(den > 0 && sqrt(num / den) < 1e-2, "lossless %s: relative L2 %g against exact",
          out[1][i].name, sqrt(num / (den > 0 ? den : 1)));
    if (i != 2) CHECK(same < n, "lossless %s equals exact everywhere: tier not applied", out[1][i].name);
  }
  for (int k = 0; k < 3; k++) {
    for (int i = 0; i < 4; i++) free(out[k][i].data);
    h3_module_free(mods[k]);
  }
  nm_inputs_free(&in);
}

/* ---- 2./3. op level ------------------------------------------------------------------------ */
static char ops_text[4096];

/* Graph whose ops are, in order: Plan A exact, lossless, exact fp32-modulate, lossless
 * fp32-modulate, Plan B exact, Plan B lossless. */
static const char ops_tmpl[] =
    "module @nm config \"test\" {\n"
    "  graph @g(%x: bf16[@T@, @H@], %u: bf16[@T@, @H@], %w: bf16[@H@], %gt: bf16[@G@, @H@],"
    " %sc: bf16[@G@, @H@], %sh: bf16[@G@, @H@], %idx: i32[@T@]) -> (a: bf16[@T@, @H@]) {\n"
    "    %ae = norm_modulate(%x, %w, %sc, %sh, %idx) {eps = 1e-05, tier = exact}"
    " : bf16[@T@, @H@]\n"
    "    %al = norm_modulate(%x, %w, %sc, %sh, %idx) {eps = 1e-05, tier = lossless}"
    " : bf16[@T@, @H@]\n"
    "    %fe = norm_modulate(%x, %w, %sc, %sh, %idx) {eps = 1e-05, tier = exact,"
    " modulate = \"f32\"} : bf16[@T@, @H@]\n"
    "    %fl = norm_modulate(%x, %w, %sc, %sh, %idx) {eps = 1e-05, tier = lossless,"
    " modulate = \"f32\"} : bf16[@T@, @H@]\n"
    "    %be0, %be1 = residual_norm_modulate(%x, %u, %gt, %w, %sc, %sh, %idx) {eps = 1e-05,"
    " tier = exact} : bf16[@T@, @H@], bf16[@T@, @H@]\n"
    "    %bl0, %bl1 = residual_norm_modulate(%x, %u, %gt, %w, %sc, %sh, %idx) {eps = 1e-05,"
    " tier = lossless} : bf16[@T@, @H@], bf16[@T@, @H@]\n"
    "    return %ae\n  }\n}\n";

static h3_module *ops_module(int64_t T, int64_t H, int64_t G) {
  return parse(instantiate(ops_text, sizeof ops_text, ops_tmpl, T, H, G));
}

/* Runs op (operands: the tensors of `data`, results into out_data). */
static bool run_op(const h3_op *op, void *const *data, void *const *out_data) {
  h3_tensor in[8], out[2];
  for (int i = 0; i < op->n_operands; i++) in[i] = (h3_tensor){op->operands[i]->type, data[i]};
  for (int i = 0; i < op->n_results; i++) out[i] = (h3_tensor){op->results[i]->type, out_data[i]};
  h3_diag d;
  h3_diag_init(&d);
  h3_status st = h3_cpu_run_op(op, in, op->n_operands, out, op->n_results, 2, 1, &d);
  if (st != H3_OK) h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  return st == H3_OK;
}

/* The biased test double: the lossless fp32 value, then `mode` 0 = truncation toward zero
 * (clear the low 16 bits), 1 = floor to the bf16 grid, instead of round to nearest even. */
static void biased(const nm_inputs *in, const uint16_t *x, int mode, uint16_t *y) {
  const int64_t H = in->H;
  for (int64_t t = 0; t < in->T; t++) {
    int64_t g = nm_row(in->idx[t], in->G);
    float s = 0.0f;
    for (int64_t k = 0; k < H; k++) s += nm_f(x[t * H + k]) * nm_f(x[t * H + k]);
    float r = 1.0f / sqrtf(s / (float)H + 1e-5f);
    for (int64_t k = 0; k < H; k++) {
      float weff = nm_f(in->gamma[k]) * (1.0f + nm_f(in->scale[g * H + k]));
      float v = fmaf(nm_f(x[t * H + k]) * r, weff, nm_f(in->shift[g * H + k]));
      uint32_t u = h3_f32_bits(v);
      uint16_t tr = (uint16_t)(u >> 16);
      if (mode == 1 && v < 0 && (u & 0xffffu)) tr++; /* negative: away from zero = down */
      y[t * H + k] = tr;
    }
  }
}

typedef struct {
  uint16_t *ae, *al, *fe, *fl, *be0, *be1, *bl0, *bl1;
} op_outs;

static bool run_all(h3_module *m, const nm_inputs *in, uint16_t *x, op_outs *o) {
  h3_op *ops[8];
  if (find_ops(m, H3_OP_NORM_MODULATE, ops, 8) != 4 ||
      find_ops(m, H3_OP_RESIDUAL_NORM_MODULATE, ops + 4, 4) != 2)
    return false;
  void *a_in[5] = {x, in->gamma, in->scale, in->shift, in->idx};
  void *b_in[7] = {x, in->update, in->gate, in->gamma, in->scale, in->shift, in->idx};
  uint16_t **res[8] = {&o->ae, &o->al, &o->fe, &o->fl, &o->be0, &o->be1, &o->bl0, &o->bl1};
  size_t bytes = (size_t)(in->T * in->H) * 2;
  for (int i = 0; i < 8; i++)
    if (!(*res[i] = malloc(bytes))) return false;
  bool ok = true;
  for (int i = 0; i < 4 && ok; i++) ok = run_op(ops[i], a_in, (void *[]){*res[i]});
  if (ok) ok = run_op(ops[4], b_in, (void *[]){o->be0, o->be1});
  if (ok) ok = run_op(ops[5], b_in, (void *[]){o->bl0, o->bl1});
  return ok;
}

static void outs_free(op_outs *o) {
  free(o->ae), free(o->al), free(o->fe), free(o->fl);
  free(o->be0), free(o->be1), free(o->bl0), free(o->bl1);
}

static void test_ops(double shift_mean, uint64_t seed) {
  const int64_t T = 96, H = 5376, G = 6, n = T * H;
  fprintf(stderr, "op level: T = %lld, H = %lld, shift mean %.2f\n", (long long)T, (long long)H,
          shift_mean);
  nm_inputs in;
  h3_module *m = ops_module(T, H, G);
  CHECK(m && nm_inputs_make(&in, T, H, G, shift_mean, seed), "setup");
  if (!m) return;
  op_outs o;
  memset(&o, 0, sizeof o);
  uint16_t *u3 = malloc((size_t)n * 2), *xa = malloc((size_t)n * 2), *ya = malloc((size_t)n * 2),
           *yb = malloc((size_t)n * 2);
  double *y64 = malloc((size_t)n * sizeof(double)), *y64b = malloc((size_t)n * sizeof(double));
  CHECK(u3 && xa && ya && yb && y64 && y64b && run_all(m, &in, in.x, &o), "running the ops");
  if (!u3 || !xa || !ya || !yb || !y64 || !y64b || !o.bl1) return;
  h3_op *ops[8];
  find_ops(m, H3_OP_NORM_MODULATE, ops, 8);
  find_ops(m, H3_OP_RESIDUAL_NORM_MODULATE, ops + 4, 4);

  /* Plan B = (U3; Plan A), residual' = U3, in both tiers, also in place */
  nm_u3(&in, in.x, u3);
  CHECK(memcmp(o.be0, u3, (size_t)n * 2) == 0, "exact residual' != U3");
  CHECK(memcmp(o.bl0, u3, (size_t)n * 2) == 0, "lossless residual' != U3");
  for (int tier = 0; tier < 2; tier++) {
    void *a_in[5] = {u3, in.gamma, in.scale, in.shift, in.idx};
    CHECK(run_op(ops[tier], a_in, (void *[]){ya}), "Plan A on U3");
    CHECK(memcmp(ya, tier ? o.bl1 : o.be1, (size_t)n * 2) == 0,
          "%s Plan B != (U3; Plan A)", tier ? "lossless" : "exact");
    memcpy(xa, in.x, (size_t)n * 2); /* in place: residual' written over the residual */
    void *b_in[7] = {xa, in.update, in.gate, in.gamma, in.scale, in.shift, in.idx};
    CHECK(run_op(ops[4 + tier], b_in, (void *[]){xa, yb}), "Plan B in place");
    CHECK(memcmp(xa, u3, (size_t)n * 2) == 0 && memcmp(yb, tier ? o.bl1 : o.be1, (size_t)n * 2) == 0,
          "%s Plan B in place differs", tier ? "lossless" : "exact");
  }

  /* admission against the exact variants, errors against fp64 */
  nm_ref64(&in, in.x, 1e-5, 0.0, y64);
  nm_ref64(&in, u3, 1e-5, 0.0, y64b);
  struct {
    const char *name;
    const uint16_t *exact, *cand;
    const double *ref;
  } sites[3] = {{"Plan A", o.ae, o.al, y64},
                {"Plan B", o.be1, o.bl1, y64b},
                {"final layer (fp32 modulate)", o.fe, o.fl, y64}};
  for (int s = 0; s < 3; s++) {
    nm_err ex = nm_error(sites[s].exact, sites[s].cand, sites[s].ref, n);
    nm_err ca = nm_error(sites[s].cand, sites[s].exact, sites[s].ref, n);
    char label[96];
    snprintf(label, sizeof label, "%s exact", sites[s].name);
    nm_print_err(label, ex);
    snprintf(label, sizeof label, "%s lossless", sites[s].name);
    nm_print_err(label, ca);
    nm_verdict v = nm_admit(ex, ca);
    CHECK(ex.n > n / 2 && nm_passes(v), "%s lossless fails admission (rms %d max %d mean %d)",
          sites[s].name, v.rms_ok, v.max_ok, v.mean_ok);
    CHECK(memcmp(sites[s].exact, sites[s].cand, (size_t)n * 2) != 0, "%s: tiers identical",
          sites[s].name);
  }
  CHECK(memcmp(o.al, o.fl, (size_t)n * 2) == 0, "lossless ignores the modulate chain");

  /* the biased doubles */
  for (int mode = 0; mode < 2; mode++) {
    biased(&in, in.x, mode, ya);
    nm_err ex = nm_error(o.ae, ya, y64, n), bi = nm_error(ya, o.ae, y64, n);
    nm_print_err(mode ? "biased (floor)" : "biased (truncation)", bi);
    nm_verdict v = nm_admit(ex, bi);
    if (mode == 1 || shift_mean > 0)
      CHECK(!v.mean_ok, "the %s variant passes the mean test", mode ? "floor" : "truncating");
  }
  free(u3), free(xa), free(ya), free(yb), free(y64), free(y64b);
  outs_free(&o);
  nm_inputs_free(&in);
  h3_module_free(m);
}

static void test_specials(void) {
  const int64_t T = 64, H = 256, G = 4, n = T * H;
  nm_inputs in;
  h3_module *m = ops_module(T, H, G);
  CHECK(m && nm_inputs_make(&in, T, H, G, 0.0, 99), "setup");
  if (!m) return;
  in.x[3 * H + 10] = 0x7fc0;  /* NaN: the whole row */
  in.x[5 * H + 20] = 0x7f80;  /* +Inf: r = 0, that element NaN */
  in.x[6 * H + 7] = 0xff80;   /* -Inf */
  in.scale[1 * H + 30] = 0x7fc0;
  in.shift[2 * H + 40] = 0x7f80;
  in.shift[3 * H + 41] = 0xff80;
  for (int64_t t = 0; t < 8; t++) in.idx[t] = (int32_t)(t % G); /* rows 0-7 see every row */
  op_outs o;
  memset(&o, 0, sizeof o);
  CHECK(run_all(m, &in, in.x, &o), "running the ops");
  if (o.bl1) {
    int64_t specials = 0;
    for (int64_t i = 0; i < n; i++) specials += !isfinite(nm_f(o.ae[i]));
    CHECK(specials > H, "only %lld NaN/Inf outputs", (long long)specials);
    CHECK(nm_special_mismatch(o.ae, o.al, n) == 0, "Plan A: NaN/Inf positions differ");
    CHECK(nm_special_mismatch(o.fe, o.fl, n) == 0, "final layer: NaN/Inf positions differ");
    CHECK(nm_special_mismatch(o.be1, o.bl1, n) == 0, "Plan B: NaN/Inf positions differ");
    CHECK(memcmp(o.be0, o.bl0, (size_t)n * 2) == 0, "residual' differs between tiers");
  }
  outs_free(&o);
  nm_inputs_free(&in);
  h3_module_free(m);
}

int main(void) {
  test_graph();
  test_ops(0.0, 1);
  test_ops(0.5, 2);
  test_specials();
  return nm_report("normmod_cpu");
}
