/* safetensors_write.c: the safetensors writer (include/h3/safetensors.h).
 *
 * The writer collects tensor descriptions (data borrowed) and metadata, and on commit
 * lays the file out: header keys in name order ("__metadata__" first), data ordered by
 * element size (largest first) then name so every tensor is aligned to its element size,
 * the header padded with spaces to a multiple of 8. The bytes go through the output writer
 * (support.h h3_output_*): atomically through a temporary file, never over an input, a
 * link or a device, and no partial file is left on a failure or an interrupt.
 * Names are kept in a small open-addressing hash set so that duplicate checks stay linear
 * for the tens of thousands of tensors of a large MoE model.
 */
#include "h3/safetensors.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char *name;
  h3_dtype dtype;
  int rank;
  int64_t dims[H3_MAX_RANK];
  const void *data;
  size_t nbytes;
  size_t offset; /* set by commit */
} wtensor;

struct h3_safetensors_writer {
  int n, cap;
  wtensor *t;
  int *slots; /* hash set of tensor indices, -1 = empty; size nslots (power of 2) */
  size_t nslots;
  int n_meta, cap_meta;
  char **meta; /* key0, value0, ... */
};

static uint32_t name_hash(const char *s) {
  uint32_t h = 2166136261u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

h3_safetensors_writer *h3_safetensors_writer_new(void) {
  return calloc(1, sizeof(h3_safetensors_writer));
}

void h3_safetensors_writer_free(h3_safetensors_writer *w) {
  if (!w) return;
  for (int i = 0; i < w->n; i++) free(w->t[i].name);
  free(w->t);
  free(w->slots);
  for (int i = 0; i < 2 * w->n_meta; i++) free(w->meta[i]);
  free(w->meta);
  free(w);
}

static int *find_slot(h3_safetensors_writer *w, const char *name) {
  size_t mask = w->nslots - 1;
  for (size_t i = name_hash(name) & mask;; i = (i + 1) & mask)
    if (w->slots[i] < 0 || strcmp(w->t[w->slots[i]].name, name) == 0) return &w->slots[i];
}

/* Keeps the hash set at most half full. */
static int grow_slots(h3_safetensors_writer *w) {
  if (w->nslots && (size_t)(w->n + 1) * 2 <= w->nslots) return 1;
  size_t ns = w->nslots ? w->nslots * 2 : 64;
  int *s = malloc(ns * sizeof *s);
  if (!s) return 0;
  free(w->slots);
  w->slots = s;
  w->nslots = ns;
  for (size_t i = 0; i < ns; i++) s[i] = -1;
  for (int i = 0; i < w->n; i++) *find_slot(w, w->t[i].name) = i;
  return 1;
}

h3_status h3_safetensors_writer_add(h3_safetensors_writer *w, const char *name, h3_dtype dtype,
                                    int rank, const int64_t *dims, const void *data,
                                    h3_diag *d) {
  h3_span none = {0};
  if (!name || !*name || strcmp(name, "__metadata__") == 0) {
    h3_diag_error(d, none, "give each tensor a non-empty name other than \"__metadata__\"",
                  "safetensors writer: invalid tensor name '%s'", name ? name : "(null)");
    return H3_ERR;
  }
  if ((unsigned)dtype >= H3_DTYPE_COUNT || rank < 0 || rank > H3_MAX_RANK) {
    h3_diag_error(d, none, NULL,
                  "safetensors writer: tensor '%s': rank %d or dtype %d out of range", name,
                  rank, (int)dtype);
    return H3_ERR;
  }
  uint64_t numel = 1, bytes;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0 || __builtin_mul_overflow(numel, (uint64_t)dims[i], &numel)) {
      h3_diag_error(d, none, NULL, "safetensors writer: tensor '%s': dim %d = %lld is invalid",
                    name, i, (long long)dims[i]);
      return H3_ERR;
    }
  }
  if (__builtin_mul_overflow(numel, (uint64_t)h3_dtype_size(dtype), &bytes) ||
      bytes > (uint64_t)SIZE_MAX || (bytes && !data)) {
    h3_diag_error(d, none, NULL, "safetensors writer: tensor '%s': %s", name,
                  bytes && !data ? "no data" : "size overflows");
    return H3_ERR;
  }
  if (!grow_slots(w)) goto oom;
  int *slot = find_slot(w, name);
  if (*slot >= 0) {
    h3_diag_error(d, none, "tensor names in a file must be unique",
                  "safetensors writer: tensor '%s' added twice", name);
    return H3_ERR;
  }
  if (w->n == w->cap) {
    int nc = w->cap ? w->cap * 2 : 16;
    wtensor *nt = realloc(w->t, (size_t)nc * sizeof *nt);
    if (!nt) goto oom;
    w->t = nt;
    w->cap = nc;
  }
  wtensor *t = &w->t[w->n];
  memset(t, 0, sizeof *t);
  if (!(t->name = strdup(name))) goto oom;
  t->dtype = dtype;
  t->rank = rank;
  for (int i = 0; i < rank; i++) t->dims[i] = dims[i];
  t->data = data;
  t->nbytes = (size_t)bytes;
  *slot = w->n++;
  return H3_OK;
oom:
  h3_diag_error(d, none, H3_HINT_OOM, "safetensors writer: out of memory adding tensor '%s'", name);
  return H3_ERR;
}

h3_status h3_safetensors_writer_metadata(h3_safetensors_writer *w, const char *key,
                                         const char *value, h3_diag *d) {
  h3_span none = {0};
  char *v = strdup(value);
  if (!v) goto oom;
  for (int i = 0; i < w->n_meta; i++)
    if (strcmp(w->meta[2 * i], key) == 0) {
      free(w->meta[2 * i + 1]);
      w->meta[2 * i + 1] = v;
      return H3_OK;
    }
  if (w->n_meta == w->cap_meta) {
    int nc = w->cap_meta ? w->cap_meta * 2 : 8;
    char **nm = realloc(w->meta, (size_t)nc * 2 * sizeof *nm);
    if (!nm) goto oom;
    w->meta = nm;
    w->cap_meta = nc;
  }
  char *k = strdup(key);
  if (!k) goto oom;
  w->meta[2 * w->n_meta] = k;
  w->meta[2 * w->n_meta + 1] = v;
  w->n_meta++;
  return H3_OK;
oom:
  free(v);
  h3_diag_error(d, none, H3_HINT_OOM, "safetensors writer: out of memory adding metadata '%s'", key);
  return H3_ERR;
}

static int cmp_name_ptr(const void *a, const void *b) {
  return strcmp((*(wtensor *const *)a)->name, (*(wtensor *const *)b)->name);
}

static int cmp_data_ptr(const void *a, const void *b) {
  const wtensor *x = *(wtensor *const *)a, *y = *(wtensor *const *)b;
  size_t sx = h3_dtype_size(x->dtype), sy = h3_dtype_size(y->dtype);
  if (sx != sy) return sx > sy ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* The header JSON, unpadded; NULL when out of memory. Sets each tensor's offset. */
static char *build_header(h3_safetensors_writer *w, wtensor **by_name, wtensor **by_data) {
  for (int i = 0; i < w->n; i++) by_name[i] = by_data[i] = &w->t[i];
  qsort(by_name, (size_t)w->n, sizeof *by_name, cmp_name_ptr);
  qsort(by_data, (size_t)w->n, sizeof *by_data, cmp_data_ptr);
  size_t at = 0;
  for (int i = 0; i < w->n; i++) {
    by_data[i]->offset = at;
    at += by_data[i]->nbytes;
  }
  json_t *root = json_object();
  int ok = root != NULL;
  if (ok && w->n_meta) {
    json_t *meta = json_object();
    ok = meta && json_object_set_new(root, "__metadata__", meta) == 0;
    for (int i = 0; ok && i < w->n_meta; i++)
      ok = json_object_set_new(meta, w->meta[2 * i], json_string(w->meta[2 * i + 1])) == 0;
  }
  for (int i = 0; ok && i < w->n; i++) {
    const wtensor *t = by_name[i];
    json_t *e = json_object(), *shape = json_array(), *offs = json_array();
    ok = e && shape && offs &&
         json_object_set_new(e, "dtype", json_string(h3_safetensors_dtype_name(t->dtype))) == 0;
    for (int k = 0; ok && k < t->rank; k++)
      ok = json_array_append_new(shape, json_integer(t->dims[k])) == 0;
    ok = ok && json_array_append_new(offs, json_integer((json_int_t)t->offset)) == 0 &&
         json_array_append_new(offs, json_integer((json_int_t)(t->offset + t->nbytes))) == 0;
    if (ok) {
      json_object_set_new(e, "shape", shape);
      json_object_set_new(e, "data_offsets", offs);
      ok = json_object_set_new(root, t->name, e) == 0;
    } else {
      json_decref(e);
      json_decref(shape);
      json_decref(offs);
    }
  }
  char *text = ok ? json_dumps(root, JSON_COMPACT) : NULL;
  json_decref(root);
  return text;
}

h3_status h3_safetensors_writer_commit(h3_safetensors_writer *w, const char *path, h3_diag *d) {
  h3_span none = {0};
  wtensor **by_name = malloc(((size_t)w->n + 1) * sizeof *by_name);
  wtensor **by_data = malloc(((size_t)w->n + 1) * sizeof *by_data);
  char *header = by_name && by_data ? build_header(w, by_name, by_data) : NULL;
  h3_status rc = H3_ERR;
  if (!header) {
    h3_diag_error(d, none, H3_HINT_OOM, "%s: out of memory building the safetensors header", path);
    goto done;
  }
  size_t hlen = strlen(header), padded = (hlen + 7) & ~(size_t)7;
  unsigned char lenbytes[8];
  for (int i = 0; i < 8; i++) lenbytes[i] = (unsigned char)((uint64_t)padded >> (8 * i));
  h3_output *out;
  if (h3_output_open(path, &out, d) != H3_OK) goto done;
  static const char spaces[8] = "        ";
  int ok = h3_output_write(out, lenbytes, 8, d) == H3_OK &&
           h3_output_write(out, header, hlen, d) == H3_OK &&
           h3_output_write(out, spaces, padded - hlen, d) == H3_OK;
  for (int i = 0; ok && i < w->n; i++)
    ok = h3_output_write(out, by_data[i]->data, by_data[i]->nbytes, d) == H3_OK;
  if (!ok) {
    h3_output_abort(out);
    goto done;
  }
  rc = h3_output_commit(out, d);
done:
  free(header);
  free(by_name);
  free(by_data);
  return rc;
}
