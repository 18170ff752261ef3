#include "src/http/router.h"

#include "src/base/check.h"

namespace gpupool::http {
namespace {

constexpr size_t kMaxSegments = 32;  // a path with more matches nothing (patterns are short)
constexpr size_t kMaxDigits = 19;    // fits an int64

// Splits "/a/b/c" into "a", "b", "c" ("/" into none); false on an empty
// segment ("//", a trailing "/") or too many.
bool Split(std::string_view path, std::vector<std::string_view>* parts) {
  parts->clear();
  if (path.empty() || path[0] != '/') return false;
  if (path.size() == 1) return true;
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (end == start || parts->size() == kMaxSegments) return false;
    parts->push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return true;
}

bool AllDigits(std::string_view s) {
  if (s.empty() || s.size() > kMaxDigits) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

void Router::Add(Route route) {
  std::vector<std::string_view> parts;
  GP_CHECK(Split(route.pattern, &parts)) << "route pattern '" << route.pattern << "'";
  Compiled c;
  for (std::string_view p : parts) {
    Segment s;
    if (p.front() == '{') {
      GP_CHECK(p.back() == '}' && p.size() > 2) << "route pattern '" << route.pattern << "'";
      const std::string_view inner = p.substr(1, p.size() - 2);
      const size_t colon = inner.find(':');
      s.kind = Segment::Kind::kAny;
      if (colon != std::string_view::npos) {
        GP_CHECK(inner.substr(colon + 1) == "digits") << "route pattern '" << route.pattern << "'";
        s.kind = Segment::Kind::kDigits;
      }
    } else {
      s.text = std::string(p);
    }
    c.segments.push_back(std::move(s));
  }
  if (route.name.empty()) route.name = route.pattern;
  for (const Route& r : routes_) {
    GP_CHECK(!(r.method == route.method && r.pattern == route.pattern))
        << "duplicate route " << route.method << " " << route.pattern;
  }
  routes_.push_back(std::move(route));
  compiled_.push_back(std::move(c));
}

bool Router::Matches(const Compiled& c, const std::vector<std::string_view>& parts,
                     std::vector<std::string>* captures, uint64_t* score) {
  if (c.segments.size() != parts.size()) return false;
  captures->clear();
  *score = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Segment& s = c.segments[i];
    *score <<= 1;
    if (s.kind == Segment::Kind::kLiteral) {
      if (s.text != parts[i]) return false;
      *score |= 1;
      continue;
    }
    if (s.kind == Segment::Kind::kDigits && !AllDigits(parts[i])) return false;
    captures->emplace_back(parts[i]);
  }
  return true;
}

Router::Match Router::Find(std::string_view method, std::string_view path) const {
  Match best;
  std::vector<std::string_view> parts;
  if (!Split(path, &parts)) return best;
  const std::string_view want = method == "HEAD" ? std::string_view("GET") : method;
  uint64_t best_score = 0;
  std::vector<std::string> captures;
  std::string allow;
  for (size_t i = 0; i < routes_.size(); ++i) {
    uint64_t score = 0;
    if (!Matches(compiled_[i], parts, &captures, &score)) continue;
    if (routes_[i].method != want) {
      if (allow.find(routes_[i].method) == std::string::npos) {
        allow += (allow.empty() ? "" : ", ") + routes_[i].method;
      }
      continue;
    }
    if (!best.route || score > best_score) {
      best.route = &routes_[i];
      best.captures = captures;
      best_score = score;
    }
  }
  if (!best.route) best.allow = std::move(allow);
  return best;
}

}  // namespace gpupool::http
