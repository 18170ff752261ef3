// The operator-facing gauges and counters of /metrics that the alert rules
// in deploy/prometheus/ read (issue 19): node conditions, hotspots,
// unhealthy GPUs, exhausted quotas and scale-out failures, rendered from a
// read model built by committed events and an engine summary.
#include "src/server/metrics.h"

#include <gtest/gtest.h>

#include "src/model/cluster.h"
#include "src/model/gpu_catalog.h"
#include "src/server/read_model.h"

namespace gpupool {
namespace {

bool Has(const std::string& text, const std::string& line) { return text.find(line + "\n") != std::string::npos; }

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int64_t seq = 0;
    auto apply = [&](EventBody b) {
      Event e{++seq, Instant{}, std::move(b)};
      {
        std::unique_lock lock(model_.mu());
        model_.Apply(e);
      }
      metrics_.CountEvent(e);
    };
    PoolId id = 0;
    for (const char* name : {"h100", "spare"}) {
      Pool p;
      p.id = id++;
      p.name = name;
      apply(PoolAdded{p});
    }
    const GpuModelId h100 = *Catalog::Builtin().Find("H100");
    for (const char* name : {"n0", "n1"}) {
      NodeSpec spec{name, 96'000, 1 << 20, 8, h100, 0, 0};
      apply(NodeAdded{spec});
      ASSERT_TRUE(cluster_.AddNode(spec).has_value());
    }
    apply(TenantAdded{0, "team-a"});
    apply(QuotaSet{0, 0, Quota{8'000, 16'000}});
    apply(QuotaSet{0, 1, Quota{0, 0}});
    apply(HotspotDetected{1, 0b11, "GPU temperature 91 C over 85 C"});
    apply(ScaleOutRequested{0, 3, "queue"});
    apply(ScaleOutFailed{0, 2, "create: exit status 1"});
    apply(ScaleOutRequested{0, 1, "queue"});
    cluster_.SetCondition(0, NodeCondition::kDown);
    cluster_.SetCondition(1, NodeCondition::kCordoned);
    cluster_.SetGpuHealth(1, 0b100);  // GPU 2 of n1
  }

  std::string Render(bool exhausted, std::vector<ForecastStats> forecasts = {}) {
    auto s = std::make_shared<EngineSummary>();
    s->forecasts = std::move(forecasts);
    s->usage = {{{16'000, 8'000, 0, exhausted}, {}}};
    s->capacity.resize(2);
    s->pool_nodes = {2, 0};
    s->nodes = cluster_.nodes();
    {
      std::unique_lock lock(model_.mu());
      model_.set_summary(s);
    }
    return metrics_.Render(model_);
  }

  ReadModel model_;
  Metrics metrics_;
  Cluster cluster_;
};

TEST_F(MetricsTest, NodeConditionIsOneForTheNodesConditionOnly) {
  const std::string m = Render(false);
  EXPECT_TRUE(Has(m, "# TYPE gpupool_node_condition gauge")) << m;
  EXPECT_TRUE(Has(m, R"(gpupool_node_condition{condition="down",node="n0",pool="h100"} 1)")) << m;
  EXPECT_TRUE(Has(m, R"(gpupool_node_condition{condition="ready",node="n0",pool="h100"} 0)")) << m;
  EXPECT_TRUE(Has(m, R"(gpupool_node_condition{condition="cordoned",node="n0",pool="h100"} 0)")) << m;
  EXPECT_TRUE(Has(m, R"(gpupool_node_condition{condition="removed",node="n0",pool="h100"} 0)")) << m;
  EXPECT_TRUE(Has(m, R"(gpupool_node_condition{condition="cordoned",node="n1",pool="h100"} 1)")) << m;
  EXPECT_TRUE(Has(m, R"(gpupool_node_condition{condition="down",node="n1",pool="h100"} 0)")) << m;
  // gpupool_node_up keeps its meaning: 0 for both.
  EXPECT_TRUE(Has(m, R"(gpupool_node_up{node="n0",pool="h100"} 0)")) << m;
  EXPECT_TRUE(Has(m, R"(gpupool_node_up{node="n1",pool="h100"} 0)")) << m;
}

TEST_F(MetricsTest, HotspotFollowsTheReadModel) {
  std::string m = Render(false);
  EXPECT_TRUE(Has(m, R"(gpupool_node_hotspot{node="n0",pool="h100"} 0)")) << m;
  EXPECT_TRUE(Has(m, R"(gpupool_node_hotspot{node="n1",pool="h100"} 1)")) << m;
  {
    std::unique_lock lock(model_.mu());
    model_.Apply(Event{100, Instant{}, HotspotCleared{1}});
  }
  m = Render(false);
  EXPECT_TRUE(Has(m, R"(gpupool_node_hotspot{node="n1",pool="h100"} 0)")) << m;
}

TEST_F(MetricsTest, UnhealthyGpusCarryTheDcgmLabels) {
  const std::string m = Render(false);
  EXPECT_TRUE(Has(m, "# TYPE gpupool_gpu_unhealthy gauge")) << m;
  EXPECT_TRUE(Has(m, R"(gpupool_gpu_unhealthy{Hostname="n1",gpu="2",modelName="H100",pool="h100"} 1)")) << m;
  EXPECT_TRUE(Has(m, R"(gpupool_gpu_unhealthy{Hostname="n1",gpu="1",modelName="H100",pool="h100"} 0)")) << m;
  EXPECT_TRUE(Has(m, R"(gpupool_gpu_unhealthy{Hostname="n0",gpu="2",modelName="H100",pool="h100"} 0)")) << m;
}

TEST_F(MetricsTest, QuotaExhaustedFromTheSummary) {
  EXPECT_TRUE(Has(Render(true), R"(gpupool_quota_exhausted{pool="h100",tenant="team-a"} 1)"));
  EXPECT_TRUE(Has(Render(false), R"(gpupool_quota_exhausted{pool="h100",tenant="team-a"} 0)"));
}

TEST_F(MetricsTest, ScaleOutCountersHaveEveryPoolFromTheStart) {
  const std::string m = Render(false);
  EXPECT_TRUE(Has(m, "# TYPE gpupool_scale_out_requested_nodes_total counter")) << m;
  EXPECT_TRUE(Has(m, "# TYPE gpupool_scale_out_failed_nodes_total counter")) << m;
  EXPECT_TRUE(Has(m, R"(gpupool_scale_out_requested_nodes_total{pool="h100"} 4)")) << m;
  EXPECT_TRUE(Has(m, R"(gpupool_scale_out_failed_nodes_total{pool="h100"} 2)")) << m;
  // A pool that never scaled has its zero, so that increase() sees the first failure.
  EXPECT_TRUE(Has(m, R"(gpupool_scale_out_requested_nodes_total{pool="spare"} 0)")) << m;
  EXPECT_TRUE(Has(m, R"(gpupool_scale_out_failed_nodes_total{pool="spare"} 0)")) << m;
}

TEST_F(MetricsTest, TheAutoscalersForecastErrorPerPool) {
  const std::string m = Render(false, {ForecastStats{"h100", 12, 3.5, 40.0}});
  EXPECT_TRUE(Has(m, "# TYPE gpupool_forecast_mean_abs_error_gpus gauge")) << m;
  EXPECT_TRUE(Has(m, R"(gpupool_forecast_predictions{pool="h100"} 12)")) << m;
  EXPECT_TRUE(Has(m, R"(gpupool_forecast_mean_abs_error_gpus{pool="h100"} 3.5)")) << m;
  EXPECT_TRUE(Has(m, R"(gpupool_forecast_mean_actual_gpus{pool="h100"} 40)")) << m;
  EXPECT_EQ(Render(false).find("gpupool_forecast_predictions{"), std::string::npos)
      << "no sample for a pool without forecasting";
}

}  // namespace
}  // namespace gpupool
