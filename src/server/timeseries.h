// Issue 19's time series: what the pools, the tenants and the GPUs looked
// like over the last day, one point a minute, for the console's charts
// (GET /v1/timeseries/{pools,tenants,gpus}, docs/server.md "Time series").
//
// These are observations of the server, not decisions: the server samples
// the read model's engine summary and the agents' last heartbeats
// (timeseries_view.h builds an Observation from them) and hands each
// observation to Record with the server's clock (Env::Now). A point is
// the newest observation recorded during its minute (UTC minute of Unix
// time); a minute in which nothing was recorded has no point (null in the
// API). Time that goes backwards is ignored (the observation is dropped).
//
// In memory only: a restart starts every series empty.
//
// Series and their sizes (fixed when a series is made, never grown):
//   per pool          kSeriesMinutes points of PoolPoint   (28 B): 40,320 B
//   per tenant+pool   kSeriesMinutes points of TenantPoint  (8 B): 11,520 B
//   per GPU           kGpuMinutes points of GpuPoint        (8 B):    480 B
// plus at most 256 B per series for its key (names of at most 63
// characters) and map node. At most kMaxPools (64) pool series,
// kMaxTenantSeries (4,096) tenant+pool series and kMaxGpuSeries (16,384)
// GPU series: at most 64 x 40,576 + 4,096 x 11,776 + 16,384 x 736 B, about
// 63 MB (kMaxBytes). At 10,000 GPUs, 8 pools and 200 tenants with quotas
// in 2 pools each: 0.3 + 4.7 + 7.4 MB, about 12 MB. A series beyond a cap
// is not made (counted in untracked()).
//
// Series come and go with what the observations hold: a pool, a tenant's
// pool (quota, usage or pending jobs there) or a GPU (of a node that is not
// removed and whose agent reported it) missing from an observation loses
// its series at once; it starts empty if it comes back.
//
// Thread-safety: safe for concurrent use (one mutex; Record and the reads
// copy in and out under it).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/base/time.h"
#include "src/model/cluster.h"

namespace gpupool {

inline constexpr int kSeriesMinutes = 1440;  // pools and tenants: 24 h
inline constexpr int kGpuMinutes = 60;       // GPUs: the last hour
inline constexpr size_t kMaxTenantSeries = 4096;
inline constexpr size_t kMaxGpuSeries = 16384;

// GPU amounts in thousandths of a GPU, as the engine counts them.
struct PoolPoint {
  int32_t total_milli = 0, allocated_milli = 0, reserved_milli = 0;
  // Allocated on GPUs whose last reported utilization is at least the
  // busy threshold (busy), and the rest of allocated (idle).
  int32_t busy_milli = 0, idle_milli = 0;
  int32_t nodes = 0;
  int32_t queued = 0;  // pending jobs that may run in the pool
  friend bool operator==(const PoolPoint&, const PoolPoint&) = default;
};
struct TenantPoint {
  int32_t used_milli = 0;
  int32_t queued = 0;  // the tenant's pending jobs that may run in the pool
  friend bool operator==(const TenantPoint&, const TenantPoint&) = default;
};
struct GpuPoint {
  int32_t memory_used_mib = 0;
  int16_t temperature_c = -1;  // -1: unknown
  uint8_t util_pct = 0;        // 0..100
  friend bool operator==(const GpuPoint&, const GpuPoint&) = default;
};
static_assert(sizeof(PoolPoint) == 28 && sizeof(TenantPoint) == 8 && sizeof(GpuPoint) == 8);

using TenantPoolKey = std::pair<std::string, std::string>;  // (tenant, pool)
using GpuKey = std::pair<std::string, int>;                 // (node, GPU index)

// Everything observed at one moment; keys unique within each list.
struct Observation {
  std::vector<std::pair<std::string, PoolPoint>> pools;  // by pool name
  std::vector<std::pair<TenantPoolKey, TenantPoint>> tenants;
  std::vector<std::pair<GpuKey, GpuPoint>> gpus;
};

// One series over a window, oldest first: points[i] is the minute
// first_minute + i (nullopt: nothing recorded then).
template <class Key, class Point>
struct SeriesWindow {
  Key key;
  std::vector<std::optional<Point>> points;
};

class TimeSeriesRecorder {
 public:
  // The bound of the header's comment, in bytes (a test holds bytes() to it).
  static constexpr size_t kSeriesOverheadBytes = 256;
  static constexpr size_t kMaxBytes =
      kMaxPools * (kSeriesMinutes * sizeof(PoolPoint) + kSeriesOverheadBytes) +
      kMaxTenantSeries * (kSeriesMinutes * sizeof(TenantPoint) + kSeriesOverheadBytes) +
      kMaxGpuSeries * (kGpuMinutes * sizeof(GpuPoint) + kSeriesOverheadBytes) + 2 * kSeriesMinutes * sizeof(int64_t);

  // Unix minute of an instant (floor).
  static int64_t MinuteOf(Instant t);

  // Records `o` as the newest point of `at`'s minute (see the header's
  // comment); false when `at` is before the newest observation (dropped).
  bool Record(Instant at, const Observation& o);

  // The series over the `minutes` minutes ending with `last_minute`
  // (inclusive), in key order. `minutes` is clamped to 1..the series'
  // length (kSeriesMinutes, kGpuMinutes for GPUs). A filter that is set
  // keeps only series whose key part equals it.
  std::vector<SeriesWindow<std::string, PoolPoint>> Pools(int64_t last_minute, int minutes,
                                                          const std::optional<std::string>& pool) const;
  std::vector<SeriesWindow<TenantPoolKey, TenantPoint>> Tenants(int64_t last_minute, int minutes,
                                                                const std::optional<std::string>& tenant,
                                                                const std::optional<std::string>& pool) const;
  std::vector<SeriesWindow<GpuKey, GpuPoint>> Gpus(int64_t last_minute, int minutes,
                                                   const std::optional<std::string>& node) const;

  // When the newest observation was recorded (nullopt: none yet).
  std::optional<Instant> last_recorded() const;
  // Series not made because their cap was reached, in the newest observation.
  int64_t untracked() const;
  // The memory the series hold (rings, keys, map nodes), by the header's rule.
  size_t bytes() const;

 private:
  // A ring of N points indexed by minute % N; valid from `first_minute` on,
  // where the recorder's slot stamps say the minute was recorded.
  template <class Point>
  struct Ring {
    int64_t first_minute = 0;
    std::vector<Point> slots;
  };
  template <class Key, class Point>
  static void Update(std::map<Key, Ring<Point>>& series, const std::vector<std::pair<Key, Point>>& seen,
                     int64_t minute, int length, size_t cap, int64_t& untracked);
  template <class Key, class Point, class Keep>
  static std::vector<SeriesWindow<Key, Point>> Window(const std::map<Key, Ring<Point>>& series,
                                                      const std::vector<int64_t>& stamps, int64_t last_minute,
                                                      int minutes, Keep keep);

  mutable std::mutex mu_;
  std::optional<Instant> last_;  // GUARDED_BY(mu_)
  // Which minute each slot holds (-1: none), per ring length.
  std::vector<int64_t> stamps_ = std::vector<int64_t>(kSeriesMinutes, -1);   // GUARDED_BY(mu_)
  std::vector<int64_t> gpu_stamps_ = std::vector<int64_t>(kGpuMinutes, -1);  // GUARDED_BY(mu_)
  std::map<std::string, Ring<PoolPoint>> pools_;      // GUARDED_BY(mu_)
  std::map<TenantPoolKey, Ring<TenantPoint>> tenants_;  // GUARDED_BY(mu_)
  std::map<GpuKey, Ring<GpuPoint>> gpus_;             // GUARDED_BY(mu_)
  int64_t untracked_ = 0;                             // GUARDED_BY(mu_)
};

}  // namespace gpupool
