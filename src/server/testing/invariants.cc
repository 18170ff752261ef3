#include "src/server/testing/invariants.h"

#include <shared_mutex>
#include <thread>

#include "src/engine/snapshot.h"

namespace gpupool {
namespace {

// The state's snapshot bytes with every queue group's blocked mark cleared.
Result<std::string> BytesWithoutBlockedMarks(const EngineState& state) {
  GP_ASSIGN_OR_RETURN(EngineState copy, DecodeSnapshot(EncodeSnapshot(state), state.lending));
  for (TenantId t : copy.queue.tenants()) {
    for (auto& [key, group] : copy.queue.tenant(t).groups) group.blocked_epoch = UINT64_MAX;
  }
  return EncodeSnapshot(copy);
}

std::string ReadModelBytes(const ReadModel& model) {
  std::shared_lock lock(model.mu());
  return model.Encode();
}

}  // namespace

Status CheckAcknowledged(const ReadModel& model, const Acknowledged& acknowledged) {
  std::shared_lock lock(model.mu());
  std::map<std::string, int> copies;  // of each acknowledged name
  for (const auto& [id, name] : acknowledged.jobs) copies[name] = 0;
  model.ForEachJob(0, -1, [&](const JobRecord& j) {
    if (auto it = copies.find(j.spec.name); it != copies.end()) ++it->second;
    return true;
  });
  for (const auto& [id, name] : acknowledged.jobs) {
    const JobRecord* j = model.job(id);
    if (!j) return FailedPrecondition("acknowledged job " + std::to_string(id) + " (" + name + ") is lost");
    if (j->spec.name != name) {
      return FailedPrecondition("acknowledged job " + std::to_string(id) + " is named '" + j->spec.name +
                                "', not '" + name + "'");
    }
    if (copies[name] != 1) {
      return FailedPrecondition("job '" + name + "' is there " + std::to_string(copies[name]) + " times");
    }
  }
  for (const auto& [id, attempt] : acknowledged.ended) {
    const JobRecord* j = model.job(id);
    const bool live = j && (j->state == JobState::kRunning || j->state == JobState::kCheckpointing);
    if (live && 1 + j->preemptions + j->interruptions == attempt) {
      return FailedPrecondition("the acknowledged end of job " + std::to_string(id) + "'s attempt " +
                                std::to_string(attempt) + " is lost: it runs that attempt again");
    }
  }
  for (JobId id : acknowledged.cancelled) {
    const JobRecord* j = model.job(id);
    if (!j || j->state != JobState::kCancelled) {
      return FailedPrecondition("the acknowledged cancellation of job " + std::to_string(id) + " is lost");
    }
  }
  return {};
}

Status CheckEqualsReplay(const ServerCore& core, ServerOptions options) {
  const EngineState& have = core.stopped_engine().state();
  if (auto ok = CheckInvariants(have); !ok) return FailedPrecondition("the state: " + ok.error().message);
  options.replay_from_start = true;
  GP_ASSIGN_OR_RETURN(auto replayed, ServerCore::Open(options));
  const EngineState& want = replayed->stopped_engine().state();
  if (have.last_seq != want.last_seq) {
    return FailedPrecondition("the state is at event " + std::to_string(have.last_seq) + ", its journal at " +
                              std::to_string(want.last_seq));
  }
  GP_ASSIGN_OR_RETURN(auto have_bytes, BytesWithoutBlockedMarks(have));
  GP_ASSIGN_OR_RETURN(auto want_bytes, BytesWithoutBlockedMarks(want));
  if (have_bytes != want_bytes) {
    return FailedPrecondition("the Engine's state differs from a replay of its journal (at event " +
                              std::to_string(have.last_seq) + ")");
  }
  if (ReadModelBytes(core.read_model()) != ReadModelBytes(replayed->read_model())) {
    return FailedPrecondition("the read model differs from a replay of its journal (at event " +
                              std::to_string(have.last_seq) + ")");
  }
  return {};
}

Status RestartChecked(TestServer& server, TestEnv& env, const Acknowledged& acknowledged, int attempts) {
  for (int attempt = 0; attempt < attempts; ++attempt) {
    const int64_t crashes = env.crashes();
    GP_TRY(server.Restart(/*start=*/false));
    if (auto ok = CheckEqualsReplay(server.core(), server.options()); !ok) return ok;
    if (auto ok = CheckAcknowledged(server.core().read_model(), acknowledged); !ok) return ok;
    server.core().Start();
    if (server.Sync()) return {};
    // A 503 comes before the halt; the crash hook follows on the writer.
    for (int waited_ms = 0; env.crashes() == crashes; ++waited_ms) {
      if (waited_ms == 10'000) return FailedPrecondition("the server answered 503 and did not halt");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  return FailedPrecondition("the server does not start: a fault fired at each of " + std::to_string(attempts) +
                            " starts");
}

Status StopChecked(TestServer& server, const Acknowledged& acknowledged) {
  server.core().Stop();
  if (auto ok = CheckEqualsReplay(server.core(), server.options()); !ok) return ok;
  return CheckAcknowledged(server.core().read_model(), acknowledged);
}

}  // namespace gpupool
