// libFuzzer target: a job request body (POST /v1/jobs) as the server reads
// it: JSON text, then ParseJobRequest. Any input must give a value or an
// ApiError; an exception, a crash or a sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "src/api/job_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const nlohmann::json body = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return 0;
  gpupool::ApiNames names;
  names.pools = {"gpu", "cpu"};
  names.priorities = {{"low", 0}, {"normal", 100}, {"high", 1000}};
  names.labels = {"web", "batch"};
  names.default_image = "host";
  (void)gpupool::ParseJobRequest(body, names, gpupool::Instant{});
  return 0;
}
