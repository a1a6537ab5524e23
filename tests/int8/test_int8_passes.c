/* test_int8_passes.c: the compile-time side of --int8 (no GPU, no weights):
 *   - the --int8 option text: defaults, every key, and each error;
 *   - the row-split decision (h3_int8_split_rows): measured table, rule, max_rows <= 0;
 *   - the full H3 model (models/minimax_h3.g, config full) through the default pipeline
 *     with int8-lowering, row-split and int8-dequant-split enabled as h3c --int8=rotate=256
 *     does (the split GEMMs are matmul_i8 ops then, carrying chunk_rows): 209 lowered
 *     layers holding 37.38 GiB of bf16 weights (both numbers computed here from the model's
 *     dims, docs/models/accelerations.md §4.1), 51 kept bf16 (K = 2688), 6 fp32-island layers, the
 *     int8 half, the pipeline order, and an activation arena without the weights in it;
 *   - H3_INT8_MAX_ROWS: <= 0 removes every split, a value re-splits, junk is an error.
 */
#include "h3/frontend.h"
#include "h3/int8.h"
#include "h3/op_registry.h"
#include "h3/passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/check.h"

/* Parses text; returns the first error message or "" (static buffer). */
static const char *parse(const char *text, h3_int8_options *o) {
  static char msg[256];
  h3_diag d;
  h3_diag_init(&d);
  h3_status st = h3_int8_options_parse(text, o, &d);
  snprintf(msg, sizeof msg, "%s", st == H3_OK ? "" : d.head ? d.head->message : "?");
  h3_diag_free(&d);
  return msg;
}

static void test_options(void) {
  h3_int8_options o;
  CHECK(!*parse(NULL, &o) && o.rotate == 0 && o.max_rows == 8192 && o.min_split_n == 8192 &&
            !o.rule_given, "defaults");
  CHECK(!*parse("", &o) && o.rotate == 0 && !o.rule_given, "empty text");
  CHECK(!*parse("rotate=256,max_rows=1024,min_split_n=0", &o) && o.rotate == 256 &&
            o.max_rows == 1024 && o.min_split_n == 0 && o.rule_given, "all keys");
  CHECK(!*parse("max_rows=-1", &o) && o.max_rows == -1, "max_rows <= 0 disables");
  const char *e;
  CHECK(strstr(e = parse("rotate=7", &o), "rotate = 7, expected 0 or 256"), "%s", e);
  CHECK(strstr(e = parse("rotat=256", &o), "unknown key 'rotat'"), "%s", e);
  CHECK(strstr(e = parse("max_rows=abc", &o), "max_rows = 'abc' is not an integer"), "%s", e);
  CHECK(strstr(e = parse("rotate", &o), "expected KEY=VALUE, got 'rotate'"), "%s", e);
  CHECK(strstr(e = parse("min_split_n=-3", &o), "min_split_n = -3 is negative"), "%s", e);
  CHECK(strstr(e = parse("rotate=256,", &o), "expected KEY=VALUE, got ''"), "%s", e);
}

static void test_split_rule(void) {
  h3_int8_options d = h3_int8_options_default(), r = d, off = d;
  r.rule_given = true;
  off.max_rows = 0;
  off.rule_given = true;
  const int64_t M = 32704; /* H3's packed rows at 1344x768x107 frames */
  /* the measured table (docs/int8.md, H200 2026-11-29) */
  CHECK(h3_int8_split_rows(M, 21504, 5376, &d) == 4096, "qkv_proj: measured gain at 4096");
  CHECK(h3_int8_split_rows(M, 5376, 7168, &d) == 0, "out_proj: measured no gain");
  CHECK(h3_int8_split_rows(M, 28672, 5376, &d) == 4096, "fc1: measured gain at 4096");
  CHECK(h3_int8_split_rows(M, 5376, 14336, &d) == 0, "fc2: measured no gain");
  CHECK(h3_int8_split_rows(4096, 28672, 5376, &d) == 0, "rows not > max_rows");
  /* shapes the table lacks: the default rule */
  CHECK(h3_int8_split_rows(M, 16384, 5376, &d) == 8192, "other shape, N >= 8192: split at 8192");
  CHECK(h3_int8_split_rows(M, 4096, 5376, &d) == 0, "other shape, N < 8192: not split");
  /* the rule when given: the public defaults, no table */
  CHECK(h3_int8_split_rows(M, 21504, 5376, &r) == 8192, "rule: qkv split");
  CHECK(h3_int8_split_rows(M, 5376, 7168, &r) == 0, "rule: out_proj not split");
  CHECK(h3_int8_split_rows(M, 21504, 5376, &off) == 0, "max_rows 0 disables");
}

/* Bytes of H3's lowered weights from its dims (docs/models/minimax_h3.md): per block qkv
 * [3*7168, 5376], out_proj [5376, 7168], fc1 [2*14336, 5376], fc2 [5376, 14336]; 50 DiT
 * + 2 refiner blocks; condition_proj [5376, 5120]; 2 bytes each. */
static int64_t h3_lowered_bytes(void) {
  const int64_t H = 5376, A = 7168, F = 14336, T = 5120;
  int64_t block = 3 * A * H + H * A + 2 * F * H + H * F;
  return 2 * (52 * block + H * T);
}

typedef struct {
  h3_module *m;
  const h3_op *by_n[4]; /* step's GEMMs by N: 21504, 5376 (K 7168), 28672, 5376 (K 14336) */
} full_h3;

static int find_gemms(h3_op *op, void *arg) {
  full_h3 *f = arg;
  const h3_value *w = h3_int8_gemm_weight(op); /* matmul_i8 after int8-dequant-split */
  if (!w || op->operands[0]->type.dims[0] != 32704) return 0;
  int64_t n = w->type.dims[0], k = w->type.dims[1];
  int i = n == 21504 ? 0 : n == 28672 ? 2 : k == 7168 ? 1 : 3;
  f->by_n[i] = op;
  return 0;
}

static int64_t chunk_of(const h3_op *op) { return op ? h3_op_attr_int(op, "chunk_rows", 0) : -1; }

static void test_full_h3(void) {
  h3_diag d;
  h3_diag_init(&d);
  h3_frontend_options fo = {.config = "full"};
  full_h3 f = {h3_frontend_load(H3_SOURCE_DIR "/models/minimax_h3.g", &fo, &d), {0}};
  CHECK(f.m != NULL, "the full H3 model does not load");
  if (!f.m) {
    h3_diag_print(&d, stderr);
    h3_diag_free(&d);
    return;
  }
  char *rep = NULL;
  size_t rep_len = 0;
  FILE *dump = open_memstream(&rep, &rep_len);
  h3_pass_options o = h3_pass_options_default();
  o.tier = H3_TIER_EXACT; /* leaves the pipeline small: norm fusions keep to their tiers */
  o.int8 = "rotate=256";
  o.enable = "int8-lowering,row-split,int8-dequant-split"; /* as h3c --int8 */
  o.report = true;
  o.dump = dump;
  const h3_pass *list[64];
  int n = 0;
  CHECK(h3_pass_pipeline_resolve(&o, list, 64, &n, &d) == H3_OK, "pipeline");
  int at_dce = -1, at_lower = -1, at_split = -1, at_dq = -1, at_fusion = -1;
  for (int i = 0; i < n; i++) {
    if (!strcmp(list[i]->name, "dce")) at_dce = i;
    if (!strcmp(list[i]->name, "int8-lowering")) at_lower = i;
    if (!strcmp(list[i]->name, "row-split")) at_split = i;
    if (!strcmp(list[i]->name, "int8-dequant-split")) at_dq = i;
    if (!strcmp(list[i]->name, "elementwise-fusion")) at_fusion = i;
  }
  CHECK(at_dce >= 0 && at_dce < at_lower && at_lower < at_split && at_split < at_dq &&
            at_dq < at_fusion,
        "pipeline order: dce %d, int8-lowering %d, row-split %d, int8-dequant-split %d, "
        "elementwise-fusion %d", at_dce, at_lower, at_split, at_dq, at_fusion);
  h3_status st = h3_pass_pipeline_run(f.m, &o, &d);
  fclose(dump);
  CHECK(st == H3_OK, "the pipeline failed");
  if (st != H3_OK) h3_diag_print(&d, stderr);
  fputs(rep ? rep : "", stdout);

  h3_int8_summary s;
  h3_int8_summarize(f.m, &s);
  int64_t want = h3_lowered_bytes();
  char gib[32], half[32];
  snprintf(gib, sizeof gib, "%.2f", (double)s.bf16_bytes / (1 << 30));
  snprintf(half, sizeof half, "%.2f", (double)s.int8_bytes / (1 << 30));
  printf("  full H3: %lld layers, %lld B = %s GiB bf16 -> %s GiB int8, %d GEMMs, %d split\n",
         (long long)s.n_layers, (long long)s.bf16_bytes, gib, half, s.n_gemms, s.n_split);
  CHECK(s.n_layers == 209, "lowered layers: %lld, want 209", (long long)s.n_layers);
  CHECK(s.bf16_bytes == want, "bf16 bytes %lld, want %lld", (long long)s.bf16_bytes, (long long)want);
  CHECK(!strcmp(gib, "37.38") && !strcmp(half, "18.69"), "GiB: %s -> %s", gib, half);
  CHECK(s.int8_bytes * 2 == s.bf16_bytes, "int8 bytes are not half");
  CHECK(s.rotate == 256, "rotate %d", s.rotate);
  CHECK(s.n_gemms == 9, "GEMM ops: %d (text: condition_proj + 4 refiner; step: 4)", s.n_gemms);
  CHECK(rep && strstr(rep, "int8-lowering: 9 linears lowered to int8 (209 layers, rotate 256)"),
        "report");
  CHECK(rep && strstr(rep, "kept (layers): K % 256 != 0: 51, other dtypes (fp32 islands): 6"),
        "the 50 + 1 AdaLN projections and the 6 fp32 linears stay");
  h3_module_walk(f.m, find_gemms, &f);
  CHECK(chunk_of(f.by_n[0]) == 4096 && chunk_of(f.by_n[1]) == 0 && chunk_of(f.by_n[2]) == 4096 &&
            chunk_of(f.by_n[3]) == 0,
        "step splits qkv %lld out %lld fc1 %lld fc2 %lld", (long long)chunk_of(f.by_n[0]),
        (long long)chunk_of(f.by_n[1]), (long long)chunk_of(f.by_n[2]), (long long)chunk_of(f.by_n[3]));
  const h3_attr *arena = h3_graph_attr(h3_module_graph(f.m, "step"), "arena_bytes");
  CHECK(arena && arena->i > 0 && arena->i < s.int8_bytes,
        "step's arena (%lld B) must not hold the int8 weights", arena ? (long long)arena->i : -1LL);

  /* H3_INT8_MAX_ROWS at load */
  bool applied = false;
  setenv("H3_INT8_MAX_ROWS", "0", 1);
  CHECK(h3_int8_apply_env(f.m, &applied, &d) == H3_OK && applied, "env 0");
  h3_int8_summarize(f.m, &s);
  CHECK(s.n_split == 0, "H3_INT8_MAX_ROWS=0 leaves %d GEMMs split", s.n_split);
  setenv("H3_INT8_MAX_ROWS", "1024", 1);
  CHECK(h3_int8_apply_env(f.m, &applied, &d) == H3_OK && applied, "env 1024");
  CHECK(chunk_of(f.by_n[0]) == 1024 && chunk_of(f.by_n[1]) == 0 && chunk_of(f.by_n[2]) == 1024 &&
            chunk_of(f.by_n[3]) == 0,
        "H3_INT8_MAX_ROWS=1024 with min_split_n 8192: qkv %lld out %lld fc1 %lld fc2 %lld",
        (long long)chunk_of(f.by_n[0]), (long long)chunk_of(f.by_n[1]),
        (long long)chunk_of(f.by_n[2]), (long long)chunk_of(f.by_n[3]));
  setenv("H3_INT8_MAX_ROWS", "12k", 1);
  h3_diag e;
  h3_diag_init(&e);
  CHECK(h3_int8_apply_env(f.m, &applied, &e) == H3_ERR && e.head &&
            strstr(e.head->message, "H3_INT8_MAX_ROWS = '12k' is not an integer"),
        "junk in H3_INT8_MAX_ROWS");
  h3_diag_free(&e);
  unsetenv("H3_INT8_MAX_ROWS");
  CHECK(h3_int8_apply_env(f.m, &applied, &d) == H3_OK && !applied, "unset: nothing applied");
  free(rep);
  h3_module_free(f.m);
  h3_diag_free(&d);
}

int main(void) {
  test_options();
  test_split_rule();
  test_full_h3();
  if (failures) {
    fprintf(stderr, "test_int8_passes: %d of %d checks failed\n", failures, checks);
    return 1;
  }
  printf("test_int8_passes: %d checks passed\n", checks);
  return 0;
}
