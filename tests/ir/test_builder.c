/* test_builder.c: module/graph/param bookkeeping, attributes, the builder's use counts,
 * set_operand, replace_all_uses, erase (incl. nested regions), move_before, walks and
 * recounting. Use counts are checked against counts computed here from the op lists;
 * a random build/erase sequence is checked after every step.
 */
#include "check.h"
#include "h3/op_registry.h"

#include <stdlib.h>

static const h3_span S0 = {0};

static h3_type t2(h3_dtype dt, int64_t a, int64_t b) {
  int64_t d[2] = {a, b};
  return h3_type_make(dt, 2, d);
}

static h3_op *build(h3_builder *b, h3_opcode code, int n, h3_value **ops, int na, const h3_attr *attrs) {
  h3_diag d;
  h3_diag_init(&d);
  h3_op *op = h3_build_op(b, code, n, ops, na, attrs, 0, &d);
  if (!op) h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  return op;
}

/* Independent use count of v: operand slots of linked ops, walking the lists here. */
static int count_in_region(const h3_region *r, const h3_value *v) {
  int n = 0;
  for (const h3_op *op = r->first; op; op = op->next) {
    for (int i = 0; i < op->n_operands; i++) n += op->operands[i] == v;
    for (int j = 0; j < op->n_regions; j++) n += count_in_region(&op->regions[j], v);
  }
  return n;
}

static void test_module_bookkeeping(void) {
  h3_module *m = h3_module_new("minimax_h3", "tiny");
  CHECK(m && strcmp(m->model, "minimax_h3") == 0 && strcmp(m->config, "tiny") == 0);
  h3_module_set_config(m, "layers", 2);
  h3_module_set_config(m, "dim", 64);
  h3_module_set_config(m, "layers", 3);
  CHECK(m->n_config == 2 && h3_module_config(m, "layers", -1) == 3 && h3_module_config(m, "x", -1) == -1);
  CHECK(strcmp(m->config_entries[0].key, "layers") == 0);
  char name[32];
  for (int i = 0; i < 40; i++) {
    snprintf(name, sizeof name, "p%d.weight", i);
    h3_param *p = h3_module_add_param(m, name, t2(H3_BF16, i + 1, 4), S0);
    CHECK(p && p->value->kind == H3_VALUE_PARAM && p->value->param == p && p->value->offset == -1);
  }
  CHECK(m->n_params == 40 && h3_module_param(m, "p17.weight")->type.dims[0] == 18);
  CHECK(h3_module_param(m, "p40.weight") == NULL);
  for (int i = 0; i < 20; i++) {
    snprintf(name, sizeof name, "g%d", i);
    CHECK(h3_module_add_graph(m, name, i % 2 ? H3_GRAPH_PROGRAM : H3_GRAPH_FUNCTION, S0));
  }
  h3_graph *g = h3_module_graph(m, "g13");
  CHECK(g && g->kind == H3_GRAPH_PROGRAM && h3_module_graph(m, "g20") == NULL);
  for (int i = 0; i < 9; i++) {
    h3_value *v = h3_graph_add_input(m, g, i % 3 ? "x" : NULL, t2(H3_F32, 2, i + 1), S0);
    CHECK(v && v->index == i && v->graph == g && v->kind == H3_VALUE_INPUT && v->offset == -1);
    h3_graph_add_output(m, g, i % 2 ? "a" : "b");
  }
  CHECK(g->n_inputs == 9 && g->inputs[8]->type.dims[1] == 9 && g->n_outputs == 9);
  CHECK(strcmp(g->output_names[7], "a") == 0);
  h3_graph_set_attr(m, g, h3_attr_int(m, "arena_bytes", 4096));
  h3_graph_set_attr(m, g, h3_attr_int(m, "arena_bytes", 8192));
  CHECK(g->n_attrs == 1 && h3_graph_attr(g, "arena_bytes")->i == 8192 && !h3_graph_attr(g, "x"));
  /* ids are unique */
  CHECK(m->params[0]->value->id != g->inputs[0]->id && !m->oom);
  h3_module_free(m);
}

static void test_attrs(void) {
  h3_module *m = h3_module_new("m", "c");
  h3_graph *g = h3_module_add_graph(m, "g", H3_GRAPH_FUNCTION, S0);
  h3_value *x = h3_graph_add_input(m, g, "x", t2(H3_F32, 2, 3), S0);
  h3_builder b = {m, &g->body, NULL, S0};
  int64_t lo[3] = {1, 2, 3};
  double fl[2] = {0.5, -1.5};
  char sname[8] = "lo";
  h3_attr attrs[2] = {h3_attr_float(m, "lo", -1.0), h3_attr_float(m, "hi", 1.0)};
  h3_op *op = build(&b, H3_OP_CLAMP, 1, &x, 2, attrs);
  CHECK(op && op->n_attrs == 2);
  CHECK(h3_op_attr_float(op, sname, 9) == -1.0 && h3_op_attr_float(op, "zz", 9) == 9);
  h3_op_set_attr(m, op, h3_attr_float(m, "lo", -2.0)); /* replace keeps the position */
  CHECK(op->n_attrs == 2 && strcmp(op->attrs[0].name, "lo") == 0 && op->attrs[0].f == -2.0);
  for (int i = 0; i < 10; i++) {
    char n[16];
    snprintf(n, sizeof n, "extra%d", i);
    h3_op_set_attr(m, op, h3_attr_int(m, n, i));
  }
  h3_op_set_attr(m, op, h3_attr_ints(m, "ints", 3, lo));
  h3_op_set_attr(m, op, h3_attr_floats(m, "floats", 2, fl));
  h3_op_set_attr(m, op, h3_attr_string(m, "s", "text"));
  h3_op_set_attr(m, op, h3_attr_dtype(m, "dt", H3_I64));
  CHECK(op->n_attrs == 16 && h3_op_attr_int(op, "extra7", -1) == 7);
  CHECK(h3_op_attr_float(op, "extra7", -1) == 7.0); /* an int reads as a float */
  CHECK(h3_op_attr(op, "ints")->ints[2] == 3 && h3_op_attr(op, "floats")->floats[1] == -1.5);
  CHECK_STR(h3_op_attr_string(op, "s", NULL), "text");
  CHECK(h3_op_attr_string(op, "extra1", NULL) == NULL);
  CHECK(h3_op_attr_int(op, "dt", -1) == H3_I64);
  lo[0] = 100; /* the attribute holds its own copy */
  CHECK(h3_op_attr(op, "ints")->ints[0] == 1);
  char why[200];
  CHECK(h3_op_check_attrs(op, why, sizeof why) == -1);
  CHECK_STR(why, "clamp: unknown attribute 'extra0' (it takes lo, hi, dtype)");
  h3_module_free(m);
}

static void test_uses_and_rewrites(void) {
  h3_module *m = h3_module_new("m", "c");
  h3_graph *g = h3_module_add_graph(m, "g", H3_GRAPH_FUNCTION, S0);
  h3_value *x = h3_graph_add_input(m, g, "x", t2(H3_F32, 4, 8), S0);
  h3_value *y = h3_graph_add_input(m, g, "y", t2(H3_F32, 4, 8), S0);
  h3_builder b = {m, &g->body, NULL, S0};
  h3_value *xx[2] = {x, x};
  h3_op *a = build(&b, H3_OP_ADD, 2, xx, 0, NULL);
  CHECK(x->uses == 2 && a->results[0]->uses == 0 && a->parent == &g->body);
  h3_value *ay[2] = {a->results[0], y};
  h3_op *mu = build(&b, H3_OP_MUL, 2, ay, 0, NULL);
  CHECK(a->results[0]->uses == 1 && y->uses == 1);
  h3_op_set_operand(mu, 1, x);
  CHECK(y->uses == 0 && x->uses == 3);
  /* insert before `mu` */
  b.before = mu;
  h3_op *ng = build(&b, H3_OP_NEG, 1, &y, 0, NULL);
  CHECK(g->body.first == a && a->next == ng && ng->next == mu && mu->prev == ng && g->body.last == mu);
  b.before = NULL;
  h3_value_replace_all_uses(m, x, y);
  CHECK(x->uses == 0 && y->uses == 4 && a->operands[0] == y && mu->operands[1] == y);
  CHECK(count_in_region(&g->body, y) == 4);
  /* a loop whose body uses an outer value: erasing the loop drops that use */
  h3_value *r0 = mu->results[0];
  h3_op *loop = h3_build_op_typed(&b, H3_OP_LOOP, 1, &r0, 1, (h3_attr[]){h3_attr_int(m, "count", 3)}, 1,
                                  &r0->type, 1);
  CHECK(loop && loop->n_regions == 1 && loop->regions[0].parent == loop && r0->uses == 1);
  h3_region *body = &loop->regions[0];
  h3_value *i = h3_region_add_arg(m, body, h3_type_make(H3_I32, 0, NULL), "i", S0);
  h3_value *c = h3_region_add_arg(m, body, r0->type, "c", S0);
  CHECK(i->kind == H3_VALUE_REGION_ARG && i->region == body && c->index == 1);
  h3_builder bb = {m, body, NULL, S0};
  h3_value *cy[2] = {c, y};
  h3_op *inner = build(&bb, H3_OP_ADD, 2, cy, 0, NULL);
  h3_op *yl = build(&bb, H3_OP_YIELD, 1, inner->results, 0, NULL);
  CHECK(yl && yl->n_results == 0 && y->uses == 5 && inner->results[0]->uses == 1);
  /* replacing reaches uses nested in later regions, and back again */
  h3_value_replace_all_uses(m, y, x);
  CHECK(y->uses == 0 && x->uses == 5 && inner->operands[1] == x && ng->operands[0] == x);
  h3_value_replace_all_uses(m, x, y);
  CHECK(x->uses == 0 && y->uses == 5 && inner->operands[1] == y);
  /* a region arg's uses are inside its region */
  h3_value *c2 = h3_region_add_arg(m, body, r0->type, "c2", S0);
  h3_value_replace_all_uses(m, c, c2);
  CHECK(c->uses == 0 && c2->uses == 1 && inner->operands[0] == c2);
  h3_value_replace_all_uses(m, c2, c);
  body->n_args--; /* drop the extra arg again */
  h3_op *ret = build(&b, H3_OP_RETURN, 1, loop->results, 0, NULL);
  h3_graph_add_output(m, g, "out");
  h3_diag d;
  h3_diag_init(&d);
  CHECK(h3_verify_module(m, &d) == H3_OK);
  h3_diag_print(&d, stderr);
  /* move `ng` to the end of the body before return: still valid (its result is unused) */
  h3_op_move_before(ng, &g->body, ret);
  CHECK(ret->prev == ng && mu->prev == a);
  CHECK(h3_verify_module(m, &d) == H3_OK);
  /* erase the return then the loop: the inner use of y goes away */
  h3_op_erase(ret);
  CHECK(loop->results[0]->uses == 0 && g->body.last == ng);
  h3_op_erase(loop);
  CHECK(y->uses == 4 && r0->uses == 0 && loop->parent == NULL && mu->next == ng);
  CHECK(count_in_region(&g->body, y) == 4);
  /* re-linking an erased op restores its uses (nested ones too) */
  h3_op_move_before(loop, &g->body, NULL);
  CHECK(y->uses == 5 && r0->uses == 1);
  /* recount after corrupting */
  y->uses = 77;
  x->uses = -3;
  h3_module_recount_uses(m);
  CHECK(y->uses == 5 && x->uses == 0 && inner->results[0]->uses == 1);
  h3_diag_free(&d);
  h3_module_free(m);
}

typedef struct {
  int n, stop_at;
  h3_opcode seen[64];
} walk_ctx;

static int visit(h3_op *op, void *p) {
  walk_ctx *w = p;
  if (w->n < 64) w->seen[w->n] = op->code;
  w->n++;
  return w->stop_at && w->n == w->stop_at;
}

static void test_walk(void) {
  h3_diag d;
  h3_diag_init(&d);
  const char *text = "module @m config \"c\" {\n"
                     "  graph @g(%x: f32[4]) -> (o: f32[4]) {\n"
                     "    %0 = neg(%x) : f32[4]\n"
                     "    %1 = loop(%0) {count = 2} : f32[4] {\n"
                     "    ^(%i: i32[], %c: f32[4]):\n"
                     "      %2 = exp(%c) : f32[4]\n"
                     "      yield %2\n"
                     "    }\n"
                     "    return %1\n"
                     "  }\n"
                     "}\n";
  h3_module *m = h3_module_parse("walk.ir", text, strlen(text), &d);
  CHECK(m != NULL);
  h3_diag_print(&d, stderr);
  if (m) {
    walk_ctx w = {0};
    CHECK(h3_module_walk(m, visit, &w) == 0 && w.n == 5);
    CHECK(w.seen[0] == H3_OP_NEG && w.seen[1] == H3_OP_LOOP && w.seen[2] == H3_OP_EXP &&
          w.seen[3] == H3_OP_YIELD && w.seen[4] == H3_OP_RETURN);
    walk_ctx w2 = {.stop_at = 3};
    CHECK(h3_module_walk(m, visit, &w2) == 1 && w2.n == 3);
  }
  h3_module_free(m);
  h3_diag_free(&d);
}

/* Random chains of elementwise ops; after every build and erase the recorded use counts
 * equal the counts taken from the op lists. */
static void test_random_uses(void) {
  h3_module *m = h3_module_new("m", "c");
  h3_graph *g = h3_module_add_graph(m, "g", H3_GRAPH_FUNCTION, S0);
  enum { NV = 400 };
  h3_value *vals[NV];
  int nv = 0;
  for (int i = 0; i < 4; i++) vals[nv++] = h3_graph_add_input(m, g, NULL, t2(H3_BF16, 3, 5), S0);
  h3_builder b = {m, &g->body, NULL, S0};
  static const h3_opcode codes[] = {H3_OP_ADD, H3_OP_SUB, H3_OP_MUL, H3_OP_MAX, H3_OP_NEG, H3_OP_EXP};
  int ok = 1;
  for (int step = 0; step < 300 && nv < NV; step++) {
    h3_opcode c = codes[check_range(0, 5)];
    h3_value *ops[2] = {vals[check_range(0, nv - 1)], vals[check_range(0, nv - 1)]};
    h3_op *op = build(&b, c, c >= H3_OP_NEG ? 1 : 2, ops, 0, NULL);
    if (!op) {
      ok = 0;
      break;
    }
    vals[nv++] = op->results[0];
    if (step % 5 == 4) { /* erase a random op whose result is unused */
      for (h3_op *o = g->body.first; o; o = o->next)
        if (o->results[0]->uses == 0 && check_range(0, 2) == 0) {
          h3_op_erase(o);
          break;
        }
    }
    for (int i = 0; i < nv; i++) {
      h3_value *v = vals[i];
      bool linked = v->kind != H3_VALUE_RESULT || v->def->parent;
      if (linked && v->uses != count_in_region(&g->body, v)) ok = 0;
    }
  }
  CHECK(ok);
  h3_module_free(m);
}

int main(void) {
  test_module_bookkeeping();
  test_attrs();
  test_uses_and_rewrites();
  test_walk();
  test_random_uses();
  return check_report("test_builder");
}
