// TLS to etcd (issue 22): a real etcd on loopback serving https:// and
// asking every client for a certificate (--client-cert-auth), with
// certificates made at test time. The client verifies etcd's certificate
// and presents its own; a wrong CA, a missing client certificate and a
// client certificate of another CA are refused with messages naming the
// flag to check; `gpupool server --etcd https://...` leads and keeps its
// journal there. Skipped without etcd or openssl.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "src/server/etcd_client.h"
#include "src/server/testing/etcd_cluster.h"
#include "tests/run_binary.h"
#include "tests/server_process.h"
#include "tests/test_certs.h"

namespace gpupool::testing {
namespace {

using nlohmann::json;

class EtcdTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (EtcdBinary().empty()) GTEST_SKIP() << kNoEtcdMessage;
    std::string why;
    certs_ = SharedTestCerts(&why);
    if (certs_ == nullptr) GTEST_SKIP() << why;
    etcd_ = std::make_unique<EtcdCluster>(
        1, EtcdTestTls{certs_->etcd_cert, certs_->etcd_key, certs_->ca, true, certs_->client_cert, certs_->client_key});
    ASSERT_TRUE(etcd_->Start()) << etcd_->error();
    root_ = MakeTempDir();
  }
  void TearDown() override {
    if (!root_.empty()) std::filesystem::remove_all(root_);
  }

  // A client of the cluster trusting `ca` and presenting `cert`/`key` (none when empty).
  std::unique_ptr<EtcdClient> Client(const std::string& ca, const std::string& cert, const std::string& key) {
    EtcdClientOptions o{etcd_->EndpointList(), std::chrono::milliseconds(500), std::chrono::milliseconds(3000)};
    o.tls.ca_cert_file = ca;
    o.tls.ca_given_as = "--etcd-ca-cert";
    o.tls.ca_hint = "check --etcd-ca-cert";
    o.tls.client_cert_file = cert;
    o.tls.client_key_file = key;
    o.tls.cert_given_as = "--etcd-cert";
    return std::make_unique<EtcdClient>(std::move(o));
  }

  const TestCerts* certs_ = nullptr;
  std::unique_ptr<EtcdCluster> etcd_;
  std::string root_;
};

TEST_F(EtcdTlsTest, TheClientVerifiesEtcdAndPresentsItsCertificate) {
  ASSERT_TRUE(etcd_->Endpoints().starts_with("https://127.0.0.1:")) << etcd_->Endpoints();
  auto c = Client(certs_->ca, certs_->client_cert, certs_->client_key);
  auto put = c->Put("/gpupool/tls/k", "v");
  ASSERT_TRUE(put) << put.error().message;
  auto got = c->Range(EtcdRange{"/gpupool/tls/k"});
  ASSERT_TRUE(got) << got.error().message;
  ASSERT_EQ(got->kvs.size(), 1u);
  EXPECT_EQ(got->kvs[0].value, "v");
}

TEST_F(EtcdTlsTest, AWrongCaOrAMissingOrForeignClientCertificateIsRefusedNamingWhatToCheck) {
  auto wrong_ca = Client(certs_->other_ca, certs_->client_cert, certs_->client_key)->Version();
  ASSERT_FALSE(wrong_ca);
  EXPECT_NE(wrong_ca.error().message.find("TLS: certificate verify failed for " + etcd_->EndpointList()[0]),
            std::string::npos)
      << wrong_ca.error().message;
  EXPECT_NE(wrong_ca.error().message.find("check --etcd-ca-cert"), std::string::npos) << wrong_ca.error().message;

  // etcd refuses the handshake (or, with TLS 1.3, closes right after it).
  auto no_cert = Client(certs_->ca, "", "")->Version();
  ASSERT_FALSE(no_cert);
  EXPECT_NE(no_cert.error().message.find("client certificate"), std::string::npos) << no_cert.error().message;

  auto foreign = Client(certs_->ca, certs_->other_client_cert, certs_->other_client_key)->Version();
  ASSERT_FALSE(foreign);
  EXPECT_NE(foreign.error().message.find("--etcd-cert " + certs_->other_client_cert), std::string::npos)
      << foreign.error().message;

  // Plain HTTP to the TLS port gets no answer etcd's gateway would give.
  EtcdClient plain(EtcdClientOptions{{"http://" + etcd_->EndpointList()[0].substr(8)},
                                     std::chrono::milliseconds(500), std::chrono::milliseconds(3000)});
  EXPECT_FALSE(plain.Version());
}

TEST_F(EtcdTlsTest, AServerLeadsOverTlsAndAWrongCaStopsItNamingTheFlag) {
  const std::string config = root_ + "/config.yaml";
  std::ofstream(config) << "name: tls\npools:\n  - name: h100\n    models: [H100]\n";
  const std::vector<std::string> etcd_flags = {"--etcd",      etcd_->Endpoints(), "--etcd-prefix", "/gpupool/tls",
                                               "--etcd-ca-cert", certs_->ca,      "--etcd-cert",   certs_->client_cert,
                                               "--etcd-key",  certs_->client_key};
  std::vector<std::string> args = {"--config", config, "--lease-ttl", "2"};
  args.insert(args.end(), etcd_flags.begin(), etcd_flags.end());
  ServerProcess server(root_ + "/a", args);
  ASSERT_TRUE(server.Start()) << server.log();
  auto t = Http(server, "POST", "/v1/tenants", server.admin_token(),
                json{{"name", "team-a"}, {"quota", {{"h100", {{"guaranteed_gpus", 0}, {"limit_gpus", 8}}}}}});
  ASSERT_EQ(t.status, 201) << t.text;
  const int64_t seq = Http(server, "GET", "/healthz", "").body["last_seq"];
  ASSERT_EQ(server.Stop(), 0) << server.log();
  // The journal is in etcd, read here over TLS.
  auto c = Client(certs_->ca, certs_->client_cert, certs_->client_key);
  EXPECT_GE(seq, 1);
  auto batches = c->Range(EtcdRange{"/gpupool/tls/journal/", PrefixEnd("/gpupool/tls/journal/"), 0, false, true, true});
  ASSERT_TRUE(batches) << batches.error().message;
  EXPECT_GE(batches->count, 1);

  std::vector<std::string> wrong = {"server", "--data", root_ + "/b", "--listen", "127.0.0.1:0", "--config", config};
  wrong.insert(wrong.end(), etcd_flags.begin(), etcd_flags.end());
  wrong[wrong.size() - 5] = certs_->other_ca;  // --etcd-ca-cert's value
  auto run = RunGpupool(wrong);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("error: cannot reach etcd at " + etcd_->Endpoints()), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("TLS: certificate verify failed"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("check --etcd-ca-cert"), std::string::npos) << run.err;
}

TEST_F(EtcdTlsTest, TlsFlagsAreCheckedBeforeAnyRequest) {
  const auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"server", "--data", root_ + "/c", "--listen", "127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunGpupool(args);
  };
  auto missing = run({"--etcd", etcd_->Endpoints(), "--etcd-ca-cert", root_ + "/nope.pem"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--etcd-ca-cert " + root_ + "/nope.pem: cannot read"), std::string::npos) << missing.err;
  auto half = run({"--etcd", etcd_->Endpoints(), "--etcd-cert", certs_->client_cert});
  EXPECT_EQ(half.exit_code, 2);
  EXPECT_NE(half.err.find("--etcd-cert is given without --etcd-key"), std::string::npos) << half.err;
  auto plain = run({"--etcd", "http://127.0.0.1:1", "--etcd-ca-cert", certs_->ca});
  EXPECT_EQ(plain.exit_code, 2);
  EXPECT_NE(plain.err.find("--etcd-ca-cert is for TLS to etcd: give https:// endpoints"), std::string::npos)
      << plain.err;
  auto remote = run({"--etcd", "http://10.1.2.3:2379"});
  EXPECT_EQ(remote.exit_code, 2);
  EXPECT_NE(remote.err.find("--etcd http://10.1.2.3:2379 is plain HTTP to an address that is not loopback"),
            std::string::npos)
      << remote.err;
  auto mixed = run({"--etcd", "http://127.0.0.1:1," + etcd_->EndpointList()[0]});
  EXPECT_EQ(mixed.exit_code, 2);
  EXPECT_NE(mixed.err.find("mix http:// and https://"), std::string::npos) << mixed.err;
}

}  // namespace
}  // namespace gpupool::testing
