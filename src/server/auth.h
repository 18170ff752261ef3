// Bearer tokens (docs/server.md, "Auth"; docs/security.md).
//
// Roles: the admin (one token, kept in DIR/admin.token with mode 0600 or in
// a file the operator names), tenants (any number of named tokens each; the
// first, "initial", returned when the tenant is created), readers (named
// read-only tokens, of one tenant or of the whole pool, for dashboards) and
// nodes (one token per node's agent, issued by the admin; issuing another
// revokes the one before).
//
// A token is "gpt_ID_SECRET": ID is 16 hex digits, public (it names the
// token in lists, revocations and the audit), SECRET 64 hex digits of
// OpenSSL's RAND_bytes. Only SHA-256(SALT ":" TOKEN) is kept, with a
// per-token random SALT stored beside it: no server-wide key, so replicated
// servers share no secret. A token is 256 random bits, so one round of
// hashing is enough. Tokens of earlier releases ("gpt_" and 64 hex digits,
// stored as a plain SHA-256) keep working until revoked; their ID is the
// first 16 hex digits of that hash.
//
// A token may carry an expiry; revocation is a journaled record, so it
// survives restarts and reaches every replica with the journal.
//
// Thread-safety: AuthStore is safe for concurrent use.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "src/base/status.h"
#include "src/server/env.h"
#include "src/server/journal.h"

namespace gpupool {

// Node tokens are kept beside tenant tokens under this prefix (tenant
// names cannot contain '/').
inline constexpr std::string_view kNodeTokenPrefix = "node/";
// TokenRecord::role values.
inline constexpr std::string_view kRoleTenant = "tenant";
inline constexpr std::string_view kRoleReader = "reader";
inline constexpr std::string_view kRoleNode = "node";
// The most tokens one principal (a tenant, or the pool's readers) holds
// unrevoked at once.
inline constexpr int kMaxLiveTokensPerPrincipal = 64;

struct Principal {
  bool admin = false;      // the admin, or a pool-wide reader (with read_only)
  bool read_only = false;  // a reader: GET only
  std::string tenant;      // tenant tokens and a tenant's readers
  std::string node;        // node tokens (agents): the node it may speak for
  std::string token_id;    // "" for the admin token
  std::string token_name;  // "" for the admin token
};

// A fresh random token of the earlier form, "gpt_<64 hex digits>" (the
// admin token, and random suffixes elsewhere).
std::string NewToken();
// SHA-256 of the token alone: how earlier releases stored tokens.
std::string HashToken(std::string_view token);

// A new named token and the record that stores it (created_ms left to the
// command that journals it).
struct MintedToken {
  std::string token;   // shown once
  TokenRecord record;  // hash, salt, id, name, principal, role, expiry
};
// `principal` is a tenant's name, "node/NAME", or "" (with kRoleReader: the
// whole pool); expires_ms 0: never.
MintedToken MintToken(std::string principal, std::string name, std::string_view role, int64_t expires_ms = 0);

// Reads the admin token from `file` when given (it must exist and hold a
// token); otherwise from DIR/admin.token, creating it (mode 0600) on first
// start (written through `env`).
Result<std::string> LoadOrCreateAdminToken(Env& env, const std::string& dir, const std::string& file);

class AuthStore {
 public:
  void SetAdmin(const std::string& token) { admin_hash_ = HashToken(token); }
  // A durable token record (a revoked one stays listed and refused).
  void Add(const TokenRecord& record);
  // A durable revocation; unknown hashes are ignored.
  void Revoke(const TokenRevocation& revocation);
  // From an Authorization header value ("Bearer TOKEN"); nullopt when it is
  // missing, malformed, unknown, revoked or expired at `now_ms`.
  std::optional<Principal> Authenticate(std::string_view authorization, int64_t now_ms) const;

  // Every record (revoked ones too), oldest first; `principal` non-empty:
  // only that principal's.
  std::vector<TokenRecord> List(const std::string& principal = "") const;
  // The record of a token by its ID (legacy IDs included).
  std::optional<TokenRecord> Find(std::string_view id) const;
  // Tokens of `principal` (a tenant's name, "node/NAME", "" for the pool's
  // readers) neither revoked nor expired at `now_ms`.
  int LiveCount(const std::string& principal, int64_t now_ms) const;

  // Tokens accepted but not yet durable (their batch is being committed):
  // CreateTokenCmd counts them against kMaxLiveTokensPerPrincipal and their
  // names as taken, so that creates in flight together cannot pass the
  // limit or share a name. Never authenticated or listed. Add() of the same
  // hash ends a reservation; DropPending() ends one whose batch was refused.
  void AddPending(const TokenRecord& record);
  void DropPending(const std::string& hash_hex);
  // List(principal) and the principal's reservations, read under one lock
  // (two reads could miss a token committed between them).
  std::vector<TokenRecord> ListWithPending(const std::string& principal) const;

 private:
  std::string admin_hash_;  // set before serving, then read-only: not guarded
  mutable std::shared_mutex mu_;
  std::map<std::string, TokenRecord, std::less<>> by_id_;     // GUARDED_BY(mu_)
  std::map<std::string, std::string, std::less<>> id_of_hash_;  // GUARDED_BY(mu_); hash -> id
  std::map<std::string, TokenRecord, std::less<>> pending_;     // GUARDED_BY(mu_); hash -> record
};

// The ID a stored record goes by (its own, or the legacy one from its hash).
std::string TokenId(const TokenRecord& record);
// The name a record goes by (records of earlier releases: "initial" for a
// tenant's, "node" for a node's).
std::string TokenName(const TokenRecord& record);
// The role of a record (legacy records: node or tenant by their principal).
std::string_view TokenRole(const TokenRecord& record);

}  // namespace gpupool
