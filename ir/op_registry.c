/* op_registry.c: the registry entry of every op of ops.def (operand counts, region
 * count, attribute schema, inference) and the lookups, attribute checking, the checked
 * inference entry point and the in-place / view op kinds of op_registry.h.
 *
 * Every elementwise op takes an optional `dtype` attribute that overrides the promoted
 * result dtype (ops.def). Control ops have no infer fn: their result types come from
 * their region (loop, fused) or their callee (call), and yield/return have none.
 */
#include "op_infer.h"

#include <string.h>

#define A(n, k) {n, H3_ATTR_##k, true}
#define O(n, k) {n, H3_ATTR_##k, false}
#define DT O("dtype", DTYPE)
#define ENTRY(ID, MIN, MAX, NREG, INFER, ...) \
  [H3_OP_##ID] = {H3_OP_##ID, NULL, 0, MIN, MAX, NREG, {__VA_ARGS__}, INFER}

/* The ENTRY lines give each op's schema; the ops.def expansion at the end adds its name
 * and pattern kind to the same element (a member-wise designated override). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
static const h3_op_info table[H3_OPCODE_COUNT] = {
    ENTRY(LOOP, 0, -1, 1, NULL, A("count", INT), O("label", STRING)),
    ENTRY(YIELD, 0, -1, 0, NULL, {0}),
    ENTRY(RETURN, 0, -1, 0, NULL, {0}),
    ENTRY(CALL, 0, -1, 0, NULL, A("callee", STRING)),
    ENTRY(FUSED, 0, -1, 1, NULL, O("kernel", STRING), A("tier", TIER), O("name", STRING)),
    ENTRY(CONST, 0, 0, 0, h3_infer_const, A("value", FLOAT), A("dtype", DTYPE), O("shape", INTS)),
    ENTRY(IOTA, 0, 0, 0, h3_infer_iota, A("n", INT), DT),
    ENTRY(RANDN, 0, 0, 0, h3_infer_randn, A("shape", INTS), A("stream", STRING)),
    ENTRY(SIGMA_SCHEDULE, 0, 0, 0, h3_infer_sigma_schedule, A("n", INT), A("shift", FLOAT)),
    ENTRY(ADD, 2, 2, 0, h3_infer_binary, DT),
    ENTRY(SUB, 2, 2, 0, h3_infer_binary, DT),
    ENTRY(MUL, 2, 2, 0, h3_infer_binary, DT),
    ENTRY(DIV, 2, 2, 0, h3_infer_binary, DT),
    ENTRY(MOD, 2, 2, 0, h3_infer_binary, DT),
    ENTRY(MAX, 2, 2, 0, h3_infer_binary, DT),
    ENTRY(MIN, 2, 2, 0, h3_infer_binary, DT),
    ENTRY(NEG, 1, 1, 0, h3_infer_unary, DT),
    ENTRY(EXP, 1, 1, 0, h3_infer_unary_float, DT),
    ENTRY(LOG, 1, 1, 0, h3_infer_unary_float, DT),
    ENTRY(SQRT, 1, 1, 0, h3_infer_unary_float, DT),
    ENTRY(RSQRT, 1, 1, 0, h3_infer_unary_float, DT),
    ENTRY(ABS, 1, 1, 0, h3_infer_unary, DT),
    ENTRY(SILU, 1, 1, 0, h3_infer_unary_float, DT),
    ENTRY(SIGMOID, 1, 1, 0, h3_infer_unary_float, DT),
    ENTRY(TANH, 1, 1, 0, h3_infer_unary_float, DT),
    ENTRY(COS, 1, 1, 0, h3_infer_unary_float, DT),
    ENTRY(SIN, 1, 1, 0, h3_infer_unary_float, DT),
    ENTRY(CLAMP, 1, 1, 0, h3_infer_clamp, O("lo", FLOAT), O("hi", FLOAT), DT),
    ENTRY(CAST, 1, 1, 0, h3_infer_cast, A("dtype", DTYPE)),
    ENTRY(RESHAPE, 1, 1, 0, h3_infer_reshape, A("shape", INTS)),
    ENTRY(SLICE, 1, 1, 0, h3_infer_slice, A("axis", INT), A("start", INT), A("len", INT)),
    ENTRY(CONCAT, 1, -1, 0, h3_infer_concat, A("axis", INT)),
    ENTRY(PAD, 1, 1, 0, h3_infer_pad, A("axis", INT), A("after", INT), O("value", FLOAT)),
    ENTRY(GATHER, 2, 2, 0, h3_infer_gather, {0}),
    ENTRY(INDEX, 2, 2, 0, h3_infer_index, O("offset", INT)),
    ENTRY(SET_INDEX, 3, 3, 0, h3_infer_set_index, O("offset", INT)),
    ENTRY(SCATTER_ROWS, 3, 3, 0, h3_infer_scatter_rows, {0}),
    ENTRY(RMS_NORM, 2, 2, 0, h3_infer_rms_norm, A("eps", FLOAT), O("offset", FLOAT), DT),
    ENTRY(ADD_RMS_NORM, 3, 3, 0, h3_infer_add_rms_norm, A("eps", FLOAT), O("offset", FLOAT)),
    ENTRY(ARGMAX, 1, 1, 0, h3_infer_argmax, {0}),
    ENTRY(SAMPLE_TOKENS, 4, 4, 0, h3_infer_sample_tokens, {0}),
    ENTRY(REDUCE_SUM, 1, 1, 0, h3_infer_reduce_sum, DT),
    ENTRY(NORM_MODULATE, 5, 5, 0, h3_infer_norm_modulate, A("eps", FLOAT), O("offset", FLOAT),
          A("tier", TIER), O("modulate", STRING), O("quantize", INT)),
    ENTRY(RESIDUAL_NORM_MODULATE, 7, 9, 0, h3_infer_residual_norm_modulate, A("eps", FLOAT),
          O("offset", FLOAT), A("tier", TIER), O("modulate", STRING), O("quantize", INT)),
    ENTRY(RMS_NORM_ROPE, 4, 7, 0, h3_infer_rms_norm_rope, A("start", INT), A("heads", INT),
          A("eps", FLOAT), O("offset", FLOAT), O("sage_quant", INT), O("segments", INTS)),
    ENTRY(RMS_NORM_ROPE_WRITE, 6, 8, 0, h3_infer_rms_norm_rope_write, A("start", INT),
          A("heads", INT), A("eps", FLOAT), O("offset", FLOAT), O("v_start", INT),
          O("q_start", INT), O("q_heads", INT)),
    ENTRY(LINEAR, 2, 3, 0, h3_infer_linear, DT),
    ENTRY(TIMESTEP_EMBEDDING, 1, 1, 0, h3_infer_timestep_embedding, A("dim", INT)),
    ENTRY(ROPE_TABLE, 2, 2, 0, h3_infer_rope_table, DT),
    ENTRY(ROPE_POS_TABLE, 1, 1, 0, h3_infer_rope_pos_table, A("theta", FLOAT), A("dims", INT)),
    ENTRY(ROPE, 3, 3, 0, h3_infer_rope, {0}),
    ENTRY(ATTENTION, 3, 3, 0, h3_infer_attention, A("scale", FLOAT), O("causal", INT),
          O("segments", INTS), O("v_view", INTS)),
    ENTRY(SAGE_ATTENTION, 3, 5, 0, h3_infer_sage_attention, A("scale", FLOAT), O("segments", INTS),
          O("pv", STRING), O("smooth", INT), O("v_view", INTS)),
    ENTRY(SOL_ATTENTION, 3, 3, 0, h3_infer_sol_attention, A("scale", FLOAT), O("segments", INTS),
          O("tau", FLOAT), O("thresh", STRING), O("sink_tokens", INT), O("sink_start", INT)),
    ENTRY(KV_WRITE, 3, 3, 0, h3_infer_kv_write, {0}),
    ENTRY(PAGED_ATTENTION, 5, 5, 0, h3_infer_paged_attention, A("scale", FLOAT), A("page", INT)),
    ENTRY(BLOCK_ATTENTION, 7, 7, 0, h3_infer_block_attention, A("scale", FLOAT), A("page", INT),
          O("block_rows", INT)),
    ENTRY(INDEX_TOPK, 4, 4, 0, h3_infer_index_topk, A("block", INT), A("topk", INT)),
    ENTRY(SPARSE_ATTENTION, 6, 6, 0, h3_infer_sparse_attention, A("scale", FLOAT), A("page", INT)),
    ENTRY(ROUTER_TOPK, 3, 3, 0, h3_infer_router_topk, A("k", INT), A("scale", FLOAT)),
    ENTRY(MOE, 5, 5, 0, h3_infer_moe, A("alpha", FLOAT), A("limit", FLOAT), O("ranks", INT)),
    ENTRY(MARKOV_DRAFT, 4, 4, 0, h3_infer_markov_draft, {0}),
    ENTRY(SPEC_ACCEPT, 5, 5, 0, h3_infer_spec_accept, {0}),
    ENTRY(QUANTIZE_ROWS, 1, 1, 0, h3_infer_quantize_rows, O("rotate", INT)),
    ENTRY(LINEAR_INT8, 4, 5, 0, h3_infer_linear_int8, DT, O("chunk_rows", INT)),
    ENTRY(LINEAR_NVFP4, 4, 4, 0, h3_infer_linear_nvfp4, DT),
    ENTRY(MATMUL_I8, 2, 2, 0, h3_infer_matmul_i8, O("chunk_rows", INT)),
    ENTRY(DEQUANT_I8, 3, 4, 0, h3_infer_dequant_i8, DT),
    ENTRY(SPECTRUM_UPDATE, 3, 3, 0, h3_infer_spectrum_update, A("coeffs", FLOATS)),
    ENTRY(SPECTRUM_FORECAST, 2, 3, 0, h3_infer_spectrum_forecast, A("coeffs", FLOATS), DT),
    ENTRY(CACHE_DIT_DECIDE, 4, 4, 0, h3_infer_cache_dit_decide, A("warmup", INT),
          A("threshold", FLOAT), A("max_consecutive", INT), O("offset", INT)),
    ENTRY(BRANCH, 1, -1, 0, NULL, A("then_callee", STRING), A("else_callee", STRING)),
    ENTRY(SHARD, 1, 1, 0, h3_infer_shard, A("ranks", INT), A("axis", INT)),
    ENTRY(ALL_GATHER, 1, 1, 0, h3_infer_all_gather, A("ranks", INT), A("axis", INT)),
    ENTRY(ALL_TO_ALL, 1, 1, 0, h3_infer_all_to_all, A("ranks", INT), A("split_axis", INT),
          A("concat_axis", INT)),
    ENTRY(ALL_REDUCE, 1, 1, 0, h3_infer_all_reduce, A("ranks", INT), DT),
#define H3_OP(ID, NAME, KIND) [H3_OP_##ID].name = NAME, [H3_OP_##ID].kind = KIND,
#include "h3/ops.def"
#undef H3_OP
};
#pragma GCC diagnostic pop

const h3_op_info *h3_op_info_get(h3_opcode code) {
  if (code <= H3_OPCODE_INVALID || code >= H3_OPCODE_COUNT) return NULL;
  return &table[code];
}

const h3_op_info *h3_op_info_find(const char *name) {
  for (int c = 1; c < H3_OPCODE_COUNT; c++)
    if (strcmp(table[c].name, name) == 0) return &table[c];
  return NULL;
}

bool h3_op_is_inplace(h3_opcode code) {
  return code == H3_OP_KV_WRITE || code == H3_OP_RMS_NORM_ROPE_WRITE || code == H3_OP_SET_INDEX ||
         code == H3_OP_SCATTER_ROWS || code == H3_OP_RESIDUAL_NORM_MODULATE ||
         code == H3_OP_SPECTRUM_UPDATE;
}

int h3_op_inplace_operand(const h3_op *op, int r) {
  if (!h3_op_is_inplace(op->code) || r < 0 || r >= op->n_results) return -1;
  if (r == 0) return op->n_operands > 0 ? 0 : -1;
  return op->code == H3_OP_RMS_NORM_ROPE_WRITE && r == 1 && op->n_operands >= 7 ? 6 : -1;
}

bool h3_op_is_collective(h3_opcode code) {
  return code == H3_OP_SHARD || code == H3_OP_ALL_GATHER || code == H3_OP_ALL_TO_ALL ||
         code == H3_OP_ALL_REDUCE;
}

bool h3_op_is_ranked(const h3_op *op) {
  return h3_op_is_collective(op->code) || (op->code == H3_OP_MOE && h3_op_attr(op, "ranks"));
}

static int find_ranks(h3_op *op, void *p) {
  if (!h3_op_is_ranked(op)) return 0;
  *(int *)p = (int)h3_op_attr_int(op, "ranks", 1);
  return 1;
}

int h3_module_ranks(const h3_module *m) {
  int ranks = 1;
  h3_module_walk((h3_module *)m, find_ranks, &ranks);
  return ranks;
}

bool h3_op_is_view(h3_opcode code) {
  return code == H3_OP_RESHAPE || code == H3_OP_SLICE || code == H3_OP_INDEX;
}

bool h3_op_is_control_flow(h3_opcode code) {
  const h3_op_info *i = h3_op_info_get(code);
  return i && i->kind == H3_PK_CONTROL && code != H3_OP_FUSED;
}

const char *h3_opcode_name(h3_opcode code) {
  const h3_op_info *i = h3_op_info_get(code);
  return i ? i->name : "?";
}

bool h3_op_is_elementwise(h3_opcode code) {
  const h3_op_info *i = h3_op_info_get(code);
  return i && i->kind == H3_PK_ELEMENTWISE;
}

static const char *attr_kind_name(h3_attr_kind k) {
  switch (k) {
  case H3_ATTR_INT: return "an int";
  case H3_ATTR_FLOAT: return "a float";
  case H3_ATTR_STRING: return "a string";
  case H3_ATTR_INTS: return "a list of ints";
  case H3_ATTR_FLOATS: return "a list of floats";
  case H3_ATTR_DTYPE: return "a dtype";
  case H3_ATTR_TIER: return "a tier: exact, lossless or high";
  }
  return "?";
}

int h3_op_check_attrs(const h3_op *op, char *why, size_t why_len) {
  const h3_op_info *info = h3_op_info_get(op->code);
  if (!info) FAIL("unknown opcode %d", (int)op->code);
  for (int i = 0; i < op->n_attrs; i++) {
    const h3_attr *a = &op->attrs[i];
    const h3_attr_schema *s = NULL;
    for (int j = 0; j < H3_MAX_ATTR_SCHEMA && info->attrs[j].name; j++)
      if (strcmp(info->attrs[j].name, a->name) == 0) s = &info->attrs[j];
    /* attributes any op may carry: codegen names its kernel or library call (`kernel`);
       side-streams puts it on the second stream (`side = 1`), makes the main stream wait
       for that stream's branch before it (`join = 1`) or marks it as running while the
       other stream has work (`beside = 1`: a backend leaves that work room on the card) */
    static const h3_attr_schema any_op_attrs[] = {{"kernel", H3_ATTR_STRING, false},
                                                  {"side", H3_ATTR_INT, false},
                                                  {"join", H3_ATTR_INT, false},
                                                  {"beside", H3_ATTR_INT, false}};
    for (size_t j = 0; !s && j < sizeof any_op_attrs / sizeof any_op_attrs[0]; j++)
      if (strcmp(a->name, any_op_attrs[j].name) == 0) s = &any_op_attrs[j];
    if (!s) {
      char list[160] = "";
      size_t n = 0;
      for (int j = 0; j < H3_MAX_ATTR_SCHEMA && info->attrs[j].name && n < sizeof list; j++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", j ? ", " : "", info->attrs[j].name);
      if (list[0]) FAIL("%s: unknown attribute '%s' (it takes %s)", info->name, a->name, list);
      FAIL("%s: unknown attribute '%s' (it takes none)", info->name, a->name);
    }
    if (s->kind != a->kind)
      FAIL("%s: attribute '%s' must be %s, got %s", info->name, a->name, attr_kind_name(s->kind), attr_kind_name(a->kind));
    if (a->kind == H3_ATTR_DTYPE && (a->i < 0 || a->i >= H3_DTYPE_COUNT))
      FAIL("%s: attribute '%s' holds no dtype (%lld)", info->name, a->name, LL(a->i));
    if (a->kind == H3_ATTR_TIER && (a->i < 0 || a->i > H3_TIER_HIGH))
      FAIL("%s: attribute '%s' holds no tier (%lld)", info->name, a->name, LL(a->i));
    if ((!strcmp(a->name, "side") || !strcmp(a->name, "join") || !strcmp(a->name, "beside")) &&
        a->kind == H3_ATTR_INT && a->i != 1)
      FAIL("%s: attribute '%s' must be 1 (leave it out for 0)", info->name, a->name);
    if (!strcmp(a->name, "side") && h3_op_is_control_flow(op->code))
      FAIL("%s: attribute 'side' marks an op that runs as kernels, not control flow", info->name);
    if (a->kind == H3_ATTR_STRING && !a->s) FAIL("%s: attribute '%s' has no text", info->name, a->name);
    for (int j = 0; j < i; j++)
      if (strcmp(op->attrs[j].name, a->name) == 0) FAIL("%s: attribute '%s' is given twice", info->name, a->name);
  }
  for (int j = 0; j < H3_MAX_ATTR_SCHEMA && info->attrs[j].name; j++)
    if (info->attrs[j].required && !h3_op_attr(op, info->attrs[j].name))
      FAIL("%s: missing attribute '%s' (%s)", info->name, info->attrs[j].name, attr_kind_name(info->attrs[j].kind));
  return 0;
}

int h3_op_check(const h3_op *op, char *why, size_t why_len) {
  const h3_op_info *info = h3_op_info_get(op->code);
  if (!info) FAIL("unknown opcode %d", (int)op->code);
  int n = op->n_operands;
  if (n < info->min_operands || (info->max_operands >= 0 && n > info->max_operands)) {
    if (info->min_operands == info->max_operands)
      FAIL("%s: takes %d operand%s, got %d", info->name, info->min_operands, info->min_operands == 1 ? "" : "s", n);
    if (info->max_operands < 0) FAIL("%s: takes at least %d operands, got %d", info->name, info->min_operands, n);
    FAIL("%s: takes %d to %d operands, got %d", info->name, info->min_operands, info->max_operands, n);
  }
  if (op->n_regions != info->n_regions)
    FAIL("%s: has %d region%s, expected %d", info->name, op->n_regions, op->n_regions == 1 ? "" : "s", info->n_regions);
  return h3_op_check_attrs(op, why, why_len);
}

int h3_op_infer(const h3_op *op, h3_type *out, char *why, size_t why_len) {
  if (h3_op_check(op, why, why_len)) return -1;
  const h3_op_info *info = h3_op_info_get(op->code);
  if (!info->infer) {
    if (op->code == H3_OP_YIELD || op->code == H3_OP_RETURN) return 0;
    FAIL("%s: result types come from its %s; build it with h3_build_op_typed", info->name, op->code == H3_OP_CALL ? "callee" : "region");
  }
  return info->infer(op, out, why, why_len);
}
