#include "src/api/task_request.h"

#include <gtest/gtest.h>

#include <csignal>

namespace gpupool {
namespace {

using nlohmann::json;

// Parses `body` as a job request's task fields; the error field or "".
std::string Parse(const json& body, TaskSpec* out = nullptr) {
  FieldReader f;
  ApiError err;
  if (!FieldReader::Open(body, "", {"command", "env", "working_dir", "checkpoint_signal", "checkpoint_timeout",
                                    "stop_grace", "image", "shm_gib", "network"},
                         &f, &err)) {
    return err.field;
  }
  TaskSpec t;
  if (!ParseTaskFields(f, t, &err)) return err.field + ": " + err.message;
  if (out) *out = t;
  return "";
}

TEST(TaskRequestTest, ReadsEveryFieldAndWritesThemBack) {
  const json body = {{"command", {"python", "train.py", ""}},
                     {"env", {{"B", "2"}, {"A", "1"}}},
                     {"working_dir", "/data"},
                     {"checkpoint_signal", "USR2"},
                     {"checkpoint_timeout", "2m"},
                     {"stop_grace", "30s"}};
  TaskSpec t;
  ASSERT_EQ(Parse(body, &t), "");
  EXPECT_EQ(t.command, (std::vector<std::string>{"python", "train.py", ""}));
  EXPECT_EQ(t.env, (std::vector<std::pair<std::string, std::string>>{{"A", "1"}, {"B", "2"}}));
  EXPECT_EQ(t.checkpoint_signal, SIGUSR2);
  EXPECT_EQ(t.checkpoint_timeout, std::chrono::minutes(2));
  EXPECT_EQ(t.stop_grace, std::chrono::seconds(30));
  json back = json::object();
  TaskToRequest(t, back);
  TaskSpec again;
  ASSERT_EQ(Parse(back, &again), "");
  EXPECT_EQ(again, t);
  EXPECT_EQ(back["checkpoint_signal"], "SIGUSR2");
}

TEST(TaskRequestTest, DefaultsAndNoCommand) {
  TaskSpec t;
  ASSERT_EQ(Parse(json{{"command", {"sleep", "1"}}}, &t), "");
  EXPECT_EQ(t.checkpoint_signal, SIGUSR1);
  EXPECT_EQ(t.checkpoint_timeout, std::chrono::seconds(60));
  ASSERT_EQ(Parse(json::object(), &t), "");
  json none = json::object();
  TaskToRequest(TaskSpec{}, none);
  EXPECT_TRUE(none.empty());
}

TEST(TaskRequestTest, BadFieldsAreNamed) {
  auto field = [](const json& body) {
    const std::string e = Parse(body);
    return e.substr(0, e.find(':'));
  };
  EXPECT_EQ(field(json{{"command", "python train.py"}}), "command");
  EXPECT_EQ(field(json{{"command", json::array()}}), "command");
  EXPECT_EQ(field(json{{"command", {"", "x"}}}), "command[0]");
  EXPECT_EQ(field(json{{"command", {"x", 3}}}), "command[1]");
  EXPECT_EQ(field(json{{"command", {std::string("a\0b", 3)}}}), "command[0]");
  EXPECT_EQ(field(json{{"env", {{"A", "1"}}}}), "env");  // without a command
  EXPECT_EQ(field(json{{"command", {"x"}}, {"env", {{"CUDA_VISIBLE_DEVICES", "0"}}}}), "env.CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(field(json{{"command", {"x"}}, {"env", {{"GPUPOOL_JOB_ID", "1"}}}}), "env.GPUPOOL_JOB_ID");
  EXPECT_EQ(field(json{{"command", {"x"}}, {"env", {{"1BAD", "1"}}}}), "env.1BAD");
  EXPECT_EQ(field(json{{"command", {"x"}}, {"env", {{"A", 1}}}}), "env.A");
  EXPECT_EQ(field(json{{"command", {"x"}}, {"working_dir", "relative"}}), "working_dir");
  EXPECT_EQ(field(json{{"command", {"x"}}, {"checkpoint_signal", "SIGKILL"}}), "checkpoint_signal");
  EXPECT_EQ(field(json{{"command", {"x"}}, {"checkpoint_timeout", "0s"}}), "checkpoint_timeout");
  EXPECT_EQ(field(json{{"command", {"x"}}, {"stop_grace", 5}}), "stop_grace");
  EXPECT_NE(Parse(json{{"command", {"x"}}, {"checkpoint_signal", "HUP?"}}).find("SIGUSR1"), std::string::npos);
}

TEST(TaskRequestTest, TheContainerFieldsAreReadAndWrittenBackOnlyWhenGiven) {
  TaskSpec t;
  ASSERT_EQ(Parse(json{{"command", {"x"}}, {"image", "/images/pytorch"}, {"shm_gib", 8}, {"network", "isolated"}}, &t),
            "");
  EXPECT_EQ(t.image, "/images/pytorch");
  EXPECT_EQ(t.shm_mib, 8192);
  EXPECT_TRUE(t.network_isolated);
  json back = json::object();
  TaskToRequest(t, back);
  EXPECT_EQ(back["image"], "/images/pytorch");
  EXPECT_EQ(back["shm_gib"], 8.0);
  EXPECT_EQ(back["network"], "isolated");
  TaskSpec again;
  ASSERT_EQ(Parse(back, &again), "");
  EXPECT_EQ(again, t);
  // Fractions of a GiB, "host", the host network.
  ASSERT_EQ(Parse(json{{"command", {"x"}}, {"image", "host"}, {"shm_gib", 0.5}, {"network", "host"}}, &t), "");
  EXPECT_EQ(t.image, "host");
  EXPECT_EQ(t.shm_mib, 512);
  EXPECT_FALSE(t.network_isolated);
  // Defaults: none of them written back.
  ASSERT_EQ(Parse(json{{"command", {"x"}}}, &t), "");
  EXPECT_EQ(t.image, "");
  EXPECT_EQ(t.shm_mib, 1024);
  EXPECT_FALSE(t.network_isolated);
  json plain = json::object();
  TaskToRequest(t, plain);
  EXPECT_FALSE(plain.contains("image"));
  EXPECT_FALSE(plain.contains("shm_gib"));
  EXPECT_FALSE(plain.contains("network"));
}

TEST(TaskRequestTest, BadContainerFieldsAreNamed) {
  auto error = [](const json& extra) {
    json body = {{"command", {"x"}}};
    body.update(extra);
    return Parse(body);
  };
  auto field = [&](const json& extra) {
    const std::string e = error(extra);
    return e.substr(0, e.find(':'));
  };
  EXPECT_EQ(field(json{{"image", "relative/path"}}), "image");
  EXPECT_EQ(field(json{{"image", ""}}), "image");
  EXPECT_EQ(field(json{{"image", "docker.io/pytorch"}}), "image");
  EXPECT_EQ(field(json{{"image", std::string("/a\0b", 4)}}), "image");
  EXPECT_EQ(field(json{{"image", "/" + std::string(4096, 'a')}}), "image");
  EXPECT_EQ(field(json{{"image", 7}}), "image");
  EXPECT_NE(error(json{{"image", "pytorch"}}).find("\"host\" or an absolute path"), std::string::npos);
  EXPECT_EQ(field(json{{"shm_gib", 0}}), "shm_gib");
  EXPECT_EQ(field(json{{"shm_gib", -1}}), "shm_gib");
  EXPECT_EQ(field(json{{"shm_gib", 65}}), "shm_gib");
  EXPECT_EQ(field(json{{"shm_gib", 0.0001}}), "shm_gib");  // below 1 MiB
  EXPECT_EQ(field(json{{"shm_gib", "1G"}}), "shm_gib");
  EXPECT_EQ(error(json{{"shm_gib", 64}}), "");
  EXPECT_EQ(field(json{{"network", "bridge"}}), "network");
  EXPECT_EQ(field(json{{"network", true}}), "network");
  EXPECT_NE(error(json{{"network", "none"}}).find("known: host, isolated"), std::string::npos);
  // Only with a command, like the other task keys.
  for (const char* key : {"image", "shm_gib", "network"}) {
    json body = {{key, std::string(key) == "shm_gib" ? json(2) : json("host")}};
    const std::string e = Parse(body);
    EXPECT_EQ(e.substr(0, e.find(':')), key) << e;
    EXPECT_NE(e.find("set command"), std::string::npos) << e;
  }
}

TEST(TaskRequestTest, ImageProblem) {
  EXPECT_EQ(ImageProblem("host"), "");
  EXPECT_EQ(ImageProblem("/srv/images/cuda-12"), "");
  EXPECT_NE(ImageProblem(""), "");
  EXPECT_NE(ImageProblem("Host"), "");
  EXPECT_NE(ImageProblem("images/cuda"), "");
}

}  // namespace
}  // namespace gpupool
