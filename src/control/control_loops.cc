#include "src/control/control_loops.h"

#include "src/control/defragmentation.h"
#include "src/control/elastic_growth.h"
#include "src/control/failure_detection.h"
#include "src/control/hotspot_detection.h"
#include "src/control/pool_autoscaling.h"
#include "src/control/quota_lending.h"
#include "src/control/reclaim.h"

namespace gpupool {

ControlLoops StandardControlLoops(const EngineConfig& config) {
  ControlLoops loops;
  loops.lending = std::make_unique<QuotaLending>();
  loops.deadlines = std::make_unique<DeadlineEviction>(config.reclaim);
  loops.idle = std::make_unique<IdleReclaim>(config.reclaim);
  loops.failures = std::make_unique<FailureDetection>(config.heartbeat_timeout);
  loops.scaling = std::make_unique<PoolAutoscaling>(config.scaling, config.borrow_between_pools);
  loops.defrag = std::make_unique<Defragmentation>(config.defrag, config.defrag_every, config.defrag_config);
  loops.hotspots = std::make_unique<HotspotDetection>(config.hotspots);
  loops.elastic = std::make_unique<ElasticGrowth>(config.elastic_resize_every);
  return loops;
}

Result<std::unique_ptr<Engine>> CreateEngine(EngineConfig config, AttributeTable attributes) {
  ControlLoops loops = StandardControlLoops(config);
  return Engine::Create(std::move(config), std::move(attributes), std::move(loops));
}

Result<std::unique_ptr<Engine>> RestoreEngine(EngineConfig config, AttributeTable attributes, EngineState state,
                                              Instant now) {
  ControlLoops loops = StandardControlLoops(config);
  return Engine::Restore(std::move(config), std::move(attributes), std::move(state), now, std::move(loops));
}

}  // namespace gpupool
