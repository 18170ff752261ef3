// The job request of the REST API (POST /v1/jobs; the CLI's job files) and
// its conversion to the Engine's JobSpec. docs/api/openapi.yaml lists the
// fields; every error names the field (ApiError::field).
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "src/api/json_fields.h"
#include "src/base/time.h"
#include "src/model/job.h"

namespace gpupool {

// The names a request may use, fixed when the server starts (pools come
// from its configuration, requirements too). Immutable: shared by the HTTP
// threads.
struct ApiNames {
  std::vector<std::string> pools;  // by PoolId
  std::map<std::string, uint16_t> requirements;
  std::map<std::string, int32_t> priorities;  // priority classes
  // The configuration's job_labels: label i is bit i of a LabelMask
  // (labels, affinity, anti_affinity; QUOTA-6).
  std::vector<std::string> labels;
  int32_t max_replicas = 4096;
  // server.default_image: the image of a job that runs a command and gives
  // none; empty: such a job is refused naming `image`.
  std::string default_image;
  std::optional<PoolId> pool_id(std::string_view name) const;
  std::string requirement_name(uint16_t id) const;
  // The names of a mask's labels, in label order.
  std::vector<std::string> label_names(LabelMask mask) const;
};

struct JobRequest {
  std::string tenant;  // as given; empty when omitted
  JobSpec spec;        // spec.tenant unset (-1): the server resolves the tenant
};

// Reads a request body. `now` resolves deadline_after.
ApiResult<JobRequest> ParseJobRequest(const nlohmann::json& body, const ApiNames& names, Instant now);

// The request that describes `spec` (normalized: every field explicit), for
// job views. The inverse of ParseJobRequest up to defaults.
nlohmann::json JobSpecToRequest(const JobSpec& spec, const std::string& tenant, const ApiNames& names);

}  // namespace gpupool
