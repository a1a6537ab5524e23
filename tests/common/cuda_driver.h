/* cuda_driver.h: the CUDA driver API for the GPU test programs that launch NVRTC kernels
 * themselves (test-only, header-only). The driver is opened with dlopen, so the tests
 * build and link on machines without one; cuda_driver_open() then returns false and the
 * test exits 77 (skipped). `cu` holds the entry points; the primary context of device 0
 * is current after a successful open. */
#ifndef H3_TESTS_CUDA_DRIVER_H
#define H3_TESTS_CUDA_DRIVER_H

#include <cuda.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>

typedef CUresult (*fn_init)(unsigned);
typedef CUresult (*fn_dev_get)(CUdevice *, int);
typedef CUresult (*fn_dev_name)(char *, int, CUdevice);
typedef CUresult (*fn_ctx_retain)(CUcontext *, CUdevice);
typedef CUresult (*fn_ctx_set)(CUcontext);
typedef CUresult (*fn_mod_load)(CUmodule *, const void *);
typedef CUresult (*fn_mod_fn)(CUfunction *, CUmodule, const char *);
typedef CUresult (*fn_alloc)(CUdeviceptr *, size_t);
typedef CUresult (*fn_free)(CUdeviceptr);
typedef CUresult (*fn_htod)(CUdeviceptr, const void *, size_t);
typedef CUresult (*fn_dtoh)(void *, CUdeviceptr, size_t);
typedef CUresult (*fn_dtod)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
typedef CUresult (*fn_launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, CUstream, void **, void **);
typedef CUresult (*fn_sync)(void);
typedef CUresult (*fn_ev_create)(CUevent *, unsigned);
typedef CUresult (*fn_ev_record)(CUevent, CUstream);
typedef CUresult (*fn_ev_sync)(CUevent);
typedef CUresult (*fn_ev_elapsed)(float *, CUevent, CUevent);

static struct {
  fn_init init;
  fn_dev_get dev_get;
  fn_dev_name dev_name;
  fn_ctx_retain ctx_retain;
  fn_ctx_set ctx_set;
  fn_mod_load mod_load;
  fn_mod_fn mod_fn;
  fn_alloc alloc;
  fn_free free_;
  fn_htod htod;
  fn_dtoh dtoh;
  fn_dtod dtod;
  fn_launch launch;
  fn_sync sync;
  fn_ev_create ev_create;
  fn_ev_record ev_record;
  fn_ev_sync ev_sync;
  fn_ev_elapsed ev_elapsed;
} cu;

/* Opens the driver, makes device 0's primary context current and writes the device's
 * name to name[0..len) (empty when unknown). False when no driver or GPU is usable. */
static inline bool cuda_driver_open(char *name, size_t len) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  if (!h) return false;
#define SYM(field, sym) \
  if (!(*(void **)&cu.field = dlsym(h, sym))) return false;
  SYM(init, "cuInit");
  SYM(dev_get, "cuDeviceGet");
  SYM(dev_name, "cuDeviceGetName");
  SYM(ctx_retain, "cuDevicePrimaryCtxRetain");
  SYM(ctx_set, "cuCtxSetCurrent");
  SYM(mod_load, "cuModuleLoadData");
  SYM(mod_fn, "cuModuleGetFunction");
  SYM(alloc, "cuMemAlloc_v2");
  SYM(free_, "cuMemFree_v2");
  SYM(htod, "cuMemcpyHtoD_v2");
  SYM(dtoh, "cuMemcpyDtoH_v2");
  SYM(dtod, "cuMemcpyDtoDAsync_v2");
  SYM(launch, "cuLaunchKernel");
  SYM(sync, "cuCtxSynchronize");
  SYM(ev_create, "cuEventCreate");
  SYM(ev_record, "cuEventRecord");
  SYM(ev_sync, "cuEventSynchronize");
  if (!(*(void **)&cu.ev_elapsed = dlsym(h, "cuEventElapsedTime_v2")))
    SYM(ev_elapsed, "cuEventElapsedTime");
#undef SYM
  CUdevice dev;
  CUcontext ctx;
  if (cu.init(0) != CUDA_SUCCESS || cu.dev_get(&dev, 0) != CUDA_SUCCESS ||
      cu.ctx_retain(&ctx, dev) != CUDA_SUCCESS || cu.ctx_set(ctx) != CUDA_SUCCESS)
    return false;
  if (name && len) {
    if (cu.dev_name(name, (int)len, dev) != CUDA_SUCCESS) name[0] = 0;
  }
  return true;
}

#endif
