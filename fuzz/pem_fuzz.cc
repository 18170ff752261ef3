// libFuzzer target: the PEM files an operator names on the command line, as
// the server (LoadTlsIdentity, GnuTLS: --tls-cert, --tls-key,
// --agent-ca-cert) and the clients (CheckClientTls, OpenSSL: --ca-cert,
// --client-cert, --client-key) read them at start-up. Any bytes must give a
// value or an error naming the flag, never a crash.
//
// Input: two bytes (little-endian) give the length of the certificate part;
// the certificate part follows, and the rest is the key part. Both are
// written to memory files and named by /proc/self/fd paths, so the loaders
// read them exactly as they read an operator's files.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "src/base/client_tls.h"
#include "src/http/tls.h"

namespace {

// A memory file holding `bytes`; closed when it goes out of scope.
class MemoryFile {
 public:
  explicit MemoryFile(std::string_view bytes) : fd_(memfd_create("pem", 0)) {
    if (fd_ < 0) std::abort();  // the target cannot run without memory files
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = write(fd_, bytes.data() + done, bytes.size() - done);
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
  }
  ~MemoryFile() { close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t cert_bytes = std::min<size_t>(size - 2, data[0] | (size_t{data[1]} << 8));
  const std::string_view rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  const MemoryFile cert(rest.substr(0, cert_bytes));
  const MemoryFile key(rest.substr(cert_bytes));
  (void)gpupool::http::LoadTlsIdentity({"--tls-cert", cert.path()}, {"--tls-key", key.path()},
                                       {"--agent-ca-cert", cert.path()});
  gpupool::ClientTls tls;
  tls.ca_cert_file = cert.path();
  tls.client_cert_file = cert.path();
  tls.client_key_file = key.path();
  (void)gpupool::CheckClientTls(tls);
  return 0;
}
