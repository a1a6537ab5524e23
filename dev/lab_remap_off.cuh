// lab_remap_off.cuh: undoes dev/lab_remap_on.cuh (the built-ins again, __global__ and
// __launch_bounds__ as crt/host_defines.h has them), so that the persistent kernel after it
// reads its own launch (lab).
#undef blockIdx
#undef gridDim
#undef blockDim
#undef __syncthreads
#undef __global__
#define __global__ __location__(global)
#undef __launch_bounds__
#define __launch_bounds__(...) __annotate__(launch_bounds(__VA_ARGS__))
