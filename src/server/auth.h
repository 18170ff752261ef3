// Bearer tokens (docs/server.md, "Auth").
//
// Three roles: the admin (one token, kept in DIR/admin.token with mode 0600
// or in a file the operator names), tenants (one token each, returned once
// when the tenant is created) and nodes (tokens the admin issues for a
// node's agent). Only SHA-256 hashes are kept in memory and in the journal; a token is 32 random bytes, so hashing without salt
// or stretching is enough.
//
// Thread-safety: AuthStore is safe for concurrent use.
#pragma once

#include <map>
#include <optional>
#include <shared_mutex>
#include <string>

#include "src/base/status.h"
#include "src/server/env.h"

namespace gpupool {

struct Principal {
  bool admin = false;
  std::string tenant;  // for tenant tokens
  std::string node;    // for node tokens (agents): the node it may speak for
};

// Node tokens are kept beside tenant tokens under this prefix (tenant
// names cannot contain '/').
inline constexpr std::string_view kNodeTokenPrefix = "node/";

// A fresh random token "gpt_<64 hex digits>" (OpenSSL's RAND_bytes).
std::string NewToken();
std::string HashToken(std::string_view token);

// Reads the admin token from `file` when given (it must exist and hold a
// token); otherwise from DIR/admin.token, creating it (mode 0600) on first
// start (written through `env`).
Result<std::string> LoadOrCreateAdminToken(Env& env, const std::string& dir, const std::string& file);

class AuthStore {
 public:
  void SetAdmin(const std::string& token) { admin_hash_ = HashToken(token); }
  void AddTenantHash(const std::string& hash_hex, const std::string& tenant);
  // From an Authorization header value ("Bearer TOKEN"); nullopt when it is
  // missing, malformed or unknown.
  std::optional<Principal> Authenticate(std::string_view authorization) const;

 private:
  std::string admin_hash_;  // set before serving, then read-only: not guarded
  mutable std::shared_mutex mu_;
  std::map<std::string, std::string, std::less<>> tenants_;  // hash -> tenant; GUARDED_BY(mu_)
};

}  // namespace gpupool
