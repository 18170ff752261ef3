/* libgpupool-cuda-cap.so: caps a time-sliced or MPS task's GPU memory and
 * compute at its share (issue 15, "Capped time-sliced shares").
 *
 * The agent preloads it (LD_PRELOAD) into every process of such a task. It is
 * C11 with no dependency beyond libc (it lands in arbitrary processes, most
 * of which never touch CUDA: nothing happens until the first CUDA call), and
 * exports only the entry points it interposes; everything else is hidden.
 *
 * Configuration (read once, at the process's first CUDA call):
 *
 *   GPUPOOL_CUDA_MEMORY_LIMIT_MIB  the share's GPU memory in MiB, a whole
 *       number. 0 or absent: no memory cap.
 *   GPUPOOL_CUDA_COMPUTE_SHARE     the share's compute, a decimal in (0,1].
 *       Absent or 1: no pacing.
 *   GPUPOOL_CUDA_CAP_STATE         a file that all processes of one task map
 *       MAP_SHARED (created if missing, 0600): the memory accounting and the
 *       token bucket are then the task's, not each process's. Absent: each
 *       process is accounted alone.
 *   GPUPOOL_CUDA_CONTENTION_FILE   the agent's contention signal for the
 *       task's GPU (below). Absent: always contended (the share is always
 *       enforced).
 *
 * A malformed value is reported once on stderr, naming the variable, and
 * that cap is then off (an unusable state file: accounting per process): a
 * typo never breaks the task.
 *
 * Memory. cuMemAlloc_v2, cuMemAllocManaged, cuMemAllocPitch_v2,
 * cuMemAllocAsync(_ptsz), cuMemAllocFromPoolAsync(_ptsz), cuMemCreate,
 * cuArrayCreate_v2 and cuArray3DCreate_v2 (size from the descriptor: width x
 * height x depth x texel bytes, 16 bytes a texel for formats not known here)
 * first reserve their size against the limit and return
 * CUDA_ERROR_OUT_OF_MEMORY when it does not fit; the reservation is undone
 * when the real call fails. cuMemFree_v2, cuMemFreeAsync(_ptsz),
 * cuArrayDestroy and cuMemRelease give back what the allocation reserved,
 * found in a per-process table (pointer -> size, at most CAP_TABLE_MAX live
 * allocations; past that, allocations are refused, said once on stderr).
 * cuMemGetInfo_v2 reports total = the limit (or the device's, if smaller)
 * and free = limit - used, never more than the device's real free memory.
 * Task-wide accounting keeps one slot per process (pid, start time, bytes;
 * at most CAP_SLOTS processes) under flock(2): a process that dies without
 * freeing is pruned when its pid is gone (or reused), so its memory comes
 * back (a zombie counts as gone: its memory went with its file descriptors).
 * The cap counts what the application asked for: allocation
 * granularity, stream-ordered pools' cached memory and context overhead are
 * not counted, and memory freed implicitly by cuCtxDestroy stays accounted
 * until the process ends.
 *
 * Compute: a work-conserving token bucket on device time. cuLaunchKernel(_ptsz),
 * cuLaunchKernelEx(_ptsz), cuLaunchCooperativeKernel(_ptsz) and
 * cuGraphLaunch(_ptsz) are timed with a pair of events recorded around the
 * launch on its stream (the kernel's device time; CAP_RING launches may be in
 * flight uncharged, then the host waits for the oldest). Tokens (nanoseconds
 * of device time) accrue at share x elapsed time up to a burst of
 * CAP_BURST_MS x share; each completed launch is charged its device time
 * (the debt is bounded by CAP_MAX_DEBT_MS); a launch that finds the bucket
 * negative first sleeps until it has refilled to zero. Launches into a
 * capturing stream are neither timed nor paced (they do not run).
 *
 * Work conservation: the share is enforced only while the GPU is contended.
 * The agent writes, per GPU, one line "contended UNIX_MS" or "uncontended
 * UNIX_MS" (the wall-clock millisecond until which it holds) to the file
 * GPUPOOL_CUDA_CONTENTION_FILE names, replacing it with rename(2). The
 * pacer reads it at most every CAP_CONTENTION_POLL_MS of its clock, at a
 * launch or while a launch waits for tokens (open, one read of at most
 * CAP_CONTENTION_MAX_BYTES, close: a few microseconds per poll, nothing on
 * other launches). Only a well-formed "uncontended" line whose time has not
 * passed and is at most CAP_CONTENTION_MAX_VALID_MS ahead means
 * uncontended; a missing, unreadable, malformed, oversized or stale file
 * means contended, the safe default. Uncontended, launches are still timed
 * and charged (the bucket keeps measuring) but never wait, and the bucket's
 * floor is 0 instead of -CAP_MAX_DEBT_MS: no debt is run up that would
 * stall the task once contention starts. Contended, it paces as above;
 * a launch waiting for tokens stops waiting when the signal turns
 * uncontended.
 *
 * Reaction: the cap follows the file within CAP_CONTENTION_POLL_MS (100 ms)
 * plus, when contention ends, one sleep step (CAP_SLEEP_STEP_MS); when it
 * starts, the launches still in flight (at most CAP_RING) are charged as
 * they finish. The agent's own delay (its sampling interval) comes on top
 * (docs/agent.md).
 *
 * Accuracy: over a contended window of T seconds of back-to-back launches
 * (from when the pacer saw the signal) the busy fraction is share + e with
 * 0 <= e <= (burst + longest kernel) / T: at most a full bucket at the start
 * (also after a switch from uncontended: the floor kept it in [0, burst])
 * and one kernel's overdraft at the end. With share 0.25, 1 ms kernels and
 * T = 10 s: at most 0.0026 above 0.25. Launches in flight when contention
 * starts are charged when they finish, which only errs low. Uncontended,
 * the task gets what it asks for (1.0 for back-to-back launches). Oversleeping
 * does not bias it (tokens accrue while asleep, below the burst). Device
 * time measured by events includes other tenants' time slices while a kernel
 * waits for the GPU, and overlapping kernels on several streams are each
 * charged in full, so under contention the cap errs low (conservative).
 *
 * Time: CLOCK_MONOTONIC and nanosleep, except when libcuda exports
 * gpupoolFakeCudaNowNs and gpupoolFakeCudaSleepNs (only the test fake does):
 * then its simulated clock, so that pacing is tested on simulated time.
 *
 * Lookup: CUDA 12 runtimes resolve driver entry points through
 * cuGetProcAddress (base names, e.g. "cuMemAlloc", versioned by the CUDA
 * version asked for, _ptsz variants by flag), so that answers our entry
 * point for every interposed name (when the ABI asked for is the one we
 * implement), as does dlsym(handle of libcuda, name). Real entry points are
 * resolved from libcuda.so.1 with the real dlsym.
 *
 * Internal interfaces between the library's files follow.
 */
#ifndef GPUPOOL_TOOLS_CUDA_CAP_CUDA_CAP_H
#define GPUPOOL_TOOLS_CUDA_CAP_CUDA_CAP_H

#include <stdint.h>

#include "tools/cuda_cap/cuda_abi.h"

#define CAP_EXPORT __attribute__((visibility("default")))

enum {
  CAP_SLOTS = 256,           /* processes of one task in the state file */
  CAP_TABLE_SLOTS = 65536,   /* per-process allocation table (open addressing) */
  CAP_TABLE_MAX = 49152,     /* live allocations at most (75% load) */
  CAP_RING = 64,             /* launches in flight not yet charged */
  CAP_BURST_MS = 100,        /* bucket size: CAP_BURST_MS x share of device time */
  CAP_MAX_DEBT_MS = 1000,    /* a launch is charged at most this much debt */
  CAP_SLEEP_STEP_MS = 50,    /* waits are slept in steps of at most this */
  CAP_CONTENTION_POLL_MS = 100,        /* the contention file is read at most this often */
  CAP_CONTENTION_MAX_BYTES = 63,       /* a longer contention file is malformed */
  CAP_CONTENTION_MAX_VALID_MS = 600000, /* "uncontended" further ahead is malformed */
};

/* ---- configuration (cap_config.c) ---- */
struct cap_config {
  uint64_t memory_limit; /* bytes; 0: no memory cap */
  double share;          /* (0,1]; 1: no pacing */
  char state_path[4096]; /* "": per-process accounting */
  char contention_path[4096]; /* "": always contended */
};
void cap_config_read(struct cap_config* out);
void cap_report(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- real entry points (cap_real.c) ---- */
#define CAP_REAL_LIST(X)                                                                           \
  X(cuMemAlloc_v2) X(cuMemAllocManaged) X(cuMemAllocPitch_v2) X(cuMemAllocAsync)                   \
  X(cuMemAllocAsync_ptsz) X(cuMemAllocFromPoolAsync) X(cuMemAllocFromPoolAsync_ptsz) X(cuMemCreate) \
  X(cuArrayCreate_v2) X(cuArray3DCreate_v2) X(cuMemFree_v2) X(cuMemFreeAsync) X(cuMemFreeAsync_ptsz) \
  X(cuMemRelease) X(cuArrayDestroy) X(cuMemGetInfo_v2) X(cuLaunchKernel) X(cuLaunchKernel_ptsz)     \
  X(cuLaunchKernelEx) X(cuLaunchKernelEx_ptsz) X(cuLaunchCooperativeKernel)                        \
  X(cuLaunchCooperativeKernel_ptsz) X(cuGraphLaunch) X(cuGraphLaunch_ptsz) X(cuGetProcAddress)      \
  X(cuGetProcAddress_v2) X(cuCtxGetCurrent) X(cuEventCreate) X(cuEventRecord) X(cuEventQuery)       \
  X(cuEventSynchronize) X(cuEventElapsedTime) X(cuEventDestroy_v2) X(cuStreamIsCapturing)           \
  X(cuThreadExchangeStreamCaptureMode) X(gpupoolFakeCudaNowNs) X(gpupoolFakeCudaSleepNs)

enum cap_real_id {
#define CAP_REAL_ENUM(name) CAP_REAL_##name,
  CAP_REAL_LIST(CAP_REAL_ENUM)
#undef CAP_REAL_ENUM
  CAP_REAL_COUNT
};

typedef void* (*cap_dlsym_fn)(void*, const char*);

/* Loads the configuration and resolves libcuda once (thread-safe; a no-op
 * when called again, or from inside the initialisation itself). */
void cap_init(void);
/* 1 while this thread runs cap_init: lookups then go straight through. */
int cap_initialising(void);
/* glibc's dlsym (never NULL: aborts with a message if it cannot be found). */
cap_dlsym_fn cap_real_dlsym(void);
/* libcuda's entry point, NULL when it has none. */
void* cap_real(enum cap_real_id id);
/* A pointer that the real cuGetProcAddress returned for an entry point that
 * dlsym did not find (kept if none is known; our own functions refused). */
void cap_real_offer(enum cap_real_id id, void* fn);
/* 1 when fn lies in this library. */
int cap_is_ours(const void* fn);

/* The real entry point, typed like ours: REAL(cuMemAlloc_v2)(...). */
#define REAL(name) ((__typeof__(&name))cap_real(CAP_REAL_##name))

/* ---- memory accounting (cap_memory.c) ---- */
enum cap_kind { CAP_KIND_DEVPTR = 1, CAP_KIND_ARRAY = 2, CAP_KIND_HANDLE = 3 };
struct cap_bucket {
  _Atomic int64_t tokens_ns;  /* device time that may still be spent */
  _Atomic uint64_t refill_ns; /* when tokens were last added; 0: never */
};
void cap_mem_init(const struct cap_config* config);
int cap_mem_capped(void);
/* Reserves bytes and a table entry: CUDA_ERROR_OUT_OF_MEMORY when either is
 * exhausted. Then exactly one of cap_mem_drop (the allocation failed: bytes
 * and entry given back) or cap_mem_keep (it succeeded: the entry records
 * the bytes finally reserved). */
CUresult cap_mem_reserve(uint64_t bytes);
void cap_mem_drop(uint64_t bytes);
void cap_mem_keep(enum cap_kind kind, uint64_t key, uint64_t bytes);
/* Budget only, for an allocation whose final size differs from the reserve. */
CUresult cap_mem_grow(uint64_t bytes);
void cap_mem_shrink(uint64_t bytes);
/* Before a free: takes the entry into *bytes (0 when unknown: nothing to
 * do); then cap_mem_drop after the real free succeeded, cap_mem_keep (the
 * entry back) when it failed. */
int cap_mem_forget(enum cap_kind kind, uint64_t key, uint64_t* bytes);
uint64_t cap_mem_limit(void);
uint64_t cap_mem_used(void); /* the task's (or process's) reserved bytes */
/* The token bucket: in the state file when there is one. */
struct cap_bucket* cap_mem_bucket(void);

/* ---- the contention signal (cap_contention.c) ---- */
/* 0 when text is a well-formed "uncontended UNIX_MS" line still valid at
 * now_unix_ms (and not more than CAP_CONTENTION_MAX_VALID_MS ahead); 1
 * (contended) otherwise. */
int cap_contention_parse(const char* text, int64_t now_unix_ms);
/* The file at path parsed against the wall clock; 1 when it cannot be read. */
int cap_contention_read(const char* path);

/* ---- pacing (cap_pacer.c) ---- */
struct cap_mark {
  int slot;        /* ring slot timing this launch; -1: not timed */
  CUstream stream; /* the stream the events go on */
};
/* contention_path: the agent's signal ("" or NULL: always contended). */
void cap_pacer_init(double share, struct cap_bucket* bucket, const char* contention_path);
int cap_pacer_on(void);
/* Waits for tokens and records the start event (holds the pacer's lock until
 * cap_pace_end). ptsz: the launch used the per-thread default stream. */
void cap_pace_begin(struct cap_mark* mark, CUstream stream, int ptsz);
void cap_pace_end(struct cap_mark* mark, CUresult launch_result);

#endif
