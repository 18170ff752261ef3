// The console's time series at 10,000 GPUs (`make bench`, issue 19): the
// recorder the server feeds at most once a second (and on a read after a
// change), at the scale the header's memory figure is worked out for:
// 8 pools, 200 tenants with quotas in 2 pools each (400 tenant+pool
// series) and 1,250 nodes of 8 GPUs, every value changing each minute.
//  - BM_TimeSeriesRecord10kGpus: one Record of the next minute, after a
//    full day recorded (every ring full). Counters: bytes() in MiB beside
//    the header's estimate (about 12 MB) and the resident memory the full
//    day added to the process (measured), and the goal for one record
//    (10 ms: 1% of the once-a-second recording budget; it runs under the
//    read model's shared lock, beside the API's readers).
//  - BM_TimeSeriesReadDay: the 24 h of every pool and tenant series, as
//    GET /v1/timeseries/tenants without filters copies them out.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>

#include <unistd.h>

#include "src/server/timeseries.h"

namespace gpupool {
namespace {

constexpr int kPools = 8, kTenants = 200, kNodes = 1250, kGpusPerNode = 8;

// The observation of minute `m`: every value depends on m, so each record
// writes new points everywhere.
Observation At(int m) {
  Observation o;
  for (int p = 0; p < kPools; ++p) {
    const int32_t total = kNodes / kPools * kGpusPerNode * 1000;
    o.pools.push_back({"pool-" + std::to_string(p),
                       PoolPoint{total, total / 2 + m % 1000, 0, total / 4, total / 4 + m % 1000, kNodes / kPools, m % 50}});
  }
  for (int t = 0; t < kTenants; ++t) {
    for (int k = 0; k < 2; ++k) {
      o.tenants.push_back({{"tenant-" + std::to_string(t), "pool-" + std::to_string((t + k) % kPools)},
                           TenantPoint{1000 * ((t + m) % 40), (t + m) % 7}});
    }
  }
  for (int n = 0; n < kNodes; ++n) {
    for (int g = 0; g < kGpusPerNode; ++g) {
      o.gpus.push_back({{"node-" + std::to_string(n), g},
                        GpuPoint{(n * 7 + m) % 81920, static_cast<int16_t>(40 + (n + m) % 40),
                                 static_cast<uint8_t>((n + g + m) % 101)}});
    }
  }
  std::sort(o.tenants.begin(), o.tenants.end(), [](auto& a, auto& b) { return a.first < b.first; });
  std::sort(o.gpus.begin(), o.gpus.end(), [](auto& a, auto& b) { return a.first < b.first; });
  return o;
}

Instant MinuteInstant(int m) { return kTimeOrigin + std::chrono::minutes(m); }

// The process's resident memory in bytes (/proc/self/statm), 0 if unknown.
double RssBytes() {
  std::ifstream in("/proc/self/statm");
  double pages = 0, rss = 0;
  if (!(in >> pages >> rss)) return 0;
  return rss * static_cast<double>(sysconf(_SC_PAGESIZE));
}

double full_day_rss_growth = 0;  // what the full day added to the RSS (measured, beside bytes())

// A recorder with a full day of minutes recorded.
TimeSeriesRecorder& FullDay() {
  static TimeSeriesRecorder* r = [] {
    const double before = RssBytes();
    auto* out = new TimeSeriesRecorder;
    for (int m = 0; m < kSeriesMinutes; ++m) out->Record(MinuteInstant(m), At(m));
    full_day_rss_growth = RssBytes() - before;
    return out;
  }();
  return *r;
}

void BM_TimeSeriesRecord10kGpus(benchmark::State& state) {
  TimeSeriesRecorder& r = FullDay();
  const Observation o = At(kSeriesMinutes);
  int m = kSeriesMinutes;
  for (auto _ : state) benchmark::DoNotOptimize(r.Record(MinuteInstant(++m), o));
  state.counters["gpus"] = kNodes * kGpusPerNode;
  state.counters["bytes_mib"] = static_cast<double>(r.bytes()) / (1 << 20);
  state.counters["estimate_mib"] = 12e6 / (1 << 20);
  state.counters["rss_growth_mib"] = full_day_rss_growth / (1 << 20);
  state.counters["goal_ms"] = 10;
  state.counters["untracked"] = static_cast<double>(r.untracked());
}
BENCHMARK(BM_TimeSeriesRecord10kGpus)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_TimeSeriesReadDay(benchmark::State& state) {
  TimeSeriesRecorder& r = FullDay();
  const int64_t last = TimeSeriesRecorder::MinuteOf(*r.last_recorded());
  size_t series = 0;
  for (auto _ : state) {
    auto pools = r.Pools(last, kSeriesMinutes, std::nullopt);
    auto tenants = r.Tenants(last, kSeriesMinutes, std::nullopt, std::nullopt);
    series = pools.size() + tenants.size();
    benchmark::DoNotOptimize(tenants.data());
  }
  state.counters["series"] = static_cast<double>(series);
}
BENCHMARK(BM_TimeSeriesReadDay)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace gpupool
