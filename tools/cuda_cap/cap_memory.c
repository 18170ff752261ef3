/* GPU memory accounting: the task's reserved bytes, one slot per process in
 * a MAP_SHARED state file (or in this process's memory when there is none),
 * and this process's table of allocations (what each free gives back).
 *
 * The usual allocation and free make no system call: the task's total is
 * an atomic in the state file, reserved with compare-and-swap before the
 * process's own slot is credited. flock(2) serialises only what changes
 * the set of slots: claiming one, and pruning dead processes' (which gives
 * their bytes back to the total), done when an allocation would not fit
 * and before cuMemGetInfo reports. A process killed between the two steps
 * leaves its last reservation in the total: the task is over-counted by
 * at most one allocation, never under-counted. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/cuda_cap/cuda_cap.h"

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "the state file's atomics must be address-free");

/* "GPC2": the layout with the total (a file of the first layout is refused). */
enum { STATE_MAGIC = 0x32435047u };

struct slot {
  _Atomic int32_t pid; /* 0: free */
  uint32_t unused;
  _Atomic uint64_t start; /* the process's start time (/proc/PID/stat), 0: unknown */
  _Atomic uint64_t bytes;
};

/* The state file's layout; all zeroes is a valid empty state. */
struct state {
  _Atomic uint32_t magic;
  uint32_t unused;
  struct cap_bucket bucket;
  _Atomic uint64_t total; /* the sum of the slots' bytes, reserved before them */
  struct slot slots[CAP_SLOTS];
};

struct entry {
  uint64_t key;
  uint64_t bytes;
  uint32_t kind; /* 0: empty */
};

static struct {
  pthread_mutex_t mu; /* the table, the slot, the file descriptor */
  uint64_t limit;
  struct state* state;
  int fd;             /* the state file, -1: none */
  char path[4096];
  pid_t pid;  /* whose slot `slot` is; 0: none claimed */
  int slot;
  _Atomic int forked; /* set in a forked child: g.pid is the parent's */
  int live;   /* table entries plus reservations */
  int table_full_reported, slots_full_reported;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .slot = -1};
/* Apart from g, so that they stay in .bss (1.5 MiB, touched only as used). */
static struct state g_local; /* when there is no state file */
static struct entry g_table[CAP_TABLE_SLOTS];

/* ---- the state file ---- */

static int map_state(const char* path) {
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  struct stat st;
  if (fd < 0) return -1;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      (st.st_size < (off_t)sizeof(struct state) && ftruncate(fd, sizeof(struct state)) != 0)) {
    close(fd);
    return -1;
  }
  void* map = mmap(NULL, sizeof(struct state), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    close(fd);
    return -1;
  }
  struct state* state = map;
  uint32_t expected = 0;
  if (!atomic_compare_exchange_strong(&state->magic, &expected, STATE_MAGIC) && expected != STATE_MAGIC) {
    munmap(map, sizeof(struct state));
    close(fd);
    errno = EPROTO;
    return -1;
  }
  g.state = state;
  g.fd = fd;
  return 0;
}

/* After fork the child shares the parent's open file description, hence its
 * flock: it reopens the file for a lock of its own. */
static void reopen_after_fork(void) {
  if (g.fd < 0) return;
  close(g.fd);
  g.fd = open(g.path, O_RDWR | O_CLOEXEC);
  if (g.fd < 0) {
    cap_report("GPUPOOL_CUDA_CAP_STATE=\"%.200s\" could not be reopened after fork (%s); "
               "this process's memory is accounted alone", g.path, strerror(errno));
    g.state = &g_local;
  }
}

static void lock_file(void) {
  while (g.fd >= 0 && flock(g.fd, LOCK_EX) != 0 && errno == EINTR) {
  }
}

static void unlock_file(void) {
  if (g.fd >= 0) flock(g.fd, LOCK_UN);
}

/* ---- process slots ---- */

/* From /proc/PID/stat: the state (field 3) and the start time (field 22),
 * read after the parenthesised name, which may hold spaces. 0 when
 * unreadable (no /proc, or hidepid). */
static int read_stat(pid_t pid, char* state, uint64_t* start) {
  char path[64], text[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return 0;
  text[n] = '\0';
  const char* p = strrchr(text, ')');
  if (p == NULL || p[1] != ' ') return 0;
  *state = p[2];
  for (int field = 2; p != NULL && field < 22; ++field) p = strchr(p + 1, ' ');
  if (p == NULL) return 0;
  *start = 0;
  for (++p; *p >= '0' && *p <= '9'; ++p) *start = *start * 10 + (uint64_t)(*p - '0');
  return 1;
}

static uint64_t start_time(pid_t pid) {
  char state = 0;
  uint64_t start = 0;
  return read_stat(pid, &state, &start) ? start : 0;
}

/* Whether the slot's process still runs. A zombie does not: its GPU memory
 * went with its file descriptors (and a task's init may be slow to reap). */
static int alive(pid_t pid, uint64_t start) {
  if (kill(pid, 0) != 0 && errno != EPERM) return 0;
  char state = 0;
  uint64_t now = 0;
  if (!read_stat(pid, &state, &now)) return 1;
  if (state == 'Z' || state == 'X') return 0;
  return start == 0 || now == start; /* a different start time: the pid was reused */
}

/* The total less what was taken (never below zero). */
static void total_sub(uint64_t bytes) {
  uint64_t have = atomic_load(&g.state->total);
  while (!atomic_compare_exchange_weak(&g.state->total, &have, have > bytes ? have - bytes : 0)) {
  }
}

/* File locked: a dead process's slot is freed and its bytes leave the total. */
static void prune_dead(void) {
  for (int i = 0; i < CAP_SLOTS; ++i) {
    struct slot* s = &g.state->slots[i];
    pid_t pid = atomic_load(&s->pid);
    if (pid == 0 || pid == g.pid || alive(pid, atomic_load(&s->start))) continue;
    total_sub(atomic_exchange(&s->bytes, 0));
    atomic_store(&s->pid, 0);
  }
}

/* A slot for this process (file locked). One already holding our pid is a
 * predecessor's that exec'd or died: a fresh process starts from zero. */
static int claim_slot(pid_t me) {
  int free_slot = -1;
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < CAP_SLOTS; ++i) {
      pid_t pid = atomic_load(&g.state->slots[i].pid);
      if (pid == me) return i;
      if (pid == 0 && free_slot < 0) free_slot = i;
    }
    if (free_slot >= 0) return free_slot;
    prune_dead();
  }
  return -1;
}

/* Whether g.pid is this process: after a fork (pthread_atfork's child
 * handler) it is the parent's. Processes made without fork() (a raw clone)
 * that call CUDA before exec are not told apart. */
static int mine(void) { return g.pid != 0 && !atomic_load_explicit(&g.forked, memory_order_relaxed); }

/* Claims this process's slot on first use and again in a forked child (mu
 * held). 0 when every slot is taken by a live process. */
static int ensure_slot(void) {
  if (mine()) return g.slot >= 0;
  if (g.pid != 0) { /* a forked child: nothing of the parent's is ours */
    reopen_after_fork();
    memset(g_table, 0, sizeof g_table);
    g.live = 0;
    if (g.state == &g_local) {
      memset(g_local.slots, 0, sizeof g_local.slots);
      atomic_store(&g_local.total, 0);
    }
  }
  pid_t me = getpid();
  g.pid = me;
  atomic_store(&g.forked, 0);
  lock_file();
  g.slot = claim_slot(me);
  if (g.slot >= 0) {
    struct slot* s = &g.state->slots[g.slot];
    total_sub(atomic_exchange(&s->bytes, 0)); /* a predecessor's with our pid */
    atomic_store(&s->start, start_time(me));
    atomic_store(&s->pid, me);
  }
  unlock_file();
  return g.slot >= 0;
}

/* Reserves bytes in the total if the task stays within the limit. */
static int reserve_total(uint64_t bytes) {
  if (bytes > g.limit) return 0;
  uint64_t used = atomic_load(&g.state->total);
  do {
    if (used > g.limit - bytes) return 0;
  } while (!atomic_compare_exchange_weak(&g.state->total, &used, used + bytes));
  return 1;
}

/* Adds bytes to the total and this process's slot if the task stays within
 * the limit (mu held, slot claimed). Dead processes are pruned only when it
 * would not fit, so the usual allocation makes no system call. */
static int add_bytes(uint64_t bytes) {
  int ok = reserve_total(bytes);
  if (!ok) {
    lock_file();
    prune_dead();
    unlock_file();
    ok = reserve_total(bytes);
  }
  if (ok) atomic_fetch_add(&g.state->slots[g.slot].bytes, bytes);
  return ok;
}

static void sub_bytes(uint64_t bytes) {
  if (g.slot < 0 || !mine()) return;
  _Atomic uint64_t* slot_bytes = &g.state->slots[g.slot].bytes;
  uint64_t have = atomic_load(slot_bytes);
  while (!atomic_compare_exchange_weak(slot_bytes, &have, have > bytes ? have - bytes : 0)) {
  }
  total_sub(have > bytes ? bytes : have);
}

/* ---- the allocation table (mu held) ---- */

static uint32_t home_of(enum cap_kind kind, uint64_t key) {
  return (uint32_t)(((key ^ ((uint64_t)kind << 60)) * 0x9E3779B97F4A7C15ull) >> 48) % CAP_TABLE_SLOTS;
}

static void table_put(enum cap_kind kind, uint64_t key, uint64_t bytes) {
  uint32_t i = home_of(kind, key);
  while (g_table[i].kind != 0) i = (i + 1) % CAP_TABLE_SLOTS; /* never full: live <= CAP_TABLE_MAX */
  g_table[i] = (struct entry){.key = key, .bytes = bytes, .kind = kind};
}

/* Removes the entry, shifting later ones of its run back (no tombstones). */
static void table_erase(uint32_t hole) {
  g_table[hole].kind = 0;
  for (uint32_t i = (hole + 1) % CAP_TABLE_SLOTS; g_table[i].kind != 0; i = (i + 1) % CAP_TABLE_SLOTS) {
    uint32_t home = home_of(g_table[i].kind, g_table[i].key);
    /* Movable into the hole when its home is not in (hole, i]. */
    int between = hole < i ? (home > hole && home <= i) : (home > hole || home <= i);
    if (between) continue;
    g_table[hole] = g_table[i];
    g_table[i].kind = 0;
    hole = i;
  }
}

static int table_take(enum cap_kind kind, uint64_t key, uint64_t* bytes) {
  for (uint32_t i = home_of(kind, key), n = 0; g_table[i].kind != 0 && n < CAP_TABLE_SLOTS;
       i = (i + 1) % CAP_TABLE_SLOTS, ++n) {
    if (g_table[i].kind != (uint32_t)kind || g_table[i].key != key) continue;
    *bytes = g_table[i].bytes;
    table_erase(i);
    return 1;
  }
  return 0;
}

/* ---- fork ---- */

static void before_fork(void) { pthread_mutex_lock(&g.mu); }
static void after_fork_parent(void) { pthread_mutex_unlock(&g.mu); }
static void after_fork_child(void) {
  atomic_store(&g.forked, 1);
  pthread_mutex_unlock(&g.mu);
}

/* ---- interface ---- */

void cap_mem_init(const struct cap_config* config) {
  g.state = &g_local;
  g.limit = config->memory_limit;
  pthread_atfork(before_fork, after_fork_parent, after_fork_child);
  if (config->state_path[0] == '\0') return;
  strcpy(g.path, config->state_path);
  if (map_state(g.path) != 0)
    cap_report("GPUPOOL_CUDA_CAP_STATE=\"%.200s\" cannot be used (%s); each process is accounted alone",
               g.path, strerror(errno));
}

int cap_mem_capped(void) { return g.limit != 0; }
uint64_t cap_mem_limit(void) { return g.limit; }
struct cap_bucket* cap_mem_bucket(void) { return &g.state->bucket; }

CUresult cap_mem_reserve(uint64_t bytes) {
  CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&g.mu);
  if (!ensure_slot()) {
    if (!g.slots_full_reported++) cap_report("%d processes share the state file; allocation refused", CAP_SLOTS);
  } else if (g.live >= CAP_TABLE_MAX) {
    if (!g.table_full_reported++) cap_report("%d live allocations; allocation refused", CAP_TABLE_MAX);
  } else if (add_bytes(bytes)) {
    ++g.live;
    r = CUDA_SUCCESS;
  }
  pthread_mutex_unlock(&g.mu);
  return r;
}

void cap_mem_drop(uint64_t bytes) {
  pthread_mutex_lock(&g.mu);
  --g.live;
  sub_bytes(bytes);
  pthread_mutex_unlock(&g.mu);
}

void cap_mem_keep(enum cap_kind kind, uint64_t key, uint64_t bytes) {
  pthread_mutex_lock(&g.mu);
  table_put(kind, key, bytes);
  pthread_mutex_unlock(&g.mu);
}

CUresult cap_mem_grow(uint64_t bytes) {
  pthread_mutex_lock(&g.mu);
  int ok = ensure_slot() && add_bytes(bytes);
  pthread_mutex_unlock(&g.mu);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

void cap_mem_shrink(uint64_t bytes) {
  pthread_mutex_lock(&g.mu);
  sub_bytes(bytes);
  pthread_mutex_unlock(&g.mu);
}

int cap_mem_forget(enum cap_kind kind, uint64_t key, uint64_t* bytes) {
  *bytes = 0;
  pthread_mutex_lock(&g.mu);
  int found = mine() && table_take(kind, key, bytes);
  pthread_mutex_unlock(&g.mu);
  return found;
}

uint64_t cap_mem_used(void) {
  pthread_mutex_lock(&g.mu);
  lock_file();
  prune_dead();
  uint64_t used = atomic_load(&g.state->total);
  unlock_file();
  pthread_mutex_unlock(&g.mu);
  return used;
}
