// Elastic growth (SCALE-7): after each Tick's scheduling pass, running
// elastic jobs below their maximum grow onto free capacity that their
// tenant's quota admits (within its guarantee, or borrowed from the pool's
// elastic capacity) in pools no queued job may use: near their racks
// first, then anywhere in the pool, one JobResized (a reshard, no
// restart) per job, at most once per EngineConfig::elastic_resize_every.
// Highest priority first, then lowest id. Jobs bound by affinity rules do
// not grow. What they grew onto they give back to queued work first (the
// Engine's elastic-yield PostFilter) and shed off nodes that drain, fail or
// turn hot (Actions::ShrinkElastic). No soft state.
#pragma once

#include "src/engine/control_loop.h"

namespace gpupool {

class ElasticGrowth final : public ControlLoop {
 public:
  explicit ElasticGrowth(Duration resize_every) : resize_every_(resize_every) {}
  void Tick(const EngineView& view, Actions& act) override;

 private:
  // Grows `j` by as many replicas as its quota admits and the pool takes.
  void Grow(const Job& j, const EngineView& view, Actions& act) const;

  Duration resize_every_;
};

}  // namespace gpupool
