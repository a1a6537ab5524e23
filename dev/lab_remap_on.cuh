// lab_remap_on.cuh: the built-in remap that makes a kernel file, included after it, a device
// function run for one virtual block (dev/persistent-decode.md; lab): blockIdx, gridDim and
// blockDim become a block's shared variables, __global__ becomes __device__, __launch_bounds__
// vanishes, __syncthreads() becomes a named barrier over the phase's threads (bar.sync 1,
// blockDim.x). Include kernels/prelude.cuh after it; dev/lab_remap_off.cuh undoes it. The CUDA
// headers and the host halves of the prelude's helpers (nvcc parses them for the host) come
// first, unremapped.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
extern "C" {
#include "h3/bf16.h"
#include "h3/nvfp4.h"
}

struct h3v_dim {
  unsigned x, y, z;
};
__shared__ h3v_dim h3v_bid, h3v_grid, h3v_bdim;
__device__ __forceinline__ void h3v_sync() {
  asm volatile("bar.sync 1, %0;" ::"r"(h3v_bdim.x) : "memory");
}
#define blockIdx h3v_bid
#define gridDim h3v_grid
#define blockDim h3v_bdim
#define __syncthreads() h3v_sync()
#undef __global__
#define __global__ __device__
#undef __launch_bounds__
#define __launch_bounds__(...)
