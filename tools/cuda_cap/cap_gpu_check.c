/* gpupool-cap-gpu-check: the CUDA cap on a real GPU (scripts/device-check.sh).
 *
 * A small CUDA program that needs only the driver (no nvcc, no CUDA
 * headers): like the CUDA runtime it dlopen()s libcuda.so.1 and finds entry
 * points with dlsym and cuGetProcAddress_v2; its kernel is PTX embedded as
 * a string, JIT-compiled by the driver (cuModuleLoadData), that spins for a
 * given time on %globaltimer. Run with libgpupool-cuda-cap.so preloaded
 * and GPUPOOL_CUDA_* set, it prints key=value lines:
 *
 *   memory CHUNK_MIB  cuMemGetInfo first (info_free_mib=F info_total_mib=T),
 *                     then CHUNK_MIB allocations, alternately through dlsym
 *                     and cuGetProcAddress, until one is refused (at most
 *                     4096): allocated=N refused=CODE, and frees them.
 *   pace SECONDS SPIN_MS  launches the spinning kernel (one thread)
 *                     back to back for SECONDS of wall time and waits for
 *                     the GPU: launches=N kernel_ms=K (the mean time a
 *                     kernel spun, by the GPU's %globaltimer) elapsed_s=E
 *                     busy_fraction=F (the kernels' summed time / E).
 *
 * Device 0 of what CUDA_VISIBLE_DEVICES shows. Exit 0 when it measured, 1
 * on a CUDA error (named on stderr), 2 on a usage error.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/cuda_cap/cuda_abi.h"

typedef struct CUmod_st* CUmodule;
typedef CUresult (*module_load_data_fn)(CUmodule* module, const void* image);
typedef CUresult (*module_get_function_fn)(CUfunction* f, CUmodule module, const char* name);
typedef CUresult (*ctx_synchronize_fn)(void);
typedef CUresult (*memcpy_htod_fn)(CUdeviceptr dst, const void* src, size_t bytes);
typedef CUresult (*memcpy_dtoh_fn)(void* dst, CUdeviceptr src, size_t bytes);

enum { CUDA_VERSION_ASKED = 12000, MAX_CHUNKS = 4096 };

/* spin(u64 ns, u64* total_ns): returns once %globaltimer has advanced by
 * ns, and adds the time it spun to *total_ns (the GPU's own account of its
 * busy time: events around each launch would count the time the cap holds a
 * launch back as kernel time). PTX ISA 6.0, sm_50: every driver of the last
 * years JITs it for its GPU. */
static const char k_ptx[] =
    ".version 6.0\n"
    ".target sm_50\n"
    ".address_size 64\n"
    ".visible .entry spin(.param .u64 spin_ns, .param .u64 total_ns)\n"
    "{\n"
    "  .reg .pred %p;\n"
    "  .reg .b64 %rd<6>;\n"
    "  ld.param.u64 %rd1, [spin_ns];\n"
    "  ld.param.u64 %rd5, [total_ns];\n"
    "  cvta.to.global.u64 %rd5, %rd5;\n"
    "  mov.u64 %rd2, %globaltimer;\n"
    "LOOP:\n"
    "  mov.u64 %rd3, %globaltimer;\n"
    "  sub.u64 %rd4, %rd3, %rd2;\n"
    "  setp.lt.u64 %p, %rd4, %rd1;\n"
    "  @%p bra LOOP;\n"
    "  red.global.add.u64 [%rd5], %rd4;\n"
    "  ret;\n"
    "}\n";

static void* g_cuda;
static __typeof__(&cuGetProcAddress_v2) g_proc;

static void die(int code, const char* what) {
  fprintf(stderr, "gpupool-cap-gpu-check: %s\n", what);
  exit(code);
}

static void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  char text[256];
  snprintf(text, sizeof text, "%s failed: CUDA error %d", what, r);
  die(1, text);
}

static void* by_dlsym(const char* name) {
  void* fn = dlsym(g_cuda, name);
  char text[160];
  snprintf(text, sizeof text, "libcuda.so.1 has no %s%s", name,
           strcmp(name, "cuGetProcAddress_v2") == 0 ? " (a driver for CUDA 12 or later is needed)" : "");
  if (fn == NULL) die(1, text);
  return fn;
}

static void* by_proc(const char* base) {
  void* fn = NULL;
  CUdriverProcAddressQueryResult status = -1;
  char text[160];
  snprintf(text, sizeof text, "cuGetProcAddress_v2 does not find %s", base);
  if (g_proc(base, &fn, CUDA_VERSION_ASKED, 0, &status) != CUDA_SUCCESS || fn == NULL) die(1, text);
  return fn;
}

static double wall_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void setup(void) {
  g_cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (g_cuda == NULL) die(1, dlerror());
  g_proc = (__typeof__(&cuGetProcAddress_v2))by_dlsym("cuGetProcAddress_v2");
  CUdevice dev = -1;
  CUcontext ctx = NULL;
  check(((__typeof__(&cuInit))by_dlsym("cuInit"))(0), "cuInit");
  check(((__typeof__(&cuDeviceGet))by_proc("cuDeviceGet"))(&dev, 0), "cuDeviceGet");
  /* The device's primary context, as the CUDA runtime makes one: its entry
   * points have one ABI in every CUDA version, where cuCtxCreate's changed
   * (a CUDA 13 driver answers "cuCtxCreate" with the 4-argument v4). */
  check(((__typeof__(&cuDevicePrimaryCtxRetain))by_proc("cuDevicePrimaryCtxRetain"))(&ctx, dev),
        "cuDevicePrimaryCtxRetain");
  check(((__typeof__(&cuCtxSetCurrent))by_proc("cuCtxSetCurrent"))(ctx), "cuCtxSetCurrent");
}

static int mode_memory(long chunk_mib) {
  static CUdeviceptr chunks[MAX_CHUNKS];
  size_t free_bytes = 0, total = 0;
  check(((__typeof__(&cuMemGetInfo_v2))by_proc("cuMemGetInfo"))(&free_bytes, &total), "cuMemGetInfo");
  printf("info_free_mib=%zu info_total_mib=%zu\n", free_bytes >> 20, total >> 20);
  __typeof__(&cuMemAlloc_v2) alloc[2] = {by_dlsym("cuMemAlloc_v2"), by_proc("cuMemAlloc")};
  __typeof__(&cuMemFree_v2) release[2] = {by_dlsym("cuMemFree_v2"), by_proc("cuMemFree")};
  int n = 0;
  CUresult refused = CUDA_SUCCESS;
  while (n < MAX_CHUNKS && (refused = alloc[n % 2](&chunks[n], (size_t)chunk_mib << 20)) == CUDA_SUCCESS) ++n;
  printf("allocated=%d refused=%d\n", n, refused);
  for (int i = 0; i < n; ++i) check(release[i % 2](chunks[i]), "cuMemFree");
  return 0;
}

static int mode_pace(double seconds, double spin_ms) {
  CUmodule module = NULL;
  CUfunction spin = NULL;
  check(((module_load_data_fn)by_dlsym("cuModuleLoadData"))(&module, k_ptx), "cuModuleLoadData (the PTX kernel)");
  check(((module_get_function_fn)by_dlsym("cuModuleGetFunction"))(&spin, module, "spin"), "cuModuleGetFunction");
  __typeof__(&cuLaunchKernel) launch = by_proc("cuLaunchKernel");
  __typeof__(&cuMemAlloc_v2) alloc = by_dlsym("cuMemAlloc_v2");
  memcpy_htod_fn to_device = by_dlsym("cuMemcpyHtoD_v2");
  memcpy_dtoh_fn to_host = by_dlsym("cuMemcpyDtoH_v2");
  ctx_synchronize_fn sync = by_dlsym("cuCtxSynchronize");
  unsigned long long spin_ns = (unsigned long long)(spin_ms * 1e6), total_ns = 0;
  CUdeviceptr total = 0;
  check(alloc(&total, sizeof total_ns), "cuMemAlloc");
  void* args[] = {&spin_ns, &total};
  /* Warm up (JIT, first launch), then the counter from zero. */
  check(launch(spin, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), "cuLaunchKernel");
  check(sync(), "cuCtxSynchronize");
  check(to_device(total, &total_ns, sizeof total_ns), "cuMemcpyHtoD");
  long launches = 0;
  const double t0 = wall_s();
  for (; wall_s() - t0 < seconds; ++launches) check(launch(spin, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), "cuLaunchKernel");
  check(sync(), "cuCtxSynchronize");
  const double elapsed = wall_s() - t0;
  check(to_host(&total_ns, total, sizeof total_ns), "cuMemcpyDtoH");
  const double kernel_ms = launches > 0 ? (double)total_ns / 1e6 / (double)launches : 0.0;
  printf("launches=%ld kernel_ms=%.4f elapsed_s=%.3f busy_fraction=%.4f\n", launches, kernel_ms, elapsed,
         (double)total_ns / 1e9 / elapsed);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "memory") == 0 && atol(argv[2]) > 0) {
    setup();
    return mode_memory(atol(argv[2]));
  }
  if (argc == 4 && strcmp(argv[1], "pace") == 0 && atof(argv[2]) > 0 && atof(argv[3]) > 0) {
    setup();
    return mode_pace(atof(argv[2]), atof(argv[3]));
  }
  die(2, "usage: gpupool-cap-gpu-check memory CHUNK_MIB | pace SECONDS SPIN_MS");
  return 2;
}
