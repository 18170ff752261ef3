// A server's journal made by the simulator (issue 20's "synthetic month"):
// a world and a workload run through the same Engine as the daemon, every
// event written to DIR/gpupool.db as the server writes it, and the world
// recorded as the configuration in force (src/server/config_record.h), so
// that `gpupool sim replay` and `gpupool config check` read it as a real
// server's. For tests and benchmarks.
//
// The world (name, engine, node classes, cluster, pools, tenants,
// priorities) is shared by the scenario the simulator runs (with
// `workload`'s keys added) and the server configuration recorded (with
// `server`'s keys added), so the two describe the same pool. The
// simulator's control loops tick every 30 s: the server configuration
// must say `server: {tick: 30s}` for a faithful replay.
#pragma once

#include <cstdint>
#include <string>

#include "src/base/status.h"

namespace gpupool::testing {

struct SyntheticHistory {
  std::string world;     // YAML keys shared by the scenario and the server configuration
  std::string workload;  // YAML keys of the scenario only (seed, horizon, workload)
  std::string server;    // YAML keys of the server configuration only (server: ...)
  std::string ServerConfigText() const { return world + server; }
};

struct SyntheticJournal {
  int64_t events = 0;
  int64_t jobs = 0;  // JobSubmitted events
};

// A pool of `nodes` 8-GPU H100 servers (one pool, three tenants: research
// guaranteed half the GPUs, product a quarter, interns none; each may
// borrow) over `days`, with training jobs of 1 to 8 GPUs in three priority
// classes arriving with the working day at about `load` of the GPUs (run
// times lognormal, median 2 h, at most 24 h). Deterministic in `seed`.
SyntheticHistory SyntheticMonth(int nodes, int days, double load, uint64_t seed);

// Runs the history and writes DIR/gpupool.db (DIR is created; it must not
// hold a journal yet) and DIR/server.yaml (the configuration recorded).
Result<SyntheticJournal> WriteSyntheticJournal(const SyntheticHistory& h, const std::string& dir);

}  // namespace gpupool::testing
