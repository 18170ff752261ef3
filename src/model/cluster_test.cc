#include "src/model/cluster.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "src/base/rng.h"
#include "tests/builders.h"

namespace gpupool {
namespace {

using testing::CpuOnly;
using testing::NodeOf;
using testing::Share;
using testing::TypicalOf;
using testing::Whole;


constexpr GpuModelId kT4 = 0;
constexpr GpuModelId kG2 = 1;

NodeSpec Spec(std::string name, int64_t cpu, int64_t mem, int gpus = 0, GpuModelId model = kNoGpuModel) {
  return NodeSpec{std::move(name), cpu, mem, gpus, model};
}

// Recomputes every node's state from the live allocations (`live`) and the
// specs, and compares with what the cluster keeps incrementally.
void ExpectConsistent(const Cluster& c, const std::vector<NodeSpec>& specs,
                      const std::map<AllocationId, Allocation>& live) {
  ASSERT_EQ(c.node_count(), static_cast<int>(specs.size()));
  std::vector<Node> want(specs.size());
  int64_t allocated = 0;
  int64_t total = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    Node& n = want[i];
    n.cpu_milli_total = n.cpu_milli_free = specs[i].cpu_milli;
    n.memory_mib_total = n.memory_mib_free = specs[i].memory_mib;
    n.gpu_model = specs[i].gpu_model;
    n.gpu_count = static_cast<uint8_t>(specs[i].gpu_count);
    // Facts of the model, not of allocations: taken from the cluster.
    n.gpu_memory_mib = c.node(static_cast<NodeIndex>(i)).gpu_memory_mib;
    n.mig_table = c.node(static_cast<NodeIndex>(i)).mig_table;
    for (int g = 0; g < specs[i].gpu_count; ++g) {
      n.gpu_free_milli[g] = kMilliPerGpu;
      n.gpu_memory_free_mib[g] = n.gpu_memory_mib;
      n.dirty_owner[g] = kClean;
    }
    total += int64_t{specs[i].gpu_count} * kMilliPerGpu;
  }
  for (const auto& [id, a] : live) {
    EXPECT_EQ(c.allocation(id).node, a.node);
    EXPECT_EQ(c.allocation(id).gpus, a.gpus);
    EXPECT_EQ(c.allocation(id).demand, a.demand);
    Node& n = want[a.node];
    n.cpu_milli_free -= a.demand.cpu_milli;
    n.memory_mib_free -= a.demand.memory_mib;
    for (int g = 0; g < n.gpu_count; ++g) {
      if (!(a.gpus >> g & 1)) continue;
      n.gpu_free_milli[g] = static_cast<int16_t>(n.gpu_free_milli[g] - a.demand.gpu_milli);
      ++n.gpu_residents[g];
      const bool whole = a.demand.gpu_milli == kMilliPerGpu;
      n.gpu_mode[g] = whole ? GpuMode::kWhole : GpuMode::kTimeSlice;
      n.gpu_memory_free_mib[g] -= whole ? n.gpu_memory_free_mib[g] : a.demand.gpu_memory_mib;
    }
    const int kind = GpuKindOf(a.demand);
    if (kind < 0) {
      ++n.cpu_only_residents;
    } else {
      ++n.gpu_kind_count[kind];
    }
    allocated += a.demand.total_gpu_milli();
  }
  for (Node& n : want) {
    for (int g = 0; g < n.gpu_count; ++g) {
      n.gpu_milli_free_total += n.gpu_free_milli[g];
      n.max_gpu_free_milli = std::max(n.max_gpu_free_milli, n.gpu_free_milli[g]);
      n.gpus_fully_free += n.gpu_residents[g] == 0;
    }
    n.gpu_kinds_present =
        static_cast<int32_t>(std::count_if(n.gpu_kind_count.begin(), n.gpu_kind_count.end(), [](int32_t k) {
          return k != 0;
        }));
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    const Node& got = c.node(static_cast<NodeIndex>(i));
    const Node& w = want[i];
    EXPECT_EQ(got.cpu_milli_free, w.cpu_milli_free) << "node " << i;
    EXPECT_EQ(got.memory_mib_free, w.memory_mib_free) << "node " << i;
    EXPECT_EQ(got.gpu_free_milli, w.gpu_free_milli) << "node " << i;
    EXPECT_EQ(got.gpu_milli_free_total, w.gpu_milli_free_total) << "node " << i;
    EXPECT_EQ(got.gpus_fully_free, w.gpus_fully_free) << "node " << i;
    EXPECT_EQ(got.max_gpu_free_milli, w.max_gpu_free_milli) << "node " << i;
    EXPECT_EQ(got.gpu_kind_count, w.gpu_kind_count) << "node " << i;
    EXPECT_EQ(got.gpu_kinds_present, w.gpu_kinds_present) << "node " << i;
    EXPECT_EQ(got.cpu_only_residents, w.cpu_only_residents) << "node " << i;
    EXPECT_EQ(got, w) << "node " << i;
  }
  EXPECT_EQ(c.gpu_milli_allocated(), allocated);
  EXPECT_EQ(c.gpu_milli_total(), total);
  EXPECT_EQ(c.live_allocations(), static_cast<int>(live.size()));
}

// ---------------------------------------------------------------- AddNode

TEST(ClusterAddNodeTest, AddsNodesInOrder) {
  Cluster c;
  EXPECT_EQ(c.AddNode(Spec("a", 32000, 65536, 4, kT4)).value(), 0);
  EXPECT_EQ(c.AddNode(Spec("b", 16000, 8192)).value(), 1);
  EXPECT_EQ(c.AddNode(Spec("c", 96000, 1 << 20, 8, kG2)).value(), 2);
  EXPECT_EQ(c.node_count(), 3);
  EXPECT_EQ(c.node_name(0), "a");
  EXPECT_EQ(c.node_name(2), "c");
  EXPECT_EQ(c.gpu_milli_total(), 12000);
  EXPECT_EQ(c.gpu_count_total(), 12);
  EXPECT_EQ(c.gpu_milli_allocated(), 0);

  const Node& a = c.node(0);
  EXPECT_EQ(a.cpu_milli_total, 32000);
  EXPECT_EQ(a.cpu_milli_free, 32000);
  EXPECT_EQ(a.memory_mib_total, 65536);
  EXPECT_EQ(a.memory_mib_free, 65536);
  EXPECT_EQ(a.gpu_model, kT4);
  EXPECT_EQ(a.gpu_count, 4);
  EXPECT_EQ(a.gpus_fully_free, 4);
  EXPECT_EQ(a.gpu_milli_free_total, 4000);
  EXPECT_EQ(a.max_gpu_free_milli, 1000);
  EXPECT_EQ(a.gpu_milli_total(), 4000);
  EXPECT_EQ(a.gpu_kinds_present, 0);
  EXPECT_EQ(a.cpu_only_residents, 0);
  EXPECT_EQ((std::vector<int16_t>(a.gpu_free_milli.begin(), a.gpu_free_milli.begin() + 5)),
            (std::vector<int16_t>{1000, 1000, 1000, 1000, 0}));

  const Node& b = c.node(1);
  EXPECT_EQ(b.gpu_model, kNoGpuModel);
  EXPECT_EQ(b.gpu_count, 0);
  EXPECT_EQ(b.gpus_fully_free, 0);
  EXPECT_EQ(b.gpu_milli_free_total, 0);
  EXPECT_EQ(b.max_gpu_free_milli, 0);
  EXPECT_EQ(c.change_log_end(), 0u);  // adding nodes is not a change
}

TEST(ClusterAddNodeTest, SixteenGpusIsTheMaximum) {
  Cluster c;
  ASSERT_TRUE(c.AddNode(Spec("big", 1, 1, kMaxGpusPerNode, kG2)));
  EXPECT_EQ(c.node(0).gpus_fully_free, kMaxGpusPerNode);
  EXPECT_EQ(c.node(0).gpu_milli_free_total, kMaxGpusPerNode * kMilliPerGpu);
}

void ExpectAddNodeError(NodeSpec spec, const std::string& want) {
  Cluster c;
  auto r = c.AddNode(std::move(spec));
  ASSERT_FALSE(r) << "accepted; expected: " << want;
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().message, want);
  EXPECT_EQ(c.node_count(), 0);
  EXPECT_EQ(c.gpu_milli_total(), 0);
}

TEST(ClusterAddNodeTest, RejectsImpossibleSpecs) {
  ExpectAddNodeError(Spec("", 1, 1), "node name is empty");
  ExpectAddNodeError(Spec("n", -1, 1), "node 'n': cpu_milli must not be negative");
  ExpectAddNodeError(Spec("n", 1, -1), "node 'n': memory_mib must not be negative");
  ExpectAddNodeError(Spec("n", 1, 1, -1, kT4), "node 'n': gpu count must be between 0 and 16");
  ExpectAddNodeError(Spec("n", 1, 1, 17, kT4), "node 'n': gpu count must be between 0 and 16");
  ExpectAddNodeError(Spec("n", 1, 1, 2, kNoGpuModel), "node 'n': a node has a GPU model if and only if it has GPUs");
  ExpectAddNodeError(Spec("n", 1, 1, 0, kT4), "node 'n': a node has a GPU model if and only if it has GPUs");
}

// ---------------------------------------------------------------- CheckFit

TEST(ClusterCheckFitTest, CpuOnly) {
  const Node cpu_node = NodeOf(4000, {}, kNoGpuModel, 8192);
  EXPECT_EQ(CheckFit(cpu_node, CpuOnly(4000, 8192)), FitFailure::kNone);  // exact fit
  EXPECT_EQ(CheckFit(cpu_node, CpuOnly(4001, 8192)), FitFailure::kCpu);
  EXPECT_EQ(CheckFit(cpu_node, CpuOnly(4000, 8193)), FitFailure::kMemory);
  EXPECT_EQ(CheckFit(cpu_node, CpuOnly(0, 0)), FitFailure::kNone);
  // CPU-only demands ignore allowed_models and run on GPU nodes too.
  Demand d = CpuOnly(1000, 1000);
  d.allowed_models = 0;
  EXPECT_EQ(CheckFit(cpu_node, d), FitFailure::kNone);
  EXPECT_EQ(CheckFit(NodeOf(4000, {0, 0}, kT4, 8192), d), FitFailure::kNone);
}

TEST(ClusterCheckFitTest, Share) {
  const Node n = NodeOf(4000, {400, 700, 0}, kT4, 8192);
  EXPECT_EQ(CheckFit(n, Share(700)), FitFailure::kNone);
  EXPECT_EQ(CheckFit(n, Share(701)), FitFailure::kGpuCapacity);
  // 1100 milli free in total, but no single GPU has 800.
  EXPECT_EQ(CheckFit(n, Share(800)), FitFailure::kGpuCapacity);
  EXPECT_EQ(CheckFit(n, Share(1)), FitFailure::kNone);
  EXPECT_EQ(CheckFit(NodeOf(4000, {}, kNoGpuModel, 8192), Share(100)), FitFailure::kGpuModel);
}

TEST(ClusterCheckFitTest, WholeGpus) {
  const Node n = NodeOf(4000, {1000, 999, 1000, 0}, kT4, 8192);
  EXPECT_EQ(CheckFit(n, Whole(1)), FitFailure::kNone);
  EXPECT_EQ(CheckFit(n, Whole(2)), FitFailure::kNone);
  // 2999 milli free, but only two fully free GPUs.
  EXPECT_EQ(CheckFit(n, Whole(3)), FitFailure::kGpuCapacity);
  EXPECT_EQ(CheckFit(NodeOf(1, {999}, kT4, 1), Whole(1)), FitFailure::kGpuCapacity);
  EXPECT_EQ(CheckFit(NodeOf(4000, {}, kNoGpuModel, 8192), Whole(1)), FitFailure::kGpuModel);
}

TEST(ClusterCheckFitTest, ModelMask) {
  const Node t4 = NodeOf(4000, {1000, 1000}, kT4, 8192);
  const Node g2 = NodeOf(4000, {1000, 1000}, kG2, 8192);
  const GpuModelMask only_g2 = GpuModelMask{1} << kG2;
  const GpuModelMask both = only_g2 | GpuModelMask{1} << kT4;
  EXPECT_EQ(CheckFit(t4, Share(500, 0, 0, only_g2)), FitFailure::kGpuModel);
  EXPECT_EQ(CheckFit(g2, Share(500, 0, 0, only_g2)), FitFailure::kNone);
  EXPECT_EQ(CheckFit(t4, Whole(2, 0, 0, only_g2)), FitFailure::kGpuModel);
  EXPECT_EQ(CheckFit(t4, Whole(2, 0, 0, both)), FitFailure::kNone);
  EXPECT_EQ(CheckFit(g2, Whole(2, 0, 0, both)), FitFailure::kNone);
  // The highest model id works too (mask bit 63).
  const Node high = NodeOf(1, {1000}, 63, 1);
  EXPECT_EQ(CheckFit(high, Whole(1, 0, 0, GpuModelMask{1} << 63)), FitFailure::kNone);
  EXPECT_EQ(CheckFit(high, Whole(1, 0, 0, ~(GpuModelMask{1} << 63))), FitFailure::kGpuModel);
}

TEST(ClusterCheckFitTest, FailureOrder) {
  const Node n = NodeOf(1000, {500}, kT4, 1000);
  const GpuModelMask not_t4 = ~(GpuModelMask{1} << kT4);
  // Everything wrong: the model is reported first.
  EXPECT_EQ(CheckFit(n, Share(900, 2000, 2000, not_t4)), FitFailure::kGpuModel);
  // Model fine; GPU, CPU and memory short: GPU capacity first.
  EXPECT_EQ(CheckFit(n, Share(900, 2000, 2000)), FitFailure::kGpuCapacity);
  EXPECT_EQ(CheckFit(n, Whole(1, 2000, 2000)), FitFailure::kGpuCapacity);
  // GPU fine; CPU and memory short: CPU first.
  EXPECT_EQ(CheckFit(n, Share(500, 2000, 2000)), FitFailure::kCpu);
  // Only memory short.
  EXPECT_EQ(CheckFit(n, Share(500, 1000, 2000)), FitFailure::kMemory);
  EXPECT_EQ(CheckFit(n, Share(500, 1000, 1000)), FitFailure::kNone);
}

TEST(ClusterCheckFitTest, FailureNamesAreDistinct) {
  std::set<std::string> names;
  for (int f = 0; f < kFitFailureCount; ++f) names.insert(FitFailureName(static_cast<FitFailure>(f)));
  EXPECT_EQ(names.size(), static_cast<size_t>(kFitFailureCount));
  EXPECT_STREQ(FitFailureName(FitFailure::kNone), "fits");
}

TEST(ClusterCheckFitTest, NodeConditionPoolAndReservationComeFirst) {
  Node n = NodeOf(4000, {1000, 1000}, kT4, 8192);
  n.pool = 3;
  Demand d = Whole(1);
  EXPECT_EQ(CheckFit(n, d), FitFailure::kNone);
  d.allowed_pools = uint64_t{1} << 2;
  EXPECT_EQ(CheckFit(n, d), FitFailure::kPool);
  d.allowed_pools = uint64_t{1} << 3;
  n.reserved_for = 42;
  EXPECT_EQ(CheckFit(n, d), FitFailure::kReserved);
  d.reservation = 42;
  EXPECT_EQ(CheckFit(n, d), FitFailure::kNone);
  n.condition = NodeCondition::kCordoned;
  EXPECT_EQ(CheckFit(n, d), FitFailure::kUnavailable);
}

// ---------------------------------------------------------------- GpusSatisfy

TEST(ClusterGpusSatisfyTest, CpuOnlyTakesNoGpus) {
  const Node n = NodeOf(1000, {1000, 1000}, kT4, 1000);
  EXPECT_TRUE(GpusSatisfy(n, CpuOnly(1, 1), 0));
  EXPECT_FALSE(GpusSatisfy(n, CpuOnly(1, 1), 0b01));
  EXPECT_TRUE(GpusSatisfy(NodeOf(1, {}, kNoGpuModel, 1), CpuOnly(1, 1), 0));
}

TEST(ClusterGpusSatisfyTest, Share) {
  const Node n = NodeOf(1000, {300, 600, 1000, 1000}, kT4, 1000);
  EXPECT_FALSE(GpusSatisfy(n, Share(500), 0b0001));  // only 300 free
  EXPECT_TRUE(GpusSatisfy(n, Share(500), 0b0010));
  EXPECT_TRUE(GpusSatisfy(n, Share(600), 0b0010));   // exactly enough
  EXPECT_TRUE(GpusSatisfy(n, Share(500), 0b1000));
  EXPECT_FALSE(GpusSatisfy(n, Share(500), 0b0110));  // two GPUs for a share
  EXPECT_FALSE(GpusSatisfy(n, Share(500), 0));       // none
  EXPECT_FALSE(GpusSatisfy(n, Share(100), 0b10000)); // GPU 4 does not exist
}

TEST(ClusterGpusSatisfyTest, WholeGpus) {
  const Node n = NodeOf(1000, {1000, 999, 1000, 1000}, kT4, 1000);
  EXPECT_TRUE(GpusSatisfy(n, Whole(2), 0b0101));
  EXPECT_TRUE(GpusSatisfy(n, Whole(3), 0b1101));
  EXPECT_FALSE(GpusSatisfy(n, Whole(2), 0b0011));  // GPU 1 is not fully free
  EXPECT_FALSE(GpusSatisfy(n, Whole(2), 0b0001));  // too few
  EXPECT_FALSE(GpusSatisfy(n, Whole(2), 0b1101));  // too many
  EXPECT_FALSE(GpusSatisfy(n, Whole(1), 0b10000)); // beyond the node
}

TEST(ClusterGpusSatisfyTest, SixteenGpuNode) {
  const Node n = NodeOf(1, std::vector<int>(16, 1000), kG2, 1);
  EXPECT_TRUE(GpusSatisfy(n, Whole(16), 0xffff));
  EXPECT_TRUE(GpusSatisfy(n, Share(10), 0x8000));
  EXPECT_FALSE(GpusSatisfy(n, Whole(15), 0xffff));
}

// ---------------------------------------------------------------- Allocate / Release

class ClusterAllocTest : public ::testing::Test {
 protected:
  void SetUp() override {
    specs_ = {Spec("a", 32000, 65536, 4, kT4), Spec("b", 16000, 8192), Spec("c", 96000, 786432, 8, kG2)};
    for (const auto& s : specs_) ASSERT_TRUE(c_.AddNode(s));
  }
  AllocationId Alloc(NodeIndex i, const Demand& d, GpuMask gpus) {
    EXPECT_EQ(CheckFit(c_.node(i), d), FitFailure::kNone);
    EXPECT_TRUE(GpusSatisfy(c_.node(i), d, gpus));
    const AllocationId id = c_.Allocate(i, d, gpus);
    EXPECT_FALSE(live_.contains(id)) << "id " << id << " is already live";
    live_[id] = Allocation{i, gpus, d};
    return id;
  }
  void Free(AllocationId id) {
    c_.Release(id);
    live_.erase(id);
  }

  std::vector<NodeSpec> specs_;
  Cluster c_;
  std::map<AllocationId, Allocation> live_;
};

TEST_F(ClusterAllocTest, DerivedFieldsFollowAllocations) {
  const AllocationId s1 = Alloc(0, Share(300, 1000, 2048), 0b0001);
  const AllocationId s2 = Alloc(0, Share(700, 1000, 2048), 0b0001);
  const AllocationId w2 = Alloc(0, Whole(2, 8000, 16384), 0b0110);
  const AllocationId cpu = Alloc(0, CpuOnly(2000, 1024), 0);
  ExpectConsistent(c_, specs_, live_);

  const Node& a = c_.node(0);
  EXPECT_EQ(a.cpu_milli_free, 32000 - 12000);
  EXPECT_EQ(a.memory_mib_free, 65536 - 2048 - 2048 - 16384 - 1024);
  EXPECT_EQ(a.gpu_free_milli[0], 0);
  EXPECT_EQ(a.gpu_free_milli[1], 0);
  EXPECT_EQ(a.gpu_free_milli[2], 0);
  EXPECT_EQ(a.gpu_free_milli[3], 1000);
  EXPECT_EQ(a.gpu_milli_free_total, 1000);
  EXPECT_EQ(a.gpus_fully_free, 1);
  EXPECT_EQ(a.max_gpu_free_milli, 1000);
  EXPECT_EQ(a.gpu_kind_count[0], 2);
  EXPECT_EQ(a.gpu_kind_count[2], 1);
  EXPECT_EQ(a.gpu_kinds_present, 2);
  EXPECT_EQ(a.cpu_only_residents, 1);
  EXPECT_EQ(c_.gpu_milli_allocated(), 3000);
  EXPECT_EQ(c_.live_allocations(), 4);
  EXPECT_EQ(CheckFit(a, Whole(2)), FitFailure::kGpuCapacity);

  Free(s1);
  ExpectConsistent(c_, specs_, live_);
  EXPECT_EQ(c_.node(0).gpu_free_milli[0], 300);
  EXPECT_EQ(c_.node(0).gpu_kind_count[0], 1);
  EXPECT_EQ(c_.node(0).gpu_kinds_present, 2);
  EXPECT_EQ(c_.gpu_milli_allocated(), 2700);

  Free(w2);
  ExpectConsistent(c_, specs_, live_);
  EXPECT_EQ(c_.node(0).gpus_fully_free, 3);
  EXPECT_EQ(c_.node(0).gpu_kind_count[2], 0);
  EXPECT_EQ(c_.node(0).gpu_kinds_present, 1);
  EXPECT_EQ(c_.gpu_milli_allocated(), 700);

  Free(s2);
  Free(cpu);
  ExpectConsistent(c_, specs_, live_);
  // Back to pristine.
  Cluster fresh;
  ASSERT_TRUE(fresh.AddNode(specs_[0]));
  EXPECT_EQ(c_.node(0), fresh.node(0));
  EXPECT_EQ(c_.gpu_milli_allocated(), 0);
  EXPECT_EQ(c_.live_allocations(), 0);
}

TEST_F(ClusterAllocTest, OneMilliMakesAGpuNotFullyFree) {
  const AllocationId tiny = Alloc(0, Share(1), 0b0100);
  const Node& a = c_.node(0);
  EXPECT_EQ(a.gpu_free_milli[2], 999);
  EXPECT_EQ(a.gpus_fully_free, 3);
  EXPECT_EQ(a.gpu_milli_free_total, 3999);
  EXPECT_EQ(a.max_gpu_free_milli, 1000);
  EXPECT_EQ(CheckFit(a, Whole(4)), FitFailure::kGpuCapacity);
  EXPECT_EQ(CheckFit(a, Whole(3)), FitFailure::kNone);
  EXPECT_FALSE(GpusSatisfy(a, Whole(1), 0b0100));
  // Fill the other three GPUs: now 999 is the most any GPU has free.
  Alloc(0, Whole(3), 0b1011);
  EXPECT_EQ(c_.node(0).gpus_fully_free, 0);
  EXPECT_EQ(c_.node(0).max_gpu_free_milli, 999);
  EXPECT_EQ(CheckFit(c_.node(0), Share(999)), FitFailure::kNone);
  EXPECT_EQ(CheckFit(c_.node(0), Share(1000)), FitFailure::kGpuCapacity);
  ExpectConsistent(c_, specs_, live_);
  Free(tiny);
  EXPECT_EQ(c_.node(0).gpus_fully_free, 1);
  EXPECT_EQ(c_.node(0).max_gpu_free_milli, 1000);
  ExpectConsistent(c_, specs_, live_);
}

TEST_F(ClusterAllocTest, AllocationRecordsAndIdReuse) {
  const AllocationId x = Alloc(2, Whole(8, 1000, 1000), 0xff);
  const AllocationId y = Alloc(1, CpuOnly(500, 500), 0);
  EXPECT_NE(x, y);
  EXPECT_EQ(c_.allocation(x).node, 2);
  EXPECT_EQ(c_.allocation(x).gpus, 0xff);
  EXPECT_EQ(c_.allocation(x).demand, Whole(8, 1000, 1000));
  EXPECT_EQ(c_.node(2).gpu_kind_count[8], 1);
  EXPECT_EQ(c_.node(1).cpu_only_residents, 1);
  Free(x);
  EXPECT_EQ(c_.allocation(x).node, -1);  // no longer live
  const AllocationId z = Alloc(0, Share(100), 0b1000);
  EXPECT_EQ(z, x);  // the freed id is reused
  EXPECT_EQ(c_.allocation(z).node, 0);
  ExpectConsistent(c_, specs_, live_);
}

TEST_F(ClusterAllocTest, ChangeLogRecordsChangedNodesInOrder) {
  EXPECT_EQ(c_.change_log_base(), 0u);
  EXPECT_EQ(c_.change_log_end(), 0u);
  const AllocationId p = Alloc(2, Share(500), 0b100);
  const AllocationId q = Alloc(0, CpuOnly(1, 1), 0);
  Alloc(1, CpuOnly(1, 1), 0);
  Free(p);
  Free(q);
  Alloc(2, Whole(1), 0b1);
  ASSERT_EQ(c_.change_log_end(), 6u);
  EXPECT_EQ(c_.change_log_base(), 0u);
  std::vector<NodeIndex> got;
  for (uint64_t s = c_.change_log_base(); s < c_.change_log_end(); ++s) got.push_back(c_.changed_node(s));
  EXPECT_EQ(got, (std::vector<NodeIndex>{2, 0, 1, 2, 0, 2}));
  // Each node's latest change: node 2 at 5, node 0 at 4, node 1 at 2.
  EXPECT_EQ(c_.last_change_seq(2), 5u);
  EXPECT_EQ(c_.last_change_seq(0), 4u);
  EXPECT_EQ(c_.last_change_seq(1), 2u);
}

TEST(ClusterChangeLogTest, OldEntriesAreDroppedButRecentOnesKept) {
  Cluster c;
  ASSERT_TRUE(c.AddNode(Spec("n0", 1000, 1000)));
  ASSERT_TRUE(c.AddNode(Spec("n1", 1000, 1000)));
  // Each round changes node r % 2 twice (allocate, release).
  constexpr int kRounds = 10000;
  for (int r = 0; r < kRounds; ++r) {
    const AllocationId id = c.Allocate(r % 2, CpuOnly(1, 1), 0);
    c.Release(id);
  }
  ASSERT_EQ(c.change_log_end(), uint64_t{2 * kRounds});
  EXPECT_GT(c.change_log_base(), 0u);  // something was dropped
  EXPECT_GE(c.change_log_end() - c.change_log_base(), uint64_t{4 * 2});
  EXPECT_GE(c.change_log_end() - c.change_log_base(), 4096u);
  for (uint64_t s = c.change_log_base(); s < c.change_log_end(); ++s) {
    ASSERT_EQ(c.changed_node(s), static_cast<NodeIndex>((s / 2) % 2)) << "seq " << s;
  }
}

// Random allocate/release against a brute-force model of the cluster.
TEST(ClusterRandomTest, IncrementalStateMatchesRecomputation) {
  const std::vector<NodeSpec> specs = {Spec("t4x4", 16000, 32768, 4, kT4), Spec("g2x8", 64000, 262144, 8, kG2),
                                       Spec("cpu", 8000, 16384), Spec("t4x1", 4000, 8192, 1, kT4)};
  Cluster c;
  for (const auto& s : specs) ASSERT_TRUE(c.AddNode(s));
  std::map<AllocationId, Allocation> live;
  Rng rng(12345);
  int allocations = 0, releases = 0;
  for (int step = 0; step < 3000; ++step) {
    if (!live.empty() && rng.Below(100) < 45) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng.Below(live.size())));
      c.Release(it->first);
      live.erase(it);
      ++releases;
    } else {
      Demand d;
      d.cpu_milli = static_cast<int64_t>(rng.Below(4000));
      d.memory_mib = static_cast<int64_t>(rng.Below(8192));
      switch (rng.Below(4)) {
        case 0: break;  // CPU-only
        case 1: d.gpu_count = 1; d.gpu_milli = 1 + static_cast<int32_t>(rng.Below(999)); break;
        case 2: d.gpu_count = 1; d.gpu_milli = kMilliPerGpu; break;
        default: d.gpu_count = 1 << rng.Below(4); d.gpu_milli = kMilliPerGpu; break;
      }
      if (d.gpu_count > 0 && rng.Below(4) == 0) d.allowed_models = GpuModelMask{1} << kG2;
      ASSERT_TRUE(ValidateDemand(d));
      const NodeIndex i = static_cast<NodeIndex>(rng.Below(specs.size()));
      const Node& n = c.node(i);
      // Brute force: is there any GPU choice?
      GpuMask pick = 0;
      bool gpu_ok = true;
      if (d.gpu_count > 0) {
        gpu_ok = n.gpu_model != kNoGpuModel && (d.allowed_models >> n.gpu_model & 1);
        int found = 0;
        for (int g = 0; g < n.gpu_count && found < d.gpu_count; ++g) {
          if (n.gpu_free_milli[g] >= d.gpu_milli) {
            pick |= static_cast<GpuMask>(1u << g);
            ++found;
          }
        }
        if (found < d.gpu_count) gpu_ok = false;
      }
      const bool fits = gpu_ok && n.cpu_milli_free >= d.cpu_milli && n.memory_mib_free >= d.memory_mib;
      ASSERT_EQ(CheckFit(n, d) == FitFailure::kNone, fits) << "step " << step;
      if (!fits) continue;
      ASSERT_TRUE(GpusSatisfy(n, d, pick));
      const AllocationId id = c.Allocate(i, d, pick);
      ASSERT_FALSE(live.contains(id));
      live[id] = Allocation{i, pick, d};
      ++allocations;
    }
    if (step % 50 == 0) {
      ExpectConsistent(c, specs, live);
      if (HasFailure()) FAIL() << "at step " << step;
    }
  }
  ExpectConsistent(c, specs, live);
  // The walk exercised both directions a fair amount.
  EXPECT_GT(allocations, 500);
  EXPECT_GT(releases, 500);
}

// ---------------------------------------------------------------- MPS tenants, health

Demand MpsOf(int32_t milli, int32_t tenant) {
  Demand d = Share(milli, 100, 100);
  d.mode = ShareMode::kMps;
  d.mps_tenant = tenant;
  return d;
}

TEST(ClusterMpsTest, AnMpsGpuTakesOneTenantsShares) {
  Cluster c;
  ASSERT_TRUE(c.AddNode({"n", 8000, 8192, 1, *Catalog::Builtin().Find("H100")}).has_value());
  const AllocationId a = c.Allocate(0, MpsOf(200, 1), 0b1, 1);
  EXPECT_EQ(c.node(0).mps_tenant[0], 1);
  EXPECT_TRUE(GpuFits(c.node(0), 0, MpsOf(200, 1)));
  EXPECT_FALSE(GpuFits(c.node(0), 0, MpsOf(200, 2)));
  Demand ts = MpsOf(200, -1);
  ts.mode = ShareMode::kTimeSlice;
  EXPECT_FALSE(GpuFits(c.node(0), 0, ts)) << "one mode at a time, as before";
  c.Release(a);
  EXPECT_EQ(c.node(0).mps_tenant[0], -1);
  EXPECT_TRUE(GpuFits(c.node(0), 0, MpsOf(200, 2)));
}

// A GPU that an older release gave two tenants' MPS shares loads, takes no
// new MPS share, and serves one tenant again once only its shares are left,
// the same with or without a restart in between.
TEST(ClusterMpsTest, AGpuOfSeveralTenantsFromAnOlderReleaseLoadsAndHeals) {
  Cluster c;
  ASSERT_TRUE(c.AddNode({"n", 8000, 8192, 1, *Catalog::Builtin().Find("H100")}).has_value());
  c.Allocate(0, MpsOf(200, 1), 0b1, 1);
  c.Allocate(0, MpsOf(200, 1), 0b1, 1);
  Cluster::Image image{c.nodes(), c.names(), c.allocation_slots(), c.free_allocation_ids()};
  image.allocations[1].owner = 2;  // as the older release placed it
  image.allocations[1].demand.mps_tenant = -1;  // not in its snapshots
  auto old = Cluster::FromImage(image);
  ASSERT_TRUE(old.has_value()) << old.error().message;
  EXPECT_EQ(old->node(0).mps_tenant[0], kMpsTenants);
  EXPECT_EQ(old->allocation(1).demand.mps_tenant, 2);
  EXPECT_FALSE(GpuFits(old->node(0), 0, MpsOf(200, 1)));
  EXPECT_FALSE(GpuFits(old->node(0), 0, MpsOf(200, 2)));
  old->Release(0);
  EXPECT_EQ(old->node(0).mps_tenant[0], 2);
  EXPECT_TRUE(GpuFits(old->node(0), 0, MpsOf(200, 2)));
  Cluster::Image again{old->nodes(), old->names(), old->allocation_slots(), old->free_allocation_ids()};
  auto restarted = Cluster::FromImage(again);
  ASSERT_TRUE(restarted.has_value()) << restarted.error().message;
  EXPECT_EQ(restarted->node(0), old->node(0));
}

TEST(ClusterHealthTest, AnUnhealthyGpuTakesNothingNew) {
  Cluster c;
  ASSERT_TRUE(c.AddNode({"n", 8000, 8192, 2, *Catalog::Builtin().Find("H100")}).has_value());
  c.SetGpuHealth(0, 0b01);
  EXPECT_EQ(c.node(0).gpus_fully_free, 1);
  EXPECT_EQ(CheckFit(c.node(0), Whole(2)), FitFailure::kGpuCapacity);
  EXPECT_EQ(CheckFit(c.node(0), Whole(1)), FitFailure::kNone);
  EXPECT_EQ(FirstFittingGpus(c.node(0), Share(300)), 0b10);
  c.SetGpuHealth(0, 0b11);
  EXPECT_EQ(CheckFit(c.node(0), Share(300)), FitFailure::kGpuCapacity);
  EXPECT_EQ(EmptyLike(c.node(0)).gpu_unhealthy, 0) << "what the node could take once healthy";
  c.SetGpuHealth(0, 0b111100);  // bits past its GPUs are dropped
  EXPECT_EQ(c.node(0).gpu_unhealthy, 0);
}

// ---------------------------------------------------------------- misuse is a bug

using ClusterDeathTest = ClusterAllocTest;

TEST_F(ClusterDeathTest, AllocateThatDoesNotFitAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(c_.Allocate(1, Share(100), 0), "CHECK failed");  // CPU-only node
  EXPECT_DEATH(c_.Allocate(0, CpuOnly(1, 1), 0b1), "CHECK failed");  // GPU mask for a CPU-only demand
  EXPECT_DEATH(c_.Allocate(7, CpuOnly(1, 1), 0), "CHECK failed");  // no such node
}

TEST_F(ClusterDeathTest, ReleaseOfDeadAllocationAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const AllocationId id = Alloc(0, Share(100), 0b1);
  Free(id);
  EXPECT_DEATH(c_.Release(id), "CHECK failed");
  EXPECT_DEATH(c_.Release(99), "CHECK failed");
}

}  // namespace
}  // namespace gpupool
