/* cpu_pages.c: page tables of the paged ops (paged / block / sparse attention, index_topk)
 * on the CPU: which table a query row reads, the flat cache row of a position, and the
 * checks that keep every read inside the cache (cpu_internal.h states the contracts). */
#include "cpu_internal.h"

h3cpu_pages h3cpu_pages_of(const h3_tensor *page_table, int64_t T) {
  const h3_type *t = &page_table->type;
  h3cpu_pages pg = {page_table, t->rank ? t->dims[t->rank - 1] : 1, t->rank == 2 ? t->dims[0] : 1, 0};
  pg.per = pg.rows > 0 && T % pg.rows == 0 ? T / pg.rows : 0;
  return pg;
}

int64_t h3cpu_page_slot(const h3cpu_pages *pg, int64_t t, int64_t j, int64_t page) {
  int64_t e = h3cpu_ldi(pg->t->data, pg->t->type.dtype, h3cpu_table_row(pg, t) * pg->np + j / page);
  return e * page + j % page;
}

bool h3cpu_check_table_row(const h3_cpu_ctx *c, const h3_op *op, const h3cpu_pages *pg, int64_t t,
                      int64_t p, int64_t P, int64_t page) {
  const int64_t r = h3cpu_table_row(pg, t);
  for (int64_t b = 0; p >= 0 && b <= p / page; b++) {
    int64_t e = h3cpu_ldi(pg->t->data, pg->t->type.dtype, r * pg->np + b);
    if ((e < 0 || e >= P) && pg->rows > 1) {
      h3cpu_error(c, op, "page-table entries must name pages of the cache",
                  "page_table[%lld][%lld] = %lld is outside [0, %lld)", (long long)r, (long long)b,
                  (long long)e, (long long)P);
      return false;
    }
    if (e < 0 || e >= P) {
      h3cpu_error(c, op, "page-table entries must name pages of the cache",
                  "page_table[%lld] = %lld is outside [0, %lld)", (long long)b, (long long)e,
                  (long long)P);
      return false;
    }
  }
  return true;
}

bool h3cpu_check_pages(const h3_cpu_ctx *c, const h3_op *op, const h3cpu_pages *pg,
                       const h3_tensor *pos, int64_t last, int64_t T, int64_t P, int64_t page,
                       int64_t *maxp) {
  *maxp = last;
  if (pg->rows < 1 || T % pg->rows) {
    h3cpu_error(c, op,
                "one table for every row, one per row, or one per group of rows: the tables must "
                "divide the rows",
                "the page table has %lld rows for %lld query rows", (long long)pg->rows,
                (long long)T);
    return false;
  }
  for (int64_t t = 0; pos && t < T; t++) {
    int64_t p = h3cpu_ldi(pos->data, pos->type.dtype, t);
    if (p < 0 || p >= pg->np * page) {
      h3cpu_error(c, op, "positions must fit the page table",
                  "pos[%lld] = %lld is outside [0, %lld)", (long long)t, (long long)p,
                  (long long)(pg->np * page));
      return false;
    }
    if (p > *maxp) *maxp = p;
    if (pg->rows > 1 && !h3cpu_check_table_row(c, op, pg, t, p, P, page)) return false;
  }
  return pg->rows > 1 ? true : h3cpu_check_table_row(c, op, pg, 0, *maxp, P, page);
}
