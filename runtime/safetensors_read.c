/* safetensors_read.c: the safetensors reader (include/h3/safetensors.h).
 *
 * Opening maps the file read-only and validates the whole header before anything is
 * returned: a file that opens is safe to read at every tensor's offsets. It is registered
 * as an input (support.h h3_input_register): no output of the process replaces it.
 * Validation follows the format's rules as the Python library applies them (header
 * length within the file and below 100 MB, JSON object, duplicate keys rejected, known
 * dtypes, shapes of non-negative ints, offsets of exactly numel * dtype size, tensors
 * packed from offset 0 without gaps or overlaps up to the end of the file). Messages:
 * "PATH: tensor 'NAME': what is wrong" with a hint.
 */
#include "h3/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_HEADER 100000000ull /* the Python library's limit */

struct h3_safetensors {
  char *path;
  const unsigned char *base; /* whole file (mapping or borrowed buffer) */
  size_t len;
  int mapped;
  int n;
  h3_st_tensor *t; /* sorted by name */
  int n_meta;
  char **meta; /* key0, value0, key1, value1, ... */
};

static const struct {
  const char *name;
  h3_dtype dtype;
} st_dtypes[] = {
    {"BF16", H3_BF16}, {"F16", H3_F16}, {"F32", H3_F32}, {"F64", H3_F64},
    {"I8", H3_I8},     {"I32", H3_I32}, {"I64", H3_I64}, {"U8", H3_U8},
};

/* Dtypes of the format that h3 has no type for. */
static const char *const st_unsupported[] = {"BOOL",    "I16",     "U16",     "U32",
                                             "U64",     "F8_E5M2", "F8_E8M0", "F4",
                                             "F6_E2M3", "F6_E3M2", "C64"};

const char *h3_safetensors_dtype_name(h3_dtype t) {
  for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
    if (st_dtypes[i].dtype == t) return st_dtypes[i].name;
  return "?";
}

int h3_safetensors_dtype_parse(const char *s, h3_dtype *out) {
  for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
    if (strcmp(st_dtypes[i].name, s) == 0) {
      *out = st_dtypes[i].dtype;
      return 1;
    }
  return 0;
}

/* Reports "PATH: tensor 'NAME': message" (or "PATH: message" when tensor is NULL). */
__attribute__((format(printf, 5, 6))) static void st_error(h3_diag *d, const char *path,
                                                           const char *tensor, const char *hint,
                                                           const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  h3_span none = {0};
  if (tensor)
    h3_diag_error(d, none, hint, "%s: tensor '%s': %s", path, tensor, msg);
  else
    h3_diag_error(d, none, hint, "%s: %s", path, msg);
}

static const char *json_kind(const json_t *j) {
  switch (json_typeof(j)) {
  case JSON_OBJECT: return "an object";
  case JSON_ARRAY: return "a list";
  case JSON_STRING: return "a string";
  case JSON_INTEGER: return "an integer";
  case JSON_REAL: return "a real number";
  case JSON_TRUE:
  case JSON_FALSE: return "a boolean";
  default: return "null";
  }
}

static void st_free(h3_safetensors *st) {
  if (!st) return;
  for (int i = 0; i < st->n; i++) free((char *)st->t[i].name);
  free(st->t);
  for (int i = 0; i < 2 * st->n_meta; i++) free(st->meta[i]);
  free(st->meta);
  if (st->mapped && st->base) munmap((void *)st->base, st->len);
  free(st->path);
  free(st);
}

void h3_safetensors_close(h3_safetensors *st) { st_free(st); }

static const char *const HINT_CORRUPT =
    "the file is not a valid safetensors file: re-export it (e.g. safetensors.numpy.save_file)";

static h3_status parse_metadata(h3_safetensors *st, json_t *meta, h3_diag *d) {
  if (!json_is_object(meta)) {
    st_error(d, st->path, NULL, HINT_CORRUPT, "\"__metadata__\" is %s, expected an object of strings",
             json_kind(meta));
    return H3_ERR;
  }
  size_t n = json_object_size(meta);
  st->meta = calloc(2 * n + 1, sizeof *st->meta);
  if (!st->meta) {
    st_error(d, st->path, NULL, H3_HINT_OOM, "out of memory reading the metadata");
    return H3_ERR;
  }
  const char *key;
  json_t *val;
  json_object_foreach(meta, key, val) {
    if (!json_is_string(val)) {
      st_error(d, st->path, NULL, HINT_CORRUPT,
               "\"__metadata__\" entry '%s' is %s, expected a string", key, json_kind(val));
      return H3_ERR;
    }
    char *k = strdup(key), *v = strdup(json_string_value(val));
    st->meta[2 * st->n_meta] = k;
    st->meta[2 * st->n_meta + 1] = v;
    st->n_meta++;
    if (!k || !v) {
      st_error(d, st->path, NULL, H3_HINT_OOM, "out of memory reading the metadata");
      return H3_ERR;
    }
  }
  return H3_OK;
}

/* Reads a non-negative JSON integer; 0 when `j` is not one. */
static int get_uint(const json_t *j, uint64_t *out) {
  if (!json_is_integer(j) || json_integer_value(j) < 0) return 0;
  *out = (uint64_t)json_integer_value(j);
  return 1;
}

static void print_dims(char *buf, size_t cap, const h3_type *t) {
  size_t k = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < t->rank && k < cap; i++)
    k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
  if (k < cap) snprintf(buf + k, cap - k, "]");
}

/* Validates one tensor entry and fills `t` (name not yet set). */
static h3_status parse_entry(h3_safetensors *st, const char *name, json_t *e, size_t data_len,
                             h3_st_tensor *t, h3_diag *d) {
  const char *p = st->path;
  if (!json_is_object(e)) {
    st_error(d, p, name, HINT_CORRUPT,
             "entry is %s, expected an object {\"dtype\", \"shape\", \"data_offsets\"}",
             json_kind(e));
    return H3_ERR;
  }
  json_t *dt = json_object_get(e, "dtype"), *shape = json_object_get(e, "shape"),
         *offs = json_object_get(e, "data_offsets");
  if (!dt || !json_is_string(dt)) {
    st_error(d, p, name, HINT_CORRUPT, dt ? "\"dtype\" is %s, expected a string"
                                          : "\"dtype\" is missing%s",
             dt ? json_kind(dt) : "");
    return H3_ERR;
  }
  const char *ds = json_string_value(dt);
  t->f8_e4m3 = strcmp(ds, "F8_E4M3") == 0; /* fp8 bits, read as bytes (NVFP4 scales) */
  if (t->f8_e4m3)
    t->type.dtype = H3_U8;
  else if (!h3_safetensors_dtype_parse(ds, &t->type.dtype)) {
    for (size_t i = 0; i < sizeof st_unsupported / sizeof st_unsupported[0]; i++)
      if (strcmp(ds, st_unsupported[i]) == 0) {
        st_error(d, p, name,
                 "h3 reads BF16, F16, F32, F64, I8, I32, I64 and U8 tensors (and F8_E4M3 as "
                 "NVFP4 scales)",
                 "dtype \"%s\" is not supported by h3", ds);
        return H3_ERR;
      }
    st_error(d, p, name, "safetensors dtypes are e.g. BF16, F16, F32, I32, I64, U8",
             "unknown dtype \"%s\"", ds);
    return H3_ERR;
  }
  if (!shape || !json_is_array(shape)) {
    st_error(d, p, name, HINT_CORRUPT, shape ? "\"shape\" is %s, expected a list of integers"
                                             : "\"shape\" is missing%s",
             shape ? json_kind(shape) : "");
    return H3_ERR;
  }
  size_t rank = json_array_size(shape);
  if (rank > H3_MAX_RANK) {
    st_error(d, p, name, "h3 tensors have at most 6 dims; reshape the tensor when exporting",
             "rank %zu is beyond h3's limit of %d", rank, H3_MAX_RANK);
    return H3_ERR;
  }
  t->type.rank = (int)rank;
  uint64_t numel = 1;
  int overflow = 0;
  for (size_t i = 0; i < rank; i++) {
    uint64_t v;
    json_t *dj = json_array_get(shape, i);
    if (!get_uint(dj, &v) || v > (uint64_t)INT64_MAX) {
      st_error(d, p, name, HINT_CORRUPT,
               "\"shape\" element %zu is %s, expected a non-negative integer", i,
               json_is_integer(dj) ? "negative" : json_kind(dj));
      return H3_ERR;
    }
    t->type.dims[i] = (int64_t)v;
    if (__builtin_mul_overflow(numel, v, &numel)) overflow = 1;
  }
  uint64_t need;
  if (overflow || __builtin_mul_overflow(numel, (uint64_t)h3_dtype_size(t->type.dtype), &need)) {
    st_error(d, p, name, HINT_CORRUPT, "shape is too large (its size overflows 64 bits)");
    return H3_ERR;
  }
  uint64_t b, en;
  if (!offs || !json_is_array(offs) || json_array_size(offs) != 2 ||
      !get_uint(json_array_get(offs, 0), &b) || !get_uint(json_array_get(offs, 1), &en)) {
    st_error(d, p, name, HINT_CORRUPT,
             offs ? "\"data_offsets\" must be a list of 2 non-negative integers [begin, end]"
                  : "\"data_offsets\" is missing");
    return H3_ERR;
  }
  if (en < b) {
    st_error(d, p, name, HINT_CORRUPT,
             "data_offsets [%llu, %llu]: end is before begin", (unsigned long long)b,
             (unsigned long long)en);
    return H3_ERR;
  }
  if (en > data_len) {
    st_error(d, p, name, "the file may be truncated (an interrupted copy or download?)",
             "data_offsets [%llu, %llu] go beyond the data, which is %zu bytes",
             (unsigned long long)b, (unsigned long long)en, data_len);
    return H3_ERR;
  }
  if (en - b != need) {
    char dims[160];
    print_dims(dims, sizeof dims, &t->type);
    st_error(d, p, name, HINT_CORRUPT,
             "data_offsets [%llu, %llu] hold %llu bytes but %s %s needs %llu",
             (unsigned long long)b, (unsigned long long)en, (unsigned long long)(en - b), ds,
             dims, (unsigned long long)need);
    return H3_ERR;
  }
  t->offset = (size_t)b;
  t->nbytes = (size_t)need;
  return H3_OK;
}

static int cmp_offset(const void *a, const void *b) {
  const h3_st_tensor *x = a, *y = b;
  if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
  if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
  return strcmp(x->name, y->name);
}

static int cmp_name(const void *a, const void *b) {
  return strcmp(((const h3_st_tensor *)a)->name, ((const h3_st_tensor *)b)->name);
}

/* Tensors must tile the data exactly: from 0, each begin = previous end, last end = size. */
static h3_status check_layout(h3_safetensors *st, size_t data_len, h3_diag *d) {
  qsort(st->t, (size_t)st->n, sizeof *st->t, cmp_offset);
  size_t at = 0;
  for (int i = 0; i < st->n; i++) {
    const h3_st_tensor *t = &st->t[i];
    if (t->offset < at) {
      st_error(d, st->path, t->name, HINT_CORRUPT,
               "data_offsets [%zu, %zu] overlap tensor '%s' [%zu, %zu]", t->offset,
               t->offset + t->nbytes, st->t[i - 1].name, st->t[i - 1].offset, at);
      return H3_ERR;
    }
    if (t->offset > at) {
      st_error(d, st->path, t->name, HINT_CORRUPT,
               "data_offsets [%zu, %zu] leave a gap of %zu unused bytes before it", t->offset,
               t->offset + t->nbytes, t->offset - at);
      return H3_ERR;
    }
    at = t->offset + t->nbytes;
  }
  if (at != data_len) {
    st_error(d, st->path, NULL, "the file was appended to or is not a safetensors file",
             "%zu trailing byte%s after the last tensor's data", data_len - at,
             data_len - at == 1 ? "" : "s");
    return H3_ERR;
  }
  return H3_OK;
}

static h3_status parse_file(h3_safetensors *st, h3_diag *d) {
  const char *p = st->path;
  if (st->len < 8) {
    st_error(d, p, NULL, "a safetensors file starts with an 8-byte header length",
             "file is %zu bytes, shorter than the 8-byte header length", st->len);
    return H3_ERR;
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | st->base[i];
  if (n > ST_MAX_HEADER) {
    st_error(d, p, NULL, "this is not a safetensors file, or its first 8 bytes are damaged",
             "header length %llu is absurd (the limit is %llu bytes)", (unsigned long long)n,
             ST_MAX_HEADER);
    return H3_ERR;
  }
  if (n > st->len - 8) {
    st_error(d, p, NULL, "the file may be truncated (an interrupted copy or download?)",
             "header length %llu goes beyond the end of the file (%zu bytes)",
             (unsigned long long)n, st->len);
    return H3_ERR;
  }
  json_error_t jerr;
  json_t *root = json_loadb((const char *)st->base + 8, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
  if (!root) {
    st_error(d, p, NULL, HINT_CORRUPT, "header JSON is invalid at line %d, column %d: %s",
             jerr.line, jerr.column, jerr.text);
    return H3_ERR;
  }
  h3_status rc = H3_OK;
  size_t data_len = st->len - 8 - (size_t)n;
  if (!json_is_object(root)) {
    st_error(d, p, NULL, HINT_CORRUPT, "header JSON is %s, expected an object", json_kind(root));
    rc = H3_ERR;
    goto done;
  }
  size_t cap = json_object_size(root);
  st->t = calloc(cap ? cap : 1, sizeof *st->t);
  if (!st->t) {
    st_error(d, p, NULL, H3_HINT_OOM, "out of memory reading the header (%zu entries)", cap);
    rc = H3_ERR;
    goto done;
  }
  const char *key;
  json_t *val;
  json_object_foreach(root, key, val) {
    if (strcmp(key, "__metadata__") == 0) {
      if ((rc = parse_metadata(st, val, d)) != H3_OK) goto done;
      continue;
    }
    h3_st_tensor *t = &st->t[st->n];
    if ((rc = parse_entry(st, key, val, data_len, t, d)) != H3_OK) goto done;
    if (!(t->name = strdup(key))) {
      st_error(d, p, key, H3_HINT_OOM, "out of memory reading the header");
      rc = H3_ERR;
      goto done;
    }
    st->n++;
  }
  if ((rc = check_layout(st, data_len, d)) != H3_OK) goto done;
  const unsigned char *data = st->base + 8 + n;
  for (int i = 0; i < st->n; i++) st->t[i].data = st->t[i].nbytes ? data + st->t[i].offset : NULL;
  qsort(st->t, (size_t)st->n, sizeof *st->t, cmp_name);
done:
  json_decref(root);
  return rc;
}

static h3_safetensors *st_new(const char *path, h3_diag *d) {
  h3_safetensors *st = calloc(1, sizeof *st);
  if (st) st->path = strdup(path);
  if (!st || !st->path) {
    free(st);
    st_error(d, path, NULL, H3_HINT_OOM, "out of memory");
    return NULL;
  }
  return st;
}

h3_safetensors *h3_safetensors_open_memory(const char *name, const void *data, size_t len,
                                           h3_diag *d) {
  h3_safetensors *st = st_new(name, d);
  if (!st) return NULL;
  st->base = data;
  st->len = len;
  if (parse_file(st, d) != H3_OK) {
    st_free(st);
    return NULL;
  }
  return st;
}

h3_safetensors *h3_safetensors_open(const char *path, h3_diag *d) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    st_error(d, path, NULL, "check the path", "cannot open: %s", strerror(errno));
    return NULL;
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    st_error(d, path, NULL, "check the path and its permissions", "cannot stat: %s", strerror(errno));
    close(fd);
    return NULL;
  }
  if (!S_ISREG(sb.st_mode)) {
    st_error(d, path, NULL, "give the path of a .safetensors file", "not a regular file");
    close(fd);
    return NULL;
  }
  h3_input_register(fd, path, "input"); /* no output may replace it (support.h) */
  h3_safetensors *st = st_new(path, d);
  if (!st) {
    close(fd);
    return NULL;
  }
  st->len = (size_t)sb.st_size;
  if (st->len > 0) {
    void *m = mmap(NULL, st->len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      st_error(d, path, NULL,
               "copy the file to a local disk, or raise the process's memory limit (ulimit -v)",
               "cannot map the file: %s", strerror(errno));
      close(fd);
      st_free(st);
      return NULL;
    }
    st->base = m;
    st->mapped = 1;
  }
  close(fd);
  if (parse_file(st, d) != H3_OK) {
    st_free(st);
    return NULL;
  }
  return st;
}

const char *h3_safetensors_path(const h3_safetensors *st) { return st->path; }
int h3_safetensors_count(const h3_safetensors *st) { return st->n; }

const h3_st_tensor *h3_safetensors_at(const h3_safetensors *st, int i) {
  return i >= 0 && i < st->n ? &st->t[i] : NULL;
}

const h3_st_tensor *h3_safetensors_find(const h3_safetensors *st, const char *name) {
  int lo = 0, hi = st->n - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    int c = strcmp(name, st->t[mid].name);
    if (c == 0) return &st->t[mid];
    if (c < 0)
      hi = mid - 1;
    else
      lo = mid + 1;
  }
  return NULL;
}

int h3_safetensors_index(const h3_safetensors *st, const h3_st_tensor *t) {
  return (int)(t - st->t);
}

int h3_safetensors_metadata_count(const h3_safetensors *st) { return st->n_meta; }

void h3_safetensors_metadata_at(const h3_safetensors *st, int i, const char **key,
                                const char **value) {
  *key = st->meta[2 * i];
  *value = st->meta[2 * i + 1];
}

const char *h3_safetensors_metadata(const h3_safetensors *st, const char *key) {
  for (int i = 0; i < st->n_meta; i++)
    if (strcmp(st->meta[2 * i], key) == 0) return st->meta[2 * i + 1];
  return NULL;
}
