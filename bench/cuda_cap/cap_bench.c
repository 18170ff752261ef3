/* The CUDA cap's own cost per call (issue 15's benchmark, `make bench`):
 * what libgpupool-cuda-cap.so adds to cuMemAlloc, cuMemFree and
 * cuLaunchKernel, against the fake libcuda (tests/fake_cuda).
 *
 * The program runs itself twice as a child, like the CUDA runtime uses the
 * driver (dlopen of libcuda.so.1 found on LD_LIBRARY_PATH, entry points by
 * dlsym on that handle and through cuGetProcAddress_v2): once plain, once
 * with the cap preloaded and configured as the agent configures a
 * time-sliced share (a memory limit that is never reached, a task-wide
 * state file, a 0.25 compute share and a contention file that says
 * "uncontended", so that every launch is timed and charged but none
 * sleeps). Each child times ROUNDS rounds of BATCH allocations then BATCH
 * frees, and of LAUNCHES launches, per lookup path, and reports the best
 * of REPEATS runs in nanoseconds per call; the parent prints the
 * difference beside the goal (under 1 microsecond added per call).
 *
 * Usage: gpupool_cuda_cap_bench [--cap LIB] [--fake-cuda DIR] [--launches N]
 * (defaults: the build tree's). Exit 0 when it measured, 2 on a setup
 * error; the goal is reported, not enforced.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/cuda_cap/cuda_abi.h"

enum { BATCH = 64, ROUNDS = 4000, REPEATS = 5, CUDA_VERSION_ASKED = 12080, GOAL_NS = 1000 };

static void die(const char* what) {
  fprintf(stderr, "gpupool_cuda_cap_bench: %s\n", what);
  exit(2);
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* ---- the child: times the calls ---- */

struct entry_points {
  __typeof__(&cuMemAlloc_v2) alloc;
  __typeof__(&cuMemFree_v2) free;
  __typeof__(&cuLaunchKernel) launch;
};

static void* by_dlsym(void* cuda, const char* name) {
  void* fn = dlsym(cuda, name);
  if (fn == NULL) die(name);
  return fn;
}

static void* by_proc(__typeof__(&cuGetProcAddress_v2) proc, const char* base) {
  void* fn = NULL;
  CUdriverProcAddressQueryResult status = -1;
  if (proc(base, &fn, CUDA_VERSION_ASKED, 0, &status) != CUDA_SUCCESS || fn == NULL) die(base);
  return fn;
}

/* Best of REPEATS: ns per allocation and per free. */
static void time_memory(const struct entry_points* e, double* alloc_ns, double* free_ns) {
  static CUdeviceptr ptr[BATCH];
  *alloc_ns = *free_ns = 1e30;
  for (int r = 0; r < REPEATS; ++r) {
    double in_alloc = 0, in_free = 0;
    for (int round = 0; round < ROUNDS; ++round) {
      double t0 = now_ns();
      for (int i = 0; i < BATCH; ++i)
        if (e->alloc(&ptr[i], 1 << 20) != CUDA_SUCCESS) die("cuMemAlloc failed");
      double t1 = now_ns();
      for (int i = 0; i < BATCH; ++i)
        if (e->free(ptr[i]) != CUDA_SUCCESS) die("cuMemFree failed");
      double t2 = now_ns();
      in_alloc += t1 - t0;
      in_free += t2 - t1;
    }
    const double calls = (double)ROUNDS * BATCH;
    if (in_alloc / calls < *alloc_ns) *alloc_ns = in_alloc / calls;
    if (in_free / calls < *free_ns) *free_ns = in_free / calls;
  }
}

static double time_launch(const struct entry_points* e, long launches) {
  CUfunction kernel = (CUfunction)(uintptr_t)0x1000; /* the fake takes any non-null function */
  double best = 1e30;
  for (int r = 0; r < REPEATS; ++r) {
    double t0 = now_ns();
    for (long i = 0; i < launches; ++i)
      if (e->launch(kernel, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS) die("cuLaunchKernel failed");
    double per = (now_ns() - t0) / (double)launches;
    if (per < best) best = per;
  }
  return best;
}

static int child(long launches) {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (cuda == NULL) die(dlerror());
  __typeof__(&cuGetProcAddress_v2) proc = by_dlsym(cuda, "cuGetProcAddress_v2");
  __typeof__(&cuInit) init = by_dlsym(cuda, "cuInit");
  __typeof__(&cuCtxCreate_v2) ctx_create = by_proc(proc, "cuCtxCreate");
  CUcontext ctx = NULL;
  if (init(0) != CUDA_SUCCESS || ctx_create(&ctx, 0, 0) != CUDA_SUCCESS) die("cuInit/cuCtxCreate failed");
  const struct entry_points direct = {by_dlsym(cuda, "cuMemAlloc_v2"), by_dlsym(cuda, "cuMemFree_v2"),
                                      by_dlsym(cuda, "cuLaunchKernel")};
  const struct entry_points looked_up = {by_proc(proc, "cuMemAlloc"), by_proc(proc, "cuMemFree"),
                                         by_proc(proc, "cuLaunchKernel")};
  double alloc_d, free_d, alloc_p, free_p;
  time_memory(&direct, &alloc_d, &free_d);
  time_memory(&looked_up, &alloc_p, &free_p);
  const double launch_d = time_launch(&direct, launches), launch_p = time_launch(&looked_up, launches);
  printf("%.1f %.1f %.1f %.1f %.1f %.1f\n", alloc_d, alloc_p, free_d, free_p, launch_d, launch_p);
  return 0;
}

/* ---- the parent: runs both children and compares ---- */

/* Runs this program as a child with env; reads its six figures. */
static void run_child(const char* self, char* const* env, long launches, double out[6]) {
  int pipefd[2];
  if (pipe(pipefd) != 0) die("pipe");
  char count[32];
  snprintf(count, sizeof count, "%ld", launches);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipefd[1], 1);
    close(pipefd[0]);
    close(pipefd[1]);
    char* argv[] = {(char*)self, "--child", count, NULL};
    execve(self, argv, env);
    _exit(127);
  }
  close(pipefd[1]);
  char text[512] = {0};
  size_t used = 0;
  for (ssize_t n; used < sizeof text - 1 && (n = read(pipefd[0], text + used, sizeof text - 1 - used)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    used += (size_t)n;
  }
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
      sscanf(text, "%lf %lf %lf %lf %lf %lf", &out[0], &out[1], &out[2], &out[3], &out[4], &out[5]) != 6)
    die("a measuring child failed");
}

static void line(const char* what, double plain, double capped) {
  const double added = capped - plain;
  printf("added per %-44s %7.0f ns (goal < %d ns: %s)   [%.0f ns plain, %.0f ns capped]\n", what, added, GOAL_NS,
         added < GOAL_NS ? "met" : "NOT MET", plain, capped);
}

int main(int argc, char** argv) {
  const char* cap = GPUPOOL_CUDA_CAP_LIBRARY;
  const char* fake = GPUPOOL_FAKE_CUDA_DIR;
  long launches = 1000000;
  if (argc == 3 && strcmp(argv[1], "--child") == 0) return child(atol(argv[2]));
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--cap") == 0) cap = argv[i + 1];
    else if (strcmp(argv[i], "--fake-cuda") == 0) fake = argv[i + 1];
    else if (strcmp(argv[i], "--launches") == 0) launches = atol(argv[i + 1]);
    else die("usage: gpupool_cuda_cap_bench [--cap LIB] [--fake-cuda DIR] [--launches N]");
  }
  if (launches < 1000) die("--launches: at least 1000");
  char dir[] = "/tmp/gpupool-cap-bench-XXXXXX";
  if (mkdtemp(dir) == NULL) die("mkdtemp");
  char state[128], contention[128], state_env[160], contention_env[160], library_path[4200], preload[4200];
  snprintf(state, sizeof state, "%s/state", dir);
  snprintf(contention, sizeof contention, "%s/contention", dir);
  struct timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  FILE* f = fopen(contention, "w");
  if (f == NULL) die("cannot write the contention file");
  fprintf(f, "uncontended %lld\n", (long long)wall.tv_sec * 1000 + wall.tv_nsec / 1000000 + 300000);
  fclose(f);
  snprintf(state_env, sizeof state_env, "GPUPOOL_CUDA_CAP_STATE=%s", state);
  snprintf(contention_env, sizeof contention_env, "GPUPOOL_CUDA_CONTENTION_FILE=%s", contention);
  snprintf(library_path, sizeof library_path, "LD_LIBRARY_PATH=%s", fake);
  snprintf(preload, sizeof preload, "LD_PRELOAD=%s", cap);
  char* plain_env[] = {"PATH=/usr/bin:/bin", library_path, NULL};
  char* capped_env[] = {"PATH=/usr/bin:/bin", library_path, preload, "GPUPOOL_CUDA_MEMORY_LIMIT_MIB=81920",
                        "GPUPOOL_CUDA_COMPUTE_SHARE=0.25", state_env, contention_env, NULL};
  double plain[6], capped[6];
  run_child(argv[0], plain_env, launches, plain);
  run_child(argv[0], capped_env, launches, capped);
  unlink(state);
  unlink(contention);
  rmdir(dir);
  printf("interposer overhead against the fake libcuda (best of %d runs; %d x %d allocations of 1 MiB, %ld launches)\n",
         REPEATS, ROUNDS, BATCH, launches);
  line("cuMemAlloc (dlsym):", plain[0], capped[0]);
  line("cuMemAlloc (cuGetProcAddress):", plain[1], capped[1]);
  line("cuMemFree (dlsym):", plain[2], capped[2]);
  line("cuMemFree (cuGetProcAddress):", plain[3], capped[3]);
  line("cuLaunchKernel, paced uncontended (dlsym):", plain[4], capped[4]);
  line("cuLaunchKernel, paced uncontended (cuGetProcAddress):", plain[5], capped[5]);
  return 0;
}
