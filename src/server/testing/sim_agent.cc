#include "src/server/testing/sim_agent.h"

#include <algorithm>
#include <cstdio>

#include "src/base/check.h"

namespace gpupool {
namespace {

constexpr int64_t kH100MemoryMib = 81920;

TaskRef RefOf(const TaskOrder& o) { return TaskRef{o.job, o.replica, o.attempt}; }

std::string TaskName(const TaskOrder& o) {
  return "job " + std::to_string(o.job) + " (tenant " + o.tenant + ", attempt " + std::to_string(o.attempt) + ")";
}

// What a task takes of each of its GPUs, in milli.
int32_t MilliOf(const TaskOrder& o) { return o.gpu_mode == "whole" ? 1000 : o.gpu_milli; }

}  // namespace

SimAgent::SimAgent(Options options) : options_(std::move(options)) {
  GP_CHECK(options_.gpus >= 1 && options_.gpus <= kMaxGpus) << options_.gpus << " GPUs";
  gpus_.resize(static_cast<size_t>(options_.gpus));
}

bool SimAgent::Beat(const Call& call, Instant now) {
  if (!alive_) return false;
  return session_.empty() ? Register(call, now) : Heartbeat(call, now);
}

bool SimAgent::Register(const Call& call, Instant now) {
  RegisterRequest r;
  r.protocol = 1;
  r.node = options_.node;
  r.backend = "fake";
  r.cpu_milli = options_.cpu_milli;
  r.memory_mib = options_.memory_mib;
  for (int g = 0; g < options_.gpus; ++g) {
    r.gpus.push_back(GpuDevice{g, "GPU-" + options_.node + "-" + std::to_string(g), "NVIDIA H100 80GB HBM3", "H100",
                               kH100MemoryMib, false, {}, {}});
  }
  r.isolation_given = true;
  const std::optional<Reply> answer = call(RegisterAgentCmd{std::move(r)});
  Trace(!answer ? "register: no answer" : answer->error ? "register: " + answer->error->message : "registered");
  if (!answer || answer->error) return false;
  const ApiResult<AgentReply> parsed = ParseAgentReply(answer->detail);
  if (!parsed.ok()) {
    Violation("the registration's reply does not parse: " + parsed.error.field + ": " + parsed.error.message);
    return false;
  }
  session_ = parsed.value->session;
  last_ok_ = now;
  fence_after_ = Duration(parsed.value->fence_after_ms);
  Apply(*parsed.value);
  return true;
}

bool SimAgent::Heartbeat(const Call& call, Instant now) {
  HeartbeatRequest h;
  h.protocol = 1;
  h.node = options_.node;
  h.session = session_;
  for (int g = 0; g < options_.gpus; ++g) {
    GpuSample s;
    s.index = g;
    s.util_pct = 50;
    s.memory_total_mib = kH100MemoryMib;
    h.gpus.push_back(s);
  }
  for (const auto& [ref, t] : tasks_) {
    if (auto report = ReportOf(t)) h.tasks.push_back(*report);
  }
  for (int64_t id : scrubs_done_) h.scrubs.push_back(ScrubReport{id, true, 0, 0, ""});
  const std::optional<Reply> answer = call(AgentHeartbeatCmd{h});
  if (!answer) Trace("heartbeat: no answer");
  if (answer && answer->error) Trace("heartbeat: " + answer->error->message);
  if (!answer) return false;
  if (answer->error) {
    const int status = answer->error->http_status;
    if (status == 404 || status == 409) session_.clear();  // unknown node, or another session: register
    return false;
  }
  const ApiResult<AgentReply> parsed = ParseAgentReply(answer->detail);
  if (!parsed.ok()) {
    Violation("a heartbeat's reply does not parse: " + parsed.error.field + ": " + parsed.error.message);
    return false;
  }
  last_ok_ = now;
  fence_after_ = Duration(parsed.value->fence_after_ms);
  for (const TaskReport& r : h.tasks) {
    if (r.phase == TaskPhase::kExited) acknowledged_exits_.push_back({r.job, r.replica, r.attempt});
  }
  Apply(*parsed.value);
  return true;
}

std::optional<TaskReport> SimAgent::ReportOf(const Task& t) const {
  TaskReport r;
  r.job = t.order.job;
  r.replica = t.order.replica;
  r.attempt = t.order.attempt;
  if (t.order.action == TaskAction::kCheckpoint && t.checkpointed) {
    r.phase = TaskPhase::kCheckpointed;
    r.checkpoint_acked = t.checkpoint_acked;
  } else if (t.phase == Task::Phase::kRunning) {
    r.phase = TaskPhase::kRunning;
    r.util_pct = 50;
  } else if (t.phase == Task::Phase::kExited) {
    r.phase = TaskPhase::kExited;
    r.exit_code = t.exit_code;
  } else {
    return std::nullopt;  // waiting to start
  }
  return r;
}

void SimAgent::Apply(const AgentReply& reply) {
  last_reply_ = reply;
  if (!reply.has_desired) return;
  if (options_.trace) {
    std::string line = "desired:";
    for (const TaskOrder& o : reply.tasks) {
      line += " job " + std::to_string(o.job) + "/" + o.tenant + "#" + std::to_string(o.attempt) + " gpus";
      for (int g : o.gpus) line += " " + std::to_string(g);
      line += ";";
    }
    line += " scrubs:";
    for (const ScrubOrder& s : reply.scrubs) {
      line += " " + std::to_string(s.id) + "[";
      for (int g : s.gpus) line += " " + std::to_string(g);
      line += " ]";
    }
    Trace(line);
  }
  std::set<TaskRef> desired;
  for (const TaskOrder& o : reply.tasks) desired.insert(RefOf(o));
  StopUndesired(desired);
  for (const TaskOrder& o : reply.tasks) {
    auto [it, added] = tasks_.try_emplace(RefOf(o), Task{o});
    if (!added) it->second.order = o;  // its action may change
  }
  CheckShares(reply.tasks);
  scrub_orders_ = reply.scrubs;
  std::set<int64_t> orders;
  for (const ScrubOrder& s : scrub_orders_) orders.insert(s.id);
  std::erase_if(scrubs_done_, [&](int64_t id) { return !orders.contains(id); });  // acknowledged
  RunScrubs();
  StartWaiting();
}

void SimAgent::StopUndesired(const std::set<TaskRef>& desired) {
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    if (desired.contains(it->first)) {
      ++it;
      continue;
    }
    if (it->second.phase == Task::Phase::kRunning) Leave(it->second.order);
    Trace("stop " + TaskName(it->second.order));
    it = tasks_.erase(it);
  }
}

void SimAgent::RunScrubs() {
  for (const ScrubOrder& s : scrub_orders_) {
    if (scrubs_done_.contains(s.id)) continue;
    for (int g : s.gpus) {
      if (g >= 0 && g < options_.gpus) gpus_[static_cast<size_t>(g)].clear();
    }
    Trace("scrub " + std::to_string(s.id));
    scrubs_done_.insert(s.id);
  }
}

bool SimAgent::ScrubPending(const std::vector<int>& gpus) const {
  for (const ScrubOrder& s : scrub_orders_) {
    if (scrubs_done_.contains(s.id)) continue;
    for (int g : s.gpus) {
      if (std::find(gpus.begin(), gpus.end(), g) != gpus.end()) return true;
    }
  }
  return false;
}

void SimAgent::StartWaiting() {
  for (auto& [ref, t] : tasks_) {
    if (t.phase != Task::Phase::kWaiting) {
      if (t.order.action == TaskAction::kCheckpoint && t.phase == Task::Phase::kRunning && !t.checkpointed) {
        t.checkpointed = t.checkpoint_acked = true;
      }
      continue;
    }
    if (t.order.action == TaskAction::kCheckpoint) {
      t.checkpointed = true;  // it never started: nothing to save
      continue;
    }
    if (t.order.task.command.empty() || ScrubPending(t.order.gpus)) continue;
    CheckClean(t.order);
    Trace("start " + TaskName(t.order));
    t.phase = Task::Phase::kRunning;
  }
}

void SimAgent::CheckShares(const std::vector<TaskOrder>& tasks) {
  std::vector<int32_t> milli(gpus_.size(), 0);
  std::vector<int> whole(gpus_.size(), 0), users(gpus_.size(), 0);
  for (const TaskOrder& o : tasks) {
    for (int g : o.gpus) {
      if (g < 0 || g >= options_.gpus) {
        Violation(TaskName(o) + " is ordered onto GPU " + std::to_string(g) + ", which node " + options_.node +
                  " does not have");
        continue;
      }
      milli[g] += MilliOf(o);
      whole[g] += o.gpu_mode == "whole";
      ++users[g];
    }
  }
  for (size_t g = 0; g < gpus_.size(); ++g) {
    if (milli[g] > 1000 || (whole[g] > 0 && users[g] > 1)) {
      Violation("GPU held twice: node " + options_.node + " GPU " + std::to_string(g) + " is given to " +
                std::to_string(users[g]) + " tasks taking " + std::to_string(milli[g]) + " milli");
    }
  }
}

void SimAgent::CheckClean(const TaskOrder& order) {
  for (int g : order.gpus) {
    if (g < 0 || g >= options_.gpus) continue;
    for (const auto& [tenant, job] : gpus_[static_cast<size_t>(g)]) {
      if (tenant == order.tenant) continue;
      Violation("unscrubbed hand-over: " + TaskName(order) + " starts on node " + options_.node + " GPU " +
                std::to_string(g) + ", which holds tenant " + tenant + "'s data (left by job " + std::to_string(job) +
                ") with no scrub since");
    }
  }
}

void SimAgent::Leave(const TaskOrder& order) {
  for (int g : order.gpus) {
    if (g >= 0 && g < options_.gpus) gpus_[static_cast<size_t>(g)][order.tenant] = order.job;
  }
}

void SimAgent::Fence(Instant now) {
  if (!alive_ || session_.empty() || fence_after_ <= Duration::zero() || now - last_ok_ <= fence_after_) return;
  for (const auto& [ref, t] : tasks_) {
    if (t.phase == Task::Phase::kRunning) Leave(t.order);
  }
  Trace("fenced");
  tasks_.clear();  // started again once the server answers and still wants them
}

void SimAgent::Kill(bool tasks_survive) {
  Trace(tasks_survive ? "killed (its tasks live on)" : "killed with its tasks");
  alive_ = false;
  session_.clear();
  scrub_orders_.clear();
  scrubs_done_.clear();
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    const bool running = it->second.phase == Task::Phase::kRunning;
    if (running && tasks_survive) {
      it->second.checkpointed = it->second.checkpoint_acked = false;  // the next agent knows no order yet
      ++it;
      continue;
    }
    if (running) Leave(it->second.order);
    it = tasks_.erase(it);  // an exit nobody heard of is lost with the agent
  }
}

void SimAgent::Revive() { alive_ = true; }

bool SimAgent::EndTask(uint64_t pick, int exit_code) {
  std::vector<Task*> running;
  for (auto& [ref, t] : tasks_) {
    if (t.phase == Task::Phase::kRunning) running.push_back(&t);
  }
  if (running.empty()) return false;
  Task& t = *running[pick % running.size()];
  t.phase = Task::Phase::kExited;
  t.exit_code = exit_code;
  Trace("exit " + TaskName(t.order) + " code " + std::to_string(exit_code));
  Leave(t.order);
  return true;
}

int SimAgent::running() const {
  return static_cast<int>(std::count_if(tasks_.begin(), tasks_.end(),
                                        [](const auto& kv) { return kv.second.phase == Task::Phase::kRunning; }));
}

std::vector<SimAgent::AcknowledgedExit> SimAgent::TakeAcknowledgedExits() {
  std::vector<AcknowledgedExit> out;
  out.swap(acknowledged_exits_);
  return out;
}

void SimAgent::Trace(const std::string& line) const {
  if (options_.trace) std::printf("    %s: %s\n", options_.node.c_str(), line.c_str());
}

void SimAgent::Violation(std::string line) {
  if (violations_.size() < kMaxViolations) violations_.push_back(std::move(line));
}

}  // namespace gpupool
