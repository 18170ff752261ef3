#include "src/server/usage_view.h"

#include "src/base/time_text.h"

namespace gpupool {

using nlohmann::json;

namespace {

constexpr double kMilliMsPerGpuSecond = 1e6;            // GPU milli x ms
constexpr double kMibMsPerGibSecond = 1024.0 * 1000.0;  // MiB x ms

json RowView(const UsageRow& r, const ReadModel& m) {
  const UsageAmounts& a = r.amounts;
  return json{{"tenant", static_cast<size_t>(r.tenant) < m.tenants().size() ? m.tenants()[r.tenant] : ""},
              {"pool", r.pool < m.pools().size() ? m.pools()[r.pool].name : ""},
              {"period_start", FormatRfc3339(UsageDayStart(r.start_day))},
              {"period_end", FormatRfc3339(UsageDayStart(r.end_day))},
              {"gpu_seconds", (a.guaranteed_milli_ms + a.borrowed_milli_ms) / kMilliMsPerGpuSecond},
              {"guaranteed_gpu_seconds", a.guaranteed_milli_ms / kMilliMsPerGpuSecond},
              {"borrowed_gpu_seconds", a.borrowed_milli_ms / kMilliMsPerGpuSecond},
              {"lent_gpu_seconds", a.lent_milli_ms / kMilliMsPerGpuSecond},
              {"gpu_memory_gib_seconds", a.memory_mib_ms / kMibMsPerGibSecond},
              {"jobs_started", a.jobs_started}};
}

bool Fail(ApiError* err, ApiError e) {
  *err = std::move(e);
  return false;
}

// Which tenant (-1: all) the caller asks for and may see.
bool TenantOf(const UsageParams& q, const std::string& caller_tenant, const ReadModel& m, TenantId* out,
              ApiError* err) {
  *out = -1;
  if (!caller_tenant.empty()) {
    if (q.tenant && *q.tenant != caller_tenant) {
      return Fail(err, MakeApiError(403, "forbidden", "tenant: only the admin may read other tenants' usage", "tenant"));
    }
    const auto t = m.tenant_id(caller_tenant);
    if (!t) return Fail(err, MakeApiError(401, "unauthorized", "the token's tenant is not published yet"));
    *out = *t;
    return true;
  }
  if (!q.tenant) return true;
  const auto t = m.tenant_id(*q.tenant);
  if (!t) return Fail(err, BadField("tenant", "no tenant '" + q.tenant->substr(0, 64) + "'"));
  *out = *t;
  return true;
}

bool PeriodOf(const UsageParams& q, UsageQuery* u, ApiError* err) {
  const std::string by = q.by.value_or("day");
  if (by == "day") u->by = UsagePeriod::kDay;
  else if (by == "week") u->by = UsagePeriod::kWeek;
  else if (by == "total") u->by = UsagePeriod::kTotal;
  else return Fail(err, BadField("by", "expected day, week or total (got \"" + by.substr(0, 32) + "\")"));
  return true;
}

}  // namespace

bool UsageAnswer(const UsageParams& q, const std::string& caller_tenant, const ReadModel& m, Instant now,
                 json* out, ApiError* err) {
  UsageQuery u;
  u.max_rows = kMaxUsageRows;
  if (!TenantOf(q, caller_tenant, m, &u.tenant, err) || !PeriodOf(q, &u, err)) return false;
  if (q.pool) {
    const auto it = std::find_if(m.pools().begin(), m.pools().end(), [&](const Pool& p) { return p.name == *q.pool; });
    if (it == m.pools().end()) return Fail(err, BadField("pool", "no pool '" + q.pool->substr(0, 64) + "'"));
    u.pool = static_cast<int32_t>(it - m.pools().begin());
  }
  u.to_day = UsageDayOf(now) + 1;
  if (q.to) {
    auto d = ParseUsageDay(*q.to, /*round_up=*/true);
    if (!d) return Fail(err, BadField("to", d.error().message));
    u.to_day = *d;
  }
  u.from_day = u.to_day - kUsageDaysKept;
  if (q.from) {
    auto d = ParseUsageDay(*q.from, /*round_up=*/false);
    if (!d) return Fail(err, BadField("from", d.error().message));
    u.from_day = *d;
  }
  if (u.from_day >= u.to_day) return Fail(err, BadField("to", "must be after from (whole UTC days)"));
  const UsageReport report = QueryUsage(m.usage(), u, now);
  json rows = json::array();
  for (const UsageRow& r : report.rows) rows.push_back(RowView(r, m));
  *out = json{{"from", FormatRfc3339(UsageDayStart(u.from_day))},
              {"to", FormatRfc3339(UsageDayStart(u.to_day))},
              {"by", q.by.value_or("day")},
              {"rows", std::move(rows)},
              {"truncated", report.truncated}};
  return true;
}

json JobUsageView(const JobRecord& j, Instant now) {
  return json{{"gpu_seconds", j.usage.MilliMsAt(now) / kMilliMsPerGpuSecond},
              {"gpu_memory_gib_seconds", j.usage.MemoryMibMsAt(now) / kMibMsPerGibSecond}};
}

}  // namespace gpupool
