/* test_verify.c: h3_verify_module catches each class of error. Most cases are small IR
 * texts (h3_module_parse runs the verifier, so the error also carries the op's line);
 * the rest (use counts, back links, duplicates, out of memory) mutate a module built
 * with the builder. Each case checks the message and that a valid module passes.
 */
#include "check.h"
#include "diag_text.h"
#include "h3/op_registry.h"

#include <stdlib.h>

/* Parses a module whose graph @g(%x: f32[4], %n: i32[]) -> (o) has the given body; returns
 * the diagnostics text ("" when it parsed and verified). */
static char *check_body(const char *body) {
  char text[4096];
  snprintf(text, sizeof text,
           "module @m config \"c\" {\n"
           "  param @w : f32[3, 4] init normal(scale = 0.5)\n"
           "  graph @h(%%a: f32[4]) -> (r: f32[4]) {\n"
           "    return %%a\n"
           "  }\n"
           "  graph @g(%%x: f32[4], %%n: i32[]) -> (o) {\n"
           "%s"
           "  }\n"
           "}\n",
           body);
  h3_diag d;
  h3_diag_init(&d);
  h3_diag_add_source(&d, "v.ir", text, strlen(text));
  h3_module *m = h3_module_parse("v.ir", text, strlen(text), &d);
  CHECK((m == NULL) == (d.errors > 0));
  char *t = diag_text(&d);
  h3_module_free(m);
  h3_diag_free(&d);
  return t;
}

#define EXPECT_OK(body)       \
  do {                        \
    char *t_ = check_body(body); \
    CHECK_STR(t_, "");        \
    free(t_);                 \
  } while (0)
#define EXPECT_ERR(body, msg) \
  do {                        \
    char *t_ = check_body(body); \
    CHECK_HAS(t_, msg);       \
    free(t_);                 \
  } while (0)

static void test_texts(void) {
  EXPECT_OK("    %0 = neg(%x) : f32[4]\n"
            "    %1 = loop(%0) {count = 2, label = \"trunk\"} : f32[4] {\n"
            "    ^(%i: i32[], %c: f32[4]):\n"
            "      %2 = index(@w, %i) : f32[4]\n"
            "      %3 = fused(%c, %2) {kernel = \"k0\", tier = exact} : f32[4] {\n"
            "      ^(%p: f32[4], %q: f32[4]):\n"
            "        %4 = mul(%p, %q) : f32[4]\n"
            "        %5 = add(%4, %x) : f32[4]\n"
            "        yield %5\n"
            "      }\n"
            "      yield %3\n"
            "    }\n"
            "    %6 = call(%1) {callee = \"h\"} : f32[4]\n"
            "    return %6\n");
  /* SSA scope: a body value used after its loop */
  EXPECT_ERR("    %1 = loop(%x) {count = 2} : f32[4] {\n"
             "    ^(%i: i32[], %c: f32[4]):\n"
             "      %2 = neg(%c) : f32[4]\n"
             "      yield %2\n"
             "    }\n"
             "    %3 = add(%1, %2) : f32[4]\n"
             "    return %3\n",
             "v.ir:12:10: error: IR verifier: graph @g: add: operand 1 (%2) is not defined before this use in scope\n"
             "   12 |     %3 = add(%1, %2) : f32[4]\n"
             "      |          ^~~\n");
  /* a loop result used inside its own body */
  EXPECT_ERR("    %1 = loop(%x) {count = 2} : f32[4] {\n"
             "    ^(%i: i32[], %c: f32[4]):\n"
             "      yield %1\n"
             "    }\n"
             "    return %1\n",
             "v.ir:9:13: error: unknown value %1 (values must be defined before their use)");
  EXPECT_ERR("    %1 = loop(%x) {count = 2} : f32[4] {\n"
             "    ^(%i: i64[], %c: f32[4]):\n"
             "      yield %c\n"
             "    }\n"
             "    return %1\n",
             "loop: region arg 0 (the index) is i64[], expected i32[]");
  EXPECT_ERR("    %1 = loop(%x) {count = 2} : f32[4] {\n"
             "    ^(%i: i32[], %c: f32[5]):\n"
             "      yield %x\n"
             "    }\n"
             "    return %1\n",
             "loop: region carried arg list 0 is f32[5] but the operand list 0 is f32[4]");
  EXPECT_ERR("    %1 = loop(%x) {count = 2} : f32[4] {\n"
             "    ^(%i: i32[]):\n"
             "      yield %x\n"
             "    }\n"
             "    return %1\n",
             "loop: region has 1 args, expected the index plus 1 carried values");
  EXPECT_ERR("    %1 = loop(%x) {count = 2} : f32[4] {\n"
             "    ^(%i: i32[], %c: f32[4]):\n"
             "      %2 = index(@w, %i) : f32[4]\n"
             "      yield %c, %2\n"
             "    }\n"
             "    return %1\n",
             "loop: yield has 2 values but the carried list has 1");
  EXPECT_ERR("    %1 = loop(%x) {count = 2} : f32[3] {\n"
             "    ^(%i: i32[], %c: f32[4]):\n"
             "      yield %c\n"
             "    }\n"
             "    return %1\n",
             "loop: result list 0 is f32[3] but the operand list 0 is f32[4]");
  EXPECT_ERR("    %1 = loop(%x) {count = -1} : f32[4] {\n"
             "    ^(%i: i32[], %c: f32[4]):\n"
             "      yield %c\n"
             "    }\n"
             "    return %1\n",
             "loop: count is negative");
  EXPECT_ERR("    %1 = fused(%x) {kernel = \"k\", tier = exact} : f32[4] {\n"
             "    ^(%p: f32[3]):\n"
             "      yield %x\n"
             "    }\n"
             "    return %1\n",
             "fused: region arg list 0 is f32[3] but the operand list 0 is f32[4]");
  EXPECT_ERR("    %1 = fused(%x) {kernel = \"k\", tier = exact} : f32[4] {\n"
             "    ^(%p: f32[4]):\n"
             "      %2 = index(@w, %n) : f32[4]\n"
             "      %3 = reduce_sum(%2) : f32[]\n"
             "      yield %3\n"
             "    }\n"
             "    return %1\n",
             "fused: yield 0 is f32[] but the result list 0 is f32[4]");
  EXPECT_ERR("    %1 = fused(%x) {kernel = \"k\"} : f32[4] {\n"
             "    ^(%p: f32[4]):\n"
             "      yield %p\n"
             "    }\n"
             "    return %1\n",
             "fused: missing attribute 'tier' (a tier: exact, lossless or high)");
  EXPECT_ERR("    %1 = call(%x) {callee = \"nope\"} : f32[4]\n    return %1\n", "call: no graph named 'nope'");
  EXPECT_ERR("    %1 = call(%n) {callee = \"h\"} : f32[4]\n    return %1\n",
             "call: argument list 0 is i32[] but the callee's inputs 0 is f32[4]");
  EXPECT_ERR("    %1, %2 = call(%x) {callee = \"h\"} : f32[4], f32[4]\n    return %1\n",
             "call: result list has 2 values but the callee's return has 1");
  /* terminators */
  EXPECT_ERR("    %1 = neg(%x) : f32[4]\n", "v.ir:7:10: error: IR verifier: graph @g: a graph body must end with return");
  EXPECT_ERR("    return %x\n    %1 = neg(%x) : f32[4]\n    return %1\n",
             "return: a terminator must be the last op of its region");
  EXPECT_ERR("    %1 = loop(%x) {count = 2} : f32[4] {\n"
             "    ^(%i: i32[], %c: f32[4]):\n"
             "      %2 = neg(%c) : f32[4]\n"
             "    }\n"
             "    return %1\n",
             "a region must end with yield");
  EXPECT_ERR("    %1 = loop(%x) {count = 2} : f32[4] {\n"
             "    ^(%i: i32[], %c: f32[4]):\n"
             "      return %c\n"
             "    }\n"
             "    return %1\n",
             "a region must end with yield");
  EXPECT_ERR("    yield %x\n", "a graph body must end with return");
  EXPECT_ERR("    return %x, %x\n", "return gives 2 values but the graph has 1 outputs");
  /* registry checks */
  EXPECT_ERR("    %1 = neg(%x) : f32[5]\n    return %1\n", "neg: result 0 is f32[5] but inference gives f32[4]");
  EXPECT_ERR("    %1, %2 = neg(%x) : f32[4], f32[4]\n    return %1\n", "neg: has 2 results, inference gives 1");
  EXPECT_ERR("    %1 = neg(%x) {axis = 1} : f32[4]\n    return %1\n",
             "neg: unknown attribute 'axis' (it takes dtype)");
  EXPECT_ERR("    %1 = add(%x) : f32[4]\n    return %1\n", "add: takes 2 operands, got 1");
  EXPECT_OK("    %1 = linear(%x, @w) : f32[3]\n    %2 = slice(%1) {axis = 0, start = 0, len = 1} : f32[1]\n"
            "    %3 = add(%x, %2) : f32[4]\n    return %3\n");
  EXPECT_ERR("    %1 = linear(%x, @w) : f32[4]\n    return %1\n", "linear: result 0 is f32[4] but inference gives f32[3]");
  EXPECT_ERR("    %1 = index(@w, %x) : f32[4]\n    return %1\n", "index: i must be i32[], got f32[4]");
}

static const h3_span S0 = {0};

/* A small valid module built with the builder: g(x) = neg(x) + x. */
typedef struct {
  h3_module *m;
  h3_graph *g;
  h3_value *x;
  h3_op *neg, *add, *ret;
} small;

static small make_small(void) {
  small s;
  s.m = h3_module_new("m", "c");
  s.g = h3_module_add_graph(s.m, "g", H3_GRAPH_FUNCTION, S0);
  int64_t d = 4;
  s.x = h3_graph_add_input(s.m, s.g, "x", h3_type_make(H3_F32, 1, &d), S0);
  h3_builder b = {s.m, &s.g->body, NULL, S0};
  h3_diag dg;
  h3_diag_init(&dg);
  s.neg = h3_build_op(&b, H3_OP_NEG, 1, &s.x, 0, NULL, 0, &dg);
  h3_value *ops[2] = {s.neg->results[0], s.x};
  s.add = h3_build_op(&b, H3_OP_ADD, 2, ops, 0, NULL, 0, &dg);
  s.ret = h3_build_op(&b, H3_OP_RETURN, 1, s.add->results, 0, NULL, 0, &dg);
  h3_graph_add_output(s.m, s.g, "o");
  h3_diag_free(&dg);
  return s;
}

static char *verify_text(small *s) {
  h3_diag d;
  h3_diag_init(&d);
  h3_status st = h3_verify_module(s->m, &d);
  CHECK((st == H3_ERR) == (d.errors > 0));
  char *t = diag_text(&d);
  h3_diag_free(&d);
  h3_module_free(s->m);
  return t;
}

#define EXPECT_MUT(mutation, msg) \
  do {                            \
    small s = make_small();       \
    mutation;                     \
    char *t_ = verify_text(&s);   \
    CHECK_HAS(t_, msg);           \
    free(t_);                     \
  } while (0)

static void test_mutations(void) {
  {
    small s = make_small();
    char *t = verify_text(&s);
    CHECK_STR(t, "");
    free(t);
  }
  EXPECT_MUT(s.x->uses++, "h3: error: IR verifier: value %x records 3 uses but has 2");
  EXPECT_MUT(s.neg->results[0]->uses = 0, "records 0 uses but has 1");
  EXPECT_MUT(h3_op_move_before(s.add, &s.g->body, s.neg), "add: operand 0 (%1) is not defined before this use in scope");
  EXPECT_MUT(s.add->results[0] = s.neg->results[0], "add: result 0 (%1) does not link back to its op");
  EXPECT_MUT(s.neg->parent = NULL, "neg: op's parent link does not point at its region");
  EXPECT_MUT(s.x->index = 3, "input 0 (%x) does not link back to its graph");
  EXPECT_MUT(s.add->operands[1] = NULL, "add: operand 1 is missing");
  EXPECT_MUT(s.m->oom = true, "out of memory while building the IR of 'm'");
  EXPECT_MUT(h3_module_add_graph(s.m, "g", H3_GRAPH_FUNCTION, S0), "graph @g is declared twice");
  EXPECT_MUT((h3_module_add_param(s.m, "p", s.x->type, S0), h3_module_add_param(s.m, "p", s.x->type, S0)),
             "param @p is declared twice");
  EXPECT_MUT(h3_module_add_param(s.m, "q", s.x->type, S0)->group_dims = 2, "param @q: group_dims = 2 is outside [0, rank 1]");
  EXPECT_MUT(h3_module_add_param(s.m, "q", s.x->type, S0)->value->type.dtype = H3_F16, "param @q: its value does not match it");
  EXPECT_MUT(s.neg->code = H3_OPCODE_INVALID, "unknown opcode 0");
  EXPECT_MUT(s.g->n_outputs = 0, "return gives 1 values but the graph has 0 outputs");
}

int main(void) {
  test_texts();
  test_mutations();
  return check_report("test_verify");
}
