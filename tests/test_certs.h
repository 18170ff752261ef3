// Certificates made at test time with the openssl command (issue 22's TLS
// tests): a CA, a server certificate it signed for 127.0.0.1 and localhost,
// a client certificate it signed (mutual TLS), one for etcd, and a second, unrelated CA
// with a client certificate of its own (the wrong-CA cases). EC P-256 keys,
// valid for two days; made once per test process and shared.
#pragma once

#include <string>

namespace gpupool::testing {

struct TestCerts {
  std::string dir;
  std::string ca, ca_key;                    // the CA (PEM)
  std::string server_cert, server_key;       // subjectAltName IP:127.0.0.1, DNS:localhost
  std::string client_cert, client_key;       // signed by the CA
  // For etcd (serverAuth and clientAuth: its JSON gateway dials etcd's own
  // gRPC with the server certificate), subjectAltName IP:127.0.0.1.
  std::string etcd_cert, etcd_key;
  std::string other_ca;                      // an unrelated CA
  std::string other_client_cert, other_client_key;  // signed by the unrelated CA
};

// The shared set; nullptr when the openssl command is missing or failed,
// with the reason in *why (the caller skips: GTEST_SKIP() << *why).
const TestCerts* SharedTestCerts(std::string* why);

}  // namespace gpupool::testing
