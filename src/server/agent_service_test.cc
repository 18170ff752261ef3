#include "src/server/agent_service.h"

#include <gtest/gtest.h>

#include "src/api/tenant_ids.h"
#include "src/model/gpu_catalog.h"
#include "src/server/server_config.h"
#include "tests/engine_harness.h"

namespace gpupool {
namespace {

TEST(AgentServiceTest, ScrubOrdersSurviveTheirRecord) {
  AgentService a(std::chrono::seconds(5), std::chrono::seconds(30), nullptr);
  ASSERT_TRUE(a.LoadScrubs(R"({"version":1,"nodes":{"2":[[17,5],[20,2]],"0":[[3,1]]}})", 3).has_value());
  AgentService b(std::chrono::seconds(5), std::chrono::seconds(30), nullptr);
  ASSERT_TRUE(b.LoadScrubs(a.EncodeScrubs(), 3).has_value());
  EXPECT_EQ(b.EncodeScrubs(), a.EncodeScrubs());
  EXPECT_NE(a.EncodeScrubs().find("[17,5]"), std::string::npos) << a.EncodeScrubs();
  // Damaged records are errors, not crashes.
  for (const char* bad : {"", "[]", R"({"version":2,"nodes":{}})", R"({"version":1,"nodes":{"9":[[1,1]]}})",
                          R"({"version":1,"nodes":{"x":[[1,1]]}})", R"({"version":1,"nodes":{"0":[[1]]}})",
                          R"({"version":1,"nodes":{"0":[["a",1]]}})"}) {
    AgentService c(std::chrono::seconds(5), std::chrono::seconds(30), nullptr);
    EXPECT_FALSE(c.LoadScrubs(bad, 3).has_value()) << bad;
  }
}

using namespace std::chrono_literals;

// An engine with pools `secure` (H100 only, isolation required) and `open`
// (anything else), tenants team-a (0) and team-b (1), and an AgentService
// that sees every event.
class AgentServiceRegisterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto base = h.sink;
    h.sink = [this, base](const Event& e) {
      base(e);
      agents.OnEvent(e, h.engine->state());
    };
    secure = h.Pool("secure", PoolSelector{GpuModelMask{1} << *Catalog::Builtin().Find("H100"), {}});
    open = h.Pool("open");
    agents.set_isolation_required({true, false});
    h.Tenant("team-a", secure, 0, 8);
    h.Tenant("team-b", secure, 0, 8);
    h.Quota(1, open, 0, 8);
  }

  static RegisterRequest Node(const std::string& name, const std::string& model, const std::string& isolation,
                              bool given = true) {
    RegisterRequest r;
    r.node = name;
    r.backend = "fake";
    r.cpu_milli = 64000;
    r.memory_mib = 1 << 19;
    r.gpus = {GpuDevice{0, "GPU-" + name, "NVIDIA " + model, model, 81920, false, {}, {}}};
    r.isolation = isolation;
    r.isolation_given = given;
    return r;
  }
  AgentService::Outcome Register(const RegisterRequest& r) { return agents.Register(*h.engine, r, {}, h.now, h.sink); }

  testing::EngineHarness h{EngineConfig{}};
  AgentService agents{5s, 30s, nullptr};
  PoolId secure = 0, open = 0;
};

TEST_F(AgentServiceRegisterTest, APoolThatRequiresIsolationRefusesAnAgentWithout) {
  const auto refused = Register(Node("h100-0", "H100", "none"));
  ASSERT_TRUE(refused.error.has_value());
  EXPECT_EQ(refused.error->http_status, 400);
  EXPECT_EQ(refused.error->field, "isolation");
  EXPECT_NE(refused.error->message.find("pool 'secure' requires isolated tasks; this agent runs them as plain "
                                        "processes"),
            std::string::npos)
      << refused.error->message;
  EXPECT_EQ(h.engine->state().cluster.node_count(), 0);  // it did not join
  EXPECT_TRUE(h.Of<NodeAdded>().empty());
  // An agent older than the field is refused the same way.
  EXPECT_TRUE(Register(Node("h100-0", "H100", "none", /*given=*/false)).error.has_value());
  // With containers it joins; a plain-process agent joins a pool that does not require them.
  const auto ok = Register(Node("h100-0", "H100", "container"));
  ASSERT_FALSE(ok.error.has_value()) << ok.error->message;
  EXPECT_EQ(h.engine->state().cluster.node(0).pool, secure);
  const auto t4 = Register(Node("t4-0", "T4", "none"));
  ASSERT_FALSE(t4.error.has_value()) << t4.error->message;
  EXPECT_EQ(h.engine->state().cluster.node(1).pool, open);
  // A registered node whose agent now runs plain processes is refused too.
  const auto again = Register(Node("h100-0", "H100", "none"));
  ASSERT_TRUE(again.error.has_value());
  EXPECT_EQ(again.error->field, "isolation");
}

TEST_F(AgentServiceRegisterTest, TaskOrdersCarryTheContainer) {
  ASSERT_FALSE(Register(Node("h100-0", "H100", "container")).error.has_value());
  JobSpec spec = h.Spec(1, 1);
  spec.demand.cpu_milli = 2500;
  spec.demand.memory_mib = 6144;
  spec.task.command = {"python", "train.py"};
  spec.task.image = "/images/pytorch";
  spec.task.shm_mib = 2048;
  spec.task.network_isolated = true;
  const JobId id = h.Submit(spec);
  ASSERT_EQ(h.job(id).state, JobState::kRunning);
  const AgentReply r = agents.Desired(h.engine->state(), 0);
  ASSERT_EQ(r.tasks.size(), 1u);
  const TaskOrder& t = r.tasks[0];
  EXPECT_EQ(t.tenant, "team-b");
  EXPECT_EQ(t.image, "/images/pytorch");
  EXPECT_EQ(t.shm_mib, 2048);
  EXPECT_TRUE(t.network_isolated);
  EXPECT_EQ(t.memory_mib, 6144);
  EXPECT_EQ(t.cpu_milli, 2500);
  EXPECT_EQ(t.uid, 1'000'000 + 65'536);  // team-b is tenant 1
  EXPECT_EQ(t.uid_count, 65'536);
  EXPECT_EQ(std::make_pair(t.uid, t.uid_count), TenantUidRange(1));
}

// A full disk refused events whose revision of the node was made and never
// published; the core went back to the journal and, in the same pass,
// decided the same again: without a renewal no revision would be new, and
// a watch holding the published one would wait for a change that came.
// (ServerCore::RollBack renews; the state here is simply the same.)
TEST_F(AgentServiceRegisterTest, AfterARollBackTheNextRevisionIsNewEvenWhereTheStateIsTheSame) {
  ASSERT_FALSE(Register(Node("h100-0", "H100", "container")).error.has_value());
  JobSpec spec = h.Spec(1, 1);
  spec.task.command = {"train"};
  const JobId id = h.Submit(spec);
  const auto made = agents.TakeChanges(h.engine->state());
  ASSERT_EQ(made.size(), 1u);
  agents.Rebuild(h.engine->state());
  EXPECT_TRUE(agents.TakeChanges(h.engine->state()).empty()) << "the same state: no revision without a renewal";
  agents.Rebuild(h.engine->state());
  agents.RenewRevisions();
  const auto renewed = agents.TakeChanges(h.engine->state());
  ASSERT_EQ(renewed.size(), 1u);
  EXPECT_EQ(renewed[0]->revision, made[0]->revision + 1);
  ASSERT_EQ(renewed[0]->tasks.size(), 1u);
  EXPECT_EQ(renewed[0]->tasks[0].order.job, id);
  EXPECT_EQ(renewed[0]->tasks[0].revision, made[0]->tasks[0].revision);  // above what an older watch holds
  EXPECT_TRUE(agents.TakeChanges(h.engine->state()).empty());  // renewed once
}

TEST_F(AgentServiceRegisterTest, AnAgentOlderThanTheContainerFieldsGetsNone) {
  ASSERT_FALSE(Register(Node("t4-0", "T4", "none", /*given=*/false)).error.has_value());
  JobSpec spec = h.Spec(1, 1);
  spec.task.command = {"sleep", "1000"};
  spec.task.image = "host";
  spec.task.network_isolated = true;
  const JobId id = h.Submit(spec);
  ASSERT_EQ(h.job(id).state, JobState::kRunning);
  const AgentReply r = agents.Desired(h.engine->state(), 0);
  ASSERT_EQ(r.tasks.size(), 1u);
  EXPECT_EQ(r.tasks[0].image, "");
  EXPECT_FALSE(r.tasks[0].network_isolated);
  EXPECT_EQ(r.tasks[0].uid_count, 0);
  const nlohmann::json wire = ToJson(r);
  for (const char* key : {"image", "shm_mib", "network_isolated", "memory_mib", "cpu_milli", "uid", "uid_count"}) {
    EXPECT_FALSE(wire["tasks"][0].contains(key)) << key << " in " << wire.dump();
  }
  // The same agent upgraded (it reports its isolation) gets them.
  ASSERT_FALSE(Register(Node("t4-0", "T4", "none")).error.has_value());
  const AgentReply upgraded = agents.Desired(h.engine->state(), 0);
  ASSERT_EQ(upgraded.tasks.size(), 1u);
  EXPECT_EQ(upgraded.tasks[0].image, "host");
  EXPECT_EQ(upgraded.tasks[0].uid, TenantUidRange(1).first);
}

// The pool label of the agent's metrics: only an agent that registered
// with metrics_url (one that knows AgentReply.pool) is told its pool.
TEST_F(AgentServiceRegisterTest, TheReplyNamesThePoolToAnAgentThatKnowsIt) {
  RegisterRequest old = Node("t4-0", "T4", "none");
  ASSERT_FALSE(Register(old).error.has_value());
  EXPECT_EQ(agents.Desired(h.engine->state(), 0).pool, "");
  EXPECT_FALSE(ToJson(agents.Desired(h.engine->state(), 0)).contains("pool"));
  RegisterRequest now = old;
  now.metrics_url = "http://t4-0:9400/metrics";
  now.metrics_url_given = true;
  const auto ok = Register(now);
  ASSERT_FALSE(ok.error.has_value());
  EXPECT_EQ(ok.reply.pool, "open");
  EXPECT_EQ(agents.Desired(h.engine->state(), 0).pool, "open");
}

TEST(ServerConfigTest, DefaultImageAndPoolIsolation) {
  constexpr const char* kText = R"(name: c
pools:
  - name: secure
    isolation: required
  - name: open
    isolation: optional
  - name: plain
server:
  default_image: /srv/images/base
)";
  auto s = ParseServerConfig(kText, "cfg.yaml", ".");
  ASSERT_TRUE(s.has_value()) << s.error().message;
  EXPECT_EQ(s->server.default_image, "/srv/images/base");
  ASSERT_EQ(s->pools.size(), 3u);
  EXPECT_TRUE(s->pools[0].isolation_required);
  EXPECT_FALSE(s->pools[1].isolation_required);
  EXPECT_FALSE(s->pools[2].isolation_required);
  auto error = [&](const std::string& from, const std::string& to) {
    std::string text = kText;
    text.replace(text.find(from), from.size(), to);
    auto r = ParseServerConfig(text, "cfg.yaml", ".");
    return r ? std::string("(parsed)") : r.error().message;
  };
  EXPECT_EQ(error("/srv/images/base", "host"), "(parsed)");
  EXPECT_NE(error("/srv/images/base", "images/base").find("server.default_image: expected \"host\" or an absolute path"),
            std::string::npos);
  EXPECT_NE(error("isolation: required", "isolation: maybe").find("pools[0].isolation: unknown isolation 'maybe'"),
            std::string::npos);
  // Without it, no default image.
  auto none = ParseServerConfig("name: c\npools:\n  - name: p\n", "cfg.yaml", ".");
  ASSERT_TRUE(none.has_value()) << none.error().message;
  EXPECT_EQ(none->server.default_image, "");
  EXPECT_FALSE(none->pools[0].isolation_required);
}

}  // namespace
}  // namespace gpupool
