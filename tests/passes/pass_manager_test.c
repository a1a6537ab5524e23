/* pass_manager_test.c: unit tests of the pass framework: tiers, the registry, pipeline
 * resolution and its errors (unknown names with hints, empty names, tier gates,
 * `requires`), --enable-pass, --print-ir-after / --time-passes / --report output, the greedy
 * rewrite driver (a toy pattern set and a non-converging one) and the legality helpers.
 * Expected pipelines come from the registry by the rule of passes.h, never from a list
 * written here: adding a pass to the table changes nothing in this test.
 */
#include "h3/op_registry.h"
#include "h3/rewrite.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(c, ...)                                                                              \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                         \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static const h3_span sp = {0};

/* True when some message of d contains `msg` and (if given) its hint contains `hint`. */
static bool has_diag(const h3_diag *d, h3_diag_level level, const char *msg, const char *hint) {
  for (const h3_diag_msg *m = d->head; m; m = m->next)
    if (m->level == level && strstr(m->message, msg) &&
        (!hint || (m->hint && strstr(m->hint, hint))))
      return true;
  return false;
}

/* ---- resolution ------------------------------------------------------------------------- */
static int resolve(h3_pass_options o, const h3_pass **list, h3_diag *d) {
  int n = -1;
  if (h3_pass_pipeline_resolve(&o, list, 32, &n, d) != H3_OK) return -1;
  return n;
}

static void expect_names(const h3_pass **list, int n, const char *const *want, int n_want,
                         const char *what) {
  CHECK(n == n_want, "%s: %d passes, expected %d", what, n, n_want);
  for (int i = 0; i < n && i < n_want; i++)
    CHECK(strcmp(list[i]->name, want[i]) == 0, "%s: pass %d is %s, expected %s", what, i,
          list[i]->name, want[i]);
}

static void test_tiers_and_registry(void) {
  for (int t = H3_TIER_EXACT; t <= H3_TIER_HIGH; t++) {
    h3_tier back;
    CHECK(h3_tier_parse(h3_tier_name((h3_tier)t), &back) && back == (h3_tier)t, "tier %d", t);
  }
  h3_tier dummy;
  CHECK(!h3_tier_parse("medium", &dummy), "unknown tier accepted");
  CHECK(h3_pass_count() >= 4, "registry has %d passes", h3_pass_count());
  for (int i = 0; i < h3_pass_count(); i++) {
    const h3_pass *p = h3_pass_at(i);
    CHECK(h3_pass_find(p->name) == p, "find(%s)", p->name);
    CHECK(p->description && p->run, "%s lacks a description or run", p->name);
    /* lowercase words joined by '-' (the file is passes/<name with '_'>.c) */
    bool ok = islower((unsigned char)p->name[0]);
    for (const char *c = p->name; *c && ok; c++)
      ok = islower((unsigned char)*c) || isdigit((unsigned char)*c) ||
           (*c == '-' && c[1] && c[1] != '-');
    CHECK(ok, "pass name '%s' is not lowercase words joined by '-'", p->name);
    for (int r = 0; r < H3_PASS_MAX_REQUIRES && p->requires[r]; r++)
      CHECK(h3_pass_find(p->requires[r]), "%s requires unknown pass %s", p->name, p->requires[r]);
  }
  CHECK(h3_pass_at(0) == h3_pass_find("verify"), "verify is the first pass of the table");
  CHECK(h3_pass_at(h3_pass_count()) == NULL && h3_pass_find("nope") == NULL, "out of range");
}

/* The default pipeline of tier t by the rule of passes.h: every pass of the table with
 * in_default_pipeline (or named in `enabled`) and min_tier <= t, in table order, then
 * verify again. Returns the count. */
static int rule_pipeline(h3_tier t, const char *enabled, const h3_pass **out) {
  int n = 0;
  for (int i = 0; i < h3_pass_count() && n < 31; i++) {
    const h3_pass *p = h3_pass_at(i);
    bool on = p->in_default_pipeline || (enabled && strcmp(enabled, p->name) == 0);
    if (on && p->min_tier <= t) out[n++] = p;
  }
  out[n++] = h3_pass_find("verify");
  return n;
}

static void expect_list(const h3_pass **list, int n, const h3_pass **want, int n_want,
                        const char *what) {
  const char *names[32];
  for (int i = 0; i < n_want; i++) names[i] = want[i]->name;
  expect_names(list, n, names, n_want, what);
}

static int position(const h3_pass **list, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcmp(list[i]->name, name) == 0) return i;
  return -1;
}

static void test_resolution(void) {
  const h3_pass *list[32], *want[32];
  h3_diag d;
  h3_pass_options o = h3_pass_options_default();
  for (int t = H3_TIER_EXACT; t <= H3_TIER_HIGH; t++) {
    h3_diag_init(&d);
    o.tier = (h3_tier)t;
    int n = resolve(o, list, &d);
    expect_list(list, n, want, rule_pipeline(o.tier, NULL, want), h3_tier_name(o.tier));
    CHECK(n > 2 && strcmp(list[0]->name, "verify") == 0 && strcmp(list[n - 1]->name, "verify") == 0,
          "%s: the pipeline starts and ends with verify", h3_tier_name(o.tier));
    /* the fusions run before the memory plan; Cache-DiT (step caching) only at high */
    CHECK(position(list, n, "dce") < position(list, n, "elementwise-fusion") &&
              position(list, n, "elementwise-fusion") < position(list, n, "memory-plan"),
          "%s: dce, elementwise-fusion, memory-plan in this order", h3_tier_name(o.tier));
    CHECK((position(list, n, "cache-dit") >= 0) == (t == H3_TIER_HIGH), "cache-dit at %s",
          h3_tier_name(o.tier));
    h3_diag_free(&d);
  }
  o = h3_pass_options_default();
  h3_diag_init(&d);
  o.passes = " dce ,memory-plan";
  static const char *const two[] = {"dce", "memory-plan"};
  expect_names(list, resolve(o, list, &d), two, 2, "--passes with blanks");
  o.passes = NULL;
  char disabled[1024] = ""; /* every pass of the default pipeline but dce and memory-plan */
  for (int i = 0, len = 0; i < h3_pass_count(); i++) {
    const char *name = h3_pass_at(i)->name;
    if (h3_pass_at(i)->in_default_pipeline && strcmp(name, "dce") && strcmp(name, "memory-plan"))
      len += snprintf(disabled + len, sizeof disabled - (size_t)len, "%s%s", len ? "," : "", name);
  }
  o.disabled = disabled;
  expect_names(list, resolve(o, list, &d), two, 2, "--disable-pass");
  CHECK(d.errors == 0, "no errors expected so far");
  h3_diag_free(&d);

  h3_diag_init(&d);
  o = h3_pass_options_default();
  o.passes = "dcee,fusion,xyzzy";
  CHECK(resolve(o, list, &d) < 0, "unknown passes accepted");
  CHECK(has_diag(&d, H3_DIAG_ERROR, "unknown pass 'dcee' in --passes", "did you mean 'dce'?"),
        "dcee hint");
  CHECK(has_diag(&d, H3_DIAG_ERROR, "unknown pass 'fusion'", "did you mean one of 'norm-modulate-fusion', ") &&
            has_diag(&d, H3_DIAG_ERROR, "unknown pass 'fusion'", ", 'elementwise-fusion'?"),
        "fusion hint: every pass whose name holds it");
  CHECK(has_diag(&d, H3_DIAG_ERROR, "unknown pass 'xyzzy'", "h3c passes"), "xyzzy hint");
  CHECK(d.errors == 3, "3 errors expected, got %d", d.errors);
  h3_diag_free(&d);

  h3_diag_init(&d);
  o = h3_pass_options_default();
  o.disabled = "memory-plam";
  o.print_ir_after = "vrify";
  CHECK(resolve(o, list, &d) < 0, "unknown disabled pass accepted");
  CHECK(has_diag(&d, H3_DIAG_ERROR, "'memory-plam' in --disable-pass", "'memory-plan'"), "x");
  CHECK(has_diag(&d, H3_DIAG_ERROR, "'vrify' in --print-ir-after", "'verify'"), "x");
  h3_diag_free(&d);

  h3_diag_init(&d);
  o = h3_pass_options_default();
  o.passes = "dce,,verify";
  CHECK(resolve(o, list, &d) < 0, "empty name accepted");
  CHECK(has_diag(&d, H3_DIAG_ERROR, "empty pass name in --passes", NULL), "empty name");
  h3_diag_free(&d);

  h3_diag_init(&d);
  o = h3_pass_options_default();
  o.passes = "dce";
  o.print_ir_after = "memory-plan";
  CHECK(resolve(o, list, &d) == 1, "print of a pass not run is only a warning");
  CHECK(has_diag(&d, H3_DIAG_WARNING, "'memory-plan', which does not run", NULL), "warning");
  h3_diag_free(&d);
}

/* --enable-pass: an opt-in pass joins the default pipeline at its table place; unknown
 * names, tier gates and missing requirements are errors naming the flag. */
static void test_enable(void) {
  const h3_pass *list[32], *want[32], *opt_in = NULL, *needy = NULL, *gated = NULL;
  for (int i = 0; i < h3_pass_count(); i++) {
    const h3_pass *p = h3_pass_at(i);
    if (p->in_default_pipeline) {
      if (!gated && p->min_tier > H3_TIER_EXACT) gated = p;
    } else if (p->min_tier == H3_TIER_EXACT) {
      if (!opt_in && !p->requires[0]) opt_in = p;
      if (!needy && p->requires[0] && !h3_pass_find(p->requires[0])->in_default_pipeline) needy = p;
    }
  }
  CHECK(opt_in && needy && gated, "the registry lacks an opt-in, a requiring or a gated pass");
  h3_diag d;
  h3_pass_options o = h3_pass_options_default();
  if (opt_in) {
    h3_diag_init(&d);
    o.enable = opt_in->name;
    expect_list(list, resolve(o, list, &d), want, rule_pipeline(o.tier, opt_in->name, want),
                "--enable-pass");
    CHECK(d.errors == 0 && d.warnings == 0, "--enable-pass %s: no message expected", opt_in->name);
    o.passes = "dce"; /* --passes runs exactly its list */
    CHECK(resolve(o, list, &d) == 1 && list[0] == h3_pass_find("dce"), "enable with --passes");
    o.passes = NULL;
    h3_diag_free(&d);
  }
  h3_diag_init(&d);
  o.enable = "dcee";
  CHECK(resolve(o, list, &d) < 0, "unknown enabled pass accepted");
  CHECK(has_diag(&d, H3_DIAG_ERROR, "unknown pass 'dcee' in --enable-pass", "did you mean 'dce'?"),
        "dcee hint");
  h3_diag_free(&d);
  h3_diag_init(&d);
  o.enable = "dce";
  CHECK(resolve(o, list, &d) > 0, "enabling a default pass is only a warning");
  CHECK(has_diag(&d, H3_DIAG_WARNING, "'dce', which the default pipeline runs already", NULL),
        "warning for a default pass");
  h3_diag_free(&d);
  if (gated) {
    h3_diag_init(&d);
    o.enable = gated->name;
    o.tier = H3_TIER_EXACT;
    CHECK(resolve(o, list, &d) < 0, "%s enabled below its tier", gated->name);
    CHECK(has_diag(&d, H3_DIAG_ERROR, "needs --quality", "from --enable-pass"), "tier gate");
    o.tier = h3_pass_options_default().tier;
    h3_diag_free(&d);
  }
  if (needy) {
    char hint[128];
    snprintf(hint, sizeof hint, "add --enable-pass %s", needy->requires[0]);
    h3_diag_init(&d);
    o.enable = needy->name;
    CHECK(resolve(o, list, &d) < 0, "%s enabled without %s", needy->name, needy->requires[0]);
    CHECK(has_diag(&d, H3_DIAG_ERROR, "requires pass", hint), "requirement hint: %s", hint);
    h3_diag_free(&d);
  }
}

static h3_status no_run(h3_module *m, h3_pass_context *ctx, h3_diag *d) {
  (void)m, (void)ctx, (void)d;
  return H3_OK;
}

static void test_requires(void) {
  h3_pass a = {"int8-lowering", "a", H3_TIER_EXACT, false, {NULL}, no_run};
  h3_pass b = {"row-split", "b", H3_TIER_EXACT, false, {"int8-lowering", NULL}, no_run};
  const h3_pass *ok[] = {&a, &b}, *late[] = {&b, &a}, *missing[] = {&b};
  h3_diag d;
  h3_diag_init(&d);
  CHECK(h3_pass_list_check(ok, 2, &d) == H3_OK && d.errors == 0, "requires met");
  CHECK(h3_pass_list_check(late, 2, &d) == H3_ERR, "late requirement accepted");
  CHECK(has_diag(&d, H3_DIAG_ERROR, "pass 'row-split' requires pass 'int8-lowering'",
                 "move 'int8-lowering' before 'row-split'"),
        "late hint");
  CHECK(h3_pass_list_check(missing, 1, &d) == H3_ERR, "missing requirement accepted");
  CHECK(has_diag(&d, H3_DIAG_ERROR, "requires pass 'int8-lowering'", "add 'int8-lowering'"),
        "missing hint");
  h3_diag_free(&d);
}

/* memory-plan's offsets hold for the IR it planned: only verify may follow it. */
static void test_memory_plan_last(void) {
  const h3_pass *list[8];
  h3_pass_options o = h3_pass_options_default();
  h3_diag d;
  h3_diag_init(&d);
  o.passes = "verify,memory-plan,verify";
  CHECK(resolve(o, list, &d) == 3 && d.errors == 0, "verify after memory-plan refused");
  o.passes = "memory-plan,dce,verify";
  CHECK(resolve(o, list, &d) < 0, "dce after memory-plan accepted");
  CHECK(has_diag(&d, H3_DIAG_ERROR, "pass 'dce' runs after memory-plan", "put memory-plan last"),
        "memory-plan last: message and hint");
  h3_diag_free(&d);
}

/* ---- a small module: y = neg(neg(neg(neg(x)))) + x, plus a loop ------------------------- */
static h3_value *unary(h3_builder *b, h3_opcode code, h3_value *x) {
  h3_diag d;
  h3_diag_init(&d);
  h3_op *op = h3_build_op(b, code, 1, &x, 0, NULL, 0, &d);
  h3_diag_free(&d);
  return op ? op->results[0] : NULL;
}

typedef struct {
  h3_module *m;
  h3_graph *g;
  h3_value *x, *n4, *sum, *loop_res, *body_arg, *body_new;
  h3_op *loop;
} toy;

static toy build_toy(void) {
  toy t = {0};
  t.m = h3_module_new("toy", "test");
  t.g = h3_module_add_graph(t.m, "main", H3_GRAPH_FUNCTION, sp);
  int64_t dims[2] = {4, 8};
  t.x = h3_graph_add_input(t.m, t.g, "x", h3_type_make(H3_F32, 2, dims), sp);
  h3_builder b = {t.m, &t.g->body, NULL, sp};
  h3_value *v = t.x;
  for (int i = 0; i < 4; i++) v = unary(&b, H3_OP_NEG, v);
  t.n4 = v;
  h3_value *in[2] = {t.n4, t.x};
  h3_diag d;
  h3_diag_init(&d);
  t.sum = h3_build_op(&b, H3_OP_ADD, 2, in, 0, NULL, 0, &d)->results[0];
  h3_attr count = h3_attr_int(t.m, "count", 3);
  h3_type ty = t.x->type;
  t.loop = h3_build_op_typed(&b, H3_OP_LOOP, 1, &t.sum, 1, &count, 1, &ty, 1);
  h3_region *body = &t.loop->regions[0];
  h3_type i32 = h3_type_make(H3_I32, 0, NULL);
  h3_region_add_arg(t.m, body, i32, "i", sp);
  t.body_arg = h3_region_add_arg(t.m, body, ty, "acc", sp);
  h3_builder bb = {t.m, body, NULL, sp};
  t.body_new = unary(&bb, H3_OP_EXP, t.body_arg);
  h3_build_op_typed(&bb, H3_OP_YIELD, 1, &t.body_new, 0, NULL, 0, NULL, 0);
  t.loop_res = t.loop->results[0];
  h3_build_op_typed(&b, H3_OP_RETURN, 1, &t.loop_res, 0, NULL, 0, NULL, 0);
  h3_graph_add_output(t.m, t.g, "y");
  CHECK(h3_verify_module(t.m, &d) == H3_OK, "toy module does not verify");
  h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  return t;
}

static void test_legality(void) {
  toy t = build_toy();
  h3_op *neg1 = t.g->body.first;
  CHECK(h3_value_has_one_use(neg1->results[0]), "neg1 has one use");
  CHECK(!h3_value_has_one_use(t.x), "x has two uses");
  CHECK(h3_values_same_shape(t.x, t.sum), "same shape");
  CHECK(h3_value_is_aliased(t.loop_res) && h3_value_is_aliased(t.body_arg), "loop values");
  CHECK(h3_value_is_aliased(t.body_new), "yielded value is loop-carried");
  CHECK(h3_value_is_aliased(t.sum) == false, "a loop's carried input is not itself aliased");
  CHECK(!h3_value_is_aliased(neg1->results[0]), "plain value");
  CHECK(h3_op_is_pure(t.m, t.loop), "a loop with a pure body is pure");
  CHECK(!h3_op_is_pure(t.m, t.g->body.last), "return is not pure");
  h3_op *exp_op = t.body_new->def;
  CHECK(h3_value_dominates(t.x, exp_op) && h3_value_dominates(t.sum, exp_op), "dominance");
  CHECK(!h3_value_dominates(t.body_new, t.g->body.last), "body value outside its loop");
  CHECK(!h3_value_dominates(t.n4, neg1), "later value at an earlier op");
  h3_value *ops[2] = {t.n4, t.x};
  CHECK(h3_insertion_point_ok(t.sum->def, 2, ops), "insertion before add");
  CHECK(!h3_insertion_point_ok(neg1, 2, ops), "insertion before the first neg");
  h3_op *users[4];
  CHECK(h3_value_users(t.m, t.x, users, 4) == 2 && users[0] == neg1 && users[1] == t.sum->def,
        "users of x");
  CHECK(h3_value_users(t.m, t.body_arg, users, 4) == 1 && users[0] == exp_op, "users of acc");
  h3_region_index *ix = h3_region_index_build(t.m, &t.g->body);
  CHECK(ix != NULL, "index");
  if (ix) {
    h3_op *const *u;
    CHECK(h3_region_index_pos(ix, neg1) == 0 && h3_region_index_pos(ix, t.loop) == 5, "pos");
    CHECK(h3_region_index_pos(ix, exp_op) == -1, "nested op has no position");
    CHECK(h3_region_index_users(ix, t.sum, &u) == 1 && u[0] == t.loop, "users of sum");
    h3_region_index_free(ix);
  }
  h3_module_free(t.m);
}

/* ---- the rewrite driver ----------------------------------------------------------------- */
static bool neg_neg_match(h3_rewriter *rw, h3_op *op, void *state) {
  (void)rw, (void)state;
  h3_value *in = op->operands[0];
  return in->kind == H3_VALUE_RESULT && in->def->code == H3_OP_NEG;
}

/* neg(neg(y)) -> y; the inner neg goes when it has no other use. */
static h3_status neg_neg_rewrite(h3_rewriter *rw, h3_op *op, void *state, h3_diag *d) {
  (void)d;
  (*(int *)state)++;
  h3_op *inner = op->operands[0]->def;
  h3_value_replace_all_uses(h3_rewriter_module(rw), op->results[0], inner->operands[0]);
  h3_rewriter_erase(rw, op);
  if (inner->results[0]->uses == 0) h3_rewriter_erase(rw, inner);
  return H3_OK;
}

static bool always_match(h3_rewriter *rw, h3_op *op, void *state) {
  (void)rw, (void)op, (void)state;
  return true;
}

static h3_status nothing(h3_rewriter *rw, h3_op *op, void *state, h3_diag *d) {
  (void)rw, (void)op, (void)state, (void)d;
  return H3_OK;
}

static void test_driver(void) {
  toy t = build_toy();
  h3_pattern pats[] = {{"neg-neg", H3_OP_NEG, 1, neg_neg_match, neg_neg_rewrite}};
  int calls = 0, n = 0;
  h3_diag d;
  h3_diag_init(&d);
  CHECK(h3_rewrite_greedy(t.m, pats, 1, &calls, NULL, &n, &d) == H3_OK, "driver failed");
  CHECK(n == 2 && calls == 2, "neg^4 needs 2 rewrites, got %d", n);
  CHECK(t.sum->def->operands[0] == t.x, "add now reads x directly");
  CHECK(t.g->body.first == t.sum->def, "every neg is gone");
  CHECK(h3_verify_module(t.m, &d) == H3_OK, "IR invalid after the driver");
  h3_pattern loop_forever[] = {
      {"low", H3_OP_ADD, 1, neg_neg_match, neg_neg_rewrite},
      {"spin", H3_OP_ADD, 5, always_match, nothing},
  };
  CHECK(h3_rewrite_greedy(t.m, loop_forever, 2, NULL, NULL, &n, &d) == H3_ERR, "spin ends");
  CHECK(has_diag(&d, H3_DIAG_ERROR, "did not reach a fixpoint", NULL) &&
            has_diag(&d, H3_DIAG_ERROR, "'spin' keeps applying", NULL),
        "fixpoint error names the higher-benefit pattern");
  h3_diag_free(&d);
  h3_module_free(t.m);
}

/* ---- dumps ------------------------------------------------------------------------------ */
static void test_dumps(void) {
  toy t = build_toy();
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  h3_pass_options o = h3_pass_options_default();
  o.dump = f;
  o.time_passes = true;
  o.print_ir_after = "dce";
  h3_diag d;
  h3_diag_init(&d);
  CHECK(h3_pass_pipeline_run(t.m, &o, &d) == H3_OK, "pipeline failed");
  h3_diag_print(&d, stderr);
  fclose(f);
  CHECK(text && strstr(text, "# ---- IR after dce ----\n"), "IR dump marker");
  CHECK(text && strstr(text, "# ---- pass timing (quality lossless) ----"), "timing header");
  CHECK(text && strstr(text, "# elementwise-fusion "), "timing row");
  CHECK(text && strstr(text, "# memory-plan: graph main: arena"), "memory report");
  CHECK(text && strstr(text, "# total "), "total row");
  free(text);
  h3_diag_free(&d);
  h3_module_free(t.m);

  /* --report=memory-plan: that pass's report lines only */
  t = build_toy();
  f = open_memstream(&text, &len);
  o = h3_pass_options_default();
  o.dump = f;
  o.report = true;
  o.report_passes = "memory-plan";
  h3_diag_init(&d);
  CHECK(h3_pass_pipeline_run(t.m, &o, &d) == H3_OK, "pipeline failed");
  fclose(f);
  CHECK(text && strstr(text, "# memory-plan: graph main: arena") && !strstr(text, "# dce:"),
        "--report=memory-plan prints memory-plan's report only");
  free(text);
  o.report_passes = "memry-plan";
  CHECK(h3_pass_pipeline_run(t.m, &o, &d) == H3_ERR, "unknown --report name accepted");
  CHECK(has_diag(&d, H3_DIAG_ERROR, "'memry-plan' in --report", "'memory-plan'"), "--report hint");
  h3_diag_free(&d);
  h3_module_free(t.m);
}

int main(void) {
  test_tiers_and_registry();
  test_resolution();
  test_enable();
  test_requires();
  test_memory_plan_last();
  test_legality();
  test_driver();
  test_dumps();
  if (failures) fprintf(stderr, "%d failures\n", failures);
  return failures ? 1 : 0;
}
