// What fake_nvml.cc shares with fake_nvml_fields.cc inside the fake library
// (hidden symbols): the loaded script's devices. Not thread-safe, like the
// rest of the fake.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

namespace fake_nvml {

bool Initialised();
uint64_t Generation();  // bumps each time nvmlInit_v2 loads a script
// The script object of a GPU or MIG device handle, or null when `handle` is
// no device of the loaded script.
const nlohmann::json* DeviceScript(const void* handle);
void* ParentOf(const void* handle);                   // a MIG device's GPU; null otherwise
int GpuInstanceIdOf(const void* handle);              // a MIG device's GPU instance id; -1 otherwise
void* MigDeviceOf(const void* parent, unsigned int gi);  // the MIG device of GPU instance `gi`, or null
int MigModeOf(const void* handle);                    // as scripted; -1: not supported
// The scripted failure of `call` on the device (or its GPU, or every
// device), or 0 (success); 1 (uninitialised) before nvmlInit_v2.
int ScriptedFailure(const char* call, const void* handle);

}  // namespace fake_nvml
