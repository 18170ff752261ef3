// Canonical JSON encoding of events (nlohmann::json objects keep keys
// sorted, so the text is a pure function of the event).
#include <nlohmann/json.hpp>

#include "src/engine/event.h"

namespace gpupool {
namespace {

using nlohmann::json;

json DemandJson(const Demand& d) {
  json j{{"cpu_milli", d.cpu_milli},
         {"memory_mib", d.memory_mib},
         {"gpu_count", d.gpu_count},
         {"gpu_milli", d.gpu_milli},
         {"models", d.allowed_models},
         {"pools", d.allowed_pools},
         {"requirement", d.requirement}};
  if (d.mode != ShareMode::kAny) j["mode"] = ShareModeName(d.mode);
  if (d.gpu_memory_mib != 0) j["gpu_memory_mib"] = d.gpu_memory_mib;
  return j;
}

json SpecJson(const JobSpec& s) {
  json j{{"name", s.name},
         {"tenant", s.tenant},
         {"kind", JobKindName(s.kind)},
         {"priority", s.priority},
         {"replicas", s.replicas},
         {"demand", DemandJson(s.demand)},
         {"pools", s.pools},
         {"checkpointable", s.checkpointable},
         {"auto_sharing", s.auto_sharing},
         {"checkpoint_interval_ms", ToMillis(s.checkpoint_interval)},
         {"checkpoint_duration_ms", ToMillis(s.checkpoint_duration)},
         {"labels", s.labels},
         {"affinity", s.affinity},
         {"anti_affinity", s.anti_affinity}};
  if (s.deadline) j["deadline_ms"] = ToMillis(*s.deadline);
  if (s.expected_duration) j["expected_duration_ms"] = ToMillis(*s.expected_duration);
  if (!s.stages.empty()) {
    json stages = json::array();
    for (const Demand& d : s.stages) stages.push_back(DemandJson(d));
    j["stages"] = std::move(stages);
  }
  return j;
}

json QuotaJson(const Quota& q) {
  return json{{"guaranteed_milli", q.guaranteed_milli},
              {"elastic_limit_milli", q.elastic_limit_milli},
              {"weight", q.weight},
              {"reserved", q.reserved}};
}

struct BodyJson {
  json& j;
  void operator()(const PoolAdded& e) {
    j["pool"] = e.pool.id;
    j["name"] = e.pool.name;
    j["models"] = e.pool.selector.models;
    j["regions"] = e.pool.selector.regions;
    j["dedicated_to"] = e.pool.dedicated_to;
  }
  void operator()(const NodeAdded& e) {
    j["node"] = e.spec.name;
    j["cpu_milli"] = e.spec.cpu_milli;
    j["memory_mib"] = e.spec.memory_mib;
    j["gpus"] = e.spec.gpu_count;
    j["model"] = e.spec.gpu_model;
    j["pool"] = e.spec.pool;
    j["attr_class"] = e.spec.attr_class;
    j["region"] = e.region;
    j["zone"] = e.zone;
    j["rack"] = e.rack;
  }
  void operator()(const TenantAdded& e) {
    j["tenant"] = e.tenant;
    j["name"] = e.name;
  }
  void operator()(const QuotaSet& e) {
    j["tenant"] = e.tenant;
    j["pool"] = e.pool;
    j["quota"] = QuotaJson(e.quota);
  }
  void operator()(const JobSubmitted& e) {
    j["job"] = e.job;
    j["spec"] = SpecJson(e.spec);
  }
  void operator()(const JobRejected& e) {
    j["job"] = e.job;
    j["spec"] = SpecJson(e.spec);
    j["reason"] = e.reason;
  }
  void operator()(const JobPlaced& e) {
    j["job"] = e.job;
    j["pool"] = e.pool;
    j["borrowed"] = e.borrowed;
    json replicas = json::array();
    for (const auto& r : e.replicas) replicas.push_back(json{{"node", r.node}, {"gpus", r.gpus}});
    j["replicas"] = std::move(replicas);
  }
  void operator()(const JobFinished& e) {
    j["job"] = e.job;
    j["succeeded"] = e.succeeded;
  }
  void operator()(const JobCancelled& e) { j["job"] = e.job; }
  void operator()(const PreemptionStarted& e) {
    j["victim"] = e.victim;
    j["preemptor"] = e.preemptor;
    j["reason"] = PreemptReasonName(e.reason);
    j["checkpoint"] = e.checkpoint;
  }
  void operator()(const JobPreempted& e) {
    j["victim"] = e.victim;
    j["lost_work_ms"] = ToMillis(e.lost_work);
  }
  void operator()(const QuotaLent& e) {
    j["tenant"] = e.tenant;
    j["pool"] = e.pool;
    j["milli"] = e.milli;
  }
  void operator()(const QuotaRecalled& e) {
    j["tenant"] = e.tenant;
    j["pool"] = e.pool;
    j["milli"] = e.milli;
  }
  void operator()(const QuotaExhausted& e) {
    j["tenant"] = e.tenant;
    j["pool"] = e.pool;
    j["job"] = e.job;
  }
  void operator()(const NodesReserved& e) {
    j["job"] = e.job;
    j["nodes"] = e.nodes;
  }
  void operator()(const ReservationReleased& e) { j["job"] = e.job; }
  void operator()(const JobIdleSuspected& e) { j["job"] = e.job; }
  void operator()(const JobIdleRecovered& e) { j["job"] = e.job; }
  void operator()(const ReclaimStarted& e) {
    j["job"] = e.job;
    j["reason"] = ReclaimReasonName(e.reason);
    j["checkpoint"] = e.checkpoint;
  }
  void operator()(const JobReclaimed& e) { j["job"] = e.job; }
  void operator()(const NodeDown& e) { j["node"] = e.node; }
  void operator()(const JobInterrupted& e) {
    j["job"] = e.job;
    j["node"] = e.node;
    j["lost_work_ms"] = ToMillis(e.lost_work);
  }
  void operator()(const NodeUp& e) { j["node"] = e.node; }
  void operator()(const GpusScrubbed& e) {
    j["node"] = e.node;
    j["gpus"] = e.gpus;
  }
  void operator()(const MigRecutStarted& e) {
    j["job"] = e.job;
    j["node"] = e.node;
    j["gpu"] = e.gpu;
    j["profile"] = e.profile;
    j["start"] = e.start;
    j["moved"] = e.moved;
  }
};

}  // namespace

const char* PreemptReasonName(PreemptReason r) {
  switch (r) {
    case PreemptReason::kGuaranteeReclaim: return "guarantee-reclaim";
    case PreemptReason::kPriority: return "priority";
    case PreemptReason::kMigRecut: return "mig-recut";
  }
  return "unknown";
}

const char* ReclaimReasonName(ReclaimReason r) {
  return r == ReclaimReason::kIdle ? "idle" : "deadline";
}

const char* EventName(const EventBody& body) {
  static constexpr const char* kNames[] = {
      "PoolAdded",   "NodeAdded",    "TenantAdded",       "QuotaSet",     "JobSubmitted", "JobRejected",
      "JobPlaced",   "JobFinished",  "JobCancelled",      "PreemptionStarted", "JobPreempted", "QuotaLent",
      "QuotaRecalled", "QuotaExhausted", "NodesReserved", "ReservationReleased", "GpusScrubbed",
      "JobIdleSuspected", "JobIdleRecovered", "ReclaimStarted", "JobReclaimed", "NodeDown", "JobInterrupted",
      "NodeUp", "MigRecutStarted"};
  static_assert(std::size(kNames) == std::variant_size_v<EventBody>);
  return kNames[body.index()];
}

std::string ToJsonLine(const Event& e) {
  json j{{"seq", e.seq}, {"at", ToMillis(e.at)}, {"type", EventName(e.body)}};
  std::visit(BodyJson{j}, e.body);
  return j.dump();
}

}  // namespace gpupool
