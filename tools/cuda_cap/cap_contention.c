/* The contention signal the agent writes per GPU (see cuda_cap.h): one line
 * "contended UNIX_MS" or "uncontended UNIX_MS", UNIX_MS the wall-clock time
 * (milliseconds) until which it holds. Anything else means contended. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/cuda_cap/cuda_cap.h"

/* A whole number of at most 18 digits ending at '\n' or the end; -1 if not. */
static int64_t parse_ms(const char* p) {
  int64_t v = 0;
  int digits = 0;
  for (; *p >= '0' && *p <= '9'; ++p, ++digits) {
    if (digits == 18) return -1;
    v = v * 10 + (*p - '0');
  }
  if (digits == 0 || (*p != '\0' && !(*p == '\n' && p[1] == '\0'))) return -1;
  return v;
}

int cap_contention_parse(const char* text, int64_t now_unix_ms) {
  static const char k_word[] = "uncontended ";
  if (strncmp(text, k_word, sizeof k_word - 1) != 0) return 1;
  int64_t until = parse_ms(text + sizeof k_word - 1);
  if (until < 0 || until < now_unix_ms || until - now_unix_ms > CAP_CONTENTION_MAX_VALID_MS) return 1;
  return 0;
}

static int64_t wall_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int cap_contention_read(const char* path) {
  char text[CAP_CONTENTION_MAX_BYTES + 1];
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return 1;
  ssize_t n;
  do {
    n = read(fd, text, sizeof text);
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0 || n > CAP_CONTENTION_MAX_BYTES) return 1; /* empty, unreadable or too long */
  text[n] = '\0';
  return cap_contention_parse(text, wall_ms());
}
