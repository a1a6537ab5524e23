/* diag_golden.c: the golden diagnostics driver. For one case NAME it compiles NAME.g
 * (in CASES_DIR) through h3_frontend_load, with the flags of its first line when that
 * reads "# args: --config C --set key=value ...", and compares the printed diagnostics
 * with NAME.expected byte for byte. Every case is a broken program: the compile must
 * fail (status 1). With H3_UPDATE_GOLDEN=1 in the environment it rewrites NAME.expected
 * instead (review every rewritten file by hand).
 * Usage: diag_golden CASES_DIR NAME
 */
#include "h3/frontend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  char *s = malloc(cap + 1);
  while (s) {
    size_t got = fread(s + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
    if (n == cap) {
      char *t = realloc(s, (cap *= 2) + 1);
      if (!t) free(s);
      s = t;
    }
  }
  fclose(f);
  if (s) s[n] = 0;
  *len = n;
  return s;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: diag_golden CASES_DIR NAME\n");
    return 2;
  }
  if (chdir(argv[1]) != 0) {
    perror(argv[1]);
    return 2;
  }
  char src[512], exp[512];
  snprintf(src, sizeof src, "%s.g", argv[2]);
  snprintf(exp, sizeof exp, "%s.expected", argv[2]);
  size_t len;
  char *text = slurp(src, &len);
  if (!text) {
    perror(src);
    return 2;
  }
  /* flags from the first line */
  char args[512] = "";
  if (strncmp(text, "# args:", 7) == 0) {
    const char *nl = strchr(text, '\n');
    size_t n = nl ? (size_t)(nl - text) - 7 : strlen(text) - 7;
    if (n >= sizeof args) n = sizeof args - 1;
    memcpy(args, text + 7, n);
    args[n] = 0;
  }
  free(text);
  h3_diag d;
  h3_diag_init(&d);
  h3_frontend_options o = {0};
  h3_config_override ov[16];
  char *save = NULL;
  int flag_errors = 0;
  for (char *t = strtok_r(args, " \t", &save); t; t = strtok_r(NULL, " \t", &save)) {
    char *v = strtok_r(NULL, " \t", &save);
    if (!v) {
      fprintf(stderr, "%s: flag %s lacks its value\n", src, t);
      return 2;
    }
    if (strcmp(t, "--config") == 0) {
      o.config = v;
    } else if (strcmp(t, "--set") == 0 && o.n_overrides < 16) {
      if (h3_config_override_parse(v, &ov[o.n_overrides], &d) == H3_OK)
        o.n_overrides++;
      else
        flag_errors++;
    } else {
      fprintf(stderr, "%s: unknown flag %s in '# args:'\n", src, t);
      return 2;
    }
  }
  o.overrides = ov;
  h3_module *m = flag_errors ? NULL : h3_frontend_load(src, &o, &d);
  int status = m ? 0 : 1;
  h3_module_free(m);
  char *out = NULL;
  size_t out_len = 0;
  FILE *mem = open_memstream(&out, &out_len);
  if (!mem) return 2;
  h3_diag_print(&d, mem);
  fclose(mem);
  h3_diag_free(&d);
  int rc = 0;
  if (getenv("H3_UPDATE_GOLDEN") && strcmp(getenv("H3_UPDATE_GOLDEN"), "1") == 0) {
    FILE *f = fopen(exp, "wb");
    if (!f || fwrite(out, 1, out_len, f) != out_len) rc = 2;
    if (f) fclose(f);
    fprintf(stderr, "updated %s\n", exp);
  } else {
    size_t want_len;
    char *want = slurp(exp, &want_len);
    if (!want) {
      fprintf(stderr, "%s: missing (run with H3_UPDATE_GOLDEN=1 and review it)\n", exp);
      rc = 1;
    } else if (want_len != out_len || memcmp(want, out, out_len) != 0) {
      fprintf(stderr, "%s: diagnostics differ\n--- expected\n%s--- got\n%s", src, want, out);
      rc = 1;
    }
    free(want);
  }
  if (status != 1) {
    fprintf(stderr, "%s: compiled, but every golden case must fail with status 1\n", src);
    rc = 1;
  }
  free(out);
  return rc;
}
