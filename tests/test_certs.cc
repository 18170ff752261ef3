#include "tests/test_certs.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "tests/run_binary.h"

namespace gpupool::testing {
namespace {

bool Run(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()) == 0; }

std::string Quote(const std::string& s) { return "'" + s + "'"; }

// A key and a certificate request for `cn`, then the certificate signed by
// ca/ca_key (with `ext` lines, e.g. a subjectAltName) or self-signed (a CA).
bool Make(const std::string& dir, const std::string& name, const std::string& cn, const std::string& ca,
          const std::string& ca_key, const std::string& ext) {
  const std::string key = Quote(dir + "/" + name + ".key");
  const std::string pem = Quote(dir + "/" + name + ".pem");
  const std::string curve = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " + key;
  if (ca.empty()) {
    return Run("openssl req -x509 " + curve + " -out " + pem + " -days 2 -subj /CN=" + cn +
               " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign");
  }
  const std::string csr = Quote(dir + "/" + name + ".csr");
  const std::string extfile = dir + "/" + name + ".ext";
  if (!(std::ofstream(extfile) << ext << "\n")) return false;
  return Run("openssl req -new " + curve + " -out " + csr + " -subj /CN=" + cn) &&
         Run("openssl x509 -req -in " + csr + " -CA " + Quote(ca) + " -CAkey " + Quote(ca_key) +
             " -CAcreateserial -out " + pem + " -days 2 -extfile " + Quote(extfile));
}

std::string g_dir;  // removed at exit
void RemoveDir() {
  std::error_code ec;
  if (!g_dir.empty()) std::filesystem::remove_all(g_dir, ec);
}

}  // namespace

const TestCerts* SharedTestCerts(std::string* why) {
  static std::once_flag once;
  static TestCerts certs;
  static std::string failure;
  std::call_once(once, [] {
    if (!Run("openssl version")) {
      failure = "the openssl command is not installed (scripts/install-deps.sh installs it): TLS tests skipped";
      return;
    }
    TestCerts c;
    c.dir = MakeTempDir();
    g_dir = c.dir;
    std::atexit(&RemoveDir);
    const std::string d = c.dir;
    c.ca = d + "/ca.pem";
    c.ca_key = d + "/ca.key";
    c.server_cert = d + "/server.pem";
    c.server_key = d + "/server.key";
    c.client_cert = d + "/client.pem";
    c.client_key = d + "/client.key";
    c.etcd_cert = d + "/etcd.pem";
    c.etcd_key = d + "/etcd.key";
    c.other_ca = d + "/other-ca.pem";
    c.other_client_cert = d + "/other-client.pem";
    c.other_client_key = d + "/other-client.key";
    const bool ok = Make(d, "ca", "gpupool-test-ca", "", "", "") &&
                    Make(d, "server", "gpupool-test-server", c.ca, c.ca_key,
                         "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth") &&
                    Make(d, "client", "tls-node-0", c.ca, c.ca_key, "extendedKeyUsage=clientAuth") &&
                    Make(d, "etcd", "gpupool-test-etcd", c.ca, c.ca_key,
                         "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth") &&
                    Make(d, "other-ca", "unrelated-ca", "", "", "") &&
                    Make(d, "other-client", "tls-node-0", c.other_ca, d + "/other-ca.key",
                         "extendedKeyUsage=clientAuth");
    if (!ok) {
      failure = "openssl could not make the test certificates in " + d;
      return;
    }
    certs = c;
  });
  if (!failure.empty()) {
    if (why) *why = failure;
    return nullptr;
  }
  return &certs;
}

}  // namespace gpupool::testing
