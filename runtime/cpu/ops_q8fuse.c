/* ops_q8fuse.c: the per-row int8 quantizer shared by quantize_rows (ops_int8.c) and the
 * producers that absorb it (norm_modulate / residual_norm_modulate with quantize = 1,
 * ops_normmod.c; passes/int8_fuse_quant.c). One function, so a fused producer at the exact
 * tier gives the standalone op's codes and scale bit for bit (docs/models/accelerations.md §4.1
 * rule 4).
 *
 * h3cpu_quantize_row(v[K] fp32, K, q[K]) -> s: amax = max_k |v_k| (fmaxf: NaN ignored);
 * s = amax / 127, raised to 1e-30; q_k = clamp(rne(v_k / s), -128, 127), NaN -> 0.
 */
#include "cpu_internal.h"

float h3cpu_quantize_row(const float *v, int64_t K, int8_t *q) {
  float amax = 0.0f;
  for (int64_t k = 0; k < K; k++) amax = fmaxf(amax, fabsf(v[k]));
  float s = amax / 127.0f;
  if (s < 1e-30f) s = 1e-30f;
  for (int64_t k = 0; k < K; k++) {
    float c = rintf(v[k] / s);
    q[k] = c != c ? 0 : c <= -128.0f ? -128 : c >= 127.0f ? 127 : (int8_t)c;
  }
  return s;
}
