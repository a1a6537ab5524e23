/* nvfp4.h: the NVFP4 weight format of the DSpark draft (docs/models/minimax_m3_1.md §6 is
 * the spec; docs/nvfp4.md the user's page): its scalar codes, the quantizer and the
 * dequantizer. Used by the weight store (quantization at load, runtime/weights_nvfp4.c) and
 * by the CPU reference of linear_nvfp4 (runtime/cpu/ops_nvfp4.c).
 *
 * A weight W [N, K] (K % 16 == 0) is stored as
 *   packed u8 [N, K/2]   e2m1 codes: element 2j in the low nibble of byte j, 2j+1 in the high
 *   scale  u8 [N, K/16]  fp8-e4m3 bits (OCP E4M3FN: bias 7, no infinities, NaN = S.1111.111),
 *                        one per 16 consecutive elements along K (block b)
 *   global f32 [1]       g, the dequant multiplier
 * and stands for w'[n, k] = e2m1(code[n, k]) * e4m3(s_b) * g.
 *
 * e2m1 codes: bit 3 is the sign, bits 0-2 the magnitude 0, 0.5, 1, 1.5, 2, 3, 4, 6. The
 * quantizer writes code 0 (never 8, negative zero) for a zero magnitude.
 */
#ifndef H3_NVFP4_H
#define H3_NVFP4_H

#include <stdbool.h>
#include <stdint.h>

#define H3_NVFP4_BLOCK 16    /* elements per e4m3 scale, along K */
#define H3_E4M3_MAX 448.0f   /* largest finite e4m3 value */
#define H3_E2M1_MAX 6.0f     /* largest e2m1 magnitude */

/* e4m3 bits -> fp32, exact; 0x7f and 0xff are NaN. */
float h3_e4m3_to_f32(uint8_t code);
/* fp32 -> e4m3 bits: round to nearest, ties to the even code (even mantissa); |v| >= 448
 * saturates to +-448 (0x7e / 0xfe), infinities included; NaN gives 0x7f; -0.0 gives 0x80.
 * Subnormals (multiples of 2^-9 below 2^-6) are rounded like the normals. */
uint8_t h3_e4m3_from_f32(float v);

/* e2m1 code (the low 4 bits are read) -> fp32, exact. */
float h3_e2m1_to_f32(uint8_t code);
/* fp32 -> e2m1 code: v clamped to [-6, 6], then rounded to the nearest magnitude, ties to
 * the even code (0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4);
 * a zero magnitude gives code 0. v must not be NaN. */
uint8_t h3_e2m1_from_f32(float v);

/* Quantizes W [N, K] (row-major; bf16 bits when `bf16`, else fp32), K % 16 == 0, per §6:
 *   1. amax = max |w|; g = amax / (6 * 448) in fp32; amax = 0 (or g underflowing to 0):
 *      g = 1 and every code and scale is 0;
 *   2. per block b: s_b = e4m3(amax_b / 6 / g) (fp32, in that order; saturating at 448);
 *      S_b = s_b * g (fp32);
 *   3. code = e2m1(clamp(w / S_b, -6, 6)); code 0 when S_b = 0.
 * Writes packed [N, K/2], scale [N, K/16] and *global. Returns false when W holds a NaN or
 * an infinity (nothing written; *bad = the flat index of the first one), else true. */
bool h3_nvfp4_quantize(const void *w, bool bf16, int64_t N, int64_t K, uint8_t *packed,
                       uint8_t *scale, float *global, int64_t *bad);

/* The code of element k of row n of packed [N, K/2]. */
static inline uint8_t h3_nvfp4_code(const uint8_t *packed, int64_t K, int64_t n, int64_t k) {
  uint8_t byte = packed[n * (K / 2) + k / 2];
  return (uint8_t)(k & 1 ? byte >> 4 : byte & 0xf);
}

/* e2m1(code) * e4m3(s_b) of element (n, k): exact in fp32 and in bf16 (at most 6
 * significant bits, magnitude 0 or in [2^-10, 2688]). */
float h3_nvfp4_unscaled(const uint8_t *packed, const uint8_t *scale, int64_t K, int64_t n,
                        int64_t k);

/* w' [N, K] fp32 = e2m1(code) * e4m3(s_b) * g (the product with g rounded once). */
void h3_nvfp4_dequantize(const uint8_t *packed, const uint8_t *scale, float global, int64_t N,
                         int64_t K, float *out);

#endif
