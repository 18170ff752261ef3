// A MIG create/destroy round trip on one GPU already in MIG mode, for the
// device check (scripts/device-check.sh, `gpupool agent --mig-check GPU`):
// the smallest profile at its first free placement (the driver's rules,
// mig_layout.h), created, found in the GPU's instance list, destroyed, and
// gone from the list. The GPU's MIG mode and its other instances are left
// as they are.
//
// Thread-safety: as the backend's (one caller).
#pragma once

#include <nlohmann/json.hpp>

#include "src/agent/device_backend.h"
#include "src/base/status.h"

namespace gpupool {

// {"gpu", "profile", "start", "uuid", "create_ms", "destroy_ms"} on
// success. Fails, naming the step, when the GPU does not exist, is not in
// MIG mode, has no free placement for any profile, or a step fails (the
// driver's words); an instance created before a later step failed is
// destroyed again where possible.
Result<nlohmann::json> RunMigCheck(DeviceBackend& backend, int gpu);

}  // namespace gpupool
