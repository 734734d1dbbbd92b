/*===- gpu_driver.h - CUDA and HIP behind one table of functions --------===*
 *
 * The CUDA driver API and HIP's module API have the same shape; each is
 * loaded with dlopen into this table, so the GPU runtime has no link-time
 * dependency on either and one code path for both. Every call returns 0 on
 * success (CUresult / hipError_t).
 *
 *===--------------------------------------------------------------------===*/

#ifndef TQ_RUNTIME_GPU_DRIVER_H
#define TQ_RUNTIME_GPU_DRIVER_H

#include <stddef.h>
#include <stdint.h>

typedef uint64_t tq_device_ptr;

/* Raw entry points of the loaded library, indexed by tq_gpu_symbol. */
enum tq_gpu_symbol {
  SYM_INIT,
  SYM_DEVICE_GET,
  SYM_DEVICE_ATTRIBUTE,
  SYM_CONTEXT_RETAIN,
  SYM_CONTEXT_RELEASE,
  SYM_SET_CURRENT,
  SYM_MODULE_LOAD_DATA,
  SYM_MODULE_UNLOAD,
  SYM_MODULE_GET_FUNCTION,
  SYM_MODULE_GET_GLOBAL,
  SYM_MEM_ALLOC,
  SYM_MEM_FREE,
  SYM_MEMCPY_HTOD,
  SYM_MEMCPY_DTOH,
  SYM_LAUNCH,
  SYM_SYNCHRONIZE,
  SYM_DEVICE_NAME,
  SYM_COUNT
};

typedef struct tq_gpu_driver {
  void *library;    /* dlopen handle */
  int cuda;         /* 1: CUDA driver API, 0: HIP */
  int device;       /* CUdevice / hipDevice_t */
  void *context;    /* CUDA: the device's primary context */
  void *symbols[SYM_COUNT];
} tq_gpu_driver;

/* Thin, vendor-neutral calls; each returns 0 or the driver's error. */
int tq_gpu_set_current(const tq_gpu_driver *d);
int tq_gpu_multiprocessors(const tq_gpu_driver *d, int *count);
/* The device's name, NUL-terminated within `bytes`. */
int tq_gpu_device_name_raw(const tq_gpu_driver *d, char *name, int bytes);
int tq_gpu_module_load(const tq_gpu_driver *d, void **module,
                       const void *image);
int tq_gpu_module_unload(const tq_gpu_driver *d, void *module);
int tq_gpu_module_function(const tq_gpu_driver *d, void **function,
                           void *module, const char *name);
int tq_gpu_module_global(const tq_gpu_driver *d, tq_device_ptr *ptr,
                         size_t *bytes, void *module, const char *name);
int tq_gpu_malloc_raw(const tq_gpu_driver *d, tq_device_ptr *ptr,
                      size_t bytes);
int tq_gpu_free_raw(const tq_gpu_driver *d, tq_device_ptr ptr);
int tq_gpu_htod(const tq_gpu_driver *d, tq_device_ptr dst, const void *src,
                size_t bytes);
int tq_gpu_dtoh(const tq_gpu_driver *d, void *dst, tq_device_ptr src,
                size_t bytes);
int tq_gpu_launch(const tq_gpu_driver *d, void *function, unsigned gx,
                  unsigned gy, unsigned gz, unsigned block, void **params);
int tq_gpu_synchronize(const tq_gpu_driver *d);

/* The library tq_gpu_driver_open loads: `path`, or the vendor's default
 * soname (for HIP, libamdhip64.so.6 is also tried). */
const char *tq_gpu_driver_name(int cuda, const char *path);

/* Loads the driver library (path, or the vendor's default soname) and
 * resolves every entry point; then initialises it and picks the device.
 * Returns 0, or -1 when the library or a symbol is missing (no driver
 * here), or the driver's error code. */
int tq_gpu_driver_open(tq_gpu_driver *d, int cuda, const char *path,
                       int ordinal);
void tq_gpu_driver_close(tq_gpu_driver *d);

#endif /* TQ_RUNTIME_GPU_DRIVER_H */
