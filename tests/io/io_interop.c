/* io_interop.c: the h3 side of the Python interop tests (driven by interop.py).
 *
 *   io_interop write PATH        writes one tensor of every dtype (values from io_hash, the
 *                                formula interop.py also implements) + metadata
 *   io_interop read PATH         reads a file written by Python's safetensors.numpy with the
 *                                same tensors (bf16 excepted: numpy has no bf16) and checks
 *                                every byte; exit 1 on a mismatch
 *   io_interop rng PATH N SEED   writes N values of each generator output (normal, uniform,
 *                                the three random initialisers at scale 0.0371) of stream
 *                                "interop.noise" under SEED, for rng_ref.py to recompute
 */
#include "h3/bf16.h"
#include "h3/rng.h"
#include "h3/safetensors.h"

#include "io_test.h"

typedef struct {
  const char *name;
  h3_dtype dtype;
  int rank;
  int64_t dims[3];
  uint32_t salt;
} tspec;

static const tspec tensors[] = {
    {"f32", H3_F32, 2, {3, 5}, 1},  {"f64", H3_F64, 1, {7}, 2},    {"f16", H3_F16, 2, {4, 4}, 3},
    {"bf16", H3_BF16, 1, {6}, 4},   {"i8", H3_I8, 1, {9}, 5},      {"i32", H3_I32, 2, {2, 3}, 6},
    {"i64", H3_I64, 1, {5}, 7},     {"u8", H3_U8, 1, {11}, 8},     {"scalar", H3_F32, 0, {0}, 9},
    {"empty", H3_F32, 2, {0, 3}, 10},
};
#define NT (int)(sizeof tensors / sizeof tensors[0])

/* The expected bytes of a tensor (see interop.py for the same formulas). */
static void *make_data(const tspec *t, size_t *bytes) {
  h3_type ty = h3_type_make(t->dtype, t->rank, t->dims);
  size_t n = (size_t)h3_type_numel(&ty);
  *bytes = (size_t)h3_type_bytes(&ty);
  unsigned char *p = calloc(*bytes + 8, 1);
  for (size_t i = 0; i < n; i++) {
    uint32_t h = io_hash((uint32_t)i, t->salt);
    float v = io_value((uint32_t)i, t->salt);
    switch (t->dtype) {
    case H3_F32: ((float *)p)[i] = v; break;
    case H3_F64: ((double *)p)[i] = (double)v * 1.5; break;
    case H3_F16: ((uint16_t *)p)[i] = h3_f32_to_f16(v * 0.125f); break;
    case H3_BF16: ((uint16_t *)p)[i] = h3_f32_to_bf16(v * 1.37f); break;
    case H3_I8: ((int8_t *)p)[i] = (int8_t)(uint8_t)(h & 0xff); break;
    case H3_I32: ((int32_t *)p)[i] = (int32_t)h; break;
    case H3_I64: ((int64_t *)p)[i] = (int64_t)(((uint64_t)h << 31) ^ i); break;
    case H3_U8: ((uint8_t *)p)[i] = (uint8_t)(h >> 24); break;
    default: break;
    }
  }
  return p;
}

static int do_write(const char *path) {
  h3_diag d;
  h3_diag_init(&d);
  h3_safetensors_writer *w = h3_safetensors_writer_new();
  void *data[NT];
  for (int i = 0; i < NT; i++) {
    size_t bytes;
    data[i] = make_data(&tensors[i], &bytes);
    h3_safetensors_writer_add(w, tensors[i].name, tensors[i].dtype, tensors[i].rank,
                              tensors[i].dims, data[i], &d);
  }
  h3_safetensors_writer_metadata(w, "writer", "h3", &d);
  h3_safetensors_writer_commit(w, path, &d);
  h3_safetensors_writer_free(w);
  for (int i = 0; i < NT; i++) free(data[i]);
  h3_diag_print(&d, stderr);
  int rc = d.errors ? 1 : 0;
  h3_diag_free(&d);
  return rc;
}

static int do_read(const char *path) {
  h3_diag d;
  h3_diag_init(&d);
  h3_safetensors *st = h3_safetensors_open(path, &d);
  if (!st) {
    h3_diag_print(&d, stderr);
    return 1;
  }
  int bad = 0, seen = 0;
  for (int i = 0; i < NT; i++) {
    if (tensors[i].dtype == H3_BF16) continue;
    const h3_st_tensor *t = h3_safetensors_find(st, tensors[i].name);
    size_t bytes;
    void *want = make_data(&tensors[i], &bytes);
    h3_type ty = h3_type_make(tensors[i].dtype, tensors[i].rank, tensors[i].dims);
    if (!t || !h3_type_equal(&t->type, &ty) || t->nbytes != bytes ||
        (bytes && memcmp(t->data, want, bytes) != 0)) {
      fprintf(stderr, "%s: tensor '%s' differs from the expected\n", path, tensors[i].name);
      bad++;
    }
    seen++;
    free(want);
  }
  const char *writer = h3_safetensors_metadata(st, "writer");
  if (h3_safetensors_count(st) != seen || !writer || strcmp(writer, "python") != 0) {
    fprintf(stderr, "%s: %d tensors (expected %d), writer '%s'\n", path,
            h3_safetensors_count(st), seen, writer ? writer : "(none)");
    bad++;
  }
  h3_safetensors_close(st);
  h3_diag_free(&d);
  return bad ? 1 : 0;
}

static int do_rng(const char *path, long n, unsigned long long seed) {
  h3_diag d;
  h3_diag_init(&d);
  uint32_t stream = h3_rng_stream_id("interop.noise");
  float *v = malloc(5 * (size_t)n * sizeof(float));
  h3_rng_fill_normal(seed, stream, 0, (size_t)n, v);
  h3_rng_fill_uniform(seed, stream, 0, (size_t)n, v + n);
  h3_rng_fill_init(H3_RNG_INIT_NORMAL, 0.0371f, seed, stream, 0, (size_t)n, v + 2 * n);
  h3_rng_fill_init(H3_RNG_INIT_UNIFORM, 0.0371f, seed, stream, 0, (size_t)n, v + 3 * n);
  h3_rng_fill_init(H3_RNG_INIT_ONES_PLUS_NORMAL, 0.0371f, seed, stream, 0, (size_t)n, v + 4 * n);
  static const char *names[5] = {"normal", "uniform", "init_normal", "init_uniform",
                                 "init_ones_plus_normal"};
  h3_safetensors_writer *w = h3_safetensors_writer_new();
  int64_t dims[1] = {n};
  for (int k = 0; k < 5; k++) h3_safetensors_writer_add(w, names[k], H3_F32, 1, dims, v + k * n, &d);
  h3_safetensors_writer_commit(w, path, &d);
  h3_safetensors_writer_free(w);
  free(v);
  h3_diag_print(&d, stderr);
  int rc = d.errors ? 1 : 0;
  h3_diag_free(&d);
  return rc;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "write") == 0) return do_write(argv[2]);
  if (argc == 3 && strcmp(argv[1], "read") == 0) return do_read(argv[2]);
  if (argc == 5 && strcmp(argv[1], "rng") == 0)
    return do_rng(argv[2], strtol(argv[3], NULL, 10), strtoull(argv[4], NULL, 10));
  fprintf(stderr, "usage: io_interop write|read PATH | rng PATH N SEED\n");
  return 2;
}
