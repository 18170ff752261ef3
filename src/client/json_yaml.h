// YAML <-> JSON for the client: job files are written in YAML and sent as
// JSON; `-o yaml` prints the server's JSON as YAML.
//
// Scalars are typed by the YAML 1.2 core schema, the way an operator reads
// the file: a plain `8` is an integer, `0.25` and `1e3` are numbers, `true` /
// `false` (also `yes` / `no` / `on` / `off`, as YAML 1.1 tools read them) are
// booleans, `~`, `null` and nothing are null, and everything else, including
// `30s`, `1h30m` and `2026-11-29T12:00:00Z`, is a string. A quoted or block
// scalar is always a string; the explicit tags !!str, !!int, !!float, !!bool
// and !!null are honoured. `.inf` and `.nan` have no JSON form and are errors.
//
// Every error names the file, line and column (1-based): "job.yaml:3:7: ...".
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "src/base/status.h"

namespace gpupool {

// The JSON value of a plain (unquoted, untagged) YAML scalar, typed as above.
// Fails only for .inf / .nan and integers outside int64.
Result<nlohmann::json> PlainScalarToJson(std::string_view text);

// Parses exactly one YAML document and converts it to JSON (objects sort
// their keys, as nlohmann::json does). A key given twice in one map, a
// non-scalar key, an unsupported tag, and a stream with more than one
// document are errors. `file` is only used in messages. An empty document is
// null.
Result<nlohmann::json> YamlToJson(std::string_view text, const std::string& file);

// The same data as YAML (block style, two-space indent, trailing newline).
// Strings that YAML would read as something else (`"8"`, `"true"`, `""`,
// `"null"`) are quoted, so YamlToJson(JsonToYaml(j)) == j for every j without
// non-finite numbers.
std::string JsonToYaml(const nlohmann::json& value);

}  // namespace gpupool
