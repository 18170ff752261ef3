#include "src/control/defrag_planner.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "src/base/check.h"

namespace gpupool {
namespace {

// Gains below this (in GPU milli of F) are rounding, not a gain.
constexpr double kMinGainMilli = 1e-6;

double Hours(Duration d) { return ToSeconds(d) / 3600.0; }

bool Counts(const Node& n) { return n.condition == NodeCondition::kReady && n.gpu_count > 0; }

// The plan's copies of nodes keep their kind counts (a filter may read them).
void CountKind(Node& n, const Demand& d, int delta) { Cluster::CountKind(n, d, delta); }

// Where one demand would go on one node: the GPUs, the change in the node's
// F and the node's free GPU milli afterwards.
struct Spot {
  double delta = 0;
  int32_t free_after = 0;
  GpuMask gpus = 0;
};

// Lower is better: least added F, then the busier node, then (for nodes)
// the lower index.
bool Better(double delta_a, int32_t free_a, NodeIndex node_a, double delta_b, int32_t free_b, NodeIndex node_b) {
  return std::tie(delta_a, free_a, node_a) < std::tie(delta_b, free_b, node_b);
}

// The best GPUs for `d` on `n` (whose F is `f_before`), or nullopt when it
// does not fit. Whole GPUs: the lowest-index free ones (all free GPUs look
// alike to F). A share: every fitting GPU, one per distinct GPU state.
std::optional<Spot> BestSpot(const FragmentationModel& model, const Node& n, const Demand& d, double f_before) {
  if (d.gpu_count == 0 || CheckFit(n, d) != FitFailure::kNone) return std::nullopt;
  auto try_gpus = [&](GpuMask gpus) {
    Node after = n;
    OccupyGpus(after, d, gpus, nullptr);
    return Spot{model.NodeFragMilli(after) - f_before, after.gpu_milli_free_total, gpus};
  };
  if (d.kind() == DemandKind::kWholeGpus) {
    const GpuMask gpus = FirstFittingGpus(n, d);
    if (std::popcount(gpus) < d.gpu_count) return std::nullopt;
    return try_gpus(gpus);
  }
  std::optional<Spot> best;
  std::vector<std::tuple<int16_t, GpuMode, int32_t, uint8_t, uint8_t>> seen;
  for (int g = 0; g < n.gpu_count; ++g) {
    if (!GpuFits(n, g, d)) continue;
    const auto state = std::make_tuple(n.gpu_free_milli[g], n.gpu_mode[g], n.gpu_memory_free_mib[g],
                                       n.mig_used_slices[g], n.mig_me[g]);
    if (std::find(seen.begin(), seen.end(), state) != seen.end()) continue;
    seen.push_back(state);
    const Spot s = try_gpus(static_cast<GpuMask>(1u << g));
    // Among GPUs of one node: least added F, then the fullest GPU (best fit).
    if (!best || std::tie(s.delta, n.gpu_free_milli[g]) <
                     std::tie(best->delta, n.gpu_free_milli[std::countr_zero(best->gpus)])) {
      best = s;
    }
  }
  return best;
}

using ShapeKey = std::tuple<int64_t, int64_t, int32_t, int32_t, GpuModelMask, uint64_t, uint16_t, int64_t, ShareMode,
                            int32_t, int32_t>;
ShapeKey KeyOf(const Demand& d) {
  return {d.cpu_milli,     d.memory_mib,  d.gpu_count,   d.gpu_milli, d.allowed_models,
          d.allowed_pools, d.requirement, d.reservation, d.mode,      d.gpu_memory_mib, d.mps_tenant};
}

struct Task {
  const MovableTask* in = nullptr;
  Allocation alloc;  // where it runs now
  int shape = -1;
};

// For one demand shape: the best spot on every node of the plan's view, and
// the nodes that have one, best first.
struct ShapeCache {
  Demand demand;
  std::vector<std::optional<Spot>> by_node;
  std::vector<NodeIndex> order;
};

// Orders a shape's nodes by their spots, best first.
struct SpotOrder {
  const ShapeCache& sc;
  bool operator()(NodeIndex a, NodeIndex b) const {
    const Spot& x = *sc.by_node[a];
    const Spot& y = *sc.by_node[b];
    return Better(x.delta, x.free_after, a, y.delta, y.free_after, b);
  }
};

// A node as a candidate step leaves it.
struct Touched {
  NodeIndex node;
  Node state;
  double frag;
};

// Where one task of a step went (or that it found nowhere), for telling
// when a later change could alter the step.
struct Choice {
  int task = -1;
  bool found = false;
  Spot spot;
  NodeIndex node = -1;
};

// A step played on copies of the nodes it touches.
struct Candidate {
  bool acceptable = false;
  DefragStep step;
  std::vector<Touched> touched;  // the source first
  std::vector<Choice> choices;   // in the order the tasks were placed
  double net_per_move = 0;
};

// What BestStep remembers of a candidate between steps: enough to rank it
// and to tell whether the nodes a step changes could change it.
struct Summary {
  bool acceptable = false;
  double net_per_move = 0;
  double cost = 0;
  NodeIndex node = -1;
  GpuMask freed = 0;
  std::vector<NodeIndex> touched;
  std::vector<Choice> choices;
};

// Higher net gain per move, then lower cost, lower source node, lower
// freed GPU mask.
bool Preferred(const Summary& a, const Summary& b) {
  return std::make_tuple(-a.net_per_move, a.cost, a.node, a.freed) <
         std::make_tuple(-b.net_per_move, b.cost, b.node, b.freed);
}

// A candidate step: every task on one GPU (with a whole-GPU task's other
// GPUs), or every GPU task on one node, and its evaluation while valid.
struct Unit {
  std::vector<int> tasks;  // indexes into the planner's tasks, ascending
  std::optional<Summary> summary;
};

class Planner {
 public:
  Planner(const Cluster& cluster, const FragmentationModel& model, std::span<const MovableTask> movable,
          const DefragConfig& c, const DefragFilter& allowed)
      : model_(model), c_(c), allowed_(allowed), view_(cluster.nodes()) {
    const int n = cluster.node_count();
    frag_.assign(n, 0.0);
    for (NodeIndex i = 0; i < n; ++i) {
      if (Counts(view_[i])) frag_[i] = model.NodeFragMilli(view_[i]);
    }
    std::map<ShapeKey, int> shape_of;
    std::set<AllocationId> listed;
    tasks_on_.resize(n);
    for (const MovableTask& m : movable) {
      GP_CHECK(m.allocation >= 0 && static_cast<size_t>(m.allocation) < cluster.allocation_slots().size() &&
               cluster.allocation(m.allocation).node >= 0)
          << "movable task of job " << m.job << ": allocation " << m.allocation << " is not live";
      GP_CHECK(listed.insert(m.allocation).second) << "allocation " << m.allocation << " listed twice";
      const Allocation& a = cluster.allocation(m.allocation);
      if (a.demand.gpu_count == 0) continue;  // cannot free a GPU
      auto [it, added] = shape_of.emplace(KeyOf(a.demand), static_cast<int>(shapes_.size()));
      if (added) shapes_.push_back(ShapeCache{a.demand, {}, {}});
      tasks_on_[a.node].push_back(static_cast<int>(tasks_.size()));
      tasks_.push_back(Task{&m, a, it->second});
    }
    units_.resize(n);
    for (NodeIndex i = 0; i < n; ++i) units_[i] = UnitsOf(i);
    for (ShapeCache& sc : shapes_) {
      sc.by_node.assign(n, std::nullopt);
      for (NodeIndex i = 0; i < n; ++i) {
        if (Counts(view_[i])) sc.by_node[i] = BestSpot(model_, view_[i], sc.demand, frag_[i]);
        if (sc.by_node[i]) sc.order.push_back(i);
      }
      std::sort(sc.order.begin(), sc.order.end(), SpotOrder{sc});
    }
  }

  double Pct() const {
    double f = 0;
    int64_t free = 0;
    for (size_t i = 0; i < view_.size(); ++i) {
      if (!Counts(view_[i])) continue;
      f += frag_[i];
      free += view_[i].gpu_milli_free_total;
    }
    return free == 0 ? 0.0 : f / static_cast<double>(free) * 100.0;
  }

  // The best acceptable step of at most `budget` moves, or nullopt. Units
  // are visited in a fixed order (by source node; a node's GPU groups by
  // first GPU, then the whole node); an evaluation is kept until a step
  // changes a node that could change it (see Stale).
  std::optional<Candidate> BestStep(int32_t budget) {
    const Unit* best = nullptr;
    for (std::vector<Unit>& units : units_) {
      for (Unit& u : units) {
        if (static_cast<int32_t>(u.tasks.size()) > budget) continue;
        if (!u.summary) u.summary = Summarize(Evaluate(u.tasks));
        if (u.summary->acceptable && (!best || Preferred(*u.summary, *best->summary))) best = &u;
      }
    }
    if (!best) return std::nullopt;
    return Evaluate(best->tasks);
  }

  // Makes the step part of the plan's view: its nodes, spots, units and the
  // evaluations it may have changed.
  void Apply(const Candidate& cand) {
    std::vector<NodeIndex> changed;
    for (const Touched& t : cand.touched) {
      view_[t.node] = t.state;
      frag_[t.node] = t.frag;
      changed.push_back(t.node);
    }
    std::vector<int>& left = tasks_on_[cand.step.node];
    for (const Choice& ch : cand.choices) std::erase(left, ch.task);  // a task moves at most once
    for (ShapeCache& sc : shapes_) {
      std::erase_if(sc.order,
                    [&](NodeIndex i) { return std::find(changed.begin(), changed.end(), i) != changed.end(); });
      for (NodeIndex i : changed) {
        sc.by_node[i] = Counts(view_[i]) ? BestSpot(model_, view_[i], sc.demand, frag_[i]) : std::nullopt;
        if (!sc.by_node[i]) continue;
        sc.order.insert(std::lower_bound(sc.order.begin(), sc.order.end(), i, SpotOrder{sc}), i);
      }
    }
    for (NodeIndex i : changed) units_[i] = UnitsOf(i);
    for (std::vector<Unit>& units : units_) {
      for (Unit& u : units) {
        if (u.summary && Stale(*u.summary, changed)) u.summary.reset();
      }
    }
  }

 private:
  // Could the nodes a step changed change this evaluation? Yes when it
  // touches one of them, or when one of them now offers one of its tasks a
  // better destination than the one it chose (any, when it found none).
  // Otherwise evaluating it again would make the same choices.
  bool Stale(const Summary& s, const std::vector<NodeIndex>& changed) const {
    for (NodeIndex c : changed) {
      if (std::find(s.touched.begin(), s.touched.end(), c) != s.touched.end()) return true;
    }
    for (const Choice& ch : s.choices) {
      const Task& task = tasks_[ch.task];
      for (NodeIndex c : changed) {
        const std::optional<Spot>& spot = shapes_[task.shape].by_node[c];
        if (!spot) continue;
        if (ch.found && !Better(spot->delta, spot->free_after, c, ch.spot.delta, ch.spot.free_after, ch.node)) {
          continue;
        }
        if (!allowed_ || allowed_(*task.in, c, view_[c])) return true;
      }
    }
    return false;
  }

  static Summary Summarize(const Candidate& cand) {
    Summary s;
    s.acceptable = cand.acceptable;
    s.net_per_move = cand.net_per_move;
    s.cost = cand.step.cost_gpu_hours;
    s.node = cand.step.node;
    s.freed = cand.step.freed_gpus;
    for (const Touched& t : cand.touched) s.touched.push_back(t.node);
    s.choices = cand.choices;
    return s;
  }

  // The units of source node s as the plan's view has it: each GPU whose
  // residents are all movable tasks not yet moved (a whole-GPU task on
  // several GPUs forms one unit, at its first GPU), then the whole node
  // when it has two or more such units and nothing else on its GPUs.
  std::vector<Unit> UnitsOf(NodeIndex s) const {
    std::vector<Unit> units;
    const std::vector<int>& on = tasks_on_[s];
    if (on.empty() || !Counts(view_[s])) return units;
    const Node& n = view_[s];
    bool all_movable = true;
    for (int g = 0; g < n.gpu_count; ++g) {
      if (n.gpu_residents[g] == 0) continue;
      std::vector<int> members;
      for (int t : on) {
        if (tasks_[t].alloc.gpus >> g & 1) members.push_back(t);
      }
      if (static_cast<int>(members.size()) != n.gpu_residents[g]) {
        all_movable = false;
        continue;
      }
      bool seen = false;
      for (const Unit& u : units) seen = seen || u.tasks == members;
      if (!seen) units.push_back({std::move(members), std::nullopt});
    }
    if (all_movable && units.size() >= 2) units.push_back({on, std::nullopt});
    return units;
  }

  // Plays a step on copies of the nodes it touches: every task of `unit`
  // leaves its node, largest first, for the best destination. Stops at the
  // first task with nowhere to go (not acceptable).
  Candidate Evaluate(const std::vector<int>& unit) const {
    Candidate cand = VacateSource(unit);
    double cost = 0;
    for (int t : LargestFirst(unit)) {
      const Choice choice = BestDestination(t, cand);
      cand.choices.push_back(choice);
      if (!choice.found) return cand;
      cost += Move(cand, choice);
    }
    Score(cand, cost, unit.size());
    return cand;
  }

  // A step's start: the unit's source node with the unit's tasks gone.
  Candidate VacateSource(const std::vector<int>& unit) const {
    const NodeIndex src = tasks_[unit.front()].alloc.node;
    Candidate cand;
    cand.step.node = src;
    cand.touched.reserve(unit.size() + 1);
    cand.touched.push_back({src, view_[src], 0});
    Node& source = cand.touched[0].state;
    for (int t : unit) {
      VacateGpus(source, tasks_[t].alloc);
      CountKind(source, tasks_[t].alloc.demand, -1);
    }
    cand.touched[0].frag = model_.NodeFragMilli(source);
    return cand;
  }

  // The unit's tasks, largest first (then by job and allocation).
  std::vector<int> LargestFirst(const std::vector<int>& unit) const {
    std::vector<int> order = unit;
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      const Task& x = tasks_[a];
      const Task& y = tasks_[b];
      return std::make_tuple(-x.alloc.demand.total_gpu_milli(), x.in->job, x.in->allocation) <
             std::make_tuple(-y.alloc.demand.total_gpu_milli(), y.in->job, y.in->allocation);
    });
    return order;
  }

  static int TouchedIndex(const Candidate& cand, NodeIndex i) {
    for (size_t k = 0; k < cand.touched.size(); ++k) {
      if (cand.touched[k].node == i) return static_cast<int>(k);
    }
    return -1;
  }

  // Where task t goes: the best untouched node from its shape's ranking, or
  // a node this step already placed a task on, as it left it.
  Choice BestDestination(int t, const Candidate& cand) const {
    const Task& task = tasks_[t];
    Choice choice{t, false, {}, -1};
    auto consider = [&](const Spot& s, NodeIndex i) {
      if (!choice.found || Better(s.delta, s.free_after, i, choice.spot.delta, choice.spot.free_after, choice.node)) {
        choice = Choice{t, true, s, i};
      }
    };
    for (NodeIndex i : shapes_[task.shape].order) {
      if (TouchedIndex(cand, i) >= 0) continue;
      if (allowed_ && !allowed_(*task.in, i, view_[i])) continue;
      consider(*shapes_[task.shape].by_node[i], i);
      break;
    }
    for (size_t k = 1; k < cand.touched.size(); ++k) {
      const Touched& tn = cand.touched[k];
      const std::optional<Spot> s = BestSpot(model_, tn.state, task.alloc.demand, tn.frag);
      if (s && (!allowed_ || allowed_(*task.in, tn.node, tn.state))) consider(*s, tn.node);
    }
    return choice;
  }

  // Moves the chosen task on the step's copies; returns what the move
  // costs (GPU-hours of checkpoint and restart).
  double Move(Candidate& cand, const Choice& choice) const {
    const Task& task = tasks_[choice.task];
    const Demand& d = task.alloc.demand;
    int k = TouchedIndex(cand, choice.node);
    if (k < 0) {
      cand.touched.push_back({choice.node, view_[choice.node], frag_[choice.node]});
      k = static_cast<int>(cand.touched.size()) - 1;
    }
    Touched& dest = cand.touched[k];
    OccupyGpus(dest.state, d, choice.spot.gpus, nullptr);
    CountKind(dest.state, d, +1);
    dest.frag = model_.NodeFragMilli(dest.state);
    cand.step.moves.push_back(
        Migration{task.in->job, task.in->allocation, cand.step.node, task.alloc.gpus, choice.node, choice.spot.gpus});
    return static_cast<double>(d.total_gpu_milli()) / kMilliPerGpu *
           Hours(task.in->checkpoint_duration + c_.restart_cost);
  }

  // The step's gain (fragmentation removed over the horizon) against its
  // cost, the GPUs it frees on the source, and whether it is worth it.
  void Score(Candidate& cand, double cost, size_t unit_size) const {
    double removed = 0;  // summed in touched order: deterministic
    for (const Touched& t : cand.touched) removed += frag_[t.node] - t.frag;
    const double gain = removed / kMilliPerGpu * Hours(c_.horizon);
    const Node& was = view_[cand.step.node];
    const Node& now = cand.touched[0].state;
    for (int g = 0; g < was.gpu_count; ++g) {
      if (was.gpu_residents[g] > 0 && now.gpu_residents[g] == 0) {
        cand.step.freed_gpus |= static_cast<GpuMask>(1u << g);
      }
    }
    cand.step.frag_milli_removed = removed;
    cand.step.gain_gpu_hours = gain;
    cand.step.cost_gpu_hours = cost;
    cand.net_per_move = (gain - cost) / static_cast<double>(unit_size);
    cand.acceptable = removed > kMinGainMilli && gain >= c_.min_gain_per_cost * cost;
  }

  const FragmentationModel& model_;
  const DefragConfig& c_;
  const DefragFilter& allowed_;
  std::vector<Node> view_;     // the nodes as the plan so far leaves them
  std::vector<double> frag_;   // F of each counted node of view_ (0 for the others)
  std::vector<Task> tasks_;    // movable tasks holding GPUs
  std::vector<std::vector<int>> tasks_on_;  // per node: its tasks not yet moved, ascending
  std::vector<std::vector<Unit>> units_;    // per source node
  std::vector<ShapeCache> shapes_;
};

}  // namespace

double FragmentationPct(const Cluster& cluster, const FragmentationModel& model) {
  double f = 0;
  int64_t free = 0;
  for (const Node& n : cluster.nodes()) {
    if (!Counts(n)) continue;
    f += model.NodeFragMilli(n);
    free += n.gpu_milli_free_total;
  }
  return free == 0 ? 0.0 : f / static_cast<double>(free) * 100.0;
}

DefragPlan PlanDefrag(const Cluster& cluster, const FragmentationModel& model, std::span<const MovableTask> movable,
                      const DefragConfig& c, int32_t moves_left, const DefragFilter& allowed) {
  DefragPlan plan;
  plan.frag_pct_before = plan.frag_pct_after = FragmentationPct(cluster, model);
  plan.triggered = plan.frag_pct_before > c.trigger_frag_pct;
  int32_t budget = std::min(moves_left, c.max_migrations_per_hour);
  if (!plan.triggered || budget <= 0) return plan;

  Planner planner(cluster, model, movable, c, allowed);
  while (budget > 0 && planner.Pct() > c.trigger_frag_pct) {
    std::optional<Candidate> step = planner.BestStep(budget);
    if (!step) break;
    planner.Apply(*step);
    budget -= static_cast<int32_t>(step->step.moves.size());
    plan.steps.push_back(std::move(step->step));
  }
  plan.frag_pct_after = planner.Pct();
  return plan;
}

int32_t MigrationsLeft(std::span<const Instant> started, Instant now, const DefragConfig& c) {
  const Instant since = now - std::chrono::hours(1);
  int32_t recent = 0;
  for (Instant t : started) recent += t > since && t <= now;
  return std::max(0, c.max_migrations_per_hour - recent);
}

}  // namespace gpupool
