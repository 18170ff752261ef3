/* Initialisation and libcuda's real entry points. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "tools/cuda_cap/cuda_cap.h"

static const char* const k_real_names[CAP_REAL_COUNT] = {
#define CAP_REAL_NAME(name) #name,
    CAP_REAL_LIST(CAP_REAL_NAME)
#undef CAP_REAL_NAME
};

static _Atomic(void*) g_real[CAP_REAL_COUNT];
static _Atomic(cap_dlsym_fn) g_dlsym;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
/* Set once init_once has finished: the usual call's whole cost of cap_init
 * (an acquire load; the thread-local below costs a __tls_get_addr call). */
static _Atomic int g_done;
/* Set while this thread initialises: libcuda's constructors, run by our
 * dlopen, may look symbols up through our dlsym, which must then not wait
 * for the initialisation it is part of. */
static __thread int t_initialising;

cap_dlsym_fn cap_real_dlsym(void) {
  /* Which versions exist: GLIBC_2.34 (dlsym moved into libc) and the
   * architecture's first one (2.2.5 on x86-64, 2.17 on arm64). */
  static const char* const k_versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
  cap_dlsym_fn fn = atomic_load_explicit(&g_dlsym, memory_order_acquire);
  for (size_t i = 0; fn == NULL && i < sizeof k_versions / sizeof k_versions[0]; ++i)
    fn = (cap_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", k_versions[i]);
  if (fn == NULL) {
    fputs("gpupool-cuda-cap: glibc's dlsym was not found (dlvsym); cannot go on\n", stderr);
    abort();
  }
  atomic_store_explicit(&g_dlsym, fn, memory_order_release);
  return fn;
}

/* libcuda as the application loaded it; else loaded now (a program linked
 * against libcuda has it loaded already; one that never loads it never
 * calls us). */
static void* open_libcuda(void) {
  void* handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (handle == NULL) handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  return handle;
}

static void resolve_all(void* cuda) {
  if (cuda == NULL) return;
  cap_dlsym_fn real_dlsym = cap_real_dlsym();
  for (int i = 0; i < CAP_REAL_COUNT; ++i) {
    void* fn = real_dlsym(cuda, k_real_names[i]);
    if (fn != NULL && !cap_is_ours(fn)) atomic_store(&g_real[i], fn);
  }
}

static void init_once(void) {
  static struct cap_config config; /* static: the path is 4 KiB */
  t_initialising = 1;
  cap_config_read(&config);
  resolve_all(open_libcuda());
  cap_mem_init(&config);
  cap_pacer_init(config.share, cap_mem_bucket(), config.contention_path);
  t_initialising = 0;
  atomic_store_explicit(&g_done, 1, memory_order_release);
}

void cap_init(void) {
  if (atomic_load_explicit(&g_done, memory_order_acquire)) return;
  if (!t_initialising) pthread_once(&g_once, init_once);
}

int cap_initialising(void) { return t_initialising; }

void* cap_real(enum cap_real_id id) { return atomic_load_explicit(&g_real[id], memory_order_acquire); }

void cap_real_offer(enum cap_real_id id, void* fn) {
  void* expected = NULL;
  if (fn != NULL && !cap_is_ours(fn)) atomic_compare_exchange_strong(&g_real[id], &expected, fn);
}

int cap_is_ours(const void* fn) {
  Dl_info theirs, ours;
  if (dladdr(fn, &theirs) == 0 || dladdr((const void*)&cap_is_ours, &ours) == 0) return 0;
  return theirs.dli_fbase == ours.dli_fbase;
}
