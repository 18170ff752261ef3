// The etcd journal and the leader election against a real etcd (one
// member on loopback; skipped when etcd is not installed).
#include "src/server/etcd_journal.h"

#include <gtest/gtest.h>

#include <thread>

#include "src/server/etcd_election.h"
#include "src/server/testing/etcd_cluster.h"

namespace gpupool {
namespace {

using testing::EtcdBinary;
using testing::EtcdCluster;

class EtcdJournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (EtcdBinary().empty()) GTEST_SKIP() << testing::kNoEtcdMessage;
    ASSERT_TRUE(etcd_.Start()) << etcd_.error();
    client_ = std::make_unique<EtcdClient>(EtcdClientOptions{etcd_.EndpointList()});
  }

  std::unique_ptr<Journal> Open(const std::string& prefix, EtcdWriteRight* right = nullptr) {
    auto j = OpenEtcdJournal(*client_, EtcdJournalOptions{prefix, right});
    EXPECT_TRUE(j) << j.error().message;
    return j ? std::move(*j) : nullptr;
  }

  static JournalBatch Events(int64_t first, int64_t n, size_t body_bytes = 20) {
    JournalBatch b;
    for (int64_t s = first; s < first + n; ++s) {
      b.events.push_back(JournalEvent{s, 1000 + s, "JobSubmitted",
                                      "{\"seq\":" + std::to_string(s) + ",\"pad\":\"" + std::string(body_bytes, 'x') + "\"}"});
    }
    return b;
  }

  static std::vector<JournalEvent> ReadAll(Journal& j, int64_t after = 0, int64_t limit = -1) {
    std::vector<JournalEvent> out;
    auto ok = j.ReadEvents(after, limit, [&](const JournalEvent& e) {
      out.push_back(e);
      return true;
    });
    EXPECT_TRUE(ok) << ok.error().message;
    return out;
  }

  EtcdCluster etcd_{1};
  std::unique_ptr<EtcdClient> client_;
};

TEST_F(EtcdJournalTest, CommittedBatchesReadBackInOrderFromAnySeq) {
  auto j = Open("/gpupool/a");
  ASSERT_TRUE(j);
  EXPECT_EQ(*j->LastSeq(), 0);
  ASSERT_TRUE(j->Commit(Events(1, 3)));
  JournalBatch second = Events(4, 5);
  second.tokens.push_back(TokenRecord{"beef", "team-b", 7});
  second.tokens.push_back(TokenRecord{"abba", "team-a", 7});
  second.meta.emplace_back("attribute_names", "{\"node_classes\":[]}");
  ASSERT_TRUE(j->Commit(second));
  EXPECT_EQ(*j->LastSeq(), 8);

  const auto all = ReadAll(*j);
  ASSERT_EQ(all.size(), 8u);
  for (int64_t i = 0; i < 8; ++i) {
    EXPECT_EQ(all[i].seq, i + 1);
    EXPECT_EQ(all[i].at_ms, 1001 + i);
    EXPECT_EQ(all[i].type, "JobSubmitted");
    EXPECT_EQ(all[i].json, Events(i + 1, 1).events[0].json);
  }
  // From inside a batch, and bounded.
  const auto tail = ReadAll(*j, 5, 2);
  ASSERT_EQ(tail.size(), 2u);
  EXPECT_EQ(tail[0].seq, 6);
  EXPECT_EQ(tail[1].seq, 7);
  EXPECT_TRUE(ReadAll(*j, 8).empty());

  const auto tokens = *j->Tokens();
  ASSERT_EQ(tokens.size(), 2u);
  EXPECT_EQ(tokens[0].hash_hex, "abba");  // by creation time, then hash
  EXPECT_EQ(tokens[1].tenant, "team-b");
  // A named token keeps every field; revocations mark stored records.
  const TokenRecord named{.hash_hex = "cafe", .tenant = "team-a", .created_ms = 9, .id = "0011223344556677",
                          .name = "ci", .salt_hex = "5a17", .role = "reader", .expires_ms = 99};
  ASSERT_TRUE(j->Commit(JournalBatch{.tokens = {named}}));
  ASSERT_TRUE(j->Commit(JournalBatch{.revocations = {{"cafe", 20}, {"abba", 21}}}));
  ASSERT_TRUE(j->Commit(JournalBatch{.revocations = {{"cafe", 30}}}));
  const auto named_tokens = *j->Tokens();
  ASSERT_EQ(named_tokens.size(), 3u);
  EXPECT_EQ(named_tokens[0].revoked_ms, 21);  // abba
  EXPECT_EQ(named_tokens[1].revoked_ms, 0);   // beef
  const TokenRecord& cafe = named_tokens[2];
  EXPECT_EQ(cafe.hash_hex, "cafe");
  EXPECT_EQ(cafe.id, named.id);
  EXPECT_EQ(cafe.name, "ci");
  EXPECT_EQ(cafe.salt_hex, "5a17");
  EXPECT_EQ(cafe.role, "reader");
  EXPECT_EQ(cafe.expires_ms, 99);
  EXPECT_EQ(cafe.revoked_ms, 20);
  EXPECT_EQ(**j->Meta("attribute_names"), "{\"node_classes\":[]}");
  EXPECT_FALSE(j->Meta("job_labels")->has_value());

  // A second journal on the same prefix (a server taking over) sees it all.
  auto again = Open("/gpupool/a");
  ASSERT_TRUE(again);
  EXPECT_EQ(ReadAll(*again).size(), 8u);
  EXPECT_EQ(*again->LastSeq(), 8);
  // Another prefix is another cluster.
  auto other = Open("/gpupool/ab");
  ASSERT_TRUE(other);
  EXPECT_EQ(*other->LastSeq(), 0);
}

TEST_F(EtcdJournalTest, LargeBatchesAndSnapshotsAreStoredInPartsUnderTheRequestLimit) {
  auto j = Open("/gpupool/big");
  ASSERT_TRUE(j);
  // 3,000 events of ~1 KiB: about 3 MiB, twice etcd's request limit.
  ASSERT_TRUE(j->Commit(Events(1, 3000, 1000)));
  std::string bytes;
  for (int i = 0; i < 3 * 1024 * 1024 + 17; ++i) bytes.push_back(static_cast<char>(i * 131 % 256));
  for (int64_t seq : {1000, 2000, 3000}) {
    JournalBatch b;
    b.snapshots.push_back(SnapshotRecord{"engine", seq, bytes + std::to_string(seq), 5});
    ASSERT_TRUE(j->Commit(b));
  }
  EXPECT_EQ(*j->LastSeq(), 3000);
  const auto all = ReadAll(*j);
  ASSERT_EQ(all.size(), 3000u);
  EXPECT_EQ(all.back().json, Events(3000, 1, 1000).events[0].json);
  auto s = *j->LatestSnapshot("engine");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->seq, 3000);
  EXPECT_EQ(s->bytes, bytes + "3000");
  EXPECT_FALSE(j->LatestSnapshot("read-model")->has_value());
  // The newest two snapshots are kept: the first one's header and parts are gone.
  auto headers = client_->Range(EtcdRange{"/gpupool/big/snapshots/", PrefixEnd("/gpupool/big/snapshots/"), 0, false,
                                          true});
  ASSERT_TRUE(headers);
  ASSERT_EQ(headers->kvs.size(), 2u);
  EXPECT_EQ(headers->kvs[0].key, "/gpupool/big/snapshots/engine/00000000000000002000");
  auto parts = client_->Range(EtcdRange{"/gpupool/big/chunks/", PrefixEnd("/gpupool/big/chunks/"), 0, false, true,
                                        /*count_only=*/true});
  ASSERT_TRUE(parts);
  // The events (3,000 of ~1,060 bytes as JSON: just over 3 MiB) in 4 parts, and 4 parts per kept snapshot.
  EXPECT_EQ(parts->count, 4 + 2 * 4);
}

TEST_F(EtcdJournalTest, ABatchIsNeverWrittenTwice) {
  auto a = Open("/gpupool/twice");
  auto b = Open("/gpupool/twice");
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->Commit(Events(1, 2)));
  auto again = b->Commit(Events(1, 2));
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().message.find("already exists"), std::string::npos) << again.error().message;
}

TEST_F(EtcdJournalTest, APrefixHoldingOtherKeysOrAnotherFormatIsRefused) {
  ASSERT_TRUE(client_->Put("/theirs/config", "x"));
  auto j = OpenEtcdJournal(*client_, EtcdJournalOptions{"/theirs"});
  ASSERT_FALSE(j);
  EXPECT_EQ(j.error().message,
            "etcd /theirs: holds keys not written by gpupool (/theirs/config, no /theirs/format): is --etcd-prefix "
            "right?");
  ASSERT_TRUE(client_->Put("/future/format", "gpupool-journal 9"));
  auto f = OpenEtcdJournal(*client_, EtcdJournalOptions{"/future"});
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().message,
            "etcd /future: holds a journal of format 'gpupool-journal 9'; this gpupool reads 'gpupool-journal 1'");
  EXPECT_FALSE(OpenEtcdJournal(*client_, EtcdJournalOptions{"gpupool/"}));
}

TEST_F(EtcdJournalTest, AnUnreachableEtcdIsNamed) {
  EtcdClient nowhere(EtcdClientOptions{{"http://127.0.0.1:1"}, std::chrono::milliseconds(200)});
  auto j = OpenEtcdJournal(nowhere, EtcdJournalOptions{"/gpupool/x"});
  ASSERT_FALSE(j);
  EXPECT_EQ(j.error().message.rfind("cannot reach etcd at http://127.0.0.1:1: ", 0), 0u) << j.error().message;
}

// HA-2: a leader whose lease ended can no longer append, even before it
// notices; the new leader can.
TEST_F(EtcdJournalTest, ADeposedLeaderCannotAppend) {
  const auto never = [] { return false; };
  const auto ignore = [](const std::string&) {};
  EtcdElection a(*client_, EtcdElectionOptions{"/gpupool/ha", "http://a:1", 2});
  ASSERT_TRUE(a.Campaign(never, ignore, ignore));
  auto ja = Open("/gpupool/ha", &a);
  ASSERT_TRUE(ja);
  ASSERT_TRUE(ja->Commit(Events(1, 2)));

  // B waits while A leads.
  std::string waiting_for;
  EtcdElection b(*client_, EtcdElectionOptions{"/gpupool/ha", "http://b:2", 2});
  int polls = 0;
  auto none = b.Campaign([&] { return ++polls > 3; }, [&](const std::string& l) { waiting_for = l; }, ignore);
  ASSERT_FALSE(none);
  EXPECT_EQ(waiting_for, "http://a:1");

  // A's lease ends behind its back (as if it had been paused past its TTL).
  ASSERT_TRUE(client_->LeaseRevoke(a.lease()));
  EtcdElection c(*client_, EtcdElectionOptions{"/gpupool/ha", "http://c:3", 2});
  ASSERT_TRUE(c.Campaign(never, ignore, ignore));
  auto jc = Open("/gpupool/ha", &c);
  ASSERT_TRUE(jc);
  ASSERT_TRUE(jc->Commit(Events(3, 1)));

  auto refused = ja->Commit(Events(4, 1));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(refused.error().message.rfind(kNotLeaderPrefix, 0), 0u) << refused.error().message;
  EXPECT_NE(refused.error().message.find("the leader is http://c:3"), std::string::npos) << refused.error().message;
  EXPECT_EQ(*jc->LastSeq(), 3);
  // A notices within its TTL and refuses without asking etcd from then on.
  for (int i = 0; i < 40 && a.LostReason().empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(a.LostReason(), "etcd says lease " + std::to_string(a.lease()) + " has expired");
  ASSERT_TRUE(jc->Commit(Events(4, 1)));
  EXPECT_EQ(ReadAll(*jc).size(), 4u);
}

TEST_F(EtcdJournalTest, AResignedLeaderIsReplacedAtOnce) {
  const auto never = [] { return false; };
  const auto ignore = [](const std::string&) {};
  EtcdElection a(*client_, EtcdElectionOptions{"/gpupool/r", "http://a:1", 3});
  ASSERT_TRUE(a.Campaign(never, ignore, ignore));
  a.Resign();
  EXPECT_EQ(a.LostReason(), "resigned");
  EtcdElection b(*client_, EtcdElectionOptions{"/gpupool/r", "http://b:2", 3});
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(b.Campaign(never, ignore, ignore));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  EXPECT_EQ(b.CurrentLeader(), "http://b:2");
}

}  // namespace
}  // namespace gpupool
