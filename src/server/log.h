// Structured logs: one JSON object per line on stderr,
// {"ts":"2026-11-29T12:00:00.000Z","level":"info","msg":"...",...fields}.
// Request logs carry the request id (X-Request-Id, or one the server made).
//
// Thread-safety: lines from concurrent callers never interleave.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace gpupool {

using LogFields = std::vector<std::pair<std::string, std::string>>;

void LogInfo(const std::string& msg, const LogFields& fields = {});
void LogWarning(const std::string& msg, const LogFields& fields = {});
void LogError(const std::string& msg, const LogFields& fields = {});
// Requests are logged only when enabled (GPUPOOL_LOG_REQUESTS=0 turns it
// off, for benchmarks).
void LogRequest(const LogFields& fields);
bool RequestLoggingEnabled();

}  // namespace gpupool
