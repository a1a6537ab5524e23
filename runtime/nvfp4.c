/* nvfp4.c: the NVFP4 weight format (include/h3/nvfp4.h, docs/models/minimax_m3_1.md §6):
 * the e4m3 and e2m1 codecs, the per-tensor quantizer and the dequantizer. Every rounding is
 * explicit (nearbyintf in the default mode: to nearest, ties to even), so the codes do not
 * depend on the compiler or the instruction set.
 */
#include "h3/nvfp4.h"

#include "h3/bf16.h"

#include <math.h>
#include <string.h>

static const float e2m1_mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

float h3_e4m3_to_f32(uint8_t code) {
  int e = (code >> 3) & 0xf, m = code & 7;
  float v;
  if (e == 0xf && m == 7) return NAN;
  if (e == 0)
    v = ldexpf((float)m, -9); /* subnormal: m/8 * 2^-6 */
  else
    v = ldexpf(1.0f + (float)m / 8.0f, e - 7);
  return code & 0x80 ? -v : v;
}

uint8_t h3_e4m3_from_f32(float v) {
  if (v != v) return 0x7f;
  uint8_t sign = signbit(v) ? 0x80 : 0;
  float a = fabsf(v);
  if (a >= H3_E4M3_MAX) return (uint8_t)(sign | 0x7e);
  if (a < 0x1p-6f) /* subnormal range: steps of 2^-9; 8 * 2^-9 is the first normal, code 8 */
    return (uint8_t)(sign | (uint8_t)nearbyintf(a * 0x1p9f));
  int e;
  float mant = frexpf(a, &e) * 2.0f; /* a = mant * 2^(e-1), mant in [1, 2) */
  e -= 1;
  int q = (int)nearbyintf((mant - 1.0f) * 8.0f); /* exact product; 0..8 */
  if (q == 8) q = 0, e++;
  /* a < 448 keeps e + 7 <= 15 with q <= 6 there: never the NaN code */
  return (uint8_t)(sign | (uint8_t)((e + 7) << 3) | (uint8_t)q);
}

float h3_e2m1_to_f32(uint8_t code) {
  float v = e2m1_mag[code & 7];
  return code & 8 ? -v : v;
}

uint8_t h3_e2m1_from_f32(float v) {
  float a = fminf(fabsf(v), H3_E2M1_MAX);
  uint8_t c = 0;
  while (c < 7) {
    float mid = 0.5f * (e2m1_mag[c] + e2m1_mag[c + 1]); /* exact */
    if (a < mid || (a == mid && (c & 1) == 0)) break;   /* tie: the even code */
    c++;
  }
  return (uint8_t)(c && v < 0 ? c | 8 : c);
}

static inline float load(const void *w, bool bf16, int64_t i) {
  return bf16 ? h3_bf16_to_f32(((const uint16_t *)w)[i]) : ((const float *)w)[i];
}

bool h3_nvfp4_quantize(const void *w, bool bf16, int64_t N, int64_t K, uint8_t *packed,
                       uint8_t *scale, float *global, int64_t *bad) {
  float amax = 0.0f;
  for (int64_t i = 0; i < N * K; i++) {
    float x = load(w, bf16, i);
    if (!isfinite(x)) {
      *bad = i;
      return false;
    }
    amax = fmaxf(amax, fabsf(x));
  }
  int64_t nb = K / H3_NVFP4_BLOCK;
  float g = amax / (H3_E2M1_MAX * H3_E4M3_MAX);
  if (g == 0.0f) { /* all zero, or amax so small that g underflows */
    *global = 1.0f;
    memset(packed, 0, (size_t)(N * K / 2));
    memset(scale, 0, (size_t)(N * nb));
    return true;
  }
  *global = g;
  for (int64_t n = 0; n < N; n++)
    for (int64_t b = 0; b < nb; b++) {
      int64_t k0 = b * H3_NVFP4_BLOCK;
      float amax_b = 0.0f;
      for (int64_t k = k0; k < k0 + H3_NVFP4_BLOCK; k++)
        amax_b = fmaxf(amax_b, fabsf(load(w, bf16, n * K + k)));
      uint8_t s = h3_e4m3_from_f32(amax_b / H3_E2M1_MAX / g);
      scale[n * nb + b] = s;
      float S = h3_e4m3_to_f32(s) * g;
      for (int64_t k = k0; k < k0 + H3_NVFP4_BLOCK; k += 2) {
        uint8_t lo = 0, hi = 0;
        if (S != 0.0f) {
          lo = h3_e2m1_from_f32(load(w, bf16, n * K + k) / S);
          hi = h3_e2m1_from_f32(load(w, bf16, n * K + k + 1) / S);
        }
        packed[n * (K / 2) + k / 2] = (uint8_t)(lo | hi << 4);
      }
    }
  return true;
}

float h3_nvfp4_unscaled(const uint8_t *packed, const uint8_t *scale, int64_t K, int64_t n,
                        int64_t k) {
  return h3_e2m1_to_f32(h3_nvfp4_code(packed, K, n, k)) *
         h3_e4m3_to_f32(scale[n * (K / H3_NVFP4_BLOCK) + k / H3_NVFP4_BLOCK]);
}

void h3_nvfp4_dequantize(const uint8_t *packed, const uint8_t *scale, float global, int64_t N,
                         int64_t K, float *out) {
  for (int64_t n = 0; n < N; n++)
    for (int64_t k = 0; k < K; k++) out[n * K + k] = h3_nvfp4_unscaled(packed, scale, K, n, k) * global;
}
