/*===- gpu_driver.c - CUDA and HIP behind one table of functions --------===*
 *
 * Symbol names per vendor; the signatures below are the drivers' public
 * C ABI (CUDA driver API 12+, HIP 5+). CUDA device pointers are 64-bit
 * integers, HIP's are void *: both travel as tq_device_ptr here.
 *
 *===--------------------------------------------------------------------===*/

#include "gpu_driver.h"

#include <dlfcn.h>
#include <string.h>

static const char *const kCudaSymbols[SYM_COUNT] = {
    "cuInit",           "cuDeviceGet",           "cuDeviceGetAttribute",
    "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSetCurrent",  "cuModuleLoadData",      "cuModuleUnload",
    "cuModuleGetFunction", "cuModuleGetGlobal_v2", "cuMemAlloc_v2",
    "cuMemFree_v2",     "cuMemcpyHtoD_v2",       "cuMemcpyDtoH_v2",
    "cuLaunchKernel",   "cuCtxSynchronize",      "cuDeviceGetName"};

/* HIP has no primary-context calls in its module API: hipSetDevice makes
 * the device current; "retain"/"release" map to harmless queries. */
static const char *const kHipSymbols[SYM_COUNT] = {
    "hipInit",          "hipDeviceGet",          "hipDeviceGetAttribute",
    "hipSetDevice",     "hipGetDevice",          "hipSetDevice",
    "hipModuleLoadData", "hipModuleUnload",      "hipModuleGetFunction",
    "hipModuleGetGlobal", "hipMalloc",           "hipFree",
    "hipMemcpyHtoD",    "hipMemcpyDtoH",         "hipModuleLaunchKernel",
    "hipDeviceSynchronize", "hipDeviceGetName"};

/* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT. HIP's attribute enum changed
 * between releases, so HIP reports no count (the planner's default). */
enum { CUDA_ATTRIBUTE_MULTIPROCESSORS = 16 };

#define CALL(d, sym, type, ...) (((type)(d)->symbols[sym])(__VA_ARGS__))

const char *tq_gpu_driver_name(int cuda, const char *path) {
  return path ? path : (cuda ? "libcuda.so.1" : "libamdhip64.so");
}

int tq_gpu_driver_open(tq_gpu_driver *d, int cuda, const char *path,
                       int ordinal) {
  memset(d, 0, sizeof *d);
  d->cuda = cuda;
  const char *soname = tq_gpu_driver_name(cuda, path);
  d->library = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!d->library && !path && !cuda)
    d->library = dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_LOCAL);
  if (!d->library)
    return -1;
  const char *const *names = cuda ? kCudaSymbols : kHipSymbols;
  for (int i = 0; i < SYM_COUNT; ++i) {
    d->symbols[i] = dlsym(d->library, names[i]);
    if (!d->symbols[i]) {
      dlclose(d->library);
      d->library = NULL;
      return -1;
    }
  }
  int status = CALL(d, SYM_INIT, int (*)(unsigned), 0);
  if (status == 0)
    status = CALL(d, SYM_DEVICE_GET, int (*)(int *, int), &d->device, ordinal);
  if (status == 0 && cuda)
    status = CALL(d, SYM_CONTEXT_RETAIN, int (*)(void **, int), &d->context,
                  d->device);
  if (status == 0)
    status = tq_gpu_set_current(d);
  if (status != 0)
    tq_gpu_driver_close(d);
  return status;
}

void tq_gpu_driver_close(tq_gpu_driver *d) {
  if (!d->library)
    return;
  if (d->cuda && d->context)
    CALL(d, SYM_CONTEXT_RELEASE, int (*)(int), d->device);
  dlclose(d->library);
  d->library = NULL;
}

int tq_gpu_set_current(const tq_gpu_driver *d) {
  if (d->cuda)
    return CALL(d, SYM_SET_CURRENT, int (*)(void *), d->context);
  return CALL(d, SYM_SET_CURRENT, int (*)(int), d->device);
}

int tq_gpu_device_name_raw(const tq_gpu_driver *d, char *name, int bytes) {
  return CALL(d, SYM_DEVICE_NAME, int (*)(char *, int, int), name, bytes,
              d->device);
}

int tq_gpu_multiprocessors(const tq_gpu_driver *d, int *count) {
  *count = 0;
  if (!d->cuda)
    return 0;
  return CALL(d, SYM_DEVICE_ATTRIBUTE, int (*)(int *, int, int), count,
              CUDA_ATTRIBUTE_MULTIPROCESSORS, d->device);
}

int tq_gpu_module_load(const tq_gpu_driver *d, void **module,
                       const void *image) {
  return CALL(d, SYM_MODULE_LOAD_DATA, int (*)(void **, const void *), module,
              image);
}

int tq_gpu_module_unload(const tq_gpu_driver *d, void *module) {
  return CALL(d, SYM_MODULE_UNLOAD, int (*)(void *), module);
}

int tq_gpu_module_function(const tq_gpu_driver *d, void **function,
                           void *module, const char *name) {
  return CALL(d, SYM_MODULE_GET_FUNCTION,
              int (*)(void **, void *, const char *), function, module, name);
}

int tq_gpu_module_global(const tq_gpu_driver *d, tq_device_ptr *ptr,
                         size_t *bytes, void *module, const char *name) {
  return CALL(d, SYM_MODULE_GET_GLOBAL,
              int (*)(tq_device_ptr *, size_t *, void *, const char *), ptr,
              bytes, module, name);
}

int tq_gpu_malloc_raw(const tq_gpu_driver *d, tq_device_ptr *ptr,
                      size_t bytes) {
  return CALL(d, SYM_MEM_ALLOC, int (*)(tq_device_ptr *, size_t), ptr, bytes);
}

int tq_gpu_free_raw(const tq_gpu_driver *d, tq_device_ptr ptr) {
  return CALL(d, SYM_MEM_FREE, int (*)(tq_device_ptr), ptr);
}

int tq_gpu_htod(const tq_gpu_driver *d, tq_device_ptr dst, const void *src,
                size_t bytes) {
  return CALL(d, SYM_MEMCPY_HTOD, int (*)(tq_device_ptr, const void *, size_t),
              dst, src, bytes);
}

int tq_gpu_dtoh(const tq_gpu_driver *d, void *dst, tq_device_ptr src,
                size_t bytes) {
  return CALL(d, SYM_MEMCPY_DTOH, int (*)(void *, tq_device_ptr, size_t), dst,
              src, bytes);
}

int tq_gpu_launch(const tq_gpu_driver *d, void *function, unsigned gx,
                  unsigned gy, unsigned gz, unsigned block, void **params) {
  return CALL(d, SYM_LAUNCH,
              int (*)(void *, unsigned, unsigned, unsigned, unsigned, unsigned,
                      unsigned, unsigned, void *, void **, void **),
              function, gx, gy, gz, block, 1u, 1u, 0u, NULL, params, NULL);
}

int tq_gpu_synchronize(const tq_gpu_driver *d) {
  return CALL(d, SYM_SYNCHRONIZE, int (*)(void));
}
