/* test_graph_marks.c: which graph calls the cuda backend may capture as CUDA graphs
 * (runtime/cuda/cuda_graph.c, cu_graph_host_reads; white box through cuda_internal.h). No GPU
 * is needed: the marks are computed from the IR alone, at h3_cuda_load_plan.
 *
 * A graph whose run makes the executor read device memory on the host cannot be captured:
 * a `branch` (its cond), an `index` whose row is neither a loop counter nor a constant
 * (downloaded), and any graph that calls such a graph, transitively. Checked on
 *  1. a hand-written module: an index by an input row, by a loop counter, by a constant,
 *     inside a loop of a callee; call chains of one and two levels written before their callees (the marks
 *     must propagate whatever the graph order), a branch, and a graph that only calls clean
 *     graphs;
 *  2. tiny MiniMax-H3 at --quality high (Cache-DiT): step_cache holds the branch and sample
 *     calls it; step_rest and step_cached (what the branch calls) and text stay capturable;
 *     every op is one the cuda backend prepares (no deferred op, library ops that it runs),
 *     so h3exec --backend cuda does not stop at load;
 *  3. tiny MiniMax-H3 lossless: no graph is marked (every call stays capturable);
 *  4. tiny MiniMax-M3.1: the serving graphs are not marked (the DSpark draft's weights are
 *     rows of a stack picked by a constant, draft_layer[0]).
 */
#include "cuda_internal.h"
#include "h3/frontend.h"
#include "h3/passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/check.h"

/* The op that marks a graph as the report names it: its opcode, or "call NAME" for a call. */
static void why_name(const h3_op *op, char *buf, size_t n) {
  if (!op) snprintf(buf, n, "none");
  else if (op->code == H3_OP_CALL) snprintf(buf, n, "call %s", h3_op_attr_string(op, "callee", "?"));
  else snprintf(buf, n, "%s", h3_opcode_name(op->code));
}

/* Checks flags against the graphs named in `marked` (comma-separated, each ",name,"), and,
 * where `reasons` names a graph (",name=reason,"), the op that marks it (why_name). */
static void expect_marks(const h3_module *m, const char *marked, const char *reasons, const char *what) {
  bool *flags = calloc((size_t)m->n_graphs + 1, sizeof *flags);
  const h3_op **why = calloc((size_t)m->n_graphs + 1, sizeof *why);
  CHECK(flags != NULL && why != NULL, "out of memory");
  if (!flags || !why) {
    free(flags), free(why);
    return;
  }
  cu_graph_host_reads(m, flags, why);
  for (int i = 0; i < m->n_graphs; i++) {
    char key[128], got[160], want_why[200];
    snprintf(key, sizeof key, ",%s,", m->graphs[i]->name);
    bool want = strstr(marked, key) != NULL;
    CHECK(flags[i] == want, "%s: graph '%s' is %s, expected %s", what, m->graphs[i]->name,
          flags[i] ? "marked" : "not marked", want ? "marked" : "not marked");
    CHECK((why[i] != NULL) == flags[i], "%s: graph '%s': a reason without a mark or a mark without one",
          what, m->graphs[i]->name);
    why_name(why[i], got, sizeof got);
    snprintf(want_why, sizeof want_why, ",%s=%s,", m->graphs[i]->name, got);
    snprintf(key, sizeof key, ",%s=", m->graphs[i]->name);
    if (reasons && strstr(reasons, key))
      CHECK(strstr(reasons, want_why) != NULL, "%s: graph '%s' is marked by %s, expected %s", what,
            m->graphs[i]->name, got, strstr(reasons, key) + 1);
  }
  free(flags), free(why);
}

static const char hand_ir[] =
    "module @marks config \"test\" {\n"
    "  program @top(%t: f32[9], %r: i32[], %c: i32[]) -> (y: f32[], z: f32[], w: f32[]) {\n"
    "    %y = call(%t, %r) {callee = \"mid\"} : f32[]\n"
    "    %z = call(%t) {callee = \"clean_caller\"} : f32[]\n"
    "    %w = call(%c, %t) {callee = \"br\"} : f32[]\n"
    "    return %y, %z, %w\n"
    "  }\n"
    "  graph @mid(%t: f32[9], %r: i32[]) -> (y: f32[]) {\n"
    "    %y = call(%t, %r) {callee = \"by_row\"} : f32[]\n"
    "    return %y\n"
    "  }\n"
    "  graph @by_row(%t: f32[9], %r: i32[]) -> (y: f32[]) {\n"
    "    %a = loop(%t) {count = 2, label = \"l\"} : f32[9] {\n"
    "    ^(%i: i32[], %h: f32[9]):\n"
    "      %v = index(%h, %r) {offset = 0} : f32[]\n"
    "      %b = add(%h, %v) : f32[9]\n"
    "      yield %b\n"
    "    }\n"
    "    %y = index(%a, %r) {offset = 1} : f32[]\n"
    "    return %y\n"
    "  }\n"
    "  graph @clean_caller(%t: f32[9]) -> (y: f32[]) {\n"
    "    %y = call(%t) {callee = \"by_counter\"} : f32[]\n"
    "    return %y\n"
    "  }\n"
    "  graph @by_counter(%t: f32[9]) -> (y: f32[]) {\n"
    "    %a = loop(%t) {count = 3, label = \"l\"} : f32[9] {\n"
    "    ^(%i: i32[], %h: f32[9]):\n"
    "      %v = index(%t, %i) {offset = 2} : f32[]\n"
    "      %b = add(%h, %v) : f32[9]\n"
    "      yield %b\n"
    "    }\n"
    "    %y = reduce_sum(%a) : f32[]\n"
    "    return %y\n"
    "  }\n"
    "  graph @by_const(%t: f32[9]) -> (y: f32[]) {\n"
    "    %k = const() {value = 3.0, dtype = i32} : i32[]\n"
    "    %y = index(%t, %k) : f32[]\n"
    "    return %y\n"
    "  }\n"
    "  graph @br(%c: i32[], %t: f32[9]) -> (y: f32[]) {\n"
    "    %y = branch(%c, %t) {then_callee = \"by_counter\", else_callee = \"by_counter\"} : f32[]\n"
    "    return %y\n"
    "  }\n"
    "}\n";

static void test_hand(void) {
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = h3_module_parse("marks.ir", hand_ir, strlen(hand_ir), &d);
  h3_diag_print(&d, stderr);
  CHECK(m != NULL, "the hand-written module does not parse");
  if (m)
    expect_marks(m, ",top,mid,by_row,br,", ",top=call mid,mid=call by_row,by_row=index,br=branch,",
                 "hand-written module");
  h3_module_free(m);
  h3_diag_free(&d);
}

/* The tiny config of models/FILE after the pass pipeline at `tier`. */
static h3_module *tiny(const char *models, const char *file, h3_tier tier) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", models, file);
  h3_frontend_options fo = {"tiny", 0, NULL};
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = h3_frontend_load(path, &fo, &d);
  h3_pass_options po = h3_pass_options_default();
  po.tier = tier;
  if (m && h3_pass_pipeline_run(m, &po, &d) != H3_OK) {
    h3_module_free(m);
    m = NULL;
  }
  h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  CHECK(m != NULL, "tiny %s at --quality %s does not compile", file, h3_tier_name(tier));
  return m;
}

/* The op kinds the cuda backend's op preparation runs (cuda_kernels.c, prepare). */
static int backend_visit(h3_op *op, void *ctx) {
  int *bad = ctx;
  h3_exec_kind k = h3_exec_classify(op);
  bool ok = k != H3_EXEC_DEFERRED &&
            (k != H3_EXEC_LIBRARY || op->code == H3_OP_LINEAR ||
             op->code == H3_OP_LINEAR_INT8 || op->code == H3_OP_MATMUL_I8 ||
             op->code == H3_OP_ATTENTION);
  if (!ok) {
    fprintf(stderr, "op %s is not run by the cuda backend\n", h3_opcode_name(op->code));
    (*bad)++;
  }
  return 0;
}

static void test_h3(const char *models) {
  h3_module *m = tiny(models, "minimax_h3.g", H3_TIER_HIGH);
  if (m) {
    CHECK(h3_module_graph(m, "step_cache") && h3_module_graph(m, "step_rest") &&
              h3_module_graph(m, "step_cached"),
          "Cache-DiT did not rewrite tiny H3 at --quality high");
    expect_marks(m, ",sample,step_cache,", ",step_cache=branch,", "tiny H3 --quality high");
    int bad = 0;
    h3_module_walk(m, backend_visit, &bad);
    CHECK(bad == 0, "%d ops of tiny H3 --quality high are not run by the cuda backend", bad);
  }
  h3_module_free(m);
  m = tiny(models, "minimax_h3.g", H3_TIER_LOSSLESS);
  if (m) expect_marks(m, ",", NULL, "tiny H3 lossless");
  h3_module_free(m);
}

static void test_m31(const char *models) {
  h3_module *m = tiny(models, "minimax_m3_1.g", h3_pass_options_default().tier);
  bool *flags = m ? calloc((size_t)m->n_graphs + 1, sizeof *flags) : NULL;
  if (flags) {
    cu_graph_host_reads(m, flags, NULL);
    static const char *const serving[] = {"serve_prefill", "serve_decode", "serve_mixed",
                                          "serve_prefill_spec", "serve_draft", "serve_verify"};
    for (int k = 0; k < 6; k++)
      for (int i = 0; i < m->n_graphs; i++)
        if (!strcmp(m->graphs[i]->name, serving[k]))
          CHECK(!flags[i], "tiny M3.1: graph '%s' is marked (its calls could not be CUDA graphs)", serving[k]);
  }
  free(flags);
  h3_module_free(m);
}

int main(int argc, char **argv) {
  test_hand();
  if (argc > 1) test_h3(argv[1]), test_m31(argv[1]);
  printf("test_graph_marks: %d checks, %d failures\n", checks, failures);
  return failures ? 1 : 0;
}
