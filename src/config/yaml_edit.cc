// See yaml_edit.h.
#include "src/config/yaml_edit.h"

#include <cctype>

namespace gpupool {
namespace {

bool IsIndex(const std::string& s) {
  if (s.empty() || s.size() > 9) return false;
  for (const char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// The item of list `n` that `selector` names; an undefined node when none.
YAML::Node Item(const YAML::Node& n, const std::string& selector) {
  if (IsIndex(selector)) {
    const size_t i = std::stoul(selector);
    return i < n.size() ? n[i] : YAML::Node(YAML::NodeType::Undefined);
  }
  for (size_t i = 0; i < n.size(); ++i) {
    const YAML::Node item = n[i];
    if (item.IsMap() && item["name"] && item["name"].IsScalar() && item["name"].Scalar() == selector) return item;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

std::string StepText(const std::vector<YamlPathStep>& steps, size_t upto) {
  std::string out;
  for (size_t i = 0; i <= upto && i < steps.size(); ++i) {
    if (!steps[i].key.empty()) out += (out.empty() ? "" : ".") + steps[i].key;
    if (steps[i].item) out += "[" + steps[i].selector + "]";
  }
  return out;
}

}  // namespace

Result<std::vector<YamlPathStep>> ParseYamlPath(std::string_view path) {
  const std::string p(path);
  const auto bad = [&](const std::string& why) { return InvalidArgument("path '" + p + "': " + why); };
  if (p.empty()) return bad("empty");
  std::vector<YamlPathStep> steps;
  size_t i = 0;
  while (i < p.size()) {
    YamlPathStep s;
    while (i < p.size() && p[i] != '.' && p[i] != '[') s.key += p[i++];
    if (i < p.size() && p[i] == '[') {
      const size_t close = p.find(']', i);
      if (close == std::string::npos) return bad("'[' without ']'");
      s.item = true;
      s.selector = p.substr(i + 1, close - i - 1);
      if (s.selector.empty()) return bad("an empty [] selector");
      i = close + 1;
    }
    if (s.key.empty() && !s.item) return bad("an empty step");
    steps.push_back(std::move(s));
    if (static_cast<int>(steps.size()) > kMaxYamlPathSteps) {
      return bad("more than " + std::to_string(kMaxYamlPathSteps) + " steps");
    }
    if (i < p.size()) {
      if (p[i] != '.') return bad("expected '.' after ']'");
      if (++i == p.size()) return bad("ends with '.'");
    }
  }
  return steps;
}

Status SetYamlPath(YAML::Node root, std::string_view path, const std::string& value) {
  GP_ASSIGN_OR_RETURN(const auto steps, ParseYamlPath(path));
  YAML::Node at = root;
  for (size_t i = 0; i < steps.size(); ++i) {
    const YamlPathStep& s = steps[i];
    const bool last = i + 1 == steps.size();
    if (!s.key.empty()) {
      if (!at.IsMap()) return NotFound("path '" + std::string(path) + "': " + StepText(steps, i) + ": not a map above it");
      if (last && !s.item) {
        at[s.key] = value;
        return {};
      }
      YAML::Node next = at[s.key];
      if (!next) {
        if (s.item) return NotFound("path '" + std::string(path) + "': " + StepText(steps, i) + " is not in the file");
        at[s.key] = YAML::Node(YAML::NodeType::Map);  // a map the file leaves to its defaults
        next = at[s.key];
      }
      at.reset(next);
    }
    if (s.item) {
      if (!at.IsSequence()) return NotFound("path '" + std::string(path) + "': " + StepText(steps, i) + ": not a list");
      YAML::Node item = Item(at, s.selector);
      if (!item) return NotFound("path '" + std::string(path) + "': " + StepText(steps, i) + " is not in the file");
      if (last) {
        item = value;
        return {};
      }
      at.reset(item);
    }
  }
  return {};
}

Result<std::optional<std::string>> GetYamlPath(const YAML::Node& root, std::string_view path) {
  GP_ASSIGN_OR_RETURN(const auto steps, ParseYamlPath(path));
  YAML::Node at = YAML::Clone(root);  // reads through a copy: operator[] never adds to the caller's tree
  for (size_t i = 0; i < steps.size(); ++i) {
    const YamlPathStep& s = steps[i];
    const bool last = i + 1 == steps.size();
    if (!s.key.empty()) {
      if (!at.IsMap()) return NotFound("path '" + std::string(path) + "': " + StepText(steps, i) + ": not a map above it");
      YAML::Node next = at[s.key];
      if (!next) {
        if (!s.item) return std::optional<std::string>();  // left to the reader's defaults
        return NotFound("path '" + std::string(path) + "': " + StepText(steps, i) + " is not in the file");
      }
      at.reset(next);
    }
    if (s.item) {
      if (!at.IsSequence()) return NotFound("path '" + std::string(path) + "': " + StepText(steps, i) + ": not a list");
      YAML::Node item = Item(at, s.selector);
      if (!item) return NotFound("path '" + std::string(path) + "': " + StepText(steps, i) + " is not in the file");
      at.reset(item);
    }
  }
  if (!at.IsScalar()) return InvalidArgument("path '" + std::string(path) + "': not a single value in the file");
  return std::optional<std::string>(at.Scalar());
}

std::string YamlText(const YAML::Node& root) {
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

}  // namespace gpupool
