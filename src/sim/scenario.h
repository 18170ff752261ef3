// Scenario files for `gpupool sim run`: a cluster configuration
// (src/config/cluster_config.h: pools, tenants, quotas, nodes, the engine's
// settings) plus what only a simulation has: a workload, injected faults, a
// provider model, sharing costs and a horizon. The format is documented in
// docs/scenarios.md; scenarios/ holds examples and the claims.
//
// LoadScenario validates everything before returning (src/config/
// yaml_reader.h): an unknown key, a wrong type, a negative size or an
// unknown name is an Error naming the file, line, column and the key's path
// (e.g.
// "claims/C-LEND.yaml:12:7: tenants[1].quota.a100.guaranteed_gpus: must not
// be negative").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/base/time.h"
#include "src/config/cluster_config.h"
#include "src/engine/engine.h"
#include "src/model/job.h"
#include "src/sched/attributes.h"
#include "src/sched/comm_model.h"

namespace gpupool {

// A distribution of job durations.
struct DurationModel {
  // kServingLifetimes: lifetimes of the DLRM serving trace's GPU instances
  // (those with a creation and a deletion time), times `scale`.
  enum class Kind { kFixed, kLogNormal, kPhilly, kServingLifetimes };
  Kind kind = Kind::kFixed;
  Duration fixed{std::chrono::minutes(30)};
  double median_s = 0, sigma = 0;  // kLogNormal
  double scale = 1.0;              // multiplies every sample (kPhilly, kServingLifetimes)
  Duration min{std::chrono::seconds(1)};
  Duration max{std::chrono::hours(24 * 7)};
  // kServingLifetimes: only lifetimes shorter than this (0: all of them).
  Duration below{0};
};

// What users declare as a job's expected duration (the request's
// `expected_duration`, which the sharing-mode policy reads, PART-3): nothing,
// one figure for every job of a template, or the job's real run time
// (lifetime, for online inference) times `bias` times e^(sigma Z), Z a
// standard normal drawn per job: a user's estimate with a log-normal error
// (sigma 0.5: half the estimates within a factor of 1.4 of the truth, 95%
// within a factor of 2.7). At least one second; rounded to the second.
struct EstimateModel {
  enum class Kind { kNone, kFixed, kLogNormalError };
  Kind kind = Kind::kNone;
  Duration fixed{0};
  double sigma = 0, bias = 1;
};

// The think time of Scenario::think_time when a scenario does not give one.
inline DurationModel DefaultThinkTime() {
  DurationModel m;
  m.kind = DurationModel::Kind::kLogNormal;
  m.median_s = 600;
  m.sigma = 1.0;
  m.min = std::chrono::minutes(1);
  m.max = std::chrono::hours(8);
  return m;
}

// How busy a job keeps its GPUs over time (RECLAIM-1; interference): the
// fraction of a whole GPU it keeps busy when it runs alone there (what
// nvidia-smi shows), so co-located shares can together want more than 100%.
struct UtilizationModel {
  enum class Kind {
    kConstant,  // `busy` all the time
    kBursty,    // busy (`busy`) for `busy_for`, then idle (`idle`) for `idle_for`, repeating
    kTrace,     // a real per-pod duty-cycle series (Alibaba GenAI 2026), one pod per job in turn
  };
  Kind kind = Kind::kConstant;
  double busy = 0.9;   // fraction of the GPU it keeps busy
  double idle = 0.02;
  Duration busy_for{std::chrono::minutes(30)}, idle_for{std::chrono::minutes(30)};
  Duration phase_jitter{0};  // each job starts its cycle at a random offset below this
  // False when the job template does not say: then constant at 90% of the
  // job's GPU share (0.9 of a whole GPU, 0.225 for a quarter share).
  bool given = false;
};

// One stage of a pipeline job (PART-4), placed with the others on one node.
struct StageTemplate {
  std::string name;
  int32_t gpu_milli = 250;        // a share of one GPU
  int32_t gpu_memory_mib = 0;
  std::string mode = "time-slice";  // time-slice, mps or mig
  int64_t cpu_milli = 2000;
  int64_t memory_mib = 8192;
};

// One kind of job a tenant submits.
struct JobTemplate {
  double weight = 1;        // relative frequency in the tenant's mix
  std::string name;
  JobKind kind = JobKind::kTraining;
  std::string priority;     // a class name of Scenario::priorities
  int32_t gpus = 1;         // GPUs per replica: 1 with gpu_milli < 1000 for a share; 0 = CPU-only
  int32_t gpu_milli = 1000; // per GPU: below 1000 means a share of one GPU
  int64_t cpu_milli = 4000;
  int64_t memory_mib = 16384;
  std::vector<int32_t> replicas = {1};  // drawn uniformly
  int32_t max_replicas = 0;  // > 0: elastic (SCALE-7), from the drawn replicas up to this
  bool checkpointable = false;
  Duration checkpoint_interval{0};
  Duration checkpoint_duration{std::chrono::seconds(30)};
  std::optional<Duration> deadline_after;  // deadline = submit time + this
  std::vector<std::string> pools;          // empty = any of the tenant's
  std::string requirement;                 // a requirement name, or empty
  // Affinity rules (QUOTA-6) over the cluster's job_labels: this job's
  // labels; it must land on nodes running a job with one of `affinity`, and
  // never on nodes running a job with one of `anti_affinity`.
  LabelMask labels = 0, affinity = 0, anti_affinity = 0;
  DurationModel duration;
  // What the job's request declares as its expected duration.
  EstimateModel expected_duration;
  // Sharing (PART-1..4): "any" (the FGD model), "time-slice", "mps", "mig",
  // or "auto" (the engine's sharing policy chooses, from kind, memory and
  // the declared expected duration).
  std::string sharing = "any";
  int32_t gpu_memory_mib = 0;              // per GPU, for shares
  std::vector<StageTemplate> stages;       // non-empty: a pipeline
  UtilizationModel utilization;
  // Data-parallel training's communication (TOPO-1): each step computes for
  // `step_compute`, then the replicas all-reduce `model_gib` of gradients
  // (src/sched/comm_model.h); the step's communication slows the job down.
  // 0: the job does not communicate.
  double model_gib = 0;
  Duration step_compute{std::chrono::seconds(1)};
};

struct ArrivalProcess {
  enum class Kind { kPoisson, kDiurnal };
  Kind kind = Kind::kPoisson;
  double rate_per_hour = 10;  // mean rate
  // Diurnal: rate(t) = mean * (1 + amplitude * cos(2 pi (t - peak_hour) / 24 h)).
  double amplitude = 0.5;     // in [0, 1]
  double peak_hour = 14;
  Duration start{0};
  Duration stop{std::chrono::hours(24)};
};

struct TenantWorkload {
  std::string tenant;
  ArrivalProcess arrivals;
  std::vector<JobTemplate> jobs;
};

// Replay of an openb pod list: pods arrive at creation_time and run until
// deletion_time (times shifted so the first arrival is at 0).
struct TraceWorkload {
  std::string pods_path;    // resolved against the scenario file's folder or $GPUPOOL_TRACES
  std::string tenant;       // every pod belongs to this tenant
  std::string priority;
  std::optional<int> limit; // only the first N pods
  // Arrivals `arrival_speedup` times closer together (run times kept), to
  // load a cluster the trace's sample of pods would leave nearly idle.
  double arrival_speedup = 1;
  // Pods created before this (after the first creation) are left out, and
  // time starts here.
  Duration skip{0};
  // The pods can checkpoint (the trace does not say), taking this long.
  bool checkpointable = false;
  Duration checkpoint_duration{std::chrono::seconds(30)};
};

// A node failure to inject: the node stops heartbeating at `at` and comes
// back `down_for` later.
struct FaultSpec {
  std::string node;  // a node name
  Duration at{0};
  Duration down_for{std::chrono::minutes(10)};
};

// A GPU that turns unhealthy for a while (EXEC-11): from `at` the node's
// agent reports it unhealthy with critical XID `xid`, and healthy again
// `unhealthy_for` later. The engine places nothing on it meanwhile and
// moves what can move off it; the simulator lets the rest run on.
struct GpuFaultSpec {
  std::string node;  // a node name
  int gpu = 0;       // index on the node
  Duration at{0};
  Duration unhealthy_for{std::chrono::minutes(30)};
  int xid = 79;  // "GPU has fallen off the bus"
};

// An operator's node command at `at` (issue 19): the Engine's CordonNode,
// UncordonNode, DrainNode (with `timeout`) or RemoveNode (with `force`),
// as the API's POST /v1/nodes/{name}/cordon ... would run it, with actor
// "scenario".
struct NodeOpSpec {
  enum class Action : uint8_t { kCordon, kUncordon, kDrain, kRemove } action = Action::kCordon;
  std::string node;  // a node name
  Duration at{0};
  Duration timeout{std::chrono::hours(1)};  // kDrain
  bool force = false;                       // kRemove
  std::string reason;
};

// A node that runs hot for a while (OPS-2): its GPUs report
// `temperature_c` from `at` for `hot_for`; other nodes report a
// temperature that follows their GPUs' allocation (40 C idle, 80 C full).
struct HotSpell {
  std::string node;  // a node name
  Duration at{0};
  Duration hot_for{std::chrono::minutes(30)};
  double temperature_c = 95;
};

// What sharing costs in the simulator (PART-1): time-slicing switches
// contexts (a fixed overhead when two or more tasks share a GPU) and slows
// co-located tasks down when together they want more than the whole GPU;
// MPS has the contention but not the switch overhead; MIG and whole GPUs
// neither.
struct SharingCosts {
  double time_slice_overhead = 0.04;  // 3-5% per the seeds
  Duration mig_setup{std::chrono::seconds(3)};   // creating a GPU instance
  Duration scrub{std::chrono::milliseconds(500)};
  double checkpoint_overhead = 0.025;  // periodic asynchronous checkpoints (RECLAIM-3: 2-3%)
  // A job that saved work reads it back before computing again: this times
  // its checkpoint_duration (our assumption: reading takes as long as writing).
  double restore_factor = 1.0;
  LinkBandwidths links;                // TOPO-1 communication model
};

// The simulated node provider (SCALE-1, SCALE-5): how long a node takes to
// join after a scale-out asks for it, cold (booted, driver and image
// loaded) or from the warm pool (pre-initialised), and what nodes cost.
// A node costs from the request until it is removed; warm nodes cost
// `warm_price_fraction` of the price while they wait (stopped instances).
struct ProviderModel {
  Duration cold_start{std::chrono::minutes(5)};
  Duration warm_start{std::chrono::seconds(30)};
  double price_per_node_hour = 1.0;
  double warm_price_fraction = 0.1;
};

struct Scenario : ClusterConfig {
  std::string path;         // where it was loaded from
  Duration horizon{std::chrono::hours(24)};  // the simulation stops here (running jobs are counted as unfinished)
  // engine.tick, engine.start_latency, engine.sample_every, engine.costs:
  // simulator settings kept in the engine section.
  Duration tick{std::chrono::seconds(30)};
  Duration start_latency{std::chrono::seconds(10)};
  Duration sample_every{std::chrono::minutes(5)};
  std::vector<TenantWorkload> workloads;
  std::optional<TraceWorkload> trace;
  std::vector<FaultSpec> faults;
  std::vector<HotSpell> hot_spells;  // needs engine.hotspots
  std::vector<GpuFaultSpec> gpu_faults;
  std::vector<NodeOpSpec> node_ops;  // in the file's order (same-time commands run in it)
  SharingCosts costs;
  ProviderModel provider;  // for engine.scaling
  // How long the owner of a job reclaimed while idle takes to come back and
  // submit it again (fixed or lognormal): an assumption of ours, since the
  // seeds say nothing; by default a median of 10 minutes, sigma 1, between
  // 1 minute and 8 hours.
  DurationModel think_time = DefaultThinkTime();
};

// Reads and validates a scenario file.
Result<Scenario> LoadScenario(const std::string& path);
// Parses scenario text; `source` names it in messages, `base_dir` resolves
// relative trace paths.
Result<Scenario> ParseScenario(std::string_view text, std::string_view source, const std::string& base_dir);

}  // namespace gpupool
