// The agent's MIG lifecycle (EXEC-7; see agent.h): instances created for the
// placements the Engine plans, destroyed once idle, reported as they are.
//
// Which instances the agent may destroy: those it created (WORK/mig-created)
// once no task holds them; and any idle one, created by it or found there,
// whose memory slices a planned placement needs. An instance is held while a
// task of this agent runs or stops there, while a desired task's report
// (its exit, a failed start) is not yet settled, and while a waiting task is
// planned on it. A restarted agent first re-adopts its predecessor's tasks
// and destroys nothing before the server's first reply has said which tasks
// are desired. Before an instance is destroyed it is scrubbed (the scrub
// tool against its UUID) unless nothing ran there since its last scrub:
// the memory of a destroyed instance goes to whichever instance is created
// over its slices next, possibly another tenant's.
#include <filesystem>
#include <fstream>

#include "src/agent/agent.h"
#include "src/agent/mig_layout.h"
#include "src/model/mig.h"

namespace gpupool {
namespace {

namespace fs = std::filesystem;

std::string Placement(const std::string& profile, int start) {
  return profile + " at memory slice " + std::to_string(start);
}

}  // namespace

void Agent::RefreshMig(int gpu) {
  if (gpu < 0 || gpu >= static_cast<int>(gpus_.size()) || !gpus_[gpu].mig_enabled) return;
  auto now = backend_->ListMigInstances(gpu);
  if (!now) {
    Log("mig_list_failed", {{"gpu", std::to_string(gpu)}, {"error", now.error().message}});
    return;
  }
  gpus_[gpu].mig = std::move(*now);
}

bool Agent::MigInstanceBusy(const MigInstance& m) const {
  for (const auto& [key, t] : tasks_) {
    if (t.mig_uuid != m.uuid || !t.proc) continue;
    if (t.state == LocalTask::State::kRunning || t.state == LocalTask::State::kStopping || t.proc->Alive()) return true;
  }
  return false;
}

bool Agent::MigInstanceWanted(int gpu, const MigInstance& m) const {
  if (MigInstanceBusy(m)) return true;
  for (const auto& [key, t] : tasks_) {
    if (!t.desired) continue;
    if (t.mig_uuid == m.uuid && t.state != LocalTask::State::kDone) return true;  // its report is not settled
    const TaskOrder& o = t.order;
    if (t.state == LocalTask::State::kWaiting && o.gpu_mode == "mig" && o.gpus.size() == 1 && o.gpus[0] == gpu &&
        o.mig_profile == m.profile && o.mig_start == m.start) {
      return true;
    }
  }
  return false;
}

Status Agent::DestroyMig(int gpu, const MigInstance& m, const std::string& reason) {
  const std::string g = std::to_string(gpu);
  if (!mig_clean_.count(m.uuid)) {
    auto scrubbed = backend_->Scrub(gpu, m.uuid);
    if (!scrubbed) {
      Log("mig_destroy_failed", {{"gpu", g}, {"uuid", m.uuid}, {"error", scrubbed.error().message}});
      return FailedPrecondition("GPU " + g + ": MIG instance " + m.uuid + " is not destroyed: its scrub failed: " +
                                scrubbed.error().message);
    }
    Log("scrub", {{"gpu", g}, {"mig_uuid", m.uuid}, {"bytes", std::to_string(scrubbed->bytes)},
                  {"seconds", std::to_string(scrubbed->seconds)}});
    mig_clean_.insert(m.uuid);
  }
  auto done = backend_->DestroyMigInstance(gpu, m);
  if (!done && done.error().code != ErrorCode::kNotFound) {
    Log("mig_destroy_failed", {{"gpu", g}, {"uuid", m.uuid}, {"profile", m.profile},
                               {"start", std::to_string(m.start)}, {"error", done.error().message}});
    RefreshMig(gpu);
    return done;
  }
  Log("mig_destroy", {{"gpu", g}, {"uuid", m.uuid}, {"profile", m.profile}, {"start", std::to_string(m.start)},
                      {"reason", done ? reason : "gone already"}});
  mig_created_.erase(m.uuid);
  mig_clean_.erase(m.uuid);
  mig_retry_.erase(m.uuid);
  SaveMigCreated();
  RefreshMig(gpu);
  return {};
}

Result<MigInstance> Agent::EnsureMigInstance(const TaskOrder& o, int gpu) {
  const std::string g = std::to_string(gpu);
  const std::string want = Placement(o.mig_profile, o.mig_start);
  GpuDevice& dev = gpus_[gpu];
  if (!dev.mig_enabled) {
    return FailedPrecondition("GPU " + g + " is not in MIG mode, so no " + want +
                              " can be created there (the mode is the operator's: nvidia-smi -i " + g +
                              " -mig 1 and a GPU reset; the agent never changes it)");
  }
  RefreshMig(gpu);
  for (const MigInstance& m : dev.mig) {
    if (m.profile == o.mig_profile && m.start == o.mig_start) return m;
  }
  const MigTable* table = FindMigTable(dev.model);
  const int p = table ? MigProfileIndex(*table, o.mig_profile) : -1;
  if (p < 0) return InvalidArgument("GPU " + g + " (" + dev.model + ") has no MIG profile '" + o.mig_profile + "'");
  // Idle instances in the way go first (the driver refuses overlapping
  // placements); a busy one fails the task.
  const uint8_t slices = MigSlices(*table, p, o.mig_start);
  std::vector<MigInstance> in_the_way;
  for (const MigInstance& m : dev.mig) {
    if (!(MigSlices(*table, MigProfileIndex(*table, m.profile), m.start) & slices)) continue;
    if (MigInstanceBusy(m)) {
      std::string holder;
      for (const auto& [key, t] : tasks_) {
        if (t.mig_uuid == m.uuid) holder = " job " + std::to_string(t.order.job);
      }
      return FailedPrecondition("GPU " + g + ": the planned " + want + " overlaps MIG instance " + m.uuid + " (" +
                                Placement(m.profile, m.start) + "), which a task of" + holder + " still uses");
    }
    in_the_way.push_back(m);
  }
  for (const MigInstance& m : in_the_way) GP_TRY(DestroyMig(gpu, m, "the planned " + want + " needs its slices"));
  auto made = backend_->CreateMigInstance(gpu, o.mig_profile, o.mig_start);
  if (!made) {
    Log("mig_create_failed", {{"gpu", g}, {"profile", o.mig_profile}, {"start", std::to_string(o.mig_start)},
                              {"job", std::to_string(o.job)}, {"error", made.error().message}});
    RefreshMig(gpu);
    return std::unexpected(made.error());
  }
  Log("mig_create", {{"gpu", g}, {"uuid", made->uuid}, {"profile", made->profile},
                     {"start", std::to_string(made->start)}, {"gi", std::to_string(made->gi_id)},
                     {"ci", std::to_string(made->ci_id)}, {"job", std::to_string(o.job)}});
  mig_created_.insert(made->uuid);
  mig_clean_.insert(made->uuid);  // nothing ran there yet
  SaveMigCreated();
  RefreshMig(gpu);
  return *made;
}

void Agent::ReleaseIdleMig() {
  // Not before the first reply has said which tasks are desired, nor while a
  // predecessor's containers are unmatched (they may run on instances).
  if (!registered_ || !adoptable_.empty() || mig_created_.empty()) return;
  const auto now = std::chrono::steady_clock::now();
  for (int g = 0; g < static_cast<int>(gpus_.size()); ++g) {
    if (!gpus_[g].mig_enabled) continue;
    const std::vector<MigInstance> instances = gpus_[g].mig;  // DestroyMig refreshes the list
    for (const MigInstance& m : instances) {
      if (!mig_created_.count(m.uuid) || MigInstanceWanted(g, m)) continue;
      if (auto r = mig_retry_.find(m.uuid); r != mig_retry_.end() && now < r->second) continue;
      if (!DestroyMig(g, m, "its last task left")) mig_retry_[m.uuid] = now + std::chrono::seconds(10);
    }
  }
}

Result<ScrubResult> Agent::ScrubGpu(int gpu) {
  if (gpu < 0 || gpu >= static_cast<int>(gpus_.size()) || !gpus_[gpu].mig_enabled) return backend_->Scrub(gpu, "");
  // A GPU in MIG mode is reached through its instances: each idle one is
  // scrubbed (a busy one holds a task's memory, which it keeps).
  RefreshMig(gpu);
  ScrubResult total;
  for (const MigInstance& m : gpus_[gpu].mig) {
    if (MigInstanceBusy(m)) continue;
    GP_ASSIGN_OR_RETURN(auto r, backend_->Scrub(gpu, m.uuid));
    total.bytes += r.bytes;
    total.seconds += r.seconds;
    mig_clean_.insert(m.uuid);
  }
  return total;
}

void Agent::LoadMigCreated() {
  std::ifstream in(options_.work_dir + "/mig-created");
  for (std::string uuid; std::getline(in, uuid);) {
    if (!uuid.empty()) mig_created_.insert(uuid);
  }
}

void Agent::SaveMigCreated() const {
  const std::string file = options_.work_dir + "/mig-created";
  {
    std::ofstream out(file + ".tmp", std::ios::trunc);
    for (const std::string& uuid : mig_created_) out << uuid << "\n";
  }
  std::error_code ec;
  fs::rename(file + ".tmp", file, ec);
  if (ec) Log("warning", {{"message", "cannot save " + file + ": " + ec.message()}});
}

}  // namespace gpupool
