#include "src/agent/agent.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include "src/agent/cuda_cap_env.h"
#include "src/agent/jitter.h"
#include "src/agent/metrics_listener.h"
#include "src/agent/mps_daemons.h"
#include "src/agent/oci_runtime.h"
#include "src/agent/proc_stat.h"
#include "src/agent/process_runtime.h"
#include "src/base/http_client.h"
#include "src/base/time_text.h"

namespace gpupool {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

constexpr int64_t kMaxLogChunk = 64 << 10;  // per task per heartbeat
constexpr uintmax_t kMaxActionLogBytes = 16 << 20;  // agent.log, then agent.log.1

// Makes `dir` and its parents, trying the directory itself first: most
// parents exist, so a task start costs one mkdir per directory instead of a
// stat per level and then the mkdirs (issue 18).
void MakeDirs(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0777) == 0 || errno == EEXIST) return;
  std::error_code ec;
  if (errno == ENOENT) fs::create_directories(dir, ec);  // a failure shows when the task starts
}

int64_t MachineMemoryMib() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  while (in >> key >> kib) {
    if (key == "MemTotal:") return kib / 1024;
    in.ignore(1 << 10, '\n');
  }
  return 1024;
}

// "2 GiB", "1.5 GiB"
std::string GibText(int64_t mib) {
  if (mib % 1024 == 0) return std::to_string(mib / 1024) + " GiB";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2g GiB", static_cast<double>(mib) / 1024.0);
  return buf;
}

std::string Join(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

// An agent playing protocol 1 reads replies as such an agent did.
UnknownKeys UnknownFieldsOf(int protocol) { return protocol >= 2 ? UnknownKeys::kIgnore : UnknownKeys::kRefuse; }

bool Overlaps(const std::vector<int>& a, const std::vector<int>& b) {
  for (int x : a) {
    for (int y : b) {
      if (x == y) return true;
    }
  }
  return false;
}

}  // namespace

Agent::Agent(AgentOptions options, std::unique_ptr<DeviceBackend> backend)
    : options_(std::move(options)), backend_(std::move(backend)),
      action_log_(fs::absolute(options_.work_dir).lexically_normal().string() + "/agent.log", kMaxActionLogBytes),
      jitter_(static_cast<uint32_t>(std::hash<std::string>{}(options_.node) ^
                                    static_cast<size_t>(SteadyClock::now().time_since_epoch().count()))) {
  // Absolute: tasks run in their own directories.
  options_.work_dir = fs::absolute(options_.work_dir).lexically_normal().string();
  if (options_.checkpoint_root.empty()) options_.checkpoint_root = options_.work_dir + "/checkpoints";
  options_.checkpoint_root = fs::absolute(options_.checkpoint_root).lexically_normal().string();
  if (options_.cpu_milli <= 0) options_.cpu_milli = int64_t{std::max(1u, std::thread::hardware_concurrency())} * 1000;
  if (options_.memory_mib <= 0) options_.memory_mib = MachineMemoryMib();
  contention_ = std::make_unique<GpuContention>(GpuContentionOptions{options_.work_dir + "/contention"});
  http_ = NewHttpClient(options_.server_url, options_.server_tls);
  http_->set_bearer_token_auth(options_.token);
  http_->set_connection_timeout(5);
  http_->set_read_timeout(30);
  http_->set_write_timeout(30);
  // No keep-alive: a heartbeat every few seconds from each of many nodes
  // would otherwise hold a server thread per node between heartbeats.
  http_->set_tcp_nodelay(true);
}

Agent::~Agent() {
  StopWatch();
  for (int fd : wake_) {
    if (fd >= 0) ::close(fd);
  }
}

Result<std::string> Agent::StartMetrics() {
  if (metrics_) return metrics_url_;
  if (options_.metrics_port < 0) return FailedPrecondition("--metrics-listen: not set");
  auto l = MetricsListener::Start(options_.metrics_host, options_.metrics_port, options_.metrics_tls);
  if (!l) return IoError("--metrics-listen: " + l.error().message);
  metrics_ = std::move(*l);
  std::string host = options_.metrics_host;
  if (host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]") {
    char name[256] = {};
    host = gethostname(name, sizeof(name) - 1) == 0 && name[0] ? name : "localhost";
  } else if (host.find(':') != std::string::npos && host.front() != '[') {
    host = "[" + host + "]";  // an IPv6 address
  }
  metrics_url_ = std::string(options_.metrics_tls ? "https://" : "http://") + host + ":" + std::to_string(metrics_->port()) + "/metrics";
  Log("metrics_listen", {{"url", metrics_url_}});
  return metrics_url_;
}

// The labels say which task is on each GPU or MIG instance: the running
// tasks, by the GPUs (and instance) their orders name.
void Agent::PublishMetrics() {
  auto entities = backend_->ReadDcgmFields();
  if (!entities) {
    Log("metrics_failed", {{"error", entities.error().message}});
    return;  // the previous reading stays
  }
  DcgmNodeLabels labels;
  labels.hostname = options_.node;
  labels.pool = pool_;
  for (const auto& [key, t] : tasks_) {
    if (t.state != LocalTask::State::kRunning) continue;
    for (int g : t.order.gpus) {
      labels.tasks.push_back(DcgmTaskLabels{g, t.order.gpu_mode == "mig" ? t.order.mig_start : -1, t.order.tenant,
                                            std::to_string(t.order.job)});
    }
  }
  metrics_->Publish(RenderDcgmMetrics(*entities, labels));
}

void Agent::Log(const std::string& action, std::vector<std::pair<std::string, std::string>> fields) const {
  json line{{"unix_ms", ToMillis(WallNow())}, {"node", options_.node}, {"action", action}};
  for (auto& [k, v] : fields) line[k] = v;
  const std::string text = line.dump(-1, ' ', false, json::error_handler_t::replace);
  action_log_.Append(text);
  if (options_.quiet) return;
  std::lock_guard lock(log_mu_);
  std::cerr << text << std::endl;
}

Result<json> Agent::Post(const std::string& path, const json& body, int* status) {
  *status = 0;
  auto res = http_->Post(path, body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
  if (!res) {
    return IoError("POST " + path + ": " + DescribeHttpFailure(*http_, res.error(), options_.server_url,
                                                                options_.server_tls));
  }
  *status = res->status;
  json j = json::parse(res->body, nullptr, false);
  if (res->status != 200) {
    std::string message = res->body.substr(0, 500);
    if (j.is_object() && j.contains("error") && j["error"].is_object() && j["error"].contains("message") &&
        j["error"]["message"].is_string()) {
      message = j["error"]["message"].get<std::string>();
      if (j["error"].contains("field") && j["error"]["field"].is_string() && !j["error"]["field"].empty()) {
        message += " (field " + j["error"]["field"].get<std::string>() + ")";
      }
    }
    return FailedPrecondition("POST " + path + ": HTTP " + std::to_string(res->status) + ": " + message);
  }
  if (j.is_discarded()) return IoError("POST " + path + ": the reply is not JSON");
  return j;
}

Status Agent::Register() {
  GP_ASSIGN_OR_RETURN(auto gpus, backend_->Discover());
  gpus_ = gpus;
  // Instances this agent created that are gone (a GPU reset, an operator)
  // are forgotten.
  std::set<std::string> present;
  for (const GpuDevice& g : gpus_) {
    for (const MigInstance& m : g.mig) present.insert(m.uuid);
  }
  if (std::erase_if(mig_created_, [&](const std::string& u) { return !present.count(u); }) > 0) SaveMigCreated();
  RegisterRequest r;
  r.node = options_.node;
  r.backend = backend_->name();
  r.node_class = options_.node_class;
  r.region = options_.region;
  r.zone = options_.zone;
  r.rack = options_.rack;
  r.cpu_milli = options_.cpu_milli;
  r.memory_mib = options_.memory_mib;
  r.gpus = gpus_;
  r.isolation = runtime_->isolation();
  r.metrics_url = metrics_url_;
  r.protocol = options_.protocol;
  int status = 0;
  auto reply = Post("/v1/agent/register", ToJson(r), &status);
  if (!reply && status == 400 && r.protocol >= 2 && reply.error().message.ends_with("(field protocol)")) {
    // A server of protocol 1 refuses the key: speak its protocol (heartbeats only).
    r.protocol = 1;
    reply = Post("/v1/agent/register", ToJson(r), &status);
  }
  register_status_ = status;
  if (!reply) return std::unexpected(Error{status >= 400 && status < 500 ? ErrorCode::kFailedPrecondition
                                                                         : ErrorCode::kIo,
                                           reply.error().message});
  auto parsed = ParseAgentReply(*reply, UnknownFieldsOf(options_.protocol));
  if (!parsed.ok()) return IoError("register: bad reply: " + parsed.error.field + ": " + parsed.error.message);
  registered_ = true;
  session_ = parsed.value->session;
  server_protocol_ = std::min(r.protocol, std::max(parsed.value->protocol, 1));
  last_ok_ = SteadyClock::now();
  fenced_ = false;
  Log("registered", {{"server", options_.server_url}, {"gpus", std::to_string(gpus_.size())},
                     {"backend", backend_->name()}, {"protocol", std::to_string(server_protocol_)}});
  Apply(*parsed.value);
  if (server_protocol_ >= 2) StartWatch(*parsed.value);
  DiscardUnadopted();  // what the desired state does not account for
  return {};
}

void Agent::Apply(const AgentReply& reply) {
  interval_ = std::chrono::milliseconds(reply.heartbeat_interval_ms);
  if (!reply.pool.empty()) pool_ = reply.pool;
  fence_after_ = std::chrono::milliseconds(reply.fence_after_ms);
  for (const LogAck& a : reply.logs) {
    auto it = tasks_.find(Key{a.job, a.replica, a.attempt});
    if (it != tasks_.end()) it->second.log_uploaded = a.bytes;
  }
  if (reply.has_desired) ApplyDesired(reply.tasks, reply.scrubs);
}

void Agent::ApplyDesired(const std::vector<TaskOrder>& tasks, const std::vector<ScrubOrder>& scrubs) {
  std::set<Key> desired;
  for (const TaskOrder& o : tasks) {
    const Key key{o.job, o.replica, o.attempt};
    desired.insert(key);
    auto it = tasks_.find(key);
    if (it == tasks_.end()) {
      LocalTask t;
      t.order = o;
      Adopt(t);  // a container a predecessor left running
      tasks_.emplace(key, std::move(t));
    } else if (it->second.desired) {
      it->second.order = o;  // action and notice may change
    }
    // (A task stopped here, e.g. by fencing, starts again once it is gone.)
  }
  for (auto& [key, t] : tasks_) {
    const bool want = desired.count(key) > 0;
    if (t.desired && !want) {
      t.desired = false;
      BeginStop(t);
    }
  }
  scrub_orders_ = scrubs;
  std::set<int64_t> orders;
  for (const ScrubOrder& s : scrub_orders_) orders.insert(s.id);
  for (auto it = scrubs_done_.begin(); it != scrubs_done_.end();) {
    // Done and acknowledged (the order left), or failed: retried at the next pass.
    if (!orders.count(it->first) || !it->second.ok) {
      scrubs_reported_.erase(it->first);
      it = scrubs_done_.erase(it);
    } else {
      ++it;
    }
  }
}

void Agent::BeginStop(LocalTask& t) {
  const bool leftovers = t.proc && t.proc->reaped() && t.proc->Alive();
  if (t.state == LocalTask::State::kRunning || leftovers) {
    t.state = LocalTask::State::kStopping;
    t.proc->Signal(SIGTERM);
    t.kill_at = SteadyClock::now() + t.order.task.stop_grace;
    Log("stop", {{"job", std::to_string(t.order.job)}, {"replica", std::to_string(t.order.replica)},
                 {"attempt", std::to_string(t.order.attempt)}, {"signal", "SIGTERM"}});
  } else if (t.state == LocalTask::State::kWaiting) {
    t.state = LocalTask::State::kDone;
  } else if (t.state == LocalTask::State::kExited || t.state == LocalTask::State::kStartFailed) {
    t.state = LocalTask::State::kDone;
  }
}

bool Agent::GpusBusy(const std::vector<int>& gpus, const LocalTask* except) const {
  for (const auto& [key, t] : tasks_) {
    if (&t == except || t.desired) continue;
    if (t.state == LocalTask::State::kStopping && Overlaps(t.order.gpus, gpus)) return true;
  }
  return false;
}

bool Agent::PreviousAttemptAlive(const LocalTask& t) const {
  for (const auto& [key, other] : tasks_) {
    if (&other == &t || other.order.job != t.order.job || other.order.replica != t.order.replica) continue;
    if (other.state == LocalTask::State::kStopping) return true;
  }
  return false;
}

void Agent::Fence() {
  fenced_ = true;
  Log("fenced", {{"silent_ms", std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                  SteadyClock::now() - last_ok_)
                                                  .count())}});
  for (auto& [key, t] : tasks_) {
    if (t.desired) {
      t.desired = false;
      BeginStop(t);
    }
  }
}

bool Agent::ScrubPending(const std::vector<int>& gpus) const {
  for (const ScrubOrder& s : scrub_orders_) {
    auto done = scrubs_done_.find(s.id);
    if ((done == scrubs_done_.end() || !done->second.ok) && Overlaps(s.gpus, gpus)) return true;
  }
  return false;
}

void Agent::RunScrubs() {
  for (const ScrubOrder& s : scrub_orders_) {
    if (scrubs_done_.count(s.id)) continue;
    if (GpusBusy(s.gpus, nullptr)) continue;  // a stopping task still holds memory there
    ScrubReport r;
    r.id = s.id;
    for (int g : s.gpus) {
      auto done = ScrubGpu(g);
      if (!done) {
        r.ok = false;
        r.error = done.error().message;
        break;
      }
      r.bytes += done->bytes;
      r.seconds += done->seconds;
    }
    Log(r.ok ? "scrub" : "scrub_failed",
        {{"order", std::to_string(s.id)}, {"gpus", Join(s.gpus)}, {"bytes", std::to_string(r.bytes)},
         {"seconds", std::to_string(r.seconds)}, {"error", r.error}});
    scrubs_done_[s.id] = r;
  }
}

void Agent::SetPaths(LocalTask& t) const {
  const TaskOrder& o = t.order;
  const std::string id = std::to_string(o.job) + "." + std::to_string(o.replica) + "." + std::to_string(o.attempt);
  t.dir = options_.work_dir + "/tasks/job-" + std::to_string(o.job) + "/replica-" + std::to_string(o.replica);
  t.checkpoint_dir =
      options_.checkpoint_root + "/job-" + std::to_string(o.job) + "/replica-" + std::to_string(o.replica);
  t.scratch_dir = t.dir + "/scratch-" + std::to_string(o.attempt);
  t.log_file = options_.work_dir + "/logs/" + id + ".log";
  t.notice_file = t.dir + "/notice";
}

// The task's GPUs as CUDA sees them ("GPU-..." or MIG UUIDs) and their
// device nodes; fails naming a GPU the node does not have.
Result<TaskLaunch> Agent::LaunchOf(const LocalTask& t, std::string* visible) const {
  const TaskOrder& o = t.order;
  const bool container = runtime_->isolation() == "container";
  TaskLaunch l;
  l.job = o.job;
  l.replica = o.replica;
  l.attempt = o.attempt;
  l.tenant = o.tenant;
  l.argv = o.task.command;
  l.env = o.task.env;
  l.working_dir = o.task.working_dir;
  l.log_file = t.log_file;
  l.checkpoint_dir = t.checkpoint_dir;
  l.scratch_dir = t.scratch_dir;
  l.task_dir = t.dir;
  l.image = o.image;
  l.uid = o.uid;
  l.uid_count = o.uid_count;
  l.memory_mib = o.memory_mib;
  l.cpu_milli = o.cpu_milli;
  l.pids_limit = options_.pids_limit;
  l.shm_mib = o.shm_mib;
  l.network_isolated = o.network_isolated;
  for (int g : o.gpus) {
    if (g < 0 || g >= static_cast<int>(gpus_.size())) {
      return InvalidArgument("GPU " + std::to_string(g) + " is not on this node");
    }
    std::string uuid = gpus_[g].uuid;
    if (o.gpu_mode == "mig") {
      std::optional<MigInstance> mig;  // made by EnsureMigInstance
      for (const MigInstance& m : gpus_[g].mig) {
        if (m.uuid == t.mig_uuid) mig = m;
      }
      if (!mig) {
        return InvalidArgument("GPU " + std::to_string(g) + " has no MIG instance " + o.mig_profile +
                               " at memory slice " + std::to_string(o.mig_start));
      }
      uuid = mig->uuid;
      if (container) {
        auto caps = backend_->MigDeviceNodes(g, *mig);
        if (!caps) return InvalidArgument("GPU " + std::to_string(g) + ": " + caps.error().message);
        for (const DeviceNode& d : *caps) l.devices.push_back(d);
      }
    }
    *visible += (visible->empty() ? "" : ",") + uuid;
    for (const DeviceNode& d : backend_->GpuDeviceNodes(g)) l.devices.push_back(d);
  }
  if (!o.gpus.empty()) {
    for (const DeviceNode& d : backend_->ControlDeviceNodes()) l.devices.push_back(d);
  }
  if (options_.expose_all_gpu_nodes) {
    for (int g = 0; g < static_cast<int>(gpus_.size()); ++g) {
      for (const DeviceNode& d : backend_->GpuDeviceNodes(g)) {
        if (std::find(l.devices.begin(), l.devices.end(), d) == l.devices.end()) l.visible_denied.push_back(d);
      }
    }
  }
  // Where the task finds its directories: the container's paths, or the
  // node's for a plain process.
  const std::string checkpoint = container ? kContainerCheckpointDir : t.checkpoint_dir;
  const std::string notice = container ? std::string(kContainerTaskDir) + "/notice" : t.notice_file;
  l.env.emplace_back("CUDA_VISIBLE_DEVICES", *visible);  // empty for CPU-only jobs: no GPU visible
  l.env.emplace_back("NVIDIA_VISIBLE_DEVICES", visible->empty() ? "void" : *visible);
  if (o.gpu_mode == "mps") {
    l.env.emplace_back("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", std::to_string(std::max(1, o.gpu_milli / 10)));
    if (o.gpu_memory_mib > 0) {
      l.env.emplace_back("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=" + std::to_string(o.gpu_memory_mib) + "M");
    }
  }
  // Time-sliced and MPS shares: the CUDA cap holds the task to its share's
  // GPU memory (and, time-sliced, its compute); a container has the library
  // bound at kContainerCudaCap by the oci runtime.
  // A paced share of one GPU also gets that GPU's contention signal
  // (gpu_contention.h): its directory, bound read-only in a container.
  static const std::string cuda_cap = FindCudaCapLibrary();
  if (!cuda_cap.empty()) {
    std::string contention;
    if (o.gpus.size() == 1 && MakeDir(contention_->DirOf(o.gpus[0]), 0755)) {
      contention = container ? std::string(kContainerContentionDir) + "/" + kContentionFileName
                             : contention_->FileOf(o.gpus[0]);
    }
    const EnvList cap = CudaCapEnv({o.gpu_mode, o.gpu_milli, o.gpu_memory_mib},
                                   container ? kContainerCudaCap : cuda_cap,
                                   container ? kContainerScratchDir : t.scratch_dir, o.task.env, contention);
    l.env.insert(l.env.end(), cap.begin(), cap.end());
    const bool signalled = std::any_of(cap.begin(), cap.end(), [](const auto& kv) {
      return kv.first == "GPUPOOL_CUDA_CONTENTION_FILE";
    });
    if (container && signalled) {
      l.binds.push_back(BindMount{contention_->DirOf(o.gpus[0]), kContainerContentionDir, /*read_only=*/true});
    }
  }
  l.env.emplace_back("GPUPOOL_JOB_ID", std::to_string(o.job));
  l.env.emplace_back("GPUPOOL_JOB_NAME", o.name);
  l.env.emplace_back("GPUPOOL_TENANT", o.tenant);
  l.env.emplace_back("GPUPOOL_REPLICA", std::to_string(o.replica));
  l.env.emplace_back("GPUPOOL_ATTEMPT", std::to_string(o.attempt));
  l.env.emplace_back("GPUPOOL_NODE", options_.node);
  l.env.emplace_back("GPUPOOL_GPU_MODE", o.gpu_mode);
  l.env.emplace_back("GPUPOOL_CHECKPOINT_DIR", checkpoint);
  l.env.emplace_back("GPUPOOL_NOTICE_FILE", notice);
  if (!o.members.empty()) {  // SCALE-7 (docs/agent.md, "Elastic jobs")
    std::string members;
    for (const ReplicaMember& m : o.members) {
      members += (members.empty() ? "" : ",") + std::to_string(m.replica) + "@" + m.node;
    }
    l.env.emplace_back("GPUPOOL_REPLICAS", std::to_string(o.members.size()));
    l.env.emplace_back("GPUPOOL_MEMBERS", members);
    l.env.emplace_back("GPUPOOL_GENERATION", std::to_string(o.generation));
    l.env.emplace_back("GPUPOOL_MEMBERSHIP_FILE",
                       (container ? std::string(kContainerTaskDir) : t.dir) + "/membership.json");
  }
  return l;
}

MpsDaemonsOptions Agent::MpsOptions() {
  MpsDaemonsOptions m;
  m.work_dir = options_.work_dir;
  m.log = [this](const std::string& action, std::vector<std::pair<std::string, std::string>> fields) {
    Log(action, std::move(fields));
  };
  if (!options_.mps_control.empty()) {
    m.control = FindOnPath(options_.mps_control);
    if (m.control.empty()) mps_missing_ = "--mps-control " + options_.mps_control + " is not an executable";
  } else if (backend_->name() != "fake") {
    m.control = FindOnPath(kMpsControlBinary);
    if (m.control.empty()) mps_missing_ = std::string(kMpsControlBinary) + " is not on the PATH";
  } else {
    mps_missing_ = "fake GPUs have none unless --mps-control names one";
  }
  if (!m.control.empty()) Log("mps", {{"control", m.control}});
  return m;
}

// An MPS share's GPU gets its daemon (as the owner its clients have), the
// task the daemon's directories: in its environment and, in a container,
// bound at the same paths, with the node's /dev/shm.
Status Agent::PrepareMps(const TaskOrder& o, TaskLaunch& l) {
  if (!mps_->available()) {
    if (!mps_missing_.empty()) {
      Log("warning", {{"message", "no MPS control daemon (" + mps_missing_ +
                                      "): MPS tasks get their limits in the environment only"}});
      mps_missing_.clear();  // once
    }
    return {};
  }
  if (o.gpus.size() != 1) {
    return InvalidArgument("an MPS share is one GPU; this task has " + std::to_string(o.gpus.size()));
  }
  const int g = o.gpus[0];
  const bool container = runtime_->isolation() == "container";
  const MpsOwner owner = container && o.uid_count > 0 ? MpsOwner{o.uid, o.uid} : MpsOwner{};
  GP_TRY(mps_->Ensure(g, gpus_[g].uuid, owner, MpsLimits{std::max(1, o.gpu_milli / 10), o.gpu_memory_mib}));
  const MpsDirs dirs = mps_->Dirs(g);
  l.env.emplace_back("CUDA_MPS_PIPE_DIRECTORY", dirs.pipe);
  l.env.emplace_back("CUDA_MPS_LOG_DIRECTORY", dirs.log);
  if (container) {
    l.binds.push_back(BindMount{dirs.pipe, dirs.pipe, /*read_only=*/false});
    l.binds.push_back(BindMount{dirs.log, dirs.log, /*read_only=*/true});
    l.host_shm = true;
  }
  return {};
}

// Does a task of the GPU's, MPS or not, still have a process there?
bool Agent::MpsInUse(int gpu) {
  for (auto& [key, t] : tasks_) {
    if (!t.proc || std::find(t.order.gpus.begin(), t.order.gpus.end(), gpu) == t.order.gpus.end()) continue;
    const bool live = t.state == LocalTask::State::kRunning || t.state == LocalTask::State::kStopping;
    if (live || t.proc->Alive()) return true;
  }
  return false;
}

// A daemon whose GPU has no task left quits, so that the next tenant's
// daemon can start there. Not while a predecessor's containers are unmatched
// (they may be its clients).
void Agent::ReleaseIdleMps() {
  if (!adoptable_.empty()) return;
  for (int g : mps_->Gpus()) {
    if (!MpsInUse(g)) mps_->Release(g);
  }
}

// Per GPU: the running tasks' utilization from this heartbeat, the GPU's
// own, and whether a process of no task of ours is on it (one of a
// stopping task is still ours: its utilization is not measured, so it
// counts as busy).
void Agent::PublishContention(const std::vector<GpuSample>& gpus, const std::map<std::string, TaskUsage>& usage) {
  std::map<int, GpuLoad> loads;
  for (const GpuDevice& g : gpus_) loads[g.index].gpu = g.index;
  std::set<int> leaders;
  for (const auto& [key, t] : tasks_) {
    const bool running = t.state == LocalTask::State::kRunning, stopping = t.state == LocalTask::State::kStopping;
    if (!t.proc || (!running && !stopping)) continue;
    leaders.insert(t.proc->pid());
    double util = -1;
    if (running) {
      auto u = usage.find(std::to_string(t.order.job) + "." + std::to_string(t.order.replica) + "." +
                          std::to_string(t.order.attempt));
      if (u != usage.end()) util = u->second.util_pct;
    }
    for (int g : t.order.gpus) {
      if (loads.count(g)) loads[g].task_util_pct.push_back(util);
    }
  }
  for (const GpuSample& s : gpus) {
    auto it = loads.find(s.index);
    if (it == loads.end()) continue;
    it->second.device_util_pct = s.healthy ? s.util_pct : -1;
    for (const GpuProcess& p : s.processes) {
      const auto st = ReadProcStat(p.pid);
      if (st && st->alive() && !leaders.count(st->pgrp)) it->second.foreign_process = true;
    }
  }
  std::vector<GpuLoad> list;
  for (auto& [g, load] : loads) list.push_back(std::move(load));
  const int64_t valid_ms = std::clamp<int64_t>(3 * interval_.count(), 15000, kMaxContentionValidMs);
  const auto written = contention_->Update(list, ToMillis(WallNow()), valid_ms);
  const std::string error = written ? "" : written.error().message;
  if (error != contention_error_) {
    if (!error.empty()) Log("warning", {{"message", "time-sliced shares stay paced: " + error}});
    contention_error_ = error;
  }
}

void Agent::WriteMembership(LocalTask& t) {
  const TaskOrder& o = t.order;
  if (o.members.empty() || (o.generation == t.generation_written && o.members == t.members_written)) return;
  json members = json::array();
  for (const ReplicaMember& m : o.members) members.push_back(json{{"replica", m.replica}, {"node", m.node}});
  const std::string file = t.dir + "/membership.json";
  std::error_code ec;
  {
    std::ofstream out(file + ".tmp", std::ios::trunc);
    out << json{{"job", o.job}, {"replica", o.replica}, {"generation", o.generation}, {"members", members}}.dump()
        << "\n";
    if (!out) {
      Log("membership_failed", {{"job", std::to_string(o.job)}, {"file", file}});
      return;  // tried again at the next pass
    }
  }
  fs::rename(file + ".tmp", file, ec);
  if (ec) return;
  const bool changed = t.generation_written >= 0;
  t.members_written = o.members;
  t.generation_written = o.generation;
  if (changed) {
    Log("membership", {{"job", std::to_string(o.job)}, {"replica", std::to_string(o.replica)},
                       {"generation", std::to_string(o.generation)},
                       {"replicas", std::to_string(o.members.size())}});
  }
}

void Agent::StartTask(LocalTask& t) {
  const TaskOrder& o = t.order;
  SetPaths(t);
  for (const std::string& d : {t.dir, t.checkpoint_dir, options_.work_dir + "/logs"}) MakeDirs(d);
  WriteMembership(t);
  std::string visible;
  Status mig_ready;
  if (o.gpu_mode == "mig") {
    if (o.gpus.size() != 1 || o.gpus[0] < 0 || o.gpus[0] >= static_cast<int>(gpus_.size())) {
      mig_ready = InvalidArgument("a MIG instance is on one GPU of this node; this task has GPUs " + Join(o.gpus));
    } else if (auto m = EnsureMigInstance(o, o.gpus[0])) {
      t.mig_uuid = m->uuid;
    } else {
      mig_ready = std::unexpected(m.error());
    }
  }
  auto launch = mig_ready ? LaunchOf(t, &visible) : std::unexpected(mig_ready.error());
  if (launch && o.gpu_mode == "mps") {
    if (auto ok = PrepareMps(o, *launch); !ok) launch = std::unexpected(ok.error());
  }
  auto p = launch ? runtime_->Start(*launch) : std::unexpected(launch.error());
  if (!p) {
    t.state = LocalTask::State::kStartFailed;
    t.error = p.error().message;
    std::ofstream(t.log_file, std::ios::app) << "gpupool agent: " << t.error << "\n";  // what `job logs` shows
    Log("start_failed", {{"job", std::to_string(o.job)}, {"replica", std::to_string(o.replica)},
                         {"attempt", std::to_string(o.attempt)}, {"error", t.error}});
    return;
  }
  t.proc = std::move(*p);
  t.state = LocalTask::State::kRunning;
  t.exit_fd = ExitFd(t.proc->pid());
  if (!t.mig_uuid.empty()) mig_clean_.erase(t.mig_uuid);  // its memory is the task's now
  Log("start", {{"job", std::to_string(o.job)}, {"replica", std::to_string(o.replica)},
                {"attempt", std::to_string(o.attempt)}, {"pid", std::to_string(t.proc->pid())},
                {"tenant", o.tenant}, {"gpus", Join(o.gpus)}, {"gpu_mode", o.gpu_mode},
                {"cuda_visible_devices", visible}, {"runtime", runtime_->name()}, {"id", t.proc->id()}});
  state_dirty_ = true;  // saved at the end of this pass: one write for every task it starts
}

void Agent::Step() {
  const auto now = SteadyClock::now();
  // Reap and escalate.
  for (auto& [key, t] : tasks_) {
    if (!t.proc) continue;
    if (!t.proc->reaped()) {
      if (auto st = t.proc->Poll()) {
        t.exit = *st;
        t.exit_fd = ExitFd();
        if (st->oom) {
          t.error = "out of memory (limit " + GibText(t.order.memory_mib) + ")";
          std::ofstream(t.log_file, std::ios::app) << "gpupool agent: " << t.error << "\n";
        }
        if (t.state != LocalTask::State::kStopping && t.desired) {
          t.state = LocalTask::State::kExited;
          // It ended by itself: what it left in its group goes too.
          t.proc->Signal(SIGKILL);
          if (t.order.action == TaskAction::kCheckpoint && t.checkpoint_requested && !t.checkpoint_done) {
            t.checkpoint_done = true;
            t.checkpoint_acked = fs::exists(t.checkpoint_dir + "/ack");
          }
        }
        Log("exit", {{"job", std::to_string(t.order.job)}, {"replica", std::to_string(t.order.replica)},
                     {"attempt", std::to_string(t.order.attempt)}, {"exit_code", std::to_string(st->exit_code)},
                     {"signal", std::to_string(st->signal)}, {"oom", st->oom ? "true" : "false"}});
        state_dirty_ = true;
      }
    }
    if (t.state != LocalTask::State::kStopping) continue;
    // A stopping task holds its GPUs until its whole group is gone; the
    // rest of the group gets its grace too.
    if (!t.proc->Alive()) {
      if (t.proc->reaped()) t.state = LocalTask::State::kDone;
    } else if (!t.killed && now >= t.kill_at) {
      t.proc->Signal(SIGKILL);
      t.killed = true;
      Log("kill", {{"job", std::to_string(t.order.job)}, {"replica", std::to_string(t.order.replica)},
                   {"attempt", std::to_string(t.order.attempt)}, {"signal", "SIGKILL"}});
    }
  }
  ReleaseIdleMps();
  mps_->Check();  // a dead daemon comes back before tasks start on it
  RunScrubs();
  ReleaseIdleMig();  // after the scrubs: an instance they cleaned needs no second one
  for (auto& [key, t] : tasks_) {
    if (!t.desired) continue;
    if (t.order.action == TaskAction::kCheckpoint && !t.checkpoint_done && t.state == LocalTask::State::kWaiting) {
      t.checkpoint_done = true;  // it never started: nothing to save
      t.checkpoint_acked = false;
    }
    if (t.state == LocalTask::State::kWaiting && t.order.action == TaskAction::kRun) {
      if (t.order.task.command.empty() || ScrubPending(t.order.gpus) || GpusBusy(t.order.gpus, &t) ||
          PreviousAttemptAlive(t)) {
        continue;
      }
      StartTask(t);
    }
    if (t.state == LocalTask::State::kRunning && t.order.action == TaskAction::kCheckpoint) {
      if (!t.checkpoint_requested) {
        std::error_code ec;
        fs::remove(t.checkpoint_dir + "/ack", ec);
        t.checkpoint_requested = true;
        t.checkpoint_deadline = now + t.order.task.checkpoint_timeout;
        t.proc->SignalLeader(t.order.task.checkpoint_signal);
        Log("checkpoint", {{"job", std::to_string(t.order.job)}, {"replica", std::to_string(t.order.replica)},
                           {"attempt", std::to_string(t.order.attempt)},
                           {"signal", std::to_string(t.order.task.checkpoint_signal)}});
      } else if (!t.checkpoint_done) {
        const bool acked = fs::exists(t.checkpoint_dir + "/ack");
        if (acked || now >= t.checkpoint_deadline) {
          t.checkpoint_done = true;
          t.checkpoint_acked = acked;
          Log(acked ? "checkpointed" : "checkpoint_timeout",
              {{"job", std::to_string(t.order.job)}, {"replica", std::to_string(t.order.replica)},
               {"attempt", std::to_string(t.order.attempt)}});
        }
      }
    }
    if (t.state == LocalTask::State::kRunning) WriteMembership(t);
    if (t.state == LocalTask::State::kRunning && t.order.idle_notice != t.notice_written) {
      t.notice_written = t.order.idle_notice;
      std::ofstream(t.notice_file, std::ios::app)
          << json{{"unix_ms", ToMillis(WallNow())},
                  {"notice", t.notice_written ? "idle" : "busy"},
                  {"message", t.notice_written
                                  ? "GPU utilization has stayed low: the job will be reclaimed (checkpointed and "
                                    "stopped) after the grace period unless it gets busy"
                                  : "the job is busy again: reclamation is off"}}
                 .dump()
          << "\n";
      Log(t.notice_written ? "idle_notice" : "busy_notice",
          {{"job", std::to_string(t.order.job)}, {"replica", std::to_string(t.order.replica)}});
    }
  }
  // Forget finished tasks whose logs are all uploaded.
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    LocalTask& t = it->second;
    std::error_code ec;
    const auto size = t.log_file.empty() ? 0 : fs::file_size(t.log_file, ec);
    const bool uploaded = t.log_file.empty() || ec || static_cast<int64_t>(size) <= t.log_uploaded;
    if (t.state == LocalTask::State::kDone && t.proc && !t.proc->Alive()) t.proc->Remove();  // container and bundle
    it = (t.state == LocalTask::State::kDone && uploaded) ? tasks_.erase(it) : std::next(it);
  }
  if (state_dirty_) {
    SaveState();
    state_dirty_ = false;
  }
}

Status Agent::Heartbeat() {
  HeartbeatRequest r;
  r.node = options_.node;
  r.session = session_;
  if (auto s = backend_->Sample()) {
    r.gpus = std::move(*s);
  } else {
    for (const GpuDevice& g : gpus_) {
      GpuSample x;
      x.index = g.index;
      x.healthy = false;
      x.health_detail = s.error().message;
      r.gpus.push_back(x);
    }
  }
  for (GpuDevice& g : gpus_) {
    if (!g.mig_enabled) continue;
    RefreshMig(g.index);  // the layout as it is, whatever changed it
    r.mig[g.index] = g.mig;
  }
  std::vector<TaskProbe> probes;
  for (const auto& [key, t] : tasks_) {
    if (t.state == LocalTask::State::kRunning) {
      probes.push_back(TaskProbe{std::to_string(t.order.job) + "." + std::to_string(t.order.replica) + "." +
                                     std::to_string(t.order.attempt),
                                 t.proc->pid(), t.order.gpus});
    }
  }
  for (GpuSample& g : r.gpus) {
    if (const std::string why = mps_->Failure(g.index); !why.empty()) {
      g.healthy = false;
      g.health_detail += (g.health_detail.empty() ? "" : "; ") + why;
    }
  }
  const auto usage = backend_->SampleTasks(probes);
  PublishContention(r.gpus, usage);
  for (const auto& [key, t] : tasks_) {
    if (auto x = ReportOf(t, usage)) r.tasks.push_back(std::move(*x));
  }
  // New log bytes, within the budget, the tasks taking turns to go first.
  std::vector<LocalTask*> order;
  for (auto& [key, t] : tasks_) {
    if (!t.log_file.empty()) order.push_back(&t);
  }
  int64_t budget = skip_logs_ ? 0 : kLogBudgetBytes;
  for (size_t k = 0; k < order.size() && budget > 0; ++k) {
    if (auto c = NextLogChunk(*order[(log_turn_ + k) % order.size()], budget)) {
      budget -= static_cast<int64_t>(c->data.size());
      r.logs.push_back(std::move(*c));
    }
  }
  ++log_turn_;
  for (const auto& [id, s] : scrubs_done_) r.scrubs.push_back(s);
  r.protocol = server_protocol_;
  int status = 0;
  auto reply = Post("/v1/agent/heartbeat", ToJson(r), &status);
  if (!reply) {
    if (status == 404) registered_ = false;  // the server does not know the node (e.g. a new data directory)
    if (status == 409) superseded_ = true;   // another agent registered for this node: it acts, this one leaves
    skip_logs_ = status == 400 && !r.logs.empty();  // e.g. too large: the next one goes without logs
    return std::unexpected(reply.error());
  }
  skip_logs_ = false;
  last_ok_ = SteadyClock::now();
  auto parsed = ParseAgentReply(*reply, UnknownFieldsOf(options_.protocol));
  if (!parsed.ok()) return IoError("heartbeat: bad reply: " + parsed.error.field + ": " + parsed.error.message);
  // What it reported is acknowledged: reports send only what changes after.
  for (const TaskReport& x : r.tasks) {
    if (auto it = tasks_.find(Key{x.job, x.replica, x.attempt}); it != tasks_.end()) it->second.reported = x.phase;
  }
  for (const ScrubReport& x : r.scrubs) scrubs_reported_.insert(x.id);
  Apply(*parsed.value);
  return {};
}

std::optional<LogChunk> Agent::NextLogChunk(const LocalTask& t, int64_t budget) const {
  if (t.log_file.empty()) return std::nullopt;
  std::ifstream in(t.log_file, std::ios::binary);
  if (!in) return std::nullopt;
  in.seekg(0, std::ios::end);
  const int64_t size = static_cast<int64_t>(in.tellg());
  if (size <= t.log_uploaded) return std::nullopt;
  std::string data(static_cast<size_t>(std::min({kMaxLogChunk, budget, size - t.log_uploaded})), '\0');
  in.seekg(t.log_uploaded);
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  data.resize(static_cast<size_t>(in.gcount()));
  std::string clean = SanitizeUtf8(data);
  const bool finished = !t.proc || t.proc->reaped();
  if (clean.size() < data.size() && finished && t.log_uploaded + static_cast<int64_t>(data.size()) == size) {
    clean.append(data.size() - clean.size(), '?');  // a sequence its writer will never complete
  }
  if (clean.empty()) return std::nullopt;
  return LogChunk{t.order.job, t.order.replica, t.order.attempt, t.log_uploaded, std::move(clean)};
}

std::optional<TaskReport> Agent::ReportOf(const LocalTask& t, const std::map<std::string, TaskUsage>& usage) const {
  if (!t.desired) return std::nullopt;
  TaskReport x;
  x.job = t.order.job;
  x.replica = t.order.replica;
  x.attempt = t.order.attempt;
  if (t.order.action == TaskAction::kCheckpoint && t.checkpoint_done) {
    x.phase = TaskPhase::kCheckpointed;
    x.checkpoint_acked = t.checkpoint_acked;
  } else if (t.state == LocalTask::State::kRunning) {
    x.phase = TaskPhase::kRunning;
    x.pid = t.proc->pid();
    auto u = usage.find(std::to_string(t.order.job) + "." + std::to_string(t.order.replica) + "." +
                        std::to_string(t.order.attempt));
    if (u != usage.end()) {
      x.util_pct = u->second.util_pct;
      x.gpu_memory_mib = u->second.memory_mib;
    }
  } else if (t.state == LocalTask::State::kExited) {
    x.phase = TaskPhase::kExited;
    x.exit_code = t.exit.exit_code;
    x.signal = t.exit.signal;
    x.error = t.error;  // e.g. the OOM kill
  } else if (t.state == LocalTask::State::kStartFailed) {
    x.phase = TaskPhase::kStartFailed;
    x.error = t.error;
  } else {
    return std::nullopt;  // waiting to start
  }
  return x;
}

std::chrono::milliseconds Agent::Jittered(std::chrono::milliseconds d) { return gpupool::Jittered(d, jitter_); }

void Agent::SaveState() const {
  std::vector<const RunningTask*> live;
  for (const auto& [key, t] : tasks_) {
    if (t.proc && (!t.proc->reaped() || t.state == LocalTask::State::kStopping)) live.push_back(t.proc.get());
  }
  runtime_->SaveState(live);
}

Status Agent::ChooseRuntime() {
  OciRuntimeOptions o;
  o.runc = FindOnPath(options_.oci_runtime.empty() ? "runc" : options_.oci_runtime);
  o.shim = options_.shim.empty() ? FindShim() : options_.shim;
  o.work_dir = options_.work_dir;
  if (options_.runtime != "process") {
    auto works = ProbeOciRuntime(o);
    if (works) {
      runtime_ = MakeOciRuntime(o);
      Log("runtime", {{"runtime", "oci"}, {"oci_runtime", o.runc}, {"shim", o.shim}, {"isolation", "container"}});
      return {};
    }
    if (options_.runtime == "oci") return std::unexpected(works.error());
    Log("warning", {{"message", "tasks run as plain processes without isolation (isolation: none): " +
                                    works.error().message}});
  }
  runtime_ = MakeProcessRuntime(options_.work_dir, [this](int pid) { Log("kill_leftover", {{"pid", std::to_string(pid)}}); });
  if (options_.runtime == "process") Log("warning", {{"message", "--runtime process: tasks run without isolation (isolation: none)"}});
  return {};
}

void Agent::Adopt(LocalTask& t) {
  auto it = adoptable_.find(Key{t.order.job, t.order.replica, t.order.attempt});
  if (it == adoptable_.end()) return;
  SetPaths(t);
  t.proc = std::move(it->second);
  adoptable_.erase(it);
  t.state = LocalTask::State::kRunning;
  t.exit_fd = ExitFd(t.proc->pid());
  const TaskOrder& o = t.order;
  if (o.gpu_mode == "mig" && o.gpus.size() == 1 && o.gpus[0] >= 0 && o.gpus[0] < static_cast<int>(gpus_.size())) {
    for (const MigInstance& m : gpus_[o.gpus[0]].mig) {
      if (m.profile == o.mig_profile && m.start == o.mig_start) t.mig_uuid = m.uuid;  // it runs there
    }
  }
  t.log_uploaded = 0;  // the server's ack moves it to what the predecessor sent
  Log("adopt", {{"job", std::to_string(t.order.job)}, {"replica", std::to_string(t.order.replica)},
                {"attempt", std::to_string(t.order.attempt)}, {"pid", std::to_string(t.proc->pid())},
                {"id", t.proc->id()}});
}

void Agent::DiscardUnadopted() {
  for (auto& [key, task] : adoptable_) {
    Log("remove_leftover", {{"id", task->id()}});
    task->Signal(SIGKILL);
    for (int i = 0; i < 500 && task->Alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    task->Remove();
  }
  adoptable_.clear();
}

int Agent::Run() {
  std::error_code ec;
  fs::create_directories(options_.work_dir, ec);
  if (ec) {
    std::cerr << "agent: cannot create " << options_.work_dir << ": " << ec.message() << "\n";
    return 2;
  }
  if (auto ok = ChooseRuntime(); !ok) {
    Log("runtime_failed", {{"runtime", options_.runtime}, {"error", ok.error().message}});
    std::cerr << "agent: --runtime " << options_.runtime << ": " << ok.error().message << "\n";
    return 5;
  }
  if (options_.metrics_port >= 0) {
    if (auto url = StartMetrics(); !url) {
      Log("metrics_failed", {{"error", url.error().message}});
      std::cerr << "agent: " << url.error().message << "\n";
      return 2;
    }
  }
  if (::pipe2(wake_, O_NONBLOCK | O_CLOEXEC) != 0) {
    std::cerr << "agent: cannot make a pipe\n";
    return 2;
  }
  adoptable_ = runtime_->Recover();
  LoadMigCreated();
  mps_ = std::make_unique<MpsDaemons>(MpsOptions());
  mps_->Recover();
  SaveState();
  auto next_heartbeat = SteadyClock::now();
  auto next_register = SteadyClock::now();
  auto next_metrics = SteadyClock::now();
  std::chrono::milliseconds backoff(500);
  int rc = 0;
  while (!stop_) {
    const auto now = SteadyClock::now();
    if (fence_after_.count() > 0 && last_ok_ != SteadyClock::time_point{} && !fenced_ &&
        now - last_ok_ > fence_after_) {
      Fence();
    }
    if (!registered_ && now >= next_register) {
      if (auto ok = Register(); !ok) {
        Log("register_failed", {{"error", ok.error().message}});
        if (register_status_ == 401 || register_status_ == 403) rc = 3;
        if (register_status_ == 400 || register_status_ == 409) rc = 4;
        if (rc != 0) break;  // refused for good: stop the tasks and leave
        next_register = SteadyClock::now() + Jittered(backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(10000));
      } else {
        backoff = std::chrono::milliseconds(500);
        next_heartbeat = SteadyClock::now() + Jittered(interval_);
      }
    }
    TakeWatchAnswers();  // the desired state's changes, as soon as they come
    if (superseded_) {
      Log("superseded", {{"reason", "another agent registered for this node"}});
      rc = 4;
      break;
    }
    Step();  // reaping and stops go on while the server is away
    ReportChanges();  // what Step started and saw end, at once (protocol 2)
    if (registered_ && SteadyClock::now() >= next_heartbeat) {
      if (auto ok = Heartbeat(); !ok) Log("heartbeat_failed", {{"error", ok.error().message}});
      next_heartbeat = SteadyClock::now() + Jittered(interval_);
      Step();  // act on the reply at once
    }
    // Device metrics at the heartbeat interval, with or without a server.
    if (metrics_ && SteadyClock::now() >= next_metrics) {
      PublishMetrics();
      next_metrics = SteadyClock::now() + interval_;
    }
    // Until a watch answer, a task's exit, or the next periodic pass
    // (checkpoint acknowledgements, stop deadlines, fencing).
    const auto until_heartbeat = std::chrono::duration_cast<std::chrono::milliseconds>(next_heartbeat - SteadyClock::now());
    WaitForWork(std::clamp(until_heartbeat, std::chrono::milliseconds(0), std::chrono::milliseconds(50)));
  }
  StopWatch();
  // Leaving: the node's tasks stop with the agent (SIGTERM, then SIGKILL
  // after their grace); the server re-places them once the node is down.
  const auto deadline = SteadyClock::now() + std::chrono::seconds(10);
  for (auto& [key, t] : tasks_) {
    if (t.state == LocalTask::State::kRunning) {
      t.desired = false;
      BeginStop(t);
    }
  }
  for (bool running = true; running;) {
    running = false;
    for (auto& [key, t] : tasks_) {
      if (!t.proc || t.proc->reaped()) continue;
      if (t.proc->Poll()) {
        t.proc->Signal(SIGKILL);
        continue;
      }
      running = true;
      if (SteadyClock::now() >= std::min(deadline, t.kill_at)) t.proc->Signal(SIGKILL);
    }
    if (running) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (auto& [key, t] : tasks_) {
    if (t.proc && !t.proc->Alive()) t.proc->Remove();
  }
  mps_->ReleaseAll();  // their clients are gone
  contention_->Clear();  // nobody samples any more: shares are enforced
  SaveState();
  Log("stopped", {});
  return rc;
}

}  // namespace gpupool
