/* fuzz_corpus_main.c: replays files (the seed corpus) through the plan reader's fuzz entry
 * point, so every build runs it without libFuzzer. usage: h3_plan_fuzz_corpus FILE... */
#include "h3/support.h"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int main(int argc, char **argv) {
  h3_diag d;
  h3_diag_init(&d);
  for (int i = 1; i < argc; i++) {
    size_t len;
    char *buf = h3_read_file(argv[i], &len, &d);
    if (!buf) {
      h3_diag_print(&d, stderr);
      h3_diag_free(&d);
      return 1;
    }
    LLVMFuzzerTestOneInput((const unsigned char *)buf, len);
    free(buf);
  }
  printf("%d corpus files\n", argc - 1);
  h3_diag_free(&d);
  return 0;
}
