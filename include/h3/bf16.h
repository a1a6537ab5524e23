/* bf16.h: conversions between fp32 and the 16-bit float formats (bf16, IEEE f16).
 *
 * Every narrowing rounds to nearest, ties to even (RNE), the rounding the ops.def contract
 * asks for; overflow gives +-inf; NaN stays NaN (quiet, sign kept) and is never rounded
 * into an infinity. Widening is exact. Header-only static inline functions so the CPU
 * backend, the passes' reference evaluators, the weight initialiser and the tests all
 * round the same way.
 */
#ifndef H3_BF16_H
#define H3_BF16_H

#include <stdint.h>
#include <string.h>

static inline uint32_t h3_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float h3_f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* fp32 -> bf16 bits, round to nearest even; NaN -> quiet NaN with the same sign and the
 * top payload bits. */
static inline uint16_t h3_f32_to_bf16(float f) {
  uint32_t u = h3_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb; /* carries into the exponent give the right result, inf included */
  return (uint16_t)(u >> 16);
}

static inline float h3_bf16_to_f32(uint16_t h) { return h3_f32_from_bits((uint32_t)h << 16); }

/* Rounds an fp32 value to the nearest bf16 value, returned as fp32. */
static inline float h3_bf16_round(float f) { return h3_bf16_to_f32(h3_f32_to_bf16(f)); }

/* fp32 -> IEEE binary16 bits, round to nearest even, subnormals included; overflow -> inf;
 * NaN -> quiet NaN with the same sign. */
static inline uint16_t h3_f32_to_f16(float f) {
  uint32_t u = h3_f32_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
  if (a < 0x38800000u) {                                  /* below 2^-14: subnormal or 0 */
    if (a < 0x33000000u) return sign;                     /* < 2^-25: rounds to 0 */
    uint32_t m = (a & 0x7fffffu) | 0x800000u;             /* 24-bit significand */
    int shift = 126 - (int)(a >> 23);                     /* 14 .. 24 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q);
  }
  uint32_t r = a - 0x38000000u; /* rebias exponent 127 -> 15 */
  uint32_t lsb = (r >> 13) & 1u;
  r += 0xfffu + lsb;
  return (uint16_t)(sign | (r >> 13));
}

static inline float h3_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return h3_f32_from_bits(sign | 0x7f800000u | (m << 13));
  if (e == 0) { /* zero or subnormal: m * 2^-24, exact in fp32 */
    float v = (float)m * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return h3_f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
}

#endif
