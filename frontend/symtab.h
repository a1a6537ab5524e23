/* symtab.h: a string-keyed hash map for the front end's global names (private).
 *
 * Open addressing with linear probing and FNV-1a hashing; grows at half load, so lookups
 * stay O(1) on models with hundreds of parameters. Keys are not copied (they must
 * outlive the table: arena strings). The table itself is malloc'd; sym_free releases it.
 */
#ifndef H3_FRONTEND_SYMTAB_H
#define H3_FRONTEND_SYMTAB_H

#include <stddef.h>

typedef struct {
  const char **keys;
  void **vals;
  size_t n, cap;
} symtab;

void sym_init(symtab *t);
void sym_free(symtab *t);
void *sym_get(const symtab *t, const char *key);
/* Inserts or replaces; returns 0, or -1 when out of memory. */
int sym_put(symtab *t, const char *key, void *val);
/* Iteration: slots 0 .. cap-1; sym_key is NULL for an empty slot. */
static inline const char *sym_key(const symtab *t, size_t i) { return t->keys[i]; }

#endif
