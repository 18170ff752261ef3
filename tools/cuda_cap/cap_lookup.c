/* How applications find our entry points: cuGetProcAddress (what CUDA 12
 * runtimes use) and dlsym on libcuda's handle. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "tools/cuda_cap/cuda_cap.h"

/* A cuGetProcAddress name: ours (and our _ptsz variant) for a CUDA version
 * at least min_version, the version whose ABI we implement. */
struct proc_entry {
  const char* base;
  int min_version;
  void* ours;
  void* ours_ptsz; /* NULL: the name has no per-thread-stream variant */
  enum cap_real_id real, real_ptsz;
};

#define PROC(base, version, ours) {#base, version, (void*)ours, NULL, CAP_REAL_##ours, CAP_REAL_##ours}
#define PROC_PTSZ(base, version)                                                                  \
  {#base, version, (void*)base, (void*)base##_ptsz, CAP_REAL_##base, CAP_REAL_##base##_ptsz}

static const struct proc_entry k_procs[] = {
    PROC(cuMemAlloc, 3020, cuMemAlloc_v2),
    PROC(cuMemAllocManaged, 6000, cuMemAllocManaged),
    PROC(cuMemAllocPitch, 3020, cuMemAllocPitch_v2),
    PROC_PTSZ(cuMemAllocAsync, 11020),
    PROC_PTSZ(cuMemAllocFromPoolAsync, 11020),
    PROC(cuMemCreate, 10020, cuMemCreate),
    PROC(cuArrayCreate, 3020, cuArrayCreate_v2),
    PROC(cuArray3DCreate, 3020, cuArray3DCreate_v2),
    PROC(cuMemFree, 3020, cuMemFree_v2),
    PROC_PTSZ(cuMemFreeAsync, 11020),
    PROC(cuMemRelease, 10020, cuMemRelease),
    PROC(cuArrayDestroy, 2000, cuArrayDestroy),
    PROC(cuMemGetInfo, 3020, cuMemGetInfo_v2),
    PROC_PTSZ(cuLaunchKernel, 4000),
    PROC_PTSZ(cuLaunchKernelEx, 11060),
    PROC_PTSZ(cuLaunchCooperativeKernel, 9000),
    PROC_PTSZ(cuGraphLaunch, 10000),
};

/* An exported name that dlsym on libcuda answers with ours. */
struct export_entry {
  const char* name;
  void* ours;
  enum cap_real_id real;
};

#define EXPORT(name) {#name, (void*)name, CAP_REAL_##name}

static const struct export_entry k_exports[] = {
    EXPORT(cuMemAlloc_v2), EXPORT(cuMemAllocManaged), EXPORT(cuMemAllocPitch_v2),
    EXPORT(cuMemAllocAsync), EXPORT(cuMemAllocAsync_ptsz), EXPORT(cuMemAllocFromPoolAsync),
    EXPORT(cuMemAllocFromPoolAsync_ptsz), EXPORT(cuMemCreate), EXPORT(cuArrayCreate_v2),
    EXPORT(cuArray3DCreate_v2), EXPORT(cuMemFree_v2), EXPORT(cuMemFreeAsync), EXPORT(cuMemFreeAsync_ptsz),
    EXPORT(cuMemRelease), EXPORT(cuArrayDestroy), EXPORT(cuMemGetInfo_v2), EXPORT(cuLaunchKernel),
    EXPORT(cuLaunchKernel_ptsz), EXPORT(cuLaunchKernelEx), EXPORT(cuLaunchKernelEx_ptsz),
    EXPORT(cuLaunchCooperativeKernel), EXPORT(cuLaunchCooperativeKernel_ptsz), EXPORT(cuGraphLaunch),
    EXPORT(cuGraphLaunch_ptsz), EXPORT(cuGetProcAddress), EXPORT(cuGetProcAddress_v2),
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const struct export_entry* find_export(const char* name) {
  for (size_t i = 0; i < COUNT(k_exports); ++i)
    if (strcmp(name, k_exports[i].name) == 0) return &k_exports[i];
  return NULL;
}

/* "cuGetProcAddress" itself: its ABI changed in CUDA 12.0 (the query result). */
static void* redirect_self(int version, void* found) {
  int v2 = version >= 12000;
  cap_real_offer(v2 ? CAP_REAL_cuGetProcAddress_v2 : CAP_REAL_cuGetProcAddress, found);
  return v2 ? (void*)cuGetProcAddress_v2 : (void*)cuGetProcAddress;
}

/* What cuGetProcAddress answers for symbol, given what the driver found. */
static void* redirect_proc(const char* symbol, int version, cuuint64_t flags, void* found) {
  if (strcmp(symbol, "cuGetProcAddress") == 0) return version >= 11030 ? redirect_self(version, found) : found;
  for (size_t i = 0; i < COUNT(k_procs); ++i) {
    const struct proc_entry* e = &k_procs[i];
    if (strcmp(symbol, e->base) != 0) continue;
    if (version < e->min_version) return found; /* an older ABI we do not implement */
    int ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && e->ours_ptsz != NULL;
    cap_real_offer(ptsz ? e->real_ptsz : e->real, found);
    return ptsz ? e->ours_ptsz : e->ours;
  }
  /* A full exported name ("cuMemAlloc_v2", "cuLaunchKernel_ptsz"), when the
   * driver answers those: the name fixes the ABI. */
  const struct export_entry* x = find_export(symbol);
  if (x == NULL) return found;
  cap_real_offer(x->real, found);
  return x->ours;
}

CAP_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  cap_init();
  __typeof__(&cuGetProcAddress) real = REAL(cuGetProcAddress);
  if (real == NULL) return CUDA_ERROR_NOT_FOUND;
  CUresult r = real(symbol, pfn, version, flags);
  if (r == CUDA_SUCCESS && symbol != NULL && pfn != NULL && *pfn != NULL)
    *pfn = redirect_proc(symbol, version, flags, *pfn);
  return r;
}

CAP_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                        CUdriverProcAddressQueryResult* status) {
  cap_init();
  __typeof__(&cuGetProcAddress_v2) real = REAL(cuGetProcAddress_v2);
  if (real == NULL) return CUDA_ERROR_NOT_FOUND;
  CUresult r = real(symbol, pfn, version, flags, status);
  if (r == CUDA_SUCCESS && symbol != NULL && pfn != NULL && *pfn != NULL)
    *pfn = redirect_proc(symbol, version, flags, *pfn);
  return r;
}

/* An explicit handle and an interposed name: ours when what the handle
 * finds is libcuda's own entry point. */
static void* __attribute__((noinline))
redirect_dlsym(cap_dlsym_fn real, void* handle, const struct export_entry* e) {
  void* found = real(handle, e->name);
  if (found == NULL) return NULL;
  cap_init();
  return found == cap_real(e->real) ? e->ours : found;
}

/* RTLD_DEFAULT finds our exports first anyway (we are preloaded), and
 * RTLD_NEXT depends on the caller, which glibc's dlsym reads from its return
 * address: those, and every name we do not interpose, go to glibc's dlsym as
 * a tail call (a jump), so that it sees our caller, not us. */
CAP_EXPORT void* dlsym(void* restrict handle, const char* restrict name) {
  cap_dlsym_fn real = cap_real_dlsym();
  const struct export_entry* e = NULL;
  if (handle != RTLD_DEFAULT && handle != RTLD_NEXT && name[0] == 'c' && name[1] == 'u' && !cap_initialising())
    e = find_export(name);
  if (e == NULL) return real(handle, name);
  return redirect_dlsym(real, handle, e);
}
