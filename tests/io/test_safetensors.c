/* test_safetensors.c: safetensors round trips and writer behaviour.
 *
 * Round trip of every dtype and rank 0..6 (incl. empty tensors) with metadata: the file
 * read back holds the same names, types and bytes; the layout follows the contract
 * (header a multiple of 8 padded with spaces, keys in name order, data aligned to the
 * element size). The writer rejects bad tensors, leaves no partial or temporary file when
 * a commit fails, and keeps an existing file intact in that case. Many-tensor files work
 * (the duplicate check is a hash set). Every prefix of a valid file is rejected cleanly.
 */
#include "h3/safetensors.h"

#include "io_test.h"

#include <jansson.h>

typedef struct {
  const char *name;
  h3_dtype dtype;
  int rank;
  int64_t dims[H3_MAX_RANK];
} spec;

static const spec specs[] = {
    {"bf16.matrix", H3_BF16, 2, {3, 5}},
    {"f16.vec", H3_F16, 1, {7}},
    {"f32.cube", H3_F32, 3, {2, 3, 4}},
    {"f64.scalar", H3_F64, 0, {0}},
    {"i8.x", H3_I8, 1, {9}},
    {"i32.rank6", H3_I32, 6, {2, 1, 2, 1, 3, 2}},
    {"i64.y", H3_I64, 2, {2, 2}},
    {"u8.z", H3_U8, 1, {13}},
    {"a.empty", H3_F32, 2, {0, 4}},
    {"Z.upper", H3_BF16, 1, {1}},
};
#define NSPEC (int)(sizeof specs / sizeof specs[0])

static size_t spec_bytes(const spec *s) {
  h3_type t = h3_type_make(s->dtype, s->rank, s->dims);
  return (size_t)h3_type_bytes(&t);
}

static unsigned char *spec_data(const spec *s, uint32_t salt) {
  size_t n = spec_bytes(s);
  unsigned char *p = malloc(n + 1);
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(io_hash((uint32_t)i, salt) >> 24);
  return p;
}

static void test_round_trip(void) {
  h3_diag d;
  h3_diag_init(&d);
  h3_safetensors_writer *w = h3_safetensors_writer_new();
  unsigned char *data[NSPEC];
  for (int i = 0; i < NSPEC; i++) {
    data[i] = spec_data(&specs[i], (uint32_t)i + 1);
    CHECK(h3_safetensors_writer_add(w, specs[i].name, specs[i].dtype, specs[i].rank,
                                    specs[i].dims, spec_bytes(&specs[i]) ? data[i] : NULL,
                                    &d) == H3_OK);
  }
  CHECK(h3_safetensors_writer_metadata(w, "format", "pt", &d) == H3_OK);
  CHECK(h3_safetensors_writer_metadata(w, "note", "first", &d) == H3_OK);
  CHECK(h3_safetensors_writer_metadata(w, "note", "replaced \"quoted\" ünïcode", &d) == H3_OK);
  const char *path = io_path("rt.safetensors");
  CHECK(h3_safetensors_writer_commit(w, path, &d) == H3_OK);
  h3_safetensors_writer_free(w);
  CHECK(io_scratch_count() == 1); /* no temporary file left */

  h3_safetensors *st = h3_safetensors_open(path, &d);
  CHECK(st != NULL);
  if (!st) {
    h3_diag_print(&d, stderr);
    return;
  }
  CHECK(h3_safetensors_count(st) == NSPEC);
  CHECK(strcmp(h3_safetensors_metadata(st, "format"), "pt") == 0);
  CHECK(strcmp(h3_safetensors_metadata(st, "note"), "replaced \"quoted\" ünïcode") == 0);
  CHECK(h3_safetensors_metadata(st, "absent") == NULL);
  CHECK(h3_safetensors_metadata_count(st) == 2);
  for (int i = 0; i < NSPEC; i++) {
    const h3_st_tensor *t = h3_safetensors_find(st, specs[i].name);
    CHECK(t != NULL);
    if (!t) continue;
    h3_type want = h3_type_make(specs[i].dtype, specs[i].rank, specs[i].dims);
    CHECK(h3_type_equal(&t->type, &want));
    CHECK(t->nbytes == spec_bytes(&specs[i]));
    CHECK(t->nbytes == 0 || memcmp(t->data, data[i], t->nbytes) == 0);
    CHECK(t->offset % h3_dtype_size(specs[i].dtype) == 0); /* aligned to the element size */
    CHECK(h3_safetensors_at(st, h3_safetensors_index(st, t)) == t);
  }
  /* iteration is in byte order of names */
  for (int i = 1; i < h3_safetensors_count(st); i++)
    CHECK(strcmp(h3_safetensors_at(st, i - 1)->name, h3_safetensors_at(st, i)->name) < 0);
  CHECK(h3_safetensors_find(st, "nope") == NULL);
  h3_safetensors_close(st);

  /* layout: header length multiple of 8, padded with spaces, keys sorted, data aligned */
  size_t len;
  char *raw = h3_read_file(path, &len, &d);
  CHECK(raw && len > 8);
  uint64_t hl = 0;
  for (int i = 7; i >= 0; i--) hl = (hl << 8) | (unsigned char)raw[i];
  CHECK(hl % 8 == 0 && (8 + hl) % 8 == 0);
  CHECK(raw[8] == '{');
  size_t end = 8 + (size_t)hl;
  while (end > 8 && raw[end - 1] == ' ') end--;
  CHECK(raw[end - 1] == '}');
  json_t *root = json_loadb(raw + 8, (size_t)hl, 0, NULL);
  CHECK(root != NULL);
  const char *key, *prev = NULL;
  json_t *val;
  int k = 0;
  json_object_foreach(root, key, val) {
    if (k++ == 0) {
      CHECK(strcmp(key, "__metadata__") == 0);
    } else {
      CHECK(!prev || strcmp(prev, key) < 0);
      prev = key;
    }
  }
  json_decref(root);
  free(raw);
  for (int i = 0; i < NSPEC; i++) free(data[i]);
  CHECK(d.errors == 0);
  h3_diag_free(&d);
}

static void test_writer_errors(void) {
  h3_diag d;
  h3_diag_init(&d);
  h3_safetensors_writer *w = h3_safetensors_writer_new();
  int64_t dims[2] = {2, 3}, bad[2] = {2, -1};
  float x[6] = {1, 2, 3, 4, 5, 6};
  CHECK(h3_safetensors_writer_add(w, "a", H3_F32, 2, dims, x, &d) == H3_OK);
  CHECK(h3_safetensors_writer_add(w, "a", H3_F32, 2, dims, x, &d) == H3_ERR);
  EXPECT_ERROR(&d, "safetensors writer: tensor 'a' added twice");
  CHECK(h3_safetensors_writer_add(w, "", H3_F32, 2, dims, x, &d) == H3_ERR);
  EXPECT_ERROR(&d, "safetensors writer: invalid tensor name ''");
  CHECK(h3_safetensors_writer_add(w, "__metadata__", H3_F32, 2, dims, x, &d) == H3_ERR);
  EXPECT_ERROR(&d, "safetensors writer: invalid tensor name '__metadata__'");
  CHECK(h3_safetensors_writer_add(w, "b", H3_F32, 2, bad, x, &d) == H3_ERR);
  EXPECT_ERROR(&d, "safetensors writer: tensor 'b': dim 1 = -1 is invalid");
  CHECK(h3_safetensors_writer_add(w, "c", H3_F32, 2, dims, NULL, &d) == H3_ERR);
  EXPECT_ERROR(&d, "safetensors writer: tensor 'c': no data");

  /* a failed commit leaves nothing behind and keeps an existing file as it was */
  const char *keep = io_path("keep.safetensors");
  io_write_bytes(keep, "old", 3);
  int before = io_scratch_count();
  CHECK(h3_safetensors_writer_commit(w, io_path("no/such/dir/x.safetensors"), &d) == H3_ERR);
  char want[700];
  snprintf(want, sizeof want, "cannot write %s (create): No such file or directory",
           io_path("no/such/dir/x.safetensors"));
  EXPECT_ERROR(&d, want);
  CHECK(mkdir(io_path("adir"), 0755) == 0);
  CHECK(h3_safetensors_writer_commit(w, io_path("adir"), &d) == H3_ERR);
  snprintf(want, sizeof want, "cannot write %s: it is a directory", io_path("adir"));
  EXPECT_ERROR(&d, want);
  CHECK(io_scratch_count() == before + 1); /* only adir itself, no temporary files */
  char old[8] = {0};
  FILE *f = fopen(keep, "rb"); /* not h3_read_file: no output may replace what it read */
  CHECK(f && fread(old, 1, sizeof old, f) == 3 && memcmp(old, "old", 3) == 0);
  if (f) fclose(f);
  /* a commit over an existing file replaces it */
  CHECK(h3_safetensors_writer_commit(w, keep, &d) == H3_OK);
  h3_safetensors *st = h3_safetensors_open(keep, &d);
  CHECK(st && h3_safetensors_count(st) == 1);
  h3_safetensors_close(st);
  h3_safetensors_writer_free(w);
  h3_diag_free(&d);
}

/* 30000 tensors: duplicate detection and lookup stay fast; every name found. */
static void test_many(void) {
  h3_diag d;
  h3_diag_init(&d);
  h3_safetensors_writer *w = h3_safetensors_writer_new();
  enum { N = 30000 };
  static int16_t vals[N];
  char name[64];
  int64_t one = 1;
  for (int i = 0; i < N; i++) {
    vals[i] = (int16_t)(io_hash((uint32_t)i, 99) | 1);
    snprintf(name, sizeof name, "layers.%d.mlp.experts.%d.w", i / 256, i % 256);
    CHECK(h3_safetensors_writer_add(w, name, H3_BF16, 1, &one, &vals[i], &d) == H3_OK);
  }
  CHECK(h3_safetensors_writer_add(w, "layers.7.mlp.experts.9.w", H3_BF16, 1, &one, vals, &d) ==
        H3_ERR);
  const char *path = io_path("many.safetensors");
  CHECK(h3_safetensors_writer_commit(w, path, &d) == H3_OK);
  h3_safetensors_writer_free(w);
  h3_safetensors *st = h3_safetensors_open(path, &d);
  CHECK(st && h3_safetensors_count(st) == N);
  for (int i = 0; st && i < N; i++) {
    snprintf(name, sizeof name, "layers.%d.mlp.experts.%d.w", i / 256, i % 256);
    const h3_st_tensor *t = h3_safetensors_find(st, name);
    CHECK(t && memcmp(t->data, &vals[i], 2) == 0);
  }
  h3_safetensors_close(st);
  h3_diag_free(&d);
}

/* Every strict prefix of a valid file fails with a message, never a crash; so does every
 * single-byte corruption of its header length. */
static void test_truncations(void) {
  h3_diag d;
  h3_diag_init(&d);
  size_t len;
  char *raw = h3_read_file(io_path("rt.safetensors"), &len, &d);
  CHECK(raw != NULL);
  for (size_t n = 0; raw && n < len; n++) {
    h3_diag e;
    h3_diag_init(&e);
    h3_safetensors *st = h3_safetensors_open_memory("prefix", raw, n, &e);
    CHECK(st == NULL && e.errors >= 1);
    h3_safetensors_close(st);
    h3_diag_free(&e);
  }
  for (int b = 0; raw && b < 8; b++) {
    unsigned char old = (unsigned char)raw[b];
    raw[b] = (char)(old ^ 0x40);
    h3_diag e;
    h3_diag_init(&e);
    h3_safetensors *st = h3_safetensors_open_memory("corrupt", raw, len, &e);
    CHECK(st == NULL && e.errors == 1);
    h3_safetensors_close(st);
    h3_diag_free(&e);
    raw[b] = (char)old;
  }
  h3_safetensors *st = raw ? h3_safetensors_open_memory("whole", raw, len, &d) : NULL;
  CHECK(st != NULL);
  h3_safetensors_close(st);
  free(raw);
  h3_diag_free(&d);
}

int main(void) {
  io_scratch_make("st");
  test_round_trip();
  test_writer_errors();
  test_many();
  test_truncations();
  io_scratch_done();
  if (io_failures) fprintf(stderr, "%d failure(s)\n", io_failures);
  return io_failures ? 1 : 0;
}
