/* safetensors.h: reading and writing safetensors files, the ecosystem's tensor format.
 *
 * Format: 8 bytes little-endian header length N; N bytes of JSON
 *   {"NAME": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [BEGIN, END]}, ...,
 *    "__metadata__": {"key": "string value", ...}}
 * then the data; offsets are relative to the data start (byte 8 + N). h3 accepts the
 * dtypes BF16 F16 F32 F64 I8 I32 I64 U8 (= h3_dtype) and ranks up to H3_MAX_RANK, and
 * F8_E4M3 read as U8 bytes with the tensor's f8_e4m3 flag set (the e4m3 scales of an NVFP4
 * weight, include/h3/nvfp4.h; loaders accept it only there). The writer writes U8.
 *
 * Reader: the file is mapped read-only (never read twice: tensor data points into the
 * mapping, so a loader copies it once to where it belongs). Everything is validated at
 * open, as the Python library does: header length, JSON (duplicate keys rejected),
 * entries, dtypes, shapes, offsets (in the file, size = numel * dtype size, tensors
 * packed without overlap or gap), no trailing bytes. Each error names the file and the
 * tensor and carries a hint. Tensor data has no alignment guarantee: copy it (memcpy)
 * rather than casting the pointer.
 *
 * Writer: tensors are added with borrowed data pointers (not copied; they must stay valid
 * until commit) and written on commit: header keys "__metadata__" first then tensor names
 * in byte order; the data of larger dtypes first (then by name) so each tensor is aligned
 * to its element size; the header is padded with spaces to a multiple of 8. The file is
 * written to a temporary file in the same folder, fsync'd and renamed: a failed commit
 * leaves no output file (and an earlier file of that name untouched).
 */
#ifndef H3_SAFETENSORS_H
#define H3_SAFETENSORS_H

#include "h3/ir.h"
#include "h3/support.h"

typedef struct {
  const char *name;
  h3_type type;     /* dtype + shape */
  const void *data; /* into the mapping; unaligned; NULL when nbytes == 0 */
  size_t nbytes;
  size_t offset; /* begin offset relative to the data start */
  bool f8_e4m3;  /* the file says F8_E4M3: type.dtype is U8 and each byte is e4m3 bits */
} h3_st_tensor;

typedef struct h3_safetensors h3_safetensors;

/* Opens and validates a file; NULL after reporting to `d`. */
h3_safetensors *h3_safetensors_open(const char *path, h3_diag *d);
/* Same on a caller's buffer (borrowed; must outlive the result). `name` is used in
 * messages. For tests and the fuzzer. */
h3_safetensors *h3_safetensors_open_memory(const char *name, const void *data, size_t len,
                                           h3_diag *d);
void h3_safetensors_close(h3_safetensors *st);

const char *h3_safetensors_path(const h3_safetensors *st);
/* Tensors are sorted by name; 0 <= i < count. */
int h3_safetensors_count(const h3_safetensors *st);
const h3_st_tensor *h3_safetensors_at(const h3_safetensors *st, int i);
/* Lookup by name (binary search); NULL when absent. */
const h3_st_tensor *h3_safetensors_find(const h3_safetensors *st, const char *name);
/* Index of `t` in the sorted order (for callers that mark tensors as used). */
int h3_safetensors_index(const h3_safetensors *st, const h3_st_tensor *t);
/* "__metadata__" entries: count, i-th key/value, lookup (NULL when absent). */
int h3_safetensors_metadata_count(const h3_safetensors *st);
void h3_safetensors_metadata_at(const h3_safetensors *st, int i, const char **key,
                                const char **value);
const char *h3_safetensors_metadata(const h3_safetensors *st, const char *key);

/* "BF16", "F32", ...; and back (1 on success). */
const char *h3_safetensors_dtype_name(h3_dtype t);
int h3_safetensors_dtype_parse(const char *s, h3_dtype *out);

/* ---- writer ------------------------------------------------------------------------------- */
typedef struct h3_safetensors_writer h3_safetensors_writer;

/* NULL when out of memory. */
h3_safetensors_writer *h3_safetensors_writer_new(void);
void h3_safetensors_writer_free(h3_safetensors_writer *w);
/* Adds a tensor (name copied, data borrowed until commit; `data` may be NULL only when
 * the tensor has no elements). Errors: empty or reserved name, duplicate name, rank
 * beyond H3_MAX_RANK, negative dim, size overflow. */
h3_status h3_safetensors_writer_add(h3_safetensors_writer *w, const char *name, h3_dtype dtype,
                                    int rank, const int64_t *dims, const void *data,
                                    h3_diag *d);
/* Adds or replaces a "__metadata__" entry (strings copied). */
h3_status h3_safetensors_writer_metadata(h3_safetensors_writer *w, const char *key,
                                         const char *value, h3_diag *d);
/* Writes the file atomically (see the header comment). The writer may be committed again
 * (e.g. to another path) and must still be freed. */
h3_status h3_safetensors_writer_commit(h3_safetensors_writer *w, const char *path, h3_diag *d);

#endif
