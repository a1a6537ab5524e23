/* check.h: the check counter of the C test programs (test-only, header-only).
 *   CHECK(cond, fmt, ...)  counts a check; on failure counts it, prints
 *                          "file:line: check failed: cond: message" to stderr.
 * A test's main ends with `return check_summary("name");`. */
#ifndef H3_TESTS_CHECK_H
#define H3_TESTS_CHECK_H

#include <stdio.h>

static int failures, checks;

#define CHECK(cond, ...)                                                                 \
  do {                                                                                   \
    checks++;                                                                            \
    if (!(cond)) {                                                                       \
      failures++;                                                                        \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);          \
      fprintf(stderr, __VA_ARGS__);                                                      \
      fprintf(stderr, "\n");                                                             \
    }                                                                                    \
  } while (0)

/* Prints "name: N checks, F failed" and returns the exit status (0 when all passed). */
static inline int check_summary(const char *name) {
  printf("%s: %d checks, %d failed\n", name, checks, failures);
  return failures ? 1 : 0;
}

#endif
