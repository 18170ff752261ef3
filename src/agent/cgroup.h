// Reading a task container's cgroup (EXEC-2): which processes it still
// holds, and whether the kernel's OOM killer acted in it. Works on cgroup
// v1 (the pids and memory controllers) and v2 (the unified hierarchy),
// found from /proc/self/mountinfo once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpupool {

// The pids in cgroup `path` (e.g. "/gpupool/ab12/gp-3-0-1"); empty when it
// has none or does not exist.
std::vector<int> CgroupProcs(const std::string& path);

// How many times the OOM killer killed a process in cgroup `path` (0 when
// unknown).
int64_t CgroupOomKills(const std::string& path);

}  // namespace gpupool
