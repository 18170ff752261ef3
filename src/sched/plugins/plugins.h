// The built-in score plugins and GPU selectors, created by name through the
// registry (src/sched/registry.h). Each is described where it is defined.
//
// The six published policies of the FGD paper's simulator are re-implemented
// from their documented behaviour (see ../shared/traces/alibaba-gpu-2023/
// PROTOCOL.md); their scores keep the published integer truncation, because
// ties between equal integer scores (broken by node rank) are part of how
// those policies behave.
#pragma once

#include <memory>

#include "src/sched/fragmentation.h"
#include "src/sched/plugins/fgd_plus.h"
#include "src/sched/share_packing.h"
#include "src/sched/plugin.h"

namespace gpupool {

// Score plugins.
std::unique_ptr<ScorePlugin> MakeDotProdScore();
std::unique_ptr<ScorePlugin> MakeGpuClusteringScore();
std::unique_ptr<ScorePlugin> MakeGpuPackingScore();
std::unique_ptr<ScorePlugin> MakeBestFitScore();
// `frag` must outlive the plugin.
std::unique_ptr<ScorePlugin> MakeFgdScore(const FragmentationModel* frag);
// The models `config` points to must outlive the plugin.
std::unique_ptr<ScorePlugin> MakeFgdPlusScore(const FgdPlusConfig& config);

// GPU selectors.
std::unique_ptr<GpuSelector> MakeBestFitGpuSelector();
std::unique_ptr<GpuSelector> MakeRandomGpuSelector();
std::unique_ptr<GpuSelector> MakeFgdGpuSelector(const FragmentationModel* frag);
std::unique_ptr<GpuSelector> MakeFgdPlusGpuSelector(const FgdPlusConfig& config);

}  // namespace gpupool
