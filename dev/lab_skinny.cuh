// lab_skinny.cuh: what the GEMV benches of dev/ share (lab; not CI): the product's skinny
// kernels of kernels/skinny_gemm.cu instantiated as sk_* with fp32 y, and read_words, the read
// floor of a weight's bytes (build lines: the benches' headers, `-I kernels -I include`).
#pragma once
#define H3_SKINNY_NAME sk
#define O_T float
#include "h3/bf16.h" // the prelude's host branches (nvcc also compiles them for the host)
#include "h3/nvfp4.h"
#include "prelude.cuh"
#include "skinny_gemm.cu"

// the weight bytes read as 16-byte words by a grid-stride loop (the read floor of the bytes)
__global__ void read_words(const uint4 *w, long long n, unsigned *sink) {
  unsigned acc = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const uint4 v = h3s_ldw(reinterpret_cast<const h3_bf16 *>(w + i));
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc; // never in practice; keeps the loads
}
