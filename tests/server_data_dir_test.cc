// The data directory's rules (issue 22, src/server/data_dir.h): never
// silently replaced (files but no database, an emptied database, a database
// from another directory are refused; an earlier release's directory is
// given an identity), one server at a time (LOCK), owner-only permissions,
// checksummed snapshots whose damage stops start-up naming the file and
// offset, SQLite's quick_check at start. In process on the real Env and
// SQLite (each start takes milliseconds); the lock and exit codes through
// the real binary.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "src/server/data_dir.h"
#include "src/server/exit_codes.h"
#include "src/server/server_core.h"
#include "tests/run_binary.h"
#include "tests/server_process.h"

namespace gpupool {
namespace {

namespace fs = std::filesystem;
using testing::MakeTempDir;

constexpr const char* kConfig = R"(name: data-dir
engine: {heartbeat_timeout: 0s}
pools:
  - name: gpu
cluster:
  nodes:
    - {count: 1, model: H100, gpus: 8, cpu_cores: 96, memory_gib: 1024}
tenants:
  - name: team
    quota: {gpu: {guaranteed_gpus: 8, limit_gpus: 8}}
)";

JobSpec OneGpu(const std::string& name) {
  JobSpec s;
  s.name = name;
  s.demand = Demand{1000, 1024, 1, kMilliPerGpu};
  return s;
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

// Runs SQL on a stopped server's database.
void Sql(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  char* msg = nullptr;
  const int rc = sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &msg);
  EXPECT_EQ(rc, SQLITE_OK) << (msg ? msg : "");
  sqlite3_free(msg);
  sqlite3_close(h);
}

// Flips one bit of byte `offset` of the newest `kind` snapshot.
void FlipSnapshotByte(const std::string& db, const std::string& kind, size_t offset) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(h, "SELECT seq, bytes FROM snapshots WHERE kind = ? ORDER BY seq DESC LIMIT 1", -1,
                               &st, nullptr),
            SQLITE_OK);
  sqlite3_bind_text(st, 1, kind.c_str(), -1, SQLITE_TRANSIENT);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  const int64_t seq = sqlite3_column_int64(st, 0);
  std::string bytes(static_cast<const char*>(sqlite3_column_blob(st, 1)), sqlite3_column_bytes(st, 1));
  sqlite3_finalize(st);
  ASSERT_LT(offset, bytes.size());
  bytes[offset] = static_cast<char>(bytes[offset] ^ 0x10);
  ASSERT_EQ(sqlite3_prepare_v2(h, "UPDATE snapshots SET bytes = ? WHERE kind = ? AND seq = ?", -1, &st, nullptr),
            SQLITE_OK);
  sqlite3_bind_blob(st, 1, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 2, kind.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 3, seq);
  EXPECT_EQ(sqlite3_step(st), SQLITE_DONE);
  sqlite3_finalize(st);
  sqlite3_close(h);
}

class DataDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = MakeTempDir();
    dir_ = root_ + "/data";
  }
  void TearDown() override { fs::remove_all(root_); }

  ServerOptions Options(const std::string& dir) const { return ServerOptions{.data_dir = dir, .config_text = kConfig}; }
  Result<std::unique_ptr<ServerCore>> Open() { return ServerCore::Open(Options(dir_)); }
  // A directory with state: bootstrapped, two jobs, stopped cleanly (both
  // snapshots written).
  void MakeState() {
    auto core = Open();
    ASSERT_TRUE(core.has_value()) << core.error().message;
    (*core)->Start();
    for (const char* name : {"a", "b"}) {
      const Reply r = (*core)->Call(SubmitJobCmd{"team", OneGpu(name)});
      ASSERT_FALSE(r.error.has_value()) << r.error->message;
    }
    (*core)->Stop();
  }
  std::string ExpectRefused(ErrorCode code) {
    auto core = Open();
    EXPECT_FALSE(core.has_value());
    if (core) return "";
    EXPECT_EQ(core.error().code, code) << core.error().message;
    return core.error().message;
  }

  std::string root_, dir_;
};

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST_F(DataDirTest, AFilesButNoDatabaseDirectoryIsRefused) {
  MakeState();
  fs::remove(dir_ + "/gpupool.db");
  fs::remove(dir_ + "/gpupool.db-wal");
  fs::remove(dir_ + "/gpupool.db-shm");
  const std::string m = ExpectRefused(ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(m, "holds files (IDENTITY, admin.token, tokens)")) << m;
  EXPECT_TRUE(Contains(m, "gpupool.db is missing or empty")) << m;
  // Nothing was bootstrapped over it: refused again.
  ExpectRefused(ErrorCode::kFailedPrecondition);
}

TEST_F(DataDirTest, AnEmptiedDatabaseIsRefused) {
  MakeState();
  fs::remove(dir_ + "/gpupool.db-wal");
  fs::remove(dir_ + "/gpupool.db-shm");
  std::ofstream(dir_ + "/gpupool.db", std::ios::trunc);  // zero bytes: SQLite would take it for a new database
  const std::string m = ExpectRefused(ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(m, "but no database state")) << m;
}

TEST_F(DataDirTest, AnEmptyDirectoryOrOneWithOnlyAnEmptyDatabaseStartsANewSystem) {
  fs::create_directories(dir_);
  std::ofstream(dir_ + "/gpupool.db");
  auto core = Open();
  ASSERT_TRUE(core.has_value()) << core.error().message;
  const std::string id = (*core)->data_dir_id();
  EXPECT_EQ(id.size(), 32u);
  EXPECT_EQ(*ReadIdentityFile(dir_), id);
  EXPECT_EQ(*(*core)->journal().Meta(kIdentityMeta), id);
}

TEST_F(DataDirTest, ADatabaseFromAnotherDirectoryIsRefused) {
  MakeState();
  const std::string other = root_ + "/other";
  dir_ = other;
  MakeState();
  dir_ = root_ + "/data";
  fs::copy_file(other + "/gpupool.db", dir_ + "/gpupool.db", fs::copy_options::overwrite_existing);
  fs::remove(dir_ + "/gpupool.db-wal");
  fs::remove(dir_ + "/gpupool.db-shm");
  const std::string m = ExpectRefused(ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(m, "comes from another data directory")) << m;
}

TEST_F(DataDirTest, AMissingIdentityFileIsWrittenAgainFromTheDatabase) {
  MakeState();
  const std::string id = **ReadIdentityFile(dir_);
  fs::remove(dir_ + "/IDENTITY");
  auto core = Open();
  ASSERT_TRUE(core.has_value()) << core.error().message;
  EXPECT_EQ((*core)->data_dir_id(), id);
  EXPECT_EQ(*ReadIdentityFile(dir_), id);
}

TEST_F(DataDirTest, LogsAreKeyedByTheIdentitySoANewSystemNeverServesOldOutput) {
  auto core = Open();
  ASSERT_TRUE(core.has_value()) << core.error().message;
  LogChunk chunk;
  chunk.job = 1;
  chunk.data = "old output\n";
  ASSERT_TRUE((*core)->logs().Append(chunk).has_value());
  const std::string file = dir_ + "/logs/" + (*core)->data_dir_id() + "/1/0.0.log";
  EXPECT_TRUE(fs::exists(file)) << file;
  EXPECT_EQ(ModeOf(file), 0600u);
  EXPECT_EQ(ModeOf(dir_ + "/logs/" + (*core)->data_dir_id() + "/1"), 0700u);
  core->reset();
  // Another system in another directory has job 1 too: its store is empty.
  dir_ = root_ + "/fresh";
  auto fresh = Open();
  ASSERT_TRUE(fresh.has_value()) << fresh.error().message;
  EXPECT_TRUE((*fresh)->logs().Read(1, 1 << 20)->empty());
}

TEST_F(DataDirTest, FilesAreOwnerOnlyAndLooserOnesAreTightenedAtStartUp) {
  MakeState();
  for (const char* f : {"gpupool.db", "gpupool.db-wal", "gpupool.db-shm", "admin.token", "IDENTITY", "LOCK"}) {
    if (fs::exists(dir_ + "/" + f)) EXPECT_EQ(ModeOf(dir_ + "/" + f), 0600u) << f;
  }
  EXPECT_EQ(ModeOf(dir_), 0700u);
  EXPECT_EQ(ModeOf(dir_ + "/tokens"), 0700u);
  EXPECT_EQ(ModeOf(dir_ + "/tokens/team.token"), 0600u);
  // As an earlier release (or a careless copy) left them.
  fs::create_directories(dir_ + "/logs/x/7");
  std::ofstream(dir_ + "/logs/x/7/0.0.log") << "out";
  ::chmod(dir_.c_str(), 0755);
  ::chmod((dir_ + "/gpupool.db").c_str(), 0644);
  ::chmod((dir_ + "/admin.token").c_str(), 0644);
  ::chmod((dir_ + "/logs").c_str(), 0755);
  ::chmod((dir_ + "/logs/x/7/0.0.log").c_str(), 0644);
  auto core = Open();
  ASSERT_TRUE(core.has_value()) << core.error().message;
  EXPECT_EQ(ModeOf(dir_), 0700u);
  EXPECT_EQ(ModeOf(dir_ + "/gpupool.db"), 0600u);
  EXPECT_EQ(ModeOf(dir_ + "/admin.token"), 0600u);
  EXPECT_EQ(ModeOf(dir_ + "/logs"), 0700u);
  EXPECT_EQ(ModeOf(dir_ + "/logs/x/7/0.0.log"), 0600u);
}

TEST_F(DataDirTest, ADataDirectoryOfTheLastReleaseLoadsAndGetsAnIdentityAndItsLogsMove) {
  fs::create_directories(dir_ + "/logs/1");
  for (const char* f : {"gpupool.db", "admin.token"}) {
    fs::copy_file(std::string(GPUPOOL_SOURCE_DIR) + "/tests/fixtures/data-v7/" + f, dir_ + "/" + f);
  }
  std::ofstream(dir_ + "/logs/1/0.0.log") << "hello\n";
  auto core = ServerCore::Open(ServerOptions{.data_dir = dir_});  // the embedded configuration, as written
  ASSERT_TRUE(core.has_value()) << core.error().message;
  const std::string id = (*core)->data_dir_id();
  EXPECT_EQ(*ReadIdentityFile(dir_), id);
  EXPECT_EQ(*(*core)->journal().Meta(kIdentityMeta), id);
  EXPECT_EQ(testing::ReadTextFile(dir_ + "/logs/" + id + "/1/0.0.log"), "hello\n");
  auto parts = (*core)->logs().Read(1, 100);
  ASSERT_TRUE(parts.has_value());
  ASSERT_EQ(parts->size(), 1u);
  EXPECT_EQ((*parts)[0].text, "hello\n");
  core->reset();
  // And the next start takes it as its own.
  auto again = ServerCore::Open(ServerOptions{.data_dir = dir_});
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_EQ((*again)->data_dir_id(), id);
}

TEST_F(DataDirTest, AFlippedByteInTheReadModelSnapshotStopsStartUpNamingTheFileAndOffset) {
  MakeState();
  // One byte in the middle of the newest read-model snapshot.
  FlipSnapshotByte(dir_ + "/gpupool.db", "read-model", 40);
  const std::string m = ExpectRefused(ErrorCode::kDataLoss);
  EXPECT_TRUE(Contains(m, dir_ + "/gpupool.db: read-model snapshot at seq")) << m;
  EXPECT_TRUE(Contains(m, "checksum mismatch (the checksum at byte offset")) << m;
  EXPECT_TRUE(Contains(m, "--recover-from-journal")) << m;
  // The journal is whole: recovering from its events alone works.
  ServerOptions o = Options(dir_);
  o.replay_from_start = true;
  auto core = ServerCore::Open(o);
  ASSERT_TRUE(core.has_value()) << core.error().message;
  EXPECT_NE((*core)->read_model().job(2), nullptr);
}

TEST_F(DataDirTest, AFlippedByteInTheEngineSnapshotStopsStartUpNamingTheFileAndOffset) {
  MakeState();
  FlipSnapshotByte(dir_ + "/gpupool.db", "engine", 100);
  const std::string m = ExpectRefused(ErrorCode::kDataLoss);
  EXPECT_TRUE(Contains(m, dir_ + "/gpupool.db: engine snapshot at seq")) << m;
  EXPECT_TRUE(Contains(m, "checksum mismatch: the checksum at byte offset 20")) << m;
}

TEST_F(DataDirTest, AnEventThatDoesNotDecodeStopsStartUpNamingTheRow) {
  MakeState();
  Sql(dir_ + "/gpupool.db", "DELETE FROM snapshots");
  Sql(dir_ + "/gpupool.db", "UPDATE events SET body = substr(body, 1, 10) WHERE seq = 3");
  const std::string m = ExpectRefused(ErrorCode::kDataLoss);
  EXPECT_TRUE(Contains(m, dir_ + "/gpupool.db: event 3 (table events, row seq 3) does not decode")) << m;
}

TEST_F(DataDirTest, ATruncatedDatabaseFailsTheQuickCheckNamingTheFile) {
  MakeState();
  fs::remove(dir_ + "/gpupool.db-wal");
  fs::remove(dir_ + "/gpupool.db-shm");
  const auto size = fs::file_size(dir_ + "/gpupool.db");
  ASSERT_GT(size, 8192u);
  fs::resize_file(dir_ + "/gpupool.db", size / 2);
  const std::string m = ExpectRefused(ErrorCode::kDataLoss);
  EXPECT_TRUE(Contains(m, dir_ + "/gpupool.db")) << m;
}

TEST_F(DataDirTest, TheQuickCheckIsTimedAndReported) {
  MakeState();
  auto core = Open();
  ASSERT_TRUE(core.has_value()) << core.error().message;
  EXPECT_GT((*core)->integrity_check_seconds(), 0.0);
  EXPECT_LT((*core)->integrity_check_seconds(), 5.0);
  const std::string text = (*core)->metrics().Render((*core)->read_model());
  EXPECT_TRUE(Contains(text, "gpupool_journal_integrity_check_seconds ")) << text.substr(0, 2000);
}

// --- the real binary ------------------------------------------------------------------

TEST(DataDirBinaryTest, ASecondServerOnTheSameDirectoryIsRefusedNamingTheLockAndItsHolder) {
  const std::string root = MakeTempDir();
  testing::ServerProcess first(root + "/data");
  ASSERT_TRUE(first.Start()) << first.log();
  const testing::BinaryRun second =
      testing::RunGpupool({"server", "--data", root + "/data", "--listen", "127.0.0.1:0"});
  EXPECT_EQ(second.exit_code, kExitStartFailed) << second.err;
  EXPECT_TRUE(Contains(second.err, root + "/data/LOCK is held by another gpupool server (pid " +
                                       std::to_string(first.pid()) + ")"))
      << second.err;
  EXPECT_EQ(first.Stop(), 0);
  fs::remove_all(root);
}

TEST(DataDirBinaryTest, ADamagedSnapshotExits65AndRecoverFromJournalRebuildsAndRewritesIt) {
  const std::string root = MakeTempDir();
  const std::string dir = root + "/data";
  {
    testing::ServerProcess s(dir);
    ASSERT_TRUE(s.Start()) << s.log();
    EXPECT_EQ(s.Stop(), 0);
  }
  FlipSnapshotByte(dir + "/gpupool.db", "read-model", 30);
  const testing::BinaryRun refused = testing::RunGpupool({"server", "--data", dir, "--listen", "127.0.0.1:0"});
  EXPECT_EQ(refused.exit_code, kExitDataLoss) << refused.err;
  EXPECT_TRUE(Contains(refused.err, dir + "/gpupool.db: read-model snapshot at seq")) << refused.err;
  {
    testing::ServerProcess s(dir, {"--recover-from-journal"});
    ASSERT_TRUE(s.Start()) << s.log();
    EXPECT_EQ(s.Stop(), 0);
  }
  testing::ServerProcess plain(dir);
  ASSERT_TRUE(plain.Start()) << plain.log();
  EXPECT_EQ(plain.Stop(), 0);
  fs::remove_all(root);
}

}  // namespace
}  // namespace gpupool
