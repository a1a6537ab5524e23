/* test_plan.c: the plan format. Builds a plan from tests/plan/small.ir (grouped params
 * with an inner array, a loop, a fused group, library calls, a program), checks its
 * contents against the module, that reading and writing it again gives the same bytes
 * (in memory and through files), that the kernels compile through the cache, and that
 * corrupt, truncated, wrong-version and hand-edited plans are rejected with exact messages
 * at the right YAML line. Never crashes on any prefix of a valid plan.
 */
#include "../codegen/cg_test.h"
#include "h3/kernel.h"
#include "h3/plan.h"

#include <unistd.h>

static h3_plan *build_small(void) {
  h3_module *m = cg_load_ir(H3_SOURCE_DIR "/tests/plan/small.ir");
  if (!m) return NULL;
  const char *flags[] = {"--quality", "lossless", "--set", "layers=2"};
  const char *passes[] = {"verify", "dce", "elementwise-fusion", "memory-plan", "verify"};
  h3_plan_options o = {H3_TIER_LOSSLESS, "models/tiny.g", 4, flags, 5, passes, 0};
  h3_diag d;
  h3_diag_init(&d);
  h3_plan *p = NULL;
  if (h3_plan_build(&p, m, &o, &d) != H3_OK) h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  return p;
}

static char *to_yaml(const h3_plan *p) {
  h3_strbuf b;
  h3_strbuf_init(&b);
  if (h3_plan_to_yaml(p, &b) != H3_OK) {
    h3_strbuf_free(&b);
    return NULL;
  }
  return b.data;
}

/* 1-based line of the first occurrence of `needle` in text. */
static int line_of(const char *text, const char *needle) {
  const char *at = strstr(text, needle);
  if (!at) return -1;
  int line = 1;
  for (const char *p = text; p < at; p++) line += *p == '\n';
  return line;
}

/* text with the first `from` replaced by `to` (malloc'd). */
static char *edit(const char *text, const char *from, const char *to) {
  const char *at = strstr(text, from);
  if (!at) {
    fprintf(stderr, "edit: '%s' not found\n", from);
    return strdup(text);
  }
  size_t a = (size_t)(at - text), fl = strlen(from), tl = strlen(to), n = strlen(text);
  char *out = malloc(n - fl + tl + 1);
  memcpy(out, text, a);
  memcpy(out + a, to, tl);
  memcpy(out + a + tl, at + fl, n - a - fl + 1);
  return out;
}

/* Reads `text` expecting failure; checks the first error's message and line. */
static void expect_error(const char *name, const char *text, const char *msg, int line) {
  h3_diag d;
  h3_diag_init(&d);
  h3_plan *p = h3_plan_read_text("bad.plan", text, strlen(text), &d);
  CHECK(p == NULL);
  CHECK(d.errors >= 1);
  if (d.head) {
    if (strcmp(d.head->message, msg) != 0 || (line > 0 && d.head->span.line != line)) {
      fprintf(stderr, "case %s:\n", name);
      h3_diag_print(&d, stderr);
    }
    CHECK_STR(d.head->message, msg);
    CHECK(d.head->span.file && strcmp(d.head->span.file, "bad.plan") == 0);
    if (line > 0) CHECK(d.head->span.line == line);
  }
  h3_plan_free(p);
  h3_diag_free(&d);
}

static void test_contents(const h3_plan *p) {
  CHECK_STR(p->model, "tiny_model");
  CHECK_STR(p->config, "tiny");
  CHECK_STR(h3_tier_name(p->quality), "lossless");
  CHECK_STR(p->source, "models/tiny.g");
  CHECK(p->n_flags == 4 && p->n_passes == 5);
  CHECK_STR(p->arch, "sm_90");
  CHECK(p->n_config == 3 && p->config_entries[1].value == 64);
  /* weights: 2 + 2 + 2*3 + 1 tensors, names expanded per member */
  CHECK(p->n_weights == 11);
  CHECK_STR(p->weights[1].name, "blocks.1.attn.qkv_proj.weight");
  CHECK(p->weights[1].index == 1 && p->weights[1].type.rank == 2 && p->weights[1].type.dims[0] == 192);
  CHECK_STR(p->weights[4].name, "layers.3.mlp.experts.0.down_proj.weight");
  CHECK_STR(p->weights[8].name, "layers.4.mlp.experts.1.down_proj.weight");
  CHECK(p->weights[8].index == 4 && p->weights[8].bytes == 16 * 8 * 2);
  int64_t total = 0;
  for (int i = 0; i < p->n_weights; i++) total += p->weights[i].bytes;
  CHECK(total == p->weight_bytes && total == 2 * 192 * 64 * 2 + 2 * 64 * 2 + 6 * 256 + 128);
  /* memory and program */
  CHECK(p->n_memory == 2 && p->memory[0].arena_bytes == 8192 && p->memory[1].arena_bytes == -1);
  CHECK_STR(p->entry, "sample");
  CHECK(p->n_graphs == 2);
  /* library calls */
  CHECK(p->n_libcalls == 3);
  const h3_plan_libcall *lin = h3_plan_find_libcall(p, "cublaslt_0");
  const h3_plan_libcall *att = h3_plan_find_libcall(p, "attention_0");
  CHECK(lin && att && h3_plan_find_libcall(p, "host_0"));
  if (lin) CHECK(lin->n_operands == 2 && lin->results[0].dims[1] == 192);
  if (att) CHECK(att->n_attrs == 2 && strcmp(att->attrs[0].key, "scale") == 0 &&
                 strcmp(att->attrs[0].value, "0.25") == 0);
  /* kernels: rms_norm used twice is one kernel; the lossless group has its own unit */
  int rms = -1, fused = -1;
  for (int i = 0; i < p->n_kernels; i++) {
    if (strcmp(p->kernels[i].k.op, "rms_norm") == 0) rms = i;
    if (strcmp(p->kernels[i].k.op, "fused") == 0) fused = i;
  }
  CHECK(rms >= 0 && fused >= 0);
  if (rms >= 0 && fused >= 0) {
    CHECK(p->kernels[rms].uses == 2);
    CHECK_STR(h3_tier_name(p->kernels[fused].k.tier), "lossless");
    CHECK(p->kernels[rms].tu != p->kernels[fused].tu);
    CHECK(p->tus[p->kernels[fused].tu].n_options == 2);
    CHECK_STR(p->tus[p->kernels[rms].tu].options[2], "-fmad=false");
  }
  CHECK(p->n_tus == 2);
  /* every kernel op of the IR names its kernel */
  CHECK(strstr(p->ir_text, "kernel = \"cublaslt_0\"") != NULL);
  CHECK(strstr(p->ir_text, "kernel = \"host_0\"") != NULL);
  if (rms >= 0) {
    char want[128];
    snprintf(want, sizeof want, "kernel = \"%s\"", p->kernels[rms].k.name);
    CHECK(strstr(p->ir_text, want) != NULL);
  }
}

static void test_errors(const char *good) {
  char *t;
  char kname[64] = "";
  const char *kn = strstr(good, "\n- name: h3_");
  if (kn) sscanf(kn + 9, "%63s", kname);
  char buf[512];

  t = edit(good, "format_version: 1", "format_version: 2");
  expect_error("version", t, "plan format version 2 is not supported by this h3 (1); recompile with h3c", 2);
  free(t);
  t = edit(good, "format: h3-plan", "format: h3-plon");
  expect_error("format", t, "not an h3 plan: 'format' is 'h3-plon', expected 'h3-plan'", 1);
  free(t);
  t = edit(good, "h3_version: " H3_VERSION, "h3_version: 0.0.9");
  expect_error("h3 version", t, "the plan was written by h3 0.0.9, this is h3 " H3_VERSION "; recompile with h3c", 3);
  free(t);
  t = edit(good, "format_version: 1", "format_version: x");
  expect_error("version type", t, "'format_version' in the plan must be an integer, got 'x'", 2);
  free(t);
  /* truncated before the library calls */
  t = strdup(good);
  char *cut = strstr(t, "library_calls:");
  if (cut) *cut = 0;
  expect_error("truncated", t, "missing key 'library_calls' in the plan", 1);
  free(t);
  /* a kernel source edited by hand */
  snprintf(buf, sizeof buf, "extern \"C\" __global__ void __launch_bounds__(32) %s(", kname);
  t = edit(good, "ss = __fadd_rn(ss, __fmul_rn(v[c][k], v[c][k]))",
           "ss = __fadd_rn(ss, __fmul_rn(v[c][k], 2.0f))");
  snprintf(buf, sizeof buf, "kernel '%s': the source does not match its sha256 (the plan was edited or is corrupt)",
           kname);
  int src_line = line_of(good, "  source: |\n    // rms_norm");
  expect_error("source edited", t, buf, src_line);
  free(t);
  /* a key missing in a kernel */
  t = edit(good, "  grid: [1, 1, 1]\n", "");
  snprintf(buf, sizeof buf, "missing key 'grid' in kernel '%s'", kname);
  expect_error("missing grid", t, buf, line_of(good, "\n- name: h3_") + 1);
  free(t);
  t = edit(good, "  grid: [1, 1, 1]\n", "  grid: [1, 1]\n");
  snprintf(buf, sizeof buf, "'grid' in kernel '%s' must be a list of 3 integers, got 2 entries", kname);
  expect_error("short grid", t, buf, line_of(good, "  grid: [1, 1, 1]"));
  free(t);
  t = edit(good, "  tu: 0\n", "  tu: 7\n");
  snprintf(buf, sizeof buf, "kernel '%s': translation unit 7 does not exist", kname);
  expect_error("tu range", t, buf, line_of(good, "  tu: 0\n"));
  free(t);
  /* more arguments than a launch takes (an older h3c fused groups of any width) */
  char wide[512] = "  args: [";
  for (int i = 0; i < H3_KERNEL_MAX_ARGS; i++) strcat(wide, "in0, ");
  int n_args = H3_KERNEL_MAX_ARGS + 1; /* the first kernel's own, then more */
  for (const char *c = strstr(good, "  args: ["); c && *c != ']'; c++) n_args += *c == ',';
  t = edit(good, "  args: [", wide);
  snprintf(buf, sizeof buf, "kernel '%s': %d arguments; a launch takes at most %d", kname, n_args,
           H3_KERNEL_MAX_ARGS);
  expect_error("too many args", t, buf, line_of(good, "  args: ["));
  free(t);
  t = edit(good, "quality: lossless\n", "quality: lossless\nextra: 1\n");
  expect_error("unknown key", t, "unknown key 'extra' in the plan", line_of(good, "quality:") + 1);
  free(t);
  t = edit(good, "  count: 11\n", "  count: 12\n");
  expect_error("weight count", t, "weights: count is 12 but 11 tensors are listed", line_of(good, "  count: 11"));
  free(t);
  t = edit(good, "memory:\n- {graph: step", "memory:\n- {graph: [step");
  h3_diag d;
  h3_diag_init(&d);
  CHECK(h3_plan_read_text("bad.plan", t, strlen(t), &d) == NULL);
  CHECK(d.head && strncmp(d.head->message, "YAML syntax error: ", 19) == 0);
  h3_diag_free(&d);
  free(t);
  expect_error("empty", "", "the file is empty, not an h3 plan", 0);
  expect_error("not a map", "- a\n- b\n", "not an h3 plan: the top level must be a mapping", 1);
  t = malloc(strlen(good) + 32);
  sprintf(t, "%s---\nformat: h3-plan\n", good);
  expect_error("two documents", t, "the file holds more than one YAML document; a plan is one document", 1);
  free(t);
  /* the IR: a library call that does not exist, an IR syntax error at its plan line */
  t = edit(good, "{kernel = \"cublaslt_0\"}", "{kernel = \"cublaslt_9\"}");
  expect_error("ir kernel ref", t,
               "op 'linear' in graph 'step' names library call 'cublaslt_9', which the plan does not define",
               line_of(good, "%qkv = linear"));
  free(t);
  t = edit(good, "%qkv = linear(%n, %w)", "%qkv = linear(%n, %w");
  h3_diag_init(&d);
  CHECK(h3_plan_read_text("bad.plan", t, strlen(t), &d) == NULL);
  CHECK(d.head && strncmp(d.head->message, "in the plan's IR: ", 18) == 0);
  CHECK(d.head && d.head->span.line == line_of(good, "%qkv = linear"));
  h3_diag_free(&d);
  free(t);
}

int main(void) {
  h3_plan *p = build_small();
  CHECK(p != NULL);
  if (!p) return cg_report("test_plan");
  test_contents(p);
  char *y1 = to_yaml(p);
  CHECK(y1 != NULL);
  if (!y1) return cg_report("test_plan");

  /* read back: same contents, same bytes */
  h3_diag d;
  h3_diag_init(&d);
  h3_plan *q = h3_plan_read_text("mem.plan", y1, strlen(y1), &d);
  if (!q) h3_diag_print(&d, stderr);
  CHECK(q != NULL);
  if (q) {
    test_contents(q);
    char *y2 = to_yaml(q);
    CHECK(y2 && strcmp(y1, y2) == 0);
    free(y2);
  }

  /* through files (atomic write), and the kernels through the cache */
  char dir[] = "/tmp/h3_plan_test_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[256], cache[256];
  snprintf(path, sizeof path, "%s/small.plan", dir);
  snprintf(cache, sizeof cache, "%s/cache", dir);
  setenv("H3_KERNEL_CACHE_DIR", cache, 1);
  unsetenv("H3_KERNEL_CACHE");
  CHECK(h3_plan_write_file(p, path, &d) == H3_OK);
  h3_plan *r = h3_plan_read_file(path, &d);
  CHECK(r != NULL);
  if (r) {
    char *y3 = to_yaml(r);
    CHECK(y3 && strcmp(y1, y3) == 0);
    free(y3);
    CHECK(h3_plan_compile_kernels(r, &d) == H3_OK);
    for (int i = 0; i < r->n_tus; i++) CHECK(r->tus[i].cubin && r->tus[i].cubin_len > 0 && !r->tus[i].cache_hit);
    CHECK(h3_plan_compile_kernels(r, &d) == H3_OK);
    for (int i = 0; i < r->n_tus; i++) CHECK(r->tus[i].cubin && r->tus[i].cache_hit);
  }
  h3_plan_free(r);
  CHECK(d.errors == 0);
  if (d.errors) h3_diag_print(&d, stderr);
  h3_diag_free(&d);

  test_errors(y1);

  /* no prefix of a valid plan crashes the reader */
  size_t n = strlen(y1);
  int accepted = 0;
  for (int i = 0; i < 120; i++) {
    size_t len = n * (size_t)i / 120;
    h3_diag_init(&d);
    h3_plan *t = h3_plan_read_text("cut.plan", y1, len, &d);
    accepted += t != NULL;
    CHECK(t != NULL || d.errors > 0);
    h3_plan_free(t);
    h3_diag_free(&d);
  }
  CHECK(accepted == 0);

  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
  free(y1);
  h3_plan_free(q);
  h3_plan_free(p);
  return cg_report("test_plan");
}
