// The journal read back as a history (see replay.h).
#include "src/sim/replay.h"

#include <algorithm>

namespace gpupool {
namespace {

bool IsSetUp(const EventBody& b) {
  return std::holds_alternative<PoolAdded>(b) || std::holds_alternative<NodeAdded>(b) ||
         std::holds_alternative<TenantAdded>(b) || std::holds_alternative<QuotaSet>(b);
}

// Events the replay does not apply (replay.h): each says where it cannot be faithful.
bool NotReplayed(const EventBody& b) {
  return std::holds_alternative<NodeCordoned>(b) || std::holds_alternative<NodeUncordoned>(b) ||
         std::holds_alternative<NodeDrainRequested>(b) || std::holds_alternative<NodeRemovalRequested>(b) ||
         std::holds_alternative<NodeDown>(b) || std::holds_alternative<NodeUp>(b) ||
         std::holds_alternative<GpuHealthChanged>(b) || std::holds_alternative<TaskMemoryObserved>(b) ||
         std::holds_alternative<RegionsSet>(b) || std::holds_alternative<JobReclaimed>(b) ||
         std::holds_alternative<MigLayoutReported>(b);
}

std::unexpected<Error> Bad(const Event& e, const std::string& what) {
  return InvalidArgument("event " + std::to_string(e.seq) + " (" + EventName(e.body) + "): " + what);
}

// Folds one job event into the history's jobs (`index`: journal job id ->
// position in h.jobs).
Status ApplyJobEvent(const Event& e, History& h, std::map<JobId, size_t>& index) {
  const auto job = [&](JobId id) -> ObservedJob* {
    auto it = index.find(id);
    return it == index.end() ? nullptr : &h.jobs[it->second];
  };
  if (const auto* s = std::get_if<JobSubmitted>(&e.body)) {
    if (static_cast<int64_t>(h.jobs.size()) >= kMaxReplayJobs) {
      return ResourceExhausted("more than " + std::to_string(kMaxReplayJobs) + " jobs");
    }
    if (s->spec.tenant < 0 || s->spec.tenant >= static_cast<TenantId>(h.tenants.size())) return Bad(e, "unknown tenant");
    index[s->job] = h.jobs.size();
    h.jobs.push_back(ObservedJob{.job = s->job, .spec = s->spec, .tenant = h.tenants[s->spec.tenant], .submitted = e.at});
  } else if (const auto* r = std::get_if<JobRejected>(&e.body)) {
    if (r->spec.tenant < 0 || r->spec.tenant >= static_cast<TenantId>(h.tenants.size())) return Bad(e, "unknown tenant");
    index[r->job] = h.jobs.size();
    h.jobs.push_back(ObservedJob{.job = r->job, .spec = r->spec, .tenant = h.tenants[r->spec.tenant],
                                 .submitted = e.at, .rejected = true});
  } else if (const auto* p = std::get_if<JobPlaced>(&e.body)) {
    ObservedJob* j = job(p->job);
    if (j == nullptr) return Bad(e, "job " + std::to_string(p->job) + " was never submitted");
    for (const PlacedReplica& rep : p->replicas) {
      if (rep.node < 0 || rep.node >= static_cast<NodeIndex>(h.nodes.size())) return Bad(e, "unknown node");
    }
    if (!j->first_placed) {
      j->first_placed = e.at;
      j->first_placement = PlacementText(p->replicas, h.nodes);
    }
    j->last_placed = e.at;
  } else if (const auto* f = std::get_if<JobFinished>(&e.body)) {
    if (ObservedJob* j = job(f->job)) j->ended = e.at;
  } else if (const auto* c = std::get_if<JobCancelled>(&e.body)) {
    if (ObservedJob* j = job(c->job)) {
      if (j->first_placed) j->ended = e.at; else j->cancelled_pending = true;
    }
  } else if (const auto* ps = std::get_if<PreemptionStarted>(&e.body)) {
    ObservedJob* j = job(ps->victim);
    if (j != nullptr && ps->checkpoint) j->checkpoint_started = e.at;
  } else if (const auto* v = std::get_if<JobPreempted>(&e.body)) {
    if (ObservedJob* j = job(v->victim)) {
      ++j->preemptions;
      const Instant stopped = j->checkpoint_started.value_or(e.at);
      if (j->last_placed) j->kept_work += std::max(Duration(0), stopped - *j->last_placed - v->lost_work);
      j->checkpoint_started.reset();
    }
    ++h.preemptions;
  }
  if (std::holds_alternative<JobReclaimed>(e.body)) ++h.idle_reclaims;
  return {};
}

}  // namespace

std::string PlacementText(const std::vector<PlacedReplica>& replicas, const std::vector<std::string>& node_names) {
  std::vector<std::string> parts;
  for (const PlacedReplica& r : replicas) {
    std::string s = r.node >= 0 && r.node < static_cast<NodeIndex>(node_names.size()) ? node_names[r.node] : "?";
    s += ":";
    bool first = true;
    for (int g = 0; g < kMaxGpusPerNode; ++g) {
      if (!(r.gpus >> g & 1)) continue;
      s += (first ? "" : ",") + std::to_string(g);
      first = false;
    }
    parts.push_back(std::move(s));
  }
  std::sort(parts.begin(), parts.end());
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : " ") + p;
  return out;
}

Result<History> HistoryFromEvents(const std::vector<Event>& events) {
  if (static_cast<int64_t>(events.size()) > kMaxReplayEvents) {
    return ResourceExhausted(std::to_string(events.size()) + " events: at most " + std::to_string(kMaxReplayEvents));
  }
  History h;
  if (events.empty()) return h;
  h.origin = events.front().at;
  h.end = events.back().at;
  std::map<JobId, size_t> index;
  bool in_bootstrap = true;
  for (const Event& e : events) {
    in_bootstrap = in_bootstrap && e.at == h.origin && IsSetUp(e.body);
    if (const auto* p = std::get_if<PoolAdded>(&e.body)) {
      if (!in_bootstrap) return Bad(e, "a pool added after the bootstrap");
      h.pools.push_back(p->pool.name);
    } else if (const auto* t = std::get_if<TenantAdded>(&e.body)) {
      h.tenants.push_back(t->name);
    } else if (const auto* n = std::get_if<NodeAdded>(&e.body)) {
      h.nodes.push_back(n->spec.name);
      if (n->provisioned) ++h.not_replayed["NodeAdded (provisioned)"];
    } else if (const auto* q = std::get_if<QuotaSet>(&e.body)) {
      if (q->tenant < 0 || q->tenant >= static_cast<TenantId>(h.tenants.size()) ||
          q->pool >= static_cast<PoolId>(h.pools.size())) {
        return Bad(e, "unknown tenant or pool");
      }
    }
    if (IsSetUp(e.body)) {
      (in_bootstrap ? h.bootstrap : h.changes).push_back(e);
      continue;
    }
    if (NotReplayed(e.body)) ++h.not_replayed[EventName(e.body)];
    GP_TRY(ApplyJobEvent(e, h, index));
  }
  return h;
}

Fidelity CompareWithHistory(const History& h, const ReplayRun& r) {
  Fidelity f;
  std::vector<double> errors;
  std::vector<std::pair<Instant, size_t>> real_order, replay_order;
  for (size_t i = 0; i < h.jobs.size() && i < r.jobs.size(); ++i) {
    const ObservedJob& o = h.jobs[i];
    const ReplayedJob& p = r.jobs[i];
    if (o.cancelled_pending) continue;
    if (o.first_placed.has_value() != p.first_placed.has_value()) {
      ++f.started_in_one_only;
      continue;
    }
    if (!o.first_placed) continue;
    ++f.compared;
    errors.push_back(std::abs(ToSeconds(*p.first_placed - *o.first_placed)));
    if (o.first_placement != p.first_placement) ++f.placement_differs;
    real_order.emplace_back(*o.first_placed, i);
    replay_order.emplace_back(*p.first_placed, i);
  }
  std::sort(real_order.begin(), real_order.end());
  std::sort(replay_order.begin(), replay_order.end());
  for (size_t k = 0; k < real_order.size(); ++k) f.order_differs += real_order[k].second != replay_order[k].second;
  if (!errors.empty()) {
    std::sort(errors.begin(), errors.end());
    const auto rank = [&](double q) { return errors[std::min(errors.size() - 1, static_cast<size_t>(q * errors.size()))]; };
    f.start_error_p50_s = rank(0.50);
    f.start_error_p99_s = rank(0.99);
    f.start_error_max_s = errors.back();
  }
  return f;
}

}  // namespace gpupool
