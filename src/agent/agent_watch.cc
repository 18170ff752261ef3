// The agent's protocol 2 (issue 18; see agent.h): the watch thread, the
// desired state held with its revision and the changes applied to it,
// reports of what changed, and the main loop's wait.
#include <fcntl.h>
#include <httplib.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "src/agent/agent.h"
#include "src/agent/jitter.h"
#include "src/base/http_client.h"

namespace gpupool {
namespace {

using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int64_t kWatchHoldMs = 25000;          // the server caps it below its request timeout
constexpr auto kWatchReadTimeout = std::chrono::seconds(45);
constexpr milliseconds kWatchBackoffFirst{200};  // after a failed watch, doubling
constexpr milliseconds kWatchBackoffMost{5000};
constexpr milliseconds kRetryAfter{1000};        // 429 and 503 say so
constexpr auto kReportRetry = std::chrono::seconds(1);
constexpr milliseconds kCollectSoon{2};  // an exited process whose exit the runtime has not collected yet

std::string KeyText(const TaskRef& k) {
  return std::to_string(k.job) + "." + std::to_string(k.replica) + "." + std::to_string(k.attempt);
}

}  // namespace

Agent::ExitFd::ExitFd(int pid) {
  if (pid > 0) fd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd_ < 0) fd_ = -1;  // no pidfd (an old kernel, a process already gone): the loop's timer reaps it
}

Agent::ExitFd& Agent::ExitFd::operator=(ExitFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    fired_ = o.fired_;
  }
  return *this;
}

Agent::ExitFd::~ExitFd() {
  if (fd_ >= 0) ::close(fd_);
}

void Agent::Wake() {
  if (wake_[1] < 0) return;
  const char c = 1;
  (void)!::write(wake_[1], &c, 1);  // a full pipe already wakes the loop
}

void Agent::WaitForWork(milliseconds at_most) {
  std::vector<pollfd> fds{{wake_[0], POLLIN, 0}};
  std::vector<LocalTask*> owners;
  for (auto& [key, t] : tasks_) {
    if (t.exit_fd.fd() >= 0) {
      fds.push_back({t.exit_fd.fd(), POLLIN, 0});
      owners.push_back(&t);
    } else if (t.exit_fd.fired() && t.proc && !t.proc->reaped()) {
      at_most = std::min(at_most, kCollectSoon);
    }
  }
  if (::poll(fds.data(), fds.size(), static_cast<int>(at_most.count())) <= 0) return;
  char drain[64];
  while (::read(wake_[0], drain, sizeof drain) > 0) {
  }
  for (size_t i = 1; i < fds.size(); ++i) {
    if (fds[i].revents != 0) owners[i - 1]->exit_fd.Fired();  // Step collects it; not polled again
  }
}

void Agent::StartWatch(const AgentReply& registered) {
  held_ = Held{registered.incarnation, registered.revision, {}};
  for (const TaskOrder& o : registered.tasks) held_.orders[Key{o.job, o.replica, o.attempt}] = o;
  {
    std::lock_guard lock(watch_mu_);
    watch_next_ = WatchRequest{kAgentProtocol, options_.node, session_, registered.incarnation, registered.revision,
                               kWatchHoldMs};
    watch_inbox_.clear();
    watch_refused_ = 0;
    watch_on_ = true;
  }
  watch_cv_.notify_all();
  if (watch_thread_.joinable()) return;
  watch_http_ = NewHttpClient(options_.server_url, options_.server_tls);
  watch_http_->set_bearer_token_auth(options_.token);
  watch_http_->set_connection_timeout(5);
  watch_http_->set_read_timeout(kWatchReadTimeout);
  watch_http_->set_keep_alive(true);  // asked again at once: one connection per agent
  watch_http_->set_tcp_nodelay(true);
  watch_thread_ = std::thread([this] { WatchLoop(); });
}

void Agent::StopWatch() {
  {
    std::lock_guard lock(watch_mu_);
    watch_on_ = false;
    watch_quit_ = true;
  }
  watch_cv_.notify_all();
  if (watch_http_) watch_http_->stop();  // ends a held request
  if (watch_thread_.joinable()) watch_thread_.join();
}

void Agent::WatchLoop() {
  milliseconds backoff = kWatchBackoffFirst;
  // This thread's own generator (jitter_ is the main loop's), seeded apart
  // per node so that agents cut off together do not retry in step.
  std::minstd_rand jitter(static_cast<uint32_t>(std::hash<std::string>{}(options_.node + "/watch") ^
                                                static_cast<size_t>(SteadyClock::now().time_since_epoch().count())));
  for (;;) {
    WatchRequest r;
    {
      std::unique_lock lock(watch_mu_);
      watch_cv_.wait(lock, [&] { return watch_quit_ || watch_on_; });
      if (watch_quit_) return;
      r = watch_next_;
    }
    auto res = watch_http_->Post("/v1/agent/watch", ToJson(r).dump(), "application/json");
    milliseconds pause{0};
    const int status = res ? res->status : 0;
    auto parsed = status == 200 ? ParseWatchReply(nlohmann::json::parse(res->body, nullptr, false))
                                : ApiResult<WatchReply>{};
    if (parsed.ok()) {
      std::lock_guard lock(watch_mu_);
      // Kept only if nothing changed what to ask meanwhile (a new
      // registration, a resync): then the next watch asks afresh.
      if (watch_on_ && watch_next_.session == r.session && watch_next_.revision == r.revision &&
          watch_next_.incarnation == r.incarnation) {
        if (parsed.value->changed) {
          watch_next_.incarnation = parsed.value->incarnation;
          watch_next_.revision = parsed.value->revision;
        }
        watch_inbox_.push_back(std::move(*parsed.value));
      }
      backoff = kWatchBackoffFirst;
    } else if (status == 404 || status == 409) {
      std::lock_guard lock(watch_mu_);
      if (watch_next_.session == r.session) {  // not an answer to a session already replaced
        watch_refused_ = status;
        watch_on_ = false;
      }
    } else {
      pause = gpupool::Jittered(status == 429 || status == 503 ? kRetryAfter : backoff, jitter);
      if (status != 429 && status != 503) backoff = std::min(backoff * 2, kWatchBackoffMost);
      if (!stop_) {
        Log("watch_failed", {{"status", std::to_string(status)},
                             {"error", res ? (status == 200 ? parsed.error.message : res->body.substr(0, 200))
                                           : DescribeHttpFailure(*watch_http_, res.error(), options_.server_url,
                                                                 options_.server_tls)}});
      }
    }
    Wake();
    if (pause.count() > 0) {
      std::unique_lock lock(watch_mu_);
      watch_cv_.wait_for(lock, pause, [&] { return watch_quit_; });
    }
  }
}

void Agent::TakeWatchAnswers() {
  std::deque<WatchReply> answers;
  int refused = 0;
  {
    std::lock_guard lock(watch_mu_);
    answers.swap(watch_inbox_);
    refused = std::exchange(watch_refused_, 0);
  }
  for (const WatchReply& w : answers) ApplyWatch(w);
  if (refused == 409) superseded_ = true;  // another agent registered for the node
  if (refused == 404) registered_ = false;  // the server does not know the node: register again
}

void Agent::ApplyWatch(const WatchReply& w) {
  if (!w.changed) return;
  if (!w.full && (w.incarnation != held_.incarnation || w.since > held_.revision)) {
    return Resync("changes since revision " + std::to_string(w.since) + " of " + w.incarnation + "; held " +
                  std::to_string(held_.revision) + " of " + held_.incarnation);
  }
  if (!w.full && w.revision <= held_.revision) return;  // already held
  std::map<Key, TaskOrder> changed;
  for (const TaskOrder& o : w.tasks) changed[Key{o.job, o.replica, o.attempt}] = o;
  Held next{w.incarnation, w.revision, {}};
  for (const TaskRef& k : w.task_keys) {
    const Key key{k.job, k.replica, k.attempt};
    if (auto it = changed.find(key); it != changed.end()) {
      next.orders[key] = std::move(it->second);
    } else if (auto had = held_.orders.find(key); !w.full && had != held_.orders.end()) {
      next.orders[key] = had->second;
    } else {
      return Resync("task " + KeyText(k) + " named without its order");
    }
  }
  held_ = std::move(next);
  interval_ = milliseconds(w.heartbeat_interval_ms);
  fence_after_ = milliseconds(w.fence_after_ms);
  if (!w.pool.empty()) pool_ = w.pool;
  std::vector<TaskOrder> tasks;
  for (const auto& [key, o] : held_.orders) tasks.push_back(o);
  ApplyDesired(tasks, w.scrubs);
}

void Agent::Resync(const std::string& why) {
  Log("watch_resync", {{"reason", why}});
  std::lock_guard lock(watch_mu_);
  watch_next_.incarnation.clear();
  watch_next_.revision = 0;  // the next answer is the whole state
  watch_inbox_.clear();
}

void Agent::ReportChanges() {
  if (server_protocol_ < 2 || !registered_ || SteadyClock::now() < next_report_) return;
  TaskReportRequest r;
  r.protocol = kAgentProtocol;
  r.node = options_.node;
  r.session = session_;
  static const std::map<std::string, TaskUsage> kNoUsage;  // utilization goes with heartbeats
  int64_t budget = kLogBudgetBytes;
  for (const auto& [key, t] : tasks_) {
    auto x = ReportOf(t, kNoUsage);
    if (!x || x->phase == t.reported) continue;
    // An ended task's last output goes with its end: its job's logs are whole when it is seen to end.
    const bool ended = x->phase == TaskPhase::kExited || x->phase == TaskPhase::kStartFailed;
    if (auto c = ended && budget > 0 ? NextLogChunk(t, budget) : std::nullopt) {
      budget -= static_cast<int64_t>(c->data.size());
      r.logs.push_back(std::move(*c));
    }
    r.tasks.push_back(std::move(*x));
  }
  for (const auto& [id, s] : scrubs_done_) {
    if (!scrubs_reported_.count(id)) r.scrubs.push_back(s);
  }
  if (r.tasks.empty() && r.scrubs.empty()) return;
  int status = 0;
  auto reply = Post("/v1/agent/report", ToJson(r), &status);
  if (!reply) {
    Log("report_failed", {{"error", reply.error().message}});
    next_report_ = SteadyClock::now() + kReportRetry;  // the heartbeat carries them too
    if (status == 404) registered_ = false;
    if (status == 409) superseded_ = true;
    return;
  }
  last_ok_ = SteadyClock::now();  // the server counts a report as a heartbeat
  for (const TaskReport& x : r.tasks) {
    if (auto it = tasks_.find(Key{x.job, x.replica, x.attempt}); it != tasks_.end()) it->second.reported = x.phase;
  }
  for (const ScrubReport& s : r.scrubs) scrubs_reported_.insert(s.id);
  auto parsed = ParseAgentReply(*reply);
  if (parsed.ok()) Apply(*parsed.value);  // the log acknowledgements (no desired state); else the heartbeat resends
}

}  // namespace gpupool
