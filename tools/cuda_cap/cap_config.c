/* The cap's environment variables (documented in cuda_cap.h), parsed by hand:
 * strtod would follow the application's LC_NUMERIC. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cuda_cap/cuda_cap.h"

void cap_report(const char* fmt, ...) {
  char line[512];
  va_list args;
  va_start(args, fmt);
  vsnprintf(line, sizeof line, fmt, args);
  va_end(args);
  fprintf(stderr, "gpupool-cuda-cap: %s\n", line);
}

/* A whole number of MiB that fits in bytes; -1 when malformed. */
static int parse_mib(const char* text, uint64_t* bytes) {
  uint64_t mib = 0;
  if (*text == '\0' || strlen(text) > 20) return -1;
  for (const char* p = text; *p; ++p) {
    if (*p < '0' || *p > '9') return -1;
    mib = mib * 10 + (uint64_t)(*p - '0');
    if (mib > (UINT64_MAX >> 20)) return -1;
  }
  *bytes = mib << 20;
  return 0;
}

/* A decimal "D", "D.D" or ".D" (at most 9 fraction digits) in (0,1]. */
static int parse_share(const char* text, double* share) {
  double whole = 0, frac = 0, scale = 1;
  const char* p = text;
  int digits = 0;
  for (; *p >= '0' && *p <= '9' && digits < 12; ++p, ++digits) whole = whole * 10 + (*p - '0');
  if (*p == '.') {
    int fraction_digits = 0;
    for (++p; *p >= '0' && *p <= '9' && fraction_digits < 9; ++p, ++fraction_digits) {
      frac = frac * 10 + (*p - '0');
      scale *= 10;
    }
    digits += fraction_digits;
  }
  if (*p != '\0' || digits == 0) return -1;
  *share = whole + frac / scale;
  return *share > 0 && *share <= 1 ? 0 : -1;
}

static void read_memory(struct cap_config* out) {
  const char* text = getenv("GPUPOOL_CUDA_MEMORY_LIMIT_MIB");
  if (text == NULL || *text == '\0') return;
  if (parse_mib(text, &out->memory_limit) != 0) {
    out->memory_limit = 0;
    cap_report("GPUPOOL_CUDA_MEMORY_LIMIT_MIB=\"%.64s\" is not a whole number of MiB; "
               "GPU memory is not capped", text);
  }
}

static void read_share(struct cap_config* out) {
  const char* text = getenv("GPUPOOL_CUDA_COMPUTE_SHARE");
  if (text == NULL || *text == '\0') return;
  if (parse_share(text, &out->share) != 0) {
    out->share = 1;
    cap_report("GPUPOOL_CUDA_COMPUTE_SHARE=\"%.64s\" is not a number in (0,1]; "
               "kernel launches are not paced", text);
  }
}

static void read_state(struct cap_config* out) {
  const char* text = getenv("GPUPOOL_CUDA_CAP_STATE");
  if (text == NULL || *text == '\0') return;
  if (strlen(text) >= sizeof out->state_path) {
    cap_report("GPUPOOL_CUDA_CAP_STATE is longer than %zu bytes; accounting per process",
               sizeof out->state_path - 1);
    return;
  }
  strcpy(out->state_path, text);
}

static void read_contention(struct cap_config* out) {
  const char* text = getenv("GPUPOOL_CUDA_CONTENTION_FILE");
  if (text == NULL || *text == '\0') return;
  if (strlen(text) >= sizeof out->contention_path) {
    cap_report("GPUPOOL_CUDA_CONTENTION_FILE is longer than %zu bytes; the compute share is always enforced",
               sizeof out->contention_path - 1);
    return;
  }
  strcpy(out->contention_path, text);
}

void cap_config_read(struct cap_config* out) {
  memset(out, 0, sizeof *out);
  out->share = 1;
  read_memory(out);
  read_share(out);
  read_state(out);
  read_contention(out);
}
