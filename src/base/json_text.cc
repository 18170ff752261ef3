#include "src/base/json_text.h"

#include <string>
#include <unordered_set>
#include <vector>

namespace gpupool {
namespace {

using nlohmann::json;

// Why the callback stopped the parse (thrown through nlohmann's parser,
// caught in ParseJsonText: the callback has no other way to stop it).
struct Refused {
  std::string message;
};

// The parser's callback: tracks the keys of each open object, refuses a
// repeated key and nesting beyond the limit.
class Checks {
 public:
  Checks(int max_depth, size_t max_values) : max_depth_(max_depth), max_values_(max_values) {}

  bool operator()(int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start || event == json::parse_event_t::array_start ||
        event == json::parse_event_t::value) {
      if (++values_ > max_values_) throw Refused{"more than " + std::to_string(max_values_) + " values"};
    }
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        // `depth` counts the containers around this one.
        if (depth + 1 > max_depth_) {
          throw Refused{"nesting deeper than " + std::to_string(max_depth_) + " levels"};
        }
        if (event == json::parse_event_t::object_start) keys_.emplace_back();
        break;
      case json::parse_event_t::object_end:
        keys_.pop_back();
        break;
      case json::parse_event_t::key: {
        const auto& key = parsed.get_ref<const std::string&>();
        if (!keys_.back().insert(key).second) throw Refused{"key '" + key + "' given twice"};
        break;
      }
      default:
        break;
    }
    return true;
  }

 private:
  int max_depth_;
  size_t max_values_;
  size_t values_ = 0;
  std::vector<std::unordered_set<std::string>> keys_;
};

// nlohmann's messages start "[json.exception.parse_error.101] parse error at
// line 1, column 5: ..."; keep what follows the bracket.
std::string LibraryMessage(const json::exception& e) {
  std::string m = e.what();
  const size_t close = m.find("] ");
  if (close != std::string::npos) m.erase(0, close + 2);
  return m;
}

}  // namespace

Result<json> ParseJsonText(std::string_view text, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return InvalidArgument("JSON text of " + std::to_string(text.size()) + " bytes: more than the " +
                           std::to_string(limits.max_bytes) + " allowed");
  }
  try {
    return json::parse(text.begin(), text.end(), json::parser_callback_t(Checks(limits.max_depth, limits.max_values)),
                       /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const Refused& r) {
    return InvalidArgument("malformed JSON: " + r.message);
  } catch (const json::exception& e) {
    return InvalidArgument("malformed JSON: " + LibraryMessage(e));
  }
}

}  // namespace gpupool
