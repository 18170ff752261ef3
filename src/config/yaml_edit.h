// Setting one value in a configuration's YAML tree by its path (`gpupool
// sim tune`, issue 20): the tuned configuration is the operator's file with
// the named values replaced, then read by the configuration's own strict
// reader, so a value out of range is refused as it would be in the file.
//
// A path is keys separated by dots; a list item is chosen by its index or
// by its `name`: "engine.lending.share", "tenants[research].quota.gpu.
// limit_gpus", "cluster.nodes[0].count". A list item must exist; a map key
// that does not is added (with the maps above it: the file left them to
// the reader's defaults). Paths are at most
// kMaxYamlPathSteps steps.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/base/status.h"

namespace gpupool {

inline constexpr int kMaxYamlPathSteps = 16;

struct YamlPathStep {
  std::string key;       // a map key ("" when the step is an item alone)
  bool item = false;     // followed by [..]
  std::string selector;  // the item's index or name
};

// kInvalidArgument naming the path and what is wrong with it.
Result<std::vector<YamlPathStep>> ParseYamlPath(std::string_view path);

// Sets the value at `path` in `root` (a deep copy is the caller's to make)
// to the scalar `value` (YAML's own typing applies: "0.5" is a number,
// "5m" a string). kNotFound naming a list item that does not exist, or a
// step that is not a map or list where the path needs one.
Status SetYamlPath(YAML::Node root, std::string_view path, const std::string& value);

// The scalar at `path` in `root`; empty when a map key on the way is not in
// the file (the reader's default applies); kNotFound naming a list item
// that does not exist, kInvalidArgument when the value is not a scalar.
Result<std::optional<std::string>> GetYamlPath(const YAML::Node& root, std::string_view path);

// `root` as YAML text (block style).
std::string YamlText(const YAML::Node& root);

}  // namespace gpupool
