#include "src/server/log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <nlohmann/json.hpp>

#include "src/base/time_text.h"
#include "src/server/env.h"

namespace gpupool {
namespace {

std::mutex& Mu() {
  static std::mutex mu;
  return mu;
}

void Write(const char* level, const std::string* msg, const LogFields& fields) {
  nlohmann::ordered_json j;
  // The real clock whatever Env a core runs on: people read these lines
  // beside other processes' logs.
  j["ts"] = FormatRfc3339(Env::Default()->Now());
  j["level"] = level;
  if (msg) j["msg"] = *msg;
  for (const auto& [k, v] : fields) j[k] = v;
  const std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::lock_guard lock(Mu());
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace

void LogInfo(const std::string& msg, const LogFields& fields) { Write("info", &msg, fields); }
void LogWarning(const std::string& msg, const LogFields& fields) { Write("warning", &msg, fields); }
void LogError(const std::string& msg, const LogFields& fields) { Write("error", &msg, fields); }

bool RequestLoggingEnabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("GPUPOOL_LOG_REQUESTS");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return enabled;
}

void LogRequest(const LogFields& fields) {
  if (RequestLoggingEnabled()) Write("info", nullptr, fields);
}

}  // namespace gpupool
