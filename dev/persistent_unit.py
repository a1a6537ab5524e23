"""persistent_unit.py: do a plan's codegen kernels compile as the phases of one persistent kernel
under the built-in remap of dev/phase_remap.cu? (lab; no GPU needed: NVRTC alone)
    python3 dev/persistent_unit.py PLAN [OUT.cu [CUDA_INCLUDE]]   (the toolkit's include folder for cuda_bf16.h)
Builds one translation unit: the remap (blockIdx, gridDim, blockDim as a block's shared
variables, __global__ as __device__, __syncthreads() as a named barrier over the phase's
threads), the plan's own prelude, every kernel of the plan in a namespace of its own, and a
table of their addresses (so that each is compiled to SASS), then compiles it with NVRTC for
sm_90a with the lossless tier's options (FMA contraction allowed: one option set for the unit;
dev/persistent-decode.md on mixing them) and prints NVRTC's verdict and ptxas's summary line.
"""
import ctypes
import sys

import yaml

REMAP = r'''
struct h3v_dim { unsigned x, y, z; };
__shared__ h3v_dim h3v_bid, h3v_grid, h3v_bdim;
__device__ __forceinline__ void h3v_sync() { asm volatile("bar.sync 1, %0;" ::"r"(h3v_bdim.x) : "memory"); }
#define blockIdx h3v_bid
#define gridDim h3v_grid
#define blockDim h3v_bdim
#define __syncthreads() h3v_sync()
#undef __global__
#define __global__ __device__
#undef __launch_bounds__
#define __launch_bounds__(...)
'''
UNMAP = r'''
#undef blockIdx
#undef gridDim
#undef blockDim
#undef __syncthreads
#undef __global__
#define __global__ __location__(global)
#undef __launch_bounds__
#define __launch_bounds__(...) __annotate__(launch_bounds(__VA_ARGS__))
'''


def unit(plan):
    kernels = plan['kernels']
    parts = [REMAP, plan['prelude']['source']]
    for i, k in enumerate(kernels):
        parts.append('namespace k%d {\n%s\n}\n' % (i, k['source']))
    parts.append(UNMAP)
    cases = ''.join('  case %d: return (const void *)k%d::%s;\n' % (i, i, k['name']) for i, k in enumerate(kernels))
    parts.append('__device__ const void *h3v_phase(int i) {\n  switch (i) {\n%s  }\n  return nullptr;\n}\n' % cases)
    parts.append('extern "C" __global__ void __launch_bounds__(256) h3v_unit(const void **out) {\n'
                 '  out[threadIdx.x] = h3v_phase(threadIdx.x %% %d);\n}\n' % len(kernels))
    return '\n'.join(parts), len(kernels)


def nvrtc(src, opts):
    lib = ctypes.CDLL('libnvrtc.so')
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b'unit.cu', 0, None, None) == 0
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetProgramLog(prog, log)
    return rc, log.value.decode(errors='replace')


def main():
    plan = yaml.safe_load(open(sys.argv[1]))
    src, n = unit(plan)
    if len(sys.argv) > 2:
        open(sys.argv[2], 'w').write(src)
    rc, log = nvrtc(src, ['-default-device', '-std=c++17', '--gpu-architecture=sm_90a', '--ptxas-options=-v',
                          '-I' + (sys.argv[3] if len(sys.argv) > 3 else '/usr/local/cuda/include')])
    lines = [l for l in log.splitlines() if 'error' in l or 'h3v_unit' in l or 'Used' in l]
    print('%d kernels of %s in one unit: NVRTC %s' % (n, sys.argv[1], 'ok' if rc == 0 else 'FAILED (%d)' % rc))
    for l in lines[:20]:
        print('  ' + l.strip())
    return 0 if rc == 0 else 1


if __name__ == '__main__':
    sys.exit(main())
