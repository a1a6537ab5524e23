/* fuzz_frontend.c: libFuzzer target of the front end: any byte string is compiled as a
 * .g file (default config, then --config tiny --set layers=1 when the file has them);
 * the diagnostics are printed to /dev/null. Built only with -DH3_FUZZ=ON (clang). Seed
 * corpus: tests/frontend/corpus/.
 */
#include "h3/frontend.h"

#include <stdio.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static void run(const char *text, size_t len, const h3_frontend_options *o, FILE *sink) {
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = h3_frontend_compile("fuzz.g", text, len, o, &d);
  if (sink) h3_diag_print(&d, sink);
  h3_module_free(m);
  h3_diag_free(&d);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  static FILE *sink;
  if (!sink) sink = fopen("/dev/null", "w");
  const char *text = (const char *)data;
  run(text, size, NULL, sink);
  h3_config_override ov = {"layers", 1};
  h3_frontend_options o = {.config = "tiny", .n_overrides = 1, .overrides = &ov};
  run(text, size, &o, sink);
  return 0;
}
