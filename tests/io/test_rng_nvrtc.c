/* test_rng_nvrtc.c: include/h3/rng.h as device code.
 *
 *   io_test_rng_nvrtc          compiles a kernel that includes rng.h with NVRTC (no GPU
 *                              needed), with and without -use_fast_math;
 *   io_test_rng_nvrtc --run    also runs it on the GPU (built with and without
 *                              -use_fast_math) and compares every value of the normal,
 *                              uniform, the three initialisers and sample_tokens' Gumbel-max
 *                              score with the CPU (bit for bit) over 2^20 elements of two
 *                              streams; exits 77 when no GPU / driver is present.
 * The driver API is opened with dlopen so the binary runs on machines without a driver.
 */
#include "h3/rng.h"

#include "h3/support.h"

#include <cuda.h>
#include <dlfcn.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* sample_tokens' logit of element i, on the host and (as text) on the device: a quarter-step
 * ramp in [-12, 12], exact in fp32 (also when the device contracts it into an fma) */
#define LOGIT_BODY (float)(int)(i % 97) * 0.25f - 12.0f
#define STR_(x) #x
#define STR(x) STR_(x)
static float logit(unsigned int i) { return LOGIT_BODY; }

static const char *kernel_src =
    "#include \"h3/rng.h\"\n"
    "__device__ float logit(unsigned int i) { return " STR(LOGIT_BODY) "; }\n"
    "extern \"C\" __global__ void rng_test(float *out, unsigned long long seed,\n"
    "                                      unsigned int stream, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i >= n) return;\n"
    "  out[i] = h3_rng_normal(seed, stream, (unsigned long long)i);\n"
    "  out[n + i] = h3_rng_uniform(seed, stream, (unsigned long long)i);\n"
    "  out[2 * n + i] = h3_rng_init_value(H3_RNG_INIT_NORMAL, 0.02f, seed, stream, i);\n"
    "  out[3 * n + i] = h3_rng_init_value(H3_RNG_INIT_UNIFORM, 0.125f, seed, stream, i);\n"
    "  out[4 * n + i] = h3_rng_init_value(H3_RNG_INIT_ONES_PLUS_NORMAL, 0.3f, seed, stream, i);\n"
    "  out[5 * n + i] = h3_rng_sample_score(logit(i), 0.7f, (unsigned int)seed, stream, i);\n"
    "}\n";

/* Compiles the kernel; returns a malloc'd CUBIN (cubin=1) or PTX image, NULL on failure. */
static char *compile(const char *header, int fast_math, int cubin, size_t *size) {
  nvrtcProgram prog;
  const char *hname = "h3/rng.h";
  if (nvrtcCreateProgram(&prog, kernel_src, "rng_test.cu", 1, &header, &hname) != NVRTC_SUCCESS)
    return NULL;
  const char *opts[3] = {cubin ? "--gpu-architecture=sm_90" : "--gpu-architecture=compute_90",
                         "--std=c++17", "--use_fast_math"};
  nvrtcResult r = nvrtcCompileProgram(prog, fast_math ? 3 : 2, opts);
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  if (r != NVRTC_SUCCESS) {
    char *log = malloc(log_size + 1);
    nvrtcGetProgramLog(prog, log);
    fprintf(stderr, "NVRTC failed (%s):\n%s\n", nvrtcGetErrorString(r), log);
    free(log);
    nvrtcDestroyProgram(&prog);
    return NULL;
  }
  char *image = NULL;
  if (cubin) {
    nvrtcGetCUBINSize(prog, size);
    image = malloc(*size);
    nvrtcGetCUBIN(prog, image);
  } else {
    nvrtcGetPTXSize(prog, size);
    image = malloc(*size);
    nvrtcGetPTX(prog, image);
  }
  nvrtcDestroyProgram(&prog);
  return image;
}

#define DRV(name) static __typeof__(&name) p_##name
DRV(cuInit);
DRV(cuDeviceGetCount);
DRV(cuDeviceGet);
DRV(cuDevicePrimaryCtxRetain);
DRV(cuCtxSetCurrent);
DRV(cuModuleLoadData);
DRV(cuModuleGetFunction);
DRV(cuMemAlloc);
DRV(cuMemcpyDtoH);
DRV(cuMemFree);
DRV(cuLaunchKernel);
DRV(cuCtxSynchronize);

static int load_driver(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return 0;
#define SYM(var, sym) ((p_##var = (__typeof__(p_##var))dlsym(lib, sym)) != NULL)
  return SYM(cuInit, "cuInit") && SYM(cuDeviceGetCount, "cuDeviceGetCount") &&
         SYM(cuDeviceGet, "cuDeviceGet") &&
         SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") &&
         SYM(cuCtxSetCurrent, "cuCtxSetCurrent") && SYM(cuModuleLoadData, "cuModuleLoadData") &&
         SYM(cuModuleGetFunction, "cuModuleGetFunction") && SYM(cuMemAlloc, "cuMemAlloc_v2") &&
         SYM(cuMemcpyDtoH, "cuMemcpyDtoH_v2") && SYM(cuMemFree, "cuMemFree_v2") &&
         SYM(cuLaunchKernel, "cuLaunchKernel") && SYM(cuCtxSynchronize, "cuCtxSynchronize");
#undef SYM
}

/* Runs the kernel for one (seed, stream) and compares with the CPU; returns mismatches. */
static long run_compare(CUfunction fn, unsigned long long seed, unsigned int stream, int n) {
  CUdeviceptr dout;
  size_t bytes = 6 * (size_t)n * sizeof(float);
  float *gpu = malloc(bytes), *cpu = malloc(bytes);
  if (!gpu || !cpu || p_cuMemAlloc(&dout, bytes) != CUDA_SUCCESS) {
    fprintf(stderr, "out of host or device memory\n");
    free(gpu);
    free(cpu);
    return -1;
  }
  void *args[4] = {&dout, &seed, &stream, &n};
  int ok = p_cuLaunchKernel(fn, (unsigned)((n + 255) / 256), 1, 1, 256, 1, 1, 0, NULL, args,
                            NULL) == CUDA_SUCCESS &&
           p_cuCtxSynchronize() == CUDA_SUCCESS && p_cuMemcpyDtoH(gpu, dout, bytes) == CUDA_SUCCESS;
  p_cuMemFree(dout);
  if (!ok) {
    fprintf(stderr, "kernel launch or copy failed\n");
    free(gpu);
    free(cpu);
    return -1;
  }
  h3_rng_fill_normal(seed, stream, 0, (size_t)n, cpu);
  h3_rng_fill_uniform(seed, stream, 0, (size_t)n, cpu + n);
  h3_rng_fill_init(H3_RNG_INIT_NORMAL, 0.02f, seed, stream, 0, (size_t)n, cpu + 2 * n);
  h3_rng_fill_init(H3_RNG_INIT_UNIFORM, 0.125f, seed, stream, 0, (size_t)n, cpu + 3 * n);
  h3_rng_fill_init(H3_RNG_INIT_ONES_PLUS_NORMAL, 0.3f, seed, stream, 0, (size_t)n, cpu + 4 * n);
  for (int i = 0; i < n; i++)
    cpu[5 * n + i] = h3_rng_sample_score(logit((unsigned)i), 0.7f, (unsigned)seed, stream, (unsigned)i);
  long bad = 0;
  for (size_t i = 0; i < 6 * (size_t)n; i++)
    if (memcmp(&gpu[i], &cpu[i], sizeof(float)) != 0 && bad++ < 5)
      fprintf(stderr, "output %zu element %zu: gpu %.9g cpu %.9g\n", i / (size_t)n,
              i % (size_t)n, gpu[i], cpu[i]);
  free(gpu);
  free(cpu);
  return bad;
}

/* Loads both kernels (cubin, else PTX) and compares them with the CPU; 0, 1 or 77. */
static int run_gpu(char *images[2][2]) {
  CUdevice dev;
  CUcontext ctx;
  int count = 0;
  if (!load_driver() || p_cuInit(0) != CUDA_SUCCESS || p_cuDeviceGetCount(&count) != CUDA_SUCCESS ||
      count == 0) {
    printf("no GPU: skipped\n");
    return 77;
  }
  CUfunction fn[2];
  if (p_cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
      p_cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
      p_cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
    fprintf(stderr, "cannot create a context on the GPU\n");
    return 1;
  }
  for (int f = 0; f < 2; f++) {
    CUmodule mod;
    if ((p_cuModuleLoadData(&mod, images[f][1]) != CUDA_SUCCESS &&
         p_cuModuleLoadData(&mod, images[f][0]) != CUDA_SUCCESS) ||
        p_cuModuleGetFunction(&fn[f], mod, "rng_test") != CUDA_SUCCESS) {
      fprintf(stderr, "cannot load the kernel on the GPU\n");
      return 1;
    }
  }
  int n = 1 << 20;
  for (int f = 0; f < 2; f++) {
    const char *what = f ? "-use_fast_math" : "default";
    long bad = run_compare(fn[f], 42, h3_rng_stream_id("noise.video"), n);
    long bad2 = bad < 0 ? -1 : run_compare(fn[f], 0xfedcba9876543210ull, h3_rng_stream_id("w"), n);
    if (bad != 0 || bad2 != 0) {
      fprintf(stderr, "GPU (%s) and CPU differ: %ld + %ld values\n", what, bad, bad2);
      return 1;
    }
    printf("GPU (%s) equals CPU bit for bit on %d values\n", what, 2 * 6 * n);
  }
  return 0;
}

int main(int argc, char **argv) {
  int run = argc > 1 && strcmp(argv[1], "--run") == 0;
  h3_diag d;
  h3_diag_init(&d);
  size_t hlen;
  char *header = h3_read_file(H3_SOURCE_DIR "/include/h3/rng.h", &hlen, &d);
  if (!header) {
    h3_diag_print(&d, stderr);
    h3_diag_free(&d);
    return 1;
  }
  size_t size;
  char *images[2][2] = {{NULL, NULL}, {NULL, NULL}}; /* [fast_math][cubin] */
  int rc = 0;
  for (int f = 0; f < 2; f++)
    for (int c = 0; c < 2; c++)
      if (!(images[f][c] = compile(header, f, c, &size))) rc = 1;
  if (rc == 0)
    printf("rng.h compiles with NVRTC (sm_90 cubin and compute_90 PTX, with and without "
           "-use_fast_math)\n");
  if (rc == 0 && run) rc = run_gpu(images);
  for (int f = 0; f < 2; f++)
    for (int c = 0; c < 2; c++) free(images[f][c]);
  free(header);
  h3_diag_free(&d);
  return rc;
}
