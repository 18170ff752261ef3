// Jitter for the agent's waits: agents that restarted together (a server
// restart, a rack's power) spread their registrations, heartbeats and
// watch retries out instead of arriving in step.
#pragma once

#include <chrono>
#include <random>

namespace gpupool {

// `d` less a uniformly random part of up to a fifth of it: the result lies
// in [d - d/5, d] (whole milliseconds), so a wait is never longer than
// asked. Waits under 5 ms come back unchanged. One generator per thread:
// the generator is not shared.
std::chrono::milliseconds Jittered(std::chrono::milliseconds d, std::minstd_rand& rng);

}  // namespace gpupool
