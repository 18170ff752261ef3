#include "src/cli/etcd_flags.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

TEST(EtcdFlagsTest, PlainEtcdIsForLoopbackUnlessInsecure) {
  auto loopback = EtcdClientOptionsFromFlags({"http://127.0.0.1:2379,http://[::1]:2379"}, false);
  ASSERT_TRUE(loopback) << loopback.error().message;
  EXPECT_EQ(loopback->endpoints.size(), 2u);
  auto remote = EtcdClientOptionsFromFlags({"http://127.0.0.1:2379,http://etcd-1:2379"}, false);
  ASSERT_FALSE(remote);
  EXPECT_EQ(remote.error().message,
            "--etcd http://etcd-1:2379 is plain HTTP to an address that is not loopback (the journal, job "
            "environments included, in clear): use https:// with --etcd-ca-cert, or --insecure to use plain HTTP "
            "anyway");
  EXPECT_TRUE(EtcdClientOptionsFromFlags({"http://etcd-1:2379"}, true));
}

TEST(EtcdFlagsTest, TlsFlagsNeedHttpsAndTheirFilesAreChecked) {
  auto plain = EtcdClientOptionsFromFlags({"http://127.0.0.1:2379", "", "", "/k.pem"}, false);
  ASSERT_FALSE(plain);
  EXPECT_EQ(plain.error().message, "--etcd-key is for TLS to etcd: give https:// endpoints in --etcd");
  auto missing = EtcdClientOptionsFromFlags({"https://etcd-1:2379", "/no/such/ca.pem"}, false);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message.rfind("--etcd-ca-cert /no/such/ca.pem: cannot read: ", 0), 0u)
      << missing.error().message;
  auto system_cas = EtcdClientOptionsFromFlags({"https://etcd-1:2379"}, false);
  ASSERT_TRUE(system_cas) << system_cas.error().message;
  EXPECT_EQ(system_cas->tls.ca_hint, "check --etcd-ca-cert");
  EXPECT_EQ(system_cas->tls.cert_given_as, "--etcd-cert");
}

}  // namespace
}  // namespace gpupool
