/* test_roundtrip.c: the IR text form.
 * - hand-written canonical files (tests/ir/data/, .ir files: loops, fused regions, calls and
 *   programs, multi-result ops, offsets, quoted names, every attribute kind) parse and
 *   print back to exactly their text;
 * - random modules built with the builder print, parse and print to the same text, and
 *   the parsed module equals the original structurally (compared op by op here);
 * - non-canonical input (comments, escapes, spacing) prints canonically;
 * - syntax errors are diagnostics with file:line:col, never crashes;
 * - a module of 60k ops prints, parses and verifies quickly (no quadratic lookups).
 */
#include "check.h"
#include "h3/op_registry.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

static char *print_module(const h3_module *m) {
  h3_strbuf b;
  h3_strbuf_init(&b);
  h3_module_print(&b, m);
  CHECK(!b.oom);
  return b.data;
}

static h3_module *parse_text(const char *file, const char *text, h3_diag *d) {
  h3_diag_add_source(d, file, text, strlen(text));
  h3_module *m = h3_module_parse(file, text, strlen(text), d);
  if (!m) h3_diag_print(d, stderr);
  return m;
}

static void test_files(void) {
  static const char *files[] = {"step.ir", "fused.ir", "names.ir"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char path[512];
    snprintf(path, sizeof path, "%s/tests/ir/data/%s", H3_SOURCE_DIR, files[i]);
    h3_diag d;
    h3_diag_init(&d);
    size_t len;
    char *text = h3_read_file(path, &len, &d);
    CHECK(text != NULL);
    h3_module *m = text ? parse_text(path, text, &d) : NULL;
    CHECK(m != NULL);
    if (m) {
      char *out = print_module(m);
      CHECK_STR(out, text);
      free(out);
    }
    h3_module_free(m);
    free(text);
    h3_diag_free(&d);
  }
}

/* ---- structural equality ------------------------------------------------------------ */
typedef struct {
  int n;
  const h3_value **a, **b; /* a[i] in the original corresponds to b[i] in the copy */
} vmap;

static bool same_value(vmap *vm, const h3_value *a, const h3_value *b) {
  if (a->kind == H3_VALUE_PARAM || b->kind == H3_VALUE_PARAM)
    return a->kind == b->kind && strcmp(a->param->name, b->param->name) == 0;
  for (int i = 0; i < vm->n; i++)
    if (vm->a[i] == a) return vm->b[i] == b;
  return false;
}

static bool define_pair(vmap *vm, const h3_value *a, const h3_value *b) {
  vm->a[vm->n] = a;
  vm->b[vm->n++] = b;
  return h3_type_equal(&a->type, &b->type) && a->offset == b->offset;
}

static bool same_bits(double x, double y) { return memcmp(&x, &y, sizeof x) == 0; }

static bool same_attrs(int n, const h3_attr *a, int m, const h3_attr *b) {
  if (n != m) return false;
  for (int i = 0; i < n; i++) {
    if (strcmp(a[i].name, b[i].name) || a[i].kind != b[i].kind) return false;
    switch (a[i].kind) {
    case H3_ATTR_INT:
    case H3_ATTR_DTYPE:
    case H3_ATTR_TIER:
      if (a[i].i != b[i].i) return false;
      break;
    case H3_ATTR_FLOAT:
      if (!same_bits(a[i].f, b[i].f) && !(isnan(a[i].f) && isnan(b[i].f))) return false;
      break;
    case H3_ATTR_STRING:
      if (strcmp(a[i].s, b[i].s)) return false;
      break;
    case H3_ATTR_INTS:
    case H3_ATTR_FLOATS:
      if (a[i].n != b[i].n) return false;
      for (int k = 0; k < a[i].n; k++)
        if (a[i].kind == H3_ATTR_INTS ? a[i].ints[k] != b[i].ints[k] : !same_bits(a[i].floats[k], b[i].floats[k]))
          return false;
    }
  }
  return true;
}

static bool same_region(vmap *vm, const h3_region *a, const h3_region *b) {
  if (a->n_args != b->n_args) return false;
  for (int i = 0; i < a->n_args; i++)
    if (!define_pair(vm, a->args[i], b->args[i])) return false;
  const h3_op *x = a->first, *y = b->first;
  for (; x && y; x = x->next, y = y->next) {
    if (x->code != y->code || x->n_operands != y->n_operands || x->n_results != y->n_results ||
        x->n_regions != y->n_regions || !same_attrs(x->n_attrs, x->attrs, y->n_attrs, y->attrs))
      return false;
    for (int i = 0; i < x->n_operands; i++)
      if (!same_value(vm, x->operands[i], y->operands[i])) return false;
    for (int i = 0; i < x->n_regions; i++)
      if (!same_region(vm, &x->regions[i], &y->regions[i])) return false;
    for (int i = 0; i < x->n_results; i++)
      if (!define_pair(vm, x->results[i], y->results[i]) || x->results[i]->uses != y->results[i]->uses) return false;
  }
  return !x && !y;
}

static bool same_module(const h3_module *a, const h3_module *b) {
  if (strcmp(a->model, b->model) || strcmp(a->config, b->config) || a->n_config != b->n_config ||
      a->n_params != b->n_params || a->n_graphs != b->n_graphs)
    return false;
  for (int i = 0; i < a->n_config; i++)
    if (strcmp(a->config_entries[i].key, b->config_entries[i].key) || a->config_entries[i].value != b->config_entries[i].value)
      return false;
  for (int i = 0; i < a->n_params; i++) {
    const h3_param *p = a->params[i], *q = b->params[i];
    if (strcmp(p->name, q->name) || !h3_type_equal(&p->type, &q->type) || (p->group == NULL) != (q->group == NULL) ||
        (p->group && strcmp(p->group, q->group)) || p->group_dims != q->group_dims || p->group_base != q->group_base ||
        p->init != q->init || !same_bits(p->init_scale, q->init_scale) || !same_bits(p->init_value, q->init_value))
      return false;
  }
  bool ok = true;
  for (int g = 0; g < a->n_graphs && ok; g++) {
    const h3_graph *x = a->graphs[g], *y = b->graphs[g];
    vmap vm = {0, calloc((size_t)a->next_value_id, sizeof(void *)), calloc((size_t)a->next_value_id, sizeof(void *))};
    ok = !strcmp(x->name, y->name) && x->kind == y->kind && x->n_inputs == y->n_inputs && x->n_outputs == y->n_outputs &&
         same_attrs(x->n_attrs, x->attrs, y->n_attrs, y->attrs);
    for (int i = 0; ok && i < x->n_outputs; i++) ok = !strcmp(x->output_names[i], y->output_names[i]);
    for (int i = 0; ok && i < x->n_inputs; i++) ok = define_pair(&vm, x->inputs[i], y->inputs[i]);
    ok = ok && same_region(&vm, &x->body, &y->body);
    free(vm.a);
    free(vm.b);
  }
  return ok;
}

/* ---- random modules ------------------------------------------------------------------ */
static const char *const NAMES[] = {"x", "h", "x.1", NULL, "3", "a b", "q\"", NULL};

static const char *rname(void) { return NAMES[check_range(0, 7)]; }

static double rdouble(void) {
  switch (check_range(0, 5)) {
  case 0: return 0.0;
  case 1: return (double)check_range(-5, 5);
  case 2: return INFINITY;
  default: {
    uint64_t bits = check_rand();
    double v;
    memcpy(&v, &bits, sizeof v);
    return isnan(v) ? 0.5 : v;
  }
  }
}

typedef struct {
  h3_module *m;
  h3_value *pool[4096]; /* values in scope, all f32[4, 3] */
  int n;
} gen;

static h3_value *pick(gen *g) { return g->pool[check_range(0, g->n - 1)]; }

static void push(gen *g, h3_value *v) {
  if (g->n < 4096) g->pool[g->n++] = v;
}

static void random_ops(gen *g, h3_region *r, int depth, int n_ops) {
  h3_builder b = {g->m, r, NULL, {0}};
  h3_diag d;
  h3_diag_init(&d);
  for (int k = 0; k < n_ops; k++) {
    int what = (int)check_range(0, depth < 2 ? 9 : 6);
    h3_op *op = NULL;
    if (what <= 3) {
      static const h3_opcode bin[] = {H3_OP_ADD, H3_OP_MUL, H3_OP_SUB, H3_OP_MAX};
      h3_value *ops[2] = {pick(g), pick(g)};
      op = h3_build_op(&b, bin[what], 2, ops, 0, NULL, 0, &d);
    } else if (what <= 5) {
      h3_value *x = pick(g);
      h3_attr a[2] = {h3_attr_float(g->m, "lo", -fabs(rdouble())), h3_attr_float(g->m, "hi", INFINITY)};
      op = h3_build_op(&b, what == 4 ? H3_OP_SILU : H3_OP_CLAMP, 1, &x, what == 4 ? 0 : 2, a, 0, &d);
    } else if (what == 6) {
      h3_value *x = pick(g);
      int64_t shape[2] = {2, 6};
      h3_attr a = h3_attr_ints(g->m, "shape", 2, shape);
      op = h3_build_op(&b, H3_OP_RESHAPE, 1, &x, 1, &a, 0, &d);
      if (op) {
        op->results[0]->name = rname();
        h3_attr a2 = h3_attr_ints(g->m, "shape", 2, (int64_t[]){4, 3}); /* back to [4, 3] */
        op = h3_build_op(&b, H3_OP_RESHAPE, 1, op->results, 1, &a2, 0, &d);
      }
    } else if (what <= 8) { /* loop or fused over 1..2 values */
      int n = (int)check_range(1, 2);
      h3_value *ins[2] = {pick(g), pick(g)};
      h3_type ts[2] = {ins[0]->type, ins[1]->type};
      bool loop = what == 7;
      h3_attr a[2];
      int na = 2;
      if (loop) {
        a[0] = h3_attr_int(g->m, "count", check_range(0, 50));
        a[1] = h3_attr_string(g->m, "label", "trunk \"\\\n");
        na = (int)check_range(1, 2);
      } else {
        a[0] = h3_attr_string(g->m, "kernel", "k");
        a[1] = h3_attr_tier(g->m, "tier", H3_TIER_EXACT);
      }
      op = h3_build_op_typed(&b, loop ? H3_OP_LOOP : H3_OP_FUSED, n, ins, na, a, n, ts, 1);
      h3_region *body = &op->regions[0];
      int saved = g->n;
      if (loop) h3_region_add_arg(g->m, body, h3_type_make(H3_I32, 0, NULL), "i", (h3_span){0});
      for (int i = 0; i < n; i++) push(g, h3_region_add_arg(g->m, body, ts[i], rname(), (h3_span){0}));
      random_ops(g, body, depth + 1, (int)check_range(0, 6));
      h3_value *ys[2] = {pick(g), pick(g)}; /* any value in scope: all are f32[4, 3] */
      g->n = saved; /* the body's values go out of scope */
      h3_builder yb = {g->m, body, NULL, {0}};
      h3_build_op(&yb, H3_OP_YIELD, n, ys, 0, NULL, 0, &d);
    } else {
      h3_value *pos = h3_graph_add_input(g->m, g->m->graphs[0], rname(), h3_type_make(H3_I32, 1, (int64_t[]){4}), (h3_span){0});
      h3_attr a[2] = {h3_attr_float(g->m, "theta", 1e4), h3_attr_int(g->m, "dims", 6)};
      op = h3_build_op(&b, H3_OP_ROPE_POS_TABLE, 1, &pos, 2, a, 0, &d);
    }
    CHECK(op != NULL);
    if (!op) break;
    for (int i = 0; i < op->n_results; i++) {
      op->results[i]->name = rname();
      if (check_range(0, 3) == 0) op->results[i]->offset = check_range(0, 1 << 20);
      push(g, op->results[i]);
    }
  }
  h3_diag_print(&d, stderr);
  h3_diag_free(&d);
}

static h3_module *random_module(void) {
  h3_module *m = h3_module_new(check_range(0, 1) ? "minimax_h3" : "odd name", "tiny");
  h3_module_set_config(m, "layers", check_range(1, 60));
  h3_module_set_config(m, "dim", check_range(-5, 5000));
  for (int i = 0; i < 5; i++) {
    char name[64];
    snprintf(name, sizeof name, i % 2 ? "blocks.{}.w%d" : "p%d.weight", i);
    h3_param *p = h3_module_add_param(m, name, h3_type_make(H3_F32, 2, (int64_t[]){4, 3}), (h3_span){0});
    p->init = (h3_init_kind)check_range(0, 4);
    p->init_scale = rdouble();
    p->init_value = check_range(0, 1) ? rdouble() : 0.0;
    p->group = i % 2 ? "blocks" : NULL;
    p->group_dims = i % 2;
    p->group_base = check_range(0, 3);
  }
  h3_graph *gr = h3_module_add_graph(m, "step", H3_GRAPH_FUNCTION, (h3_span){0});
  gen g = {.m = m};
  for (int i = 0; i < 3; i++) push(&g, h3_graph_add_input(m, gr, rname(), h3_type_make(H3_F32, 2, (int64_t[]){4, 3}), (h3_span){0}));
  push(&g, m->params[0]->value);
  random_ops(&g, &gr->body, 0, 40);
  h3_attr ga[4] = {h3_attr_floats(m, "fl", 3, (double[]){rdouble(), -0.0, 1e-300}), h3_attr_floats(m, "empty", 0, NULL),
                   h3_attr_ints(m, "none", 0, NULL), h3_attr_dtype(m, "dt", H3_U8)};
  for (int i = 0; i < 4; i++) h3_graph_set_attr(m, gr, ga[i]);
  h3_value *outs[2] = {pick(&g), pick(&g)};
  h3_builder b = {m, &gr->body, NULL, {0}};
  h3_diag d;
  h3_diag_init(&d);
  h3_build_op(&b, H3_OP_RETURN, 2, outs, 0, NULL, 0, &d);
  h3_graph_add_output(m, gr, "v_video");
  h3_graph_add_output(m, gr, "odd out");
  CHECK(h3_verify_module(m, &d) == H3_OK);
  h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  return m;
}

static void test_random_modules(void) {
  for (int it = 0; it < 60; it++) {
    h3_module *m = random_module();
    char *t1 = print_module(m);
    h3_diag d;
    h3_diag_init(&d);
    h3_module *m2 = parse_text("random.ir", t1, &d);
    CHECK(m2 != NULL);
    if (m2) {
      CHECK(same_module(m, m2));
      char *t2 = print_module(m2);
      CHECK_STR(t2, t1);
      free(t2);
    }
    h3_module_free(m2);
    h3_diag_free(&d);
    free(t1);
    h3_module_free(m);
  }
}

static void test_noncanonical(void) {
  const char *in = "# a comment\nmodule   @m config \"c\"{graph @g(%\"x\":f32[ 2 ]at 8)->(o:f32[2]){\n"
                   "%\"y\"=neg(%x){dtype=f32}:f32[2] # trailing\n return %y}}";
  const char *want = "module @m config \"c\" {\n  graph @g(%x: f32[2] at 8) -> (o: f32[2]) {\n"
                     "    %y = neg(%x) {dtype = f32} : f32[2]\n    return %y\n  }\n}\n";
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = parse_text("nc.ir", in, &d);
  CHECK(m != NULL);
  if (m) {
    char *t = print_module(m);
    CHECK_STR(t, want);
    free(t);
  }
  h3_module_free(m);
  h3_diag_free(&d);
}

static char *parse_error(const char *text) {
  h3_diag d;
  h3_diag_init(&d);
  h3_diag_add_source(&d, "bad.ir", text, strlen(text));
  h3_module *m = h3_module_parse("bad.ir", text, strlen(text), &d);
  CHECK(m == NULL && d.errors > 0);
  h3_module_free(m);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  h3_diag_print(&d, f);
  fclose(f);
  h3_diag_free(&d);
  return buf;
}

/* msg: the error and its source lines; every IR-text error ends with the same hint */
#define IR_TEXT_HINT "hint: docs/ir-text.md describes the IR text form\n"
#define EXPECT_PARSE_ERR(text, msg)   \
  do {                                \
    char *t_ = parse_error(text);     \
    CHECK_STR(t_, msg IR_TEXT_HINT);  \
    free(t_);                         \
  } while (0)

static void test_errors(void) {
  const char *head = "module @m config \"c\" {\n  graph @g(%x: f32[2]) -> (o) {\n";
  char buf[512];
#define BODY(s) (snprintf(buf, sizeof buf, "%s%s", head, s), buf)
  EXPECT_PARSE_ERR(BODY("    %y = nope(%x) : f32[2]\n"),
                   "bad.ir:3:10: error: unknown op 'nope'\n    3 |     %y = nope(%x) : f32[2]\n      |          ^~~~\n");
  EXPECT_PARSE_ERR(BODY("    %y = neg(%z) : f32[2]\n"),
                   "bad.ir:3:14: error: unknown value %z (values must be defined before their use)\n"
                   "    3 |     %y = neg(%z) : f32[2]\n      |              ^~\n");
  EXPECT_PARSE_ERR(BODY("    %y = neg(%x) : f33[2]\n"),
                   "bad.ir:3:20: error: expected a type like bf16[8, 64], got 'f33'\n"
                   "    3 |     %y = neg(%x) : f33[2]\n      |                    ^~~\n");
  EXPECT_PARSE_ERR(BODY("    %y = neg(%x)\n    return %y\n  }\n}\n"),
                   "bad.ir:4:5: error: expected ':', got 'return'\n    4 |     return %y\n      |     ^~~~~~\n");
  EXPECT_PARSE_ERR(BODY("    %x = neg(%x) : f32[2]\n"),
                   "bad.ir:3:5: error: value %x is defined twice in this graph\n"
                   "    3 |     %x = neg(%x) : f32[2]\n      |     ^~\n");
  EXPECT_PARSE_ERR(BODY("    %y = neg(%x) {s = \"abc} : f32[2]\n"),
                   "bad.ir:3:23: error: unterminated string\n"
                   "    3 |     %y = neg(%x) {s = \"abc} : f32[2]\n      |                       ^~~~~~~~~~~~~~\n");
  EXPECT_PARSE_ERR(BODY("    %y = iota() {n = 99999999999999999999} : i32[2]\n"),
                   "bad.ir:3:22: error: integer does not fit in 64 bits\n"
                   "    3 |     %y = iota() {n = 99999999999999999999} : i32[2]\n      |                      ^~~~~~~~~~~~~~~~~~~~\n");
  EXPECT_PARSE_ERR(BODY("    %y = neg(%x) : f32[2, 2, 2, 2, 2, 2, 2]\n"),
                   "bad.ir:3:42: error: a type has at most 6 dimensions\n"
                   "    3 |     %y = neg(%x) : f32[2, 2, 2, 2, 2, 2, 2]\n      |                                          ^\n");
  EXPECT_PARSE_ERR("module @m config \"c\" {\n  param @p : f32[2]\n  param @p : f32[2]\n}\n",
                   "bad.ir:3:9: error: parameter @p is declared twice\n    3 |   param @p : f32[2]\n      |         ^~\n");
  EXPECT_PARSE_ERR("", "bad.ir:1:1: error: expected 'module', got end of input\n    1 | \n      | ^\n");
  EXPECT_PARSE_ERR("module @m config \"c\" {\n}\nextra", "bad.ir:3:1: error: expected end of input after the module, got 'extra'\n    3 | extra\n      | ^~~~~\n");
  /* nesting deeper than the limit is an error, not a stack overflow */
  h3_strbuf deep;
  h3_strbuf_init(&deep);
  h3_strbuf_append(&deep, head);
  for (int i = 0; i < 200; i++) h3_strbuf_printf(&deep, "loop() {count = 1} {\n^(%%i%d: i32[]):\n", i);
  char *t = parse_error(deep.data);
  CHECK_HAS(t, "error: regions are nested more than 64 deep");
  free(t);
  h3_strbuf_free(&deep);
#undef BODY
}

/* 60k ops (a long chain plus a loop body of 10k) print, parse and verify in linear time. */
static void test_large(void) {
  h3_module *m = h3_module_new("big", "full");
  h3_graph *g = h3_module_add_graph(m, "step", H3_GRAPH_FUNCTION, (h3_span){0});
  h3_value *v = h3_graph_add_input(m, g, "x", h3_type_make(H3_BF16, 2, (int64_t[]){8, 64}), (h3_span){0});
  h3_builder b = {m, &g->body, NULL, {0}};
  h3_diag d;
  h3_diag_init(&d);
  for (int i = 0; i < 50000; i++) {
    h3_value *ops[2] = {v, v};
    h3_op *op = h3_build_op(&b, i % 2 ? H3_OP_ADD : H3_OP_MUL, 2, ops, 0, NULL, 0, &d);
    op->results[0]->name = i % 3 ? "x" : NULL; /* many colliding names */
    v = op->results[0];
  }
  h3_op *loop = h3_build_op_typed(&b, H3_OP_LOOP, 1, &v, 1, (h3_attr[]){h3_attr_int(m, "count", 50)}, 1, &v->type, 1);
  h3_region *body = &loop->regions[0];
  h3_region_add_arg(m, body, h3_type_make(H3_I32, 0, NULL), "i", (h3_span){0});
  h3_value *c = h3_region_add_arg(m, body, v->type, "x", (h3_span){0});
  h3_builder bb = {m, body, NULL, {0}};
  for (int i = 0; i < 10000; i++) c = h3_build_op(&bb, H3_OP_SILU, 1, &c, 0, NULL, 0, &d)->results[0];
  h3_build_op(&bb, H3_OP_YIELD, 1, &c, 0, NULL, 0, &d);
  h3_build_op(&b, H3_OP_RETURN, 1, loop->results, 0, NULL, 0, &d);
  h3_graph_add_output(m, g, "out");
  clock_t t0 = clock();
  char *text = print_module(m);
  h3_module *m2 = h3_module_parse("big.ir", text, strlen(text), &d);
  CHECK(m2 != NULL);
  char *text2 = m2 ? print_module(m2) : NULL;
  double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
  CHECK(text2 && strcmp(text, text2) == 0);
  printf("large module: %zu bytes of text, print+parse+verify+print in %.2f s\n", strlen(text), secs);
  CHECK(secs < 20.0);
  h3_diag_print(&d, stderr);
  free(text);
  free(text2);
  h3_module_free(m);
  h3_module_free(m2);
  h3_diag_free(&d);
}

int main(void) {
  test_files();
  test_random_modules();
  test_noncanonical();
  test_errors();
  test_large();
  return check_report("test_roundtrip");
}
