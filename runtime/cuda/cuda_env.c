/* cuda_env.c: the cuda backend's form switches (H3_SAGE_FORM, H3_NVFP4_FORM and the others of
 * docs/running.md): each environment variable names one of a fixed list of forms, or a count
 * in a range. A value that names none is a typo, and a run meant to compare two forms must
 * not time the default under a wrong name: it warns on stderr, once per variable, and the
 * default runs.
 */
#include "cuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WARNED_MAX = 16 };

/* Whether `var` has warned before (and remembers it now): a few names, so a linear list */
static bool warned_before(const char *var) {
  static const char *warned[WARNED_MAX];
  static int n;
  for (int i = 0; i < n; i++)
    if (!strcmp(warned[i], var)) return true;
  if (n < WARNED_MAX) warned[n++] = var;
  return false;
}

int cu_env_form(const char *var, const char *const *forms) {
  const char *v = getenv(var);
  if (!v || !*v) return -1;
  for (int i = 0; forms[i]; i++)
    if (!strcmp(v, forms[i])) return i;
  if (!warned_before(var)) {
    fprintf(stderr, "h3: warning: %s=%s is not one of", var, v);
    for (int i = 0; forms[i]; i++) fprintf(stderr, "%s %s", i ? "," : "", forms[i]);
    fprintf(stderr, "; the default form runs (docs/running.md)\n");
  }
  return -1;
}

int cu_env_count(const char *var, int lo, int hi, int dflt) {
  const char *v = getenv(var);
  if (!v || !*v) return dflt;
  char *end = NULL;
  long n = strtol(v, &end, 10);
  if (*end == '\0' && n >= lo && n <= hi) return (int)n;
  if (!warned_before(var))
    fprintf(stderr, "h3: warning: %s=%s is not a whole number from %d to %d; the default %d runs "
            "(docs/running.md)\n", var, v, lo, hi, dflt);
  return dflt;
}
