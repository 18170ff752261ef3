// Incremental SHA-256 (OpenSSL's libcrypto), for fingerprints of event logs.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace gpupool {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(std::string_view bytes);
  // Lower-case hex digest. The hasher must not be updated afterwards.
  std::string HexDigest();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpupool
