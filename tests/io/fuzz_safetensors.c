/* fuzz_safetensors.c: libFuzzer target for the safetensors reader.
 *
 * Each input is parsed as a whole safetensors file (h3_safetensors_open_memory). A file
 * that opens must be consistent: every tensor's bytes lie inside the input, sizes match
 * the shapes, lookups by name find each tensor, metadata lookups work. Any input: no
 * crash, no leak, no UB (built with -fsanitize=fuzzer,address,undefined). Built only with -DH3_FUZZ=ON (clang);
 * fuzz_corpus_driver.c runs the same function over the seed corpus in every build.
 */
#include "h3/safetensors.h"

#include <assert.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  h3_diag d;
  h3_diag_init(&d);
  h3_safetensors *st = h3_safetensors_open_memory("fuzz", data, size, &d);
  if (!st) {
    assert(d.errors >= 1);
    h3_diag_free(&d);
    return 0;
  }
  unsigned sum = 0;
  for (int i = 0; i < h3_safetensors_count(st); i++) {
    const h3_st_tensor *t = h3_safetensors_at(st, i);
    assert((uint64_t)h3_type_bytes(&t->type) == t->nbytes);
    assert(h3_safetensors_find(st, t->name) == t);
    if (t->nbytes) {
      const unsigned char *p = t->data;
      assert(p >= data && p + t->nbytes <= data + size);
      sum += p[0] + p[t->nbytes - 1];
    }
  }
  for (int i = 0; i < h3_safetensors_metadata_count(st); i++) {
    const char *k, *v;
    h3_safetensors_metadata_at(st, i, &k, &v);
    assert(h3_safetensors_metadata(st, k) != NULL);
    sum += (unsigned)strlen(v);
  }
  (void)sum;
  h3_safetensors_close(st);
  h3_diag_free(&d);
  return 0;
}
