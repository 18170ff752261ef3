/* The interposed allocation, free, memory-info and launch entry points. */
#include <stdint.h>

#include "tools/cuda_cap/cuda_cap.h"

/* The real function as `real`, or CUDA_ERROR_NOT_FOUND when libcuda has none
 * (only reachable by a program bound to our symbol directly). */
#define REAL_OR_FAIL(name)                          \
  cap_init();                                       \
  __typeof__(&name) real = REAL(name);              \
  if (real == NULL) return CUDA_ERROR_NOT_FOUND

/* Reserve, allocate, then record or undo: the shape of every allocation. */
#define RESERVE_CALL_COMMIT(bytes, kind, key, call)                                   \
  do {                                                                                \
    uint64_t bytes_ = (bytes);                                                        \
    CUresult r_ = cap_mem_reserve(bytes_);                                            \
    if (r_ != CUDA_SUCCESS) return r_;                                                \
    r_ = (call);                                                                      \
    if (r_ == CUDA_SUCCESS)                                                           \
      cap_mem_keep((kind), (uint64_t)(key), bytes_);                                  \
    else                                                                              \
      cap_mem_drop(bytes_);                                                           \
    return r_;                                                                        \
  } while (0)

/* Forget the entry, free, then give the budget back or restore the entry. */
#define FORGET_CALL_RELEASE(kind, key, call)                                          \
  do {                                                                                \
    uint64_t bytes_ = 0;                                                              \
    int known_ = cap_mem_capped() && cap_mem_forget((kind), (uint64_t)(key), &bytes_); \
    CUresult r_ = (call);                                                             \
    if (known_ && r_ == CUDA_SUCCESS) cap_mem_drop(bytes_);                           \
    if (known_ && r_ != CUDA_SUCCESS) cap_mem_keep((kind), (uint64_t)(key), bytes_);  \
    return r_;                                                                        \
  } while (0)

/* Time and pace a launch when pacing is on. */
#define PACED(stream, ptsz, call)                \
  do {                                           \
    if (!cap_pacer_on()) return (call);          \
    struct cap_mark mark_;                       \
    cap_pace_begin(&mark_, (stream), (ptsz));    \
    CUresult r_ = (call);                        \
    cap_pace_end(&mark_, r_);                    \
    return r_;                                   \
  } while (0)

static uint64_t mul_sat(uint64_t a, uint64_t b) { return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b; }
static uint64_t at_least_1(uint64_t v) { return v == 0 ? 1 : v; }

/* Bytes per array element; 16 (four 32-bit channels, the largest texel) for
 * formats not listed here, so that an unknown one is over- not undercounted. */
static uint64_t texel_bytes(CUarray_format format, unsigned channels) {
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1ull * channels;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF:
      return 2ull * channels;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT:
      return 4ull * channels;
    default: return 16;
  }
}

static uint64_t array_bytes(size_t w, size_t h, size_t d, CUarray_format format, unsigned channels) {
  uint64_t texels = mul_sat(mul_sat(at_least_1(w), at_least_1(h)), at_least_1(d));
  return mul_sat(texels, at_least_1(texel_bytes(format, channels)));
}

/* ---- allocations ---- */

CAP_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  REAL_OR_FAIL(cuMemAlloc_v2);
  if (!cap_mem_capped()) return real(dptr, bytesize);
  RESERVE_CALL_COMMIT(bytesize, CAP_KIND_DEVPTR, *dptr, real(dptr, bytesize));
}

CAP_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  REAL_OR_FAIL(cuMemAllocManaged);
  if (!cap_mem_capped()) return real(dptr, bytesize, flags);
  RESERVE_CALL_COMMIT(bytesize, CAP_KIND_DEVPTR, *dptr, real(dptr, bytesize, flags));
}

CAP_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream stream) {
  REAL_OR_FAIL(cuMemAllocAsync);
  if (!cap_mem_capped()) return real(dptr, bytesize, stream);
  RESERVE_CALL_COMMIT(bytesize, CAP_KIND_DEVPTR, *dptr, real(dptr, bytesize, stream));
}

CAP_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream stream) {
  REAL_OR_FAIL(cuMemAllocAsync_ptsz);
  if (!cap_mem_capped()) return real(dptr, bytesize, stream);
  RESERVE_CALL_COMMIT(bytesize, CAP_KIND_DEVPTR, *dptr, real(dptr, bytesize, stream));
}

CAP_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                            CUstream stream) {
  REAL_OR_FAIL(cuMemAllocFromPoolAsync);
  if (!cap_mem_capped()) return real(dptr, bytesize, pool, stream);
  RESERVE_CALL_COMMIT(bytesize, CAP_KIND_DEVPTR, *dptr, real(dptr, bytesize, pool, stream));
}

CAP_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                                 CUstream stream) {
  REAL_OR_FAIL(cuMemAllocFromPoolAsync_ptsz);
  if (!cap_mem_capped()) return real(dptr, bytesize, pool, stream);
  RESERVE_CALL_COMMIT(bytesize, CAP_KIND_DEVPTR, *dptr, real(dptr, bytesize, pool, stream));
}

CAP_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                                unsigned long long flags) {
  REAL_OR_FAIL(cuMemCreate);
  if (!cap_mem_capped()) return real(handle, size, prop, flags);
  RESERVE_CALL_COMMIT(size, CAP_KIND_HANDLE, *handle, real(handle, size, prop, flags));
}

CAP_EXPORT CUresult cuArrayCreate_v2(CUarray* array, const CUDA_ARRAY_DESCRIPTOR* desc) {
  REAL_OR_FAIL(cuArrayCreate_v2);
  if (!cap_mem_capped() || desc == NULL) return real(array, desc);
  uint64_t bytes = array_bytes(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels);
  RESERVE_CALL_COMMIT(bytes, CAP_KIND_ARRAY, (uintptr_t)*array, real(array, desc));
}

CAP_EXPORT CUresult cuArray3DCreate_v2(CUarray* array, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  REAL_OR_FAIL(cuArray3DCreate_v2);
  if (!cap_mem_capped() || desc == NULL) return real(array, desc);
  uint64_t bytes = array_bytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels);
  RESERVE_CALL_COMMIT(bytes, CAP_KIND_ARRAY, (uintptr_t)*array, real(array, desc));
}

/* The driver picks the pitch: reserve a guess (rows padded to 512 bytes),
 * then settle on pitch x height, refusing if the difference does not fit. */
CAP_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                                       unsigned int element_size) {
  REAL_OR_FAIL(cuMemAllocPitch_v2);
  if (!cap_mem_capped()) return real(dptr, pitch, width, height, element_size);
  uint64_t guess = mul_sat(width > SIZE_MAX - 511 ? UINT64_MAX : (width + 511) / 512 * 512, height);
  CUresult r = cap_mem_reserve(guess);
  if (r != CUDA_SUCCESS) return r;
  r = real(dptr, pitch, width, height, element_size);
  if (r != CUDA_SUCCESS) {
    cap_mem_drop(guess);
    return r;
  }
  uint64_t actual = mul_sat(*pitch, height);
  if (actual > guess && cap_mem_grow(actual - guess) != CUDA_SUCCESS) {
    if (REAL(cuMemFree_v2)) REAL(cuMemFree_v2)(*dptr);
    cap_mem_drop(guess);
    *dptr = 0;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (actual < guess) cap_mem_shrink(guess - actual);
  cap_mem_keep(CAP_KIND_DEVPTR, *dptr, actual);
  return CUDA_SUCCESS;
}

/* ---- frees ---- */

CAP_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  REAL_OR_FAIL(cuMemFree_v2);
  FORGET_CALL_RELEASE(CAP_KIND_DEVPTR, dptr, real(dptr));
}

CAP_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
  REAL_OR_FAIL(cuMemFreeAsync);
  FORGET_CALL_RELEASE(CAP_KIND_DEVPTR, dptr, real(dptr, stream));
}

CAP_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
  REAL_OR_FAIL(cuMemFreeAsync_ptsz);
  FORGET_CALL_RELEASE(CAP_KIND_DEVPTR, dptr, real(dptr, stream));
}

CAP_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  REAL_OR_FAIL(cuMemRelease);
  FORGET_CALL_RELEASE(CAP_KIND_HANDLE, handle, real(handle));
}

CAP_EXPORT CUresult cuArrayDestroy(CUarray array) {
  REAL_OR_FAIL(cuArrayDestroy);
  FORGET_CALL_RELEASE(CAP_KIND_ARRAY, (uintptr_t)array, real(array));
}

/* ---- memory info ---- */

/* The share as the device: total = the limit (the device's if smaller),
 * free = what the task has left, never more than the device really has. */
CAP_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  REAL_OR_FAIL(cuMemGetInfo_v2);
  CUresult r = real(free_bytes, total_bytes);
  if (r != CUDA_SUCCESS || !cap_mem_capped()) return r;
  uint64_t limit = cap_mem_limit(), used = cap_mem_used();
  uint64_t left = used >= limit ? 0 : limit - used;
  if (left < *free_bytes) *free_bytes = (size_t)left;
  if (limit < *total_bytes) *total_bytes = (size_t)limit;
  return r;
}

/* ---- launches ---- */

CAP_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                   unsigned int by, unsigned int bz, unsigned int shared_bytes, CUstream stream,
                                   void** params, void** extra) {
  REAL_OR_FAIL(cuLaunchKernel);
  PACED(stream, 0, real(f, gx, gy, gz, bx, by, bz, shared_bytes, stream, params, extra));
}

CAP_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                        unsigned int bx, unsigned int by, unsigned int bz,
                                        unsigned int shared_bytes, CUstream stream, void** params, void** extra) {
  REAL_OR_FAIL(cuLaunchKernel_ptsz);
  PACED(stream, 1, real(f, gx, gy, gz, bx, by, bz, shared_bytes, stream, params, extra));
}

CAP_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  REAL_OR_FAIL(cuLaunchKernelEx);
  if (config == NULL) return real(config, f, params, extra);
  PACED(config->hStream, 0, real(config, f, params, extra));
}

CAP_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params,
                                          void** extra) {
  REAL_OR_FAIL(cuLaunchKernelEx_ptsz);
  if (config == NULL) return real(config, f, params, extra);
  PACED(config->hStream, 1, real(config, f, params, extra));
}

CAP_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                              unsigned int bx, unsigned int by, unsigned int bz,
                                              unsigned int shared_bytes, CUstream stream, void** params) {
  REAL_OR_FAIL(cuLaunchCooperativeKernel);
  PACED(stream, 0, real(f, gx, gy, gz, bx, by, bz, shared_bytes, stream, params));
}

CAP_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                                   unsigned int bx, unsigned int by, unsigned int bz,
                                                   unsigned int shared_bytes, CUstream stream, void** params) {
  REAL_OR_FAIL(cuLaunchCooperativeKernel_ptsz);
  PACED(stream, 1, real(f, gx, gy, gz, bx, by, bz, shared_bytes, stream, params));
}

CAP_EXPORT CUresult cuGraphLaunch(CUgraphExec graph, CUstream stream) {
  REAL_OR_FAIL(cuGraphLaunch);
  PACED(stream, 0, real(graph, stream));
}

CAP_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec graph, CUstream stream) {
  REAL_OR_FAIL(cuGraphLaunch_ptsz);
  PACED(stream, 1, real(graph, stream));
}
