// The rules a server's data directory keeps (issue 22): it is never
// silently replaced, never shared by two servers, and readable by its
// owner only.
//
//  - DIR/LOCK, held with flock for the server's lifetime
//    (Env::LockDataDirectory), keeps a second server out.
//  - DIR/IDENTITY holds the directory's identity: a random id made when its
//    state is created (the bootstrap), kept in the journal's meta too
//    (kIdentityMeta). Start-up compares the two (ServerCore::CheckIdentity):
//    files but no state (a missing or emptied database) is refused, a
//    database whose identity differs from the file's (copied from another
//    directory) is refused, a missing file is written again, and a database
//    of an earlier release (no identity) is given one. Task logs live under
//    DIR/logs/ID/, so a new system never serves an old one's output.
//  - Files the server creates are 0600, directories 0700; start-up tightens
//    what it finds looser (TightenPermissions).
//
// These functions touch the real file system (they run before any Env
// write and a test Env uses real directories too).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/base/status.h"
#include "src/server/env.h"

namespace gpupool {

inline constexpr const char* kIdentityFile = "IDENTITY";
inline constexpr const char* kIdentityMeta = "data_dir_id";
inline constexpr const char* kDatabaseFile = "gpupool.db";

// What DIR holds besides its database (gpupool.db and its -wal, -shm and
// -journal) and LOCK, by name, sorted: anything there means the directory
// has served a system. Empty when DIR does not exist.
Result<std::vector<std::string>> FilesBesidesDatabase(const std::string& dir);

// A new identity: 32 hex digits from the system's random source.
std::string NewDataDirId();

// DIR/IDENTITY's id; nullopt when the file is missing. kDataLoss when it
// holds something other than an id.
Result<std::optional<std::string>> ReadIdentityFile(const std::string& dir);
// Writes DIR/IDENTITY (0600, durably).
Status WriteIdentityFile(Env& env, const std::string& dir, const std::string& id);

// Takes group and other permissions off DIR itself, the regular files at
// its top, and everything under DIR/logs and DIR/tokens (the server's own
// files; dev mode's agent folders under DIR are left as they are).
// Returns how many entries changed. Symbolic links are not followed.
Result<int64_t> TightenPermissions(const std::string& dir);

// Moves task logs written before identities (DIR/logs/JOB/...) under
// DIR/logs/ID/; returns how many jobs' folders moved.
Result<int64_t> MoveLegacyLogs(const std::string& logs_dir, const std::string& id);

}  // namespace gpupool
