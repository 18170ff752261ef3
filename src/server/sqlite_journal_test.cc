// The SQLite journal's schema migration: a version-1 database (before named
// tokens) opens as version 2 with its tokens intact, and takes the new
// fields and revocations.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>

#include "src/server/journal.h"
#include "tests/run_binary.h"

namespace gpupool {
namespace {

void Exec(sqlite3* db, const char* sql) { ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sql; }

std::string SchemaVersion(const std::string& path) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = 'schema_version'", -1, &st, nullptr);
  std::string v = sqlite3_step(st) == SQLITE_ROW ? reinterpret_cast<const char*>(sqlite3_column_text(st, 0)) : "";
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

TEST(SqliteJournalTest, AVersion1DatabaseMigratesToVersion2KeepingItsTokens) {
  const std::string dir = testing::MakeTempDir();
  const std::string path = dir + "/gpupool.db";
  {
    // The schema as version 1 wrote it.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    Exec(db, "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)");
    Exec(db, "CREATE TABLE events(seq INTEGER PRIMARY KEY, at_ms INTEGER NOT NULL, type TEXT NOT NULL, body TEXT NOT NULL)");
    Exec(db, "CREATE TABLE snapshots(kind TEXT NOT NULL, seq INTEGER NOT NULL, created_ms INTEGER NOT NULL, "
             "bytes BLOB NOT NULL, PRIMARY KEY(kind, seq))");
    Exec(db, "CREATE TABLE tokens(hash TEXT PRIMARY KEY, tenant TEXT NOT NULL, created_ms INTEGER NOT NULL)");
    Exec(db, "INSERT INTO meta VALUES ('schema_version', '1')");
    Exec(db, "INSERT INTO tokens VALUES ('h-old', 'team', 5), ('h-node', 'node/n1', 6)");
    sqlite3_close(db);
  }
  {
    auto j = OpenSqliteJournal(dir);
    ASSERT_TRUE(j.has_value()) << j.error().message;
    EXPECT_EQ(SchemaVersion(path), "2");
    auto tokens = (*j)->Tokens();
    ASSERT_TRUE(tokens.has_value());
    ASSERT_EQ(tokens->size(), 2u);
    EXPECT_EQ((*tokens)[0].hash_hex, "h-old");
    EXPECT_EQ((*tokens)[0].tenant, "team");
    EXPECT_EQ((*tokens)[0].created_ms, 5);
    EXPECT_TRUE((*tokens)[0].id.empty());
    EXPECT_EQ((*tokens)[0].revoked_ms, 0);
    JournalBatch b{.tokens = {TokenRecord{.hash_hex = "h-new", .tenant = "team", .created_ms = 7, .id = "ab", .name = "ci",
                                          .salt_hex = "5a", .role = "tenant", .expires_ms = 70}},
                   .revocations = {{"h-old", 8}}};
    ASSERT_TRUE((*j)->Commit(b).has_value());
  }
  // Opened again: version 2 stays, nothing is migrated twice.
  auto j = OpenSqliteJournal(dir);
  ASSERT_TRUE(j.has_value()) << j.error().message;
  auto tokens = *(*j)->Tokens();
  ASSERT_EQ(tokens.size(), 3u);
  EXPECT_EQ(tokens[0].revoked_ms, 8);
  EXPECT_EQ(tokens[2].name, "ci");
  EXPECT_EQ(tokens[2].expires_ms, 70);
  j->reset();
  std::filesystem::remove_all(dir);
}

TEST(SqliteJournalTest, ANewerSchemaIsRefusedNamingTheVersions) {
  const std::string dir = testing::MakeTempDir();
  {
    auto j = OpenSqliteJournal(dir);
    ASSERT_TRUE(j.has_value());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir + "/gpupool.db").c_str(), &db), SQLITE_OK);
  Exec(db, "UPDATE meta SET value = '3' WHERE key = 'schema_version'");
  sqlite3_close(db);
  auto j = OpenSqliteJournal(dir);
  ASSERT_FALSE(j.has_value());
  EXPECT_NE(j.error().message.find("schema version 3; this gpupool reads versions 1 and 2"), std::string::npos)
      << j.error().message;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpupool
