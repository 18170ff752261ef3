// docs/api/openapi.yaml must describe the whole REST contract: every path
// with its methods, roles and schemas. This catches drift between the
// document, the client and the contract.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "src/client/job_file.h"
#include "src/client/json_yaml.h"

namespace gpupool {
namespace {

using nlohmann::json;

const std::string kPath = std::string(GPUPOOL_SOURCE_DIR) + "/docs/api/openapi.yaml";

// The document, read with yaml-cpp and held as JSON (which is what an OpenAPI
// document is), so that $refs resolve as JSON pointers.
class OpenApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::ifstream in(kPath);
    std::stringstream text;
    text << in.rdbuf();
    auto doc = YamlToJson(text.str(), kPath);
    doc_ = new json(doc ? *doc : json());
    if (!doc) load_error_ = new std::string(doc.error().message);
  }
  static void TearDownTestSuite() {
    delete doc_;
    delete load_error_;
    doc_ = nullptr;
    load_error_ = nullptr;
  }
  void SetUp() override { ASSERT_EQ(load_error_, nullptr) << *load_error_; }

  static const json& Doc() { return *doc_; }
  static const json& At(const json& j, const std::string& key) {
    static const json kNull;
    if (!j.is_object() || !j.contains(key)) return kNull;
    return j.at(key);
  }
  static const json& Op(const std::string& path, const std::string& method) {
    return At(At(At(Doc(), "paths"), path), method);
  }
  static const json& Schema(const std::string& name) { return At(At(At(Doc(), "components"), "schemas"), name); }

  static std::set<std::string> Keys(const json& map) {
    std::set<std::string> out;
    if (map.is_object()) {
      for (const auto& [k, v] : map.items()) out.insert(k);
    }
    return out;
  }
  static std::set<std::string> Strings(const json& list) {
    std::set<std::string> out;
    if (list.is_array()) {
      for (const auto& s : list) out.insert(s.is_string() ? s.get<std::string>() : s.dump());
    }
    return out;
  }

  // Follows {$ref: '#/...'} to its target; null when it dangles.
  static json Resolve(json node) {
    for (int hops = 0; node.is_object() && node.contains("$ref") && hops < 10; ++hops) {
      const std::string ref = node["$ref"].get<std::string>();
      if (ref.rfind("#/", 0) != 0) return json();
      const json::json_pointer pointer(ref.substr(1));
      if (!Doc().contains(pointer)) return json();
      node = Doc().at(pointer);
    }
    return node;
  }

  static json* doc_;
  static std::string* load_error_;
};
json* OpenApiTest::doc_ = nullptr;
std::string* OpenApiTest::load_error_ = nullptr;

// The contract's paths and methods (the API v1 contract).
const std::map<std::string, std::set<std::string>> kContract = {
    {"/v1/tenants", {"get", "post"}},
    {"/v1/tenants/{name}", {"get"}},
    {"/v1/tenants/{name}/quota", {"put"}},
    {"/v1/jobs", {"get", "post"}},
    {"/v1/jobs/{id}", {"get", "delete"}},
    {"/v1/jobs/{id}/logs", {"get"}},
    {"/v1/nodes", {"get", "post"}},
    {"/v1/nodes/{name}", {"get", "delete"}},
    {"/v1/nodes/{name}/cordon", {"post"}},
    {"/v1/nodes/{name}/uncordon", {"post"}},
    {"/v1/nodes/{name}/drain", {"post"}},
    {"/v1/nodes/{name}/token", {"post"}},
    {"/v1/agent/register", {"post"}},
    {"/v1/agent/heartbeat", {"post"}},
    {"/v1/pools", {"get"}},
    {"/v1/regions", {"get", "put"}},
    {"/v1/events", {"get"}},
    {"/v1/audit", {"get"}},
    {"/v1/export", {"get"}},
    {"/v1/usage", {"get"}},
    {"/v1/timeseries/pools", {"get"}},
    {"/v1/timeseries/tenants", {"get"}},
    {"/v1/timeseries/gpus", {"get"}},
    {"/v1/tokens", {"get", "post"}},
    {"/v1/tokens/{id}", {"delete"}},
    {"/healthz", {"get"}},
    {"/metrics", {"get"}},
    {"/", {"get"}},
    {"/console/{file}", {"get"}},
};
const std::set<std::string> kMethods = {"get", "put", "post", "delete", "options", "head", "patch", "trace"};

TEST_F(OpenApiTest, IsOpenApi3) {
  ASSERT_TRUE(At(Doc(), "openapi").is_string());
  EXPECT_EQ(Doc()["openapi"].get<std::string>().rfind("3.0.", 0), 0u);
  EXPECT_TRUE(At(At(Doc(), "info"), "title").is_string());
  EXPECT_TRUE(At(At(Doc(), "info"), "version").is_string());
}

TEST_F(OpenApiTest, EveryContractPathIsPresentWithExactlyItsMethods) {
  const json& paths = At(Doc(), "paths");
  ASSERT_TRUE(paths.is_object());
  for (const auto& [path, methods] : kContract) {
    ASSERT_TRUE(paths.contains(path)) << "missing path " << path;
    std::set<std::string> found;
    for (const std::string& key : Keys(paths.at(path))) {
      if (kMethods.count(key)) found.insert(key);
    }
    EXPECT_EQ(found, methods) << path;
  }
  EXPECT_EQ(Keys(paths).size(), kContract.size()) << "paths beyond the contract";
}

TEST_F(OpenApiTest, EveryOperationSaysWhichRolesMayCallIt) {
  const std::map<std::string, std::set<std::string>> roles = {
      {"post /v1/tenants", {"admin"}},
      {"get /v1/tenants", {"admin"}},
      {"get /v1/tenants/{name}", {"admin", "tenant"}},
      {"put /v1/tenants/{name}/quota", {"admin"}},
      {"post /v1/jobs", {"admin", "tenant"}},
      {"get /v1/jobs", {"admin", "tenant"}},
      {"get /v1/jobs/{id}", {"admin", "tenant"}},
      {"delete /v1/jobs/{id}", {"admin", "tenant"}},
      {"get /v1/jobs/{id}/logs", {"admin", "tenant"}},
      {"post /v1/nodes", {"admin"}},
      {"get /v1/nodes", {"admin"}},
      {"get /v1/nodes/{name}", {"admin"}},
      {"delete /v1/nodes/{name}", {"admin"}},
      {"post /v1/nodes/{name}/cordon", {"admin"}},
      {"post /v1/nodes/{name}/uncordon", {"admin"}},
      {"post /v1/nodes/{name}/drain", {"admin"}},
      {"post /v1/nodes/{name}/token", {"admin"}},
      {"post /v1/agent/register", {"node"}},
      {"post /v1/agent/heartbeat", {"node"}},
      {"get /v1/pools", {"admin", "tenant"}},
      {"get /v1/regions", {"admin", "tenant"}},
      {"put /v1/regions", {"admin"}},
      {"get /v1/events", {"admin"}},
      {"get /v1/audit", {"admin"}},
      {"get /v1/export", {"admin"}},
      {"get /v1/usage", {"admin", "tenant"}},
      {"get /v1/timeseries/pools", {"admin", "tenant"}},
      {"get /v1/timeseries/tenants", {"admin", "tenant"}},
      {"get /v1/timeseries/gpus", {"admin"}},
      {"post /v1/tokens", {"admin", "tenant"}},
      {"get /v1/tokens", {"admin", "tenant"}},
      {"delete /v1/tokens/{id}", {"admin", "tenant"}},
      {"get /healthz", {"none"}},
      {"get /metrics", {"none"}},
      {"get /", {"none"}},
      {"get /console/{file}", {"none"}},
  };
  for (const auto& [path, methods] : kContract) {
    for (const std::string& m : methods) {
      const json& op = Op(path, m);
      const std::string name = m + " " + path;
      const std::set<std::string> got = Strings(At(op, "x-gpupool-roles"));
      EXPECT_EQ(got, roles.at(name)) << name;
      // Unauthenticated paths opt out of the global bearer scheme.
      const bool open = got == std::set<std::string>{"none"};
      const json& security = At(op, "security");
      EXPECT_EQ(security.is_array() && security.empty(), open) << name;
      const json& responses = At(op, "responses");
      ASSERT_TRUE(responses.is_object()) << name;
      if (!open) {
        EXPECT_TRUE(responses.contains("401")) << name << " must document 401";
      }
      // Admin-only and node-only operations refuse the other roles' tokens.
      if (got == std::set<std::string>{"admin"} || got == std::set<std::string>{"node"}) {
        EXPECT_TRUE(responses.contains("403")) << name << " must document 403";
      }
      // A path naming an object answers 404 when there is none; a node token
      // is issued for a node that need not exist yet (its agent registers it).
      if (path.find('{') != std::string::npos && name != "post /v1/nodes/{name}/token") {
        EXPECT_TRUE(responses.contains("404")) << name << " must document 404";
      }
    }
  }
}

TEST_F(OpenApiTest, BearerSecuritySchemeIsTheDefault) {
  const json& scheme = At(At(At(Doc(), "components"), "securitySchemes"), "bearerAuth");
  EXPECT_EQ(At(scheme, "type"), "http");
  EXPECT_EQ(At(scheme, "scheme"), "bearer");
  const json& security = At(Doc(), "security");
  ASSERT_TRUE(security.is_array() && !security.empty());
  EXPECT_TRUE(security[0].contains("bearerAuth"));
}

TEST_F(OpenApiTest, ErrorsHaveTheContractsShape) {
  const json& e = Schema("Error");
  EXPECT_EQ(Keys(At(e, "properties")), std::set<std::string>{"error"});
  const json& inner = At(At(e, "properties"), "error");
  EXPECT_EQ(Keys(At(inner, "properties")), (std::set<std::string>{"code", "message", "field"}));
  EXPECT_EQ(
      Strings(At(At(At(inner, "properties"), "code"), "enum")),
      (std::set<std::string>{"invalid_argument", "unauthorized", "forbidden", "not_found", "conflict", "unavailable"}));
  // Every documented error answer uses the Error schema.
  for (const auto& [path, methods] : kContract) {
    for (const std::string& m : methods) {
      for (const auto& [status, response] : At(Op(path, m), "responses").items()) {
        if (status[0] == '2' || status[0] == '3') continue;  // 304 Not Modified has no body
        const json r = Resolve(response);
        EXPECT_EQ(At(At(At(At(r, "content"), "application/json"), "schema"), "$ref"), "#/components/schemas/Error")
            << m << " " << path << " " << status;
      }
    }
  }
}

TEST_F(OpenApiTest, RequestBodiesRejectUnknownFields) {
  for (const auto& [path, methods] : kContract) {
    for (const std::string& m : methods) {
      const json& op = Op(path, m);
      const bool has_body = m == "post" || m == "put";
      ASSERT_EQ(op.contains("requestBody"), has_body) << m << " " << path;
      if (!has_body) continue;
      const json schema = Resolve(At(At(At(At(op, "requestBody"), "content"), "application/json"), "schema"));
      EXPECT_EQ(At(schema, "additionalProperties"), false) << m << " " << path;
    }
  }
  for (const char* name : {"Quota", "Stage", "AgentGpu", "AgentMigInstance", "GpuSample", "TaskReport", "ScrubReport",
                           "LogChunk", "Region", "RegionUsers"}) {
    EXPECT_EQ(At(Schema(name), "additionalProperties"), false) << name;
  }
}

TEST_F(OpenApiTest, JobRequestHasExactlyTheKeysTheClientAccepts) {
  const std::set<std::string> client_keys(JobRequestKeys().begin(), JobRequestKeys().end());
  EXPECT_EQ(Keys(At(Schema("JobRequest"), "properties")), client_keys);
  const std::set<std::string> stage_keys(StageKeys().begin(), StageKeys().end());
  EXPECT_EQ(Keys(At(Schema("Stage"), "properties")), stage_keys);
}

TEST_F(OpenApiTest, SchemasHaveTheContractsFields) {
  const std::map<std::string, std::set<std::string>> fields = {
      {"Job",
       {"id", "name", "tenant", "state", "kind", "priority", "replicas", "submitted_at", "started_at", "ended_at",
        "pool", "borrowed", "placements", "preemptions", "interruptions", "reason", "last_stop", "waiting", "waiting_reasons",
        "request", "usage"}},
      {"JobList", {"jobs", "next_after", "next_before"}},
      {"Placement", {"node", "gpus"}},
      {"Tenant", {"name", "quota", "usage"}},
      {"TenantList", {"tenants"}},
      {"Quota", {"guaranteed_gpus", "limit_gpus", "weight", "reserved"}},
      {"QuotaUpdate", {"pool", "guaranteed_gpus", "limit_gpus", "weight", "reserved"}},
      {"TenantCreate", {"name", "quota"}},
      {"PoolUsage", {"used_gpus", "borrowed_gpus", "lent_gpus"}},
      {"NodeCreate", {"name", "model", "gpus", "cpu_cores", "memory_gib", "region", "zone", "rack", "class"}},
      {"Node",
       {"name", "pool", "model", "gpus", "cpu_cores", "memory_gib", "region", "zone", "rack", "condition", "free_gpus",
        "gpu", "hotspot", "cordons", "agent", "lent_from"}},
      {"NodeList", {"nodes"}},
      // Issue 19: operators' node commands (src/server/http_api.cc, HttpApi::NodeOp).
      {"NodeCordon", {"by", "actor", "reason", "since", "drain", "drain_deadline", "removed"}},
      {"NodeCordonRequest", {"reason"}},
      {"NodeDrainRequest", {"reason", "timeout_s"}},
      {"NodeGpu", {"index", "mode", "free_milli", "memory_free_mib"}},
      {"Pool", {"name", "models", "regions", "dedicated_to", "nodes", "capacity"}},
      {"PoolList", {"pools"}},
      // The region table (src/api/region_request.cc: the keys ParseRegionRequest accepts).
      {"RegionTable", {"policy", "regions", "users"}},
      {"RegionTableUpdate", {"policy", "regions", "users"}},
      {"Region", {"name", "price_per_gpu_hour", "latency_ms"}},
      {"RegionUsers", {"tenant", "location", "latency_budget_ms"}},
      {"PoolCapacity", {"total_gpus", "allocated_gpus", "reserved_gpus", "fragmented_gpus", "available_gpus"}},
      {"Event", {"seq", "at", "type", "actor", "request_id"}},
      {"AuditEntry", {"seq", "at", "type", "actor", "request_id", "event"}},
      {"Token", {"id", "name", "role", "tenant", "node", "created_at", "expires_at", "revoked_at", "legacy"}},
      {"TokenCreate", {"name", "tenant", "read_only", "expires_in"}},
      {"EventList", {"events", "next_since"}},
      {"Health", {"status", "last_seq"}},
      {"NodeToken", {"node", "token"}},
      // The agent protocol (src/api/agent_protocol.cc: the keys its parsers accept).
      {"RegisterRequest",
       {"node", "backend", "class", "region", "zone", "rack", "cpu_milli", "memory_mib", "gpus", "isolation",
        "metrics_url"}},
      {"AgentGpu", {"index", "uuid", "product", "model", "memory_mib", "mig_enabled", "mig", "nvlink_peers"}},
      {"AgentMigInstance", {"uuid", "profile", "start", "memory_mib"}},
      {"HeartbeatRequest", {"node", "session", "gpus", "tasks", "scrubs", "logs"}},
      {"GpuSample",
       {"index", "util_pct", "memory_used_mib", "memory_total_mib", "temperature_c", "healthy", "health_detail"}},
      {"TaskReport",
       {"job", "replica", "attempt", "phase", "pid", "exit_code", "signal", "checkpoint_acked", "error", "util_pct",
        "gpu_memory_mib"}},
      {"ScrubReport", {"id", "ok", "bytes", "seconds", "error"}},
      {"LogChunk", {"job", "replica", "attempt", "offset", "data"}},
      {"AgentReply",
       {"node_index", "session", "heartbeat_interval_ms", "fence_after_ms", "tasks", "scrubs", "logs", "pool"}},
      {"TaskOrder",
       {"job", "replica", "attempt", "name", "tenant", "action", "idle_notice", "gpus", "gpu_mode", "gpu_milli",
        "gpu_memory_mib", "mig_profile", "mig_start", "task", "image", "shm_mib", "network_isolated", "memory_mib",
        "cpu_milli", "uid", "uid_count"}},
      {"TaskSpec", {"command", "env", "working_dir", "checkpoint_signal", "checkpoint_timeout", "stop_grace"}},
      {"ScrubOrder", {"id", "gpus"}},
      {"LogAck", {"job", "replica", "attempt", "bytes"}},
  };
  for (const auto& [name, want] : fields) EXPECT_EQ(Keys(At(Schema(name), "properties")), want) << name;
  EXPECT_EQ(Strings(At(Schema("JobState"), "enum")),
            (std::set<std::string>{"pending", "running", "checkpointing", "succeeded", "failed", "cancelled",
                                   "rejected", "evicted"}));
  EXPECT_EQ(Strings(At(Schema("JobKind"), "enum")),
            (std::set<std::string>{"training", "online-inference", "batch-inference", "development", "cpu"}));
  EXPECT_EQ(Strings(At(Schema("Sharing"), "enum")), (std::set<std::string>{"any", "time-slice", "mps", "mig", "auto"}));
  EXPECT_EQ(Strings(At(Schema("RegionPolicy"), "enum")), (std::set<std::string>{"cost-aware", "nearest", "off"}));
  EXPECT_EQ(Strings(At(Schema("TaskPhase"), "enum")),
            (std::set<std::string>{"running", "exited", "checkpointed", "start_failed"}));
  EXPECT_EQ(Strings(At(At(At(Schema("TaskOrder"), "properties"), "action"), "enum")),
            (std::set<std::string>{"run", "checkpoint"}));
  EXPECT_EQ(Strings(At(At(At(Schema("TaskOrder"), "properties"), "gpu_mode"), "enum")),
            (std::set<std::string>{"whole", "time-slice", "mps", "mig", "none"}));
  // Issue 14: how tasks run, and the job's network.
  EXPECT_EQ(Strings(At(At(At(Schema("RegisterRequest"), "properties"), "isolation"), "enum")),
            (std::set<std::string>{"container", "none"}));
  EXPECT_EQ(Strings(At(At(At(At(At(Schema("Node"), "properties"), "agent"), "properties"), "isolation"), "enum")),
            (std::set<std::string>{"container", "none"}));
  EXPECT_EQ(Strings(At(At(At(Schema("JobRequest"), "properties"), "network"), "enum")),
            (std::set<std::string>{"host", "isolated"}));
  // The created tenant carries its token.
  EXPECT_TRUE(Doc().contains(json::json_pointer("/components/schemas/TenantCreated/allOf/1/properties/token")));
}

TEST_F(OpenApiTest, EveryReferenceResolves) {
  std::vector<const json*> stack = {&Doc()};
  int refs = 0;
  while (!stack.empty()) {
    const json* n = stack.back();
    stack.pop_back();
    if (n->is_object() && n->contains("$ref")) {
      ++refs;
      EXPECT_FALSE(Resolve(*n).is_null()) << "dangling " << (*n)["$ref"];
      continue;
    }
    if (n->is_structured()) {
      for (const auto& item : *n) stack.push_back(&item);
    }
  }
  EXPECT_GT(refs, 50);
}

}  // namespace
}  // namespace gpupool
