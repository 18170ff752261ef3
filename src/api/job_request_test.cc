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

// Affinity rules (QUOTA-6) by label name: each list becomes a mask over the
// configuration's job_labels, and the view gives the names back.
TEST(JobRequestTest, LabelsAndAffinityRulesAreNamedByTheConfiguredLabels) {
  ApiNames names = Names();
  names.labels = {"web", "db", "cache"};
  const json body = {{"name", "api"},          {"gpus", 1},
                     {"labels", {"web"}},       {"affinity", {"cache", "db"}},
                     {"anti_affinity", {"web"}}};
  auto r = ParseJobRequest(body, names, Instant{});
  ASSERT_TRUE(r.ok()) << r.error.message;
  EXPECT_EQ(r.value->spec.labels, LabelMask{1});
  EXPECT_EQ(r.value->spec.affinity, LabelMask{0b110});
  EXPECT_EQ(r.value->spec.anti_affinity, LabelMask{1});
  const json back = JobSpecToRequest(r.value->spec, "team", names);
  EXPECT_EQ(back.at("labels"), json({"web"}));
  EXPECT_EQ(back.at("affinity"), json({"db", "cache"}));
  EXPECT_EQ(back.at("anti_affinity"), json({"web"}));
  auto plain = ParseJobRequest(json{{"name", "x"}, {"gpus", 1}}, names, Instant{});
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(JobSpecToRequest(plain.value->spec, "team", names).contains("affinity"));
}

TEST(JobRequestTest, AnUnknownOrRepeatedLabelIsRefusedNamingItsIndex) {
  ApiNames names = Names();
  names.labels = {"web"};
  auto unknown = ParseJobRequest(json{{"name", "x"}, {"affinity", {"web", "db"}}}, names, Instant{});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error.field, "affinity[1]");
  EXPECT_NE(unknown.error.message.find("unknown label 'db'"), std::string::npos) << unknown.error.message;
  auto twice = ParseJobRequest(json{{"name", "x"}, {"labels", {"web", "web"}}}, names, Instant{});
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.error.field, "labels[1]");
  auto none = ParseJobRequest(json{{"name", "x"}, {"anti_affinity", {"web"}}}, Names(), Instant{});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error.message.find("job_labels: none"), std::string::npos) << none.error.message;
  auto type = ParseJobRequest(json{{"name", "x"}, {"labels", "web"}}, names, Instant{});
  ASSERT_FALSE(type.ok());
  EXPECT_EQ(type.error.field, "labels");
}

// A tenant ranks its job within the server config's classes: an integer
// priority beyond the lowest or highest class is refused naming the field.
TEST(JobRequestTest, AnIntegerPriorityStaysWithinTheConfiguredClasses) {
  ApiNames n = Names();
  n.priorities = {{"low", 0}, {"normal", 100}, {"high", 1000}};
  for (int64_t ok : {0, 100, 999, 1000}) {
    auto r = ParseJobRequest(json{{"name", "x"}, {"gpus", 1}, {"priority", ok}}, n, Instant{});
    ASSERT_TRUE(r.ok()) << ok << ": " << r.error.message;
    EXPECT_EQ(r.value->spec.priority, ok);
  }
  for (int64_t bad : {-1, 1001, 1000000}) {
    auto r = ParseJobRequest(json{{"name", "x"}, {"gpus", 1}, {"priority", bad}}, n, Instant{});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error.field, "priority");
    EXPECT_NE(r.error.message.find("1000"), std::string::npos) << r.error.message;
  }
  auto named = ParseJobRequest(json{{"name", "x"}, {"gpus", 1}, {"priority", "high"}}, n, Instant{});
  ASSERT_TRUE(named.ok()) << named.error.message;
  EXPECT_EQ(named.value->spec.priority, 1000);
}

// Issue 22's fuzzer: a body that is not an object, and an unknown empty key, were 400s naming no field.
TEST(JobRequestTest, ABodyThatIsNotAnObjectIsRefusedNamingTheBody) {
  for (const json& body : {json::array(), json("text"), json(nullptr), json(7)}) {
    auto r = ParseJobRequest(body, Names(), Instant{});
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.error.field, "body") << body;
    EXPECT_EQ(r.error.message.rfind("body: expected an object, got ", 0), 0u) << r.error.message;
  }
  // An unknown key that is empty is named too (as ""), at the top and below.
  auto empty = ParseJobRequest(json{{"name", "x"}, {"", 1}}, Names(), Instant{});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error.field, "\"\"");
  auto stage = ParseJobRequest(json{{"name", "x"}, {"stages", {{{"gpus", 1}, {"", 1}}}}}, Names(), Instant{});
  ASSERT_FALSE(stage.ok());
  EXPECT_EQ(stage.error.field, "stages[0].\"\"");
}

}  // namespace
}  // namespace gpupool
