#include "src/api/agent_protocol.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

using nlohmann::json;

TEST(AgentProtocolTest, RegisterRequestRoundTrips) {
  RegisterRequest r;
  r.node = "gpu-7";
  r.backend = "nvml";
  r.node_class = "nvlink";
  r.rack = "rack-3";
  r.cpu_milli = 96000;
  r.memory_mib = 1 << 20;
  GpuDevice g;
  g.index = 0;
  g.uuid = "GPU-1";
  g.product = "NVIDIA A100-SXM4-80GB";
  g.model = "A100-80GB";
  g.memory_mib = 81920;
  g.mig_enabled = true;
  g.mig = {MigInstance{"MIG-1", "3g.40gb", 4, 40192}};
  g.nvlink_peers = {1, 2};
  r.gpus = {g};
  auto back = ParseRegisterRequest(ToJson(r));
  ASSERT_TRUE(back.ok()) << back.error.message;
  EXPECT_EQ(ToJson(*back.value), ToJson(r));
  EXPECT_EQ(back.value->gpus[0].mig[0].start, 4);
}

TEST(AgentProtocolTest, HeartbeatAndReplyRoundTrip) {
  HeartbeatRequest h;
  h.node = "gpu-7";
  h.session = "1795966554419-3";
  h.gpus = {GpuSample{0, 37.5, 1024, 81920, 61, false, "XID 79", {}}};
  TaskReport t;
  t.job = 12;
  t.replica = 1;
  t.attempt = 2;
  t.phase = TaskPhase::kExited;
  t.exit_code = 3;
  t.signal = 0;
  h.tasks = {t};
  h.scrubs = {ScrubReport{44, false, 0, 0.5, "no CUDA device"}};
  h.logs = {LogChunk{12, 1, 2, 100, "hello \xc3\xa9\n"}};
  auto hb = ParseHeartbeatRequest(ToJson(h));
  ASSERT_TRUE(hb.ok()) << hb.error.message;
  EXPECT_EQ(ToJson(*hb.value), ToJson(h));

  AgentReply a;
  a.node_index = 3;
  a.session = "1795966554419-3";
  a.heartbeat_interval_ms = 2000;
  TaskOrder o;
  o.job = 12;
  o.replica = 1;
  o.attempt = 2;
  o.name = "train";
  o.tenant = "team-a";
  o.action = TaskAction::kCheckpoint;
  o.idle_notice = true;
  o.gpus = {4, 5};
  o.gpu_mode = "mig";
  o.gpu_milli = 430;
  o.mig_profile = "3g.40gb";
  o.mig_start = 4;
  o.task.command = {"python", "train.py"};
  o.task.env = {{"A", "1"}};
  o.task.checkpoint_signal = 12;
  a.tasks = {o};
  a.scrubs = {ScrubOrder{44, {4, 5}}};
  a.logs = {LogAck{12, 1, 2, 109}};
  auto back = ParseAgentReply(ToJson(a));
  ASSERT_TRUE(back.ok()) << back.error.field << ": " << back.error.message;
  EXPECT_EQ(ToJson(*back.value), ToJson(a));
  EXPECT_EQ(back.value->tasks[0].task, o.task);
}

TEST(AgentProtocolTest, BadMessagesNameTheField) {
  auto no_session = ParseHeartbeatRequest(json::parse(R"({"node":"n"})"));
  ASSERT_FALSE(no_session.ok());
  EXPECT_EQ(no_session.error.field, "session");
  auto unknown =
      ParseHeartbeatRequest(json::parse(R"({"node":"n","session":"s","tasks":[{"job":1,"phase":"running","x":1}]})"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error.field, "tasks[0].x");
  auto phase = ParseHeartbeatRequest(json::parse(R"({"node":"n","session":"s","tasks":[{"job":1,"phase":"sleeping"}]})"));
  ASSERT_FALSE(phase.ok());
  EXPECT_EQ(phase.error.field, "tasks[0].phase");
  EXPECT_NE(phase.error.message.find("start_failed"), std::string::npos);
  auto util = ParseHeartbeatRequest(json::parse(R"({"node":"n","session":"s","gpus":[{"index":0,"util_pct":140}]})"));
  ASSERT_FALSE(util.ok());
  EXPECT_EQ(util.error.field, "gpus[0].util_pct");
  auto missing = ParseRegisterRequest(json::parse(R"({"node":"n","cpu_milli":1})"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error.field, "memory_mib");
  auto gpu = ParseRegisterRequest(
      json::parse(R"({"node":"n","cpu_milli":1,"memory_mib":1,"gpus":[{"index":0,"memory_mib":1}]})"));
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.error.field, "gpus[0].uuid");
  auto action = ParseAgentReply(json::parse(R"({"tasks":[{"job":1,"action":"dance","task":{"command":["x"]}}]})"));
  ASSERT_FALSE(action.ok());
  EXPECT_EQ(action.error.field, "tasks[0].action");
}

TEST(AgentProtocolTest, SanitizeUtf8KeepsLengthsAndCutsOnlyAnIncompleteTail) {
  EXPECT_EQ(SanitizeUtf8("plain\n"), "plain\n");
  EXPECT_EQ(SanitizeUtf8("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(SanitizeUtf8("a\xff" "b"), "a?b");            // invalid byte
  EXPECT_EQ(SanitizeUtf8("a\xc3" "b"), "a?b");            // lead byte without continuation
  EXPECT_EQ(SanitizeUtf8("\xc0\xaf"), "??");              // overlong
  EXPECT_EQ(SanitizeUtf8("\xed\xa0\x80"), "???");         // a surrogate
  EXPECT_EQ(SanitizeUtf8("ok\xe2\x82"), "ok");            // incomplete at the end: next chunk
  EXPECT_EQ(SanitizeUtf8("ok\xf0\x9f\x98\x80"), "ok\xf0\x9f\x98\x80");
  // Every result is valid JSON text.
  EXPECT_NO_THROW((void)json(SanitizeUtf8("\x80\x81\xfe")).dump());
}

}  // namespace
}  // namespace gpupool
