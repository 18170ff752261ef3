#include "src/config/traces_dir.h"

#include <cstdlib>
#include <filesystem>
#include <vector>

namespace gpupool {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

// The folders TracesDir tries after $GPUPOOL_TRACES, in order.
std::vector<std::string> Candidates(const std::string& near) {
  namespace fs = std::filesystem;
  std::vector<std::string> c = {"../shared/traces", "../../shared/traces"};
  if (!near.empty()) c.push_back((fs::path(near) / "../../../shared/traces").lexically_normal().string());
  if (std::string cache = TracesCacheDir(); !cache.empty()) c.push_back(std::move(cache));
  return c;
}

}  // namespace

std::string TracesCacheDir() {
  if (std::string xdg = Env("XDG_CACHE_HOME"); !xdg.empty()) return xdg + "/gpupool/traces";
  if (std::string home = Env("HOME"); !home.empty()) return home + "/.cache/gpupool/traces";
  return "";
}

std::string TracesDir(const std::string& near) {
  if (std::string env = Env("GPUPOOL_TRACES"); !env.empty()) return env;
  for (const std::string& c : Candidates(near)) {
    std::error_code ec;
    if (std::filesystem::is_directory(c, ec)) return c;
  }
  return "";
}

std::string TraceFile(const std::string& relative) {
  const std::string dir = TracesDir();
  if (dir.empty()) return "";
  const std::string path = dir + "/" + relative;
  return std::filesystem::exists(path) ? path : "";
}

namespace {

constexpr const char* kFetch =
    "fetch the public traces with scripts/fetch-traces.sh (installed as gpupool-fetch-traces), or run make claims";

// Where the traces folder is looked for, in order.
std::string LookedIn() {
  if (std::string env = Env("GPUPOOL_TRACES"); !env.empty()) return "$GPUPOOL_TRACES=" + env;
  std::string where = "$GPUPOOL_TRACES (unset)";
  for (const std::string& c : Candidates("")) where += ", " + c;
  return where;
}

}  // namespace

std::string MissingTraceFile(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path folder = fs::path(path).lexically_normal().parent_path().parent_path();
  auto same = [&](const std::string& dir) { return !dir.empty() && fs::path(dir).lexically_normal() == folder; };
  const bool in_traces = folder.filename() == "traces" || same(TracesDir()) || same(TracesCacheDir());
  std::string text = "the trace file " + path + " is not here";
  if (in_traces) text += " (the traces folder is looked for in " + LookedIn() + ")";
  return text + ": " + kFetch;
}

std::string MissingTrace(std::string_view relative) {
  return std::string(relative) + " is not here (looked in " + LookedIn() + "): " + kFetch;
}

}  // namespace gpupool
