// `gpupool sim replay`'s bad input: each a clear error naming the file (and
// the position where there is one), exit code 2 as `sim run`.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>

#include "tests/run_binary.h"

namespace gpupool::testing {
namespace {

constexpr const char* kConfig = "name: c\npools:\n  - name: gpu\n";

class SimReplayCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = MakeTempDir();
    std::ofstream(root_ + "/config.yaml") << kConfig;
    std::filesystem::create_directories(root_ + "/data");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  BinaryRun Replay(const std::string& from, const std::string& config = "") {
    std::vector<std::string> args = {"sim", "replay", "--from", from, "--current-config",
                                     config.empty() ? root_ + "/config.yaml" : config};
    return RunGpupool(args);
  }
  std::string root_;
};

TEST_F(SimReplayCliTest, ADirectoryWithoutAJournalIsNamed) {
  const BinaryRun r = Replay(root_ + "/data");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(root_ + "/data/gpupool.db: no journal here"), std::string::npos) << r.err;
  EXPECT_TRUE(std::filesystem::is_empty(root_ + "/data")) << "nothing is created in the source";
  const BinaryRun missing = Replay(root_ + "/nowhere");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find(root_ + "/nowhere: not a directory"), std::string::npos) << missing.err;
}

TEST_F(SimReplayCliTest, AFileThatIsNotADatabaseIsNamed) {
  std::ofstream(root_ + "/data/gpupool.db") << "not a database, only text that is long enough to fill a header";
  const BinaryRun r = Replay(root_ + "/data");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(root_ + "/data/gpupool.db"), std::string::npos) << r.err;
}

TEST_F(SimReplayCliTest, AJournalFromANewerVersionIsNamed) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((root_ + "/data/gpupool.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                             "INSERT INTO meta VALUES ('schema_version', '9');", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  const BinaryRun r = Replay(root_ + "/data");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(root_ + "/data/gpupool.db has schema version 9"), std::string::npos) << r.err;
}

TEST_F(SimReplayCliTest, AnEventOfANewerVersionIsNamedWithItsSeq) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((root_ + "/data/gpupool.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                             "INSERT INTO meta VALUES ('schema_version', '2');"
                             "CREATE TABLE events(seq INTEGER PRIMARY KEY, at_ms INTEGER NOT NULL, type TEXT NOT NULL, "
                             "body TEXT NOT NULL, actor TEXT NOT NULL DEFAULT '', request_id TEXT NOT NULL DEFAULT '');"
                             "INSERT INTO events(seq, at_ms, type, body) VALUES (1, 5, 'FutureThing', "
                             "'{\"at\":5,\"seq\":1,\"type\":\"FutureThing\"}');",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  const BinaryRun r = Replay(root_ + "/data");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(root_ + "/data/gpupool.db: event 1: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("newer gpupool"), std::string::npos) << r.err;
}

TEST_F(SimReplayCliTest, AConfigThatDoesNotParseIsNamedWithItsPosition) {
  std::ofstream(root_ + "/bad.yaml") << "name: c\npools:\n  - name: gpu\n    colour: blue\n";
  const BinaryRun r = Replay(root_ + "/data", root_ + "/bad.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(root_ + "/bad.yaml:4:5"), std::string::npos) << r.err;
}

TEST_F(SimReplayCliTest, WithoutTheConfigurationInForceItSaysTheJournalDoesNotRecordIt) {
  // A journal of a release before configurations were recorded: no "configs" meta.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((root_ + "/data/gpupool.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                             "INSERT INTO meta VALUES ('schema_version', '2');"
                             "CREATE TABLE events(seq INTEGER PRIMARY KEY, at_ms INTEGER NOT NULL, type TEXT NOT NULL, "
                             "body TEXT NOT NULL, actor TEXT NOT NULL DEFAULT '', request_id TEXT NOT NULL DEFAULT '');",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  const BinaryRun r = RunGpupool({"sim", "replay", "--from", root_ + "/data"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("does not record the configuration"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--current-config"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gpupool::testing
