/* rng.c: host-side bulk generation from h3's counter-based generator (include/h3/rng.h).
 *
 * The per-element arithmetic is the static inline code of rng.h, shared with the GPU;
 * this file only runs it over ranges of element indices. On x86-64 CPUs with FMA units
 * the loops are compiled a second time for the FMA target and picked at run time: fmaf
 * is then one instruction instead of glibc's software routine. Both versions compute the
 * same bits (fmaf is exactly rounded either way, and rng.h never lets a contraction
 * change a result).
 */
#include "h3/rng.h"

#include <assert.h>

_Static_assert(sizeof(unsigned int) == 4, "rng.h needs a 32-bit unsigned int");
_Static_assert(sizeof(unsigned long long) == 8, "rng.h needs a 64-bit unsigned long long");

uint32_t h3_rng_stream_id(const char *name) { return h3_rng_stream_hash(name); }

#define H3_RNG_LOOPS(SUFFIX, ATTR)                                                          \
  ATTR static void fill_normal_##SUFFIX(uint64_t seed, uint32_t stream, uint64_t start,    \
                                        size_t n, float *out) {                            \
    for (size_t i = 0; i < n; i++) out[i] = h3_rng_normal(seed, stream, start + i);         \
  }                                                                                         \
  ATTR static void fill_uniform_##SUFFIX(uint64_t seed, uint32_t stream, uint64_t start,   \
                                         size_t n, float *out) {                           \
    for (size_t i = 0; i < n; i++) out[i] = h3_rng_uniform(seed, stream, start + i);        \
  }                                                                                         \
  ATTR static void fill_init_##SUFFIX(int kind, float scale, uint64_t seed, uint32_t stream, \
                                      uint64_t start, size_t n, float *out) {              \
    for (size_t i = 0; i < n; i++)                                                          \
      out[i] = h3_rng_init_value(kind, scale, seed, stream, start + i);                     \
  }

H3_RNG_LOOPS(generic, )

#if defined(__x86_64__) && defined(__GNUC__)
H3_RNG_LOOPS(fma, __attribute__((target("fma"))))
static int have_fma(void) { return __builtin_cpu_supports("fma") ? 1 : 0; }
#define H3_RNG_DISPATCH(name, ...)                                                          \
  do {                                                                                      \
    if (have_fma())                                                                         \
      name##_fma(__VA_ARGS__);                                                              \
    else                                                                                    \
      name##_generic(__VA_ARGS__);                                                          \
  } while (0)
#else
#define H3_RNG_DISPATCH(name, ...) name##_generic(__VA_ARGS__)
#endif

void h3_rng_fill_normal(uint64_t seed, uint32_t stream, uint64_t start, size_t n, float *out) {
  assert(out || n == 0);
  H3_RNG_DISPATCH(fill_normal, seed, stream, start, n, out);
}

void h3_rng_fill_uniform(uint64_t seed, uint32_t stream, uint64_t start, size_t n, float *out) {
  assert(out || n == 0);
  H3_RNG_DISPATCH(fill_uniform, seed, stream, start, n, out);
}

void h3_rng_fill_init(int kind, float scale, uint64_t seed, uint32_t stream, uint64_t start,
                      size_t n, float *out) {
  assert(out || n == 0);
  assert(kind == H3_RNG_INIT_NORMAL || kind == H3_RNG_INIT_UNIFORM ||
         kind == H3_RNG_INIT_ONES_PLUS_NORMAL);
  H3_RNG_DISPATCH(fill_init, kind, scale, seed, stream, start, n, out);
}
