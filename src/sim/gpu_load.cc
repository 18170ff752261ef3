#include "src/sim/gpu_load.h"

#include <algorithm>
#include <bit>

#include "src/base/check.h"

namespace gpupool {
namespace {

template <typename F>
void ForEachGpu(const std::vector<PlacedReplica>& at, F f) {
  for (const PlacedReplica& r : at) {
    for (GpuMask m = r.gpus; m != 0; m &= m - 1) f(r.node, std::countr_zero(m));
  }
}

double Busy(double load) { return std::min(1.0, load); }

}  // namespace

double ShareLimitSpeed(double load, double limit) {
  if (limit >= 1 || !(load > limit)) return 1.0;
  return limit > 0 ? limit / load : 1.0;
}

std::vector<JobId> GpuLoad::Add(JobId job, const std::vector<PlacedReplica>& at, double load) {
  std::vector<JobId> others;
  ForEachGpu(at, [&](NodeIndex n, int g) {
    Gpu& gpu = gpus_[Key(n, g)];
    for (const auto& [other, l] : gpu.tasks) {
      if (other != job) others.push_back(other);
    }
    busy_ -= Busy(gpu.load);
    gpu.tasks.emplace_back(job, load);
    gpu.load += load;
    busy_ += Busy(gpu.load);
  });
  std::sort(others.begin(), others.end());
  others.erase(std::unique(others.begin(), others.end()), others.end());
  return others;
}

std::vector<JobId> GpuLoad::Remove(JobId job, const std::vector<PlacedReplica>& at) {
  std::vector<JobId> others;
  ForEachGpu(at, [&](NodeIndex n, int g) {
    auto it = gpus_.find(Key(n, g));
    GP_CHECK(it != gpus_.end()) << "job " << job << " is not on node " << n << " GPU " << g;
    Gpu& gpu = it->second;
    busy_ -= Busy(gpu.load);
    auto self = std::find_if(gpu.tasks.begin(), gpu.tasks.end(), [&](const auto& t) { return t.first == job; });
    GP_CHECK(self != gpu.tasks.end()) << "job " << job << " is not on node " << n << " GPU " << g;
    gpu.tasks.erase(self);
    gpu.load = 0;
    for (const auto& [other, l] : gpu.tasks) {
      gpu.load += l;
      others.push_back(other);
    }
    if (gpu.tasks.empty()) {
      gpus_.erase(it);
    } else {
      busy_ += Busy(gpu.load);
    }
  });
  if (gpus_.empty()) busy_ = 0;  // no drift from the sums above
  std::sort(others.begin(), others.end());
  others.erase(std::unique(others.begin(), others.end()), others.end());
  return others;
}

double GpuLoad::GpuFactor(NodeIndex n, int g, const Gpu& gpu) const {
  const GpuMode mode = cluster_->node(n).gpu_mode[g];
  const double contention = gpu.load > 1 ? 1.0 / gpu.load : 1.0;
  switch (mode) {
    case GpuMode::kTimeSlice:
      return gpu.tasks.size() >= 2 ? (1.0 - costs_.time_slice_overhead) * contention : 1.0;
    case GpuMode::kMps: return contention;
    case GpuMode::kIdle:
    case GpuMode::kWhole:
    case GpuMode::kMig: return 1.0;
  }
  return 1.0;
}

double GpuLoad::Factor(const std::vector<PlacedReplica>& at) const {
  double f = 1.0;
  ForEachGpu(at, [&](NodeIndex n, int g) {
    auto it = gpus_.find(Key(n, g));
    if (it != gpus_.end()) f = std::min(f, GpuFactor(n, g, it->second));
  });
  return f;
}

}  // namespace gpupool
