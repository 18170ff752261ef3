// Job files: a job request written in YAML (examples/*.yaml), turned into
// the JSON body of `POST /v1/jobs` (JOBREQUEST in docs/api/openapi.yaml).
//
// The file is one YAML map with the keys of JOBREQUEST. Scalars are typed as
// json_yaml.h says (8 -> integer, 0.25 -> number, true -> boolean, 30s ->
// string); the keys whose values the API defines as strings (name, tenant,
// kind, sharing, requirement, durations, deadline, gpu_models[], pools[],
// stages[].sharing) always become strings, so `name: 2024` is "2024" and
// `deadline_after: 600` is "600" (which the server rejects as a duration
// without a unit, naming the field). Everything else, including whether a
// value is in range, is the server's to check: the client checks only what
// it can locate in the file better than the server could, namely YAML
// syntax, duplicate keys and unknown keys, each reported as
// "FILE:LINE:COLUMN: problem".
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "src/base/status.h"

namespace gpupool {

// The keys of a job request and of one of its stages, as the client accepts
// them (docs/api/openapi.yaml's JobRequest and Stage; a test keeps them equal).
const std::vector<std::string_view>& JobRequestKeys();
const std::vector<std::string_view>& StageKeys();

// Parses the text of a job file; `file` names it in messages.
Result<nlohmann::json> ParseJobFile(std::string_view text, const std::string& file);

// Reads and parses a job file. Fails when it cannot be read, or as ParseJobFile.
Result<nlohmann::json> LoadJobFile(const std::string& path);

}  // namespace gpupool
