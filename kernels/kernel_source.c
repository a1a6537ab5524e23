/* kernel_source.c: lookup of the kernel sources embedded from kernels/ (include/h3/kernels.h). */
#include "h3/kernels.h"

#include <string.h>

const char *h3_kernel_source(const char *name) {
  for (const h3_kernel_text *t = h3_kernel_texts; name && t->name; t++)
    if (strcmp(t->name, name) == 0) return t->text;
  return NULL;
}

const char *h3_kernel_prelude(void) { return h3_kernel_source("prelude.cuh"); }
