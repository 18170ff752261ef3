// The discrete-event simulator around the Engine: a virtual clock and an
// event heap keyed by (time, sequence). It plays the part of the world:
// jobs arrive, start after a modelled start latency, run for their work,
// checkpoint when asked (for their checkpoint duration), and the control
// loops tick. Everything it learns comes back from the Engine's events.
//
// Progress: a job keeps the work it saved. A checkpointed preemption saves
// everything run so far; otherwise the run since the last periodic
// checkpoint (or since start) is lost, and reported.
//
// At one instant the order is: completions, finished checkpoints, arrivals,
// then the tick. Same inputs, same events.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "src/base/sha256.h"
#include "src/base/status.h"
#include "src/engine/engine.h"
#include "src/sim/metrics.h"
#include "src/sim/workload.h"

namespace gpupool {

struct SimOptions {
  Duration tick{std::chrono::seconds(30)};
  Duration start_latency{std::chrono::seconds(10)};
  Duration sample_every{std::chrono::minutes(5)};
  Duration horizon{std::chrono::hours(24)};
  std::string event_log_path;     // when set, every event as one JSON line
  bool check_invariants = false;  // CheckInvariants after every event (tests)
};

class Simulator {
 public:
  // `engine` must be set up (pools, nodes, tenants, quotas) and outlive the
  // simulator; `jobs` sorted by arrival.
  Simulator(Engine* engine, std::vector<SimJob> jobs, SimOptions options);

  // The sink for set-up commands issued before Run (pools, nodes, tenants,
  // quotas), so that the event log holds the whole history.
  Engine::Sink sink() { return [this](const Event& e) { OnEvent(e); }; }

  // Runs to the horizon. Fails when the event log cannot be written, an
  // invariant breaks (with check_invariants), or the engine refuses a job.
  Result<SimReport> Run(const std::string& scenario_name);

  const std::vector<SimJob>& jobs() const { return jobs_; }

 private:
  enum class Kind : uint8_t { kCompletion = 0, kCheckpointDone = 1, kTick = 3 };
  struct Item {
    Instant at;
    Kind kind;
    int64_t seq;
    JobId job;
    uint64_t token;  // completion: must match the job's current run
    bool operator>(const Item& o) const {
      if (at != o.at) return at > o.at;
      if (kind != o.kind) return kind > o.kind;
      return seq > o.seq;
    }
  };
  struct Running {
    size_t index = 0;        // into jobs_
    Duration done{0};        // work saved
    Instant run_start{};     // when the current run began computing
    bool running = false;
    uint64_t token = 0;
  };

  void Push(Instant at, Kind kind, JobId job = -1, uint64_t token = 0);
  void OnEvent(const Event& e);
  Duration Elapsed(const Running& r, Instant now) const;

  Engine* engine_;
  std::vector<SimJob> jobs_;
  SimOptions options_;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap_;
  int64_t seq_ = 0;
  std::unordered_map<JobId, Running> live_;
  size_t submitting_ = 0;  // the sim job being submitted
  MetricsCollector metrics_;
  Sha256 hash_;
  std::ofstream log_;
  int64_t events_ = 0;
  Status failure_;
};

}  // namespace gpupool
