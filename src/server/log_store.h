// Task logs uploaded by agents (stdout and stderr of each replica attempt),
// kept as files DIR/logs/ID/JOB/REPLICA.ATTEMPT.log for `gpupool job logs`
// (ID: the data directory's identity, data_dir.h; files 0600, folders
// 0700). A write refused for want of space fails with kResourceExhausted,
// and the agent is told to send that chunk again (AgentService::StoreLogs).
//
// Appends are idempotent by offset: a chunk that repeats bytes already
// held adds only what is new, and a chunk beyond the end (bytes lost in
// between) adds nothing; either way the answer is the size held, where the
// agent's next chunk starts. Logs are diagnostics, not acknowledged state:
// they are written without fsync. A file stops growing at the store's
// max_bytes_per_task (server.max_log_bytes_per_task).
//
// Files are written through the server's Env (env.h), so that a test can
// fail them.
//
// Thread-safety: safe for concurrent use.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "src/api/agent_protocol.h"
#include "src/base/status.h"
#include "src/server/env.h"

namespace gpupool {

inline constexpr int64_t kDefaultMaxLogBytesPerTask = int64_t{64} << 20;

class LogStore {
 public:
  // `env` outlives the store; `max_bytes_per_task` > 0.
  LogStore(Env& env, std::string dir, int64_t max_bytes_per_task = kDefaultMaxLogBytesPerTask)
      : env_(env), dir_(std::move(dir)), max_bytes_per_task_(max_bytes_per_task) {}

  // Returns the number of bytes held for the chunk's (job, replica,
  // attempt) afterwards. A file takes bytes up to max_bytes_per_task; the
  // rest of a chunk, and every chunk after, is counted as held (so the
  // agent moves on) but not stored.
  Result<int64_t> Append(const LogChunk& chunk);

  struct Part {
    int32_t replica = 0, attempt = 0;
    int64_t bytes = 0;     // the file's size
    std::string text;      // its last max_bytes
  };
  // Every log of a job, by attempt then replica. Empty when none arrived.
  Result<std::vector<Part>> Read(JobId job, int64_t max_bytes) const;

 private:
  std::string FileOf(JobId job, int32_t replica, int32_t attempt) const;
  Env& env_;
  const std::string dir_;
  const int64_t max_bytes_per_task_;
  mutable std::mutex mu_;
  // Bytes held (files seen or written).
  std::map<std::tuple<JobId, int32_t, int32_t>, int64_t> sizes_;  // GUARDED_BY(mu_)
};

}  // namespace gpupool
