/* test_frontend.c: positive tests of the front end (include/h3/frontend.h).
 *
 * Small valid programs compile, verify, and give the IR structure docs/language.md
 * specifies: one `loop` op for a repeat (not unrolled), carried values, stacked group
 * parameters with their weight-name patterns, bases and inits, index ops with offsets,
 * inlined functions with shape variables, literal constants with the other operand's
 * dtype, built-ins, programs calling graphs, config choice and overrides. Expected values
 * are computed here from the program text (independently of the compiler).
 */
#include "h3/frontend.h"
#include "h3/op_registry.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(c)                                                      \
  do {                                                                \
    if (!(c)) {                                                       \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
      failures++;                                                     \
    }                                                                 \
  } while (0)

/* Compiles src; on failure prints the diagnostics. */
static h3_module *compile_opt(const char *src, const h3_frontend_options *opt) {
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = h3_frontend_compile("t.g", src, strlen(src), opt, &d);
  if (!m) {
    fprintf(stderr, "compile failed:\n");
    h3_diag_print(&d, stderr);
  }
  h3_diag_free(&d);
  return m;
}

static h3_module *compile(const char *src) { return compile_opt(src, NULL); }

/* Counts the ops of `code` in region r (nested regions too when deep). */
static int count_ops(const h3_region *r, h3_opcode code, int deep) {
  int n = 0;
  for (h3_op *op = r->first; op; op = op->next) {
    if (op->code == code) n++;
    if (deep)
      for (int i = 0; i < op->n_regions; i++) n += count_ops(&op->regions[i], code, deep);
  }
  return n;
}

static h3_op *first_op(const h3_region *r, h3_opcode code) {
  for (h3_op *op = r->first; op; op = op->next) {
    if (op->code == code) return op;
    for (int i = 0; i < op->n_regions; i++) {
      h3_op *o = first_op(&op->regions[i], code);
      if (o) return o;
    }
  }
  return NULL;
}

static int dims_are(const h3_type *t, h3_dtype dt, int rank, const int64_t *dims) {
  if (t->dtype != dt || t->rank != rank) return 0;
  for (int i = 0; i < rank; i++)
    if (t->dims[i] != dims[i]) return 0;
  return 1;
}

/* A 50-layer repeat is ONE loop op with index ops on stacked params. */
static void test_repeat_stack(void) {
  const char *src =
      "model stack\n"
      "config full { layers = 50, dim = 32, ffn = 48 }\n"
      "config tiny { layers = 2, dim = 8, ffn = 12 }\n"
      "params blocks[layers] {\n"
      "  norm.weight : bf16[dim] init ones_plus_normal(std = 0.02)\n"
      "  fc1.weight  : bf16[ffn, dim]\n"
      "  fc2.weight  : bf16[dim, ffn] init normal(std = 0.5)\n"
      "}\n"
      "fn block(x: bf16[S, dim], p: blocks) -> bf16[S, dim] {\n"
      "  h = rms_norm(x, p.norm.weight, eps = 1e-5)\n"
      "  return x + linear(silu(linear(h, p.fc1.weight)), p.fc2.weight)\n"
      "}\n"
      "graph step(x: bf16[7, dim]) -> (y: bf16[7, dim]) {\n"
      "  trunk: repeat i in layers { x = block(x, blocks[i]) }\n"
      "  return x\n"
      "}\n";
  h3_module *m = compile(src);
  CHECK(m);
  if (!m) return;
  CHECK(strcmp(m->config, "full") == 0);
  h3_graph *g = h3_module_graph(m, "step");
  CHECK(g && g->kind == H3_GRAPH_FUNCTION && g->n_inputs == 1 && g->n_outputs == 1);
  CHECK(count_ops(&g->body, H3_OP_LOOP, 1) == 1);
  h3_op *loop = first_op(&g->body, H3_OP_LOOP);
  CHECK(loop && h3_op_attr_int(loop, "count", 0) == 50);
  CHECK(loop && strcmp(h3_op_attr_string(loop, "label", ""), "trunk") == 0);
  CHECK(loop && loop->n_operands == 1 && loop->n_results == 1 && loop->regions[0].n_args == 2);
  if (loop) {
    h3_region *r = &loop->regions[0];
    CHECK(r->args[0]->type.dtype == H3_I32 && r->args[0]->type.rank == 0);
    CHECK(count_ops(r, H3_OP_INDEX, 0) == 3);  /* one per field read */
    CHECK(count_ops(r, H3_OP_LINEAR, 0) == 2); /* the body once, not 50 times */
    CHECK(r->last && r->last->code == H3_OP_YIELD);
    h3_op *ix = first_op(r, H3_OP_INDEX);
    CHECK(ix && ix->operands[1] == r->args[0] && ix->operands[0]->kind == H3_VALUE_PARAM);
  }
  h3_param *p = h3_module_param(m, "blocks.{}.fc1.weight");
  int64_t want[] = {50, 48, 32};
  CHECK(p && dims_are(&p->type, H3_BF16, 3, want));
  CHECK(p && p->group && strcmp(p->group, "blocks") == 0 && p->group_dims == 1 && p->group_base == 0);
  CHECK(p && p->init == H3_INIT_NORMAL && fabs(p->init_scale - 1.0 / sqrt(32.0)) < 1e-15);
  p = h3_module_param(m, "blocks.{}.norm.weight");
  CHECK(p && p->init == H3_INIT_ONES_PLUS_NORMAL && p->init_scale == 0.02);
  h3_module_free(m);

  h3_frontend_options o = {.config = "tiny"};
  m = compile_opt(src, &o);
  CHECK(m && strcmp(m->config, "tiny") == 0);
  if (m) {
    p = h3_module_param(m, "blocks.{}.fc2.weight");
    int64_t w2[] = {2, 8, 12};
    CHECK(p && dims_are(&p->type, H3_BF16, 3, w2) && p->init_scale == 0.5);
    CHECK(h3_module_config(m, "ffn", -1) == 12);
  }
  h3_module_free(m);
}

/* Carried names, locals, offsets, literals, casts and built-ins. */
static void test_loop_carry_and_exprs(void) {
  const char *src =
      "model carry\n"
      "config c { n = 5, d = 6 }\n"
      "let half = d / 2\n"
      "let eps = 1e-6\n"
      "graph g(x: bf16[4, d], s: f32[n, 2]) -> (y: bf16[4, d], z: f32[2], w: bf16[4, half]) {\n"
      "  acc = zeros(f32, [2])\n"
      "  loop1: repeat k in n - 1 {\n"
      "    t = s[k + 1] - s[k]\n"
      "    u = s[k + n - 4]\n" /* (k + n) - 4: the loop index with offset 1, as s[k + 1] */
      "    acc = acc + t * 2 + u\n"
      "    x = bf16(f32(x) * 0.5)\n"
      "  }\n"
      "  a, b = split(x, 2, axis = -1)\n"
      "  r = rows(a, 1, 2)\n"
      "  f = full(bf16, [half], value = 1.5)\n"
      "  return x, acc, rms_norm(a + b, f, eps = eps)\n"
      "}\n";
  h3_module *m = compile(src);
  CHECK(m);
  if (!m) return;
  h3_graph *g = h3_module_graph(m, "g");
  h3_op *loop = first_op(&g->body, H3_OP_LOOP);
  CHECK(loop && h3_op_attr_int(loop, "count", 0) == 4);
  CHECK(loop && loop->n_operands == 2); /* acc and x; t is local */
  if (loop) {
    h3_region *r = &loop->regions[0];
    CHECK(r->n_args == 3 && strcmp(r->args[1]->name, "acc") == 0 && strcmp(r->args[2]->name, "x") == 0);
    int offsets = 0, plain = 0, of_k = 0;
    for (h3_op *op = r->first; op; op = op->next)
      if (op->code == H3_OP_INDEX) {
        if (h3_op_attr_int(op, "offset", 0) == 1) offsets++;
        else plain++;
        of_k += op->operands[1] == r->args[0]; /* the row is the loop index's, not computed */
      }
    CHECK(offsets == 2 && plain == 1 && of_k == 3);
    h3_op *mul = first_op(r, H3_OP_MUL);
    CHECK(mul && mul->operands[1]->def && mul->operands[1]->def->code == H3_OP_CONST);
    CHECK(mul && mul->operands[1]->type.dtype == H3_F32 && mul->operands[1]->type.rank == 0);
    CHECK(count_ops(r, H3_OP_CAST, 0) == 2);
  }
  h3_op *slice = NULL;
  int slices = 0;
  for (h3_op *op = g->body.first; op; op = op->next)
    if (op->code == H3_OP_SLICE) {
      if (!slice) slice = op;
      slices++;
    }
  CHECK(slices == 3); /* split (2), rows */
  CHECK(slice && h3_op_attr_int(slice, "axis", -9) == 1 && h3_op_attr_int(slice, "len", 0) == 3);
  h3_op *rn = first_op(&g->body, H3_OP_RMS_NORM);
  CHECK(rn && h3_op_attr_float(rn, "eps", 0) == 1e-6);
  h3_op *c = first_op(&g->body, H3_OP_CONST);
  int64_t two[] = {2};
  CHECK(c && dims_are(&c->results[0]->type, H3_F32, 1, two) && h3_op_attr_float(c, "value", 9) == 0.0);
  CHECK(g->n_outputs == 3 && strcmp(g->output_names[2], "w") == 0);
  h3_module_free(m);
}

/* Group ranges, aliases, inner arrays, shared paths, constant member indices. */
static void test_groups(void) {
  const char *src =
      "model groups\n"
      "config c { layers = 5, first = 2, e = 4, h = 8 }\n"
      "params layers[0 .. first] as dense {\n"
      "  norm.weight : bf16[h]\n"
      "  mlp.w : bf16[h, h] init uniform(bound = 0.25)\n"
      "}\n"
      "params layers[first .. layers] as sparse {\n"
      "  norm.weight : bf16[h]\n"
      "  mlp.experts[e].w : bf16[2 * h, h] init uniform(fan_in = 16)\n"
      "}\n"
      "param dspark.layers.0.w : f32[h] init const(value = -1.5)\n"
      "param rope.inv_freq : f32[h] init rope_inv_freq(theta = 10000.0, dims = 16)\n"
      "fn use(x: bf16[T, h], p: sparse) -> bf16[T, h] {\n"
      "  return rms_norm(x, p.norm.weight, eps = 1e-5)\n"
      "}\n"
      "graph g(x: bf16[3, h]) -> (y: bf16[3, h], w: bf16[4, 16, 8], v: bf16[16, 8]) {\n"
      "  y = rms_norm(x, dense[1].norm.weight, eps = 1e-5)\n"
      "  repeat j in layers - first { y = use(y, sparse[j]) }\n"
      "  return y, sparse[0].mlp.experts.w, sparse[2].mlp.experts[3].w\n"
      "}\n";
  h3_module *m = compile(src);
  CHECK(m);
  if (!m) return;
  h3_param *norm = h3_module_param(m, "layers.{}.norm.weight");
  int64_t n5[] = {5, 8};
  CHECK(norm && dims_are(&norm->type, H3_BF16, 2, n5) && norm->group_base == 0);
  h3_param *ex = h3_module_param(m, "layers.{}.mlp.experts.{e}.w");
  int64_t e[] = {3, 4, 16, 8};
  CHECK(ex && dims_are(&ex->type, H3_BF16, 4, e) && ex->group_dims == 2 && ex->group_base == 2);
  CHECK(ex && ex->init == H3_INIT_UNIFORM && ex->init_scale == 0.25);
  CHECK(ex && strcmp(ex->group, "sparse") == 0);
  h3_param *mw = h3_module_param(m, "layers.{}.mlp.w");
  CHECK(mw && mw->type.dims[0] == 2 && mw->init_scale == 0.25);
  h3_param *ds = h3_module_param(m, "dspark.layers.0.w");
  CHECK(ds && ds->init == H3_INIT_CONST && ds->init_value == -1.5 && !ds->group);
  h3_param *rf = h3_module_param(m, "rope.inv_freq");
  CHECK(rf && rf->init == H3_INIT_ROPE_INV_FREQ && rf->init_value == 10000.0 && rf->init_scale == 16);
  h3_graph *g = h3_module_graph(m, "g");
  h3_op *loop = first_op(&g->body, H3_OP_LOOP);
  CHECK(loop && h3_op_attr_int(loop, "count", 0) == 3);
  /* sparse[j].norm.weight reads row j + 2 of the shared stacked parameter */
  h3_op *ix = loop ? first_op(&loop->regions[0], H3_OP_INDEX) : NULL;
  CHECK(ix && ix->operands[0] == norm->value && h3_op_attr_int(ix, "offset", 0) == 2);
  h3_module_free(m);
}

/* A program calling graphs in a `for` loop. */
static void test_program(void) {
  const char *src =
      "model prog\n"
      "config c { steps = 7, n = 4 }\n"
      "param w : f32[n, n]\n"
      "graph step(x: f32[2, n], t: f32[]) -> (v: f32[2, n], u: f32[2, n]) {\n"
      "  v = linear(x, w) * t\n"
      "  return v, -v\n"
      "}\n"
      "program sample(x0: f32[2, n]) -> (x: f32[2, n]) {\n"
      "  x = x0\n"
      "  sig = sigma_schedule(n = steps + 1, shift = 3)\n"
      "  denoise: for k in steps {\n"
      "    r = step(x, sig[k])\n"
      "    x = x + (sig[k + 1] - sig[k]) * r.v\n"
      "    a, b = step(x, sig[k])\n"
      "  }\n"
      "  return x\n"
      "}\n";
  h3_module *m = compile(src);
  CHECK(m);
  if (!m) return;
  h3_graph *p = h3_module_graph(m, "sample");
  CHECK(p && p->kind == H3_GRAPH_PROGRAM);
  h3_op *loop = p ? first_op(&p->body, H3_OP_LOOP) : NULL;
  CHECK(loop && h3_op_attr_int(loop, "count", 0) == 7 && loop->n_operands == 1);
  CHECK(loop && strcmp(h3_op_attr_string(loop, "label", ""), "denoise") == 0);
  h3_op *call = p ? first_op(&p->body, H3_OP_CALL) : NULL;
  CHECK(call && strcmp(h3_op_attr_string(call, "callee", ""), "step") == 0 && call->n_results == 2);
  CHECK(loop && count_ops(&loop->regions[0], H3_OP_CALL, 0) == 2);
  h3_op *ss = p ? first_op(&p->body, H3_OP_SIGMA_SCHEDULE) : NULL;
  CHECK(ss && h3_op_attr_float(ss, "shift", 0) == 3.0); /* integer converted to float */
  h3_module_free(m);
}

/* --set overrides a key before lets are evaluated; h3_config_override_parse. */
static void test_overrides(void) {
  h3_diag d;
  h3_diag_init(&d);
  h3_config_override ov[2];
  CHECK(h3_config_override_parse("dim=24", &ov[0], &d) == H3_OK && ov[0].value == 24);
  CHECK(h3_config_override_parse("layers=-3", &ov[1], &d) == H3_OK && ov[1].value == -3);
  CHECK(d.errors == 0);
  CHECK(h3_config_override_parse("dim=x", &ov[1], &d) == H3_ERR);
  CHECK(h3_config_override_parse("=4", &ov[1], &d) == H3_ERR);
  CHECK(h3_config_override_parse("dim", &ov[1], &d) == H3_ERR);
  CHECK(h3_config_override_parse("dim=99999999999999999999", &ov[1], &d) == H3_ERR);
  CHECK(d.errors == 4);
  h3_diag_free(&d);
  const char *src =
      "model o\n"
      "config a { dim = 8, layers = 2 }\n"
      "config b { dim = 16, layers = 3 }\n"
      "let wide = dim * 4\n"
      "param w : bf16[wide, dim]\n";
  h3_frontend_options o = {.config = "b", .n_overrides = 1, .overrides = ov};
  h3_module *m = compile_opt(src, &o);
  CHECK(m && h3_module_config(m, "dim", 0) == 24 && h3_module_config(m, "layers", 0) == 3);
  h3_param *p = m ? h3_module_param(m, "w") : NULL;
  int64_t want[] = {96, 24};
  CHECK(p && dims_are(&p->type, H3_BF16, 2, want));
  h3_module_free(m);
}

/* Functions: int arguments, shape variables, several results, nested calls. */
static void test_functions(void) {
  const char *src =
      "model f\n"
      "config c { d = 4 }\n"
      "fn heads(T: int, n: int, x: bf16[T, n * d]) -> bf16[T, n, d] {\n"
      "  return reshape(x, shape = [T, n, d])\n"
      "}\n"
      "fn two(x: bf16[R, C]) -> (bf16[R, C], f32[R, C]) {\n"
      "  y = heads(R, C / d, x)\n"
      "  return reshape(y, shape = [R, C]), f32(x)\n"
      "}\n"
      "graph g(x: bf16[3, 8]) -> (a: bf16[3, 8], b: f32[3, 8]) {\n"
      "  a, b = two(x)\n"
      "  return a, b\n"
      "}\n";
  h3_module *m = compile(src);
  CHECK(m);
  if (!m) return;
  h3_graph *g = h3_module_graph(m, "g");
  CHECK(count_ops(&g->body, H3_OP_RESHAPE, 1) == 2 && count_ops(&g->body, H3_OP_CAST, 1) == 1);
  h3_op *r = first_op(&g->body, H3_OP_RESHAPE);
  int64_t want[] = {3, 2, 4};
  CHECK(r && dims_are(&r->results[0]->type, H3_BF16, 3, want));
  h3_module_free(m);
}

/* Every op keeps the span of its source expression. */
static void test_spans(void) {
  const char *src =
      "model s\n"
      "config c { d = 4 }\n"
      "graph g(x: f32[d]) -> (y: f32[d]) {\n"
      "  y = exp(x)\n"
      "  return y\n"
      "}\n";
  h3_module *m = compile(src);
  CHECK(m);
  if (!m) return;
  h3_op *e = first_op(&h3_module_graph(m, "g")->body, H3_OP_EXP);
  CHECK(e && e->span.line == 4 && e->span.col == 7 && e->span.end_col == 13);
  CHECK(e && e->span.file && strcmp(e->span.file, "t.g") == 0);
  h3_module_free(m);
}

/* h3_frontend_load of a missing file: one error naming it, no crash. */
static void test_load_missing(void) {
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = h3_frontend_load("/nonexistent/dir/model.g", NULL, &d);
  CHECK(!m && d.errors == 1 && d.head && strstr(d.head->message, "cannot read /nonexistent/dir/model.g"));
  h3_diag_free(&d);
}

/* A field of the group itself is the whole stacked parameter. */
static void test_whole_group(void) {
  const char *src =
      "model w\n"
      "config c { layers = 3, d = 4 }\n"
      "params blocks[layers] { norm.weight : f32[d] }\n"
      "graph g() -> (y: f32[layers, d]) {\n"
      "  return blocks.norm.weight * 1.0\n"
      "}\n";
  h3_module *m = compile(src);
  CHECK(m);
  if (!m) return;
  h3_op *mul = first_op(&h3_module_graph(m, "g")->body, H3_OP_MUL);
  CHECK(mul && mul->operands[0] == h3_module_param(m, "blocks.{}.norm.weight")->value);
  h3_module_free(m);
}

int main(void) {
  test_load_missing();
  test_whole_group();
  test_repeat_stack();
  test_loop_carry_and_exprs();
  test_groups();
  test_program();
  test_overrides();
  test_functions();
  test_spans();
  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
