/* test_emit.c: kernel emission for every kernel kind (tests/codegen/all_ops.ir: small,
 * odd and broadcast shapes, every dtype family), checked for deterministic names and
 * sources, launch rules, argument lists, exact-vs-lossless differences, and compiled
 * with NVRTC (no GPU needed) in one translation unit and one by one.
 */
#include "cg_test.h"

#include <nvrtc.h>

static h3_op *find_op(cg_oplist *l, const char *result_name) {
  for (int i = 0; i < l->n; i++)
    if (l->ops[i]->n_results && l->ops[i]->results[0]->name &&
        strcmp(l->ops[i]->results[0]->name, result_name) == 0)
      return l->ops[i];
  return NULL;
}

int main(void) {
  h3_module *m = cg_load_ir("all_ops.ir");
  CHECK(m != NULL);
  if (!m) return cg_report("test_emit");
  cg_oplist ops = cg_kernel_ops(m);
  CHECK(ops.n >= 50);

  h3_arena a;
  h3_arena_init(&a);
  h3_kernel *ks = calloc((size_t)ops.n, sizeof(h3_kernel));
  h3_strbuf tu;
  h3_strbuf_init(&tu);
  h3_strbuf_append(&tu, h3_kernel_prelude());
  for (int i = 0; i < ops.n; i++) {
    h3_diag d;
    h3_diag_init(&d);
    h3_op *op = ops.ops[i];
    const char *opname = h3_opcode_name(op->code);
    h3_status st = h3_codegen_emit_op(op, H3_TIER_EXACT, &a, &ks[i], &d);
    if (st != H3_OK) {
      fprintf(stderr, "emit failed for %s:\n", opname);
      h3_diag_print(&d, stderr);
    }
    CHECK(st == H3_OK);
    h3_diag_free(&d);
    if (st != H3_OK) continue;
    h3_kernel *k = &ks[i];
    /* name = h3_<op>_<10 hex>, re-derivable from the source */
    CHECK(strncmp(k->name, "h3_", 3) == 0);
    CHECK_STR(k->op, opname);
    CHECK(h3_kernel_name_matches(k->name, k->op, k->source));
    CHECK(strstr(k->source, k->name) != NULL);
    CHECK(strstr(k->source, "@K@") == NULL);
    char sha[65];
    h3_sha256_hex(k->source, strlen(k->source), sha);
    CHECK_STR(sha, k->sha256);
    /* deterministic: emitting again gives the same bytes */
    h3_kernel k2;
    h3_diag_init(&d);
    CHECK(h3_codegen_emit_op(op, H3_TIER_EXACT, &a, &k2, &d) == H3_OK);
    h3_diag_free(&d);
    CHECK_STR(k2.source, k->source);
    CHECK_STR(k2.name, k->name);
    /* launch rule and arguments */
    /* argmax / sample_tokens over few long rows: grid (rows, splits) */
    const bool split = op->code == H3_OP_ARGMAX || op->code == H3_OP_SAMPLE_TOKENS;
    CHECK(k->grid[0] >= 1 && k->grid[1] >= 1 && (split || k->grid[1] == 1) && k->grid[2] == 1);
    if (split && op->operands[0]->type.dims[op->operands[0]->type.rank - 1] >= 65536)
      CHECK(k->grid[1] > 1 && strstr(k->source, "h3_last_block") != NULL);
    CHECK(k->block[0] >= 32 && k->block[0] <= 1024 && k->block[0] % 32 == 0);
    int want_args = op->code == H3_OP_FUSED ? op->regions[0].n_args + op->n_results
                                            : op->n_operands + op->n_results;
    if (op->code == H3_OP_RANDN) want_args++;
    CHECK(k->n_args == want_args);
    char lb[64];
    snprintf(lb, sizeof lb, "__launch_bounds__(%lld)", (long long)k->block[0]);
    CHECK(strstr(k->source, lb) != NULL);
    /* each kernel compiles alone with the prelude */
    h3_strbuf one;
    h3_strbuf_init(&one);
    h3_strbuf_append(&one, h3_kernel_prelude());
    h3_strbuf_append(&one, k->source);
    char *log = NULL;
    int ok = cg_compile_tu(one.data, k->tier == H3_TIER_EXACT, &log);
    if (!ok) fprintf(stderr, "kernel %s does not compile:\n%s\n", k->name, log ? log : "");
    CHECK(ok);
    free(log);
    h3_strbuf_free(&one);
    bool dup = false;
    for (int j = 0; j < i; j++)
      if (ks[j].name && strcmp(ks[j].name, k->name) == 0) dup = true;
    if (!dup) h3_strbuf_append(&tu, k->source);
  }
  /* everything in one translation unit */
  char *log = NULL;
  CHECK(cg_compile_tu(tu.data, true, &log));
  if (log) fprintf(stderr, "%s\n", log);
  free(log);

  /* specific properties */
  h3_op *fx = NULL, *fl = NULL;
  for (int i = 0; i < ops.n; i++)
    if (ops.ops[i]->code == H3_OP_FUSED) {
      h3_tier t = h3_op_attr_tier(ops.ops[i], "tier", H3_TIER_HIGH);
      if (t == H3_TIER_EXACT && ops.ops[i]->n_results == 2) fx = ops.ops[i];
      if (t == H3_TIER_LOSSLESS && ops.ops[i]->n_results == 2) fl = ops.ops[i]; /* add, silu, mul */
    }
  CHECK(fx && fl);
  if (fx && fl) {
    h3_kernel kx, kl;
    h3_diag d;
    h3_diag_init(&d);
    CHECK(h3_codegen_emit_op(fx, H3_TIER_LOSSLESS, &a, &kx, &d) == H3_OK); /* attr wins */
    CHECK(h3_codegen_emit_op(fl, H3_TIER_EXACT, &a, &kl, &d) == H3_OK);
    h3_diag_free(&d);
    CHECK_STR(h3_tier_name(kx.tier), "exact");
    CHECK_STR(h3_tier_name(kl.tier), "lossless");
    CHECK(strcmp(kx.name, kl.name) != 0);
    /* exact rounds the intermediates in registers, lossless keeps them in fp32 */
    CHECK(strstr(kx.source, "h3_rbf16(h3_add(") != NULL);
    CHECK(strstr(kx.source, "h3_rbf16(h3_silu(") != NULL);
    CHECK(strstr(kl.source, "h3_rbf16") == NULL);
    CHECK(strstr(kl.source, "h3_add(") != NULL && strstr(kl.source, "h3_silu(") != NULL);
    /* both vectorise: [8, 64] bf16 has a multiple-of-8 innermost dim */
    CHECK(strstr(kx.source, "h3_ld8(in0, base") != NULL);
    CHECK(strstr(kx.source, "h3_st8(out0, base") != NULL);
    CHECK(strstr(kx.source, "h3_st8(out1, base") != NULL);
    CHECK(kx.grid[0] == 1 && kx.block[0] == 256); /* 512 elements / 8 per thread */
  }
  /* odd shapes fall back to scalar code; broadcasting maps indices */
  h3_op *sq = find_op(&ops, "sqrt"), *sub = find_op(&ops, "sub");
  CHECK(sq && sub);
  if (sq && sub) {
    h3_kernel k;
    h3_diag d;
    h3_diag_init(&d);
    CHECK(h3_codegen_emit_op(sq, H3_TIER_EXACT, &a, &k, &d) == H3_OK);
    CHECK(strstr(k.source, "h3_ld8") == NULL || strstr(k.source, "h3_ld8(in") == NULL);
    CHECK(strstr(k.source, "const ix_t n = 15;") != NULL);
    CHECK(h3_codegen_emit_op(sub, H3_TIER_EXACT, &a, &k, &d) == H3_OK);
    CHECK(strstr(k.source, "(i % 5)") != NULL); /* d[5] broadcast over c[3, 5] */
    h3_diag_free(&d);
  }
  /* slices inside fused regions: aligned ones are vector loads at the source offset,
   * misaligned (start 3 on the last axis) and slices of slices read scalars */
  h3_op *swx = find_op(&ops, "swx"), *smix = find_op(&ops, "smix"), *s3d = find_op(&ops, "s3d");
  CHECK(swx && smix && s3d);
  if (swx && smix && s3d) {
    h3_kernel k;
    h3_diag d;
    h3_diag_init(&d);
    CHECK(h3_codegen_emit_op(swx, H3_TIER_EXACT, &a, &k, &d) == H3_OK);
    CHECK(strstr(k.source, "h3_ld8(in0, (((base) / 64) * 128 + (base) % 64 + 0), s0v);") != NULL);
    CHECK(strstr(k.source, "h3_ld8(in0, (((base) / 64) * 128 + (base) % 64 + 64), s1v);") != NULL);
    CHECK(strstr(k.source, "h3_ld(") == NULL); /* no scalar reads */
    CHECK(h3_codegen_emit_op(smix, H3_TIER_EXACT, &a, &k, &d) == H3_OK);
    CHECK(strstr(k.source, "h3_ld8(in1") == NULL); /* [4, 1000] from column 3 */
    CHECK(strstr(k.source, "(((i) / 64) * 1000 + (i) % 64 + 3)") != NULL);
    CHECK(strstr(k.source, "h3_ld8(in0, ((base) + 128), s0v);") != NULL);   /* rows [2, 6) */
    CHECK(strstr(k.source, "h3_ld8(in0, ((((base % 64))) + 448), s1v);") != NULL); /* row 7 */
    CHECK(h3_codegen_emit_op(s3d, H3_TIER_EXACT, &a, &k, &d) == H3_OK);
    CHECK(strstr(k.source, "h3_ld8(in0, (((base) / 32) * 64 + (base) % 32 + 16), s0v);") != NULL);
    CHECK(strstr(k.source, "h3_ld(in0, ") != NULL); /* the slice of a slice */
    h3_diag_free(&d);
  }
  /* reductions: deterministic butterfly; rms_norm rows of one warp's width go 8 to a block */
  h3_op *rms = find_op(&ops, "rms1"), *am = find_op(&ops, "argmax1");
  CHECK(rms && am);
  if (rms && am) {
    h3_kernel k;
    h3_diag d;
    h3_diag_init(&d);
    CHECK(h3_codegen_emit_op(rms, H3_TIER_EXACT, &a, &k, &d) == H3_OK);
    CHECK(k.grid[0] == 1 && k.block[0] == 256); /* 8 rows of 64 = 8 chunks: a warp each */
    CHECK(strstr(k.source, "__shfl_xor_sync") != NULL);
    CHECK(strstr(k.source, "atomic") == NULL);
    CHECK(h3_codegen_emit_op(am, H3_TIER_EXACT, &a, &k, &d) == H3_OK);
    CHECK(k.grid[0] == 4 && k.block[0] == 128); /* 1000 = 125 chunks of 8 */
    h3_diag_free(&d);
  }
  /* in-place writers and randn's seed */
  h3_op *kvw = find_op(&ops, "kvw"), *rn = find_op(&ops, "noise");
  CHECK(kvw && rn);
  if (kvw && rn) {
    h3_kernel k;
    h3_diag d;
    h3_diag_init(&d);
    CHECK(h3_codegen_emit_op(kvw, H3_TIER_EXACT, &a, &k, &d) == H3_OK);
    CHECK(k.inplace && k.grid[0] == 8);
    CHECK(h3_codegen_emit_op(rn, H3_TIER_EXACT, &a, &k, &d) == H3_OK);
    CHECK(k.n_args == 2 && strcmp(k.args[0], "out0") == 0 && strcmp(k.args[1], "seed") == 0);
    CHECK(strstr(k.source, "h3_rng_normal(seed, ") != NULL);
    h3_diag_free(&d);
  }
  /* a view is not a kernel; an op the backend runs elsewhere is refused with a message */
  CHECK(h3_kernel_prelude() != NULL && strstr(h3_kernel_prelude(), "h3_philox4x32_10") != NULL);

  h3_strbuf_free(&tu);
  free(ks);
  free(ops.ops);
  h3_arena_free(&a);
  h3_module_free(m);
  return cg_report("test_emit");
}
