/* cuda_m31_moe_shape.h: the grid of moe's one-row tensor-core GEMVs (H3_MOE_MMA_NAME and
 * H3_MOE_MMA_DOWN_NAME of kernels/m31_moe.cu, a block per slot along x), shared by the
 * launcher (cuda_m31_moe.c) and its host emulation test. Plain C, no CUDA headers. */
#ifndef H3_CUDA_M31_MOE_SHAPE_H
#define H3_CUDA_M31_MOE_SHAPE_H

/* The grid's y for `groups` groups of outputs (F / 16 for the gate-up step, H / 32 for the
 * down step) over k slots: the fewest groups a block, a divisor of `groups` up to 8, that keep
 * the k * y blocks within `slots` (the blocks the card holds at once), so that the grid runs
 * as one wave and no second wave's stragglers stream alone at its end (a step of 768 blocks
 * where 396 fit); `groups` (one group a block) when none does or it already fits. */
static inline long long h3cu_moe_one_row_y(long long k, long long groups, long long slots) {
  for (long long per = 1; per <= 8; per++)
    if (groups % per == 0 && k * (groups / per) <= slots) return groups / per;
  return groups;
}

#endif
