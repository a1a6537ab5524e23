/* strmap.h: a string-keyed hash map (open addressing, linear probing, FNV-1a, grows at
 * half load) used wherever h3 looks names up: the front end's symbols, the IR text
 * parser's values. Keys are borrowed (they must outlive the map: arena strings); values
 * are non-NULL pointers. The arrays are malloc'd; h3_strmap_free releases them.
 */
#ifndef H3_STRMAP_H
#define H3_STRMAP_H

#include <stddef.h>

typedef struct {
  const char **keys;
  void **vals;
  size_t n, cap;
} h3_strmap;

void h3_strmap_init(h3_strmap *m);
void h3_strmap_free(h3_strmap *m);
void *h3_strmap_get(const h3_strmap *m, const char *key);
/* Adds or replaces; returns 0, or -1 when out of memory. */
int h3_strmap_put(h3_strmap *m, const char *key, void *val);
/* Iteration over slots 0 .. cap-1; the key is NULL for an empty slot. */
static inline const char *h3_strmap_key(const h3_strmap *m, size_t i) { return m->keys[i]; }

#endif
