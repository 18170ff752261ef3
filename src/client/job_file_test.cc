#include "src/client/job_file.h"

#include <gtest/gtest.h>

#include <string>

namespace gpupool {
namespace {

std::string Example(const std::string& name) { return std::string(GPUPOOL_SOURCE_DIR) + "/examples/" + name; }

// The examples must produce exactly these bodies: dump() compares types too
// (10 and 10.0 differ), and keys come out sorted.
TEST(JobFileTest, InferenceQuarterGpuExample) {
  auto j = LoadJobFile(Example("inference-quarter-gpu.yaml"));
  ASSERT_TRUE(j) << j.error().message;
  EXPECT_EQ(j->dump(),
            R"({"cpu_cores":2,"gpu_fraction":0.25,"gpu_memory_gib":10,"gpu_models":["A100-80GB","H100"],)"
            R"("kind":"online-inference","memory_gib":8,"name":"embeddings-serve","priority":"high","replicas":1,)"
            R"("sharing":"mps","tenant":"team-a"})");
  EXPECT_TRUE((*j)["gpu_fraction"].is_number_float());
  EXPECT_TRUE((*j)["gpu_memory_gib"].is_number_integer());
}

TEST(JobFileTest, TrainingEightGpuNvlinkExample) {
  auto j = LoadJobFile(Example("training-8gpu-nvlink.yaml"));
  ASSERT_TRUE(j) << j.error().message;
  EXPECT_EQ(j->dump(),
            R"({"checkpoint_duration":"90s","checkpoint_interval":"30m","checkpointable":true,"cpu_cores":64,)"
            R"("expected_duration":"36h","gpus":8,"kind":"training","memory_gib":512,"name":"llm-7b-pretrain",)"
            R"("priority":"high","replicas":1,"requirement":"nvlink","tenant":"team-a"})");
  EXPECT_TRUE((*j)["checkpointable"].is_boolean());
  EXPECT_TRUE((*j)["gpus"].is_number_integer());
}

TEST(JobFileTest, BatchDeadlineExample) {
  auto j = LoadJobFile(Example("batch-deadline.yaml"));
  ASSERT_TRUE(j) << j.error().message;
  EXPECT_EQ(j->dump(),
            R"({"checkpoint_interval":"10m","checkpointable":true,"cpu_cores":8,"deadline_after":"6h",)"
            R"("expected_duration":"2h30m","gpu_models":["A100-80GB","H100","L40S"],"gpus":1,)"
            R"("kind":"batch-inference","memory_gib":48.5,"name":"nightly-embedding-backfill","priority":100,)"
            R"("replicas":2,"tenant":"team-a"})");
  EXPECT_TRUE((*j)["priority"].is_number_integer());
  EXPECT_TRUE((*j)["memory_gib"].is_number_float());
}

TEST(JobFileTest, StringFieldsStayStringsWhateverTheyLookLike) {
  auto j = ParseJobFile(
      "name: 2024\n"
      "tenant: t\n"
      "deadline_after: 600\n"
      "requirement: yes\n"
      "gpu_models: [3090, H100]\n"
      "pools: [1]\n"
      "priority: 5\n"
      "stages:\n"
      "  - {gpu_fraction: 0.5, sharing: 1}\n",
      "job.yaml");
  ASSERT_TRUE(j) << j.error().message;
  EXPECT_EQ(j->dump(),
            R"({"deadline_after":"600","gpu_models":["3090","H100"],"name":"2024","pools":["1"],"priority":5,)"
            R"("requirement":"yes","stages":[{"gpu_fraction":0.5,"sharing":"1"}],"tenant":"t"})");
}

TEST(JobFileTest, QuotedNumbersStayStringsForTheServerToRefuse) {
  auto j = ParseJobFile("name: a\ngpus: \"8\"\n", "job.yaml");
  ASSERT_TRUE(j);
  EXPECT_TRUE((*j)["gpus"].is_string());
}

TEST(JobFileTest, UnknownKeysAreNamedWithTheirLocation) {
  auto top = ParseJobFile("name: a\nraplicas: 2\n", "job.yaml");
  ASSERT_FALSE(top);
  EXPECT_EQ(top.error().message.rfind("job.yaml:2:1: unknown key 'raplicas' in the job request (expected one of: "
                                      "name, tenant, kind,",
                                      0),
            0u)
      << top.error().message;

  auto stage = ParseJobFile("name: a\nstages:\n  - gpus: 1\n  - {gpus: 1, cpu: 2}\n", "job.yaml");
  ASSERT_FALSE(stage);
  EXPECT_EQ(stage.error().message,
            "job.yaml:4:15: unknown key 'cpu' in stages[1] (expected one of: gpus, gpu_fraction, gpu_memory_gib, "
            "sharing, cpu_cores, memory_gib)");
}

TEST(JobFileTest, YamlErrorsNameFileLineAndColumn) {
  auto dup = ParseJobFile("name: a\ngpus: 1\ngpus: 2\n", "job.yaml");
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().message, "job.yaml:3:1: duplicate key 'gpus'");

  auto syntax = ParseJobFile("name: a\ngpus: [1\n", "job.yaml");
  ASSERT_FALSE(syntax);
  EXPECT_EQ(syntax.error().message.rfind("job.yaml:", 0), 0u);

  auto list = ParseJobFile("- name: a\n", "job.yaml");
  ASSERT_FALSE(list);
  EXPECT_EQ(list.error().message, "job.yaml:1:1: expected a map of job request keys (name, gpus, ...)");

  auto empty = ParseJobFile("", "job.yaml");
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().message, "job.yaml: empty job file (expected a map with at least 'name')");
}

TEST(JobFileTest, MissingFile) {
  auto j = LoadJobFile("/nonexistent/job.yaml");
  ASSERT_FALSE(j);
  EXPECT_EQ(j.error().code, ErrorCode::kIo);
  EXPECT_EQ(j.error().message, "cannot read job file /nonexistent/job.yaml");
}

}  // namespace
}  // namespace gpupool
