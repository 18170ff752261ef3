#include "src/server/timeseries_view.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include "src/base/time_text.h"

namespace gpupool {

using nlohmann::json;

namespace {

int32_t Clamp32(int64_t v) { return static_cast<int32_t>(std::clamp<int64_t>(v, INT32_MIN, INT32_MAX)); }

// Per node index, the last reported utilization of each GPU (NaN: none),
// and the GPU points of the nodes the read model has and has not removed.
struct AgentReadings {
  std::vector<std::array<double, kMaxGpusPerNode>> util;
};

AgentReadings ReadAgents(const ReadModel& m, const AgentStatusBoard& agents, Observation& o) {
  AgentReadings a;
  std::array<double, kMaxGpusPerNode> none;
  none.fill(std::nan(""));
  a.util.assign(m.nodes().size(), none);
  const auto& nodes = m.summary()->nodes;
  agents.ForEachSamples([&](const std::string& name, const std::vector<GpuSample>& samples) {
    const auto id = m.node_id(name);
    if (!id) return;
    const size_t i = static_cast<size_t>(*id);
    if (i < nodes.size() && nodes[i].condition == NodeCondition::kRemoved) return;
    for (const GpuSample& g : samples) {
      if (g.index < 0 || g.index >= kMaxGpusPerNode) continue;
      a.util[i][static_cast<size_t>(g.index)] = g.util_pct;
      GpuPoint p;
      p.util_pct = static_cast<uint8_t>(std::clamp(std::lround(g.util_pct), 0L, 100L));
      p.memory_used_mib = Clamp32(g.memory_used_mib);
      p.temperature_c = static_cast<int16_t>(std::clamp(g.temperature_c, -1, 1000));
      o.gpus.push_back({{name, g.index}, p});
    }
  });
  return a;
}

// Allocated thousandths of a GPU on ready nodes' GPUs reported at least
// `busy_from_pct` busy, per pool.
std::vector<int64_t> BusyMilli(const ReadModel& m, const AgentReadings& a, double busy_from_pct) {
  std::vector<int64_t> busy(m.pools().size(), 0);
  const auto& nodes = m.summary()->nodes;
  for (size_t i = 0; i < nodes.size() && i < a.util.size(); ++i) {
    const Node& n = nodes[i];
    if (n.condition != NodeCondition::kReady || n.pool >= busy.size()) continue;
    for (int g = 0; g < n.gpu_count; ++g) {
      const int64_t allocated = kMilliPerGpu - n.gpu_free_milli[static_cast<size_t>(g)];
      const double u = a.util[i][static_cast<size_t>(g)];
      if (allocated > 0 && !std::isnan(u) && u >= busy_from_pct) busy[n.pool] += allocated;
    }
  }
  return busy;
}

}  // namespace

Observation Observe(const ReadModel& m, const AgentStatusBoard& agents, double busy_from_pct) {
  Observation o;
  const EngineSummary& s = *m.summary();
  const AgentReadings a = ReadAgents(m, agents, o);
  const std::vector<int64_t> busy = BusyMilli(m, a, busy_from_pct);
  std::vector<int64_t> queued(m.pools().size(), 0);
  for (const auto& [key, n] : s.queued_by_pool) {
    if (key.second < queued.size()) queued[key.second] += n;
  }
  for (size_t p = 0; p < m.pools().size(); ++p) {
    PoolPoint pt;
    if (p < s.capacity.size()) {
      const PoolCapacity& c = s.capacity[p];
      pt.total_milli = Clamp32(c.total_milli);
      pt.allocated_milli = Clamp32(c.allocated_milli);
      pt.reserved_milli = Clamp32(c.reserved_milli);
      pt.busy_milli = Clamp32(std::min(busy[p], c.allocated_milli));
      pt.idle_milli = pt.allocated_milli - pt.busy_milli;
    }
    pt.nodes = p < s.pool_nodes.size() ? s.pool_nodes[p] : 0;
    pt.queued = Clamp32(queued[p]);
    o.pools.push_back({m.pools()[p].name, pt});
  }
  for (size_t t = 0; t < m.tenants().size(); ++t) {
    for (size_t p = 0; p < m.pools().size(); ++p) {
      TenantPoint pt;
      if (t < s.usage.size() && p < s.usage[t].size()) pt.used_milli = Clamp32(s.usage[t][p].used_milli);
      const auto q = s.queued_by_pool.find({static_cast<TenantId>(t), static_cast<PoolId>(p)});
      if (q != s.queued_by_pool.end()) pt.queued = Clamp32(q->second);
      const bool quota = t < m.quotas().size() && p < m.quotas()[t].size() &&
                         (m.quotas()[t][p].guaranteed_milli > 0 || m.quotas()[t][p].elastic_limit_milli > 0);
      if (quota || pt.used_milli > 0 || pt.queued > 0) o.tenants.push_back({{m.tenants()[t], m.pools()[p].name}, pt});
    }
  }
  return o;
}

namespace {

bool Fail(ApiError* err, ApiError e) {
  *err = std::move(e);
  return false;
}

double Gpus(int32_t milli) { return static_cast<double>(milli) / kMilliPerGpu; }

// One JSON array per field of a series' points (null where none).
template <class Point, class Get>
json Column(const std::vector<std::optional<Point>>& points, Get get) {
  json a = json::array();
  for (const auto& p : points) a.push_back(p ? json(get(*p)) : json(nullptr));
  return a;
}

bool MinutesOf(const SeriesParams& q, int most, int* out, ApiError* err) {
  *out = most;
  if (!q.minutes) return true;
  const std::string& v = *q.minutes;
  const bool digits = !v.empty() && v.size() <= 5 && std::all_of(v.begin(), v.end(), [](char c) {
    return c >= '0' && c <= '9';
  });
  const int n = digits ? std::stoi(v) : 0;
  if (n < 1 || n > most) {
    return Fail(err, BadField("minutes", "expected an integer between 1 and " + std::to_string(most) + " (got \"" +
                                             v.substr(0, 32) + "\")"));
  }
  *out = n;
  return true;
}

bool NamesCheck(const SeriesParams& q, const std::string& caller_tenant, const ReadModel& m, ApiError* err) {
  if (q.pool && std::none_of(m.pools().begin(), m.pools().end(), [&](const Pool& p) { return p.name == *q.pool; })) {
    return Fail(err, BadField("pool", "no pool '" + q.pool->substr(0, 64) + "'"));
  }
  if (q.tenant && !caller_tenant.empty() && *q.tenant != caller_tenant) {
    return Fail(err, MakeApiError(403, "forbidden", "tenant: only the admin may read other tenants' series", "tenant"));
  }
  if (q.tenant && !m.tenant_id(*q.tenant)) {
    return Fail(err, BadField("tenant", "no tenant '" + q.tenant->substr(0, 64) + "'"));
  }
  if (q.node && !m.node_id(*q.node)) return Fail(err, BadField("node", "no node '" + q.node->substr(0, 64) + "'"));
  return true;
}

json PoolSeries(const SeriesWindow<std::string, PoolPoint>& w, bool all_fields) {
  json v{{"pool", w.key},
         {"total_gpus", Column(w.points, [](const PoolPoint& p) { return Gpus(p.total_milli); })},
         {"allocated_gpus", Column(w.points, [](const PoolPoint& p) { return Gpus(p.allocated_milli); })},
         {"reserved_gpus", Column(w.points, [](const PoolPoint& p) { return Gpus(p.reserved_milli); })},
         {"nodes", Column(w.points, [](const PoolPoint& p) { return p.nodes; })}};
  if (!all_fields) return v;
  v["busy_gpus"] = Column(w.points, [](const PoolPoint& p) { return Gpus(p.busy_milli); });
  v["idle_gpus"] = Column(w.points, [](const PoolPoint& p) { return Gpus(p.idle_milli); });
  v["queued_jobs"] = Column(w.points, [](const PoolPoint& p) { return p.queued; });
  return v;
}

json TenantSeries(const SeriesWindow<TenantPoolKey, TenantPoint>& w) {
  return json{{"tenant", w.key.first},
              {"pool", w.key.second},
              {"used_gpus", Column(w.points, [](const TenantPoint& p) { return Gpus(p.used_milli); })},
              {"queued_jobs", Column(w.points, [](const TenantPoint& p) { return p.queued; })}};
}

json GpuSeries(const SeriesWindow<GpuKey, GpuPoint>& w) {
  return json{{"node", w.key.first},
              {"gpu", w.key.second},
              {"utilization_pct", Column(w.points, [](const GpuPoint& p) { return static_cast<int>(p.util_pct); })},
              {"memory_used_mib", Column(w.points, [](const GpuPoint& p) { return p.memory_used_mib; })},
              {"temperature_c", Column(w.points, [](const GpuPoint& p) {
                 return p.temperature_c < 0 ? json(nullptr) : json(p.temperature_c);
               })}};
}

}  // namespace

bool SeriesAnswer(SeriesScope scope, const SeriesParams& q, const std::string& caller_tenant, const ReadModel& m,
                  const TimeSeriesRecorder& r, Instant now, json* out, ApiError* err) {
  if (scope == SeriesScope::kGpus && !q.node) return Fail(err, BadField("node", "required: the node's name"));
  int minutes = 0;
  if (!MinutesOf(q, scope == SeriesScope::kGpus ? kGpuMinutes : kSeriesMinutes, &minutes, err)) return false;
  if (!NamesCheck(q, caller_tenant, m, err)) return false;
  const int64_t last = TimeSeriesRecorder::MinuteOf(now);
  json series = json::array();
  if (scope == SeriesScope::kPools) {
    for (const auto& w : r.Pools(last, minutes, q.pool)) series.push_back(PoolSeries(w, caller_tenant.empty()));
  } else if (scope == SeriesScope::kTenants) {
    const std::optional<std::string> tenant = caller_tenant.empty() ? q.tenant : caller_tenant;
    for (const auto& w : r.Tenants(last, minutes, tenant, q.pool)) series.push_back(TenantSeries(w));
  } else {
    for (const auto& w : r.Gpus(last, minutes, q.node)) series.push_back(GpuSeries(w));
  }
  const int64_t first = last - minutes + 1;
  *out = json{{"start", FormatRfc3339(InstantFromMillis(first * 60000))},
              {"step_s", 60},
              {"points", minutes},
              {"series", std::move(series)}};
  return true;
}

}  // namespace gpupool
