/* test_models.c: both real models (models/, .g files) through the front end, at every preset:
 * the module verifies, prints, parses back (which verifies again), and prints to the
 * same text; the parsed module keeps the op count. Exits 77 (skipped) when a model file
 * is not there yet.
 */
#include "check.h"
#include "h3/frontend.h"

#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int count_ops(h3_op *op, void *ctx) {
  (void)op;
  (*(int *)ctx)++;
  return 0;
}

static void roundtrip(const char *path, const char *config) {
  h3_diag d;
  h3_diag_init(&d);
  h3_frontend_options opt = {.config = config};
  clock_t t0 = clock();
  h3_module *m = h3_frontend_load(path, &opt, &d);
  CHECK(m != NULL);
  if (!m) {
    h3_diag_print(&d, stderr);
    h3_diag_free(&d);
    return;
  }
  CHECK(h3_verify_module(m, &d) == H3_OK);
  h3_strbuf a, b;
  h3_strbuf_init(&a);
  h3_strbuf_init(&b);
  h3_module_print(&a, m);
  h3_diag_add_source(&d, "model.ir", a.data, a.len);
  h3_module *m2 = h3_module_parse("model.ir", a.data, a.len, &d);
  CHECK(m2 != NULL);
  if (m2) {
    h3_module_print(&b, m2);
    CHECK(b.data && strcmp(a.data, b.data) == 0);
    int n1 = 0, n2 = 0;
    h3_module_walk(m, count_ops, &n1);
    h3_module_walk(m2, count_ops, &n2);
    CHECK(n1 == n2 && n1 > 0);
    printf("%s --config %s: %d ops, %zu bytes of IR text, %.2f s\n", path, config, n1, a.len,
           (double)(clock() - t0) / CLOCKS_PER_SEC);
  }
  h3_diag_print(&d, stderr);
  h3_module_free(m2);
  h3_module_free(m);
  h3_strbuf_free(&a);
  h3_strbuf_free(&b);
  h3_diag_free(&d);
}

int main(void) {
  static const struct {
    const char *file, *configs[3];
  } models[] = {
      {"models/minimax_h3.g", {"tiny", "full", NULL}},
      {"models/minimax_m3_1.g", {"tiny", "small", "full"}},
  };
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", H3_SOURCE_DIR, models[i].file);
    if (access(path, R_OK) != 0) {
      printf("skipped: %s is not there\n", path);
      return 77;
    }
    for (int c = 0; c < 3 && models[i].configs[c]; c++) roundtrip(path, models[i].configs[c]);
  }
  return check_report("test_models");
}
