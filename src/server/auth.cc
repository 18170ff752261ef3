#include "src/server/auth.h"

#include <openssl/rand.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

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

}  // namespace

std::string NewToken() {
  unsigned char bytes[32];
  GP_CHECK(RAND_bytes(bytes, sizeof bytes) == 1) << "RAND_bytes failed";
  return "gpt_" + Hex(bytes, sizeof bytes);
}

std::string HashToken(std::string_view token) {
  Sha256 h;
  h.Update(token);
  return h.HexDigest();
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

void AuthStore::AddTenantHash(const std::string& hash_hex, const std::string& tenant) {
  std::unique_lock lock(mu_);
  tenants_[hash_hex] = tenant;
}

std::optional<Principal> AuthStore::Authenticate(std::string_view authorization) const {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() <= kBearer.size() || authorization.substr(0, kBearer.size()) != kBearer) return std::nullopt;
  const std::string_view token = authorization.substr(kBearer.size());
  if (!LooksLikeToken(token)) return std::nullopt;
  const std::string hash = HashToken(token);
  if (!admin_hash_.empty() && hash == admin_hash_) return Principal{true, ""};
  std::shared_lock lock(mu_);
  auto it = tenants_.find(hash);
  if (it == tenants_.end()) return std::nullopt;
  if (it->second.starts_with(kNodeTokenPrefix)) return Principal{false, "", it->second.substr(kNodeTokenPrefix.size())};
  return Principal{false, it->second};
}

}  // namespace gpupool
