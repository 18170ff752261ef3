// The standard control loops and the Engines that run them.
//
// Who creates an Engine (the simulator, the server, tests, benchmarks)
// does it here: CreateEngine and RestoreEngine are Engine::Create and
// Engine::Restore (src/engine/engine.h) with StandardControlLoops, the one
// place that knows which loop implements which interface of
// src/engine/control_loop.h. Each loop takes its settings from the
// EngineConfig, which Engine::Create checks before any loop runs.
#pragma once

#include <memory>

#include "src/base/status.h"
#include "src/engine/control_loop.h"
#include "src/engine/engine.h"

namespace gpupool {

// One fresh component per loop, configured from `config`.
ControlLoops StandardControlLoops(const EngineConfig& config);

Result<std::unique_ptr<Engine>> CreateEngine(EngineConfig config, AttributeTable attributes);
Result<std::unique_ptr<Engine>> RestoreEngine(EngineConfig config, AttributeTable attributes, EngineState state,
                                              Instant now);

}  // namespace gpupool
