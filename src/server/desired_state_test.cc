#include "src/server/desired_state.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

DesiredTask Task(JobId job, TaskAction action = TaskAction::kRun) {
  DesiredTask t;
  t.order.job = job;
  t.order.action = action;
  t.order.task.command = {"true"};
  return t;
}

NodeDesired State(std::vector<DesiredTask> tasks) {
  NodeDesired d;
  d.node = "n";
  d.node_index = 0;
  d.session = "s";
  d.heartbeat_interval_ms = 5000;
  d.tasks = std::move(tasks);
  return d;
}

TEST(DesiredStateTest, OnlyWhatChangedGetsTheNewRevision) {
  NodeDesiredPtr r1 = NextRevision(nullptr, State({Task(1), Task(2)}));
  ASSERT_NE(r1, nullptr);
  EXPECT_EQ(r1->revision, 1);
  EXPECT_EQ(r1->tasks[0].revision, 1);
  EXPECT_EQ(r1->tasks[1].revision, 1);
  EXPECT_EQ(NextRevision(r1.get(), State({Task(1), Task(2)})), nullptr);  // nothing differs

  // Job 2 is told to checkpoint and job 3 arrives: they carry revision 2, job 1 keeps 1.
  NodeDesiredPtr r2 = NextRevision(r1.get(), State({Task(1), Task(2, TaskAction::kCheckpoint), Task(3)}));
  ASSERT_NE(r2, nullptr);
  EXPECT_EQ(r2->revision, 2);
  EXPECT_EQ(r2->tasks[0].revision, 1);
  EXPECT_EQ(r2->tasks[1].revision, 2);
  EXPECT_EQ(r2->tasks[2].revision, 2);

  // A task leaving, a scrub order or a new session is a new revision too.
  NodeDesiredPtr r3 = NextRevision(r2.get(), State({Task(1), Task(3)}));
  ASSERT_NE(r3, nullptr);
  EXPECT_EQ(r3->revision, 3);
  NodeDesired scrub = State({Task(1), Task(3)});
  scrub.scrubs = {ScrubOrder{7, {0}}};
  NodeDesiredPtr r4 = NextRevision(r3.get(), scrub);
  ASSERT_NE(r4, nullptr);
  EXPECT_EQ(r4->revision, 4);
  NodeDesired session = scrub;
  session.session = "s2";
  NodeDesiredPtr r5 = NextRevision(r4.get(), session);
  ASSERT_NE(r5, nullptr);
  EXPECT_EQ(r5->tasks[0].revision, 1);  // the tasks themselves did not change
}

TEST(DesiredStateTest, AWatchGetsTheChangesAfterItsRevisionAndEveryKey) {
  NodeDesiredPtr r1 = NextRevision(nullptr, State({Task(1), Task(2)}));
  NodeDesiredPtr r2 = NextRevision(r1.get(), State({Task(1), Task(3)}));
  ASSERT_NE(r2, nullptr);
  WatchReply w = WatchReplyOf(*r2, "inc", false, 1);
  EXPECT_TRUE(w.changed);
  EXPECT_FALSE(w.full);
  EXPECT_EQ(w.since, 1);
  EXPECT_EQ(w.revision, 2);
  ASSERT_EQ(w.tasks.size(), 1u);
  EXPECT_EQ(w.tasks[0].job, 3);
  ASSERT_EQ(w.task_keys.size(), 2u);  // job 2 is not named: it left
  EXPECT_EQ(w.task_keys[0].job, 1);
  EXPECT_EQ(w.task_keys[1].job, 3);
  WatchReply full = WatchReplyOf(*r2, "inc", true, 99);
  EXPECT_TRUE(full.full);
  EXPECT_EQ(full.since, 0);
  EXPECT_EQ(full.tasks.size(), 2u);
  AgentReply a = FullReplyOf(*r2, "inc");
  EXPECT_EQ(a.protocol, kAgentProtocol);
  EXPECT_EQ(a.revision, 2);
  EXPECT_EQ(a.incarnation, "inc");
  EXPECT_EQ(a.tasks.size(), 2u);
}

}  // namespace
}  // namespace gpupool
