/* Kernel-launch pacing: a work-conserving token bucket on device time (see
 * cuda_cap.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "tools/cuda_cap/cuda_cap.h"

/* Two events around one launch. ctx: the context they were created in. */
struct timing {
  CUcontext ctx;
  CUevent start, end;
};

static struct {
  pthread_mutex_t mu; /* held from cap_pace_begin to cap_pace_end */
  int on;
  double share;
  int64_t burst_ns, max_debt_ns;
  struct cap_bucket* bucket;
  uint64_t (*now)(void);
  void (*sleep)(uint64_t ns);
  struct timing ring[CAP_RING];
  int head, pending; /* pending: recorded launches not yet charged, from head */
  /* The contention signal (mu held): contended until the file says not. */
  char contention_path[sizeof ((struct cap_config*)0)->contention_path];
  int contended;
  uint64_t next_poll_ns; /* on g.now's clock; 0: read at the next launch */
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .contended = 1};

/* ---- time ---- */

static uint64_t monotonic_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void monotonic_sleep(uint64_t ns) {
  struct timespec left = {.tv_sec = (time_t)(ns / 1000000000ull), .tv_nsec = (long)(ns % 1000000000ull)};
  for (int i = 0; i < 100 && nanosleep(&left, &left) != 0 && errno == EINTR; ++i) {
  }
}

/* ---- the contention signal ---- */

/* Rereads the agent's file when CAP_CONTENTION_POLL_MS have passed. */
static void poll_contention(uint64_t now) {
  if (g.contention_path[0] == '\0' || now < g.next_poll_ns) return;
  g.next_poll_ns = now + (uint64_t)CAP_CONTENTION_POLL_MS * 1000000ull;
  g.contended = cap_contention_read(g.contention_path);
}

/* ---- the bucket (atomics: it may be shared by the task's processes) ---- */

/* Contended, a launch may leave up to max_debt owing; uncontended nothing is
 * owed, so that contention, when it comes, starts from an even bucket. */
static int64_t floor_ns(void) { return g.contended ? -g.max_debt_ns : 0; }

static void clamp_tokens(int64_t low, int64_t high) {
  int64_t t = atomic_load(&g.bucket->tokens_ns);
  while ((t > high || t < low) &&
         !atomic_compare_exchange_weak(&g.bucket->tokens_ns, &t, t > high ? high : low)) {
  }
}

/* Adds share x the time since the last refill; whoever moves refill_ns
 * forward adds that interval, so concurrent refills never add it twice. */
static void refill(void) {
  uint64_t now = g.now(), last = atomic_load(&g.bucket->refill_ns);
  if (now <= last || !atomic_compare_exchange_strong(&g.bucket->refill_ns, &last, now)) return;
  if (last == 0)
    atomic_store(&g.bucket->tokens_ns, g.burst_ns); /* first use: a full bucket */
  else
    atomic_fetch_add(&g.bucket->tokens_ns, (int64_t)(g.share * (double)(now - last)));
  clamp_tokens(floor_ns(), g.burst_ns);
}

static void charge(int64_t device_ns) {
  atomic_fetch_sub(&g.bucket->tokens_ns, device_ns);
  clamp_tokens(floor_ns(), g.burst_ns);
}

/* ---- timing events ---- */

/* Our event calls must not invalidate another thread's global-mode stream
 * capture: they run in relaxed capture mode, like PyTorch's allocator. */
static CUstreamCaptureMode relax(void) {
  CUstreamCaptureMode mode = GPUPOOL_CU_STREAM_CAPTURE_MODE_RELAXED;
  if (REAL(cuThreadExchangeStreamCaptureMode)) REAL(cuThreadExchangeStreamCaptureMode)(&mode);
  return mode;
}

static void unrelax(CUstreamCaptureMode mode) {
  if (REAL(cuThreadExchangeStreamCaptureMode)) REAL(cuThreadExchangeStreamCaptureMode)(&mode);
}

/* Charges the oldest pending launches that have finished; with wait, waits
 * for the oldest first (the ring is full). */
static void collect(int wait) {
  if (g.pending == 0) return;
  CUstreamCaptureMode mode = relax();
  while (g.pending > 0) {
    struct timing* t = &g.ring[g.head];
    CUresult r = wait ? REAL(cuEventSynchronize)(t->end) : REAL(cuEventQuery)(t->end);
    if (r == CUDA_ERROR_NOT_READY) break;
    float ms = 0;
    if (r == CUDA_SUCCESS && REAL(cuEventElapsedTime)(&ms, t->start, t->end) == CUDA_SUCCESS && ms > 0)
      charge((int64_t)((double)ms * 1e6));
    if (r != CUDA_SUCCESS) t->ctx = NULL; /* its context is gone: new events next time */
    g.head = (g.head + 1) % CAP_RING;
    --g.pending;
    wait = 0;
  }
  unrelax(mode);
}

/* Waits until the bucket is not negative, or the GPU is no longer
 * contended. Bounded: the debt is at most max_debt, so the refill takes at
 * most max_debt / share; the deadline stops a clock that does not advance
 * from hanging the launch. */
static void wait_for_tokens(void) {
  const uint64_t deadline = g.now() + (uint64_t)((double)(g.max_debt_ns + g.burst_ns) / g.share) + 1000000000ull;
  for (int i = 0; i < 1000000; ++i) {
    refill();
    int64_t t = atomic_load(&g.bucket->tokens_ns);
    const uint64_t now = g.now();
    if (t >= 0 || now >= deadline) return;
    poll_contention(now);
    if (!g.contended) return;
    uint64_t ns = (uint64_t)((double)-t / g.share) + 1000;
    g.sleep(ns < CAP_SLEEP_STEP_MS * 1000000ull ? ns : CAP_SLEEP_STEP_MS * 1000000ull);
    collect(0);
  }
}

/* Events for ring slot i in the current context; 0 when there are none. */
static int ensure_events(struct timing* t) {
  CUcontext ctx = NULL;
  if (REAL(cuCtxGetCurrent)(&ctx) != CUDA_SUCCESS || ctx == NULL) return 0;
  if (t->ctx == ctx) return 1;
  if (t->ctx != NULL) {
    REAL(cuEventDestroy_v2)(t->start);
    REAL(cuEventDestroy_v2)(t->end);
  }
  t->ctx = NULL;
  if (REAL(cuEventCreate)(&t->start, 0) != CUDA_SUCCESS) return 0;
  if (REAL(cuEventCreate)(&t->end, 0) != CUDA_SUCCESS) {
    REAL(cuEventDestroy_v2)(t->start);
    return 0;
  }
  t->ctx = ctx;
  return 1;
}

static int capturing(CUstream stream) {
  CUstreamCaptureStatus status = GPUPOOL_CU_STREAM_CAPTURE_STATUS_NONE;
  if (REAL(cuStreamIsCapturing) == NULL) return 0;
  return REAL(cuStreamIsCapturing)(stream, &status) != CUDA_SUCCESS ||
         status != GPUPOOL_CU_STREAM_CAPTURE_STATUS_NONE;
}

/* ---- interface ---- */

void cap_pacer_init(double share, struct cap_bucket* bucket, const char* contention_path) {
  if (share >= 1) return;
  if (!REAL(cuCtxGetCurrent) || !REAL(cuEventCreate) || !REAL(cuEventRecord) || !REAL(cuEventQuery) ||
      !REAL(cuEventSynchronize) || !REAL(cuEventElapsedTime) || !REAL(cuEventDestroy_v2)) {
    cap_report("libcuda lacks the event functions that time kernels; launches are not paced");
    return;
  }
  g.share = share;
  g.burst_ns = (int64_t)(share * CAP_BURST_MS * 1e6);
  g.max_debt_ns = (int64_t)CAP_MAX_DEBT_MS * 1000000;
  g.bucket = bucket;
  int fake = REAL(gpupoolFakeCudaNowNs) && REAL(gpupoolFakeCudaSleepNs);
  g.now = fake ? REAL(gpupoolFakeCudaNowNs) : monotonic_now;
  g.sleep = fake ? REAL(gpupoolFakeCudaSleepNs) : monotonic_sleep;
  if (contention_path != NULL && strlen(contention_path) < sizeof g.contention_path)
    strcpy(g.contention_path, contention_path);
  g.on = 1;
}

int cap_pacer_on(void) { return g.on; }

void cap_pace_begin(struct cap_mark* mark, CUstream stream, int ptsz) {
  mark->slot = -1;
  mark->stream = ptsz && stream == NULL ? GPUPOOL_CU_STREAM_PER_THREAD : stream;
  pthread_mutex_lock(&g.mu);
  if (capturing(mark->stream)) return; /* recorded into a graph, not run now */
  collect(g.pending == CAP_RING);
  poll_contention(g.now());
  if (g.contended)
    wait_for_tokens();
  else
    refill(); /* measured, never waits */
  int slot = (g.head + g.pending) % CAP_RING;
  if (!ensure_events(&g.ring[slot])) return;
  if (REAL(cuEventRecord)(g.ring[slot].start, mark->stream) == CUDA_SUCCESS)
    mark->slot = slot;
  else
    g.ring[slot].ctx = NULL; /* stale events (a destroyed context at the same address): new ones next time */
}

void cap_pace_end(struct cap_mark* mark, CUresult launch_result) {
  if (mark->slot >= 0 && launch_result == CUDA_SUCCESS &&
      REAL(cuEventRecord)(g.ring[mark->slot].end, mark->stream) == CUDA_SUCCESS) {
    ++g.pending;
    collect(0);
  }
  pthread_mutex_unlock(&g.mu);
}
