/* serve_pool.c: the serving engine's KV page pool (include/h3/serve.h). */
#include "h3/serve.h"

#include <stdlib.h>

h3_status h3_page_pool_init(h3_page_pool *p, int64_t n_pages, h3_diag *d) {
  *p = (h3_page_pool){0};
  if (n_pages < 2 || n_pages > INT32_MAX) {
    h3_diag_error(d, (h3_span){0}, "give --kv-pages between 2 and the caches' pages",
                  "a KV pool of %lld pages holds no usable page (page 0 is reserved)",
                  (long long)n_pages);
    return H3_ERR;
  }
  p->free = malloc((size_t)n_pages * sizeof *p->free);
  if (!p->free) {
    h3_diag_error(d, (h3_span){0}, "give a smaller --kv-pages, or free memory",
                  "out of host memory for a pool of %lld pages", (long long)n_pages);
    return H3_ERR;
  }
  p->n_pages = n_pages;
  /* a stack popped from the end: the lowest pages are taken first */
  for (int64_t i = 0; i < n_pages - 1; i++) p->free[i] = (int32_t)(n_pages - 1 - i);
  p->n_free = n_pages - 1;
  return H3_OK;
}

void h3_page_pool_free(h3_page_pool *p) {
  free(p->free);
  *p = (h3_page_pool){0};
}

int64_t h3_page_pool_capacity(const h3_page_pool *p) { return p->n_pages - 1; }

int64_t h3_page_pool_used(const h3_page_pool *p) { return p->n_pages - 1 - p->n_free; }

bool h3_page_pool_take(h3_page_pool *p, int64_t n, int32_t *out) {
  if (n < 0 || n > p->n_free) return false;
  for (int64_t i = 0; i < n; i++) out[i] = p->free[--p->n_free];
  int64_t used = h3_page_pool_used(p);
  if (used > p->peak_used) p->peak_used = used;
  return true;
}

void h3_page_pool_give(h3_page_pool *p, int64_t n, const int32_t *pages) {
  for (int64_t i = n - 1; i >= 0; i--) p->free[p->n_free++] = pages[i];
}
