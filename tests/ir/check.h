/* check.h: the minimal assertion helpers of the IR unit tests. CHECK records a failure
 * with file:line and keeps going; each test's main returns check_report(). Random
 * inputs come from a fixed-seed xorshift so failures reproduce.
 */
#ifndef H3_TEST_CHECK_H
#define H3_TEST_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int check_failures, check_count;

#define CHECK(cond)                                                              \
  do {                                                                           \
    check_count++;                                                               \
    if (!(cond)) {                                                               \
      check_failures++;                                                          \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
    }                                                                            \
  } while (0)

#define CHECK_STR(a, b)                                                                    \
  do {                                                                                     \
    const char *check_a_ = (a), *check_b_ = (b);                                           \
    check_count++;                                                                         \
    if (!check_a_ || !check_b_ || strcmp(check_a_, check_b_) != 0) {                       \
      check_failures++;                                                                    \
      fprintf(stderr, "%s:%d: CHECK_STR failed:\n  got:  %s\n  want: %s\n", __FILE__,       \
              __LINE__, check_a_ ? check_a_ : "(null)", check_b_ ? check_b_ : "(null)");   \
    }                                                                                      \
  } while (0)

/* Substring check for diagnostics. */
#define CHECK_HAS(hay, needle)                                                             \
  do {                                                                                     \
    const char *check_h_ = (hay), *check_n_ = (needle);                                    \
    check_count++;                                                                         \
    if (!check_h_ || !strstr(check_h_, check_n_)) {                                        \
      check_failures++;                                                                    \
      fprintf(stderr, "%s:%d: CHECK_HAS failed:\n  text: %s\n  missing: %s\n", __FILE__,    \
              __LINE__, check_h_ ? check_h_ : "(null)", check_n_);                         \
    }                                                                                      \
  } while (0)

static uint64_t check_rng_state = 0x9e3779b97f4a7c15ull;
static inline uint64_t check_rand(void) {
  uint64_t x = check_rng_state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return check_rng_state = x;
}
/* Uniform in [lo, hi]. */
static inline int64_t check_range(int64_t lo, int64_t hi) {
  return lo + (int64_t)(check_rand() % (uint64_t)(hi - lo + 1));
}

static inline int check_report(const char *name) {
  if (check_failures) {
    fprintf(stderr, "%s: %d of %d checks failed\n", name, check_failures, check_count);
    return 1;
  }
  printf("%s: %d checks passed\n", name, check_count);
  return 0;
}

#endif
