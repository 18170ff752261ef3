#include "src/client/job_file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include "src/client/json_yaml.h"

namespace gpupool {
namespace {

// JOBREQUEST's keys (docs/api/openapi.yaml, components.schemas.JobRequest).
// clang-format off
const std::vector<std::string_view> kJobKeys = {
    "name", "tenant", "kind", "priority", "replicas", "max_replicas", "gpus", "gpu_fraction", "gpu_memory_gib", "sharing",
    "cpu_cores", "memory_gib", "gpu_models", "pools", "requirement", "labels", "affinity", "anti_affinity",
    "checkpointable", "checkpoint_interval",
    "checkpoint_duration", "deadline", "deadline_after", "expected_duration", "stages", "command", "env",
    "working_dir", "checkpoint_signal", "checkpoint_timeout", "stop_grace", "image", "shm_gib", "network"};
const std::vector<std::string_view> kStageKeys = {
    "gpus", "gpu_fraction", "gpu_memory_gib", "sharing", "cpu_cores", "memory_gib"};
// Keys whose values are strings in the API.
const std::vector<std::string_view> kStringKeys = {
    "name", "tenant", "kind", "sharing", "requirement", "checkpoint_interval", "checkpoint_duration", "deadline",
    "deadline_after", "expected_duration", "working_dir", "checkpoint_signal", "checkpoint_timeout", "stop_grace",
    "image", "network"};
const std::vector<std::string_view> kStringListKeys = {"gpu_models", "pools", "labels", "affinity", "anti_affinity",
                                                       "command"};
// clang-format on

bool Contains(const std::vector<std::string_view>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string Join(const std::vector<std::string_view>& v) {
  std::string out;
  for (auto s : v) {
    if (!out.empty()) out += ", ";
    out += s;
  }
  return out;
}

std::string Where(const std::string& file, const YAML::Mark& mark) {
  return file + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1) + ": ";
}

// A plain scalar that YAML typed as a number or a boolean becomes the string
// the operator wrote.
void ForceString(const YAML::Node& node, nlohmann::json& value) {
  if (node.IsScalar() && node.Tag() == "?" && (value.is_number() || value.is_boolean())) value = node.Scalar();
}

// Checks the keys of one map (the request or a stage) and forces its string
// fields; `json` is the converted map.
Status CheckMap(const YAML::Node& map, nlohmann::json& json, const std::vector<std::string_view>& allowed,
                const std::string& what, const std::string& file) {
  for (const auto& kv : map) {
    const std::string key = kv.first.Scalar();
    if (!Contains(allowed, key)) {
      return InvalidArgument(Where(file, kv.first.Mark()) + "unknown key '" + key + "' in " + what +
                             " (expected one of: " + Join(allowed) + ")");
    }
    nlohmann::json& value = json[key];
    if (Contains(kStringKeys, key)) ForceString(kv.second, value);
    if (Contains(kStringListKeys, key) && kv.second.IsSequence() && value.is_array()) {
      for (size_t i = 0; i < kv.second.size(); ++i) ForceString(kv.second[i], value[i]);
    }
    if (key == "env" && kv.second.IsMap() && value.is_object()) {  // env: {PORT: 8080} means "8080"
      for (const auto& e : kv.second) {
        if (value.contains(e.first.Scalar())) ForceString(e.second, value[e.first.Scalar()]);
      }
    }
  }
  return {};
}

}  // namespace

const std::vector<std::string_view>& JobRequestKeys() { return kJobKeys; }
const std::vector<std::string_view>& StageKeys() { return kStageKeys; }

Result<nlohmann::json> ParseJobFile(std::string_view text, const std::string& file) {
  auto json = YamlToJson(text, file);  // syntax, duplicate keys, types of scalars
  if (!json) return json;
  if (json->is_null()) return InvalidArgument(file + ": empty job file (expected a map with at least 'name')");
  const YAML::Node root = YAML::Load(std::string(text));  // parsed once already: cannot throw
  if (!json->is_object()) {
    return InvalidArgument(Where(file, root.Mark()) + "expected a map of job request keys (name, gpus, ...)");
  }
  GP_TRY(CheckMap(root, *json, kJobKeys, "the job request", file));
  if (const YAML::Node stages = root["stages"]; stages && stages.IsSequence()) {
    for (size_t i = 0; i < stages.size(); ++i) {
      if (!stages[i].IsMap()) continue;  // the server names the wrong type
      GP_TRY(CheckMap(stages[i], (*json)["stages"][i], kStageKeys, "stages[" + std::to_string(i) + "]", file));
    }
  }
  return json;
}

Result<nlohmann::json> LoadJobFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("cannot read job file " + path);
  std::stringstream text;
  text << in.rdbuf();
  return ParseJobFile(text.str(), path);
}

}  // namespace gpupool
