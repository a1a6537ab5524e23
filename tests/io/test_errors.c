/* test_errors.c: bad safetensors files, bad weights files and bad inputs files, each
 * checked for its exact message (and that every error carries a hint). Files are made by
 * hand (8-byte length, JSON text, data) or derived from valid files written by h3.
 */
#include "h3/safetensors.h"
#include "h3/weights.h"

#include "io_module.h"
#include "io_test.h"

static int n_cases;

/* Writes a hand-made file, opens it, expects failure with "PATH: " + want. */
static void bad_file(const char *file, uint64_t header_len, const char *json, size_t data_len,
                     const char *want, int line) {
  const char *path = io_path(file);
  io_write_st(path, header_len, json, data_len);
  h3_diag d;
  h3_diag_init(&d);
  h3_safetensors *st = h3_safetensors_open(path, &d);
  if (st) {
    fprintf(stderr, "test_errors.c:%d: %s opened but should not\n", line, file);
    io_failures++;
    h3_safetensors_close(st);
  }
  char full[1200];
  snprintf(full, sizeof full, "%s: %s", path, want);
  io_expect_error(&d, full, __FILE__, line);
  io_expect_hints(&d, __FILE__, line);
  CHECK(d.errors == 1);
  h3_diag_free(&d);
  n_cases++;
}
#define BAD(file, hl, json, dl, want) bad_file(file, hl, json, dl, want, __LINE__)
#define AUTO ((uint64_t)-1)

static void test_bad_safetensors(void) {
  /* sizes and header length */
  io_write_bytes(io_path("empty.safetensors"), "", 0);
  h3_diag d;
  h3_diag_init(&d);
  CHECK(h3_safetensors_open(io_path("empty.safetensors"), &d) == NULL);
  char want[1200];
  snprintf(want, sizeof want, "%s: file is 0 bytes, shorter than the 8-byte header length",
           io_path("empty.safetensors"));
  EXPECT_ERROR(&d, want);
  h3_diag_free(&d);
  n_cases++;
  io_write_bytes(io_path("five.safetensors"), "\x10\0\0\0\0", 5);
  h3_diag_init(&d);
  CHECK(h3_safetensors_open(io_path("five.safetensors"), &d) == NULL);
  snprintf(want, sizeof want, "%s: file is 5 bytes, shorter than the 8-byte header length",
           io_path("five.safetensors"));
  EXPECT_ERROR(&d, want);
  h3_diag_free(&d);
  n_cases++;
  BAD("absurd.safetensors", 1ull << 40, "{}", 0,
      "header length 1099511627776 is absurd (the limit is 100000000 bytes)");
  BAD("beyond.safetensors", 100, "{}", 4,
      "header length 100 goes beyond the end of the file (14 bytes)");
  /* JSON */
  BAD("json.safetensors", AUTO, "{\"a\": {\"dtype\": \"F32\",", 0,
      "header JSON is invalid at line 1, column 22: string or '}' expected near end of file");
  BAD("zero.safetensors", 0, "", 0,
      "header JSON is invalid at line 1, column 0: '[' or '{' expected near end of file");
  BAD("list.safetensors", AUTO, "[1, 2]", 0, "header JSON is a list, expected an object");
  BAD("dup.safetensors", AUTO,
      "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
      "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
      2, "header JSON is invalid at line 1, column 56: duplicate object key near '\"a\"'");
  BAD("utf8.safetensors", AUTO, "{\"\xff\": {}}", 0,
      "header JSON is invalid at line 1, column 2: unable to decode byte 0xff near '\"'");
  BAD("trailing_json.safetensors", AUTO, "{} x", 0,
      "header JSON is invalid at line 1, column 4: end of file expected near 'x'");
  /* entries */
  BAD("entry.safetensors", AUTO, "{\"w\": [1]}", 0,
      "tensor 'w': entry is a list, expected an object {\"dtype\", \"shape\", \"data_offsets\"}");
  BAD("nodtype.safetensors", AUTO, "{\"w\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
      "tensor 'w': \"dtype\" is missing");
  BAD("dtypenum.safetensors", AUTO,
      "{\"w\": {\"dtype\": 4, \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
      "tensor 'w': \"dtype\" is an integer, expected a string");
  BAD("unknown.safetensors", AUTO,
      "{\"w\": {\"dtype\": \"Q7\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
      "tensor 'w': unknown dtype \"Q7\"");
  BAD("bool.safetensors", AUTO,
      "{\"w\": {\"dtype\": \"BOOL\", \"shape\": [1], \"data_offsets\": [0, 1]}}", 1,
      "tensor 'w': dtype \"BOOL\" is not supported by h3");
  BAD("lower.safetensors", AUTO,
      "{\"w\": {\"dtype\": \"f32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
      "tensor 'w': unknown dtype \"f32\"");
  BAD("noshape.safetensors", AUTO, "{\"w\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}}",
      4, "tensor 'w': \"shape\" is missing");
  BAD("shapestr.safetensors", AUTO,
      "{\"w\": {\"dtype\": \"F32\", \"shape\": \"2x2\", \"data_offsets\": [0, 16]}}", 16,
      "tensor 'w': \"shape\" is a string, expected a list of integers");
  BAD("shapeneg.safetensors", AUTO,
      "{\"w\": {\"dtype\": \"F32\", \"shape\": [2, -2], \"data_offsets\": [0, 16]}}", 16,
      "tensor 'w': \"shape\" element 1 is negative, expected a non-negative integer");
  BAD("shapereal.safetensors", AUTO,
      "{\"w\": {\"dtype\": \"F32\", \"shape\": [2.0], \"data_offsets\": [0, 8]}}", 8,
      "tensor 'w': \"shape\" element 0 is a real number, expected a non-negative integer");
  BAD("rank7.safetensors", AUTO,
      "{\"w\": {\"dtype\": \"U8\", \"shape\": [1,1,1,1,1,1,1], \"data_offsets\": [0, 1]}}", 1,
      "tensor 'w': rank 7 is beyond h3's limit of 6");
  BAD("overflow.safetensors", AUTO,
      "{\"w\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], \"data_offsets\": "
      "[0, 4]}}",
      4, "tensor 'w': shape is too large (its size overflows 64 bits)");
  BAD("nooffs.safetensors", AUTO, "{\"w\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4,
      "tensor 'w': \"data_offsets\" is missing");
  BAD("offs3.safetensors", AUTO,
      "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4, 8]}}", 4,
      "tensor 'w': \"data_offsets\" must be a list of 2 non-negative integers [begin, end]");
  BAD("offsneg.safetensors", AUTO,
      "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [-4, 0]}}", 4,
      "tensor 'w': \"data_offsets\" must be a list of 2 non-negative integers [begin, end]");
  BAD("backwards.safetensors", AUTO,
      "{\"w\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [4, 0]}}", 4,
      "tensor 'w': data_offsets [4, 0]: end is before begin");
  BAD("truncated.safetensors", AUTO,
      "{\"w\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}", 10,
      "tensor 'w': data_offsets [0, 16] go beyond the data, which is 10 bytes");
  BAD("size.safetensors", AUTO,
      "{\"w\": {\"dtype\": \"BF16\", \"shape\": [2, 3], \"data_offsets\": [0, 24]}}", 24,
      "tensor 'w': data_offsets [0, 24] hold 24 bytes but BF16 [2, 3] needs 12");
  BAD("overlap.safetensors", AUTO,
      "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
      " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}",
      12, "tensor 'b': data_offsets [4, 12] overlap tensor 'a' [0, 8]");
  BAD("gap.safetensors", AUTO,
      "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
      " \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]}}",
      12, "tensor 'b': data_offsets [8, 12] leave a gap of 4 unused bytes before it");
  BAD("trailing.safetensors", AUTO,
      "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 7,
      "3 trailing bytes after the last tensor's data");
  BAD("emptyhdr.safetensors", AUTO, "{}", 1, "1 trailing byte after the last tensor's data");
  BAD("meta.safetensors", AUTO, "{\"__metadata__\": [\"x\"]}", 0,
      "\"__metadata__\" is a list, expected an object of strings");
  BAD("metaval.safetensors", AUTO, "{\"__metadata__\": {\"step\": 3}}", 0,
      "\"__metadata__\" entry 'step' is an integer, expected a string");

  /* not a file */
  h3_diag_init(&d);
  CHECK(h3_safetensors_open(io_path("missing.safetensors"), &d) == NULL);
  snprintf(want, sizeof want, "%s: cannot open: No such file or directory",
           io_path("missing.safetensors"));
  EXPECT_ERROR(&d, want);
  h3_diag_free(&d);
  h3_diag_init(&d);
  CHECK(h3_safetensors_open(io_scratch, &d) == NULL);
  snprintf(want, sizeof want, "%s: not a regular file", io_scratch);
  EXPECT_ERROR(&d, want);
  h3_diag_free(&d);
  n_cases += 2;
}

/* Loads `path` against `loader`; expects failure with "PATH: " + want. The bad files are
 * random weights of a second module whose parameters differ from the loader's. */
static void expect_load_error(h3_module *loader, const char *path, const char *want,
                              int line) {
  h3_diag d;
  h3_diag_init(&d);
  h3_weights *w = h3_weights_load_file(loader, path, &d);
  if (w) {
    fprintf(stderr, "test_errors.c:%d: %s loaded but should not\n", line, path);
    io_failures++;
    h3_weights_free(w);
  }
  char full[1200];
  snprintf(full, sizeof full, "%s: %s", path, want);
  io_expect_error(&d, full, __FILE__, line);
  io_expect_hints(&d, __FILE__, line);
  h3_diag_free(&d);
  n_cases++;
}

static void save_random(h3_module *m, const char *path) {
  h3_diag d;
  h3_diag_init(&d);
  h3_weights *w = h3_weights_random(m, 5, &d);
  CHECK(w && h3_weights_save_file(w, path, &d) == H3_OK);
  h3_weights_free(w);
  h3_diag_free(&d);
}

static void test_bad_weights(void) {
  h3_module *m = io_module_new("tiny");
  /* a file of another config: more layers -> unexpected tensors */
  h3_module *more = io_module_new("small");
  more->params[P_QKV]->type.dims[0] = 5;
  more->params[P_NORM]->type.dims[0] = 5;
  save_random(more, io_path("more.safetensors"));
  expect_load_error(m, io_path("more.safetensors"),
                    "4 unexpected tensors: 'blocks.3.attn.qkv.weight', "
                    "'blocks.3.norm.weight', 'blocks.4.attn.qkv.weight', "
                    "'blocks.4.norm.weight'",
                    __LINE__);
  /* fewer members -> missing, summarised after 5 names */
  h3_module *fewer = io_module_new("tiny");
  fewer->params[P_EXPERT]->type.dims[1] = 1; /* 2 of 6 expert tensors */
  fewer->params[P_GATE]->type.dims[0] = 1;
  fewer->params[P_QKV]->type.dims[0] = 2;
  save_random(fewer, io_path("fewer.safetensors"));
  expect_load_error(m, io_path("fewer.safetensors"),
                    "8 weights missing: 'blocks.2.attn.qkv.weight', "
                    "'layers.3.mlp.experts.1.down.weight', 'layers.3.mlp.experts.2.down.weight', "
                    "'layers.4.mlp.experts.1.down.weight', 'layers.4.mlp.experts.2.down.weight' "
                    "and 3 more",
                    __LINE__);
  /* dtype and shape mismatches */
  h3_module *other = io_module_new("tiny");
  other->params[P_EMBED]->type.dtype = H3_F32;
  other->params[P_BIAS]->type.dims[0] = 9;
  other->params[P_QKV]->type.dims[1] = 24;
  save_random(other, io_path("other.safetensors"));
  expect_load_error(m, io_path("other.safetensors"),
                    "tensor 'embed.weight': dtype F32, expected BF16", __LINE__);
  expect_load_error(m, io_path("other.safetensors"),
                    "tensor 'final.bias': F32 [9], expected F32 [8]", __LINE__);
  expect_load_error(m, io_path("other.safetensors"),
                    "tensor 'blocks.1.attn.qkv.weight': BF16 [24, 8], expected BF16 [12, 8]",
                    __LINE__);
  /* the hint names both configs (metadata written by h3_weights_save_file) */
  h3_diag d;
  h3_diag_init(&d);
  CHECK(h3_weights_load_file(m, io_path("more.safetensors"), &d) == NULL);
  CHECK(d.head && d.head->hint &&
        strcmp(d.head->hint, "model 'io_test' config 'tiny' declares these weights; the file "
                             "was written for model 'io_test' config 'small'") == 0);
  h3_diag_free(&d);
  /* a grouped parameter whose name has no "{}" */
  h3_module *badname = io_module_new("tiny");
  badname->params[P_QKV]->name = "blocks.attn.qkv.weight";
  h3_diag_init(&d);
  CHECK(h3_weights_random(badname, 1, &d) == NULL);
  EXPECT_ERROR(&d, "parameter 'blocks.attn.qkv.weight': its name has 0 \"{}\" and 0 \"{e}\" but "
                   "1 group dims");
  h3_diag_free(&d);
  /* an init the generator cannot use */
  h3_module *badinit = io_module_new("tiny");
  badinit->params[P_ROPE]->init_scale = 0;
  h3_diag_init(&d);
  CHECK(h3_weights_random(badinit, 1, &d) == NULL);
  EXPECT_ERROR(&d, "parameter 'rope.inv_freq': cannot generate random weights: rope_inv_freq "
                   "needs theta > 0 and dims > 0");
  io_expect_hints(&d, __FILE__, __LINE__);
  h3_diag_free(&d);
  badinit->params[P_ROPE]->init_scale = 8;
  badinit->params[P_EMBED]->init_scale = -1;
  h3_diag_init(&d);
  CHECK(h3_weights_random(badinit, 1, &d) == NULL);
  EXPECT_ERROR(&d, "parameter 'embed.weight': cannot generate random weights: its init scale "
                   "must be a finite number >= 0");
  h3_diag_free(&d);
  h3_module_free(badinit);
  n_cases += 2;
  /* not a safetensors file at all */
  io_write_bytes(io_path("text.safetensors"), "hello, this is not a weights file", 33);
  expect_load_error(m, io_path("text.safetensors"),
                    "header length 8367736964726416744 is absurd (the limit is 100000000 bytes)",
                    __LINE__);
  n_cases += 2;
  h3_module_free(m);
  h3_module_free(more);
  h3_module_free(fewer);
  h3_module_free(other);
  h3_module_free(badname);
}

static void expect_inputs_error(h3_graph *g, const char *path, unsigned flags, const char *want,
                                int line) {
  h3_diag d;
  h3_diag_init(&d);
  h3_host_tensor *in = h3_inputs_load_file(g, path, flags, &d);
  if (in) {
    fprintf(stderr, "test_errors.c:%d: %s loaded but should not\n", line, path);
    io_failures++;
    h3_host_tensors_free(in, g->n_inputs);
  }
  char full[1200];
  snprintf(full, sizeof full, "%s: %s", path, want);
  io_expect_error(&d, full, __FILE__, line);
  io_expect_hints(&d, __FILE__, line);
  h3_diag_free(&d);
  n_cases++;
}

static void test_bad_inputs(void) {
  h3_module *m = io_module_new("tiny");
  h3_graph *g = h3_module_graph(m, "step");
  h3_diag d;
  h3_diag_init(&d);
  uint16_t x[32];
  float t[2] = {0.25f, 0.75f};
  int32_t idx[4] = {3, 1, 2, 0};
  for (int i = 0; i < 32; i++) x[i] = (uint16_t)(0x3f00 + i);
  const char *hint = "graph 'step' takes x bf16[4, 8], t f32[2], idx i32[4]";

  h3_safetensors_writer *w = h3_safetensors_writer_new();
  h3_safetensors_writer_add(w, "x", H3_BF16, 2, (int64_t[]){4, 8}, x, &d);
  h3_safetensors_writer_add(w, "t", H3_F32, 1, (int64_t[]){2}, t, &d);
  CHECK(h3_safetensors_writer_commit(w, io_path("in_missing.safetensors"), &d) == H3_OK);
  h3_safetensors_writer_add(w, "idx", H3_I32, 1, (int64_t[]){4}, idx, &d);
  h3_safetensors_writer_add(w, "extra", H3_I32, 1, (int64_t[]){4}, idx, &d);
  CHECK(h3_safetensors_writer_commit(w, io_path("in_extra.safetensors"), &d) == H3_OK);
  h3_safetensors_writer_free(w);
  w = h3_safetensors_writer_new();
  h3_safetensors_writer_add(w, "x", H3_F32, 2, (int64_t[]){4, 4}, x, &d);
  h3_safetensors_writer_add(w, "t", H3_F64, 1, (int64_t[]){1}, t, &d);
  h3_safetensors_writer_add(w, "idx", H3_I32, 2, (int64_t[]){2, 2}, idx, &d);
  CHECK(h3_safetensors_writer_commit(w, io_path("in_types.safetensors"), &d) == H3_OK);
  h3_safetensors_writer_free(w);
  CHECK(d.errors == 0);

  expect_inputs_error(g, io_path("in_missing.safetensors"), 0,
                      "1 input of graph 'step' missing: 'idx'", __LINE__);
  expect_inputs_error(g, io_path("in_extra.safetensors"), 0,
                      "1 unexpected tensor for graph 'step': 'extra'", __LINE__);
  expect_inputs_error(g, io_path("in_types.safetensors"), 0,
                      "input of graph 'step' 'x': F32 [4, 4], expected BF16 [4, 8]", __LINE__);
  expect_inputs_error(g, io_path("in_types.safetensors"), 0,
                      "input of graph 'step' 't': F64 [1], expected F32 [2]", __LINE__);
  expect_inputs_error(g, io_path("in_types.safetensors"), 0,
                      "input of graph 'step' 'idx': I32 [2, 2], expected I32 [4]", __LINE__);
  h3_diag_init(&d);
  CHECK(h3_inputs_load_file(g, io_path("in_missing.safetensors"), 0, &d) == NULL);
  CHECK(d.head && d.head->hint && strcmp(d.head->hint, hint) == 0);
  h3_diag_free(&d);
  /* allowed missing: loads, the missing input has no data */
  h3_diag_init(&d);
  h3_host_tensor *in =
      h3_inputs_load_file(g, io_path("in_missing.safetensors"), H3_INPUTS_ALLOW_MISSING, &d);
  CHECK(in && in[0].data && in[1].data && !in[2].data);
  CHECK(in && memcmp(in[0].data, x, sizeof x) == 0 && memcmp(in[1].data, t, sizeof t) == 0);
  h3_host_tensors_free(in, g->n_inputs);
  h3_diag_free(&d);
  /* an inputs file cut short */
  size_t len;
  h3_diag_init(&d);
  char *raw = h3_read_file(io_path("in_extra.safetensors"), &len, &d);
  CHECK(raw != NULL);
  if (raw) io_write_bytes(io_path("in_cut.safetensors"), raw, len - 3);
  free(raw);
  h3_diag_free(&d);
  expect_inputs_error(g, io_path("in_cut.safetensors"), 0,
                      "tensor 'x': data_offsets [40, 104] go beyond the data, which is 101 bytes",
                      __LINE__);
  h3_module_free(m);
}

int main(void) {
  io_scratch_make("err");
  test_bad_safetensors();
  test_bad_weights();
  test_bad_inputs();
  io_scratch_done();
  printf("%d bad-input cases\n", n_cases);
  CHECK(n_cases >= 25);
  if (io_failures) fprintf(stderr, "%d failure(s)\n", io_failures);
  return io_failures ? 1 : 0;
}
