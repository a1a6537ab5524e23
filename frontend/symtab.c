/* symtab.c: the string-keyed hash map of symtab.h. */
#include "symtab.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

void sym_init(symtab *t) { memset(t, 0, sizeof *t); }

void sym_free(symtab *t) {
  free(t->keys);
  free(t->vals);
  memset(t, 0, sizeof *t);
}

static size_t slot_of(const symtab *t, const char *key) {
  size_t mask = t->cap - 1, i = (size_t)hash_str(key) & mask;
  while (t->keys[i] && strcmp(t->keys[i], key) != 0) i = (i + 1) & mask;
  return i;
}

void *sym_get(const symtab *t, const char *key) {
  if (!t->cap) return NULL;
  size_t i = slot_of(t, key);
  return t->keys[i] ? t->vals[i] : NULL;
}

int sym_put(symtab *t, const char *key, void *val) {
  if ((t->n + 1) * 2 > t->cap) {
    size_t nc = t->cap ? t->cap * 2 : 32;
    symtab big = {calloc(nc, sizeof(char *)), calloc(nc, sizeof(void *)), 0, nc};
    if (!big.keys || !big.vals) {
      free(big.keys);
      free(big.vals);
      return -1;
    }
    for (size_t i = 0; i < t->cap; i++)
      if (t->keys[i]) {
        size_t j = slot_of(&big, t->keys[i]);
        big.keys[j] = t->keys[i];
        big.vals[j] = t->vals[i];
        big.n++;
      }
    free(t->keys);
    free(t->vals);
    *t = big;
  }
  size_t i = slot_of(t, key);
  if (!t->keys[i]) {
    t->keys[i] = key;
    t->n++;
  }
  t->vals[i] = val;
  return 0;
}
