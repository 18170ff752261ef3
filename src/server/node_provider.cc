#include "src/server/node_provider.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "src/base/time_text.h"
#include "src/engine/engine.h"
#include "src/model/gpu_catalog.h"
#include "src/server/log.h"

namespace gpupool {
namespace {

// "create-node.sh" for "/opt/x/create-node.sh --zone a": what a message calls the command.
std::string ProgramName(const std::string& command) {
  const size_t start = command.find_first_not_of(" \t");
  if (start == std::string::npos) return "command";
  const size_t stop = command.find_first_of(" \t", start);
  std::string first = command.substr(start, stop == std::string::npos ? std::string::npos : stop - start);
  const size_t slash = first.rfind('/');
  if (slash != std::string::npos && slash + 1 < first.size()) first = first.substr(slash + 1);
  return first;
}

}  // namespace

CommandOutcome RunCommand(Env& env, const std::string& command, const Env::Vars& vars, Duration timeout) {
  return env.RunProgram({"/bin/sh", "-c", command}, vars, timeout);
}

CommandNodeProvider::CommandNodeProvider(Env& env, CommandProviderSettings settings,
                                         std::vector<PoolScalingConfig> scaling, CreatedFn on_created,
                                         FailedFn on_failed)
    : env_(env),
      settings_(std::move(settings)),
      scaling_(std::move(scaling)),
      on_created_(std::move(on_created)),
      on_failed_(std::move(on_failed)) {}

CommandNodeProvider::~CommandNodeProvider() { Stop(); }

void CommandNodeProvider::Plan(const Event& e, const EngineState& state) {
  if (const auto* so = std::get_if<ScaleOutRequested>(&e.body)) {
    const std::string& pool_name = state.pools[so->pool].name;
    const auto config = std::find_if(scaling_.begin(), scaling_.end(),
                                     [&](const PoolScalingConfig& c) { return c.pool == pool_name; });
    std::vector<Action> actions;
    if (config == scaling_.end()) {  // cannot happen: the Engine scales only the configured pools
      for (int32_t i = 0; i < so->nodes; ++i) {
        actions.push_back(Action{e.seq, true, so->pool, pool_name, "", "", {}});
      }
    } else {
      const NodeTemplate& t = config->node;
      // The next serial: past every node named PREFIX-N and past every
      // name handed out before.
      const std::string prefix = t.name_prefix + "-";
      int64_t& next = next_serial_[t.name_prefix];
      for (NodeIndex n = 0; n < state.cluster.node_count(); ++n) {
        const std::string& name = state.cluster.node_name(n);
        if (name.size() <= prefix.size() || !name.starts_with(prefix) || name.size() - prefix.size() > 15) continue;
        const std::string digits = name.substr(prefix.size());
        if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
        next = std::max<int64_t>(next, std::stoll(digits) + 1);
      }
      // The warm pool target before this scale-out (WarmPoolSized follows it).
      const int32_t warm = state.pool_scaling[so->pool].warm_nodes;
      // FRAG-3: beside the pool's scattered free GPUs when there are any.
      const std::string fragmented = FragmentedRack(state, so->pool);
      for (int32_t i = 0; i < so->nodes; ++i) {
        const int64_t serial = next++;
        Action a{e.seq, true, so->pool, pool_name, ProvisionedNodeName(t, serial),
                 fragmented.empty() ? ProvisionedNodeRack(t, serial) : fragmented, {}};
        a.env = {{"GPUPOOL_POOL", pool_name},
                 {"GPUPOOL_NODE", a.node},
                 {"GPUPOOL_RACK", a.rack},
                 {"GPUPOOL_REGION", t.region},
                 {"GPUPOOL_ZONE", t.zone},
                 {"GPUPOOL_GPU_MODEL", Catalog::Builtin().Get(t.gpu_model).name},
                 {"GPUPOOL_GPUS", std::to_string(t.gpus)},
                 {"GPUPOOL_WARM", i < warm ? "1" : "0"}};
        actions.push_back(std::move(a));
      }
    }
    std::lock_guard lock(mu_);
    for (Action& a : actions) planned_.push_back(std::move(a));
  } else if (const auto* r = std::get_if<NodeRemoved>(&e.body)) {
    if (settings_.remove.empty()) return;
    const Node& node = state.cluster.node(r->node);
    Action a{e.seq, false, node.pool, state.pools[node.pool].name, state.cluster.node_name(r->node), "", {}};
    a.env = {{"GPUPOOL_POOL", a.pool_name}, {"GPUPOOL_NODE", a.node}};
    std::lock_guard lock(mu_);
    planned_.push_back(std::move(a));
  }
}

void CommandNodeProvider::Committed(int64_t seq) {
  std::lock_guard lock(mu_);
  size_t n = 0;
  while (n < planned_.size() && planned_[n].seq <= seq) ++n;
  if (n == 0) return;
  std::vector<Action> ready(std::make_move_iterator(planned_.begin()), std::make_move_iterator(planned_.begin() + n));
  planned_.erase(planned_.begin(), planned_.begin() + n);
  for (Action& a : ready) Launch(std::move(a));
}

void CommandNodeProvider::Abandon(int64_t seq) {
  std::lock_guard lock(mu_);
  std::erase_if(planned_, [seq](const Action& a) { return a.seq > seq; });
}

void CommandNodeProvider::Launch(Action a) {
  // Threads whose command ended are joined here (and in Stop).
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->done) {
      it->thread.join();
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  if (stopping_) {
    LogInfo("node provider: shutting down, command not started",
            {{"node", a.node}, {"pool", a.pool_name}, {"action", a.create ? "create" : "delete"}});
    return;
  }
  ++running_;
  Worker& w = workers_.emplace_back();
  w.thread = std::thread([this, a = std::move(a), self = &w] { RunAction(a, self); });
}

void CommandNodeProvider::RunAction(const Action& a, Worker* self) {
  if (a.create) {
    if (a.node.empty()) {
      on_failed_(Failed{a.pool, "", "pool '" + a.pool_name + "' has no scaling settings"});
    } else {
      LogInfo("node provider: creating a node", {{"node", a.node}, {"pool", a.pool_name}, {"rack", a.rack}});
      const CommandOutcome o = RunCommand(env_, settings_.create, a.env, settings_.timeout);
      if (o.ok) {
        LogInfo("node provider: node created", {{"node", a.node}, {"pool", a.pool_name}});
        on_created_(Created{a.pool, a.node, a.rack});
      } else {
        std::string reason = ProgramName(settings_.create) + " " + o.Describe();
        LogError("node provider: node not created", {{"node", a.node}, {"pool", a.pool_name}, {"reason", reason}});
        on_failed_(Failed{a.pool, a.node, std::move(reason)});
      }
    }
  } else {
    LogInfo("node provider: deleting a node", {{"node", a.node}, {"pool", a.pool_name}});
    const CommandOutcome o = RunCommand(env_, settings_.remove, a.env, settings_.timeout);
    if (!o.ok) {
      LogError("node provider: node not deleted (it has left its pool; delete it by hand)",
               {{"node", a.node}, {"pool", a.pool_name}, {"reason", ProgramName(settings_.remove) + " " + o.Describe()}});
    }
  }
  std::lock_guard lock(mu_);
  self->done = true;
  --running_;
  cv_.notify_all();
}

void CommandNodeProvider::Stop() {
  std::unique_lock lock(mu_);
  if (!stopping_ && !planned_.empty()) {
    LogInfo("node provider: shutting down; planned commands dropped (their scale-outs fail at the next start)",
            {{"commands", std::to_string(planned_.size())}});
  }
  stopping_ = true;
  planned_.clear();
  if (running_ > 0) {
    LogInfo("node provider: waiting for running commands", {{"commands", std::to_string(running_)}});
  }
  cv_.wait(lock, [&] { return running_ == 0; });
  std::list<Worker> workers;
  workers.swap(workers_);
  lock.unlock();
  for (Worker& w : workers) w.thread.join();
}

int64_t CommandNodeProvider::busy() const {
  std::lock_guard lock(mu_);
  return static_cast<int64_t>(planned_.size()) + running_;
}

}  // namespace gpupool
