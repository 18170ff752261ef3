// The snapshot codec (see snapshot.h for the format and what it holds).
//
// Payload, in order (U: unsigned varint, S: zigzag varint, B: one byte,
// F: 8-byte double, T: string, [..]: a U count then the items, ?x: a B flag
// then x when set):
//   state    S next_job_id, S last_seq, S now_ms, U capacity_epoch
//   pools    [U id, T name, U models, [T region], [S tenant]]
//   totals   per pool: S gpu_milli, S cpu_milli, S memory_mib, S unavailable_gpu_milli
//   tenants  [S id, T name, [per pool: S guaranteed, S elastic_limit, F weight,
//            B reserved, S gpu, S cpu, S memory, S lent, ?S below_since_ms,
//            B exhausted_alerted, S over_limit]]
//   nodes    [T name, the Node (WriteNode; version 7 adds U gpu_unhealthy, U mig_reported,
//            U mig_enabled, per GPU U mig_existing), T region, T zone, T rack, [S label count]]
//   allocs   [S node (-1: a free slot, nothing follows), U gpus, Demand, S owner,
//            S mig_profile, B mig_start, S observed_extra_mib (version 7)]
//   free     [S allocation id]
//   jobs     [Job], ascending ids (WriteJob; version 8 adds each placement's S id and S next_replica_id)
//   nominated [S neg_priority, S deadline_ms, S submitted_ms, S job]
//   reservations [S job, [S node]]
//   recut    [S moved, S beneficiary]
//   blocked  [S first job of the group, U blocked_epoch]
//   scaling  per pool: S requested_nodes, S warm_nodes; then [S draining node]
//   hot      [S node]
//   lent     [S node, B home pool]
//   regions  ?(B kind, [T name, F price, [T location, F ms]], [T tenant, T location, F budget])
//   workload (version 8) S reference_ms, S arrivals, S arrivals_since_build, [shape, F weight],
//            S built_at_ms, S built_cpu_milli, S built_gpu_milli, U builds, [shape, F weight];
//            shape: S cpu_milli, S gpu_milli, S gpu_count, U allowed_models
//   cordons  (version 9) [S node, T actor, T reason, S since_ms, B draining, S drain_deadline_ms]
#include "src/engine/snapshot.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <type_traits>
#include <utility>
#include <vector>

#include <xxhash.h>

#include "src/base/bytes.h"
#include "src/base/check.h"
#include "src/model/mig.h"

namespace gpupool {
namespace {

constexpr char kMagic[8] = {'G', 'P', 'S', 'N', 'A', 'P', '\r', '\n'};

// --- writing ----------------------------------------------------------------

class Writer {
 public:
  Writer(size_t reserve, uint32_t version) : version_(version) { out_.reserve(reserve); }
  uint32_t version() const { return version_; }

  void U(uint64_t v) {
    char buf[kMaxVarintBytes];
    out_.append(buf, EncodeVarint(v, buf));
  }
  void S(int64_t v) { U(ZigzagEncode(v)); }
  void B(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void Bool(bool v) { B(v ? 1 : 0); }
  void F(double v) {
    char buf[8];
    StoreLe(buf, std::bit_cast<uint64_t>(v), 8);
    out_.append(buf, 8);
  }
  void T(const std::string& s) {
    U(s.size());
    out_.append(s);
  }
  template <class E>
  void Enum(E e) {
    B(static_cast<uint8_t>(e));
  }
  void Time(Instant t) { S(ToMillis(t)); }
  void OptTime(const std::optional<Instant>& t) {
    Bool(t.has_value());
    if (t) Time(*t);
  }

  std::string& out() { return out_; }

 private:
  uint32_t version_;
  std::string out_;
};

void WriteDemand(Writer& w, const Demand& d) {
  w.S(d.cpu_milli);
  w.S(d.memory_mib);
  w.S(d.gpu_count);
  w.S(d.gpu_milli);
  w.U(d.allowed_models);
  w.U(d.allowed_pools);
  w.U(d.requirement);
  w.S(d.reservation);
  w.Enum(d.mode);
  w.S(d.gpu_memory_mib);
}

// Derived fields (gpu_milli_free_total, gpus_fully_free, max_gpu_free_milli,
// special_gpus, gpu_kinds_present) are recomputed on reading; per-GPU arrays
// are written for the node's GPUs only (the rest stay at their defaults).
void WriteNode(Writer& w, const Node& n) {
  w.S(n.cpu_milli_total);
  w.S(n.memory_mib_total);
  w.S(n.cpu_milli_free);
  w.S(n.memory_mib_free);
  w.B(n.gpu_model);
  w.B(n.gpu_count);
  w.B(n.pool);
  w.Enum(n.condition);
  w.U(n.attr_class);
  w.S(n.reserved_for);
  w.S(n.gpu_memory_mib);
  w.B(n.mig_table);
  w.S(n.cpu_only_residents);
  for (int k = 0; k <= n.gpu_count; ++k) w.S(n.gpu_kind_count[k]);
  for (int g = 0; g < n.gpu_count; ++g) {
    w.S(n.gpu_free_milli[g]);
    w.Enum(n.gpu_mode[g]);
    w.S(n.gpu_memory_free_mib[g]);
    w.B(n.gpu_residents[g]);
    w.B(n.mig_used_slices[g]);
    w.B(n.mig_me[g]);
    w.S(n.dirty_owner[g]);
  }
  if (w.version() < 7) return;
  w.U(n.gpu_unhealthy);  // version 7, with the MIG mode and instances the node reported
  w.U(n.mig_reported);
  w.U(n.mig_enabled);
  for (int g = 0; g < n.gpu_count; ++g) w.U(n.mig_existing[g]);
}

void WriteJob(Writer& w, const Job& j) {
  w.S(j.id);
  const JobSpec& s = j.spec;
  w.T(s.name);
  w.S(s.tenant);
  w.Enum(s.kind);
  w.S(s.priority);
  w.OptTime(s.deadline);
  w.S(s.replicas);
  WriteDemand(w, s.demand);
  w.U(s.stages.size());
  for (const Demand& d : s.stages) WriteDemand(w, d);
  w.U(s.pools.size());
  for (PoolId p : s.pools) w.B(p);
  w.Bool(s.auto_sharing);
  w.Bool(s.expected_duration.has_value());
  if (s.expected_duration) w.S(ToMillis(*s.expected_duration));
  w.Bool(s.checkpointable);
  w.S(ToMillis(s.checkpoint_interval));
  w.S(ToMillis(s.checkpoint_duration));
  w.U(s.labels);
  w.U(s.affinity);
  w.U(s.anti_affinity);
  w.U(s.task.command.size());
  for (const std::string& a : s.task.command) w.T(a);
  w.U(s.task.env.size());
  for (const auto& [k, v] : s.task.env) {
    w.T(k);
    w.T(v);
  }
  w.T(s.task.working_dir);
  w.S(s.task.checkpoint_signal);
  w.S(ToMillis(s.task.checkpoint_timeout));
  w.S(ToMillis(s.task.stop_grace));
  w.T(s.task.image);  // version 5
  w.S(s.task.shm_mib);
  w.Bool(s.task.network_isolated);
  w.S(s.min_replicas);
  w.S(s.max_replicas);

  w.Enum(j.state);
  w.Time(j.submitted);
  w.Time(j.queued_since);
  w.Time(j.started);
  w.OptTime(j.first_started);
  w.B(j.pool);
  w.Bool(j.borrowed);
  w.U(j.placements.size());
  for (const ReplicaPlacement& r : j.placements) {
    w.S(r.node);
    w.U(r.gpus);
    w.S(r.allocation);
    if (w.version() >= 8) w.S(r.id);
  }
  if (w.version() >= 8) w.S(j.next_replica_id);
  w.S(j.preemptions);
  w.S(j.preempted_by);
  w.S(j.victims_pending);
  w.Enum(j.stopping);
  w.Bool(j.idle_suspected);
  w.Time(j.idle_since);
  w.S(j.interruptions);
  w.S(j.resizes);
  w.Time(j.resharding_until);
}

// --- reading ----------------------------------------------------------------

// A bounds-checked cursor over the payload. The first failure sticks: later
// reads return zeros without reading, so a decoder reads a section straight
// through and checks ok() before it relies on what it read.
class Reader {
 public:
  explicit Reader(std::string_view bytes, uint32_t version = kSnapshotVersion)
      : begin_(bytes.data()), p_(bytes.data()), end_(bytes.data() + bytes.size()), version_(version) {}

  // The format version being read (older ones lack later fields).
  uint32_t version() const { return version_; }

  bool ok() const { return !error_; }
  bool at_end() const { return p_ == end_; }
  const Error& error() const { return *error_; }

  // Where the next reads are, for error messages: a section and an item.
  void At(const char* section, int64_t item = -1) {
    section_ = section;
    item_ = item;
  }
  void Fail(const std::string& field, const std::string& why) {
    if (error_) return;
    std::string where = std::string("snapshot: ") + section_;
    if (item_ >= 0) where += " " + std::to_string(item_);
    error_ = Error{ErrorCode::kInvalidArgument, where + ": " + field + ": " + why + " (payload byte " +
                                                    std::to_string(p_ - begin_) + ")"};
  }

  uint64_t U(const char* field) {
    if (error_) return 0;
    uint64_t v = 0;
    switch (DecodeVarint(&p_, end_, &v)) {
      case VarintRead::kOk: return v;
      case VarintRead::kTruncated: Fail(field, "truncated"); return 0;
      case VarintRead::kMalformed: Fail(field, "malformed number"); return 0;
    }
    return 0;
  }
  int64_t S(const char* field) { return ZigzagDecode(U(field)); }
  // An integer that must fit T.
  template <class T>
  T Int(const char* field) {
    if constexpr (std::is_signed_v<T>) {
      const int64_t v = S(field);
      if (std::in_range<T>(v)) return static_cast<T>(v);
    } else {
      const uint64_t v = U(field);
      if (std::in_range<T>(v)) return static_cast<T>(v);
    }
    Fail(field, "out of range");
    return T{};
  }
  uint8_t B(const char* field) {
    if (error_) return 0;
    if (p_ == end_) {
      Fail(field, "truncated");
      return 0;
    }
    return static_cast<uint8_t>(*p_++);
  }
  bool Bool(const char* field) {
    const uint8_t b = B(field);
    if (b > 1) Fail(field, "not a flag");
    return b == 1;
  }
  double F(const char* field) {
    if (error_) return 0;
    if (end_ - p_ < 8) {
      Fail(field, "truncated");
      return 0;
    }
    const double v = std::bit_cast<double>(LoadLe64(p_));
    p_ += 8;
    return v;
  }
  std::string T(const char* field) {
    const uint64_t n = U(field);
    if (error_) return {};
    if (n > static_cast<uint64_t>(end_ - p_)) {
      Fail(field, "string longer than the bytes left");
      return {};
    }
    std::string s(p_, n);
    p_ += n;
    return s;
  }
  // An enum stored as one byte, at most `last`.
  template <class E>
  E Enum(const char* field, E last) {
    const uint8_t b = B(field);
    if (b > static_cast<uint8_t>(last)) Fail(field, "unknown value " + std::to_string(b));
    return b > static_cast<uint8_t>(last) ? E{} : static_cast<E>(b);
  }
  Instant Time(const char* field) { return InstantFromMillis(S(field)); }
  std::optional<Instant> OptTime(const char* field) {
    if (!Bool(field)) return std::nullopt;
    return Time(field);
  }
  // A list's length: each item takes at least `min_item_bytes`, so a count
  // the bytes left cannot hold is damage, caught before any allocation.
  size_t Count(const char* field, size_t min_item_bytes = 1) {
    const uint64_t n = U(field);
    if (error_) return 0;
    if (n > static_cast<uint64_t>(end_ - p_) / std::max<size_t>(min_item_bytes, 1)) {
      Fail(field, "count " + std::to_string(n) + " exceeds the bytes left");
      return 0;
    }
    return static_cast<size_t>(n);
  }

 private:
  const char* begin_;
  const char* p_;
  const char* end_;
  uint32_t version_;
  const char* section_ = "header";
  int64_t item_ = -1;
  std::optional<Error> error_;
};

// Lower bounds of encoded sizes (at least one byte per field, empty strings
// and lists), for Reader::Count.
constexpr size_t kDemandMinBytes = 10;
constexpr size_t kJobMinBytes = 17 + kDemandMinBytes + 15;  // spec fields, its demand, the job's own fields
constexpr size_t kNodeMinBytes = 1 + 13 + 1 + 3 + 1;       // name, fields, a kind count, place, labels

Demand ReadDemand(Reader& r) {
  Demand d;
  d.cpu_milli = r.S("cpu_milli");
  d.memory_mib = r.S("memory_mib");
  d.gpu_count = r.Int<int32_t>("gpu_count");
  d.gpu_milli = r.Int<int32_t>("gpu_milli");
  d.allowed_models = r.U("allowed_models");
  d.allowed_pools = r.U("allowed_pools");
  d.requirement = r.Int<uint16_t>("requirement");
  d.reservation = r.S("reservation");
  d.mode = r.Enum("mode", ShareMode::kMig);
  d.gpu_memory_mib = r.Int<int32_t>("gpu_memory_mib");
  if (r.ok() && (d.gpu_count < 0 || d.gpu_count > kMaxGpusPerNode)) r.Fail("gpu_count", "out of range");
  return d;
}

Node ReadNode(Reader& r) {
  Node n;
  n.cpu_milli_total = r.S("cpu_milli_total");
  n.memory_mib_total = r.S("memory_mib_total");
  n.cpu_milli_free = r.S("cpu_milli_free");
  n.memory_mib_free = r.S("memory_mib_free");
  n.gpu_model = r.B("gpu_model");
  n.gpu_count = r.B("gpu_count");
  if (n.gpu_count > kMaxGpusPerNode) {
    r.Fail("gpu_count", "more than " + std::to_string(kMaxGpusPerNode) + " GPUs");
    return n;
  }
  n.pool = r.B("pool");
  n.condition = r.Enum("condition", NodeCondition::kRemoved);
  n.attr_class = r.Int<uint16_t>("attr_class");
  n.reserved_for = r.S("reserved_for");
  n.gpu_memory_mib = r.Int<int32_t>("gpu_memory_mib");
  n.mig_table = r.B("mig_table");
  n.cpu_only_residents = r.Int<int32_t>("cpu_only_residents");
  for (int k = 0; k <= n.gpu_count; ++k) n.gpu_kind_count[k] = r.Int<int32_t>("gpu_kind_count");
  for (int g = 0; g < n.gpu_count; ++g) {
    n.gpu_free_milli[g] = r.Int<int16_t>("gpu_free_milli");
    n.gpu_mode[g] = r.Enum("gpu_mode", GpuMode::kMig);
    n.gpu_memory_free_mib[g] = r.Int<int32_t>("gpu_memory_free_mib");
    n.gpu_residents[g] = r.B("gpu_residents");
    n.mig_used_slices[g] = r.B("mig_used_slices");
    n.mig_me[g] = r.B("mig_me");
    n.dirty_owner[g] = r.Int<int32_t>("dirty_owner");
  }
  if (r.version() >= 7) {  // version 6: all healthy, no MIG report
    n.gpu_unhealthy = r.Int<GpuMask>("gpu_unhealthy");
    n.mig_reported = r.Int<GpuMask>("mig_reported");
    n.mig_enabled = r.Int<GpuMask>("mig_enabled");
    for (int g = 0; g < n.gpu_count; ++g) n.mig_existing[g] = r.U("mig_existing");
  }
  RecomputeGpuTotals(n);
  n.gpu_kinds_present = 0;
  for (int32_t c : n.gpu_kind_count) n.gpu_kinds_present += c != 0;
  return n;
}

// The job's task (WriteJob's spec.task fields).
void ReadTaskSpec(Reader& r, TaskSpec& t) {
  const size_t args = r.Count("spec.task.command", 1);
  for (size_t i = 0; i < args && r.ok(); ++i) t.command.push_back(r.T("spec.task.command"));
  const size_t env = r.Count("spec.task.env", 2);
  for (size_t i = 0; i < env && r.ok(); ++i) {
    std::string k = r.T("spec.task.env");
    t.env.emplace_back(std::move(k), r.T("spec.task.env"));
  }
  t.working_dir = r.T("spec.task.working_dir");
  t.checkpoint_signal = r.Int<int32_t>("spec.task.checkpoint_signal");
  t.checkpoint_timeout = Duration(r.S("spec.task.checkpoint_timeout"));
  t.stop_grace = Duration(r.S("spec.task.stop_grace"));
  if (r.version() >= 5) {  // version 4: the defaults
    t.image = r.T("spec.task.image");
    t.shm_mib = r.S("spec.task.shm_mib");
    t.network_isolated = r.Bool("spec.task.network_isolated");
  }
}

// The job's spec; its derived MPS scopes are set here, not read.
void ReadJobSpec(Reader& r, JobSpec& s) {
  s.name = r.T("spec.name");
  s.tenant = r.Int<TenantId>("spec.tenant");
  s.kind = r.Enum("spec.kind", JobKind::kCpu);
  s.priority = r.Int<int32_t>("spec.priority");
  s.deadline = r.OptTime("spec.deadline");
  s.replicas = r.Int<int32_t>("spec.replicas");
  s.demand = ReadDemand(r);
  const size_t stages = r.Count("spec.stages", kDemandMinBytes);
  for (size_t i = 0; i < stages && r.ok(); ++i) s.stages.push_back(ReadDemand(r));
  const size_t pools = r.Count("spec.pools");
  for (size_t i = 0; i < pools && r.ok(); ++i) s.pools.push_back(r.B("spec.pools"));
  s.auto_sharing = r.Bool("spec.auto_sharing");
  if (r.Bool("spec.expected_duration")) s.expected_duration = Duration(r.S("spec.expected_duration"));
  s.checkpointable = r.Bool("spec.checkpointable");
  s.checkpoint_interval = Duration(r.S("spec.checkpoint_interval"));
  s.checkpoint_duration = Duration(r.S("spec.checkpoint_duration"));
  s.labels = r.U("spec.labels");
  s.affinity = r.U("spec.affinity");
  s.anti_affinity = r.U("spec.anti_affinity");
  ReadTaskSpec(r, s.task);
  s.min_replicas = r.Int<int32_t>("spec.min_replicas");
  s.max_replicas = r.Int<int32_t>("spec.max_replicas");
  ScopeMpsShares(s);  // derived, not written
}

Job ReadJob(Reader& r) {
  Job j;
  j.id = r.S("id");
  ReadJobSpec(r, j.spec);
  j.state = r.Enum("state", JobState::kEvicted);
  j.submitted = r.Time("submitted");
  j.queued_since = r.Time("queued_since");
  j.started = r.Time("started");
  j.first_started = r.OptTime("first_started");
  j.pool = r.B("pool");
  j.borrowed = r.Bool("borrowed");
  const size_t placements = r.Count("placements", 3);
  for (size_t i = 0; i < placements && r.ok(); ++i) {
    ReplicaPlacement p;
    p.node = r.Int<NodeIndex>("placements.node");
    p.gpus = r.Int<GpuMask>("placements.gpus");
    p.allocation = r.Int<AllocationId>("placements.allocation");
    // Version 7: replicas were named by position.
    p.id = r.version() >= 8 ? r.Int<int32_t>("placements.id") : static_cast<int32_t>(i);
    j.placements.push_back(p);
  }
  j.next_replica_id = r.version() >= 8 ? r.Int<int32_t>("next_replica_id") : static_cast<int32_t>(placements);
  j.preemptions = r.Int<int32_t>("preemptions");
  j.preempted_by = r.S("preempted_by");
  j.victims_pending = r.Int<int32_t>("victims_pending");
  j.stopping = r.Enum("stopping", Job::Stop::kEvictDeadline);
  j.idle_suspected = r.Bool("idle_suspected");
  j.idle_since = r.Time("idle_since");
  j.interruptions = r.Int<int32_t>("interruptions");
  j.resizes = r.Int<int32_t>("resizes");
  j.resharding_until = r.Time("resharding_until");
  return j;
}

// Checks one decoded live job against the rest of the state: everything
// later code indexes with must be in range. Returns the problem, or "".
std::string JobProblem(const EngineState& s, const Job& j, std::vector<uint8_t>& allocation_used) {
  const JobSpec& spec = j.spec;
  if (spec.tenant < 0 || static_cast<size_t>(spec.tenant) >= s.tenants.size()) return "unknown tenant";
  if (spec.replicas < 1) return "replicas must be at least 1";
  if (spec.elastic() && (spec.min_replicas < 1 || spec.min_replicas > spec.max_replicas ||
                         spec.replicas < spec.min_replicas || spec.replicas > spec.max_replicas)) {
    return "an elastic job's replicas must lie in [min_replicas, max_replicas]";
  }
  if (!spec.stages.empty() && spec.stages.size() != static_cast<size_t>(spec.replicas)) {
    return "a pipeline needs one replica per stage";
  }
  for (PoolId p : spec.pools) {
    if (p >= s.pools.size()) return "spec.pools names an unknown pool";
  }
  if (j.state != JobState::kPending && j.state != JobState::kRunning && j.state != JobState::kCheckpointing) {
    return std::string("a live job cannot be ") + JobStateName(j.state);
  }
  if (j.state == JobState::kPending) {
    if (!j.placements.empty()) return "a pending job holds placements";
    return "";
  }
  if (j.pool >= s.pools.size()) return "runs in an unknown pool";
  if (j.placements.size() != static_cast<size_t>(spec.replicas)) return "placements do not match replicas";
  const auto& slots = s.cluster.allocation_slots();
  std::set<int32_t> ids;
  for (const ReplicaPlacement& r : j.placements) {
    if (r.id < 0 || r.id >= j.next_replica_id || !ids.insert(r.id).second) {
      return "replica id " + std::to_string(r.id) + " listed twice or not below next_replica_id " +
             std::to_string(j.next_replica_id);
    }
    if (r.allocation < 0 || static_cast<size_t>(r.allocation) >= slots.size()) return "unknown allocation";
    const Allocation& a = slots[r.allocation];
    if (a.node < 0 || a.node != r.node || a.gpus != r.gpus || a.owner != spec.tenant) {
      return "placement does not match allocation " + std::to_string(r.allocation);
    }
    if (allocation_used[r.allocation]++) return "allocation " + std::to_string(r.allocation) + " held twice";
  }
  return "";
}

// The snapshot's sections, in their order; each stops at the first
// malformed field (the Reader remembers it) and checks what it read against
// what came before.
Status ReaderStatus(const Reader& r) {
  if (!r.ok()) return std::unexpected(r.error());
  return {};
}

std::unexpected<Error> SnapshotFail(const std::string& why) { return InvalidArgument("snapshot: " + why); }

Status ReadPools(Reader& r, EngineState& s) {
  const size_t pools = r.Count("pools", 5);
  if (pools > static_cast<size_t>(kMaxPools)) return SnapshotFail("more than " + std::to_string(kMaxPools) + " pools");
  for (size_t i = 0; i < pools && r.ok(); ++i) {
    r.At("pool", static_cast<int64_t>(i));
    Pool p;
    p.id = r.Int<PoolId>("id");
    p.name = r.T("name");
    p.selector.models = r.U("models");
    const size_t regions = r.Count("regions");
    for (size_t k = 0; k < regions && r.ok(); ++k) p.selector.regions.push_back(r.T("regions"));
    const size_t dedicated = r.Count("dedicated_to");
    for (size_t k = 0; k < dedicated && r.ok(); ++k) p.dedicated_to.push_back(r.Int<TenantId>("dedicated_to"));
    if (r.ok() && p.id != i) r.Fail("id", "pool ids must be 0, 1, 2, ... in order");
    s.pools.push_back(std::move(p));
  }
  for (size_t i = 0; i < pools && r.ok(); ++i) {
    r.At("pool totals", static_cast<int64_t>(i));
    EngineState::PoolTotals t;
    t.gpu_milli = r.S("gpu_milli");
    t.cpu_milli = r.S("cpu_milli");
    t.memory_mib = r.S("memory_mib");
    t.unavailable_gpu_milli = r.S("unavailable_gpu_milli");
    s.pool_totals.push_back(t);
  }
  return ReaderStatus(r);
}

Status ReadTenants(Reader& r, EngineState& s) {
  r.At("tenants");
  const size_t tenants = r.Count("tenants", 3 + s.pools.size() * 12);
  for (size_t i = 0; i < tenants && r.ok(); ++i) {
    r.At("tenant", static_cast<int64_t>(i));
    Tenant t;
    t.id = r.Int<TenantId>("id");
    t.name = r.T("name");
    const size_t tp_count = r.Count("pools", 12);
    if (r.ok() && (t.id != static_cast<TenantId>(i) || tp_count != s.pools.size())) {
      r.Fail("id", "tenant ids must be 0, 1, 2, ... in order, each with one entry per pool");
    }
    for (size_t p = 0; p < tp_count && r.ok(); ++p) {
      TenantPool tp;
      tp.quota.guaranteed_milli = r.S("quota.guaranteed_milli");
      tp.quota.elastic_limit_milli = r.S("quota.elastic_limit_milli");
      tp.quota.weight = r.F("quota.weight");
      tp.quota.reserved = r.Bool("quota.reserved");
      tp.usage.gpu_milli = r.S("usage.gpu_milli");
      tp.usage.cpu_milli = r.S("usage.cpu_milli");
      tp.usage.memory_mib = r.S("usage.memory_mib");
      tp.usage.lent_milli = r.S("usage.lent_milli");
      tp.usage.below_threshold_since = r.OptTime("usage.below_threshold_since");
      tp.usage.exhausted_alerted = r.Bool("usage.exhausted_alerted");
      tp.usage.over_limit_milli = r.S("usage.over_limit_milli");
      if (r.ok() && !(std::isfinite(tp.quota.weight) && tp.quota.weight > 0)) {
        r.Fail("quota.weight", "must be positive and finite");
      }
      t.pools.push_back(tp);
    }
    s.tenants.push_back(std::move(t));
  }
  GP_TRY(ReaderStatus(r));
  for (const Pool& p : s.pools) {
    for (TenantId t : p.dedicated_to) {
      if (t < 0 || static_cast<size_t>(t) >= s.tenants.size()) {
        return SnapshotFail("pool " + std::to_string(p.id) + ": dedicated_to names unknown tenant " + std::to_string(t));
      }
    }
  }
  return ReaderStatus(r);
}

Status ReadCluster(Reader& r, EngineState& s) {
  Cluster::Image image;
  r.At("nodes");
  const size_t nodes = r.Count("nodes", kNodeMinBytes);
  for (size_t i = 0; i < nodes && r.ok(); ++i) {
    r.At("node", static_cast<int64_t>(i));
    image.names.push_back(r.T("name"));
    image.nodes.push_back(ReadNode(r));
    EngineState::NodePlace place;
    place.region = r.T("region");
    place.zone = r.T("zone");
    place.rack = r.T("rack");
    s.node_places.push_back(std::move(place));
    const size_t labels = r.Count("label_counts");
    if (r.ok() && labels != 0 && labels != 64) r.Fail("label_counts", "must hold 0 or 64 counts");
    std::vector<int32_t> counts;
    for (size_t k = 0; k < labels && r.ok(); ++k) counts.push_back(r.Int<int32_t>("label_counts"));
    s.node_label_counts.push_back(std::move(counts));
    if (r.ok() && image.nodes.back().pool >= s.pools.size()) r.Fail("pool", "unknown pool");
  }
  r.At("allocations");
  const size_t allocations = r.Count("allocations");
  if (r.ok() && allocations > static_cast<size_t>(std::numeric_limits<AllocationId>::max())) {
    r.Fail("allocations", "too many");
  }
  for (size_t i = 0; i < allocations && r.ok(); ++i) {
    r.At("allocation", static_cast<int64_t>(i));
    Allocation a;
    a.node = r.Int<NodeIndex>("node");
    if (a.node == -1) {
      image.allocations.push_back(a);
      continue;
    }
    a.gpus = r.Int<GpuMask>("gpus");
    a.demand = ReadDemand(r);
    a.owner = r.Int<int32_t>("owner");
    a.mig_profile = r.Int<int8_t>("mig_profile");
    a.mig_start = r.B("mig_start");
    if (r.version() >= 7) a.observed_extra_mib = r.Int<int32_t>("observed_extra_mib");
    image.allocations.push_back(a);
  }
  r.At("free allocations");
  const size_t free_ids = r.Count("free_allocation_ids");
  for (size_t i = 0; i < free_ids && r.ok(); ++i) {
    image.free_allocation_ids.push_back(r.Int<AllocationId>("free_allocation_ids"));
  }
  GP_TRY(ReaderStatus(r));
  auto cluster = Cluster::FromImage(std::move(image));
  if (!cluster) return SnapshotFail(cluster.error().message);
  s.cluster = std::move(*cluster);
  return ReaderStatus(r);
}

Status ReadJobs(Reader& r, EngineState& s) {
  // Jobs, ascending ids (so unique), each checked before it is indexed.
  r.At("jobs");
  const size_t jobs = r.Count("jobs", kJobMinBytes);
  s.jobs.reserve(jobs);
  std::vector<uint8_t> allocation_used(s.cluster.allocation_slots().size(), 0);
  JobId last_id = 0;
  for (size_t i = 0; i < jobs && r.ok(); ++i) {
    r.At("job", static_cast<int64_t>(i));
    Job j = ReadJob(r);
    GP_TRY(ReaderStatus(r));
    if (j.id <= last_id || j.id >= s.next_job_id) {
      return SnapshotFail("job " + std::to_string(j.id) + ": ids must ascend and stay below next_job_id");
    }
    last_id = j.id;
    if (std::string why = JobProblem(s, j, allocation_used); !why.empty()) {
      return SnapshotFail("job " + std::to_string(j.id) + ": " + why);
    }
    s.jobs.emplace(j.id, std::move(j));
  }
  GP_TRY(ReaderStatus(r));
  if (static_cast<size_t>(std::count(allocation_used.begin(), allocation_used.end(), 1)) !=
      static_cast<size_t>(s.cluster.live_allocations())) {
    return SnapshotFail("live allocations that no job holds");
  }
  return ReaderStatus(r);
}

// Nominated preemptors, gang reservations and MIG re-cut moves.
Status ReadHolds(Reader& r, EngineState& s) {
  r.At("nominated");
  const size_t nominated = r.Count("nominated", 4);
  for (size_t i = 0; i < nominated && r.ok(); ++i) {
    QueueKey k;
    k.neg_priority = r.Int<int32_t>("neg_priority");
    k.deadline_ms = r.S("deadline_ms");
    k.submitted_ms = r.S("submitted_ms");
    k.job = r.S("job");
    if (r.ok() && !s.nominated.insert(k).second) r.Fail("nominated", "listed twice");
  }

  r.At("reservations");
  const size_t reservations = r.Count("reservations", 2);
  std::vector<uint8_t> reserved(s.cluster.node_count(), 0);
  size_t reserved_nodes = 0;
  for (size_t i = 0; i < reservations && r.ok(); ++i) {
    r.At("reservation", static_cast<int64_t>(i));
    const JobId job = r.S("job");
    std::vector<NodeIndex> held;
    const size_t count = r.Count("nodes");
    for (size_t k = 0; k < count && r.ok(); ++k) {
      const NodeIndex n = r.Int<NodeIndex>("nodes");
      if (r.ok() && (n < 0 || n >= s.cluster.node_count() || reserved[n]++ || s.cluster.node(n).reserved_for != job)) {
        r.Fail("nodes", "node " + std::to_string(n) + " is not reserved for job " + std::to_string(job));
      }
      held.push_back(n);
    }
    reserved_nodes += held.size();
    if (r.ok() && !s.reservations.emplace(job, std::move(held)).second) r.Fail("job", "listed twice");
  }
  GP_TRY(ReaderStatus(r));
  size_t marked = 0;
  for (const Node& n : s.cluster.nodes()) marked += n.reserved_for >= 0;
  if (marked != reserved_nodes) return SnapshotFail("nodes reserved for jobs that hold no reservation");

  r.At("re-cuts");
  const size_t recuts = r.Count("recut_moved", 2);
  for (size_t i = 0; i < recuts && r.ok(); ++i) {
    const JobId moved = r.S("moved");
    const JobId beneficiary = r.S("beneficiary");
    if (r.ok() && !s.recut_moved.emplace(moved, beneficiary).second) r.Fail("moved", "listed twice");
  }
  return ReaderStatus(r);
}

void IndexJobs(EngineState& s) {
  for (auto& [id, j] : s.jobs) {
    if (j.state == JobState::kPending) {
      s.queue.Add(j);
      continue;
    }
    s.running[id] = &j;
    s.running_by_tenant_pool[{j.spec.tenant, j.pool}].insert({j.spec.priority, id});
    if (j.spec.deadline) s.running_deadlines.insert({ToMillis(*j.spec.deadline), id});
  }

}

Status ReadBlockedGroups(Reader& r, EngineState& s) {
  r.At("blocked groups");
  const size_t blocked = r.Count("blocked", 2);
  for (size_t i = 0; i < blocked && r.ok(); ++i) {
    const JobId first = r.S("job");
    const uint64_t epoch = r.U("blocked_epoch");
    if (!r.ok()) break;
    const Job* j = s.find_job(first);
    if (j == nullptr || j->state != JobState::kPending || epoch == UINT64_MAX) {
      r.Fail("job", "job " + std::to_string(first) + " heads no queued group");
      break;
    }
    JobQueue::Group& g = s.queue.tenant(j->spec.tenant).groups.at(GroupKeyOf(j->spec));
    if (g.jobs.begin()->job != first || g.blocked_epoch != UINT64_MAX) {
      r.Fail("job", "job " + std::to_string(first) + " heads no queued group, or the group is listed twice");
      break;
    }
    g.blocked_epoch = epoch;
  }
  return ReaderStatus(r);
}

// Requested and warm nodes per pool, drains, hot and lent nodes.
Status ReadScalingState(Reader& r, EngineState& s) {
  r.At("scaling");
  s.pool_scaling.assign(s.pools.size(), {});
  for (EngineState::PoolScaling& p : s.pool_scaling) {
    const int64_t requested = r.S("requested_nodes"), warm = r.S("warm_nodes");
    if (r.ok() && (requested < 0 || requested > INT32_MAX || warm < 0 || warm > INT32_MAX)) {
      r.Fail("requested_nodes", "out of range");
    }
    p.requested_nodes = static_cast<int32_t>(requested);
    p.warm_nodes = static_cast<int32_t>(warm);
  }
  const size_t draining = r.Count("draining");
  for (size_t i = 0; i < draining && r.ok(); ++i) {
    const int64_t n = r.S("node");
    if (!r.ok()) break;
    if (n < 0 || n >= s.cluster.node_count() || !s.draining.insert(static_cast<NodeIndex>(n)).second) {
      r.Fail("node", "node " + std::to_string(n) + " unknown or listed twice");
      break;
    }
    const NodeCondition c = s.cluster.node(static_cast<NodeIndex>(n)).condition;
    if (c != NodeCondition::kCordoned && c != NodeCondition::kDown) r.Fail("node", "drained node " + std::to_string(n) + " is not cordoned");
  }
  r.At("hot");
  const size_t hot = r.Count("hot");
  for (size_t i = 0; i < hot && r.ok(); ++i) {
    const int64_t n = r.S("node");
    if (!r.ok()) break;
    if (n < 0 || n >= s.cluster.node_count() || !s.hot_nodes.insert(static_cast<NodeIndex>(n)).second ||
        s.cluster.node(static_cast<NodeIndex>(n)).condition != NodeCondition::kCordoned) {
      r.Fail("node", "hot node " + std::to_string(n) + " unknown, listed twice or not cordoned");
      break;
    }
  }
  r.At("lent");
  const size_t lent = r.Count("lent", 2);
  for (size_t i = 0; i < lent && r.ok(); ++i) {
    const int64_t n = r.S("node");
    const PoolId home = r.B("home");
    if (!r.ok()) break;
    if (n < 0 || n >= s.cluster.node_count() || home >= s.pools.size() ||
        s.cluster.node(static_cast<NodeIndex>(n)).pool == home ||
        !s.lent_nodes.emplace(static_cast<NodeIndex>(n), home).second) {
      r.Fail("node", "lent node " + std::to_string(n) + " unknown, listed twice, or home pool unknown or its own");
      break;
    }
  }
  return ReaderStatus(r);
}

Status ReadRegions(Reader& r, EngineState& s) {
  r.At("regions");
  if (r.Bool("regions")) {
    RegionPolicy p;
    const uint8_t kind = r.B("kind");
    if (kind > static_cast<uint8_t>(RegionPolicy::Kind::kNearest)) r.Fail("kind", "unknown region policy");
    p.kind = static_cast<RegionPolicy::Kind>(kind);
    const size_t regions = r.Count("regions", 3);
    for (size_t i = 0; i < regions && r.ok(); ++i) {
      RegionInfo info;
      info.name = r.T("name");
      info.price_per_gpu_hour = r.F("price");
      const size_t latencies = r.Count("latency_ms", 9);
      for (size_t k = 0; k < latencies && r.ok(); ++k) {
        std::string location = r.T("location");
        info.latency_ms[location] = r.F("ms");
      }
      p.regions.push_back(std::move(info));
    }
    const size_t users = r.Count("users", 10);
    for (size_t i = 0; i < users && r.ok(); ++i) {
      TenantUsers u;
      u.tenant = r.T("tenant");
      u.location = r.T("location");
      u.latency_budget_ms = r.F("budget");
      p.users.push_back(std::move(u));
    }
    if (r.ok()) {
      if (auto ok = CheckRegionPolicy(p); !ok) r.Fail("regions", ok.error().message);
    }
    s.regions = std::move(p);
  }
  return ReaderStatus(r);
}

std::map<LearnedShape, double> ReadLearnedShapes(Reader& r, const char* field) {
  std::map<LearnedShape, double> out;
  const size_t n = r.Count(field, 12);
  for (size_t i = 0; i < n && r.ok(); ++i) {
    const auto cpu = r.Int<int64_t>("cpu_milli");
    const auto milli = r.Int<int32_t>("gpu_milli");
    const auto count = r.Int<int32_t>("gpu_count");
    const auto models = r.Int<GpuModelMask>("allowed_models");
    const double weight = r.F("weight");
    if (r.ok() && !out.emplace(LearnedShape{cpu, milli, count, models}, weight).second) {
      r.Fail(field, "a shape listed twice");
    }
  }
  return out;
}

// Version 7 and older: nothing learned yet (the prior alone).
Status ReadWorkload(Reader& r, EngineState& s) {
  if (r.version() < 8) return {};
  r.At("workload");
  WorkloadLearnerImage image;
  image.reference = r.Time("reference");
  image.arrivals = r.S("arrivals");
  image.arrivals_since_build = r.S("arrivals_since_build");
  image.weights = ReadLearnedShapes(r, "weights");
  image.built_at = r.Time("built_at");
  image.built_cpu_milli = r.S("built_cpu_milli");
  image.built_gpu_milli = r.S("built_gpu_milli");
  image.builds = r.U("builds");
  image.built = ReadLearnedShapes(r, "built");
  GP_TRY(ReaderStatus(r));
  auto learner = WorkloadLearner::FromImage(std::move(image));
  if (!learner) return SnapshotFail("workload: " + learner.error().message);
  s.workload = std::move(*learner);
  return {};
}

// Issue 19: operators' cordons. Version 8 and older: none.
Status ReadCordons(Reader& r, EngineState& s) {
  if (r.version() < 9) return {};
  r.At("cordons");
  const size_t count = r.Count("cordons", 6);
  for (size_t i = 0; i < count && r.ok(); ++i) {
    const int64_t n = r.S("node");
    EngineState::OperatorCordon c;
    c.actor = r.T("actor");
    c.reason = r.T("reason");
    c.since = r.Time("since");
    c.draining = r.Bool("draining");
    c.drain_deadline = r.Time("drain_deadline");
    if (!r.ok()) break;
    if (n < 0 || n >= s.cluster.node_count() || s.cordons.contains(static_cast<NodeIndex>(n))) {
      r.Fail("node", "cordoned node " + std::to_string(n) + " unknown or listed twice");
      break;
    }
    const NodeCondition cond = s.cluster.node(static_cast<NodeIndex>(n)).condition;
    if (cond != NodeCondition::kCordoned && cond != NodeCondition::kDown) {
      r.Fail("node", "cordoned node " + std::to_string(n) + " is neither cordoned nor down");
      break;
    }
    s.cordons.emplace(static_cast<NodeIndex>(n), std::move(c));
  }
  return ReaderStatus(r);
}

Status ReadState(Reader& r, EngineState& s) {
  r.At("state");
  s.next_job_id = r.S("next_job_id");
  s.last_seq = r.S("last_seq");
  s.now = r.Time("now");
  s.capacity_epoch = r.U("capacity_epoch");
  GP_TRY(ReadPools(r, s));
  GP_TRY(ReadTenants(r, s));
  GP_TRY(ReadCluster(r, s));
  GP_TRY(ReadJobs(r, s));
  GP_TRY(ReadHolds(r, s));
  // The indexes that are functions of the live jobs, as Apply keeps them.
  IndexJobs(s);
  GP_TRY(ReadBlockedGroups(r, s));
  GP_TRY(ReadScalingState(r, s));
  GP_TRY(ReadRegions(r, s));
  GP_TRY(ReadWorkload(r, s));
  GP_TRY(ReadCordons(r, s));
  for (const Node& n : s.cluster.nodes()) s.removed_nodes += n.condition == NodeCondition::kRemoved;
  if (!r.at_end()) return SnapshotFail("bytes left after the last section");
  return {};
}

}  // namespace

uint64_t SnapshotChecksum(std::string_view payload) { return XXH3_64bits(payload.data(), payload.size()); }

uint64_t LegacySnapshotChecksum(std::string_view payload) {
  // Per 8-byte word: xor in, multiply by an odd constant, fold the high half
  // down; each step is a bijection of the running hash, so a change within
  // one word always changes the result. MurmurHash3's finalizer at the end.
  constexpr uint64_t kMul = 0x9e3779b97f4a7c15ULL;
  uint64_t h = 0x243f6a8885a308d3ULL ^ payload.size();
  const char* p = payload.data();
  size_t left = payload.size();
  for (; left >= 8; p += 8, left -= 8) {
    h = (h ^ LoadLe64(p)) * kMul;
    h ^= h >> 32;
  }
  if (left > 0) {
    char tail[8] = {};
    std::memcpy(tail, p, left);
    h = (h ^ LoadLe64(tail)) * kMul;
    h ^= h >> 32;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

namespace {

// The sections ReadState reads, in the same order.
void WritePools(Writer& w, const EngineState& s) {
  w.U(s.pools.size());
  for (const Pool& p : s.pools) {
    w.U(p.id);
    w.T(p.name);
    w.U(p.selector.models);
    w.U(p.selector.regions.size());
    for (const std::string& region : p.selector.regions) w.T(region);
    w.U(p.dedicated_to.size());
    for (TenantId t : p.dedicated_to) w.S(t);
  }
  for (const EngineState::PoolTotals& t : s.pool_totals) {
    w.S(t.gpu_milli);
    w.S(t.cpu_milli);
    w.S(t.memory_mib);
    w.S(t.unavailable_gpu_milli);
  }
}

void WriteTenants(Writer& w, const EngineState& s) {
  w.U(s.tenants.size());
  for (const Tenant& t : s.tenants) {
    w.S(t.id);
    w.T(t.name);
    w.U(t.pools.size());
    for (const TenantPool& tp : t.pools) {
      w.S(tp.quota.guaranteed_milli);
      w.S(tp.quota.elastic_limit_milli);
      w.F(tp.quota.weight);
      w.Bool(tp.quota.reserved);
      w.S(tp.usage.gpu_milli);
      w.S(tp.usage.cpu_milli);
      w.S(tp.usage.memory_mib);
      w.S(tp.usage.lent_milli);
      w.OptTime(tp.usage.below_threshold_since);
      w.Bool(tp.usage.exhausted_alerted);
      w.S(tp.usage.over_limit_milli);
    }
  }
}

void WriteCluster(Writer& w, const EngineState& s) {
  const Cluster& c = s.cluster;
  w.U(c.node_count());
  for (NodeIndex i = 0; i < c.node_count(); ++i) {
    w.T(c.node_name(i));
    WriteNode(w, c.node(i));
    const EngineState::NodePlace& place = s.node_places[i];
    w.T(place.region);
    w.T(place.zone);
    w.T(place.rack);
    w.U(s.node_label_counts[i].size());
    for (int32_t count : s.node_label_counts[i]) w.S(count);
  }
  w.U(c.allocation_slots().size());
  for (const Allocation& a : c.allocation_slots()) {
    w.S(a.node);
    if (a.node < 0) continue;
    w.U(a.gpus);
    WriteDemand(w, a.demand);
    w.S(a.owner);
    w.S(a.mig_profile);
    w.B(a.mig_start);
    if (w.version() >= 7) w.S(a.observed_extra_mib);
  }
  w.U(c.free_allocation_ids().size());
  for (AllocationId id : c.free_allocation_ids()) w.S(id);
}

void WriteJobs(Writer& w, const EngineState& s) {
  std::vector<const Job*> jobs;
  jobs.reserve(s.jobs.size());
  for (const auto& [id, j] : s.jobs) jobs.push_back(&j);
  std::sort(jobs.begin(), jobs.end(), [](const Job* a, const Job* b) { return a->id < b->id; });
  w.U(jobs.size());
  for (const Job* j : jobs) WriteJob(w, *j);
}

void WriteHolds(Writer& w, const EngineState& s) {
  w.U(s.nominated.size());
  for (const QueueKey& k : s.nominated) {
    w.S(k.neg_priority);
    w.S(k.deadline_ms);
    w.S(k.submitted_ms);
    w.S(k.job);
  }
  w.U(s.reservations.size());
  for (const auto& [job, held] : s.reservations) {
    w.S(job);
    w.U(held.size());
    for (NodeIndex n : held) w.S(n);
  }
  w.U(s.recut_moved.size());
  for (const auto& [moved, beneficiary] : s.recut_moved) {
    w.S(moved);
    w.S(beneficiary);
  }
}

void WriteBlockedGroups(Writer& w, const EngineState& s) {
  // By tenant, then group order.
  std::vector<std::pair<JobId, uint64_t>> blocked;
  for (TenantId t : s.queue.tenants()) {
    for (const auto& [key, group] : s.queue.find_tenant(t)->groups) {
      if (group.blocked_epoch != UINT64_MAX) blocked.emplace_back(group.jobs.begin()->job, group.blocked_epoch);
    }
  }
  w.U(blocked.size());
  for (const auto& [job, epoch] : blocked) {
    w.S(job);
    w.U(epoch);
  }
}

void WriteScalingState(Writer& w, const EngineState& s) {
  for (const EngineState::PoolScaling& p : s.pool_scaling) {
    w.S(p.requested_nodes);
    w.S(p.warm_nodes);
  }
  w.U(s.draining.size());
  for (NodeIndex n : s.draining) w.S(n);
  w.U(s.hot_nodes.size());
  for (NodeIndex n : s.hot_nodes) w.S(n);
  w.U(s.lent_nodes.size());
  for (const auto& [n, home] : s.lent_nodes) {
    w.S(n);
    w.B(home);
  }
}

void WriteRegions(Writer& w, const EngineState& s) {
  w.Bool(s.regions.has_value());
  if (s.regions) {
    w.B(static_cast<uint8_t>(s.regions->kind));
    w.U(s.regions->regions.size());
    for (const RegionInfo& r : s.regions->regions) {
      w.T(r.name);
      w.F(r.price_per_gpu_hour);
      w.U(r.latency_ms.size());
      for (const auto& [location, ms] : r.latency_ms) {
        w.T(location);
        w.F(ms);
      }
    }
    w.U(s.regions->users.size());
    for (const TenantUsers& u : s.regions->users) {
      w.T(u.tenant);
      w.T(u.location);
      w.F(u.latency_budget_ms);
    }
  }
}

}  // namespace

void WriteLearnedShapes(Writer& w, const std::map<LearnedShape, double>& shapes) {
  w.U(shapes.size());
  for (const auto& [shape, weight] : shapes) {
    w.S(std::get<0>(shape));
    w.S(std::get<1>(shape));
    w.S(std::get<2>(shape));
    w.U(std::get<3>(shape));
    w.F(weight);
  }
}

void WriteWorkload(Writer& w, const EngineState& s) {
  if (w.version() < 8) return;
  const WorkloadLearnerImage& image = s.workload.image();
  w.Time(image.reference);
  w.S(image.arrivals);
  w.S(image.arrivals_since_build);
  WriteLearnedShapes(w, image.weights);
  w.Time(image.built_at);
  w.S(image.built_cpu_milli);
  w.S(image.built_gpu_milli);
  w.U(image.builds);
  WriteLearnedShapes(w, image.built);
}

void WriteCordons(Writer& w, const EngineState& s) {
  if (w.version() < 9) return;
  w.U(s.cordons.size());
  for (const auto& [n, c] : s.cordons) {
    w.S(n);
    w.T(c.actor);
    w.T(c.reason);
    w.Time(c.since);
    w.Bool(c.draining);
    w.Time(c.drain_deadline);
  }
}

std::string EncodeSnapshot(const EngineState& s) { return EncodeSnapshotAs(s, kSnapshotVersion); }

std::string EncodeSnapshotAs(const EngineState& s, uint32_t version) {
  GP_CHECK(version >= 6 && version <= kSnapshotVersion) << "snapshot version " << version;
  const Cluster& c = s.cluster;
  Writer w(kSnapshotHeaderBytes + 256 + c.nodes().size() * 160 + c.allocation_slots().size() * 32 +
               s.jobs.size() * 96,
           version);
  w.out().append(kSnapshotHeaderBytes, '\0');  // the header, filled in at the end

  w.S(s.next_job_id);
  w.S(s.last_seq);
  w.Time(s.now);
  w.U(s.capacity_epoch);

  WritePools(w, s);
  WriteTenants(w, s);
  WriteCluster(w, s);
  WriteJobs(w, s);
  WriteHolds(w, s);
  WriteBlockedGroups(w, s);
  WriteScalingState(w, s);
  WriteRegions(w, s);
  WriteWorkload(w, s);
  WriteCordons(w, s);

  std::string& out = w.out();
  const std::string_view payload(out.data() + kSnapshotHeaderBytes, out.size() - kSnapshotHeaderBytes);
  std::memcpy(out.data(), kMagic, 8);
  StoreLe(out.data() + 8, version, 4);
  StoreLe(out.data() + 12, payload.size(), 8);
  StoreLe(out.data() + 20, SnapshotChecksum(payload), 8);
  return std::move(out);
}

Result<EngineState> DecodeSnapshot(std::string_view bytes, LendingConfig lending) {
  if (bytes.size() < kSnapshotHeaderBytes) {
    return InvalidArgument("snapshot: " + std::to_string(bytes.size()) + " bytes, shorter than the header");
  }
  if (std::memcmp(bytes.data(), kMagic, 8) != 0) return InvalidArgument("snapshot: not a gpupool snapshot (magic)");
  uint32_t version = 0;
  for (int i = 0; i < 4; ++i) version |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[8 + i])) << (8 * i);
  if (version < kOldestSnapshotVersion || version > kSnapshotVersion) {
    return FailedPrecondition("snapshot: version " + std::to_string(version) + ", this program reads versions " +
                              std::to_string(kOldestSnapshotVersion) + " to " + std::to_string(kSnapshotVersion));
  }
  const uint64_t length = LoadLe64(bytes.data() + 12);
  if (length != bytes.size() - kSnapshotHeaderBytes) {
    return InvalidArgument("snapshot: header says " + std::to_string(length) + " payload bytes, " +
                           std::to_string(bytes.size() - kSnapshotHeaderBytes) + " follow (truncated?)");
  }
  const std::string_view payload = bytes.substr(kSnapshotHeaderBytes);
  const uint64_t checksum = version >= 6 ? SnapshotChecksum(payload) : LegacySnapshotChecksum(payload);
  if (LoadLe64(bytes.data() + 20) != checksum) {
    return InvalidArgument("snapshot: checksum mismatch: the checksum at byte offset 20 does not match bytes " +
                           std::to_string(kSnapshotHeaderBytes) + " to " + std::to_string(bytes.size() - 1) +
                           " (damaged)");
  }
  EngineState s(lending);
  Reader r(payload, version);
  GP_TRY(ReadState(r, s));
  if (auto ok = CheckInvariants(s); !ok) {
    return InvalidArgument("snapshot: " + ok.error().message);
  }
  return s;
}

}  // namespace gpupool
