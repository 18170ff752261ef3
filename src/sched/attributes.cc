#include "src/sched/attributes.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace gpupool {

Result<Version> ParseVersion(std::string_view text) {
  Version v;
  std::string_view rest = text;
  for (int i = 0; i < 3; ++i) {
    const size_t dot = rest.find('.');
    const std::string_view part = rest.substr(0, dot);
    int32_t n = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), n);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size() || n < 0) {
      return InvalidArgument("version '" + std::string(text) + "': expected MAJOR[.MINOR[.PATCH]]");
    }
    v.parts[i] = n;
    if (dot == std::string_view::npos) return v;
    rest.remove_prefix(dot + 1);
  }
  return InvalidArgument("version '" + std::string(text) + "': at most three parts");
}

std::string FormatVersion(const Version& v) {
  return std::to_string(v.parts[0]) + "." + std::to_string(v.parts[1]) + "." + std::to_string(v.parts[2]);
}

const char* AttrName(int attr) {
  static constexpr const char* kNames[kAttrCount] = {
      "fp16_tflops",  "gpu_memory_mib", "memory_bandwidth_gbps", "interconnect_gbps",  "storage_capacity_gib",
      "storage_iops", "storage_latency_us", "network_bandwidth_gbps", "network_latency_us"};
  return kNames[attr];
}

bool LowerIsBetter(int attr) { return attr == kStorageLatencyUs || attr == kNetworkLatencyUs; }

const std::array<double, kAttrCount>& KindWeights(JobKind kind) {
  //                                                     fp16 gpumem membw  icon  stcap stiops stlat netbw netlat
  static constexpr std::array<double, kAttrCount> kTraining = {3.0, 2.0, 1.0, 3.0, 0.5, 0.5, 0.5, 1.0, 0.5};
  static constexpr std::array<double, kAttrCount> kOnline = {0.5, 1.0, 1.0, 0.5, 0.5, 3.0, 3.0, 1.0, 2.0};
  static constexpr std::array<double, kAttrCount> kBatchInf = {1.0, 1.0, 1.0, 0.5, 1.0, 2.0, 1.0, 1.0, 0.5};
  static constexpr std::array<double, kAttrCount> kDev = {1.0, 1.0, 1.0, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0};
  switch (kind) {
    case JobKind::kTraining: return kTraining;
    case JobKind::kOnlineInference: return kOnline;
    case JobKind::kBatchInference: return kBatchInf;
    case JobKind::kDevelopment:
    case JobKind::kCpu: return kDev;
  }
  return kDev;
}

AttributeTable::AttributeTable() {
  classes_.push_back(NodeAttributes{"unknown"});
  requirements_.push_back(Requirement{"none"});
  Recache();
}

uint16_t AttributeTable::AddNodeClass(NodeAttributes a) {
  classes_.push_back(std::move(a));
  Recache();
  return static_cast<uint16_t>(classes_.size() - 1);
}

uint16_t AttributeTable::AddRequirement(Requirement r) {
  requirements_.push_back(std::move(r));
  Recache();
  return static_cast<uint16_t>(requirements_.size() - 1);
}

bool AttributeTable::Compute(uint16_t c, uint16_t r, std::string* why) const {
  if (r == 0) return true;
  const NodeAttributes& node = classes_[c];
  const Requirement& req = requirements_[r];
  for (int a = 0; a < kAttrCount; ++a) {
    const double want = req.minimum[a];
    if (want <= 0) continue;
    const double have = node.value[a];
    const bool ok = LowerIsBetter(a) ? (have > 0 && have <= want) : have >= want;
    if (!ok) {
      if (why) {
        *why = std::string(AttrName(a)) + ": needs " + (LowerIsBetter(a) ? "at most " : "at least ") +
               std::to_string(want) + " (node class '" + node.name + "' has " + std::to_string(have) + ")";
      }
      return false;
    }
  }
  if (node.storage_durability_nines < req.min_storage_durability_nines) {
    if (why) *why = "storage durability: needs " + std::to_string(req.min_storage_durability_nines) + " nines";
    return false;
  }
  for (const EcosystemComponent& need : req.ecosystem) {
    auto it = std::find_if(node.ecosystem.begin(), node.ecosystem.end(),
                           [&](const EcosystemComponent& e) { return e.name == need.name; });
    if (it == node.ecosystem.end() || it->version < need.version) {
      if (why) {
        *why = "ecosystem: needs " + need.name + " >= " + FormatVersion(need.version) + " (node class '" +
               node.name + "' has " + (it == node.ecosystem.end() ? "none" : FormatVersion(it->version)) + ")";
      }
      return false;
    }
  }
  return true;
}

void AttributeTable::Recache() {
  const size_t nc = classes_.size(), nr = requirements_.size();
  satisfies_.assign(nc * nr, 0);
  score_.assign(nc * nr, 0);
  for (size_t r = 0; r < nr; ++r) {
    const Requirement& req = requirements_[r];
    const auto& w = KindWeights(req.kind);
    for (size_t c = 0; c < nc; ++c) {
      const size_t k = r * nc + c;
      satisfies_[k] = Compute(static_cast<uint16_t>(c), static_cast<uint16_t>(r), nullptr) ? 1 : 0;
      if (r == 0) continue;
      const NodeAttributes& node = classes_[c];
      double weighted = 0, total_weight = 0;
      for (int a = 0; a < kAttrCount; ++a) {
        const double want = req.minimum[a];
        const double have = node.value[a];
        if (want <= 0 || have <= 0) continue;
        const double ratio = LowerIsBetter(a) ? want / have : have / want;
        weighted += w[a] * std::min(std::max(ratio - 1.0, 0.0), 1.0);
        total_weight += w[a];
      }
      int64_t s = total_weight > 0 ? std::llround(-1000.0 * weighted / total_weight) : 0;
      if (!req.preferred_family.empty() && req.preferred_family == node.family) s += 1000;
      score_[k] = s;
    }
  }
}

bool AttributeTable::Satisfies(uint16_t c, uint16_t r) const { return satisfies_[r * classes_.size() + c] != 0; }

std::string AttributeTable::Explain(uint16_t c, uint16_t r) const {
  std::string why;
  if (Compute(c, r, &why)) return "satisfied";
  return why;
}

int64_t AttributeTable::DistanceScore(uint16_t c, uint16_t r) const { return score_[r * classes_.size() + c]; }

namespace {

class AttributeFilter final : public FilterPlugin {
 public:
  explicit AttributeFilter(const AttributeTable* t) : table_(t) {}
  std::string_view name() const override { return "AttributeFit"; }
  bool Filter(const Node& n, const Demand& d) const override { return table_->Satisfies(n.attr_class, d.requirement); }

 private:
  const AttributeTable* table_;
};

class AttributeScore final : public ScorePlugin {
 public:
  explicit AttributeScore(const AttributeTable* t) : table_(t) {}
  std::string_view name() const override { return "AttributeDistance"; }
  int64_t Score(const Node& n, const Demand& d) const override {
    return table_->DistanceScore(n.attr_class, d.requirement);
  }

 private:
  const AttributeTable* table_;
};

}  // namespace

std::unique_ptr<FilterPlugin> MakeAttributeFilter(const AttributeTable* table) {
  return std::make_unique<AttributeFilter>(table);
}
std::unique_ptr<ScorePlugin> MakeAttributeScore(const AttributeTable* table) {
  return std::make_unique<AttributeScore>(table);
}

}  // namespace gpupool
