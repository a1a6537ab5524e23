/* rng.h: h3's counter-based random generator, shared bit for bit by the CPU and the GPU.
 *
 * This header is the single definition of every random number h3 produces: random
 * weights (`--weights random`), `randn` noise, uniforms, the Gumbel noise of
 * `sample_tokens`. It compiles as C11 (host), as CUDA C under nvcc, and as NVRTC source
 * (codegen pastes or #includes this text into kernels), so the GPU runs the same arithmetic
 * as the CPU. Under NVRTC it includes no header. The CPU results are the truth; a GPU kernel
 * must equal them bitwise.
 *
 * Generator: Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
 * 3", SC'11), multipliers 0xD2511F53 / 0xCD9E8D57, key increments 0x9E3779B9 /
 * 0xBB67AE85, ten rounds.
 *   counter = (index low 32, index high 32, stream, 0)   index: the element index
 *   key     = (seed low 32, seed high 32)
 *   stream  = FNV-1a 32-bit hash of the stream's name (a weight tensor's expanded name
 *             such as "blocks.3.attn.qkv_proj.weight", or a `randn` op's stream attr).
 *             `sample_tokens`: the stream "sample", index = position * 2^32 + token, the
 *             request's 32-bit seed (h3_rng_sample_score).
 * Element `index` of a stream uses the output words of its own counter; words 2 and 3
 * are not used.
 *
 * Floating point contract (so that host and device agree bitwise):
 *   - every operation below is one IEEE-754 binary32 operation rounded to nearest even:
 *     H3_RNG_ADD/MUL/DIV/SQRT/FMA. On the device they are the _rn intrinsics, which
 *     nvcc/NVRTC never contract or approximate (also under -use_fast_math, except that
 *     flush-to-zero must stay off: no value here is subnormal, but scaled weights might be).
 *   - a product never feeds an addition except through an explicit FMA, and the few
 *     plain products that do feed an addition are exact, so a host compiler that
 *     contracts a*b+c into fma (GCC's default on FMA targets) still gives the same bits.
 *   - log and cos are h3's own polynomials (h3_rng_log, h3_rng_cos2pi), not libm/CUDA
 *     functions, whose results differ between libraries.
 *
 * Distributions (w0, w1 = output words 0 and 1 of the element's counter):
 *   h3_rng_u01(w)  = (2*(w >> 9) + 1) * 2^-24: 2^23 values, exactly representable,
 *                    symmetric around 0.5, in [2^-24, 1 - 2^-24], so strictly in (0, 1).
 *                    (A 24-bit form (w >> 8) * 2^-24 + 2^-25 is not representable in
 *                    fp32 and rounds its top value up to 1.0; h3 uses 23 bits instead.)
 *   h3_rng_sym(w)  = (2*(w >> 9) + 1 - 2^23) * 2^-23 = 2*u01 - 1, exactly, in (-1, 1).
 *   normal         = Box-Muller on u1 = u01(w0), u2 = u01(w1):
 *                    l = log(u1); r = sqrt(l * -2); n = r * cos2pi(u2)
 *                    (one normal per element; the sine branch is not used).
 * Weight initialisers on top (h3_rng_init_value): NORMAL: scale * n; UNIFORM:
 * scale * sym(w0); ONES_PLUS_NORMAL: fma(scale, n, 1); scale is the fp32 rounding of the
 * parameter's double init_scale. The result is then rounded to the parameter's dtype.
 */
#ifndef H3_RNG_H
#define H3_RNG_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define H3_HD __host__ __device__
#else
#define H3_HD
#endif

/* Host compilers must inline these into their callers so that a caller compiled for an
 * FMA target (runtime/rng.c) gets fmaf as one instruction. */
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define H3_RNG_INLINE static __forceinline__
#elif defined(__GNUC__)
#define H3_RNG_INLINE static inline __attribute__((always_inline))
#else
#define H3_RNG_INLINE static inline
#endif

#if defined(__CUDA_ARCH__)
#define H3_RNG_ADD(a, b) __fadd_rn((a), (b))
#define H3_RNG_MUL(a, b) __fmul_rn((a), (b))
#define H3_RNG_DIV(a, b) __fdiv_rn((a), (b))
#define H3_RNG_SQRT(a) __fsqrt_rn((a))
#define H3_RNG_FMA(a, b, c) __fmaf_rn((a), (b), (c))
#define H3_RNG_INF __int_as_float(0x7f800000)
#define H3_RNG_NAN __int_as_float(0x7fc00000)
#else
#include <math.h>
#define H3_RNG_ADD(a, b) ((a) + (b))
#define H3_RNG_MUL(a, b) ((a) * (b))
#define H3_RNG_DIV(a, b) ((a) / (b))
#define H3_RNG_SQRT(a) sqrtf((a))
#define H3_RNG_FMA(a, b, c) fmaf((a), (b), (c))
#define H3_RNG_INF INFINITY
#define H3_RNG_NAN NAN /* 0x7fc00000 (the cpu tests check the bits) */
#endif

#define H3_PHILOX_M0 0xD2511F53u
#define H3_PHILOX_M1 0xCD9E8D57u
#define H3_PHILOX_W0 0x9E3779B9u
#define H3_PHILOX_W1 0xBB67AE85u
#define H3_FNV1A_OFFSET 2166136261u
#define H3_FNV1A_PRIME 16777619u

/* `unsigned int` is 32 bits and `unsigned long long` 64 bits on every target h3 builds for
 * (rng.c checks it); <stdint.h> is not available under NVRTC. */
typedef struct {
  unsigned int w[4];
} h3_philox_out;

/* Philox-4x32-10 of counter (c0, c1, c2, c3) under key (k0, k1). */
H3_HD H3_RNG_INLINE h3_philox_out h3_philox4x32_10(unsigned int c0, unsigned int c1,
                                                   unsigned int c2, unsigned int c3,
                                                   unsigned int k0, unsigned int k1) {
  for (int round = 0; round < 10; round++) {
    if (round > 0) {
      k0 += H3_PHILOX_W0;
      k1 += H3_PHILOX_W1;
    }
    unsigned long long p0 = (unsigned long long)H3_PHILOX_M0 * c0;
    unsigned long long p1 = (unsigned long long)H3_PHILOX_M1 * c2;
    unsigned int hi0 = (unsigned int)(p0 >> 32), lo0 = (unsigned int)p0;
    unsigned int hi1 = (unsigned int)(p1 >> 32), lo1 = (unsigned int)p1;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  h3_philox_out o;
  o.w[0] = c0;
  o.w[1] = c1;
  o.w[2] = c2;
  o.w[3] = c3;
  return o;
}

/* FNV-1a 32-bit of a NUL-terminated string (its bytes, unsigned). */
H3_HD H3_RNG_INLINE unsigned int h3_rng_stream_hash(const char *s) {
  unsigned int h = H3_FNV1A_OFFSET;
  for (; *s; s++) {
    h ^= (unsigned int)(unsigned char)*s;
    h *= H3_FNV1A_PRIME;
  }
  return h;
}

/* The output of element `index` of `stream` under `seed`. */
H3_HD H3_RNG_INLINE h3_philox_out h3_rng_block(unsigned long long seed, unsigned int stream,
                                               unsigned long long index) {
  return h3_philox4x32_10((unsigned int)index, (unsigned int)(index >> 32), stream, 0u,
                          (unsigned int)seed, (unsigned int)(seed >> 32));
}

H3_HD H3_RNG_INLINE float h3_rng_u01(unsigned int w) {
  return H3_RNG_MUL((float)(int)(((w >> 9) << 1) | 1u), 0x1p-24f);
}

H3_HD H3_RNG_INLINE float h3_rng_sym(unsigned int w) {
  return H3_RNG_MUL((float)((int)(((w >> 9) << 1) | 1u) - 0x800000), 0x1p-23f);
}

H3_HD H3_RNG_INLINE unsigned int h3_rng_f32_bits(float f) {
  union {
    float f;
    unsigned int u;
  } v;
  v.f = f;
  return v.u;
}

H3_HD H3_RNG_INLINE float h3_rng_f32_from_bits(unsigned int u) {
  union {
    float f;
    unsigned int u;
  } v;
  v.u = u;
  return v.f;
}

/* Natural log of a positive normal float x (h3 calls it on (0, 1)); about 1 ulp.
 *   x = 2^e * m with m in [sqrt(2)/2, sqrt(2)); f = m - 1 (exact); s = f / (2 + f);
 *   log(m) = 2 atanh(s) = 2s + 2s * z * P(z), z = s^2 <= 0.0295,
 *   P(z) = 1/3 + z/5 + z^2/7 + z^3/9 + z^4/11 (Horner, FMA);
 *   log(x) = e * LN2_HI + (e * LN2_LO + log(m)), LN2_HI with 11 significant bits so that
 *   e * LN2_HI is exact. */
H3_HD H3_RNG_INLINE float h3_rng_log(float x) {
  unsigned int bits = h3_rng_f32_bits(x);
  int e = (int)(bits >> 23) - 127;
  unsigned int mant = bits & 0x7fffffu;
  unsigned int mexp = 127u;
  if (mant > 0x3504f3u) { /* m > sqrt(2): use m/2 */
    mexp = 126u;
    e += 1;
  }
  float m = h3_rng_f32_from_bits(mant | (mexp << 23));
  float f = H3_RNG_ADD(m, -1.0f);
  float s = H3_RNG_DIV(f, H3_RNG_ADD(f, 2.0f));
  float z = H3_RNG_MUL(s, s);
  float p = H3_RNG_FMA(z, 0x1.745d18p-4f, 0x1.c71c72p-4f); /* 1/11, 1/9 */
  p = H3_RNG_FMA(z, p, 0x1.24924ap-3f);                    /* 1/7 */
  p = H3_RNG_FMA(z, p, 0x1.99999ap-3f);                    /* 1/5 */
  p = H3_RNG_FMA(z, p, 0x1.555556p-2f);                    /* 1/3 */
  float s2 = H3_RNG_MUL(s, 2.0f);
  float logm = H3_RNG_FMA(s2, H3_RNG_MUL(z, p), s2);
  float ef = (float)e;
  return H3_RNG_ADD(H3_RNG_MUL(ef, 0x1.62ep-1f), H3_RNG_FMA(ef, 0x1.0bfbe8p-15f, logm));
}

/* cos(2*pi*u) for u in [0, 1] on the 2^-24 grid that h3_rng_u01 produces (the reductions
 * below are then exact); about 1 ulp.
 *   v = u - 0.5, cos(2 pi u) = -cos(2 pi |v|); a = |v| in [0, 0.5];
 *   a <= 1/8:  r = a,        result = -C(r)
 *   a <= 3/8:  r = a - 1/4,  result =  S(r)
 *   else:      r = a - 1/2,  result =  C(r)
 *   C(r) = cos(2 pi r) = 1 + z*(c1 + z*(c2 + ... + z*c5)),  z = r^2, |r| <= 1/8
 *   S(r) = sin(2 pi r) = r * (s0 + z*(s1 + ... + z*s5))
 *   c_j = (-1)^j (2 pi)^(2j) / (2j)!,  s_j = (-1)^j (2 pi)^(2j+1) / (2j+1)!  (Taylor). */
H3_HD H3_RNG_INLINE float h3_rng_cos2pi(float u) {
  float v = H3_RNG_ADD(u, -0.5f);
  float a = v < 0.0f ? -v : v;
  int branch;
  float r;
  if (a <= 0.125f) {
    branch = 0;
    r = a;
  } else if (a <= 0.375f) {
    branch = 1;
    r = H3_RNG_ADD(a, -0.25f);
  } else {
    branch = 2;
    r = H3_RNG_ADD(a, -0.5f);
  }
  float z = H3_RNG_MUL(r, r);
  if (branch == 1) {
    float p = H3_RNG_FMA(z, -0x1.e3075p+3f, 0x1.507834p+5f);
    p = H3_RNG_FMA(z, p, -0x1.32d2ccp+6f);
    p = H3_RNG_FMA(z, p, 0x1.466bc6p+6f);
    p = H3_RNG_FMA(z, p, -0x1.4abbcep+5f);
    p = H3_RNG_FMA(z, p, 0x1.921fb6p+2f);
    return H3_RNG_MUL(r, p);
  }
  float p = H3_RNG_FMA(z, -0x1.a6d1f2p+4f, 0x1.e1f506p+5f);
  p = H3_RNG_FMA(z, p, -0x1.55d3c8p+6f);
  p = H3_RNG_FMA(z, p, 0x1.03c1fp+6f);
  p = H3_RNG_FMA(z, p, -0x1.3bd3ccp+4f);
  float c = H3_RNG_FMA(z, p, 1.0f);
  return branch == 0 ? -c : c;
}

/* Standard normal of element `index` of `stream` (Box-Muller, see the header comment). */
H3_HD H3_RNG_INLINE float h3_rng_normal(unsigned long long seed, unsigned int stream,
                                        unsigned long long index) {
  h3_philox_out o = h3_rng_block(seed, stream, index);
  float l = h3_rng_log(h3_rng_u01(o.w[0]));
  float r = H3_RNG_SQRT(H3_RNG_MUL(l, -2.0f));
  return H3_RNG_MUL(r, h3_rng_cos2pi(h3_rng_u01(o.w[1])));
}

/* Uniform in (0, 1) of element `index` of `stream` (word 0). */
H3_HD H3_RNG_INLINE float h3_rng_uniform(unsigned long long seed, unsigned int stream,
                                         unsigned long long index) {
  return h3_rng_u01(h3_rng_block(seed, stream, index).w[0]);
}

/* Sampling (the `sample_tokens` op of ops.def): the Gumbel-max score of token v of a row of
 * logits.
 *   u = h3_rng_uniform(seed, H3_RNG_SAMPLE_STREAM, pos * 2^32 + v): the u01 of word 0 of
 *       counter (v, pos, H3_RNG_SAMPLE_STREAM, 0) under key (seed, 0);
 *   g = -log(-log(u))  (h3_rng_log twice: -log(u) lies in [5.9e-8, 16.7], positive normal);
 *   score = logit / t + g  (one division and one addition, each rounded; no product feeds
 *   the addition, so no contraction can change it).
 * The first index of the largest score of a row is a sample of softmax(logits / t) (the
 * Gumbel-max trick, up to u's 2^23-value grid and h3_rng_log's ulp); it depends only on
 * (seed, pos, v, logit, t). */
#define H3_RNG_SAMPLE_STREAM 0x96e382a7u /* FNV-1a 32 of "sample" */
#define H3_RNG_ACCEPT_STREAM 0xc85aacc8u /* FNV-1a 32 of "spec.accept": spec_accept's u */

H3_HD H3_RNG_INLINE float h3_rng_sample_score(float logit, float t, unsigned int seed,
                                              unsigned int pos, unsigned int v) {
  float u = h3_rng_uniform(seed, H3_RNG_SAMPLE_STREAM, ((unsigned long long)pos << 32) | v);
  float g = -h3_rng_log(-h3_rng_log(u));
  return H3_RNG_ADD(H3_RNG_DIV(logit, t), g);
}

/* sample_tokens' second result, the decision margin of a row: best = the winner's score
 * (NaN when every score of the row is NaN), second = the largest score of the other tokens
 * (NaN scores left out, -inf when there is none). Returns NaN (0x7fc00000) for an all-NaN
 * row, +inf when second is -inf (V = 1, every other score NaN or -inf, an all -inf row
 * included), 0 when best == second (a tie, +inf ties included: never inf - inf), else
 * best - second, one fp32 subtraction (+-0 seconds give the same bits). */
H3_HD H3_RNG_INLINE float h3_rng_sample_margin(float best, float second) {
  if (best != best) return H3_RNG_NAN;
  if (second == -H3_RNG_INF) return H3_RNG_INF;
  if (best == second) return 0.0f;
  return H3_RNG_ADD(best, -second);
}

/* Random weight initialisers (the random kinds of h3_init_kind in ir.h; their numbers are
 * repeated here because ir.h is not available to NVRTC). */
#define H3_RNG_INIT_NORMAL 0           /* scale * normal */
#define H3_RNG_INIT_UNIFORM 1          /* scale * sym(w0), in (-scale, scale) */
#define H3_RNG_INIT_ONES_PLUS_NORMAL 3 /* fma(scale, normal, 1) */

/* fp32 value of element `index` of a weight tensor filled by a random initialiser. */
H3_HD H3_RNG_INLINE float h3_rng_init_value(int kind, float scale, unsigned long long seed,
                                            unsigned int stream, unsigned long long index) {
  if (kind == H3_RNG_INIT_UNIFORM)
    return H3_RNG_MUL(scale, h3_rng_sym(h3_rng_block(seed, stream, index).w[0]));
  float n = h3_rng_normal(seed, stream, index);
  if (kind == H3_RNG_INIT_ONES_PLUS_NORMAL) return H3_RNG_FMA(scale, n, 1.0f);
  return H3_RNG_MUL(scale, n);
}

#if !defined(__CUDACC_RTC__) && !defined(__CUDA_ARCH__)
/* ---- host-side bulk helpers (runtime/rng.c) ----------------------------------------------- */
#include <stddef.h>
#include <stdint.h>

/* The stream id of a name (FNV-1a 32). */
uint32_t h3_rng_stream_id(const char *name);
/* out[i] = h3_rng_normal(seed, stream, start + i) for i < n. */
void h3_rng_fill_normal(uint64_t seed, uint32_t stream, uint64_t start, size_t n, float *out);
/* out[i] = h3_rng_uniform(seed, stream, start + i) for i < n. */
void h3_rng_fill_uniform(uint64_t seed, uint32_t stream, uint64_t start, size_t n, float *out);
/* out[i] = h3_rng_init_value(kind, scale, seed, stream, start + i) for i < n. */
void h3_rng_fill_init(int kind, float scale, uint64_t seed, uint32_t stream, uint64_t start,
                      size_t n, float *out);
#endif

#endif
