#include "src/server/usage.h"

#include <algorithm>
#include <string>

#include "src/base/time_text.h"

namespace gpupool {
namespace {

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// What `u`'s rates accrue over `ms` milliseconds.
UsageAmounts Over(const UsageAccount& u, int64_t ms) {
  const int64_t effective = std::max<int64_t>(0, u.guaranteed_milli - u.lent_milli);
  const int64_t within = std::clamp<int64_t>(u.held_milli, 0, effective);
  UsageAmounts a;
  a.guaranteed_milli_ms = within * ms;
  a.borrowed_milli_ms = std::max<int64_t>(0, u.held_milli - within) * ms;
  a.lent_milli_ms = u.lent_milli * ms;
  a.memory_mib_ms = std::max<int64_t>(0, u.held_memory_mib) * ms;
  return a;
}

bool Idle(const UsageAccount& u) { return u.held_milli <= 0 && u.held_memory_mib <= 0 && u.lent_milli <= 0; }

// Calls f(day, ms) for each piece of [from, to) cut at UTC midnights, only
// over the last kUsageDaysKept days before `to` (older ones are dropped).
template <class F>
void SplitByDay(Instant from, Instant to, F&& f) {
  int64_t a = ToMillis(from);
  const int64_t b = ToMillis(to);
  const int64_t oldest = (FloorDiv(b - 1, kMillisPerDay) - kUsageDaysKept + 1) * kMillisPerDay;
  a = std::max(a, oldest);
  while (a < b) {
    const int64_t day = FloorDiv(a, kMillisPerDay);
    const int64_t end = std::min(b, (day + 1) * kMillisPerDay);
    f(static_cast<int32_t>(day), end - a);
    a = end;
  }
}

// The day's roll-up, appended when it is newer than the last; days older
// than the newest's kUsageDaysKept leave.
UsageAmounts& DayOf(std::vector<UsageDay>& days, int32_t day) {
  if (days.empty() || days.back().day < day) {
    days.push_back(UsageDay{day, {}});
    const int32_t oldest = day - kUsageDaysKept + 1;
    if (days.front().day < oldest) {
      auto keep = std::lower_bound(days.begin(), days.end(), oldest,
                                   [](const UsageDay& d, int32_t v) { return d.day < v; });
      days.erase(days.begin(), keep);
    }
    return days.back().amounts;
  }
  // Not newer (events are in time order, so only the same day): found from the back.
  auto it = std::lower_bound(days.begin(), days.end(), day, [](const UsageDay& d, int32_t v) { return d.day < v; });
  if (it == days.end() || it->day != day) it = days.insert(it, UsageDay{day, {}});
  return it->amounts;
}

void PutAmounts(ByteWriter& w, const UsageAmounts& a) {
  w.Put(a.guaranteed_milli_ms);
  w.Put(a.borrowed_milli_ms);
  w.Put(a.lent_milli_ms);
  w.Put(a.memory_mib_ms);
  w.Put(a.jobs_started);
}

UsageAmounts GetAmounts(ByteReader& r) {
  UsageAmounts a;
  a.guaranteed_milli_ms = r.Get<int64_t>();
  a.borrowed_milli_ms = r.Get<int64_t>();
  a.lent_milli_ms = r.Get<int64_t>();
  a.memory_mib_ms = r.Get<int64_t>();
  a.jobs_started = r.Get<int64_t>();
  return a;
}

}  // namespace

int32_t UsageDayOf(Instant t) { return static_cast<int32_t>(FloorDiv(ToMillis(t), kMillisPerDay)); }

// Day 0 (1970-01-01) was a Thursday: Monday is 3 days before it.
int32_t UsageWeekStart(int32_t day) { return day - static_cast<int32_t>(((int64_t{day} + 3) % 7 + 7) % 7); }

Result<int32_t> ParseUsageDay(std::string_view text, bool round_up) {
  std::string t(text.substr(0, 64));
  if (t.size() == 10) t += "T00:00:00Z";
  auto at = ParseRfc3339(t);
  if (!at) {
    return InvalidArgument("expected a date (YYYY-MM-DD) or an RFC 3339 time such as \"2026-11-29T12:00:00Z\" (got \"" +
                           std::string(text.substr(0, 64)) + "\")");
  }
  const int64_t ms = ToMillis(*at);
  const int64_t day = round_up ? FloorDiv(ms + kMillisPerDay - 1, kMillisPerDay) : FloorDiv(ms, kMillisPerDay);
  if (day < INT32_MIN / 2 || day > INT32_MAX / 2) return InvalidArgument("out of range (got \"" + t + "\")");
  return static_cast<int32_t>(day);
}

UsageAmounts& UsageAmounts::operator+=(const UsageAmounts& o) {
  guaranteed_milli_ms += o.guaranteed_milli_ms;
  borrowed_milli_ms += o.borrowed_milli_ms;
  lent_milli_ms += o.lent_milli_ms;
  memory_mib_ms += o.memory_mib_ms;
  jobs_started += o.jobs_started;
  return *this;
}

void UsageLedger::Resize(size_t tenants, size_t pools) {
  pools_ = std::max(pools, pools_);
  if (tenants > table_.size()) table_.resize(tenants);
  for (auto& row : table_) row.resize(pools_);
}

UsageAccount* UsageLedger::at(TenantId t, PoolId p) {
  if (t < 0 || static_cast<size_t>(t) >= table_.size() || p >= table_[t].size()) return nullptr;
  return &table_[t][p];
}

const UsageAccount* UsageLedger::find(TenantId t, PoolId p) const {
  return const_cast<UsageLedger*>(this)->at(t, p);
}

void UsageLedger::Accrue(UsageAccount& u, Instant to) {
  if (u.accrued && to > u.accrued_to && !Idle(u)) {
    SplitByDay(u.accrued_to, to, [&](int32_t day, int64_t ms) { DayOf(u.days, day) += Over(u, ms); });
  }
  if (!u.accrued || to > u.accrued_to) u.accrued_to = to;
  u.accrued = true;
}

void UsageLedger::Hold(TenantId t, PoolId p, int64_t gpu_milli, int64_t memory_mib, Instant at) {
  UsageAccount* u = this->at(t, p);
  if (!u) return;
  Accrue(*u, at);
  u->held_milli += gpu_milli;
  u->held_memory_mib += memory_mib;
}

void UsageLedger::CountStart(TenantId t, PoolId p, Instant at) {
  UsageAccount* u = this->at(t, p);
  if (!u) return;
  Accrue(*u, at);
  ++DayOf(u->days, UsageDayOf(at)).jobs_started;
}

void UsageLedger::SetQuota(TenantId t, PoolId p, const Quota& q, Instant at) {
  UsageAccount* u = this->at(t, p);
  if (!u) return;
  Accrue(*u, at);
  u->guaranteed_milli = q.guaranteed_milli;
  if (u->lent_milli > q.guaranteed_milli || q.reserved) u->lent_milli = 0;
}

void UsageLedger::Lend(TenantId t, PoolId p, int64_t milli, Instant at) {
  UsageAccount* u = this->at(t, p);
  if (!u) return;
  Accrue(*u, at);
  u->lent_milli = std::max<int64_t>(0, u->lent_milli + milli);
}

void UsageLedger::Seed(TenantId t, PoolId p, int64_t held_milli, int64_t held_memory_mib, int64_t guaranteed_milli) {
  UsageAccount* u = this->at(t, p);
  if (!u) return;
  u->held_milli += held_milli;
  u->held_memory_mib += held_memory_mib;
  u->guaranteed_milli = guaranteed_milli;
}

void UsageLedger::StartSeeded(Instant at) {
  for (auto& row : table_) {
    for (UsageAccount& u : row) {
      if (!u.accrued && !Idle(u)) {
        u.accrued = true;
        u.accrued_to = at;
      }
    }
  }
}

std::vector<UsageDay> UsageLedger::Days(TenantId t, PoolId p, int32_t from_day, int32_t to_day, Instant now) const {
  std::vector<UsageDay> out;
  const UsageAccount* u = find(t, p);
  if (!u || from_day >= to_day) return out;
  auto lo = std::lower_bound(u->days.begin(), u->days.end(), from_day,
                             [](const UsageDay& d, int32_t v) { return d.day < v; });
  for (auto it = lo; it != u->days.end() && it->day < to_day; ++it) out.push_back(*it);
  if (u->accrued && now > u->accrued_to && !Idle(*u)) {
    std::vector<UsageDay> pending;
    SplitByDay(u->accrued_to, now, [&](int32_t day, int64_t ms) {
      if (day >= from_day && day < to_day) DayOf(pending, day) += Over(*u, ms);
    });
    for (const UsageDay& d : pending) DayOf(out, d.day) += d.amounts;
  }
  return out;
}

void UsageLedger::Encode(ByteWriter& w) const {
  w.Put<uint64_t>(table_.size());
  w.Put<uint64_t>(pools());
  for (const auto& row : table_) {
    for (const UsageAccount& u : row) {
      w.Put(u.held_milli);
      w.Put(u.held_memory_mib);
      w.Put(u.guaranteed_milli);
      w.Put(u.lent_milli);
      w.Put<uint8_t>(u.accrued);
      w.Put<int64_t>(ToMillis(u.accrued_to));
      w.Put<uint64_t>(u.days.size());
      for (const UsageDay& d : u.days) {
        w.Put(d.day);
        PutAmounts(w, d.amounts);
      }
    }
  }
}

void UsageLedger::Decode(ByteReader& r, UsageLedger& out) {
  constexpr size_t kMinEntryBytes = 8 * 4 + 1 + 8 + 8;
  constexpr size_t kDayBytes = 4 + 8 * 5;
  const uint64_t tenants = r.GetCount(1);
  const uint64_t pools = r.Get<uint64_t>();
  if (r.failed() || pools > 64 || (pools > 0 && tenants > r.remaining() / (pools * kMinEntryBytes))) {
    r.Fail();
    return;
  }
  out.Resize(tenants, pools);
  for (auto& row : out.table_) {
    for (UsageAccount& u : row) {
      u.held_milli = r.Get<int64_t>();
      u.held_memory_mib = r.Get<int64_t>();
      u.guaranteed_milli = r.Get<int64_t>();
      u.lent_milli = r.Get<int64_t>();
      u.accrued = r.Get<uint8_t>();
      u.accrued_to = InstantFromMillis(r.Get<int64_t>());
      const uint64_t days = r.GetCount(kDayBytes);
      if (days > static_cast<uint64_t>(kUsageDaysKept)) r.Fail();
      for (uint64_t i = 0; i < days && !r.failed(); ++i) {
        UsageDay d;
        d.day = r.Get<int32_t>();
        d.amounts = GetAmounts(r);
        if (!u.days.empty() && d.day <= u.days.back().day) r.Fail();
        u.days.push_back(d);
      }
      if (r.failed()) return;
    }
  }
}

bool operator==(const UsageLedger& a, const UsageLedger& b) {
  if (a.table_.size() != b.table_.size() || a.pools_ != b.pools_) return false;
  for (size_t t = 0; t < a.table_.size(); ++t) {
    if (a.table_[t].size() != b.table_[t].size()) return false;
    for (size_t p = 0; p < a.table_[t].size(); ++p) {
      const UsageAccount &x = a.table_[t][p], &y = b.table_[t][p];
      if (x.held_milli != y.held_milli || x.held_memory_mib != y.held_memory_mib ||
          x.guaranteed_milli != y.guaranteed_milli || x.lent_milli != y.lent_milli || x.accrued != y.accrued ||
          x.accrued_to != y.accrued_to || x.days.size() != y.days.size()) {
        return false;
      }
      for (size_t i = 0; i < x.days.size(); ++i) {
        if (x.days[i].day != y.days[i].day || x.days[i].amounts != y.days[i].amounts) return false;
      }
    }
  }
  return true;
}

namespace {

// The period a day falls in, clipped to the query.
std::pair<int32_t, int32_t> PeriodOf(int32_t day, const UsageQuery& q) {
  switch (q.by) {
    case UsagePeriod::kDay: return {day, day + 1};
    case UsagePeriod::kWeek: {
      const int32_t start = UsageWeekStart(day);
      return {std::max(start, q.from_day), std::min(start + 7, q.to_day)};
    }
    case UsagePeriod::kTotal: break;
  }
  return {q.from_day, q.to_day};
}

}  // namespace

UsageReport QueryUsage(const UsageLedger& ledger, const UsageQuery& q, Instant now) {
  UsageReport report;
  for (size_t t = 0; t < ledger.tenants(); ++t) {
    if (q.tenant >= 0 && static_cast<TenantId>(t) != q.tenant) continue;
    for (size_t p = 0; p < ledger.pools(); ++p) {
      if (q.pool >= 0 && static_cast<int32_t>(p) != q.pool) continue;
      const std::vector<UsageDay> days =
          ledger.Days(static_cast<TenantId>(t), static_cast<PoolId>(p), q.from_day, q.to_day, now);
      for (const UsageDay& d : days) {
        if (d.amounts.empty()) continue;
        const auto [start, end] = PeriodOf(d.day, q);
        std::vector<UsageRow>& rows = report.rows;
        const bool same = !rows.empty() && rows.back().tenant == static_cast<TenantId>(t) &&
                          rows.back().pool == static_cast<PoolId>(p) && rows.back().start_day == start;
        if (!same) {
          if (rows.size() == q.max_rows) {
            report.truncated = true;
            return report;
          }
          rows.push_back(UsageRow{static_cast<TenantId>(t), static_cast<PoolId>(p), start, end, {}});
        }
        rows.back().amounts += d.amounts;
      }
    }
  }
  return report;
}

int64_t JobUsage::MilliMsAt(Instant now) const {
  return milli_ms + (held_milli > 0 && now > since ? held_milli * ToMillis(now - since) : 0);
}

int64_t JobUsage::MemoryMibMsAt(Instant now) const {
  return memory_mib_ms + (held_memory_mib > 0 && now > since ? held_memory_mib * ToMillis(now - since) : 0);
}

}  // namespace gpupool
