/* test_compile_check.c: every kernel source of the cuda backend itself (utility kernels,
 * reference and flash attention, generic linear) compiles with NVRTC for sm_90. Needs no
 * GPU, so CI runs it; it also fills the kernel cache that a GPU machine can be handed. */
#include "h3/cuda_backend.h"

#include <stdio.h>

int main(void) {
  h3_diag d;
  h3_diag_init(&d);
  h3_status st = h3_cuda_compile_check(&d);
  h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  printf("%s\n", st == H3_OK ? "1 passed, 0 failed" : "0 passed, 1 failed");
  return st == H3_OK ? 0 : 1;
}
