/* fuzz_ir_parse.c: libFuzzer target of the IR text parser (built with -DH3_FUZZ=ON and
 * clang). Any input must give either a module or diagnostics, never a crash, leak or
 * sanitizer report; a module that parses must print, parse again and print the same
 * text (the round-trip contract of docs/ir-text.md), else the target aborts.
 * Seed corpus: tests/ir/corpus/.
 */
#include "h3/ir.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  h3_diag d;
  h3_diag_init(&d);
  h3_diag_add_source(&d, "fuzz.ir", (const char *)data, size);
  h3_module *m = h3_module_parse("fuzz.ir", (const char *)data, size, &d);
  if (m) {
    h3_strbuf a, b;
    h3_strbuf_init(&a);
    h3_strbuf_init(&b);
    h3_module_print(&a, m);
    h3_module *m2 = h3_module_parse("again.ir", a.data, a.len, &d);
    if (!m2) abort(); /* printed text must parse */
    h3_module_print(&b, m2);
    if (a.len != b.len || memcmp(a.data, b.data, a.len) != 0) abort();
    h3_module_free(m2);
    h3_strbuf_free(&a);
    h3_strbuf_free(&b);
    h3_module_free(m);
  }
  FILE *null = fopen("/dev/null", "w");
  if (null) {
    h3_diag_print(&d, null); /* exercise the quoting of arbitrary bytes */
    fclose(null);
  }
  h3_diag_free(&d);
  return 0;
}
