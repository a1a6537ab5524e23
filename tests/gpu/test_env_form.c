/* test_env_form.c: the cuda backend's form switches (runtime/cuda/cuda_env.c, cu_env_form;
 * white box through cuda_internal.h, no GPU needed): a named form gives its index, an unset
 * or empty variable -1, and a value that names no form -1 with one warning on stderr per
 * variable (a second bad value of the same variable stays silent; another variable warns).
 */
#include "cuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/check.h"

static const char *const forms[] = {"mma", "wgmma", "wg1", NULL};

/* cu_env_form(var, forms) with var = value (NULL: unset); *err: what it wrote on stderr */
static int form_of(const char *var, const char *value, char *err, size_t cap) {
  if (value) setenv(var, value, 1);
  else unsetenv(var);
  fflush(stderr);
  FILE *tmp = tmpfile();
  int saved = dup(2);
  dup2(fileno(tmp), 2);
  int r = cu_env_form(var, forms);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  rewind(tmp);
  size_t n = fread(err, 1, cap - 1, tmp);
  err[n] = 0;
  fclose(tmp);
  return r;
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
  return check_summary("env_form");
}
