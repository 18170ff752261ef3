// TLS listeners (src/http/tls.h) answered through gpupool's clients
// (src/base/http_client.h), with certificates made at test time.
#include "src/http/tls.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include "src/base/http_client.h"
#include "src/http/server.h"
#include "tests/test_certs.h"

namespace gpupool::http {
namespace {

using testing::SharedTestCerts;
using testing::TestCerts;

class TlsListenerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    certs_ = SharedTestCerts(&why);
    if (certs_ == nullptr) GTEST_SKIP() << why;
  }

  TlsIdentity Identity(const std::string& client_ca = "") const {
    auto id = LoadTlsIdentity({"--tls-cert", certs_->server_cert}, {"--tls-key", certs_->server_key},
                              {"--agent-ca-cert", client_ca});
    EXPECT_TRUE(id.has_value()) << id.error().message;
    return id.value_or(TlsIdentity{});
  }

  // A server answering GET /healthz with "ok" on one listener of 127.0.0.1.
  int Serve(std::optional<TlsIdentity> tls) {
    server_ = std::make_unique<Server>(ServerOptions{});
    server_->Add(Route{"GET", "/healthz", "healthz", Lane::kReserved, [](const ExchangePtr& ex) {
                         Response r;
                         r.body = "ok";
                         ex->Respond(std::move(r));
                       }});
    Limits limits;
    auto port = server_->Listen("127.0.0.1", 0, limits, false, std::move(tls));
    EXPECT_TRUE(port.has_value()) << port.error().message;
    auto started = server_->Start();
    EXPECT_TRUE(started.has_value()) << started.error().message;
    return port.value_or(0);
  }

  struct Answer {
    int status = 0;  // 0: none
    std::string body;
    std::string failure;  // DescribeHttpFailure's text when there was no answer
  };
  static Answer Get(const std::string& url, const ClientTls& tls) {
    auto client = NewHttpClient(url, tls);
    client->set_connection_timeout(std::chrono::seconds(5));
    client->set_read_timeout(std::chrono::seconds(5));
    auto res = client->Get("/healthz");
    if (!res) return Answer{0, "", DescribeHttpFailure(*client, res.error(), url, tls)};
    return Answer{res->status, res->body, ""};
  }
  ClientTls Trusting(const std::string& ca) const {
    ClientTls t;
    t.ca_cert_file = ca;
    return t;
  }
  static std::string Url(const char* scheme, int port) {
    return std::string(scheme) + "://127.0.0.1:" + std::to_string(port);
  }

  const TestCerts* certs_ = nullptr;
  std::unique_ptr<Server> server_;
};

TEST_F(TlsListenerTest, AnswersHealthzOverHttpsWithTheRightCa) {
  ASSERT_TRUE(TlsSupported());
  const int port = Serve(Identity());
  const Answer a = Get(Url("https", port), Trusting(certs_->ca));
  EXPECT_EQ(a.status, 200) << a.failure;
  EXPECT_EQ(a.body, "ok");
  // The certificate names localhost too.
  const Answer b = Get("https://localhost:" + std::to_string(port), Trusting(certs_->ca));
  EXPECT_EQ(b.status, 200) << b.failure;
}

TEST_F(TlsListenerTest, AWrongCaIsRefusedWithAClearMessage) {
  const int port = Serve(Identity());
  const Answer a = Get(Url("https", port), Trusting(certs_->other_ca));
  EXPECT_EQ(a.status, 0);
  EXPECT_TRUE(a.failure.starts_with("TLS: certificate verify failed for " + Url("https", port) + " ("))
      << a.failure;
  EXPECT_NE(a.failure.find("check --ca-cert"), std::string::npos) << a.failure;
  // No CA given: the system's CAs do not know the test CA either.
  EXPECT_TRUE(Get(Url("https", port), ClientTls{}).failure.starts_with("TLS: certificate verify failed"));
}

TEST_F(TlsListenerTest, PlainHttpToATlsListenerFailsCleanlyAndTheListenerServesOn) {
  const int port = Serve(Identity());
  const Answer plain = Get(Url("http", port), ClientTls{});
  EXPECT_EQ(plain.status, 0);
  EXPECT_NE(plain.failure.find("if the server serves TLS, use https://"), std::string::npos) << plain.failure;
  EXPECT_EQ(Get(Url("https", port), Trusting(certs_->ca)).status, 200);
}

TEST_F(TlsListenerTest, HttpsToAPlainListenerFailsCleanly) {
  const int port = Serve(std::nullopt);
  const Answer a = Get(Url("https", port), Trusting(certs_->ca));
  EXPECT_EQ(a.status, 0);
  EXPECT_TRUE(a.failure.starts_with("TLS: handshake with " + Url("https", port) + " failed")) << a.failure;
  EXPECT_NE(a.failure.find("use http://"), std::string::npos) << a.failure;
}

TEST_F(TlsListenerTest, ClientCertificatesAreRequiredAndVerifiedInTheHandshake) {
  const int port = Serve(Identity(certs_->ca));
  ClientTls none = Trusting(certs_->ca);
  EXPECT_EQ(Get(Url("https", port), none).status, 0) << "no client certificate";
  ClientTls other = Trusting(certs_->ca);
  other.client_cert_file = certs_->other_client_cert;
  other.client_key_file = certs_->other_client_key;
  EXPECT_EQ(Get(Url("https", port), other).status, 0) << "a client certificate of another CA";
  ClientTls good = Trusting(certs_->ca);
  good.client_cert_file = certs_->client_cert;
  good.client_key_file = certs_->client_key;
  const Answer a = Get(Url("https", port), good);
  EXPECT_EQ(a.status, 200) << a.failure;
}

TEST_F(TlsListenerTest, BadFilesAreNamedWithTheirFlag) {
  const std::string missing = certs_->dir + "/missing.pem";
  auto gone = LoadTlsIdentity({"--tls-cert", missing}, {"--tls-key", certs_->server_key});
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().message, "--tls-cert " + missing + ": cannot read: No such file or directory");

  auto key_as_cert = LoadTlsIdentity({"--tls-cert", certs_->server_key}, {"--tls-key", certs_->server_key});
  ASSERT_FALSE(key_as_cert);
  EXPECT_TRUE(key_as_cert.error().message.starts_with("--tls-cert " + certs_->server_key + ": not a PEM certificate"))
      << key_as_cert.error().message;

  auto cert_as_key = LoadTlsIdentity({"--tls-cert", certs_->server_cert}, {"--tls-key", certs_->server_cert});
  ASSERT_FALSE(cert_as_key);
  EXPECT_TRUE(cert_as_key.error().message.starts_with("--tls-key " + certs_->server_cert + ": not a PEM private key"))
      << cert_as_key.error().message;

  auto mismatch = LoadTlsIdentity({"--tls-cert", certs_->server_cert}, {"--tls-key", certs_->client_key});
  ASSERT_FALSE(mismatch);
  EXPECT_EQ(mismatch.error().message, "--tls-key " + certs_->client_key + " does not match the certificate in --tls-cert " +
                                          certs_->server_cert);

  auto bad_ca = LoadTlsIdentity({"--tls-cert", certs_->server_cert}, {"--tls-key", certs_->server_key},
                                {"--agent-ca-cert", certs_->ca_key});
  ASSERT_FALSE(bad_ca);
  EXPECT_TRUE(bad_ca.error().message.starts_with("--agent-ca-cert " + certs_->ca_key + ": not a PEM CA certificate"))
      << bad_ca.error().message;
}

TEST_F(TlsListenerTest, ClientFilesAreCheckedBeforeAnyRequest) {
  ClientTls t;
  t.ca_cert_file = certs_->dir + "/missing.pem";
  EXPECT_EQ(CheckClientTls(t).error().message, "--ca-cert " + t.ca_cert_file + ": cannot read: No such file or directory");
  t.ca_cert_file = certs_->ca_key;
  EXPECT_EQ(CheckClientTls(t).error().message, "--ca-cert " + certs_->ca_key + ": no PEM certificate in it");
  t.ca_cert_file = certs_->ca;
  t.client_cert_file = certs_->client_cert;
  EXPECT_EQ(CheckClientTls(t).error().message, "--client-cert is given without --client-key");
  t.client_key_file = certs_->server_key;
  EXPECT_EQ(CheckClientTls(t).error().message,
            "--client-key " + certs_->server_key + " does not match --client-cert " + certs_->client_cert);
  t.client_key_file = certs_->client_key;
  EXPECT_TRUE(CheckClientTls(t).has_value());
}

}  // namespace
}  // namespace gpupool::http
