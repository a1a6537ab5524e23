/* strmap.c: the string-keyed hash map of include/h3/strmap.h (the front end's symbols,
 * the IR text printer's and parser's names): FNV-1a hashing, linear probing, grows at
 * half load, so lookups stay O(1) on modules of thousands of values. Keys are borrowed.
 */
#include "ir_internal.h"

#include <stdlib.h>
#include <string.h>

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

void h3_strmap_init(h3_strmap *m) { memset(m, 0, sizeof *m); }

void h3_strmap_free(h3_strmap *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

static size_t find_slot(const h3_strmap *m, const char *key) {
  size_t mask = m->cap - 1, i = (size_t)hash_str(key) & mask;
  while (m->keys[i] && strcmp(m->keys[i], key) != 0) i = (i + 1) & mask;
  return i;
}

void *h3_strmap_get(const h3_strmap *m, const char *key) {
  if (!m->cap) return NULL;
  size_t i = find_slot(m, key);
  return m->keys[i] ? m->vals[i] : NULL;
}

int h3_strmap_put(h3_strmap *m, const char *key, void *val) {
  if ((m->n + 1) * 2 > m->cap) {
    size_t nc = m->cap ? m->cap * 2 : 64;
    h3_strmap big = {calloc(nc, sizeof(char *)), calloc(nc, sizeof(void *)), 0, nc};
    if (!big.keys || !big.vals) {
      free(big.keys);
      free(big.vals);
      return -1;
    }
    for (size_t i = 0; i < m->cap; i++)
      if (m->keys[i]) {
        size_t j = find_slot(&big, m->keys[i]);
        big.keys[j] = m->keys[i];
        big.vals[j] = m->vals[i];
        big.n++;
      }
    h3_strmap_free(m);
    *m = big;
  }
  size_t i = find_slot(m, key);
  if (!m->keys[i]) {
    m->keys[i] = key;
    m->n++;
  }
  m->vals[i] = val;
  return 0;
}
