// GPU usage accounting (issue 19, like Slurm's sacct): GPU-seconds and
// GPU-memory-seconds per tenant and pool, by tier, rolled up per UTC day.
//
// The read model drives it from the committed events as it applies them
// (ReadModel::Apply), so a server that restarts from a snapshot and
// replays the journal after it reaches the same totals as one that replays
// the whole journal: nothing here reads a clock; the only instants are the
// events' (and, for reading, the caller's `now`, which is never stored).
//
// What is counted, for each tenant and pool, over time:
//   held       the GPU milli the tenant's running (or checkpointing) jobs
//              hold there: each job's JobSpec::total_gpu_milli(), the same
//              charge its quota sees. A shared GPU counts by its fraction:
//              a time-slice or MPS share of gpu_milli counts gpu_milli/1000
//              of a GPU, a MIG instance the fraction its profile is charged
//              (MigChargedMilli: the slices it takes of the GPU's 7 or 8),
//              a whole GPU 1. Held from JobPlaced until the job's resources
//              are released (JobFinished, JobCancelled, JobPreempted,
//              JobReclaimed, JobInterrupted); JobResized changes it.
//   tiers      guaranteed = min(held, max(0, guarantee - lent)), the part
//              within the tenant's effective guarantee (src/model/tenant.h);
//              borrowed = held - guaranteed, beyond it: the same split as
//              TenantPool::borrowed_milli(), at tenant and pool level.
//   lent       the part of its guarantee the tenant lent to the others
//              (QuotaLent until QuotaRecalled, or a QuotaSet that ends the
//              loan as EngineState applies it), whether or not they used it.
//   memory     the GPU memory the jobs hold: per replica, a whole GPU its
//              model's memory (Catalog::Builtin()), a share its
//              gpu_memory_mib, or, when it asks none, its fraction of the
//              GPU's memory.
//   jobs       jobs whose first run began (their first JobPlaced), in the
//              pool and on the day it began: a job that is preempted and
//              placed again counts once.
// Amounts are integers: GPU milli x milliseconds (1 GPU-second is
// 1,000,000) and MiB x milliseconds, exact under any order of summing.
//
// Bounds: 80 bytes per tenant and pool, plus at most kUsageDaysKept day
// roll-ups of 48 bytes each (days without usage are not stored): at most
// tenants x pools x 19.3 KB, e.g. 100 tenants in 4 pools 7.7 MB. When a
// tenant and pool's newest day is D, days before D - 399 are dropped.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "src/base/bytes.h"
#include "src/base/status.h"
#include "src/base/time.h"
#include "src/model/job.h"
#include "src/model/tenant.h"

namespace gpupool {

inline constexpr int32_t kUsageDaysKept = 400;
inline constexpr int64_t kMillisPerDay = 86'400'000;

// UTC days since the Unix epoch (the server's timeline is Unix milliseconds).
int32_t UsageDayOf(Instant t);
inline Instant UsageDayStart(int32_t day) { return InstantFromMillis(int64_t{day} * kMillisPerDay); }
// The Monday (ISO 8601 weeks) on or before `day`.
int32_t UsageWeekStart(int32_t day);

// "2026-12-04" (that day's midnight UTC) or an RFC 3339 time, as a day:
// rounded down (`round_up` false) or up to a midnight. Fails with "expected
// a date (YYYY-MM-DD) or an RFC 3339 time (...)".
Result<int32_t> ParseUsageDay(std::string_view text, bool round_up);

struct UsageAmounts {
  int64_t guaranteed_milli_ms = 0;  // GPU milli x ms within the effective guarantee
  int64_t borrowed_milli_ms = 0;    // GPU milli x ms beyond it
  int64_t lent_milli_ms = 0;        // guarantee lent to others, GPU milli x ms
  int64_t memory_mib_ms = 0;        // GPU memory held, MiB x ms
  int64_t jobs_started = 0;
  UsageAmounts& operator+=(const UsageAmounts& o);
  bool empty() const { return *this == UsageAmounts{}; }
  friend bool operator==(const UsageAmounts&, const UsageAmounts&) = default;
};

struct UsageDay {
  int32_t day = 0;  // UsageDayOf
  UsageAmounts amounts;
};

// One tenant in one pool: what it holds now, and its day roll-ups.
struct UsageAccount {
  int64_t held_milli = 0;
  int64_t held_memory_mib = 0;
  int64_t guaranteed_milli = 0;
  int64_t lent_milli = 0;
  // The amounts are accrued up to here; unset until the first event that
  // concerns the tenant and pool (or, after a snapshot older than
  // accounting loads, the first one after it).
  bool accrued = false;
  Instant accrued_to{};
  std::vector<UsageDay> days;  // ascending; at most kUsageDaysKept
};

// Thread-safety: none; the read model's lock guards it.
class UsageLedger {
 public:
  // Grows the [tenant][pool] table to at least this size (never shrinks).
  void Resize(size_t tenants, size_t pools);

  // Each accrues the tenant and pool up to `at` (its rates so far), then
  // changes it. A tenant or pool outside the table is ignored. Requires
  // `at` at or after the previous call's for the same tenant and pool (the
  // journal's order); an earlier one accrues nothing.
  void Hold(TenantId t, PoolId p, int64_t gpu_milli, int64_t memory_mib, Instant at);  // negative releases
  void CountStart(TenantId t, PoolId p, Instant at);
  // As EngineState applies QuotaSet: a guarantee below the loan, or a
  // reserved quota, ends the loan.
  void SetQuota(TenantId t, PoolId p, const Quota& q, Instant at);
  void Lend(TenantId t, PoolId p, int64_t milli, Instant at);  // negative recalls; never below 0
  // For a read-model snapshot older than accounting: sets what the tenant
  // holds in the pool and its guarantee without accruing anything (the
  // first event after it starts the accrual).
  void Seed(TenantId t, PoolId p, int64_t held_milli, int64_t held_memory_mib, int64_t guaranteed_milli);
  // Starts the accrual at `at` of every tenant and pool that holds or lends
  // something and has never accrued (only seeded ones can be so).
  // O(tenants x pools); the read model calls it at the first event after a
  // snapshot loads.
  void StartSeeded(Instant at);

  size_t tenants() const { return table_.size(); }
  size_t pools() const { return pools_; }
  const UsageAccount* find(TenantId t, PoolId p) const;

  // The tenant and pool's amounts for each day in [from_day, to_day) that
  // has any, ascending, including what its rates accrued since the last
  // event up to `now` (not stored: reading changes nothing).
  std::vector<UsageDay> Days(TenantId t, PoolId p, int32_t from_day, int32_t to_day, Instant now) const;

  void Encode(ByteWriter& w) const;
  // Into an empty ledger; stops at the first malformed field (r.failed()).
  static void Decode(ByteReader& r, UsageLedger& out);

  friend bool operator==(const UsageLedger&, const UsageLedger&);

 private:
  UsageAccount* at(TenantId t, PoolId p);
  static void Accrue(UsageAccount& u, Instant to);

  std::vector<std::vector<UsageAccount>> table_;  // [tenant][pool]
  size_t pools_ = 0;
};

// GET /v1/usage's query, in days.
enum class UsagePeriod : uint8_t { kDay, kWeek, kTotal };
struct UsageQuery {
  TenantId tenant = -1;  // -1: every tenant
  int32_t pool = -1;     // -1: every pool
  int32_t from_day = 0;  // inclusive
  int32_t to_day = 0;    // exclusive
  UsagePeriod by = UsagePeriod::kDay;
  size_t max_rows = 10000;
};
// One tenant, pool and period: [start_day, end_day), clipped to the query.
struct UsageRow {
  TenantId tenant = -1;
  PoolId pool = 0;
  int32_t start_day = 0, end_day = 0;
  UsageAmounts amounts;
};
struct UsageReport {
  std::vector<UsageRow> rows;  // by tenant, pool, start; periods without usage left out
  bool truncated = false;      // more rows than max_rows matched
};
UsageReport QueryUsage(const UsageLedger& ledger, const UsageQuery& q, Instant now);

// A job's own usage (JobRecord::usage): what it holds now and has accrued.
struct JobUsage {
  int64_t held_milli = 0, held_memory_mib = 0;
  int64_t milli_ms = 0, memory_mib_ms = 0;  // accrued over its ended runs and up to `since`
  Instant since{};                          // start of the accrual in progress (while held)
  // Up to `now` (now before `since` adds nothing).
  int64_t MilliMsAt(Instant now) const;
  int64_t MemoryMibMsAt(Instant now) const;
  friend bool operator==(const JobUsage&, const JobUsage&) = default;
};

}  // namespace gpupool
