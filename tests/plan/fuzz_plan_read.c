/* fuzz_plan_read.c: libFuzzer target of the plan reader (h3_plan_read_text). Any bytes
 * must give a plan or diagnostics, never a crash, a leak or undefined behaviour; a plan
 * that reads must also write. Built with -DH3_FUZZ=ON (clang); in every build the seed
 * corpus is replayed through the same entry point (fuzz_corpus_main.c).
 */
#include "h3/plan.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  h3_diag d;
  h3_diag_init(&d);
  h3_plan *p = h3_plan_read_text("fuzz.plan", (const char *)data, size, &d);
  if (p) {
    h3_strbuf b;
    h3_strbuf_init(&b);
    if (h3_plan_to_yaml(p, &b) != H3_OK) abort(); /* a plan that reads must write */
    h3_strbuf_free(&b);
  } else if (d.errors == 0) {
    abort(); /* a refusal must say why */
  }
  h3_plan_free(p);
  h3_diag_free(&d);
  return 0;
}
