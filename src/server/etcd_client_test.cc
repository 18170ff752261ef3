#include "src/server/etcd_client.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

TEST(EtcdClientTest, PrefixEndIsThePrefixWithItsLastByteIncremented) {
  EXPECT_EQ(PrefixEnd("/gpupool/a/"), "/gpupool/a0");
  EXPECT_EQ(PrefixEnd(std::string("a\xff", 2)), "b");
  EXPECT_EQ(PrefixEnd(std::string("\xff\xff", 2)), std::string(1, '\0'));
}

TEST(EtcdClientTest, EndpointsAreAListOfHttpOrHttpsHostPortOfOneScheme) {
  auto e = ParseEtcdEndpoints("http://127.0.0.1:2379,http://[::1]:2380");
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(*e, (std::vector<std::string>{"http://127.0.0.1:2379", "http://[::1]:2380"}));
  EXPECT_EQ(ParseEtcdEndpoints("127.0.0.1:2379").error().message,
            "--etcd: '127.0.0.1:2379' is not http://HOST:PORT or https://HOST:PORT (a list is URL,URL,...)");
  auto tls = ParseEtcdEndpoints("https://etcd-0:2379,https://etcd-1:2379");
  ASSERT_TRUE(tls) << tls.error().message;
  EXPECT_EQ(tls->size(), 2u);
  EXPECT_EQ(ParseEtcdEndpoints("https://etcd-0:2379,http://etcd-1:2379").error().message,
            "--etcd: the endpoints mix http:// and https:// (one cluster serves one of them)");
  EXPECT_FALSE(ParseEtcdEndpoints("ftp://h:2379"));
  EXPECT_FALSE(ParseEtcdEndpoints("http://h:2379,"));
  EXPECT_FALSE(ParseEtcdEndpoints("http://h:2379/v3"));
  EXPECT_FALSE(ParseEtcdEndpoints("http://h:"));
}

}  // namespace
}  // namespace gpupool
