#include "src/server/watch_hub.h"

#include <gtest/gtest.h>

#include <thread>

namespace gpupool {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// A watch's exchange and the answer it got, if any.
struct Call {
  http::ExchangePtr ex;
  std::shared_ptr<std::optional<http::Response>> got = std::make_shared<std::optional<http::Response>>();
  int status() const { return got->has_value() ? (*got)->status : 0; }
  json body() const { return json::parse((*got)->body); }
};

Call Start() {
  Call c;
  c.ex = std::make_shared<http::Exchange>(http::Request{}, [got = c.got](http::Exchange& e) { *got = e.TakeResponse(); });
  return c;
}

NodeDesiredPtr Revision(const NodeDesired* was, std::vector<JobId> jobs, std::string session = "s") {
  NodeDesired d;
  d.node = "n";
  d.node_index = 0;
  d.session = std::move(session);
  d.heartbeat_interval_ms = 30000;
  for (JobId j : jobs) {
    DesiredTask t;
    t.order.job = j;
    t.order.task.command = {"true"};
    d.tasks.push_back(t);
  }
  return NextRevision(was, std::move(d));
}

WatchRequest Ask(std::string incarnation, int64_t revision, int64_t wait_ms = 10000) {
  return WatchRequest{kAgentProtocol, "n", "s", std::move(incarnation), revision, wait_ms};
}

WatchHubOptions Options() {
  WatchHubOptions o;
  o.sweep_every = 10ms;
  return o;
}

bool WaitAnswered(const Call& c) {
  for (int i = 0; i < 500 && c.status() == 0; ++i) std::this_thread::sleep_for(2ms);
  return c.status() != 0;
}

TEST(WatchHubTest, AHeldWatchIsAnsweredWithTheChangesOfTheNextRevision) {
  WatchHub hub("inc", Options());
  Call early = Start();
  hub.Watch(Ask("inc", 0), early.ex);
  EXPECT_EQ(early.status(), 503);  // nothing published yet
  NodeDesiredPtr r1 = Revision(nullptr, {1});
  hub.Publish({r1});
  Call held = Start();
  hub.Watch(Ask("inc", 1), held.ex);
  EXPECT_EQ(held.status(), 0);
  EXPECT_EQ(hub.stats().held, 1);
  NodeDesiredPtr r2 = Revision(r1.get(), {1, 2});
  hub.Publish({r2});
  ASSERT_EQ(held.status(), 200);
  const json b = held.body();
  EXPECT_EQ(b["revision"], 2);
  EXPECT_EQ(b["since"], 1);
  EXPECT_EQ(b["full"], false);
  ASSERT_EQ(b["tasks"].size(), 1u);  // only the new task; both keys
  EXPECT_EQ(b["tasks"][0]["job"], 2);
  EXPECT_EQ(b["task_keys"].size(), 2u);
  EXPECT_EQ(hub.stats().held, 0);
}

TEST(WatchHubTest, ALostAnswerIsRecoveredByTheRevisionTheAgentStillNames) {
  WatchHub hub("inc", Options());
  NodeDesiredPtr r1 = Revision(nullptr, {1});
  NodeDesiredPtr r2 = Revision(r1.get(), {1, 2});
  NodeDesiredPtr r3 = Revision(r2.get(), {2, 3});
  hub.Publish({r1});
  hub.Publish({r2});
  hub.Publish({r3});
  Call c = Start();
  hub.Watch(Ask("inc", 1), c.ex);  // revision 2's answer never reached it
  ASSERT_EQ(c.status(), 200);
  const json b = c.body();
  EXPECT_EQ(b["revision"], 3);
  EXPECT_EQ(b["since"], 1);
  EXPECT_EQ(b["tasks"].size(), 2u);  // jobs 2 and 3, both after revision 1
}

TEST(WatchHubTest, ARevisionFromTheFutureOrAnotherIncarnationGetsTheWholeState) {
  WatchHub hub("inc", Options());
  NodeDesiredPtr r1 = Revision(nullptr, {1, 2});
  hub.Publish({r1});
  for (const WatchRequest& w : {Ask("inc", 50), Ask("old-server", 1), Ask("", 0)}) {
    Call c = Start();
    hub.Watch(w, c.ex);
    ASSERT_EQ(c.status(), 200) << w.incarnation << " " << w.revision;
    const json b = c.body();
    EXPECT_EQ(b["full"], true);
    EXPECT_EQ(b["incarnation"], "inc");
    EXPECT_EQ(b["tasks"].size(), 2u);
  }
  EXPECT_EQ(hub.stats().resyncs, 3);
}

TEST(WatchHubTest, HoldsEndUnchangedAndWrongSessionsAndUnknownNodesAreRefused) {
  WatchHubOptions o = Options();
  o.max_hold = 30ms;  // caps what the watch asks for
  WatchHub hub("inc", o);
  hub.Publish({Revision(nullptr, {1})});
  Call now = Start();
  hub.Watch(Ask("inc", 1, 0), now.ex);
  ASSERT_EQ(now.status(), 200);
  EXPECT_EQ(now.body(), json::parse(R"({"incarnation":"inc","revision":1,"changed":false})"));
  Call held = Start();
  hub.Watch(Ask("inc", 1), held.ex);
  ASSERT_TRUE(WaitAnswered(held));
  EXPECT_EQ(held.body()["changed"], false);

  WatchRequest other = Ask("inc", 1);
  other.session = "someone-else";
  Call c409 = Start();
  hub.Watch(other, c409.ex);
  EXPECT_EQ(c409.status(), 409);
  other = Ask("inc", 1);
  other.node = "unknown";
  Call c404 = Start();
  hub.Watch(other, c404.ex);
  EXPECT_EQ(c404.status(), 404);
}

TEST(WatchHubTest, ASecondWatchReplacesTheFirstAndACancelledOneIsDropped) {
  WatchHub hub("inc", Options());
  hub.Publish({Revision(nullptr, {1})});
  Call first = Start(), second = Start();
  hub.Watch(Ask("inc", 1), first.ex);
  hub.Watch(Ask("inc", 1), second.ex);
  ASSERT_EQ(first.status(), 200);
  EXPECT_EQ(first.body()["changed"], false);
  EXPECT_EQ(second.status(), 0);
  EXPECT_EQ(hub.stats().held, 1);
  second.ex->Cancel(http::Response{});  // the client went away
  EXPECT_EQ(hub.stats().held, 0);
}

TEST(WatchHubTest, AFloodOfReconnectsIsRateLimitedPerNode) {
  WatchHubOptions o = Options();
  o.burst = 3;
  o.refill_per_s = 0.001;
  WatchHub hub("inc", o);
  hub.Publish({Revision(nullptr, {1})});
  int ok = 0, limited = 0;
  for (int i = 0; i < 10; ++i) {
    Call c = Start();
    hub.Watch(Ask("another-run", 1), c.ex);  // a resync each time
    ok += c.status() == 200;
    limited += c.status() == 429;
  }
  EXPECT_EQ(ok, 3);
  EXPECT_EQ(limited, 7);
  EXPECT_EQ(hub.stats().limited, 7);
  // A well-behaved watch (at the latest revision, none held) spends nothing.
  Call c = Start();
  hub.Watch(Ask("inc", 1, 0), c.ex);
  EXPECT_EQ(c.status(), 200);
}

}  // namespace
}  // namespace gpupool
