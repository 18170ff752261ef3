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
  n.default_image = "host";
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

TEST(JobRequestTest, AJobWithACommandRunsInTheDefaultImageUnlessItNamesOne) {
  const json body = {{"name", "t"}, {"gpus", 1}, {"command", {"sleep", "1"}}};
  auto r = ParseJobRequest(body, Names(), Instant{});
  ASSERT_TRUE(r.ok()) << r.error.message;
  EXPECT_EQ(r.value->spec.task.image, "host");  // decided at submission: shown in the request
  EXPECT_EQ(JobSpecToRequest(r.value->spec, "team", Names()).at("image"), "host");
  json own = body;
  own["image"] = "/images/cuda-12";
  own["shm_gib"] = 2;
  own["network"] = "isolated";
  auto named = ParseJobRequest(own, Names(), Instant{});
  ASSERT_TRUE(named.ok()) << named.error.message;
  EXPECT_EQ(named.value->spec.task.image, "/images/cuda-12");
  const json back = JobSpecToRequest(named.value->spec, "team", Names());
  EXPECT_EQ(back.at("image"), "/images/cuda-12");
  EXPECT_EQ(back.at("shm_gib"), 2.0);
  EXPECT_EQ(back.at("network"), "isolated");
  auto again = ParseJobRequest(back, Names(), Instant{});
  ASSERT_TRUE(again.ok()) << again.error.message;
  EXPECT_EQ(again.value->spec.task, named.value->spec.task);
  // A job without a command has no image, default or not.
  auto holds = ParseJobRequest(json{{"name", "h"}, {"gpus", 1}}, Names(), Instant{});
  ASSERT_TRUE(holds.ok()) << holds.error.message;
  EXPECT_EQ(holds.value->spec.task.image, "");
}

TEST(JobRequestTest, NoImageAndNoDefaultImageIsRefusedNamingImage) {
  ApiNames names = Names();
  names.default_image.clear();
  auto r = ParseJobRequest(json{{"name", "t"}, {"gpus", 1}, {"command", {"sleep", "1"}}}, names, Instant{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error.field, "image");
  EXPECT_NE(r.error.message.find("no image given and the server has no default_image"), std::string::npos)
      << r.error.message;
  auto own = ParseJobRequest(json{{"name", "t"}, {"gpus", 1}, {"command", {"sleep", "1"}}, {"image", "host"}}, names,
                             Instant{});
  ASSERT_TRUE(own.ok()) << own.error.message;
  auto holds = ParseJobRequest(json{{"name", "h"}, {"gpus", 1}}, names, Instant{});
  EXPECT_TRUE(holds.ok()) << holds.error.message;
}

}  // namespace
}  // namespace gpupool
