// The job request's elastic bounds (SCALE-7): max_replicas makes a job
// elastic from `replicas` up; a bound below `replicas` is refused naming
// the field; the request view gives both back.
#include "src/api/job_request.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

using nlohmann::json;

ApiNames Names() {
  ApiNames n;
  n.pools = {"gpu"};
  n.priorities = {{"normal", 0}};
  return n;
}

TEST(JobRequestTest, MaxReplicasMakesTheJobElasticFromItsReplicas) {
  const json body = {{"name", "ft"}, {"gpus", 2}, {"replicas", 2}, {"max_replicas", 6}, {"checkpointable", true}};
  auto r = ParseJobRequest(body, Names(), Instant{});
  ASSERT_TRUE(r.ok()) << r.error.message;
  EXPECT_TRUE(r.value->spec.elastic());
  EXPECT_EQ(r.value->spec.replicas, 2);
  EXPECT_EQ(r.value->spec.min_replicas, 2);
  EXPECT_EQ(r.value->spec.max_replicas, 6);
  const json back = JobSpecToRequest(r.value->spec, "team", Names());
  EXPECT_EQ(back.at("replicas"), 2);
  EXPECT_EQ(back.at("max_replicas"), 6);
  // A running job that grew still shows its request's bounds.
  JobSpec grown = r.value->spec;
  grown.replicas = 5;
  EXPECT_EQ(JobSpecToRequest(grown, "team", Names()).at("replicas"), 2);
}

TEST(JobRequestTest, MaxReplicasBelowReplicasIsRefusedNamingTheField) {
  const json body = {{"name", "ft"}, {"gpus", 2}, {"replicas", 4}, {"max_replicas", 3}};
  auto r = ParseJobRequest(body, Names(), Instant{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error.field, "max_replicas");
  auto rigid = ParseJobRequest(json{{"name", "x"}, {"gpus", 1}}, Names(), Instant{});
  ASSERT_TRUE(rigid.ok()) << rigid.error.message;
  EXPECT_FALSE(rigid.value->spec.elastic());
  EXPECT_FALSE(JobSpecToRequest(rigid.value->spec, "team", Names()).contains("max_replicas"));
}

}  // namespace
}  // namespace gpupool
