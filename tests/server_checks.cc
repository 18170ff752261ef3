#include "tests/server_checks.h"

#include <cmath>

namespace gpupool::testing {

using nlohmann::json;

namespace {

struct Listed {
  int64_t id = -1;
  std::string state;
};

// Every job by name (a name listed twice is an error); "" or the problem.
std::string ListAll(const ServerProcess& server, const std::string& admin, std::map<std::string, Listed>& found) {
  int64_t after = 0;
  for (int page = 0; page < kMaxJobPages; ++page) {
    const auto r = Http(server, "GET", "/v1/jobs?limit=" + std::to_string(kMaxListLimit) + "&after=" +
                                           std::to_string(after), admin);
    if (r.status != 200) return "GET /v1/jobs: " + std::to_string(r.status) + " " + r.text;
    for (const json& j : r.body["jobs"]) {
      const std::string name = j.value("name", "");
      const int64_t id = j.value("id", int64_t{-1});
      if (auto it = found.find(name); it != found.end()) {
        return "job '" + name + "' exists twice (ids " + std::to_string(it->second.id) + " and " +
               std::to_string(id) + ")";
      }
      found[name] = Listed{id, j.value("state", "")};
    }
    if (r.body["next_after"].is_null()) return "";
    after = r.body["next_after"].get<int64_t>();
  }
  return "more than " + std::to_string(kMaxJobPages) + " pages of jobs";
}

}  // namespace

std::string CheckAcknowledgedJobs(const ServerProcess& server, const std::string& admin,
                                  const AcknowledgedJobs& acknowledged) {
  std::map<std::string, Listed> found;
  if (std::string why = ListAll(server, admin, found); !why.empty()) return why;
  std::map<int64_t, const Listed*> by_id;
  for (const auto& [name, id] : acknowledged.jobs) {
    const auto it = found.find(name);
    if (it == found.end()) return "acknowledged job " + name + " (id " + std::to_string(id) + ") is lost";
    if (it->second.id != id) {
      return "acknowledged job " + name + " is job " + std::to_string(it->second.id) + ", not " + std::to_string(id);
    }
    by_id[id] = &it->second;
  }
  for (int64_t id : acknowledged.cancelled) {
    const auto it = by_id.find(id);
    if (it == by_id.end() || it->second->state != "cancelled") {
      return "the acknowledged cancellation of job " + std::to_string(id) + " is lost (" +
             (it == by_id.end() ? std::string("not listed") : it->second->state) + ")";
    }
  }
  return "";
}

std::string CheckGpusHeldOnce(const ServerProcess& server, const std::string& admin) {
  const auto r = Http(server, "GET", "/v1/jobs?state=running&limit=" + std::to_string(kMaxListLimit), admin);
  if (r.status != 200) return "GET /v1/jobs?state=running: " + std::to_string(r.status) + " " + r.text;
  if (!r.body["next_after"].is_null()) return "more than " + std::to_string(kMaxListLimit) + " running jobs";
  std::map<std::pair<std::string, int>, int64_t> milli;  // (node, GPU) -> milli given
  for (const json& j : r.body["jobs"]) {
    const json& req = j["request"];
    const int64_t each =
        req.contains("gpu_fraction") ? std::llround(req["gpu_fraction"].get<double>() * 1000) : int64_t{1000};
    for (const json& p : j["placements"]) {
      for (const json& g : p["gpus"]) milli[{p["node"].get<std::string>(), g.get<int>()}] += each;
    }
  }
  for (const auto& [gpu, m] : milli) {
    if (m > 1000) {
      return "GPU held twice: " + gpu.first + " GPU " + std::to_string(gpu.second) + " is given " + std::to_string(m) +
             " milli";
    }
  }
  return "";
}

}  // namespace gpupool::testing
