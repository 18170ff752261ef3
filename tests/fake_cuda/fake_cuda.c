/* A stand-in for libcuda.so.1, for the CUDA cap's tests (tests/cuda_cap_test.cc).
 *
 * Built as build/fake_cuda/libcuda.so.1, so that LD_LIBRARY_PATH pointing
 * there makes dlopen("libcuda.so.1") load it. It implements only what the
 * cap and its probe (tests/cuda_cap/cap_probe.c) call, with the real ABI:
 *
 * - cuInit first: every other call (but cuDriverGetVersion and
 *   cuGetProcAddress) returns CUDA_ERROR_NOT_INITIALIZED before it;
 *   allocations and launches need a context (cuCtxCreate_v2, or
 *   cuDevicePrimaryCtxRetain and cuCtxSetCurrent; current to the calling
 *   thread), else CUDA_ERROR_INVALID_CONTEXT.
 * - one device with FAKE_CUDA_MEMORY_MIB of memory (default 81920, 80 GiB):
 *   cuMemAlloc_v2, cuMemAllocManaged, cuMemAllocPitch_v2 (pitch: the width
 *   rounded up to 512), cuMemAllocAsync(_ptsz), cuArrayCreate_v2 and
 *   cuArray3DCreate_v2 return CUDA_ERROR_OUT_OF_MEMORY beyond it; frees give
 *   it back; cuMemGetInfo_v2 reports it. At most FAKE_ALLOCATIONS live.
 * - a simulated clock: each kernel launch (cuLaunchKernel(_ptsz),
 *   cuLaunchKernelEx(_ptsz)) runs synchronously for FAKE_CUDA_KERNEL_US
 *   microseconds (default 1000) of simulated time, counted as busy; events
 *   record the simulated time; nothing else advances it except
 *   gpupoolFakeCudaSleepNs.
 * - cuGetProcAddress (CUDA 11.3 ABI) and cuGetProcAddress_v2 (12.0) serve
 *   these entry points by base name, _ptsz variants by flag.
 * - the test seam: gpupoolFakeCudaNowNs (the simulated clock),
 *   gpupoolFakeCudaSleepNs (advances it at once) and gpupoolFakeCudaBusyNs
 *   (simulated kernel time so far).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cuda_cap/cuda_abi.h"

#define FAKE_EXPORT __attribute__((visibility("default")))

enum { FAKE_ALLOCATIONS = 4096, FAKE_EVENTS = 1024 };
enum { KIND_DEVPTR = 1, KIND_ARRAY = 2 };

struct allocation {
  uint64_t address; /* 0: free entry */
  uint64_t bytes;
  int kind;
};

struct CUevent_st {
  int used;
  int recorded;
  uint64_t time_ns;
};

struct CUctx_st {
  int live;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_initialised;
static uint64_t g_total, g_used, g_next_address = 1ull << 40, g_kernel_ns;
static uint64_t g_now_ns = 1000000000ull, g_busy_ns; /* simulated; starts at 1 s */
static struct allocation g_allocations[FAKE_ALLOCATIONS];
static struct CUevent_st g_events[FAKE_EVENTS];
static struct CUctx_st g_context;
static __thread CUcontext t_current;

static uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* text = getenv(name);
  if (text == NULL || *text == '\0') return fallback;
  char* end = NULL;
  unsigned long long value = strtoull(text, &end, 10);
  return *end == '\0' ? value : fallback;
}

/* ---- initialisation, device, context ---- */

FAKE_EXPORT CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&g_mu);
  if (!g_initialised) {
    g_total = env_u64("FAKE_CUDA_MEMORY_MIB", 81920) << 20;
    g_kernel_ns = env_u64("FAKE_CUDA_KERNEL_US", 1000) * 1000;
    g_initialised = 1;
  }
  pthread_mutex_unlock(&g_mu);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDriverGetVersion(int* version) {
  if (version == NULL) return CUDA_ERROR_INVALID_VALUE;
  *version = 12080;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (device == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxCreate_v2(CUcontext* ctx, unsigned int flags, CUdevice dev) {
  (void)flags;
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (ctx == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  g_context.live = 1;
  *ctx = t_current = &g_context;
  return CUDA_SUCCESS;
}

/* The primary context is the one context there is; retaining it makes it
 * live but not current (cuCtxSetCurrent does that). */
FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (ctx == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  g_context.live = 1;
  *ctx = &g_context;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (ctx != NULL && (ctx != &g_context || !g_context.live)) return CUDA_ERROR_INVALID_CONTEXT;
  t_current = ctx;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (ctx != &g_context || !g_context.live) return CUDA_ERROR_INVALID_CONTEXT;
  g_context.live = 0;
  if (t_current == ctx) t_current = NULL;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxGetCurrent(CUcontext* ctx) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (ctx == NULL) return CUDA_ERROR_INVALID_VALUE;
  *ctx = t_current;
  return CUDA_SUCCESS;
}

/* Whether a call may go ahead: initialised, with a live current context. */
static CUresult ready(void) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (t_current == NULL || !t_current->live) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_SUCCESS;
}

/* ---- memory ---- */

static CUresult allocate(uint64_t bytes, int kind, uint64_t* address) {
  CUresult r = ready();
  if (r != CUDA_SUCCESS) return r;
  if (address == NULL || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&g_mu);
  r = CUDA_ERROR_OUT_OF_MEMORY;
  for (int i = 0; i < FAKE_ALLOCATIONS && bytes <= g_total - g_used; ++i) {
    if (g_allocations[i].address != 0) continue;
    g_allocations[i] = (struct allocation){.address = g_next_address, .bytes = bytes, .kind = kind};
    *address = g_next_address;
    g_next_address += (bytes + (2u << 20) - 1) / (2u << 20) * (2u << 20); /* 2 MiB pages */
    g_used += bytes;
    r = CUDA_SUCCESS;
    break;
  }
  pthread_mutex_unlock(&g_mu);
  return r;
}

static CUresult release(uint64_t address, int kind) {
  CUresult r = ready();
  if (r != CUDA_SUCCESS) return r;
  pthread_mutex_lock(&g_mu);
  r = kind == KIND_ARRAY ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
  for (int i = 0; i < FAKE_ALLOCATIONS; ++i) {
    if (address == 0 || g_allocations[i].address != address || g_allocations[i].kind != kind) continue;
    g_used -= g_allocations[i].bytes;
    g_allocations[i].address = 0;
    r = CUDA_SUCCESS;
    break;
  }
  pthread_mutex_unlock(&g_mu);
  return r;
}

static uint64_t format_bytes(CUarray_format format) {
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
  }
}

static CUresult create_array(CUarray* array, size_t w, size_t h, size_t d, CUarray_format format,
                             unsigned channels) {
  uint64_t texel = format_bytes(format) * channels, address = 0;
  if (array == NULL || w == 0 || texel == 0 || (channels != 1 && channels != 2 && channels != 4))
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = allocate((uint64_t)w * (h ? h : 1) * (d ? d : 1) * texel, KIND_ARRAY, &address);
  if (r == CUDA_SUCCESS) *array = (CUarray)(uintptr_t)address;
  return r;
}

FAKE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  return allocate(bytesize, KIND_DEVPTR, (uint64_t*)dptr);
}

FAKE_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  if (flags != 1 && flags != 2) return CUDA_ERROR_INVALID_VALUE; /* CU_MEM_ATTACH_GLOBAL / _HOST */
  return allocate(bytesize, KIND_DEVPTR, (uint64_t*)dptr);
}

FAKE_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width_bytes, size_t height,
                                        unsigned int element_size_bytes) {
  if (pitch == NULL || (element_size_bytes != 4 && element_size_bytes != 8 && element_size_bytes != 16))
    return CUDA_ERROR_INVALID_VALUE;
  size_t padded = (width_bytes + 511) / 512 * 512;
  CUresult r = allocate((uint64_t)padded * height, KIND_DEVPTR, (uint64_t*)dptr);
  if (r == CUDA_SUCCESS) *pitch = padded;
  return r;
}

FAKE_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream stream) {
  (void)stream;
  return allocate(bytesize, KIND_DEVPTR, (uint64_t*)dptr);
}

FAKE_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream stream) {
  return cuMemAllocAsync(dptr, bytesize, stream);
}

FAKE_EXPORT CUresult cuArrayCreate_v2(CUarray* array, const CUDA_ARRAY_DESCRIPTOR* desc) {
  if (desc == NULL) return CUDA_ERROR_INVALID_VALUE;
  return create_array(array, desc->Width, desc->Height, 1, desc->Format, desc->NumChannels);
}

FAKE_EXPORT CUresult cuArray3DCreate_v2(CUarray* array, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  if (desc == NULL) return CUDA_ERROR_INVALID_VALUE;
  return create_array(array, desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels);
}

FAKE_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) { return release(dptr, KIND_DEVPTR); }

FAKE_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
  (void)stream;
  return release(dptr, KIND_DEVPTR);
}

FAKE_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) { return cuMemFreeAsync(dptr, stream); }

FAKE_EXPORT CUresult cuArrayDestroy(CUarray array) { return release((uint64_t)(uintptr_t)array, KIND_ARRAY); }

FAKE_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  CUresult r = ready();
  if (r != CUDA_SUCCESS) return r;
  if (free_bytes == NULL || total_bytes == NULL) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&g_mu);
  *free_bytes = g_total - g_used;
  *total_bytes = g_total;
  pthread_mutex_unlock(&g_mu);
  return CUDA_SUCCESS;
}

/* ---- kernels and events on the simulated clock ---- */

static CUresult run_kernel(CUfunction f) {
  CUresult r = ready();
  if (r != CUDA_SUCCESS) return r;
  if (f == NULL) return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&g_mu);
  g_now_ns += g_kernel_ns;
  g_busy_ns += g_kernel_ns;
  pthread_mutex_unlock(&g_mu);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                    unsigned int by, unsigned int bz, unsigned int shared_bytes, CUstream stream,
                                    void** params, void** extra) {
  (void)stream, (void)shared_bytes, (void)params, (void)extra;
  if (gx * gy * gz == 0 || bx * by * bz == 0) return CUDA_ERROR_INVALID_VALUE;
  return run_kernel(f);
}

FAKE_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                         unsigned int bx, unsigned int by, unsigned int bz,
                                         unsigned int shared_bytes, CUstream stream, void** params, void** extra) {
  return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared_bytes, stream, params, extra);
}

FAKE_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  (void)params, (void)extra;
  if (config == NULL) return CUDA_ERROR_INVALID_VALUE;
  return run_kernel(f);
}

FAKE_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params,
                                           void** extra) {
  return cuLaunchKernelEx(config, f, params, extra);
}

static int valid_event(CUevent e) { return e >= g_events && e < g_events + FAKE_EVENTS && e->used; }

FAKE_EXPORT CUresult cuEventCreate(CUevent* event, unsigned int flags) {
  CUresult r = ready();
  if (r != CUDA_SUCCESS) return r;
  if (event == NULL || flags > 0xf) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&g_mu);
  r = CUDA_ERROR_OUT_OF_MEMORY;
  for (int i = 0; i < FAKE_EVENTS; ++i) {
    if (g_events[i].used) continue;
    g_events[i] = (struct CUevent_st){.used = 1};
    *event = &g_events[i];
    r = CUDA_SUCCESS;
    break;
  }
  pthread_mutex_unlock(&g_mu);
  return r;
}

FAKE_EXPORT CUresult cuEventRecord(CUevent event, CUstream stream) {
  (void)stream;
  CUresult r = ready();
  if (r != CUDA_SUCCESS) return r;
  if (!valid_event(event)) return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&g_mu);
  event->recorded = 1;
  event->time_ns = g_now_ns;
  pthread_mutex_unlock(&g_mu);
  return CUDA_SUCCESS;
}

/* Kernels run synchronously here, so a recorded event is always complete. */
FAKE_EXPORT CUresult cuEventQuery(CUevent event) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  return valid_event(event) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FAKE_EXPORT CUresult cuEventSynchronize(CUevent event) { return cuEventQuery(event); }

FAKE_EXPORT CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (ms == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_event(start) || !valid_event(end) || !start->recorded || !end->recorded)
    return CUDA_ERROR_INVALID_HANDLE;
  *ms = (float)((double)(int64_t)(end->time_ns - start->time_ns) / 1e6);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuEventDestroy_v2(CUevent event) {
  if (!g_initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (!valid_event(event)) return CUDA_ERROR_INVALID_HANDLE;
  event->used = 0;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus* status) {
  (void)stream;
  CUresult r = ready();
  if (r != CUDA_SUCCESS) return r;
  if (status == NULL) return CUDA_ERROR_INVALID_VALUE;
  *status = GPUPOOL_CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  static __thread CUstreamCaptureMode t_mode; /* 0: global, CUDA's default */
  if (mode == NULL) return CUDA_ERROR_INVALID_VALUE;
  CUstreamCaptureMode previous = t_mode;
  t_mode = *mode;
  *mode = previous;
  return CUDA_SUCCESS;
}

/* ---- the seam ---- */

FAKE_EXPORT uint64_t gpupoolFakeCudaNowNs(void) {
  pthread_mutex_lock(&g_mu);
  uint64_t now = g_now_ns;
  pthread_mutex_unlock(&g_mu);
  return now;
}

FAKE_EXPORT void gpupoolFakeCudaSleepNs(uint64_t ns) {
  pthread_mutex_lock(&g_mu);
  g_now_ns += ns;
  pthread_mutex_unlock(&g_mu);
}

FAKE_EXPORT uint64_t gpupoolFakeCudaBusyNs(void) {
  pthread_mutex_lock(&g_mu);
  uint64_t busy = g_busy_ns;
  pthread_mutex_unlock(&g_mu);
  return busy;
}

/* ---- cuGetProcAddress ---- */

struct proc {
  const char* name;
  void* legacy;
  void* ptsz; /* NULL: same as legacy */
};

#define P(name, fn) {#name, (void*)fn, NULL}
#define P2(name) {#name, (void*)name, (void*)name##_ptsz}

static const struct proc k_procs[] = {
    P(cuInit, cuInit), P(cuDriverGetVersion, cuDriverGetVersion), P(cuDeviceGet, cuDeviceGet),
    P(cuCtxCreate, cuCtxCreate_v2), P(cuCtxDestroy, cuCtxDestroy_v2), P(cuCtxGetCurrent, cuCtxGetCurrent),
    P(cuCtxSetCurrent, cuCtxSetCurrent), P(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain),
    P(cuMemAlloc, cuMemAlloc_v2), P(cuMemAllocManaged, cuMemAllocManaged), P(cuMemAllocPitch, cuMemAllocPitch_v2),
    P2(cuMemAllocAsync), P(cuArrayCreate, cuArrayCreate_v2), P(cuArray3DCreate, cuArray3DCreate_v2),
    P(cuMemFree, cuMemFree_v2), P2(cuMemFreeAsync), P(cuArrayDestroy, cuArrayDestroy),
    P(cuMemGetInfo, cuMemGetInfo_v2), P2(cuLaunchKernel), P2(cuLaunchKernelEx), P(cuEventCreate, cuEventCreate),
    P(cuEventRecord, cuEventRecord), P(cuEventQuery, cuEventQuery), P(cuEventSynchronize, cuEventSynchronize),
    P(cuEventElapsedTime, cuEventElapsedTime), P(cuEventDestroy, cuEventDestroy_v2),
    P(cuStreamIsCapturing, cuStreamIsCapturing),
    P(cuThreadExchangeStreamCaptureMode, cuThreadExchangeStreamCaptureMode),
};

static void* lookup(const char* symbol, int version, cuuint64_t flags) {
  if (strcmp(symbol, "cuGetProcAddress") == 0)
    return version >= 12000 ? (void*)cuGetProcAddress_v2 : (void*)cuGetProcAddress;
  for (size_t i = 0; i < sizeof k_procs / sizeof k_procs[0]; ++i) {
    if (strcmp(symbol, k_procs[i].name) != 0) continue;
    int ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && k_procs[i].ptsz != NULL;
    return ptsz ? k_procs[i].ptsz : k_procs[i].legacy;
  }
  return NULL;
}

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                         CUdriverProcAddressQueryResult* status) {
  if (symbol == NULL || pfn == NULL || flags > 3) return CUDA_ERROR_INVALID_VALUE;
  *pfn = lookup(symbol, version, flags);
  if (status != NULL) *status = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

FAKE_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}
