/* ops_sparse.c: CPU reference of index_topk, the block selection of M3.1's sparse (MSA)
 * attention.
 *
 * index_topk(iq[T, Hi, D], ikc[P, page, D], pos i32[T], page_table i32[NP] or [R, NP]) {block, topk}
 *   -> i32[T, Hi, topk]. For row t (position p) and index head h: nb = p / block + 1;
 *   score[b] = max over positions j in block b with j <= p of (sum_d iq_d * ik_jd) in fp32
 *   (d ascending, no scale); score[p / block] = +inf; the min(topk, nb) best blocks by
 *   descending score (ties: the lower block) are written in ascending block order, then -1.
 *   Position j's index key is flat row table[j / page] * page + j % page of ikc, table = the
 *   page table or its row t / (T / R) (cpu_pages.c).
 */
#include "cpu_internal.h"

#include <stdlib.h>

H3_CPU_KERNEL(h3cpu_index_topk) {
  (void)n_in, (void)n_out;
  const h3_tensor *iq = &in[0], *ik = &in[1], *pos = &in[2], *pt = &in[3];
  int64_t T = iq->type.dims[0], Hi = iq->type.dims[1], D = iq->type.dims[2];
  int64_t P = ik->type.dims[0], page = ik->type.dims[1];
  int64_t block = h3_op_attr_int(op, "block", page);
  int64_t topk = out[0].type.dims[out[0].type.rank - 1];
  if (block <= 0) {
    h3cpu_error(c, op, NULL, "block %lld must be positive", (long long)block);
    return H3_ERR;
  }
  h3cpu_pages pages = h3cpu_pages_of(pt, T);
  int64_t maxp;
  if (!h3cpu_check_pages(c, op, &pages, pos, -1, T, P, page, &maxp)) return H3_ERR;
  int64_t max_nb = maxp / block + 1;
  float *score = malloc((size_t)(max_nb + 1) * sizeof(float));
  char *taken = malloc((size_t)(max_nb + 1));
  float *q = malloc((size_t)(D + 1) * sizeof(float));
  if (!score || !taken || !q) {
    free(score), free(taken), free(q);
    h3cpu_error(c, op, H3_HINT_OOM, "out of memory");
    return H3_ERR;
  }
  for (int64_t t = 0; t < T; t++) {
    int64_t p = h3cpu_ldi(pos->data, pos->type.dtype, t), nb = p / block + 1;
    for (int64_t h = 0; h < Hi; h++) {
      for (int64_t d = 0; d < D; d++)
        q[d] = h3cpu_ld(iq->data, iq->type.dtype, (t * Hi + h) * D + d);
      for (int64_t b = 0; b < nb; b++) {
        float best = -INFINITY;
        for (int64_t j = b * block; j < (b + 1) * block && j <= p; j++) {
          int64_t slot = h3cpu_page_slot(&pages, t, j, page);
          float dot = 0.0f;
          for (int64_t d = 0; d < D; d++)
            dot += q[d] * h3cpu_ld(ik->data, ik->type.dtype, slot * D + d);
          if (dot > best) best = dot;
        }
        score[b] = best;
        taken[b] = 0;
      }
      score[nb - 1] = INFINITY;
      int64_t k = nb < topk ? nb : topk;
      for (int64_t s = 0; s < k; s++) {
        int64_t bi = -1;
        for (int64_t b = 0; b < nb; b++)
          if (!taken[b] && (bi < 0 || score[b] > score[bi])) bi = b;
        if (bi < 0) break;
        taken[bi] = 1;
      }
      int64_t o = (t * Hi + h) * topk, n = 0;
      for (int64_t b = 0; b < nb; b++)
        if (taken[b]) h3cpu_sti(out[0].data, out[0].type.dtype, o + n++, b);
      for (; n < topk; n++) h3cpu_sti(out[0].data, out[0].type.dtype, o + n, -1);
    }
  }
  free(score), free(taken), free(q);
  return H3_OK;
}
