// What the agent reads of a process from /proc/PID/stat, in one place: its
// state, process group and start time (for telling a reused pid from the
// process it once was). The command name (field 2) may hold spaces and ')',
// so fields are counted after the last ')'.
//
// Also MakeDir, the agent's one way to make a directory with a mode.
//
// Thread-safety: pure functions of the file system.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "src/base/status.h"

namespace gpupool {

struct ProcStat {
  char state = '?';                  // field 3: R, S, D, Z (zombie), X (dead), ...
  int pgrp = 0;                      // field 5
  unsigned long long start_time = 0;  // field 22: clock ticks after boot
  // Running or sleeping: a zombie has ended (whoever adopted it may never reap it).
  bool alive() const { return state != 'Z' && state != 'X'; }
};

// nullopt when the process is gone or its stat line cannot be read.
std::optional<ProcStat> ReadProcStat(int pid);

// Makes `dir` (and its parents) exist; `mode` on the last one.
Status MakeDir(const std::string& dir, mode_t mode);

}  // namespace gpupool
