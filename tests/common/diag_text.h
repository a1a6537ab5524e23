/* diag_text.h: what h3_diag_print prints, as a string (test-only, header-only). */
#ifndef H3_TESTS_DIAG_TEXT_H
#define H3_TESTS_DIAG_TEXT_H

#include "h3/support.h"

#include <stdio.h>

/* The printed diagnostics (malloc'd; NULL when out of memory). */
static inline char *diag_text(const h3_diag *d) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return NULL;
  h3_diag_print(d, f);
  fclose(f);
  return buf;
}

#endif
