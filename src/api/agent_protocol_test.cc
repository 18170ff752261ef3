#include "src/api/agent_protocol.h"

#include <gtest/gtest.h>

#include "src/api/agent_wire.h"
#include "src/api/tenant_ids.h"

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
  // Read as an agent of protocol 1 read (unknown keys refused), the key is named.
  auto unknown = ParseHeartbeatRequest(
      json::parse(R"({"node":"n","session":"s","tasks":[{"job":1,"phase":"running","x":1}]})"), UnknownKeys::kRefuse);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error.field, "tasks[0].x");
  auto phase = ParseHeartbeatRequest(json::parse(R"({"node":"n","session":"s","tasks":[{"job":1,"phase":"sleeping"}]})"));
  ASSERT_FALSE(phase.ok());
  EXPECT_EQ(phase.error.field, "tasks[0].phase");
  EXPECT_NE(phase.error.message.find("start_failed"), std::string::npos);
  auto util = ParseHeartbeatRequest(json::parse(R"({"node":"n","session":"s","gpus":[{"index":0,"util_pct":140}]})"));
  ASSERT_FALSE(util.ok());
  EXPECT_EQ(util.error.field, "gpus[0].util_pct");
  // A log chunk holds at most agent_wire::kMaxLogChunkBytes (the upload limit of one heartbeat's chunk).
  json chunk = {{"node", "n"}, {"session", "s"}, {"logs", json::array({{{"job", 1}, {"data", std::string(agent_wire::kMaxLogChunkBytes, 'x')}}})}};
  EXPECT_TRUE(ParseHeartbeatRequest(chunk).ok());
  chunk["logs"][0]["data"] = std::string(agent_wire::kMaxLogChunkBytes + 1, 'x');
  auto big = ParseHeartbeatRequest(chunk);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error.field, "logs[0].data");
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

TEST(AgentProtocolTest, IsolationIsReportedAndOptional) {
  RegisterRequest r;
  r.node = "gpu-7";
  r.cpu_milli = 1000;
  r.memory_mib = 1024;
  r.isolation = "container";
  auto back = ParseRegisterRequest(ToJson(r));
  ASSERT_TRUE(back.ok()) << back.error.message;
  EXPECT_EQ(back.value->isolation, "container");
  EXPECT_TRUE(back.value->isolation_given);
  // An agent older than the field: plain processes, and it says nothing.
  auto old = ParseRegisterRequest(json::parse(R"({"node":"n","cpu_milli":1,"memory_mib":1})"));
  ASSERT_TRUE(old.ok()) << old.error.message;
  EXPECT_EQ(old.value->isolation, "none");
  EXPECT_FALSE(old.value->isolation_given);
  auto bad = ParseRegisterRequest(json::parse(R"({"node":"n","cpu_milli":1,"memory_mib":1,"isolation":"vm"})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error.field, "isolation");
  EXPECT_NE(bad.error.message.find("known: container, none"), std::string::npos);
}

TEST(AgentProtocolTest, TheMetricsUrlAndPoolAreOptional) {
  RegisterRequest r;
  r.node = "gpu-7";
  r.cpu_milli = 1000;
  r.memory_mib = 1024;
  auto off = ParseRegisterRequest(ToJson(r));  // no listener: an empty URL, still written
  ASSERT_TRUE(off.ok()) << off.error.message;
  EXPECT_EQ(off.value->metrics_url, "");
  EXPECT_TRUE(off.value->metrics_url_given);
  r.metrics_url = "http://gpu-7:9400/metrics";
  auto on = ParseRegisterRequest(ToJson(r));
  ASSERT_TRUE(on.ok()) << on.error.message;
  EXPECT_EQ(on.value->metrics_url, "http://gpu-7:9400/metrics");
  auto old = ParseRegisterRequest(json::parse(R"({"node":"n","cpu_milli":1,"memory_mib":1})"));
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE(old.value->metrics_url_given);
  auto bad = ParseRegisterRequest(json::parse(R"({"node":"n","cpu_milli":1,"memory_mib":1,"metrics_url":"gpu-7:9400"})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error.field, "metrics_url");
  EXPECT_NE(bad.error.message.find("not an http:// or https:// URL"), std::string::npos) << bad.error.message;

  AgentReply reply;
  reply.node_index = 0;
  EXPECT_FALSE(ToJson(reply).contains("pool"));  // what an older agent can parse
  reply.pool = "gpu";
  auto back = ParseAgentReply(ToJson(reply));
  ASSERT_TRUE(back.ok()) << back.error.message;
  EXPECT_EQ(back.value->pool, "gpu");
  auto none = ParseAgentReply(json::parse(R"({"tasks":[]})"));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none.value->pool, "");
}

TEST(AgentProtocolTest, TheContainerFieldsRoundTripAndAreOptional) {
  AgentReply a;
  a.node_index = 0;
  TaskOrder o;
  o.job = 3;
  o.name = "train";
  o.tenant = "team-b";
  o.gpus = {1};
  o.gpu_mode = "whole";
  o.gpu_milli = 1000;
  o.task.command = {"python", "train.py"};
  o.task.image = "/images/pytorch";  // travels beside the task object, not in it
  o.task.shm_mib = 4096;
  o.image = "/images/pytorch";
  o.shm_mib = 4096;
  o.network_isolated = true;
  o.memory_mib = 16384;
  o.cpu_milli = 4000;
  std::tie(o.uid, o.uid_count) = TenantUidRange(1);
  a.tasks = {o};
  const json wire = ToJson(a);
  const json& t = wire["tasks"][0];
  EXPECT_EQ(t["image"], "/images/pytorch");
  EXPECT_EQ(t["shm_mib"], 4096);
  EXPECT_EQ(t["network_isolated"], true);
  EXPECT_EQ(t["memory_mib"], 16384);
  EXPECT_EQ(t["cpu_milli"], 4000);
  EXPECT_EQ(t["uid"], 1'065'536);
  EXPECT_EQ(t["uid_count"], 65'536);
  EXPECT_FALSE(t["task"].contains("image")) << t.dump();  // an older agent refuses unknown task keys
  EXPECT_FALSE(t["task"].contains("shm_gib")) << t.dump();
  auto back = ParseAgentReply(wire);
  ASSERT_TRUE(back.ok()) << back.error.field << ": " << back.error.message;
  const TaskOrder& b = back.value->tasks[0];
  EXPECT_EQ(b.image, o.image);
  EXPECT_EQ(b.shm_mib, o.shm_mib);
  EXPECT_TRUE(b.network_isolated);
  EXPECT_EQ(b.memory_mib, o.memory_mib);
  EXPECT_EQ(b.cpu_milli, o.cpu_milli);
  EXPECT_EQ(b.uid, o.uid);
  EXPECT_EQ(b.uid_count, o.uid_count);
  EXPECT_EQ(ToJson(*back.value), wire);

  // At their defaults none is written, so a reply to an older agent has
  // only the keys it knows; an older server's reply reads with the defaults.
  TaskOrder plain = o;
  plain.task = TaskSpec{};
  plain.task.command = {"sleep", "1"};
  plain.image.clear();
  plain.shm_mib = 1024;
  plain.network_isolated = false;
  plain.memory_mib = plain.cpu_milli = plain.uid = plain.uid_count = 0;
  a.tasks = {plain};
  const json old_shape = ToJson(a);
  for (const char* key : {"image", "shm_mib", "network_isolated", "memory_mib", "cpu_milli", "uid", "uid_count"}) {
    EXPECT_FALSE(old_shape["tasks"][0].contains(key)) << key;
  }
  auto old = ParseAgentReply(json::parse(
      R"({"node_index":0,"session":"s","heartbeat_interval_ms":5000,"fence_after_ms":0,"tasks":[{"job":1,"replica":0,)"
      R"("attempt":1,"name":"x","tenant":"t","action":"run","idle_notice":false,"gpus":[0],"gpu_mode":"whole",)"
      R"("gpu_milli":1000,"gpu_memory_mib":0,"task":{"command":["sleep","1"]}}],"scrubs":[],"logs":[]})"));
  ASSERT_TRUE(old.ok()) << old.error.field << ": " << old.error.message;
  const TaskOrder& d = old.value->tasks[0];
  EXPECT_EQ(d.image, "");
  EXPECT_EQ(d.shm_mib, 1024);
  EXPECT_FALSE(d.network_isolated);
  EXPECT_EQ(d.memory_mib, 0);
  EXPECT_EQ(d.cpu_milli, 0);
  EXPECT_EQ(d.uid, 0);
  EXPECT_EQ(d.uid_count, 0);
}

TEST(AgentProtocolTest, BadContainerFieldsNameTheField) {
  auto reply = [](const std::string& extra) {
    return ParseAgentReply(json::parse(R"({"tasks":[{"job":1,"action":"run","task":{"command":["x"]})" + extra +
                                       "}]}"));
  };
  EXPECT_EQ(reply(R"(,"image":"relative")").error.field, "tasks[0].image");
  EXPECT_EQ(reply(R"(,"shm_mib":0)").error.field, "tasks[0].shm_mib");
  EXPECT_EQ(reply(R"(,"network_isolated":"yes")").error.field, "tasks[0].network_isolated");
  EXPECT_EQ(reply(R"(,"memory_mib":-1)").error.field, "tasks[0].memory_mib");
  EXPECT_EQ(reply(R"(,"uid":1000000)").error.field, "tasks[0].uid_count");  // a range needs its size
  EXPECT_EQ(reply(R"(,"uid":2147480000,"uid_count":65536)").error.field, "tasks[0].uid_count");  // past 2^31
  EXPECT_TRUE(reply(R"(,"uid":1000000,"uid_count":65536,"image":"host")").ok());
}

TEST(AgentProtocolTest, TenantUidRangesAreDisjointAndBelow2To31) {
  EXPECT_EQ(TenantUidRange(0), (std::pair<int64_t, int64_t>{1'000'000, 65'536}));
  EXPECT_EQ(TenantUidRange(1).first, TenantUidRange(0).first + TenantUidRange(0).second);
  const auto [last, count] = TenantUidRange(static_cast<TenantId>(kMaxUidTenants - 1));
  EXPECT_LE(last + count, int64_t{1} << 31);
  EXPECT_GT(last + 2 * count, int64_t{1} << 31);  // one more would not fit
  EXPECT_EQ(kMaxUidTenants, 32'752);
  EXPECT_DEATH(TenantUidRange(static_cast<TenantId>(kMaxUidTenants)), "has no uid range");
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

// Issue 15: a heartbeat's GPU sample may carry the GPU's MIG instances; an
// older agent's heartbeat has none, and a GPU not in MIG mode sends none.
TEST(AgentProtocolTest, HeartbeatsCarryMigInstancesOptionally) {
  HeartbeatRequest h;
  h.node = "n";
  h.session = "s";
  h.gpus = {GpuSample{}, GpuSample{}};
  h.gpus[1].index = 1;
  h.mig[1] = {MigInstance{"MIG-a", "3g.40gb", 4, 40448}};
  const json j = ToJson(h);
  EXPECT_FALSE(j["gpus"][0].contains("mig"));
  EXPECT_EQ(j["gpus"][1]["mig"][0]["uuid"], "MIG-a");
  auto back = ParseHeartbeatRequest(j);
  ASSERT_TRUE(back.ok()) << back.error.message;
  ASSERT_EQ(back.value->mig.size(), 1u);
  ASSERT_EQ(back.value->mig.at(1).size(), 1u);
  EXPECT_EQ(back.value->mig.at(1)[0].profile, "3g.40gb");
  EXPECT_EQ(back.value->mig.at(1)[0].start, 4);
  EXPECT_EQ(back.value->mig.at(1)[0].memory_mib, 40448);
  auto older = ParseHeartbeatRequest(json::parse(R"({"node":"n","session":"s","gpus":[{"index":0}]})"));
  ASSERT_TRUE(older.ok());
  EXPECT_TRUE(older.value->mig.empty());
  auto empty = ParseHeartbeatRequest(json::parse(R"({"node":"n","session":"s","gpus":[{"index":0,"mig":[]}]})"));
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty.value->mig.at(0).empty());  // in MIG mode, no instance
  auto bad = ParseHeartbeatRequest(
      json::parse(R"({"node":"n","session":"s","gpus":[{"index":0,"mig":[{"uuid":"MIG-a","start":99}]}]})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error.field, "gpus[0].mig[0].start");
}

TEST(AgentProtocolTest, UnknownFieldsAreIgnoredSoEitherSideMayBeNewer) {
  // A newer agent's fields at every level of a heartbeat.
  auto hb = ParseHeartbeatRequest(json::parse(
      R"({"node":"n","session":"s","protocol":3,"future":{"a":1},
          "gpus":[{"index":0,"util_pct":5,"new_sensor":7}],
          "tasks":[{"job":1,"phase":"running","cgroup_stats":[1,2]}]})"));
  ASSERT_TRUE(hb.ok()) << hb.error.field << ": " << hb.error.message;
  EXPECT_EQ(hb.value->protocol, 3);
  ASSERT_EQ(hb.value->tasks.size(), 1u);
  EXPECT_EQ(hb.value->tasks[0].phase, TaskPhase::kRunning);
  // A newer server's fields in a reply and in a task order.
  auto reply = ParseAgentReply(json::parse(
      R"({"node_index":0,"protocol":3,"incarnation":"i","revision":4,"hint":"x",
          "tasks":[{"job":1,"action":"run","priority_class":"gold","task":{"command":["x"],"new":true}}]})"));
  ASSERT_TRUE(reply.ok()) << reply.error.field << ": " << reply.error.message;
  ASSERT_EQ(reply.value->tasks.size(), 1u);
  EXPECT_EQ(reply.value->tasks[0].task.command, std::vector<std::string>{"x"});
  // Known fields keep their checks.
  auto bad = ParseAgentReply(json::parse(R"({"revision":-1,"extra":1})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error.field, "revision");
}

TEST(AgentProtocolTest, AnAbsentProtocolIsOneAndProtocolOneMessagesHaveNoNewKeys) {
  auto old = ParseRegisterRequest(json::parse(R"({"node":"n","cpu_milli":1,"memory_mib":1})"));
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old.value->protocol, 1);
  RegisterRequest r = *old.value;
  EXPECT_FALSE(ToJson(r).contains("protocol"));  // a server of protocol 1 refused the key
  r.protocol = 2;
  EXPECT_EQ(ToJson(r)["protocol"], 2);
  auto zero = ParseRegisterRequest(json::parse(R"({"node":"n","cpu_milli":1,"memory_mib":1,"protocol":0})"));
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.error.field, "protocol");

  // A reply to an agent of protocol 1 (protocol 0: not written) reads back
  // under that agent's strict rule; one of protocol 2 carries its keys.
  AgentReply a;
  a.node_index = 1;
  a.session = "s";
  a.tasks = {TaskOrder{}};
  a.tasks[0].job = 5;
  a.tasks[0].task.command = {"true"};
  const json one = ToJson(a);
  for (const char* key : {"protocol", "incarnation", "revision"}) EXPECT_FALSE(one.contains(key)) << key;
  auto strict = ParseAgentReply(one, UnknownKeys::kRefuse);
  ASSERT_TRUE(strict.ok()) << strict.error.field << ": " << strict.error.message;
  EXPECT_TRUE(strict.value->has_desired);
  a.protocol = 2;
  a.incarnation = "inc";
  a.revision = 9;
  a.has_desired = false;  // a heartbeat's reply: the watch carries the desired state
  const json two = ToJson(a);
  EXPECT_FALSE(two.contains("tasks"));
  EXPECT_FALSE(two.contains("scrubs"));
  auto back = ParseAgentReply(two);
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back.value->has_desired);
  EXPECT_EQ(back.value->revision, 9);
  EXPECT_EQ(back.value->incarnation, "inc");
}

TEST(AgentProtocolTest, WatchesAndReportsRoundTrip) {
  WatchRequest w{2, "gpu-7", "s-1", "inc-1", 17, 25000};
  auto wb = ParseWatchRequest(ToJson(w));
  ASSERT_TRUE(wb.ok()) << wb.error.message;
  EXPECT_EQ(ToJson(*wb.value), ToJson(w));
  auto no_session = ParseWatchRequest(json::parse(R"({"node":"n"})"));
  ASSERT_FALSE(no_session.ok());
  EXPECT_EQ(no_session.error.field, "session");

  WatchReply r;
  r.incarnation = "inc-1";
  r.revision = 18;
  r.changed = true;
  r.since = 17;
  r.session = "s-1";
  r.pool = "gpu";
  r.heartbeat_interval_ms = 30000;
  r.fence_after_ms = 90000;
  r.tasks = {TaskOrder{}};
  r.tasks[0].job = 3;
  r.tasks[0].task.command = {"true"};
  r.task_keys = {TaskRef{3, 0, 0}, TaskRef{2, 1, 4}};
  r.scrubs = {ScrubOrder{8, {0, 1}}};
  auto rb = ParseWatchReply(ToJson(r));
  ASSERT_TRUE(rb.ok()) << rb.error.field << ": " << rb.error.message;
  EXPECT_EQ(ToJson(*rb.value), ToJson(r));
  EXPECT_EQ(rb.value->task_keys[1], (TaskRef{2, 1, 4}));
  // A hold that ended: only where the agent stands.
  WatchReply same;
  same.incarnation = "inc-1";
  same.revision = 18;
  EXPECT_EQ(ToJson(same), json::parse(R"({"incarnation":"inc-1","revision":18,"changed":false})"));
  auto key = ParseWatchReply(json::parse(R"({"incarnation":"i","revision":1,"changed":true,"task_keys":[[1,2]]})"));
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.error.field, "task_keys[0]");

  TaskReportRequest t;
  t.node = "gpu-7";
  t.session = "s-1";
  TaskReport x;
  x.job = 3;
  x.phase = TaskPhase::kExited;
  x.exit_code = 0;
  t.tasks = {x};
  t.scrubs = {ScrubReport{8, true, 1024, 0.25, ""}};
  t.logs = {LogChunk{3, 0, 0, 0, "done\n"}};
  auto tb = ParseTaskReportRequest(ToJson(t));
  ASSERT_TRUE(tb.ok()) << tb.error.message;
  EXPECT_EQ(ToJson(*tb.value), ToJson(t));
}

// SCALE-7: a task order carries the job's replicas (ascending ids) and its
// resize count; without members neither key is written.
TEST(AgentProtocolTest, TaskMembersRoundTripAndAreCheckedNamingTheField) {
  AgentReply a;
  a.node_index = 0;
  a.session = "s";
  TaskOrder o;
  o.job = 7;
  o.replica = 3;
  o.attempt = 1;
  o.action = TaskAction::kRun;
  o.gpu_mode = "whole";
  o.task.command = {"train"};
  a.tasks = {o};
  EXPECT_FALSE(ToJson(a)["tasks"][0].contains("members"));
  EXPECT_FALSE(ToJson(a)["tasks"][0].contains("generation"));
  o.members = {{1, "node-a"}, {3, "node-b"}};
  o.generation = 2;
  a.tasks = {o};
  const json wire = ToJson(a);
  EXPECT_EQ(wire["tasks"][0]["members"], json::parse(R"([{"replica":1,"node":"node-a"},{"replica":3,"node":"node-b"}])"));
  auto back = ParseAgentReply(wire);
  ASSERT_TRUE(back.ok()) << back.error.field << ": " << back.error.message;
  EXPECT_EQ(back.value->tasks[0], o);
  json bad = wire;
  bad["tasks"][0]["members"] = json::parse(R"([{"replica":3,"node":"b"},{"replica":1,"node":"a"}])");
  auto refused = ParseAgentReply(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error.field, "tasks[0].members[1].replica");
  bad["tasks"][0]["members"] = json::parse(R"([{"replica":1}])");
  refused = ParseAgentReply(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error.field, "tasks[0].members[0].node");
}

}  // namespace
}  // namespace gpupool
