// Test data (tests only): one event of every type, each field away from its
// default, shared by the codec tests (src/engine/event_codec_test.cc) and
// the journal format's pins (tests/event_format_test.cc, whose fixtures
// were written from these events: change them only with the fixtures).
#pragma once

#include <chrono>
#include <vector>

#include "src/engine/event.h"

namespace gpupool {

using namespace std::chrono_literals;

inline Demand EveryDemandField(int32_t gpu_milli, ShareMode mode) {
  Demand d;
  d.cpu_milli = 4000;
  d.memory_mib = 8192;
  d.gpu_count = 1;
  d.gpu_milli = gpu_milli;
  d.allowed_models = 0b1010;
  d.allowed_pools = 0b11;
  d.requirement = 2;
  d.reservation = 41;
  d.mode = mode;
  d.gpu_memory_mib = 10240;
  return d;
}

inline JobSpec EverySpecField() {
  JobSpec s;
  s.name = "fine-tune \"v2\" \xc3\xa9t\xc3\xa9";  // quotes and UTF-8
  s.tenant = 3;
  s.kind = JobKind::kBatchInference;
  s.priority = -7;
  s.deadline = InstantFromMillis(86'400'000);
  s.replicas = 2;
  s.min_replicas = 2;
  s.max_replicas = 4;
  s.demand = EveryDemandField(500, ShareMode::kMps);
  s.stages = {EveryDemandField(140, ShareMode::kMig), EveryDemandField(250, ShareMode::kTimeSlice)};
  s.pools = {0, 5};
  s.auto_sharing = true;
  s.expected_duration = 90min;
  s.checkpointable = true;
  s.checkpoint_interval = 30min;
  s.checkpoint_duration = 45s;
  s.labels = uint64_t{1} << 63;
  s.affinity = 0b100;
  s.anti_affinity = 0b1000;
  s.task.command = {"python", "train.py", "--lr=3e-4", ""};
  s.task.env = {{"A", "1"}, {"WANDB_MODE", "offline \"quoted\""}};
  s.task.working_dir = "/data/run";
  s.task.checkpoint_signal = 12;
  s.task.checkpoint_timeout = 90s;
  s.task.stop_grace = 5s;
  s.task.image = "/var/lib/gpupool/images/pytorch \"2.4\"";
  s.task.shm_mib = 16384;
  s.task.network_isolated = true;
  return s;
}

// One event of every type, in the variant's order, each field away from
// its default (for a list: not empty; for an enum: not its first value).
inline std::vector<Event> EveryEventType() {
  const Pool pool{4, "h100-east", PoolSelector{GpuModelMask{0b110}, {"east", "west"}}, {1, 2}};
  const NodeSpec node{"h100-7", 224000, 2 << 20, 8, 5, 4, 3};
  const Quota quota{24000, 64000, 0.1 + 0.2, true};  // a weight with no short decimal form
  const RegionPolicy regions{RegionPolicy::Kind::kNearest,
                             {{"east", 2.5 + 0.1, {{"shanghai", 5}, {"beijing", 28.25}}}, {"west", 1.4, {{"x", 1}}}},
                             {{"shop", "shanghai", 30}}};
  const std::vector<EventBody> bodies = {
      PoolAdded{pool},
      NodeAdded{node, "east", "east-1", "east-1-rack-0", true},
      TenantAdded{2, "research"},
      QuotaSet{2, 4, quota},
      JobSubmitted{17, EverySpecField()},
      JobRejected{18, EverySpecField(), "needs 9 GPUs on one node"},
      JobPlaced{17, 4, true, {{3, 0b11}, {5, 0x8000}}},
      JobFinished{17, false, "out of memory (limit 2 GiB)"},
      JobCancelled{19},
      PreemptionStarted{20, 21, PreemptReason::kMigRecut, true},
      JobPreempted{20, 1234ms},
      QuotaLent{2, 4, 7200},
      QuotaRecalled{2, 4, 3600},
      QuotaExhausted{2, 4, 22},
      NodesReserved{23, {1, 6, 9}},
      ReservationReleased{23},
      GpusScrubbed{6, 0b1010'0000},
      JobIdleSuspected{24},
      JobIdleRecovered{24},
      ReclaimStarted{25, ReclaimReason::kDeadline, true},
      JobReclaimed{25},
      NodeDown{6},
      JobInterrupted{26, 6, 99s},
      NodeUp{6},
      MigRecutStarted{27, 6, 3, "3g.40gb", 4, {28, 29}},
      ScaleOutRequested{4, 3, "utilization 0.91 over 5m"},
      ScaleOutFailed{4, 1, "quota exceeded at the provider"},
      NodeDrainStarted{6, "utilization 0.12 over 10m"},
      NodeRemoved{6},
      WarmPoolSized{4, 2},
      MigrationStarted{30, 7, 0b0110, 12.5 + 0.1},
      JobResized{31, {1, 3}, {{4, 0b1}, {9, 0b1100}}, true, 45s, "node n4 drains: utilization 0.12 over 10m"},
      HotspotDetected{6, 0b11, "GPU 0 temperature 91 C above 85 C for 300 s"},
      HotspotCleared{6},
      NodeLent{8, 2, "pool train is short: utilization 0.95 over 5m"},
      NodeReturned{8},
      RegionsSet{regions},
      GpuHealthChanged{6, 0b101, "GPU 0: XID 79; GPU 2: nvmlDeviceGetMemoryInfo failed"},
      TaskMemoryObserved{33, 1, 20736},
      MigLayoutReported{2, 1, true, {{"4g.40gb", 1}, {"3g.40gb", 4}}},
      MigLayoutMismatch{2, 1, "4g.40gb@0", "3g.40gb@0 (job 7)"},
      NodeCordoned{6, "admin", "replacing a fan"},
      NodeUncordoned{6, "reader:ops"},
      NodeDrainRequested{6, "admin", "kernel upgrade", 600s},
      NodeDrained{6},
      NodeRemovalRequested{6, "admin", "decommissioned", true},
  };
  std::vector<Event> events;
  for (size_t i = 0; i < bodies.size(); ++i) {
    const auto n = static_cast<int64_t>(i);
    events.push_back(Event{100 + n, InstantFromMillis(5000 + 10 * n), bodies[i]});
  }
  return events;
}

}  // namespace gpupool
