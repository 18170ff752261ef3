// The test Env and its in-memory journal: the journal behaves as the SQLite
// one does, faults fire on the commit they were armed for, a crash fences
// the handles opened before it, the clock moves only when told.
#include "src/server/testing/test_env.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <future>
#include <map>
#include <thread>

#include "tests/run_binary.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;
using Fault = TestEnv::Fault;

JournalBatch Events(int64_t from, int64_t to) {
  JournalBatch b;
  for (int64_t s = from; s <= to; ++s) b.events.push_back(JournalEvent{s, 1000 * s, "T", "{\"seq\":" + std::to_string(s) + "}"});
  return b;
}

std::vector<int64_t> Seqs(Journal& j, int64_t after = 0, int64_t limit = -1) {
  std::vector<int64_t> out;
  EXPECT_TRUE(j.ReadEvents(after, limit, [&](const JournalEvent& e) {
                 out.push_back(e.seq);
                 return true;
               }).has_value());
  return out;
}

// The same batches through the SQLite journal and the memory one: the same
// answers, refusals included.
TEST(MemoryJournalTest, AnswersAsTheSqliteJournalDoes) {
  const std::string dir = testing::MakeTempDir();
  auto sqlite = OpenSqliteJournal(dir);
  ASSERT_TRUE(sqlite.has_value()) << sqlite.error().message;
  MemoryJournal memory;
  for (Journal* j : {sqlite->get(), static_cast<Journal*>(&memory)}) {
    SCOPED_TRACE(j == &memory ? "memory" : "sqlite");
    EXPECT_EQ(*j->LastSeq(), 0);
    JournalBatch first = Events(1, 3);
    first.tokens = {{"h2", "b", 5}, {"h1", "a", 5}, {"h0", "c", 9}};
    first.meta = {{"k", "v1"}};
    first.snapshots = {{"engine", 1, "s1"}};
    ASSERT_TRUE(j->Commit(first).has_value());
    JournalBatch second = Events(4, 5);
    second.meta = {{"k", "v2"}};
    second.snapshots = {{"engine", 3, "s3"}, {"read-model", 2, "r2"}};
    ASSERT_TRUE(j->Commit(second).has_value());
    ASSERT_TRUE(j->Commit(JournalBatch{.snapshots = {{"engine", 5, "s5"}}}).has_value());
    // A repeated seq or token refuses the whole batch.
    JournalBatch again = Events(6, 6);
    again.events.push_back(JournalEvent{5, 0, "T", "{}"});
    again.meta = {{"k", "v3"}};
    EXPECT_FALSE(j->Commit(again).has_value());
    EXPECT_FALSE(j->Commit(JournalBatch{.events = Events(6, 6).events, .tokens = {{"h1", "x", 1}}}).has_value());

    EXPECT_EQ(*j->LastSeq(), 5);
    EXPECT_EQ(Seqs(*j), (std::vector<int64_t>{1, 2, 3, 4, 5}));
    EXPECT_EQ(Seqs(*j, 2, 2), (std::vector<int64_t>{3, 4}));
    EXPECT_EQ(**j->Meta("k"), "v2");
    EXPECT_FALSE(j->Meta("none")->has_value());
    EXPECT_EQ((*j->LatestSnapshot("engine"))->bytes, "s5");
    EXPECT_EQ((*j->LatestSnapshot("read-model"))->seq, 2);
    EXPECT_FALSE(j->LatestSnapshot("other")->has_value());
    std::vector<std::string> tokens;
    const auto stored = j->Tokens();
    for (const TokenRecord& t : *stored) tokens.push_back(t.hash_hex + "/" + t.tenant);
    EXPECT_EQ(tokens, (std::vector<std::string>{"h1/a", "h2/b", "h0/c"}));

    // A named token keeps every field; revocations mark stored records.
    const TokenRecord named{.hash_hex = "h3", .tenant = "a", .created_ms = 10, .id = "0011223344556677",
                            .name = "ci", .salt_hex = "5a17", .role = "reader", .expires_ms = 99};
    ASSERT_TRUE(j->Commit(JournalBatch{.tokens = {named}}).has_value());
    ASSERT_TRUE(j->Commit(JournalBatch{.revocations = {{"h3", 20}, {"h1", 21}}}).has_value());
    ASSERT_TRUE(j->Commit(JournalBatch{.revocations = {{"h3", 30}}}).has_value());  // the first time stands
    std::map<std::string, TokenRecord> by_hash;
    const auto records = j->Tokens();
    ASSERT_TRUE(records.has_value());
    for (const TokenRecord& t : *records) by_hash[t.hash_hex] = t;
    const TokenRecord& h3 = by_hash["h3"];
    EXPECT_EQ(h3.id, named.id);
    EXPECT_EQ(h3.name, "ci");
    EXPECT_EQ(h3.salt_hex, "5a17");
    EXPECT_EQ(h3.role, "reader");
    EXPECT_EQ(h3.expires_ms, 99);
    EXPECT_EQ(h3.revoked_ms, 20);
    EXPECT_EQ(by_hash["h1"].revoked_ms, 21);
    EXPECT_EQ(by_hash["h2"].revoked_ms, 0);
  }
  sqlite->reset();
  std::filesystem::remove_all(dir);
}

class TestEnvTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::MakeTempDir(); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::unique_ptr<Journal> Open(TestEnv& env) {
    auto j = env.OpenJournal(dir_ + "/data");
    EXPECT_TRUE(j.has_value());
    return std::move(*j);
  }
  std::string dir_;
};

TEST_F(TestEnvTest, TheClockMovesOnlyWhenAdvancedAndWakesWaiters) {
  TestEnv env;
  const Instant t0 = env.Now();
  std::this_thread::sleep_for(5ms);
  EXPECT_EQ(env.Now(), t0);
  std::mutex mu;
  std::condition_variable cv;
  auto waited = std::async(std::launch::async, [&] {
    std::unique_lock lock(mu);
    env.WaitUntil(cv, lock, t0 + 10s, [] { return false; });
    return env.Now();
  });
  env.Advance(9s);
  EXPECT_EQ(waited.wait_for(20ms), std::future_status::timeout);
  env.Advance(1s);
  EXPECT_EQ(waited.get(), t0 + 10s);
  EXPECT_EQ(env.SteadyNow() - Env::SteadyTime{}, std::chrono::seconds(10));
}

TEST_F(TestEnvTest, AFailedCommitWritesNothing) {
  TestEnv env;
  auto j = Open(env);
  ASSERT_TRUE(j->Commit(Events(1, 1)).has_value());
  env.ArmCommitFault(2, Fault::kFailCommit);
  ASSERT_TRUE(j->Commit(JournalBatch{}).has_value());  // empty: not counted
  ASSERT_TRUE(j->Commit(Events(2, 2)).has_value());
  EXPECT_FALSE(j->Commit(Events(3, 3)).has_value());
  EXPECT_FALSE(env.fault_armed());
  ASSERT_TRUE(j->Commit(Events(3, 3)).has_value());  // the handle lives on: no crash
  EXPECT_EQ(Seqs(*j), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(env.commits(), 4);
  EXPECT_EQ(env.crashes(), 0);
}

TEST_F(TestEnvTest, CrashesLoseOrKeepTheBatchAndFenceOldHandles) {
  struct Case {
    Fault fault;
    bool kept;
  };
  for (const Case c : {Case{Fault::kCrashBeforeCommit, false}, Case{Fault::kCrashAfterCommit, true}}) {
    TestEnv env;
    int hooks = 0;
    env.set_crash_hook([&] { ++hooks; });
    auto j = Open(env);
    ASSERT_TRUE(j->Commit(Events(1, 2)).has_value());
    env.ArmCommitFault(1, c.fault);
    const Status ok = j->Commit(Events(3, 4));
    EXPECT_EQ(ok.has_value(), c.fault == Fault::kCrashAfterCommit);
    EXPECT_EQ(hooks, 1);
    EXPECT_EQ(env.crashes(), 1);
    // The dead server's handle can neither write nor read.
    EXPECT_FALSE(j->Commit(Events(5, 5)).has_value());
    EXPECT_FALSE(j->LastSeq().has_value());
    auto after = Open(env);
    EXPECT_EQ(*after->LastSeq(), c.kept ? 4 : 2);
  }
}

// kCrashDuringCommit keeps or loses the whole batch as the seed draws: the
// same seed, the same outcome; some seeds keep, some lose.
TEST_F(TestEnvTest, ACrashDuringTheSyncKeepsOrLosesTheWholeBatchBySeed) {
  auto outcome = [&](uint64_t seed) {
    TestEnv env({.seed = seed});
    auto j = Open(env);
    env.ArmCommitFault(1, Fault::kCrashDuringCommit);
    EXPECT_FALSE(j->Commit(Events(1, 3)).has_value());
    const int64_t last = *Open(env)->LastSeq();
    EXPECT_TRUE(last == 0 || last == 3) << last;
    std::filesystem::remove_all(dir_ + "/data");
    return last;
  };
  std::set<int64_t> seen;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const int64_t last = outcome(seed);
    EXPECT_EQ(outcome(seed), last);
    seen.insert(last);
  }
  EXPECT_EQ(seen, (std::set<int64_t>{0, 3}));
}

TEST_F(TestEnvTest, ProgramsAreFunctionsAndHangingOnesEndAtTheCrashOrTimeout) {
  TestEnv env;
  EXPECT_NE(env.RunProgram({"/bin/sh", "-c", "x"}, {}, 5s).start_error, "");
  env.set_program([&](const TestEnv::ProgramCall& call) {
    if (call.Var("MODE") == "hang") return env.Hang(call);
    return TestEnv::Exited(call.Var("MODE") == "fail" ? 3 : 0, "said " + call.argv.back());
  });
  EXPECT_TRUE(env.RunProgram({"/bin/sh", "-c", "ok"}, {{"MODE", "ok"}}, 5s).ok);
  const CommandOutcome failed = env.RunProgram({"/bin/sh", "-c", "no"}, {{"MODE", "fail"}}, 5s);
  EXPECT_EQ(failed.Describe(), "exited 3: said no");

  auto timed_out = std::async(std::launch::async, [&] { return env.RunProgram({"t"}, {{"MODE", "hang"}}, 5s); });
  while (env.program_calls().size() < 4) std::this_thread::sleep_for(1ms);
  env.Advance(5s);
  EXPECT_EQ(timed_out.get().Describe(), "timed out after 5s");
  auto killed = std::async(std::launch::async, [&] { return env.RunProgram({"k"}, {{"MODE", "hang"}}, 5s); });
  while (env.program_calls().size() < 5) std::this_thread::sleep_for(1ms);
  env.Crash();
  EXPECT_EQ(killed.get().signal, SIGKILL);
  EXPECT_EQ(env.program_calls()[1].argv.back(), "ok");
}

TEST_F(TestEnvTest, WritesUnderAPrefixFail) {
  TestEnv env;
  env.FailWritesUnder(dir_ + "/full");
  EXPECT_FALSE(env.WriteFileAtomic(dir_ + "/full/a", "x", 0600).has_value());
  EXPECT_FALSE(env.AppendFile(dir_ + "/full/b/c.log", "x").has_value());
  ASSERT_TRUE(env.AppendFile(dir_ + "/ok/c.log", "x").has_value());
  ASSERT_TRUE(env.AppendFile(dir_ + "/ok/c.log", "y").has_value());
  EXPECT_EQ(testing::ReadTextFile(dir_ + "/ok/c.log"), "xy");
  env.FailWritesUnder("");
  ASSERT_TRUE(env.CreateDirectories(dir_ + "/full").has_value());
  ASSERT_TRUE(env.WriteFileAtomic(dir_ + "/full/a", "x", 0600).has_value());
  EXPECT_EQ(testing::ReadTextFile(dir_ + "/full/a"), "x");
}

}  // namespace
}  // namespace gpupool
