// libFuzzer target: the agent protocol's messages, each reader on the same
// JSON (a node token holder can send any of them).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "src/api/agent_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  using gpupool::UnknownKeys;
  for (UnknownKeys u : {UnknownKeys::kIgnore, UnknownKeys::kRefuse}) {
    (void)gpupool::ParseRegisterRequest(j, u);
    (void)gpupool::ParseHeartbeatRequest(j, u);
    (void)gpupool::ParseAgentReply(j, u);
    (void)gpupool::ParseWatchRequest(j, u);
    (void)gpupool::ParseWatchReply(j, u);
    (void)gpupool::ParseTaskReportRequest(j, u);
  }
  return 0;
}
