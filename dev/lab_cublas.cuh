// lab_cublas.cuh: CB, a checked cuBLAS call (else the file:line, the status and exit 1), for
// the stand-alone benches of dev/ that call cuBLAS (lab; not CI).
#pragma once
#include <cublas_v2.h>

#include <cstdio>
#include <cstdlib>

#define CB(x)                                                                                      \
  do {                                                                                             \
    cublasStatus_t s_ = (x);                                                                       \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                             \
      fprintf(stderr, "%s:%d: cublas status %d\n", __FILE__, __LINE__, (int)s_);                  \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)
