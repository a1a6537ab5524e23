/* test_exec.c: the graph executor (runtime/exec.c) on hand-written IR: a program whose
 * loop calls a graph, swaps carried values and indexes a table with the loop counter,
 * run without and with the memory plan (outputs must equal an independent computation
 * bitwise both ways), progress, statistics and trace events, runtime errors, aliasing
 * through dynamic index views and overlapping placements, backend selection, and which loop
 * counters are copied to the device. */
#include "h3/passes.h"
#include "h3/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/check.h"

static const char *program_text(int count) {
  static char buf[2048];
  snprintf(buf, sizeof buf,
           "module @t config \"tiny\" {\n"
           "  param @w : f32[4] init const(value = 2.0)\n"
           "  graph @f(%%x: f32[4], %%s: f32[2]) -> (y: f32[4]) {\n"
           "    %%a = slice(%%s) {axis = 0, start = 1, len = 1} : f32[1]\n"
           "    %%m = mul(%%x, %%a) : f32[4]\n"
           "    %%y = add(%%m, @w) : f32[4]\n"
           "    return %%y\n"
           "  }\n"
           "  program @p(%%x0: f32[4], %%tab: f32[5, 2]) -> (a: f32[4], b: f32[4]) {\n"
           "    %%t2 = mul(%%tab, %%tab) : f32[5, 2]\n"
           "    %%a, %%b = loop(%%x0, %%x0) {count = %d, label = \"steps\"} : f32[4], f32[4] {\n"
           "      ^(%%k: i32[], %%a.1: f32[4], %%b.1: f32[4]):\n"
           "        %%row = index(%%t2, %%k) : f32[2]\n"
           "        %%n = call(%%a.1, %%row) {callee = \"f\"} : f32[4]\n"
           "        yield %%b.1, %%n\n"
           "    }\n"
           "    return %%a, %%b\n"
           "  }\n"
           "}\n",
           count);
  return buf;
}

static h3_module *parse(const char *text, h3_diag *d) {
  h3_module *m = h3_module_parse("t.ir", text, strlen(text), d);
  if (!m || h3_verify_module(m, d) != H3_OK) {
    h3_diag_print(d, stderr);
    exit(1);
  }
  return m;
}

static int progress_calls;
static void on_progress(void *ctx, const char *label, int64_t done, int64_t total) {
  (void)ctx;
  progress_calls++;
  CHECK(strcmp(label, "steps") == 0 && done >= 1 && done <= total && total == 5,
        "progress %s %lld/%lld", label, (long long)done, (long long)total);
}

/* Runs program p on fixed inputs; returns its two outputs (8 floats) in out. */
static void run_program(h3_module *m, int trace, float *out) {
  h3_diag d;
  h3_diag_init(&d);
  h3_backend_options bo = {.threads = 2, .seed = 0};
  h3_backend *b = h3_backend_create("cpu", &bo, &d);
  h3_weights *w = h3_weights_random(m, 0, &d);
  h3_runtime_options ro = {.trace = trace != 0, .progress = on_progress};
  h3_runtime *rt = b && w ? h3_runtime_new(m, b, w, &ro, &d) : NULL;
  const h3_graph *g = h3_module_graph(m, "p");
  float x0[4] = {0.5f, -1.25f, 3.0f, 0.125f}, tab[10];
  for (int i = 0; i < 10; i++) tab[i] = 0.3f + 0.17f * (float)i;
  h3_host_tensor in[2] = {{"x0", g->inputs[0]->type, x0, 16}, {"tab", g->inputs[1]->type, tab, 40}};
  h3_host_tensor res[2];
  CHECK(rt && h3_runtime_run(rt, g, in, res, &d) == H3_OK, "run failed");
  h3_diag_print(&d, stderr);
  if (!d.errors) {
    CHECK(strcmp(res[0].name, "a") == 0 && strcmp(res[1].name, "b") == 0, "output names");
    memcpy(out, res[0].data, 16);
    memcpy(out + 4, res[1].data, 16);
    free(res[0].data), free(res[1].data);
    const h3_op_stat *st = h3_runtime_op_stats(rt);
    CHECK(st[H3_OP_MUL].count == 6 && st[H3_OP_ADD].count == 5 && st[H3_OP_INDEX].count == 5,
          "op counts mul %lld add %lld index %lld", (long long)st[H3_OP_MUL].count,
          (long long)st[H3_OP_ADD].count, (long long)st[H3_OP_INDEX].count);
    const h3_trace_event *ev;
    size_t n = h3_runtime_trace(rt, &ev);
    CHECK(trace ? n == 1 + 5 * 4 + 1 + 5 : n == 0, "trace events %zu", n); /* ops, calls, loop */
  }
  h3_runtime_free(rt);
  h3_weights_free(w);
  h3_backend_free(b);
  h3_diag_free(&d);
}

static void expected(float *out) {
  float a[4] = {0.5f, -1.25f, 3.0f, 0.125f}, b[4];
  memcpy(b, a, sizeof a);
  for (int k = 0; k < 5; k++) {
    float s = 0.3f + 0.17f * (float)(2 * k + 1);
    s = s * s;
    for (int i = 0; i < 4; i++) {
      float n = a[i] * s + 2.0f;
      a[i] = b[i];
      b[i] = n;
    }
  }
  memcpy(out, a, 16);
  memcpy(out + 4, b, 16);
}

static void test_program(void) {
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = parse(program_text(5), &d);
  float want[8], got[8], got2[8];
  expected(want);
  progress_calls = 0;
  run_program(m, 1, got);
  CHECK(memcmp(got, want, sizeof want) == 0, "unplanned run: %g %g vs %g %g", got[0], got[4],
        want[0], want[4]);
  CHECK(progress_calls == 5, "progress calls %d", progress_calls);
  /* the same module with the memory plan: arena offsets, views, loop slots */
  h3_pass_options po = h3_pass_options_default();
  const h3_pass *mp = h3_pass_find("memory-plan");
  CHECK(mp && h3_pass_run_one(m, mp, &po, &d) == H3_OK, "memory-plan failed");
  h3_diag_print(&d, stderr);
  const h3_attr *ab = h3_graph_attr(h3_module_graph(m, "p"), "arena_bytes");
  CHECK(ab && ab->i > 0, "no arena planned");
  run_program(m, 0, got2);
  CHECK(memcmp(got2, want, sizeof want) == 0, "planned run: %g %g vs %g %g", got2[0], got2[4],
        want[0], want[4]);
  h3_module_free(m);
  h3_diag_free(&d);
}

static void test_index_error(void) {
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = parse(program_text(6), &d);
  h3_backend *b = h3_backend_cpu_new(NULL, &d);
  h3_weights *w = h3_weights_random(m, 0, &d);
  h3_runtime *rt = h3_runtime_new(m, b, w, NULL, &d);
  const h3_graph *g = h3_module_graph(m, "p");
  float x0[4] = {1, 2, 3, 4}, tab[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  h3_host_tensor in[2] = {{"x0", g->inputs[0]->type, x0, 16}, {"tab", g->inputs[1]->type, tab, 40}};
  h3_host_tensor res[2] = {{0}};
  CHECK(h3_runtime_run(rt, g, in, res, &d) == H3_ERR, "an index past the table must fail");
  CHECK(res[0].data == NULL && res[1].data == NULL, "outputs left after an error");
  CHECK(d.head && strstr(d.head->message, "index: row 5 is outside [0, 5)"), "message: %s",
        d.head ? d.head->message : "(none)");
  int noted = 0;
  for (h3_diag_msg *msg = d.head; msg; msg = msg->next)
    noted |= strstr(msg->message, "while running graph 'p'") != NULL;
  CHECK(noted, "no note naming the graph");
  /* a missing input is an error naming it */
  h3_diag d2;
  h3_diag_init(&d2);
  in[1].data = NULL;
  CHECK(h3_runtime_run(rt, g, in, res, &d2) == H3_ERR, "missing input must fail");
  CHECK(d2.head && strstr(d2.head->message, "graph 'p': input 'tab' (f32[5, 2]) is missing"),
        "message: %s", d2.head ? d2.head->message : "(none)");
  h3_diag_free(&d2);
  h3_runtime_free(rt);
  h3_weights_free(w);
  h3_backend_free(b);
  h3_module_free(m);
  h3_diag_free(&d);
}

/* A loop counter reaches the device only where an op may read it there: not at all when its
 * readers are index views (program p), right before each set_index that reads it (program q,
 * whose rows come from outside the table, so a missing copy writes the wrong rows), and at
 * every turn, as before, when another op uses it (program p with the counter also added). */
static const h3_backend_ops *cpu_ops;
static int counter_uploads; /* uploads of 4 bytes: an i32 counter's (the inputs are larger) */
static h3_status counting_upload(h3_backend *b, void *dst, const void *src, size_t bytes, h3_diag *d) {
  counter_uploads += bytes == 4;
  return cpu_ops->upload(b, dst, src, bytes, d);
}

static int run_counting(const char *text, const char *graph, h3_host_tensor *in, float *out, size_t out_bytes) {
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = parse(text, &d);
  h3_backend *b = h3_backend_cpu_new(NULL, &d);
  cpu_ops = b->ops;
  h3_backend_ops counting = *b->ops;
  counting.upload = counting_upload;
  b->ops = &counting;
  h3_weights *w = h3_weights_random(m, 0, &d);
  h3_runtime *rt = h3_runtime_new(m, b, w, NULL, &d);
  const h3_graph *g = h3_module_graph(m, graph);
  for (int i = 0; i < g->n_inputs; i++) in[i].type = g->inputs[i]->type;
  h3_host_tensor res[2] = {{0}}; /* p has two outputs, q one; out gets the first */
  counter_uploads = 0;
  CHECK(rt && g->n_outputs <= 2 && h3_runtime_run(rt, g, in, res, &d) == H3_OK, "run of %s failed", graph);
  h3_diag_print(&d, stderr);
  if (res[0].data) memcpy(out, res[0].data, out_bytes);
  for (int i = 0; i < 2; i++) free(res[i].data);
  int n = counter_uploads;
  h3_runtime_free(rt);
  h3_weights_free(w);
  b->ops = cpu_ops;
  h3_backend_free(b);
  h3_module_free(m);
  h3_diag_free(&d);
  return n;
}

static void test_counter_uploads(void) {
  float x0[4] = {0.5f, -1.25f, 3.0f, 0.125f}, tab[10], got[4], want[8];
  for (int i = 0; i < 10; i++) tab[i] = 0.3f + 0.17f * (float)i;
  h3_host_tensor in[2] = {{"x0", {0}, x0, 16}, {"tab", {0}, tab, 40}};
  expected(want);
  int n = run_counting(program_text(5), "p", in, got, 16);
  CHECK(n == 0 && memcmp(got, want, 16) == 0, "index views only: %d counter uploads (0 wanted), a %g vs %g",
        n, got[0], want[0]);
  char text[2048];
  snprintf(text, sizeof text, "%s", program_text(5));
  char *row = strstr(text, "        %row = index(");
  CHECK(row != NULL, "program p's index line");
  if (row) {
    const char *extra = "        %k2 = add(%k, %k) : i32[]\n";
    memmove(row + strlen(extra), row, strlen(row) + 1);
    memcpy(row, extra, strlen(extra));
    n = run_counting(text, "p", in, got, 16);
    CHECK(n == 5 && memcmp(got, want, 16) == 0, "counter also added: %d counter uploads (5 wanted)", n);
  }
  const char *q = "module @t config \"tiny\" {\n"
                  "  program @q(%z: f32[3, 2], %r: f32[2]) -> (o: f32[3, 2]) {\n"
                  "    %o = loop(%z) {count = 3, label = \"rows\"} : f32[3, 2] {\n"
                  "      ^(%k: i32[], %acc: f32[3, 2]):\n"
                  "        %sq = mul(%r, %r) : f32[2]\n"
                  "        %n = set_index(%acc, %k, %sq) : f32[3, 2]\n"
                  "        yield %n\n"
                  "    }\n"
                  "    return %o\n"
                  "  }\n"
                  "}\n";
  float z[6] = {9, 9, 9, 9, 9, 9}, r[2] = {1.5f, -2.0f}, o[6] = {0};
  h3_host_tensor qin[2] = {{"z", {0}, z, 24}, {"r", {0}, r, 8}};
  n = run_counting(q, "q", qin, o, 24);
  int rows_ok = 1;
  for (int i = 0; i < 3; i++) rows_ok &= o[2 * i] == 2.25f && o[2 * i + 1] == 4.0f;
  CHECK(n == 3 && rows_ok, "set_index rows: %d counter uploads (3 wanted), rows %g %g / %g %g / %g %g", n,
        o[0], o[1], o[2], o[3], o[4], o[5]);
}

/* Hand-placed offsets (no planner): a chain over a dynamic `index` view (an in-place
 * kv_write the plan put over the view, a reshape of its result, a set_index back) must
 * touch the indexed row, not the arena offset of the source's base; and an in-place result
 * with its own buffer placed over another operand (x*x) must still read that operand. */
static const char *alias_text =
    "module @t config \"tiny\" {\n"
    "  graph @g(%cache: f32[2, 2, 2, 2], %x: f32[2, 2], %slot: i32[2])"
    " -> (big: f32[2, 2, 2, 2], r: f32[8], kv2: f32[2, 2, 2]) attrs {arena_bytes = 1024} {\n"
    "    %i = const() {value = 1.0, dtype = i32} : i32[] at 768\n"
    "    %big = add(%cache, %cache) : f32[2, 2, 2, 2] at 0\n"
    "    %row = index(%big, %i) : f32[2, 2, 2] at 0\n"
    "    %xx = mul(%x, %x) : f32[2, 2] at 256\n"
    "    %kv = kv_write(%row, %xx, %slot) : f32[2, 2, 2] at 0\n"
    "    %r = reshape(%kv) {shape = [8]} : f32[8] at 0\n"
    "    %big2 = set_index(%big, %i, %kv) : f32[2, 2, 2, 2] at 0\n"
    "    %z = const() {value = 0.0, dtype = i32} : i32[] at 832\n"
    "    %c0 = index(%cache, %z) : f32[2, 2, 2]\n"
    "    %y = mul(%x, %x) : f32[2, 2] at 512\n"
    "    %kv2 = kv_write(%c0, %y, %slot) : f32[2, 2, 2] at 512\n"
    "    return %big2, %r, %kv2\n"
    "  }\n"
    "}\n";

static void test_aliasing(void) {
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = parse(alias_text, &d);
  h3_backend *b = h3_backend_cpu_new(NULL, &d);
  h3_weights *w = h3_weights_random(m, 0, &d);
  h3_runtime *rt = h3_runtime_new(m, b, w, NULL, &d);
  const h3_graph *g = h3_module_graph(m, "g");
  float cache[16], x[4] = {1.5f, -2.0f, 3.0f, 0.5f};
  int32_t slot[2] = {3, 0};
  for (int i = 0; i < 16; i++) cache[i] = 0.25f * (float)i - 1.0f;
  h3_host_tensor in[3] = {{"cache", g->inputs[0]->type, cache, 64},
                          {"x", g->inputs[1]->type, x, 16},
                          {"slot", g->inputs[2]->type, slot, 8}};
  h3_host_tensor out[3];
  CHECK(h3_runtime_run(rt, g, in, out, &d) == H3_OK, "run");
  h3_diag_print(&d, stderr);
  float big[16], kv[8], kv2[8];
  for (int i = 0; i < 16; i++) big[i] = cache[i] + cache[i];
  for (int i = 0; i < 8; i++) kv[i] = big[8 + i], kv2[i] = cache[i];
  for (int t = 0; t < 2; t++)
    for (int k = 0; k < 2; k++) {
      kv[slot[t] * 2 + k] = x[t * 2 + k] * x[t * 2 + k];
      kv2[slot[t] * 2 + k] = x[t * 2 + k] * x[t * 2 + k];
    }
  for (int i = 0; i < 8; i++) big[8 + i] = kv[i];
  if (!d.errors) {
    CHECK(memcmp(out[0].data, big, 64) == 0, "set_index over the indexed row");
    CHECK(memcmp(out[1].data, kv, 32) == 0, "reshape of the in-place kv_write over an index view");
    CHECK(memcmp(out[2].data, kv2, 32) == 0, "kv_write placed over its other operand");
    for (int i = 0; i < 3; i++) free(out[i].data);
  }
  h3_runtime_free(rt);
  h3_weights_free(w);
  h3_backend_free(b);
  h3_module_free(m);
  h3_diag_free(&d);
}

static void test_backend_names(void) {
  h3_diag d;
  h3_diag_init(&d);
  CHECK(h3_backend_create("cuda", NULL, &d) == NULL, "cuda must fail in this build");
  CHECK(d.head && strstr(d.head->message, "CUDA backend not available in this build/no GPU found"),
        "message: %s", d.head ? d.head->message : "(none)");
  h3_diag_free(&d);
  h3_diag_init(&d);
  CHECK(h3_backend_create("tpu", NULL, &d) == NULL && d.head &&
            strstr(d.head->message, "unknown backend 'tpu'"),
        "unknown backend");
  h3_diag_free(&d);
  h3_diag_init(&d);
  h3_backend *b = h3_backend_create("auto", NULL, &d);
  CHECK(b && strcmp(b->ops->name, "cpu") == 0, "auto must pick cpu without a CUDA backend");
  h3_backend_free(b);
  h3_diag_free(&d);
}

static void test_percentiles(void) {
  double v[10] = {5, 1, 9, 3, 7, 2, 8, 4, 10, 6};
  CHECK(h3_percentile(v, 10, 50) == 5 && h3_percentile(v, 10, 90) == 9 &&
            h3_percentile(v, 10, 99) == 10 && h3_percentile(v, 10, 0) == 1,
        "nearest-rank percentiles");
}

/* h3_backend_gemm_tuning through a backend extension (the cpu backend has none), and the
 * report's line for a process that timed shapes, one that only read choices, and none. */
static void fake_tuning(h3_backend *b, int64_t *timed, int64_t *read, double *seconds) {
  (void)b;
  *timed = 3, *read = 5, *seconds = 2.25;
}

static void test_report_gemm_tuning(void) {
  h3_diag d;
  h3_diag_init(&d);
  h3_backend *b = h3_backend_cpu_new(NULL, &d);
  CHECK(b, "cpu backend");
  if (!b) return;
  int64_t timed = -1, read = -1;
  double seconds = -1;
  CHECK(!h3_backend_gemm_tuning(b, &timed, &read, &seconds) && timed == 0 && read == 0 && seconds == 0,
        "the cpu backend tunes nothing: %lld %lld %g", (long long)timed, (long long)read, seconds);
  static const h3_backend_ext ext = {.gemm_tuning = fake_tuning};
  b->ext = &ext;
  CHECK(h3_backend_gemm_tuning(b, &timed, &read, &seconds) && timed == 3 && read == 5 && seconds == 2.25,
        "the extension's counts: %lld %lld %g", (long long)timed, (long long)read, seconds);
  b->ext = NULL;
  h3_backend_free(b);
  char text[512] = {0};
  FILE *f = fmemopen(text, sizeof text - 1, "w");
  h3_report_print_gemm_tuning(f, 3, 5, 2.25, "  ");
  h3_report_print_gemm_tuning(f, 0, 7, 0, "  ");
  h3_report_print_gemm_tuning(f, 0, 0, 0, "  ");  /* nothing tuned: no line */
  h3_report_print_gemm_tuning(f, -1, 9, 0, "  "); /* no tuning at all: no line */
  fclose(f);
  CHECK(strstr(text, "  GEMM tuning: 3 shapes timed in this process (2.2 s), 5 choices read from the kernel cache; "
                     "a process that times shapes can run slower than a later one on the same choices: "
                     "compare the runs after it\n") == text,
        "the timing line: %s", text);
  const char *second = strchr(text, '\n');
  CHECK(second && !strcmp(second + 1, "  GEMM tuning: 7 choices read from the kernel cache\n"),
        "the cache line, and nothing after it: %s", text);
  h3_diag_free(&d);
}

/* h3_report_print_uncaptured through a backend extension that names two graphs it never
 * records: one by an op of its own (with its source place), one by its call of another. */
static const h3_module *uncaptured_module;
static int fake_uncaptured(h3_backend *b, const h3_graph **graphs, const h3_op **why, int max) {
  (void)b;
  const h3_graph *g = h3_module_graph(uncaptured_module, "g"), *top = h3_module_graph(uncaptured_module, "top");
  if (max >= 2) {
    graphs[0] = g, why[0] = g->body.first;
    graphs[1] = top, why[1] = top->body.first;
  }
  return 2;
}

static void test_report_uncaptured(void) {
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = parse("module @t config \"tiny\" {\n"
                       "  program @top(%x: f32[4], %r: i32[]) -> (y: f32[]) {\n"
                       "    %y = call(%x, %r) {callee = \"g\"} : f32[]\n"
                       "    return %y\n"
                       "  }\n"
                       "  graph @g(%x: f32[4], %r: i32[]) -> (y: f32[]) {\n"
                       "    %y = index(%x, %r) : f32[]\n"
                       "    return %y\n"
                       "  }\n"
                       "}\n", &d);
  CHECK(m, "parse");
  if (!m) return;
  uncaptured_module = m;
  h3_backend *b = h3_backend_cpu_new(NULL, &d);
  static const h3_backend_ext ext = {.graph_uncaptured = fake_uncaptured};
  char text[512] = {0};
  FILE *f = fmemopen(text, sizeof text - 1, "w");
  h3_report_print_uncaptured(f, b, "  "); /* the cpu backend records no calls: nothing */
  b->ext = &ext;
  h3_report_print_uncaptured(f, b, "  ");
  fclose(f);
  CHECK(strstr(text, "  not captured: g (index at t.ir:7:10 reads the device on the host)\n") == text,
        "the op's line: %s", text);
  CHECK(strstr(text, "  not captured: top (its call of 'g' at t.ir:3:10 reads the device on the host)\n"),
        "the call's line: %s", text);
  b->ext = NULL;
  h3_backend_free(b);
  h3_module_free(m);
  h3_diag_free(&d);
}

/* A plan whose value sits at an offset near 2^63: offset + bytes wraps below the arena's
 * size, and must be refused with a message, not bound (then written) out of bounds. */
static void test_offset_wrap(void) {
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = parse("module @t config \"tiny\" {\n"
                       "  graph @g(%x: f32[4]) -> (y: f32[4]) attrs {arena_bytes = 256} {\n"
                       "    %y = add(%x, %x) : f32[4] at 9223372036854775800\n"
                       "    return %y\n"
                       "  }\n"
                       "}\n", &d);
  CHECK(m, "parse");
  if (!m) return;
  h3_backend *b = h3_backend_cpu_new(NULL, &d);
  h3_weights *w = h3_weights_random(m, 0, &d);
  h3_runtime *rt = h3_runtime_new(m, b, w, NULL, &d);
  const h3_graph *g = h3_module_graph(m, "g");
  float x[4] = {1, 2, 3, 4};
  h3_host_tensor in[1] = {{"x", g->inputs[0]->type, x, 16}}, out[1] = {{0}};
  CHECK(h3_runtime_run(rt, g, in, out, &d) == H3_ERR, "an offset past the arena must fail");
  CHECK(d.head && strstr(d.head->message, "lies outside the 256-byte arena"), "message: %s",
        d.head ? d.head->message : "(none)");
  h3_runtime_free(rt);
  h3_weights_free(w);
  h3_backend_free(b);
  h3_module_free(m);
  h3_diag_free(&d);
}

int main(void) {
  test_program();
  test_counter_uploads();
  test_index_error();
  test_aliasing();
  test_offset_wrap();
  test_backend_names();
  test_percentiles();
  test_report_uncaptured();
  test_report_gemm_tuning();
  if (failures) {
    fprintf(stderr, "test_exec: %d of %d checks failed\n", failures, checks);
    return 1;
  }
  printf("test_exec: %d checks passed\n", checks);
  return 0;
}
