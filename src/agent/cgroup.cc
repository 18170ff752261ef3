#include "src/agent/cgroup.h"

#include <fstream>
#include <sstream>

namespace gpupool {
namespace {

struct Mounts {
  std::string pids, memory, unified;  // mount points; empty when absent
};

// Mount points of the cgroup hierarchies, from /proc/self/mountinfo.
Mounts FindMounts() {
  Mounts m;
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream before(line.substr(0, dash)), after(line.substr(dash + 3));
    std::string id, parent, dev, root, point, fstype, source, options;
    before >> id >> parent >> dev >> root >> point;
    after >> fstype >> source >> options;
    if (root != "/") continue;  // a bind of a sub-tree: not the hierarchy's root
    if (fstype == "cgroup2" && m.unified.empty()) m.unified = point;
    if (fstype != "cgroup") continue;
    std::istringstream opts(options);
    for (std::string o; std::getline(opts, o, ',');) {
      if (o == "pids" && m.pids.empty()) m.pids = point;
      if (o == "memory" && m.memory.empty()) m.memory = point;
    }
  }
  return m;
}

const Mounts& CgroupMounts() {
  static const Mounts m = FindMounts();
  return m;
}

int64_t KeyValue(const std::string& file, const std::string& key) {
  std::ifstream in(file);
  std::string k;
  int64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

}  // namespace

std::vector<int> CgroupProcs(const std::string& path) {
  std::vector<int> pids;
  if (path.empty()) return pids;
  const Mounts& m = CgroupMounts();
  // The memory hierarchy is the one every runc container joins on v1 (pids
  // too); any of them lists the container's processes.
  for (const std::string& root : {m.pids, m.memory, m.unified}) {
    if (root.empty()) continue;
    std::ifstream in(root + path + "/cgroup.procs");
    if (!in) continue;
    for (int pid = 0; in >> pid;) pids.push_back(pid);
    return pids;
  }
  return pids;
}

int64_t CgroupOomKills(const std::string& path) {
  if (path.empty()) return 0;
  const Mounts& m = CgroupMounts();
  if (!m.memory.empty()) return KeyValue(m.memory + path + "/memory.oom_control", "oom_kill");
  if (!m.unified.empty()) return KeyValue(m.unified + path + "/memory.events", "oom_kill");
  return 0;
}

}  // namespace gpupool
