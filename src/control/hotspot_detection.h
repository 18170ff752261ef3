// Hotspot detection (OPS-2; the rules and settings are in
// src/engine/hotspot.h): each telemetry report of a node is judged against
// the thresholds; a node over them for the window is cordoned
// (HotspotDetected), and what can move off its hot GPUs does, or its pool
// scales out; a hot node whose report is clear takes work again
// (HotspotCleared).
//
// Soft state, per node: since when its reports have had an over GPU, and
// its last detection (for the cooldown). A node that goes down starts its
// window again.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "src/engine/control_loop.h"

namespace gpupool {

// Which thresholds a GPU is over, as text ("GPU 3 temperature 91 C above
// 85 C"); empty when none.
std::string OverThresholds(const HotspotConfig& c, const GpuTelemetry& g);

class HotspotDetection final : public HotspotDetector {
 public:
  explicit HotspotDetection(HotspotConfig config) : config_(config) {}
  void Tick(const EngineView& view, Actions& act) override;
  void Telemetry(NodeIndex node, const std::vector<GpuTelemetry>& gpus, const EngineView& view,
                 Actions& act) override;
  void Observe(const Event& e) override;

 private:
  // Moves up to max_moves movable jobs off the hot GPUs (lowest priority
  // first), or asks for a node when none can move and the pool scales.
  void ActOnHotspot(NodeIndex n, GpuMask gpus, const std::string& reason, const EngineView& view, Actions& act);

  HotspotConfig config_;
  // Looked up by node, never iterated.
  std::unordered_map<NodeIndex, Instant> hot_since_, hot_detected_;
};

}  // namespace gpupool
