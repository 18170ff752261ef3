// Checks of a real server's state through its API, for the SIGKILL tests
// (tests/server_crash_test.cc, tests/server_soak_test.cc): what clients
// were told holds after a restart, and no GPU is given beyond itself.
//
// Each returns "" when the check holds, else the first problem in words.
// Limits: at most kMaxJobPages pages of kMaxListLimit jobs are read.
// Thread-safety: any thread; each call makes its own requests.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "tests/server_process.h"

namespace gpupool::testing {

inline constexpr int kMaxListLimit = 1000;  // the API's page size limit
inline constexpr int kMaxJobPages = 1000;

// What clients were told: acknowledged submissions (job name -> id; names
// are unique) and acknowledged cancellations.
struct AcknowledgedJobs {
  std::map<std::string, int64_t> jobs;
  std::set<int64_t> cancelled;
};

// Every acknowledged job is listed once under its id (no other job has its
// name), and every acknowledged cancellation holds. Reads every page of
// GET /v1/jobs with `admin`; jobs submitted meanwhile are not looked at.
std::string CheckAcknowledgedJobs(const ServerProcess& server, const std::string& admin,
                                  const AcknowledgedJobs& acknowledged);

// The running jobs (one page of GET /v1/jobs?state=running, one view of
// the state) take at most a whole GPU (1000 milli) of each GPU.
std::string CheckGpusHeldOnce(const ServerProcess& server, const std::string& admin);

}  // namespace gpupool::testing
