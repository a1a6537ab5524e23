/* test_infer.c: the registry and type inference of every op of ops.def, through
 * h3_build_op: result types on valid operands and the exact one-line reason on invalid
 * ones (the front end shows these to users). Expected types are written from the
 * ops.def contracts by hand; elementwise shapes are also checked on random shapes
 * against the broadcast rule.
 */
#include "check.h"
#include "h3/op_registry.h"

#include <stdlib.h>

static h3_module *M;
static h3_graph *G;

/* "bf16[8, 64]" -> type (test-local reader, independent of the IR text parser). */
static h3_type ty(const char *s) {
  h3_type t = {0};
  char name[8] = {0};
  int k = 0;
  while (*s == ' ') s++;
  while (*s && *s != '[' && k < 7) name[k++] = *s++;
  if (!h3_dtype_from_name(name, &t.dtype)) abort();
  s++;
  while (*s && *s != ']') {
    char *end;
    t.dims[t.rank++] = strtoll(s, &end, 10);
    s = end;
    while (*s == ',' || *s == ' ') s++;
  }
  return t;
}

/* Builds op `code` on fresh inputs of the ';'-separated types; returns the result types
 * joined by "; " or "error: MESSAGE". */
static const char *run(h3_opcode code, const char *types, int na, const h3_attr *attrs) {
  static char out[512];
  h3_value *ops[8];
  int n = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", types);
  for (char *tok = strtok(buf, ";"); tok; tok = strtok(NULL, ";"))
    ops[n++] = h3_graph_add_input(M, G, NULL, ty(tok), (h3_span){0});
  h3_builder b = {M, &G->body, NULL, {0}};
  h3_diag d;
  h3_diag_init(&d);
  h3_op *op = h3_build_op(&b, code, n, ops, na, attrs, h3_op_info_get(code)->n_regions, &d);
  if (!op) {
    snprintf(out, sizeof out, "error: %s", d.head ? d.head->message : "(none)");
  } else {
    h3_strbuf s;
    h3_strbuf_init(&s);
    for (int i = 0; i < op->n_results; i++) {
      if (i) h3_strbuf_append(&s, "; ");
      h3_type_print(&s, &op->results[i]->type);
      CHECK(op->results[i]->offset == -1 && op->results[i]->def == op);
    }
    snprintf(out, sizeof out, "%s", s.data ? s.data : "");
    h3_strbuf_free(&s);
  }
  h3_diag_free(&d);
  return out;
}

#define AI(n, v) h3_attr_int(M, n, v)
#define AF(n, v) h3_attr_float(M, n, v)
#define AS(n, v) h3_attr_string(M, n, v)
#define AD(n, v) h3_attr_dtype(M, n, v)
#define RUN(code, types, ...) \
  run(H3_OP_##code, types, (int)(sizeof((h3_attr[]){{0}, __VA_ARGS__}) / sizeof(h3_attr)) - 1, \
      (h3_attr[]){{0}, __VA_ARGS__} + 1)
#define RUN0(code, types) run(H3_OP_##code, types, 0, NULL)

static h3_attr ints(const char *n, int k, const int64_t *v) { return h3_attr_ints(M, n, k, v); }

static void test_registry(void) {
  for (int c = 1; c < H3_OPCODE_COUNT; c++) {
    const h3_op_info *i = h3_op_info_get((h3_opcode)c);
    CHECK(i && i->code == (h3_opcode)c && i->name);
    CHECK(h3_op_info_find(i->name) == i);
    CHECK_STR(h3_opcode_name((h3_opcode)c), i->name);
    CHECK((i->infer == NULL) == (i->kind == H3_PK_CONTROL));
  }
  CHECK(h3_op_info_get(H3_OPCODE_INVALID) == NULL && h3_op_info_find("nope") == NULL);
  CHECK(h3_op_is_elementwise(H3_OP_ADD) && !h3_op_is_elementwise(H3_OP_LINEAR));
  CHECK(h3_op_info_get(H3_OP_MARKOV_DRAFT)->kind == H3_PK_OPAQUE);
  CHECK(h3_op_info_get(H3_OP_LOOP)->n_regions == 1 && h3_op_info_get(H3_OP_FUSED)->n_regions == 1);
}

static void test_attrs_and_counts(void) {
  CHECK_STR(RUN0(RMS_NORM, "bf16[8, 64]; bf16[64]"), "error: rms_norm: missing attribute 'eps' (a float)");
  CHECK_STR(RUN(RMS_NORM, "bf16[8, 64]; bf16[64]", AI("eps", 1)),
            "error: rms_norm: attribute 'eps' must be a float, got an int");
  CHECK_STR(RUN(RMS_NORM, "bf16[8, 64]; bf16[64]", AF("eps", 1e-6), AF("epsilon", 1)),
            "error: rms_norm: unknown attribute 'epsilon' (it takes eps, offset, dtype)");
  CHECK_STR(RUN(ADD, "f32[2]; f32[2]", AI("axis", 1)), "error: add: unknown attribute 'axis' (it takes dtype)");
  CHECK_STR(RUN(ARGMAX, "f32[2]", AI("axis", 1)), "error: argmax: unknown attribute 'axis' (it takes none)");
  /* any op may carry side-streams' marks; 1 is their only value, and control flow takes no side */
  CHECK_STR(RUN(ADD, "f32[2]; f32[2]", AI("side", 1), AI("join", 1)), "f32[2]");
  CHECK_STR(RUN(ADD, "f32[2]; f32[2]", AI("side", 2)), "error: add: attribute 'side' must be 1 (leave it out for 0)");
  CHECK_STR(RUN(ADD, "f32[2]; f32[2]", AS("join", "yes")), "error: add: attribute 'join' must be an int, got a string");
  CHECK_STR(RUN(LINEAR, "bf16[1, 8]; bf16[4, 8]", AI("beside", 1)), "bf16[1, 4]");
  CHECK_STR(RUN(LINEAR, "bf16[1, 8]; bf16[4, 8]", AI("beside", 0)),
            "error: linear: attribute 'beside' must be 1 (leave it out for 0)");
  CHECK_STR(RUN(YIELD, "f32[2]", AI("side", 1)),
            "error: yield: attribute 'side' marks an op that runs as kernels, not control flow");
  CHECK_STR(RUN0(ADD, "f32[2]"), "error: add: takes 2 operands, got 1");
  CHECK_STR(RUN0(LINEAR, "f32[2, 3]"), "error: linear: takes 2 to 3 operands, got 1");
  CHECK_STR(RUN(CONCAT, "", AI("axis", 0)), "error: concat: takes at least 1 operands, got 0");
  CHECK_STR(RUN(LOOP, "f32[2]", AI("count", 2)), "error: loop: result types come from its region; build it with h3_build_op_typed");
  CHECK_STR(RUN(CALL, "f32[2]", AS("callee", "g")), "error: call: result types come from its callee; build it with h3_build_op_typed");
  CHECK_STR(RUN(FUSED, "f32[2]", AS("kernel", "k"), h3_attr_tier(M, "tier", H3_TIER_EXACT)),
            "error: fused: result types come from its region; build it with h3_build_op_typed");
  CHECK_STR(RUN0(YIELD, "f32[2]; i32[]"), "");
  CHECK_STR(RUN0(RETURN, ""), "");
  h3_attr bad = AD("dtype", H3_F32);
  bad.i = 99;
  CHECK_STR(run(H3_OP_CAST, "f32[2]", 1, &bad), "error: cast: attribute 'dtype' holds no dtype (99)");
}

static void test_generators(void) {
  int64_t sh[2] = {3, 4}, neg[1] = {-1}, big[7] = {1, 1, 1, 1, 1, 1, 1};
  CHECK_STR(RUN(CONST, "", AF("value", 1.5), AD("dtype", H3_BF16), ints("shape", 2, sh)), "bf16[3, 4]");
  CHECK_STR(RUN(CONST, "", AF("value", 0), AD("dtype", H3_F32)), "f32[]");
  CHECK_STR(RUN(CONST, "", AF("value", 0), AD("dtype", H3_F32), ints("shape", 1, neg)), "error: const: shape[0] = -1 is negative");
  CHECK_STR(RUN(CONST, "", AF("value", 0), AD("dtype", H3_F32), ints("shape", 7, big)),
            "error: const: shape has 7 dims, at most 6 are supported");
  CHECK_STR(RUN(IOTA, "", AI("n", 5)), "i32[5]");
  CHECK_STR(RUN(IOTA, "", AI("n", 5), AD("dtype", H3_I64)), "i64[5]");
  CHECK_STR(RUN(IOTA, "", AI("n", -5)), "error: iota: n = -5 is negative");
  CHECK_STR(RUN(RANDN, "", ints("shape", 2, sh), AS("stream", "noise")), "f32[3, 4]");
  CHECK_STR(RUN(RANDN, "", ints("shape", 2, sh)), "error: randn: missing attribute 'stream' (a string)");
  CHECK_STR(RUN(SIGMA_SCHEDULE, "", AI("n", 50), AF("shift", 5.0)), "f32[50]");
  CHECK_STR(RUN(SIGMA_SCHEDULE, "", AI("n", 1), AF("shift", 5.0)), "error: sigma_schedule: n = 1, needs at least 2 steps");
}

static void test_elementwise(void) {
  static const h3_opcode bin[] = {H3_OP_ADD, H3_OP_SUB, H3_OP_MUL, H3_OP_DIV, H3_OP_MAX, H3_OP_MIN};
  for (size_t i = 0; i < sizeof bin / sizeof bin[0]; i++) {
    CHECK_STR(run(bin[i], "bf16[8, 1, 64]; f32[5, 1]", 0, NULL), "f32[8, 5, 64]");
    h3_attr dt = AD("dtype", H3_BF16);
    CHECK_STR(run(bin[i], "f32[4]; f32[]", 1, &dt), "bf16[4]");
  }
  CHECK_STR(RUN0(ADD, "bf16[8, 64]; bf16[8, 48]"),
            "error: add: cannot broadcast bf16[8, 64] with bf16[8, 48] (dim 1 from the end: 64 vs 48)");
  CHECK_STR(RUN0(MUL, "f32[3, 4, 5]; f32[2, 1, 5]"),
            "error: mul: cannot broadcast f32[3, 4, 5] with f32[2, 1, 5] (dim 3 from the end: 3 vs 2)");
  CHECK_STR(RUN0(MOD, "i32[4]; i64[1]"), "i64[4]");
  CHECK_STR(RUN0(MOD, "i32[4]; f32[4]"), "error: mod: needs integer tensors, got i32[4] and f32[4]");
  CHECK_STR(RUN0(ADD, "i8[2]; u8[2]"), "i32[2]");
  static const h3_opcode fl[] = {H3_OP_EXP, H3_OP_LOG, H3_OP_SQRT, H3_OP_RSQRT, H3_OP_SILU, H3_OP_SIGMOID, H3_OP_TANH, H3_OP_COS, H3_OP_SIN};
  for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++) {
    CHECK_STR(run(fl[i], "bf16[2, 3]", 0, NULL), "bf16[2, 3]");
    h3_attr dt = AD("dtype", H3_F32);
    CHECK_STR(run(fl[i], "i32[2]", 1, &dt), "f32[2]");
  }
  CHECK_STR(RUN0(EXP, "i32[2]"), "error: exp: x is i32[2] but exp needs a float result (cast x or set dtype)");
  CHECK_STR(RUN0(NEG, "i32[2]"), "i32[2]");
  CHECK_STR(RUN0(ABS, "f16[]"), "f16[]");
  CHECK_STR(RUN(CLAMP, "f32[3]", AF("lo", -1), AF("hi", 1)), "f32[3]");
  CHECK_STR(RUN(CLAMP, "f32[3]", AF("hi", 1)), "f32[3]");
  CHECK_STR(RUN(CLAMP, "f32[3]", AF("lo", 2), AF("hi", 1)), "error: clamp: lo = 2 is above hi = 1");
  CHECK_STR(RUN(CAST, "f32[3, 2]", AD("dtype", H3_BF16)), "bf16[3, 2]");
  CHECK_STR(RUN0(CAST, "f32[3, 2]"), "error: cast: missing attribute 'dtype' (a dtype)");
  /* random shapes: the result is the broadcast shape */
  for (int it = 0; it < 300; it++) {
    h3_type a = {.dtype = H3_F32, .rank = (int)check_range(0, 3)}, b = {.dtype = H3_BF16, .rank = (int)check_range(0, 3)};
    for (int i = 0; i < a.rank; i++) a.dims[i] = check_range(1, 2);
    for (int i = 0; i < b.rank; i++) b.dims[i] = check_range(1, 2);
    h3_value *ops[2] = {h3_graph_add_input(M, G, NULL, a, (h3_span){0}), h3_graph_add_input(M, G, NULL, b, (h3_span){0})};
    h3_builder bl = {M, &G->body, NULL, {0}};
    h3_diag d;
    h3_diag_init(&d);
    h3_op *op = h3_build_op(&bl, H3_OP_SUB, 2, ops, 0, NULL, 0, &d);
    h3_type want;
    int rc = h3_broadcast_shapes(&a, &b, &want);
    CHECK((op != NULL) == (rc == 0));
    if (op && rc == 0) CHECK(h3_type_equal(&op->results[0]->type, &want) && want.dtype == H3_F32);
    h3_diag_free(&d);
  }
}

static void test_movement(void) {
  int64_t s1[2] = {4, 16}, s2[2] = {4, 15};
  CHECK_STR(RUN(RESHAPE, "bf16[8, 8]", ints("shape", 2, s1)), "bf16[4, 16]");
  CHECK_STR(RUN(RESHAPE, "bf16[8, 8]", ints("shape", 2, s2)),
            "error: reshape: x is bf16[8, 8] (64 elements) but shape [4, 15] holds 60");
  CHECK_STR(RUN(SLICE, "f32[8, 192]", AI("axis", 1), AI("start", 64), AI("len", 64)), "f32[8, 64]");
  CHECK_STR(RUN(SLICE, "f32[8, 192]", AI("axis", 1), AI("start", 150), AI("len", 64)),
            "error: slice: [150, 214) is outside axis 1 of x f32[8, 192] (size 192)");
  CHECK_STR(RUN(SLICE, "f32[8, 192]", AI("axis", -1), AI("start", 0), AI("len", 1)),
            "error: slice: axis -1 is out of range for rank 2 (the IR takes 0 <= axis < rank)");
  CHECK_STR(RUN(CONCAT, "f32[2, 3]; f32[2, 5]; f32[2, 1]", AI("axis", 1)), "f32[2, 9]");
  CHECK_STR(RUN(CONCAT, "f32[2, 3]; f32[3, 5]", AI("axis", 1)),
            "error: concat: input 1 is f32[3, 5] but input 0 is f32[2, 3] (dims other than axis 1 must match)");
  CHECK_STR(RUN(CONCAT, "f32[2, 3]; bf16[2, 3]", AI("axis", 0)),
            "error: concat: input 1 is bf16[2, 3] but input 0 is f32[2, 3] (same dtype and rank needed)");
  CHECK_STR(RUN(PAD, "f32[5, 3]", AI("axis", 0), AI("after", 3)), "f32[8, 3]");
  CHECK_STR(RUN(PAD, "f32[5, 3]", AI("axis", 0), AI("after", -3)), "error: pad: after = -3 is negative");
  CHECK_STR(RUN0(GATHER, "bf16[100, 64]; i32[2, 7]"), "bf16[2, 7, 64]");
  CHECK_STR(RUN0(GATHER, "bf16[100, 64]; i64[7]"), "error: gather: idx must be i32, got i64[7]");
  CHECK_STR(RUN0(INDEX, "bf16[2, 192, 64]; i32[]"), "bf16[192, 64]");
  CHECK_STR(RUN(INDEX, "bf16[2, 192, 64]; i32[]", AI("offset", 1)), "bf16[192, 64]");
  CHECK_STR(RUN0(INDEX, "bf16[2, 192, 64]; i32[1]"), "error: index: i must be i32[], got i32[1]");
  CHECK_STR(RUN0(INDEX, "bf16[]; i32[]"), "error: index: x must be [N, ..], got bf16[]");
  CHECK_STR(RUN0(SET_INDEX, "f32[4, 8]; i32[]; f32[8]"), "f32[4, 8]");
  CHECK_STR(RUN0(SET_INDEX, "f32[4, 8]; i32[]; bf16[8]"), "error: set_index: v is bf16[8] but a row of x f32[4, 8] is f32[8]");
  CHECK_STR(RUN0(SCATTER_ROWS, "f32[10, 4, 2]; i32[3]; f32[3, 4, 2]"), "f32[10, 4, 2]");
  CHECK_STR(RUN0(SCATTER_ROWS, "f32[10, 4, 2]; i32[3]; f32[2, 4, 2]"),
            "error: scatter_rows: v is f32[2, 4, 2] but x f32[10, 4, 2] with idx i32[3] needs f32[3, 4, 2]");
}

/* sample_tokens(logits f32[R, V], temperature f32[R], seed i32[R], pos i32[R]) -> (token
 * i32[R], margin f32[R]): operand types, then the results or the message */
static void test_sample_tokens(void) {
  static const char *const cases[][2] = {
      {"f32[4, 100]; f32[4]; i32[4]; i32[4]", "i32[4]; f32[4]"},
      {"f32[1, 1]; f32[1]; i32[1]; i32[1]", "i32[1]; f32[1]"},
      {"bf16[4, 100]; f32[4]; i32[4]; i32[4]", "logits must be f32[R, V] with V >= 1, got bf16[4, 100]"},
      {"f32[100]; f32[1]; i32[1]; i32[1]", "logits must be f32[R, V] with V >= 1, got f32[100]"},
      {"f32[4, 0]; f32[4]; i32[4]; i32[4]", "logits must be f32[R, V] with V >= 1, got f32[4, 0]"},
      {"f32[4, 100]; bf16[4]; i32[4]; i32[4]", "temperature must be f32[R], got bf16[4]"},
      {"f32[4, 100]; f32[3]; i32[4]; i32[4]", "logits has R = 4 but temperature has R = 3 (temperature is [R])"},
      {"f32[4, 100]; f32[4]; i64[4]; i32[4]", "seed must be i32[R], got i64[4]"},
      {"f32[4, 100]; f32[4]; i32[4]; i32[4, 1]", "pos must be i32[R], got i32[4, 1]"},
      {"f32[4, 100]; f32[4]; i32[4]; i32[5]", "logits has R = 4 but pos has R = 5 (pos is [R])"},
      {"f32[4, 100]; f32[4]; i32[4]", "takes 4 operands, got 3"}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char want[160];
    const bool ok = strncmp(cases[i][1], "i32[", 4) == 0;
    snprintf(want, sizeof want, "%s%s", ok ? "" : "error: sample_tokens: ", cases[i][1]);
    CHECK_STR(RUN0(SAMPLE_TOKENS, cases[i][0]), want);
  }
}

static void test_reductions(void) {
  CHECK_STR(RUN(RMS_NORM, "bf16[8, 64]; bf16[64]", AF("eps", 1e-6)), "bf16[8, 64]");
  CHECK_STR(RUN(RMS_NORM, "bf16[8, 64]; bf16[64]", AF("eps", 1e-6), AF("offset", 1), AD("dtype", H3_F32)), "f32[8, 64]");
  CHECK_STR(RUN(RMS_NORM, "bf16[8, 64]; bf16[48]", AF("eps", 1e-6)), "error: rms_norm: x has D = 64 but w is bf16[48] (w is [D])");
  CHECK_STR(RUN0(ARGMAX, "f32[4, 100]"), "i32[4]");
  CHECK_STR(RUN0(ARGMAX, "f32[4, 0]"), "error: argmax: x must be [.., N] with N >= 1, got f32[4, 0]");
  CHECK_STR(RUN0(REDUCE_SUM, "bf16[2, 3, 4]"), "bf16[2, 3]");
  CHECK_STR(RUN(REDUCE_SUM, "bf16[4]", AD("dtype", H3_F32)), "f32[]");
  CHECK_STR(RUN0(LINEAR, "bf16[8, 64]; bf16[192, 64]"), "bf16[8, 192]");
  CHECK_STR(RUN0(LINEAR, "bf16[2, 8, 64]; bf16[192, 64]; bf16[192]"), "bf16[2, 8, 192]");
  CHECK_STR(RUN(LINEAR, "bf16[8, 64]; bf16[192, 64]", AD("dtype", H3_F32)), "f32[8, 192]");
  CHECK_STR(RUN0(LINEAR, "bf16[8, 64]; bf16[192, 48]"), "error: linear: x has K = 64 but w has K = 48 (w is [N, K])");
  CHECK_STR(RUN0(LINEAR, "bf16[8, 64]; bf16[64]"), "error: linear: w must be [N, K], got bf16[64]");
  CHECK_STR(RUN0(LINEAR, "bf16[8, 64]; bf16[192, 64]; bf16[64]"),
            "error: linear: w has N = 192 but bias is bf16[64] (bias is [N])");
}

static void test_model_ops(void) {
  CHECK_STR(RUN(TIMESTEP_EMBEDDING, "f32[2]", AI("dim", 256)), "f32[2, 256]");
  CHECK_STR(RUN(TIMESTEP_EMBEDDING, "f32[2]", AI("dim", 255)), "error: timestep_embedding: dim = 255 must be even and positive");
  CHECK_STR(RUN0(ROPE_TABLE, "f32[40, 3]; f32[4]"), "bf16[40, 12]; bf16[40, 12]");
  CHECK_STR(RUN(ROPE_TABLE, "f32[40, 3]; f32[4]", AD("dtype", H3_F32)), "f32[40, 12]; f32[40, 12]");
  CHECK_STR(RUN0(ROPE_TABLE, "f32[40]; f32[4]"), "error: rope_table: pos must be [S, A] (rank 2), got f32[40]");
  CHECK_STR(RUN(ROPE_POS_TABLE, "i32[9]", AF("theta", 1e6), AI("dims", 64)), "f32[9, 32]; f32[9, 32]");
  CHECK_STR(RUN(ROPE_POS_TABLE, "f32[9]", AF("theta", 1e6), AI("dims", 64)), "error: rope_pos_table: pos must be i32[T], got f32[9]");
  CHECK_STR(RUN0(ROPE, "bf16[9, 4, 16]; f32[9, 4]; f32[9, 4]"), "bf16[9, 4, 16]");
  CHECK_STR(RUN0(ROPE, "bf16[9, 4, 16]; f32[9, 10]; f32[9, 10]"),
            "error: rope: cos f32[9, 10] rotates R = 20 dims but x has D = 16 (x is [T, H, D])");
  CHECK_STR(RUN0(ROPE, "bf16[9, 4, 16]; f32[8, 4]; f32[8, 4]"), "error: rope: x has T = 9 but cos has T = 8 (cos is [T, R/2])");
  int64_t seg[2] = {3, 9}, badseg[2] = {5, 3};
  CHECK_STR(RUN(ATTENTION, "bf16[9, 8, 16]; bf16[9, 2, 16]; bf16[9, 2, 16]", AF("scale", 0.25), ints("segments", 2, seg)), "bf16[9, 8, 16]");
  CHECK_STR(RUN(ATTENTION, "bf16[9, 8, 16]; bf16[9, 3, 16]; bf16[9, 3, 16]", AF("scale", 0.25)),
            "error: attention: q has Hq = 8 heads, not a multiple of k's Hk = 3");
  CHECK_STR(RUN(ATTENTION, "bf16[9, 8, 16]; bf16[9, 2, 8]; bf16[9, 2, 8]", AF("scale", 0.25)),
            "error: attention: q has D = 16 but k has D = 8");
  CHECK_STR(RUN(ATTENTION, "bf16[9, 8, 16]; bf16[9, 2, 16]; bf16[9, 2, 16]", AF("scale", 0.25), ints("segments", 2, badseg)),
            "error: attention: segments must ascend strictly within [0, T = 9], got 3 at position 1");
  CHECK_STR(RUN(ATTENTION, "bf16[9, 8, 16]; bf16[9, 2, 16]; bf16[9, 2, 16]", AF("scale", 0.25), AI("causal", 2)),
            "error: attention: causal = 2, expected 0 or 1");
  CHECK_STR(RUN0(KV_WRITE, "bf16[6, 8, 2, 16]; bf16[5, 2, 16]; i32[5]"), "bf16[6, 8, 2, 16]");
  CHECK_STR(RUN0(KV_WRITE, "bf16[6, 8, 2, 16]; bf16[5, 2, 16]; i32[4]"), "error: kv_write: x has T = 5 but slot has T = 4 (slot is [T])");
  CHECK_STR(RUN0(KV_WRITE, "bf16[6, 8, 2, 16]; bf16[5, 3, 16]; i32[5]"),
            "error: kv_write: x is bf16[5, 3, 16] but cache bf16[6, 8, 2, 16] needs rows of the same dtype and shape (x is [T, ..])");
  const char *paged = "bf16[5, 8, 16]; bf16[6, 8, 2, 16]; bf16[6, 8, 2, 16]; i32[5]; i32[3]";
  CHECK_STR(RUN(PAGED_ATTENTION, paged, AF("scale", 0.25), AI("page", 8)), "bf16[5, 8, 16]");
  CHECK_STR(RUN(PAGED_ATTENTION, paged, AF("scale", 0.25), AI("page", 4)),
            "error: paged_attention: page = 4 but kc has page = 8 (kc is [P, page, Hk, D])");
  CHECK_STR(RUN(PAGED_ATTENTION, "bf16[5, 8, 16]; bf16[6, 8, 2, 16]; bf16[6, 8, 2, 16]; i32[4]; i32[3]", AF("scale", 0.25), AI("page", 8)),
            "error: paged_attention: q has T = 5 but pos has T = 4 (pos is [T])");
  const char *blk = "bf16[4, 8, 16]; bf16[6, 8, 2, 16]; bf16[6, 8, 2, 16]; i32[]; i32[3]; bf16[4, 2, 16]; bf16[4, 2, 16]";
  CHECK_STR(RUN(BLOCK_ATTENTION, blk, AF("scale", 0.25), AI("page", 8)), "bf16[4, 8, 16]");
  CHECK_STR(RUN(BLOCK_ATTENTION, "bf16[4, 8, 16]; bf16[6, 8, 2, 16]; bf16[6, 8, 2, 16]; i32[1]; i32[3]; bf16[4, 2, 16]; bf16[4, 2, 16]", AF("scale", 0.25), AI("page", 8)),
            "error: block_attention: ctx_len must be i32[] or i32[T] (T = 4), got i32[1]");
  /* batched drafts: ctx_len and a table per row, blocks of block_rows rows */
  const char *blk2 = "bf16[4, 8, 16]; bf16[6, 8, 2, 16]; bf16[6, 8, 2, 16]; i32[4]; i32[4, 3]; bf16[4, 2, 16]; bf16[4, 2, 16]";
  CHECK_STR(RUN(BLOCK_ATTENTION, blk2, AF("scale", 0.25), AI("page", 8), AI("block_rows", 2)), "bf16[4, 8, 16]");
  CHECK_STR(RUN(BLOCK_ATTENTION, blk2, AF("scale", 0.25), AI("page", 8), AI("block_rows", 3)),
            "error: block_attention: block_rows = 3 must divide the 4 rows");
  CHECK_STR(RUN(BLOCK_ATTENTION, "bf16[4, 8, 16]; bf16[6, 8, 2, 16]; bf16[6, 8, 2, 16]; i32[4]; i32[3, 3]; bf16[4, 2, 16]; bf16[4, 2, 16]", AF("scale", 0.25), AI("page", 8)),
            "error: block_attention: page_table i32[3, 3] has 3 tables for T = 4 rows (the tables must divide the rows)");
  /* 2 sequences of 2 rows: rows 0-1 read table 0, rows 2-3 table 1 */
  CHECK_STR(RUN(BLOCK_ATTENTION, "bf16[4, 8, 16]; bf16[6, 8, 2, 16]; bf16[6, 8, 2, 16]; i32[4]; i32[2, 3]; bf16[4, 2, 16]; bf16[4, 2, 16]", AF("scale", 0.25), AI("page", 8)),
            "bf16[4, 8, 16]");
  CHECK_STR(RUN(INDEX_TOPK, "bf16[5, 2, 16]; bf16[6, 8, 16]; i32[5]; i32[3]", AI("block", 8), AI("topk", 4)), "i32[5, 2, 4]");
  CHECK_STR(RUN(INDEX_TOPK, "bf16[5, 2, 16]; bf16[6, 8, 32]; i32[5]; i32[3]", AI("block", 8), AI("topk", 4)),
            "error: index_topk: iq has D = 16 but ikc has D = 32 (ikc is [P, page, D])");
  const char *sp = "bf16[5, 8, 16]; bf16[6, 8, 2, 16]; bf16[6, 8, 2, 16]; i32[5, 2, 4]; i32[5]; i32[3]";
  CHECK_STR(RUN(SPARSE_ATTENTION, sp, AF("scale", 0.25), AI("page", 8)), "bf16[5, 8, 16]");
  CHECK_STR(RUN(SPARSE_ATTENTION, "bf16[5, 8, 16]; bf16[6, 8, 2, 16]; bf16[6, 8, 2, 16]; i32[5, 4, 4]; i32[5]; i32[3]", AF("scale", 0.25), AI("page", 8)),
            "error: sparse_attention: kc has Hk = 2 but sel has Hk = 4 (sel is [T, Hk, topk])");
  CHECK_STR(RUN(ROUTER_TOPK, "bf16[5, 64]; f32[16, 64]; f32[16]", AI("k", 4), AF("scale", 2.5)), "i32[5, 4]; f32[5, 4]");
  CHECK_STR(RUN(ROUTER_TOPK, "bf16[5, 64]; f32[16, 64]; f32[16]", AI("k", 17), AF("scale", 2.5)),
            "error: router_topk: k = 17 must be in [1, E = 16]");
  CHECK_STR(RUN(ROUTER_TOPK, "bf16[5, 64]; bf16[16, 64]; f32[16]", AI("k", 4), AF("scale", 2.5)),
            "error: router_topk: w must be f32[E, H], got bf16[16, 64]");
  const char *moe = "bf16[5, 64]; bf16[16, 96, 64]; bf16[16, 64, 48]; i32[5, 4]; f32[5, 4]";
  CHECK_STR(RUN(MOE, moe, AF("alpha", 1.702), AF("limit", 7)), "f32[5, 64]");
  CHECK_STR(RUN(MOE, "bf16[5, 64]; bf16[16, 96, 64]; bf16[16, 64, 40]; i32[5, 4]; f32[5, 4]", AF("alpha", 1.702), AF("limit", 7)),
            "error: moe: gate_up has 2F = 96 but down has F = 40 (down is [E, H, F])");
  CHECK_STR(RUN0(MARKOV_DRAFT, "f32[4, 100]; bf16[100, 8]; bf16[100, 8]; i32[]"), "f32[4, 100]; i32[4]");
  CHECK_STR(RUN0(MARKOV_DRAFT, "f32[6, 100]; bf16[100, 8]; bf16[100, 8]; i32[3]"), "f32[6, 100]; i32[6]");
  CHECK_STR(RUN0(MARKOV_DRAFT, "f32[6, 100]; bf16[100, 8]; bf16[100, 8]; i32[4]"),
            "error: markov_draft: prev must be i32[] or i32[S] with S dividing the 6 rows, got i32[4]");
  CHECK_STR(RUN0(SPEC_ACCEPT, "f32[10, 50]; i32[8]; f32[2]; i32[2]; i32[2]"), "i32[2]; i32[2, 5]; f32[2, 5]");
  CHECK_STR(RUN0(SPEC_ACCEPT, "f32[9, 50]; i32[8]; f32[2]; i32[2]; i32[2]"),
            "error: spec_accept: 2 sequences need logits of S*(G+1) rows and a draft of S*G, got f32[9, 50] and i32[8]");
  CHECK_STR(RUN0(SPEC_ACCEPT, "f32[10, 50]; i32[8]; f32[2]; i32[2]; i32[3]"),
            "error: spec_accept: temperature has S = 2 but pos has S = 3 (pos is [S])");
  CHECK_STR(RUN0(MARKOV_DRAFT, "f32[4, 100]; bf16[99, 8]; bf16[99, 8]; i32[]"),
            "error: markov_draft: base has V = 100 but w1 has V = 99 (w1 is [V, r])");
}

/* shard and the collectives: split axes divide by ranks, axes in range, 1 <= ranks <= 64 */
static void test_collectives(void) {
  CHECK_STR(RUN(SHARD, "bf16[64, 64]", AI("ranks", 4), AI("axis", 0)), "bf16[16, 64]");
  CHECK_STR(RUN(SHARD, "bf16[64, 6]", AI("ranks", 4), AI("axis", 1)),
            "error: shard: x bf16[64, 6] has 6 entries along axis 1, not a multiple of ranks = 4");
  CHECK_STR(RUN(ALL_GATHER, "f32[16, 8]", AI("ranks", 4), AI("axis", 0)), "f32[64, 8]");
  CHECK_STR(RUN(ALL_GATHER, "f32[16, 8]", AI("ranks", 4), AI("axis", 2)),
            "error: all_gather: axis = 2 is not an axis of x f32[16, 8] (0 <= axis < rank)");
  CHECK_STR(RUN(ALL_TO_ALL, "bf16[16, 4, 16]", AI("ranks", 4), AI("split_axis", 1), AI("concat_axis", 0)),
            "bf16[64, 1, 16]");
  CHECK_STR(RUN(ALL_TO_ALL, "bf16[16, 4, 16]", AI("ranks", 2), AI("split_axis", 1), AI("concat_axis", 1)),
            "error: all_to_all: split_axis and concat_axis are both 1; they must differ");
  CHECK_STR(RUN(ALL_TO_ALL, "bf16[16, 4, 16]", AI("ranks", 3), AI("split_axis", 1), AI("concat_axis", 0)),
            "error: all_to_all: x bf16[16, 4, 16] has 4 entries along axis 1, not a multiple of ranks = 3");
  CHECK_STR(RUN(ALL_REDUCE, "f32[2, 8]", AI("ranks", 8)), "f32[2, 8]");
  CHECK_STR(RUN(ALL_REDUCE, "f32[2, 8]", AI("ranks", 0)), "error: all_reduce: ranks = 0, expected 1 to 64");
  CHECK_STR(RUN(ALL_REDUCE, "f32[2, 8]", AI("ranks", 65)), "error: all_reduce: ranks = 65, expected 1 to 64");
  CHECK_STR(RUN0(ALL_REDUCE, "f32[2, 8]"), "error: all_reduce: missing attribute 'ranks' (an int)");
}

int main(void) {
  M = h3_module_new("test", "tiny");
  G = h3_module_add_graph(M, "g", H3_GRAPH_FUNCTION, (h3_span){0});
  test_registry();
  test_attrs_and_counts();
  test_generators();
  test_elementwise();
  test_movement();
  test_reductions();
  test_sample_tokens();
  test_model_ops();
  test_collectives();
  h3_module_free(M);
  return check_report("test_infer");
}
