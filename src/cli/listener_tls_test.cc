#include "src/cli/listener_tls.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

TEST(TlsLoopbackTest, OnlyLoopbackAddressesAndLocalhostAreLoopback) {
  for (const char* host : {"127.0.0.1", "127.0.0.2", "127.255.255.254", "::1", "[::1]", "localhost"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
  }
  for (const char* host : {"0.0.0.0", "::", "[::]", "", "10.0.0.1", "128.0.0.1", "192.168.1.7", "::ffff:127.0.0.1",
                           "fe80::1", "localhost.example.com", "gpupool.internal", "127.0.0.1.nip.io"}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
}

TEST(TlsLoopbackTest, APlainNonLoopbackListenerNeedsInsecure) {
  EXPECT_TRUE(CheckPlainListener("--listen", "127.0.0.1", /*tls=*/false, /*insecure=*/false).has_value());
  EXPECT_TRUE(CheckPlainListener("--listen", "0.0.0.0", /*tls=*/true, /*insecure=*/false).has_value());
  auto refused = CheckPlainListener("--agent-listen", "0.0.0.0", /*tls=*/false, /*insecure=*/false);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().message,
            "--agent-listen 0.0.0.0 is not a loopback address and would serve plain HTTP (tokens in clear): give "
            "--tls-cert and --tls-key, or --insecure to serve plain HTTP anyway");
  testing::internal::CaptureStderr();
  EXPECT_TRUE(CheckPlainListener("--listen", "0.0.0.0", /*tls=*/false, /*insecure=*/true).has_value());
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("\"level\":\"warning\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"listener\":\"--listen\""), std::string::npos) << log;
}

TEST(TlsLoopbackTest, TheListenerFlagsGoTogether) {
  ListenerTlsFlags f;
  EXPECT_FALSE(LoadListenerTls(f).value().has_value());  // plain
  f.cert = "c.pem";
  EXPECT_EQ(LoadListenerTls(f).error().message, "--tls-cert is given without --tls-key");
  f = {};
  f.key = "k.pem";
  EXPECT_EQ(LoadListenerTls(f).error().message, "--tls-key is given without --tls-cert");
  f = {};
  f.client_ca = "ca.pem";
  EXPECT_EQ(LoadListenerTls(f).error().message, "--agent-ca-cert needs TLS: give --tls-cert and --tls-key too");
}

}  // namespace
}  // namespace gpupool
