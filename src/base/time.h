// Time on the engine's timeline.
//
// The engine never reads a clock: every command carries `now` as an Instant,
// a point on a timeline whose origin the caller chooses (the simulator: the
// start of the run; the server: the Unix epoch). Durations and instants are
// std::chrono types with millisecond resolution, so units are never implied.
#pragma once

#include <chrono>
#include <cstdint>

namespace gpupool {

// A tag clock: it defines the timeline's type but has no now().
struct EngineClock {
  using rep = int64_t;
  using period = std::milli;
  using duration = std::chrono::duration<rep, period>;
  using time_point = std::chrono::time_point<EngineClock>;
  static constexpr bool is_steady = true;
};

using Duration = EngineClock::duration;
using Instant = EngineClock::time_point;

inline constexpr Instant kTimeOrigin{};

inline int64_t ToMillis(Instant t) { return t.time_since_epoch().count(); }
inline int64_t ToMillis(Duration d) { return d.count(); }
inline Instant InstantFromMillis(int64_t ms) { return Instant(Duration(ms)); }
inline double ToSeconds(Duration d) { return static_cast<double>(d.count()) / 1000.0; }

}  // namespace gpupool
