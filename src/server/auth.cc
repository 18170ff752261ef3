#include "src/server/auth.h"

#include <openssl/rand.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <tuple>

#include "src/base/check.h"
#include "src/base/sha256.h"

namespace gpupool {
namespace {

std::string Hex(const unsigned char* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = kDigits[p[i] >> 4];
    s[2 * i + 1] = kDigits[p[i] & 15];
  }
  return s;
}

bool LooksLikeToken(std::string_view t) { return t.size() >= 16 && t.size() <= 256 && t.find_first_of(" \t\r\n") == t.npos; }

Result<std::string> ReadToken(const std::string& path) {
  std::ifstream in(path);
  if (!in) return IoError(path + ": cannot open (" + std::strerror(errno) + ")");
  std::string token;
  std::getline(in, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (!LooksLikeToken(token)) return InvalidArgument(path + ": expected a token of 16 to 256 characters on the first line");
  return token;
}

// ID and secret lengths of a named token, in bytes (twice as many hex digits).
constexpr size_t kIdBytes = 8;
constexpr size_t kSecretBytes = 32;

std::string RandomHex(size_t n) {
  unsigned char bytes[64];
  GP_CHECK(n <= sizeof bytes && RAND_bytes(bytes, static_cast<int>(n)) == 1) << "RAND_bytes failed";
  return Hex(bytes, n);
}

std::string SaltedHash(std::string_view salt_hex, std::string_view token) {
  Sha256 h;
  h.Update(salt_hex);
  h.Update(":");
  h.Update(token);
  return h.HexDigest();
}

bool IsHex(std::string_view s) { return s.find_first_not_of("0123456789abcdef") == std::string_view::npos; }

// The ID of a named token ("gpt_ID_SECRET"); nullopt for any other text.
std::optional<std::string_view> NamedTokenId(std::string_view token) {
  constexpr size_t kId = 2 * kIdBytes, kSecret = 2 * kSecretBytes;
  if (token.size() != 4 + kId + 1 + kSecret || !token.starts_with("gpt_") || token[4 + kId] != '_') return std::nullopt;
  const std::string_view id = token.substr(4, kId);
  if (!IsHex(id) || !IsHex(token.substr(4 + kId + 1))) return std::nullopt;
  return id;
}

}  // namespace

std::string NewToken() { return "gpt_" + RandomHex(32); }

std::string HashToken(std::string_view token) {
  Sha256 h;
  h.Update(token);
  return h.HexDigest();
}

MintedToken MintToken(std::string principal, std::string name, std::string_view role, int64_t expires_ms) {
  MintedToken m;
  m.record.id = RandomHex(kIdBytes);
  m.token = "gpt_" + m.record.id + "_" + RandomHex(kSecretBytes);
  m.record.salt_hex = RandomHex(16);
  m.record.hash_hex = SaltedHash(m.record.salt_hex, m.token);
  m.record.tenant = std::move(principal);
  m.record.name = std::move(name);
  m.record.role = std::string(role);
  m.record.expires_ms = expires_ms;
  return m;
}

std::string TokenId(const TokenRecord& record) {
  return record.id.empty() ? record.hash_hex.substr(0, 2 * kIdBytes) : record.id;
}

std::string TokenName(const TokenRecord& record) {
  if (!record.name.empty()) return record.name;
  return TokenRole(record) == kRoleNode ? "node" : "initial";
}

std::string_view TokenRole(const TokenRecord& record) {
  if (!record.role.empty()) return record.role;
  return record.tenant.starts_with(kNodeTokenPrefix) ? kRoleNode : kRoleTenant;
}

Result<std::string> LoadOrCreateAdminToken(Env& env, const std::string& dir, const std::string& file) {
  if (!file.empty()) return ReadToken(file);
  const std::string path = (std::filesystem::path(dir) / "admin.token").string();
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) return ReadToken(path);
  const std::string token = NewToken();
  if (auto ok = env.WriteFileAtomic(path, token + "\n", 0600); !ok) {
    return IoError("cannot write the admin token: " + ok.error().message);
  }
  return token;
}

void AuthStore::Add(const TokenRecord& record) {
  std::unique_lock lock(mu_);
  const std::string id = TokenId(record);
  by_id_[id] = record;
  id_of_hash_[record.hash_hex] = id;
  pending_.erase(record.hash_hex);
}

void AuthStore::AddPending(const TokenRecord& record) {
  std::unique_lock lock(mu_);
  pending_[record.hash_hex] = record;
}

void AuthStore::DropPending(const std::string& hash_hex) {
  std::unique_lock lock(mu_);
  pending_.erase(hash_hex);
}

std::vector<TokenRecord> AuthStore::ListWithPending(const std::string& principal) const {
  std::shared_lock lock(mu_);
  std::vector<TokenRecord> out;
  for (const auto& [id, r] : by_id_) {
    if (r.tenant == principal) out.push_back(r);
  }
  for (const auto& [hash, r] : pending_) {
    if (r.tenant == principal) out.push_back(r);
  }
  return out;
}

void AuthStore::Revoke(const TokenRevocation& revocation) {
  std::unique_lock lock(mu_);
  auto h = id_of_hash_.find(revocation.hash_hex);
  if (h == id_of_hash_.end()) return;
  TokenRecord& r = by_id_.at(h->second);
  if (r.revoked_ms == 0) r.revoked_ms = revocation.revoked_ms;
}

std::optional<Principal> AuthStore::Authenticate(std::string_view authorization, int64_t now_ms) const {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() <= kBearer.size() || authorization.substr(0, kBearer.size()) != kBearer) return std::nullopt;
  const std::string_view token = authorization.substr(kBearer.size());
  if (!LooksLikeToken(token)) return std::nullopt;
  if (!admin_hash_.empty() && HashToken(token) == admin_hash_) return Principal{.admin = true};
  const std::optional<std::string_view> id = NamedTokenId(token);
  std::shared_lock lock(mu_);
  const TokenRecord* r = nullptr;
  if (id) {
    auto it = by_id_.find(*id);
    if (it == by_id_.end() || SaltedHash(it->second.salt_hex, token) != it->second.hash_hex) return std::nullopt;
    r = &it->second;
  } else {
    auto h = id_of_hash_.find(HashToken(token));
    if (h == id_of_hash_.end()) return std::nullopt;
    r = &by_id_.at(h->second);
    if (!r->salt_hex.empty()) return std::nullopt;  // a salted record is found only by its ID
  }
  if (r->revoked_ms != 0 || (r->expires_ms != 0 && now_ms >= r->expires_ms)) return std::nullopt;
  Principal p{.token_id = TokenId(*r), .token_name = TokenName(*r)};
  const std::string_view role = TokenRole(*r);
  if (role == kRoleNode) {
    p.node = r->tenant.substr(kNodeTokenPrefix.size());
  } else if (role == kRoleReader && r->tenant.empty()) {
    p.admin = p.read_only = true;
  } else {
    p.tenant = r->tenant;
    p.read_only = role == kRoleReader;
  }
  return p;
}

std::vector<TokenRecord> AuthStore::List(const std::string& principal) const {
  std::shared_lock lock(mu_);
  std::vector<TokenRecord> out;
  for (const auto& [id, r] : by_id_) {
    if (principal.empty() || r.tenant == principal) out.push_back(r);
  }
  std::sort(out.begin(), out.end(), [](const TokenRecord& a, const TokenRecord& b) {
    return std::tie(a.created_ms, a.hash_hex) < std::tie(b.created_ms, b.hash_hex);
  });
  return out;
}

std::optional<TokenRecord> AuthStore::Find(std::string_view id) const {
  std::shared_lock lock(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return std::nullopt;
  return it->second;
}

int AuthStore::LiveCount(const std::string& principal, int64_t now_ms) const {
  std::shared_lock lock(mu_);
  int n = 0;
  for (const auto& [id, r] : by_id_) {
    n += r.tenant == principal && r.revoked_ms == 0 && (r.expires_ms == 0 || now_ms < r.expires_ms);
  }
  return n;
}

}  // namespace gpupool
