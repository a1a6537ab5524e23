/* op_array.c: the growable op arrays the passes collect ops into (pass_internal.h). */
#include "pass_internal.h"

#include <stdlib.h>

bool h3_ops_push(h3_op ***ops, int *n, int *cap, h3_op *op) {
  if (*n == *cap) {
    int c = *cap ? 2 * *cap : 16;
    h3_op **grown = realloc(*ops, (size_t)c * sizeof *grown);
    if (!grown) return false;
    *ops = grown;
    *cap = c;
  }
  (*ops)[(*n)++] = op;
  return true;
}
