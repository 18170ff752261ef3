#include "src/server/timeseries.h"

#include <algorithm>
#include <set>

namespace gpupool {

int64_t TimeSeriesRecorder::MinuteOf(Instant t) {
  const int64_t ms = ToMillis(t);
  return ms >= 0 ? ms / 60000 : -((-ms + 59999) / 60000);
}

template <class Key, class Point>
void TimeSeriesRecorder::Update(std::map<Key, Ring<Point>>& series, const std::vector<std::pair<Key, Point>>& seen,
                                int64_t minute, int length, size_t cap, int64_t& untracked) {
  std::set<Key> present;
  for (const auto& [key, point] : seen) present.insert(key);
  // What the observation no longer holds is gone: its series is dropped.
  for (auto it = series.begin(); it != series.end();) {
    it = present.count(it->first) ? std::next(it) : series.erase(it);
  }
  for (const auto& [key, point] : seen) {
    auto it = series.find(key);
    if (it == series.end()) {
      if (series.size() >= cap) {
        ++untracked;
        continue;
      }
      it = series.emplace(key, Ring<Point>{minute, std::vector<Point>(static_cast<size_t>(length))}).first;
    }
    it->second.slots[static_cast<size_t>(minute % length)] = point;
  }
}

bool TimeSeriesRecorder::Record(Instant at, const Observation& o) {
  const int64_t minute = MinuteOf(at);
  if (minute < 0) return false;
  std::lock_guard lock(mu_);
  if (last_ && at < *last_) return false;
  last_ = at;
  stamps_[static_cast<size_t>(minute % kSeriesMinutes)] = minute;
  gpu_stamps_[static_cast<size_t>(minute % kGpuMinutes)] = minute;
  untracked_ = 0;
  Update(pools_, o.pools, minute, kSeriesMinutes, kMaxPools, untracked_);
  Update(tenants_, o.tenants, minute, kSeriesMinutes, kMaxTenantSeries, untracked_);
  Update(gpus_, o.gpus, minute, kGpuMinutes, kMaxGpuSeries, untracked_);
  return true;
}

template <class Key, class Point, class Keep>
std::vector<SeriesWindow<Key, Point>> TimeSeriesRecorder::Window(const std::map<Key, Ring<Point>>& series,
                                                                 const std::vector<int64_t>& stamps,
                                                                 int64_t last_minute, int minutes, Keep keep) {
  const int length = static_cast<int>(stamps.size());
  const int n = std::clamp(minutes, 1, length);
  const int64_t first = last_minute - n + 1;
  std::vector<SeriesWindow<Key, Point>> out;
  for (const auto& [key, ring] : series) {
    if (!keep(key)) continue;
    SeriesWindow<Key, Point> w{key, std::vector<std::optional<Point>>(static_cast<size_t>(n))};
    for (int i = 0; i < n; ++i) {
      const int64_t m = first + i;
      if (m < 0 || m < ring.first_minute) continue;
      const size_t slot = static_cast<size_t>(m % length);
      if (stamps[slot] == m) w.points[static_cast<size_t>(i)] = ring.slots[slot];
    }
    out.push_back(std::move(w));
  }
  return out;
}

std::vector<SeriesWindow<std::string, PoolPoint>> TimeSeriesRecorder::Pools(
    int64_t last_minute, int minutes, const std::optional<std::string>& pool) const {
  std::lock_guard lock(mu_);
  return Window(pools_, stamps_, last_minute, minutes, [&](const std::string& k) { return !pool || k == *pool; });
}

std::vector<SeriesWindow<TenantPoolKey, TenantPoint>> TimeSeriesRecorder::Tenants(
    int64_t last_minute, int minutes, const std::optional<std::string>& tenant,
    const std::optional<std::string>& pool) const {
  std::lock_guard lock(mu_);
  return Window(tenants_, stamps_, last_minute, minutes, [&](const TenantPoolKey& k) {
    return (!tenant || k.first == *tenant) && (!pool || k.second == *pool);
  });
}

std::vector<SeriesWindow<GpuKey, GpuPoint>> TimeSeriesRecorder::Gpus(int64_t last_minute, int minutes,
                                                                    const std::optional<std::string>& node) const {
  std::lock_guard lock(mu_);
  return Window(gpus_, gpu_stamps_, last_minute, minutes, [&](const GpuKey& k) { return !node || k.first == *node; });
}

std::optional<Instant> TimeSeriesRecorder::last_recorded() const {
  std::lock_guard lock(mu_);
  return last_;
}

int64_t TimeSeriesRecorder::untracked() const {
  std::lock_guard lock(mu_);
  return untracked_;
}

size_t TimeSeriesRecorder::bytes() const {
  std::lock_guard lock(mu_);
  size_t b = (stamps_.capacity() + gpu_stamps_.capacity()) * sizeof(int64_t);
  for (const auto& [k, r] : pools_) b += r.slots.capacity() * sizeof(PoolPoint) + kSeriesOverheadBytes;
  for (const auto& [k, r] : tenants_) b += r.slots.capacity() * sizeof(TenantPoint) + kSeriesOverheadBytes;
  for (const auto& [k, r] : gpus_) b += r.slots.capacity() * sizeof(GpuPoint) + kSeriesOverheadBytes;
  return b;
}

}  // namespace gpupool
