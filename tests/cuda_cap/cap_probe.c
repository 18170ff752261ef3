/* The CUDA cap's probe (tests/cuda_cap_test.cc runs it with the cap preloaded
 * and the fake libcuda on LD_LIBRARY_PATH). Like the CUDA runtime it
 * dlopen()s libcuda.so.1 and finds entry points both with dlsym on that
 * handle and through cuGetProcAddress. Modes (argv[1]), one "key=value" line
 * per result on stdout:
 *
 *   alloc [HOLD]  1 GiB cuMemAlloc's, alternately through dlsym and
 *                 cuGetProcAddress, until one is refused (at most 256):
 *                 allocated=N direct=D proc=P refused=CODE, then
 *                 free_mib=F total_mib=T (cuMemGetInfo). With HOLD: stops
 *                 after HOLD allocations, prints holding=1 and keeps them
 *                 until stdin is closed. Otherwise frees them all (alternate
 *                 paths), prints freed=N free_after_mib=F, allocates again:
 *                 reallocated=M.
 *   kinds         1 GiB through each allocation entry point in turn:
 *                 NAME=CODE lines (alloc, managed, pitch, array, array3d,
 *                 async), then array_destroy, array3d_again, async_ptsz.
 *   pace SECONDS [FLIP_S STATE SETTLE_S]
 *                 launches 1-block kernels back to back, alternately through
 *                 dlsym (cuLaunchKernel) and cuGetProcAddress (the per-thread
 *                 stream variant), for SECONDS of the fake's simulated time:
 *                 launches=N elapsed_s=E busy_fraction=F. With FLIP_S: at
 *                 FLIP_S simulated seconds it replaces the file
 *                 GPUPOOL_CUDA_CONTENTION_FILE names (rename) with
 *                 "STATE <now + 60 s>", as the agent does, and also prints
 *                 busy_before=F (start to flip), busy_after=F (flip +
 *                 SETTLE_S to the end), first_wait_s=W and last_wait_s=L:
 *                 when, after the flip, the first launch that waited for
 *                 tokens began and the last one ended (-1: none waited). A
 *                 launch waited when it took longer than the fake's kernel
 *                 time (FAKE_CUDA_KERNEL_US, default 1000).
 *   dlnext        dlsym(RTLD_NEXT, "dlsym") == dlsym(RTLD_DEFAULT, "dlsym"),
 *                 as without an interposer: rtld_next_ok=0|1.
 *
 * Exit 0 on success, 2 on a usage or setup error (message on stderr).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/cuda_cap/cuda_abi.h"

enum { MAX_CHUNKS = 256, CUDA_VERSION_ASKED = 12080, GIB = 1 << 30 };

static void* g_cuda;
static __typeof__(&cuGetProcAddress_v2) g_proc;

static void die(const char* what) {
  fprintf(stderr, "cap_probe: %s\n", what);
  exit(2);
}

static void* by_dlsym(const char* name) {
  void* fn = dlsym(g_cuda, name);
  if (fn == NULL) die(name);
  return fn;
}

static void* by_proc(const char* base, cuuint64_t flags) {
  void* fn = NULL;
  CUdriverProcAddressQueryResult status = -1;
  if (g_proc(base, &fn, CUDA_VERSION_ASKED, flags, &status) != CUDA_SUCCESS || fn == NULL ||
      status != CU_GET_PROC_ADDRESS_SUCCESS)
    die(base);
  return fn;
}

/* libcuda, initialised, with a context current. */
static void setup(void) {
  g_cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (g_cuda == NULL) die(dlerror());
  g_proc = (__typeof__(&cuGetProcAddress_v2))by_dlsym("cuGetProcAddress_v2");
  __typeof__(&cuInit) init = by_dlsym("cuInit");
  __typeof__(&cuDeviceGet) device_get = by_proc("cuDeviceGet", 0);
  __typeof__(&cuCtxCreate_v2) ctx_create = by_proc("cuCtxCreate", 0);
  CUdevice dev = -1;
  CUcontext ctx = NULL;
  if (init(0) != CUDA_SUCCESS || device_get(&dev, 0) != CUDA_SUCCESS || ctx_create(&ctx, 0, dev) != CUDA_SUCCESS)
    die("cuInit/cuDeviceGet/cuCtxCreate failed");
}

static void print_meminfo(const char* free_key) {
  __typeof__(&cuMemGetInfo_v2) info = by_proc("cuMemGetInfo", 0);
  size_t free_bytes = 0, total = 0;
  if (info(&free_bytes, &total) != CUDA_SUCCESS) die("cuMemGetInfo failed");
  if (strcmp(free_key, "free_mib") == 0)
    printf("free_mib=%zu total_mib=%zu\n", free_bytes >> 20, total >> 20);
  else
    printf("%s=%zu\n", free_key, free_bytes >> 20);
}

/* Allocates 1 GiB chunks alternating the two paths until refused or max. */
static int fill(CUdeviceptr* chunks, int max, int* direct, int* proc, CUresult* refused) {
  __typeof__(&cuMemAlloc_v2) alloc_direct = by_dlsym("cuMemAlloc_v2");
  __typeof__(&cuMemAlloc_v2) alloc_proc = by_proc("cuMemAlloc", 0);
  int n = 0;
  *direct = *proc = 0;
  *refused = CUDA_SUCCESS;
  while (n < max) {
    __typeof__(&cuMemAlloc_v2) alloc = n % 2 == 0 ? alloc_direct : alloc_proc;
    *refused = alloc(&chunks[n], GIB);
    if (*refused != CUDA_SUCCESS) break;
    ++*(n % 2 == 0 ? direct : proc);
    ++n;
  }
  return n;
}

static int free_all(CUdeviceptr* chunks, int n) {
  __typeof__(&cuMemFree_v2) free_direct = by_dlsym("cuMemFree_v2");
  __typeof__(&cuMemFree_v2) free_proc = by_proc("cuMemFree", 0);
  int freed = 0;
  for (int i = 0; i < n; ++i) freed += (i % 2 == 0 ? free_direct : free_proc)(chunks[i]) == CUDA_SUCCESS;
  return freed;
}

static int mode_alloc(int hold) {
  static CUdeviceptr chunks[MAX_CHUNKS];
  int direct = 0, proc = 0;
  CUresult refused = CUDA_SUCCESS;
  int n = fill(chunks, hold > 0 && hold < MAX_CHUNKS ? hold : MAX_CHUNKS, &direct, &proc, &refused);
  printf("allocated=%d direct=%d proc=%d refused=%d\n", n, direct, proc, refused);
  print_meminfo("free_mib");
  if (hold > 0) {
    printf("holding=1\n");
    fflush(stdout);
    char buffer[64];
    while (read(0, buffer, sizeof buffer) > 0) {
    }
    return 0;
  }
  printf("freed=%d\n", free_all(chunks, n));
  print_meminfo("free_after_mib");
  int again = fill(chunks, MAX_CHUNKS, &direct, &proc, &refused);
  printf("reallocated=%d\n", again);
  free_all(chunks, again);
  return 0;
}

static int mode_kinds(void) {
  __typeof__(&cuMemAllocManaged) managed = by_proc("cuMemAllocManaged", 0);
  __typeof__(&cuMemAllocPitch_v2) pitch_alloc = by_dlsym("cuMemAllocPitch_v2");
  __typeof__(&cuArrayCreate_v2) array_create = by_proc("cuArrayCreate", 0);
  __typeof__(&cuArray3DCreate_v2) array3d_create = by_dlsym("cuArray3DCreate_v2");
  __typeof__(&cuMemAllocAsync) async_alloc = by_proc("cuMemAllocAsync", 0);
  __typeof__(&cuMemAllocAsync) async_ptsz = by_proc("cuMemAllocAsync", CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  __typeof__(&cuArrayDestroy) array_destroy = by_dlsym("cuArrayDestroy");
  CUdeviceptr d[4];
  size_t pitch = 0;
  CUarray array = NULL, array3d = NULL;
  const CUDA_ARRAY_DESCRIPTOR desc = {.Width = 16384, .Height = 16384, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
  const CUDA_ARRAY3D_DESCRIPTOR desc3d = {
      .Width = 1024, .Height = 1024, .Depth = 256, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 4};
  printf("alloc=%d\n", ((__typeof__(&cuMemAlloc_v2))by_dlsym("cuMemAlloc_v2"))(&d[0], GIB));
  printf("managed=%d\n", managed(&d[1], GIB, 1));
  printf("pitch=%d\n", pitch_alloc(&d[2], &pitch, 1 << 20, 1024, 4));
  printf("array=%d\n", array_create(&array, &desc));
  printf("array3d=%d\n", array3d_create(&array3d, &desc3d));
  printf("async=%d\n", async_alloc(&d[3], GIB, NULL));
  printf("array_destroy=%d\n", array_destroy(array));
  printf("array3d_again=%d\n", array3d_create(&array3d, &desc3d));
  printf("async_ptsz=%d\n", async_ptsz(&d[3], GIB, NULL));
  return 0;
}

/* Writes "STATE UNTIL_MS" to the contention file as the agent does: a
 * temporary beside it, then rename. */
static void write_contention(const char* state) {
  const char* path = getenv("GPUPOOL_CUDA_CONTENTION_FILE");
  if (path == NULL || *path == '\0') die("pace with FLIP_S needs GPUPOOL_CUDA_CONTENTION_FILE");
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  FILE* f = fopen(tmp, "w");
  if (f == NULL) die("cannot write the contention file");
  fprintf(f, "%s %lld\n", state, (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000 + 60000);
  if (fclose(f) != 0 || rename(tmp, path) != 0) die("cannot replace the contention file");
}

struct flip {
  double at_s, settle_s; /* at_s < 0: no flip */
  const char* state;
};

static int mode_pace(double seconds, struct flip flip) {
  __typeof__(&gpupoolFakeCudaNowNs) now = by_dlsym("gpupoolFakeCudaNowNs");
  __typeof__(&gpupoolFakeCudaBusyNs) busy = by_dlsym("gpupoolFakeCudaBusyNs");
  __typeof__(&cuLaunchKernel) launch_direct = by_dlsym("cuLaunchKernel");
  __typeof__(&cuLaunchKernel) launch_proc = by_proc("cuLaunchKernel", CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  CUfunction kernel = (CUfunction)(uintptr_t)0x1000; /* the fake takes any non-null function */
  const char* kernel_us = getenv("FAKE_CUDA_KERNEL_US");
  const uint64_t kernel_ns = (kernel_us && *kernel_us ? strtoull(kernel_us, NULL, 10) : 1000) * 1000;
  const uint64_t start = now(), busy_start = busy(), span = (uint64_t)(seconds * 1e9);
  const uint64_t flip_at = flip.at_s < 0 ? UINT64_MAX : start + (uint64_t)(flip.at_s * 1e9);
  const uint64_t settle_at = flip.at_s < 0 ? UINT64_MAX : flip_at + (uint64_t)(flip.settle_s * 1e9);
  uint64_t busy_flip = 0, busy_settle = 0, first_wait = 0, last_wait = 0;
  int flipped = 0, settled = 0;
  long launches = 0;
  while (now() - start < span && launches < 100000000L) {
    if (!flipped && now() >= flip_at) {
      write_contention(flip.state);
      busy_flip = busy();
      flipped = 1;
    }
    if (!settled && now() >= settle_at) {
      busy_settle = busy();
      settled = 1;
    }
    __typeof__(&cuLaunchKernel) launch = launches % 2 == 0 ? launch_direct : launch_proc;
    const uint64_t before = now();
    if (launch(kernel, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS) die("cuLaunchKernel failed");
    const uint64_t after = now();
    if (flipped && after - before > kernel_ns) {
      if (first_wait == 0) first_wait = before;
      last_wait = after;
    }
    ++launches;
  }
  const uint64_t end = now();
  const double elapsed = (double)(end - start), busy_ns = (double)(busy() - busy_start);
  printf("launches=%ld elapsed_s=%.4f busy_fraction=%.4f\n", launches, elapsed / 1e9, busy_ns / elapsed);
  if (flipped && settled) {
    printf("busy_before=%.4f busy_after=%.4f first_wait_s=%.4f last_wait_s=%.4f\n",
           (double)(busy_flip - busy_start) / (double)(flip_at - start),
           (double)(busy() - busy_settle) / (double)(end - settle_at),
           first_wait ? (double)(first_wait - flip_at) / 1e9 : -1.0,
           last_wait ? (double)(last_wait - flip_at) / 1e9 : -1.0);
  }
  return 0;
}

static int mode_dlnext(void) {
  printf("rtld_next_ok=%d\n", dlsym(RTLD_NEXT, "dlsym") == dlsym(RTLD_DEFAULT, "dlsym"));
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) die("usage: cap_probe alloc [HOLD] | kinds | pace SECONDS [FLIP_S STATE SETTLE_S] | dlnext");
  if (strcmp(argv[1], "dlnext") == 0) return mode_dlnext();
  setup();
  if (strcmp(argv[1], "alloc") == 0) return mode_alloc(argc > 2 ? atoi(argv[2]) : 0);
  if (strcmp(argv[1], "kinds") == 0) return mode_kinds();
  if (strcmp(argv[1], "pace") == 0 && argc == 3) return mode_pace(atof(argv[2]), (struct flip){-1, 0, NULL});
  if (strcmp(argv[1], "pace") == 0 && argc == 6)
    return mode_pace(atof(argv[2]), (struct flip){atof(argv[3]), atof(argv[5]), argv[4]});
  die("unknown mode");
  return 2;
}
