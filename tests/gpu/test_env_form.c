/* test_env_form.c: the cuda backend's form switches (runtime/cuda/cuda_env.c, cu_env_form and
 * cu_env_count; white box through cuda_internal.h, no GPU needed): a named form gives its
 * index, an unset or empty variable -1, and a value that names no form -1 with one warning on
 * stderr per variable (a second bad value of the same variable stays silent; another variable
 * warns). A count in its range is read; unset, empty, out of range or not a whole number
 * gives the default, the last two with the one warning.
 */
#include "cuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/check.h"

static const char *const forms[] = {"mma", "wgmma", "wg1", NULL};

/* cu_env_form(var, forms), or with count cu_env_count(var, 0, 66, 16), with var = value
 * (NULL: unset); *err: what it wrote on stderr */
static int read_env(const char *var, const char *value, bool count, char *err, size_t cap) {
  if (value) setenv(var, value, 1);
  else unsetenv(var);
  fflush(stderr);
  FILE *tmp = tmpfile();
  int saved = dup(2);
  dup2(fileno(tmp), 2);
  int r = count ? cu_env_count(var, 0, 66, 16) : cu_env_form(var, forms);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  rewind(tmp);
  size_t n = fread(err, 1, cap - 1, tmp);
  err[n] = 0;
  fclose(tmp);
  return r;
}

static int form_of(const char *var, const char *value, char *err, size_t cap) {
  return read_env(var, value, false, err, cap);
}

static int count_of(const char *var, const char *value, char *err, size_t cap) {
  return read_env(var, value, true, err, cap);
}

int main(void) {
  char err[512];
  CHECK(form_of("H3_TEST_FORM", NULL, err, sizeof err) == -1 && !*err, "unset: -1, silent");
  CHECK(form_of("H3_TEST_FORM", "", err, sizeof err) == -1 && !*err, "empty: -1, silent");
  CHECK(form_of("H3_TEST_FORM", "mma", err, sizeof err) == 0 && !*err, "mma: 0");
  CHECK(form_of("H3_TEST_FORM", "wg1", err, sizeof err) == 2 && !*err, "wg1: 2");
  CHECK(form_of("H3_TEST_FORM", "WG1", err, sizeof err) == -1, "forms are case-sensitive");
  CHECK(strstr(err, "warning: H3_TEST_FORM=WG1 is not one of mma, wgmma, wg1") != NULL,
        "an unknown form names the variable, the value and the forms: got '%s'", err);
  CHECK(form_of("H3_TEST_FORM", "ws2", err, sizeof err) == -1 && !*err,
        "a variable warns once: got '%s'", err);
  CHECK(form_of("H3_OTHER_FORM", "x", err, sizeof err) == -1 && strstr(err, "H3_OTHER_FORM=x"),
        "another variable warns on its own: got '%s'", err);
  CHECK(count_of("H3_TEST_COUNT", NULL, err, sizeof err) == 16 && !*err, "unset: the default, silent");
  CHECK(count_of("H3_TEST_COUNT", "", err, sizeof err) == 16 && !*err, "empty: the default, silent");
  CHECK(count_of("H3_TEST_COUNT", "0", err, sizeof err) == 0 && !*err, "0 is in the range");
  CHECK(count_of("H3_TEST_COUNT", "66", err, sizeof err) == 66 && !*err, "the top of the range");
  CHECK(count_of("H3_TEST_COUNT", "67", err, sizeof err) == 16, "past the range: the default");
  CHECK(strstr(err, "warning: H3_TEST_COUNT=67 is not a whole number from 0 to 66; the default 16") != NULL,
        "an out-of-range count names the variable, the value and the range: got '%s'", err);
  CHECK(count_of("H3_TEST_COUNT", "8x", err, sizeof err) == 16 && !*err, "a count warns once: got '%s'", err);
  CHECK(count_of("H3_OTHER_COUNT", "-1", err, sizeof err) == 16 && strstr(err, "H3_OTHER_COUNT=-1"),
        "a negative count: the default, warned: got '%s'", err);
  CHECK(count_of("H3_THIRD_COUNT", "12.5", err, sizeof err) == 16 && strstr(err, "H3_THIRD_COUNT=12.5"),
        "not a whole number: the default, warned: got '%s'", err);
  return check_summary("env_form");
}
