// The read model's nodes' cordons (issue 19): who cordoned a node and why,
// a drain's progress, a scale-in's drain; kept in its snapshot (version 8),
// and a version 6 snapshot still loads (with none).
#include "src/server/read_model.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>

#include "src/model/gpu_catalog.h"
#include "src/server/views.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;

class ReadModelCordonsTest : public ::testing::Test {
 protected:
  void Apply(EventBody b, Instant at = Instant{}) {
    std::unique_lock lock(model_.mu());
    model_.Apply(Event{++seq_, at, std::move(b)});
  }
  void SetUp() override {
    Pool p;
    p.name = "gpu";
    Apply(PoolAdded{p});
    const GpuModelId h100 = *Catalog::Builtin().Find("H100");
    for (const char* name : {"n0", "n1", "n2"}) Apply(NodeAdded{NodeSpec{name, 16'000, 1 << 16, 2, h100, 0, 0}});
  }
  ReadModel model_;
  int64_t seq_ = 0;
};

TEST_F(ReadModelCordonsTest, TheNodeViewSaysWhoCordonedItAndWhyAndItSurvivesTheSnapshot) {
  Apply(NodeCordoned{0, "admin", "replacing a fan"}, InstantFromMillis(1000));
  Apply(NodeDrainRequested{1, "admin", "kernel upgrade", 600s}, InstantFromMillis(2000));
  Apply(NodeDrainStarted{2, "utilization 0.1 over 10m"}, InstantFromMillis(3000));
  const nlohmann::json v0 = NodeView(0, model_);
  EXPECT_EQ(v0["condition"], "cordoned");  // before the next summary
  ASSERT_EQ(v0["cordons"].size(), 1u);
  EXPECT_EQ(v0["cordons"][0],
            (nlohmann::json{{"by", "operator"}, {"actor", "admin"}, {"reason", "replacing a fan"},
                            {"since", "1970-01-01T00:00:01.000Z"}}));
  const nlohmann::json v1 = NodeView(1, model_);
  EXPECT_EQ(v1["cordons"][0]["drain"], "draining");
  EXPECT_EQ(v1["cordons"][0]["drain_deadline"], "1970-01-01T00:10:02.000Z");
  Apply(NodeDrained{1});
  EXPECT_EQ(NodeView(1, model_)["cordons"][0]["drain"], "drained");
  EXPECT_EQ(NodeView(2, model_)["cordons"][0]["by"], "scale-in");

  ReadModel back;
  ASSERT_TRUE(back.Decode(model_.Encode()).has_value());
  for (NodeIndex n = 0; n < 3; ++n) EXPECT_EQ(NodeView(n, back), NodeView(n, model_)) << n;
  EXPECT_EQ(back.Encode(), model_.Encode());

  Apply(NodeUncordoned{0, "admin"});
  EXPECT_EQ(NodeView(0, model_)["cordons"].size(), 0u);
  Apply(NodeRemoved{2});
  EXPECT_EQ(NodeView(2, model_)["cordons"].size(), 0u);
}

TEST_F(ReadModelCordonsTest, AVersion7SnapshotLoadsWithNoCordons) {
  // Version 7 (the usage accounting's) is version 8 without the cordons
  // section (here its count, 0) and with its own checksum.
  std::string v8 = model_.Encode();
  ASSERT_EQ(v8[4], 8);
  std::string v7 = v8.substr(0, v8.size() - 16);
  v7[4] = 7;
  const uint64_t sum = XXH3_64bits(v7.data(), v7.size());
  v7.append(reinterpret_cast<const char*>(&sum), 8);
  ReadModel old;
  auto ok = old.Decode(v7);
  ASSERT_TRUE(ok.has_value()) << ok.error().message;
  EXPECT_EQ(old.nodes().size(), 3u);
  EXPECT_FALSE(old.nodes()[0].cordon.has_value());
  EXPECT_EQ(old.Encode(), v8);
}

}  // namespace
}  // namespace gpupool
