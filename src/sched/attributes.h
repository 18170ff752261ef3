// Heterogeneous matching (POOL-4, POOL-5): one description for NVIDIA GPUs
// and domestic accelerators, job requirements against it, an ecosystem
// compatibility filter and a weighted attribute-distance score.
//
// Nodes carry an attribute class (Node::attr_class), jobs a requirement
// (Demand::requirement); both index an AttributeTable. Class 0 and
// requirement 0 exist in every table and mean "nothing known / nothing
// required".
//
// Filter: a node passes a requirement when it meets every minimum (and every
// latency maximum) and, for each required ecosystem component (e.g. cuda >=
// 12.0, nccl >= 2.18), runs that component at that version or newer. A job
// built for CUDA never lands on an accelerator without it.
//
// Score: 0 when nothing is required; otherwise, with r_i the requirement and
// v_i the node's value on attribute i (latencies inverted so that more is
// better), the over-provisioning d_i = min(v_i / r_i - 1, 1) is weighed by
// the job kind's weights w_i (compute-bound training weighs FLOPS, memory
// and interconnect; I/O-bound inference weighs storage IOPS and latencies):
//   score = round(-1000 * sum_i w_i d_i / sum_i w_i) + (preferred family ? 1000 : 0)
// so the closest sufficient node wins, and a preferred family wins among
// sufficient ones.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/base/status.h"
#include "src/model/cluster.h"
#include "src/model/job.h"
#include "src/sched/plugin.h"

namespace gpupool {

struct Version {
  std::array<int32_t, 3> parts{};  // major, minor, patch
  friend auto operator<=>(const Version&, const Version&) = default;
};
// "12", "12.4" or "12.4.1".
Result<Version> ParseVersion(std::string_view text);
std::string FormatVersion(const Version& v);

struct EcosystemComponent {
  std::string name;  // "cuda", "nccl", "cann", "hccl", "pytorch", ...
  Version version;
};

// The attributes the matcher compares, in one vector so that weights and
// distances are written once.
enum Attr : int {
  kFp16Tflops,
  kGpuMemoryMib,
  kMemoryBandwidthGbps,
  kInterconnectGbps,
  kStorageCapacityGib,
  kStorageIops,
  kStorageLatencyUs,    // lower is better
  kNetworkBandwidthGbps,
  kNetworkLatencyUs,    // lower is better
  kAttrCount,
};
const char* AttrName(int attr);
bool LowerIsBetter(int attr);

struct NodeAttributes {
  std::string name;  // label of the class, e.g. "h100-ib-nvme"
  std::array<double, kAttrCount> value{};  // 0 = unknown
  double storage_durability_nines = 0;
  std::string family;  // e.g. "nvidia-hopper", "ascend-910"
  std::vector<EcosystemComponent> ecosystem;
};

struct Requirement {
  std::string name;
  JobKind kind = JobKind::kTraining;            // selects the weights
  std::array<double, kAttrCount> minimum{};     // 0 = no requirement; latencies: maximum
  double min_storage_durability_nines = 0;
  std::vector<EcosystemComponent> ecosystem;    // each needs this version or newer
  std::string preferred_family;                 // empty = none
};

// Attribute weights per job kind (see the file comment).
const std::array<double, kAttrCount>& KindWeights(JobKind kind);

class AttributeTable {
 public:
  AttributeTable();  // holds class 0 and requirement 0

  uint16_t AddNodeClass(NodeAttributes a);
  uint16_t AddRequirement(Requirement r);
  const NodeAttributes& node_class(uint16_t id) const { return classes_[id]; }
  const Requirement& requirement(uint16_t id) const { return requirements_[id]; }
  int node_class_count() const { return static_cast<int>(classes_.size()); }
  int requirement_count() const { return static_cast<int>(requirements_.size()); }

  // Does node class `c` satisfy requirement `r`? Cached: O(1).
  bool Satisfies(uint16_t c, uint16_t r) const;
  // Why not, for rejections: "ecosystem: needs cuda >= 12.0 (node has none)".
  std::string Explain(uint16_t c, uint16_t r) const;
  // The score of the file comment.
  int64_t DistanceScore(uint16_t c, uint16_t r) const;

 private:
  bool Compute(uint16_t c, uint16_t r, std::string* why) const;
  void Recache();

  std::vector<NodeAttributes> classes_;
  std::vector<Requirement> requirements_;
  std::vector<uint8_t> satisfies_;  // [r * classes + c]
  std::vector<int64_t> score_;      // [r * classes + c]
};

// Filter and score plugins over a table; `table` must outlive them.
std::unique_ptr<FilterPlugin> MakeAttributeFilter(const AttributeTable* table);
std::unique_ptr<ScorePlugin> MakeAttributeScore(const AttributeTable* table);

}  // namespace gpupool
