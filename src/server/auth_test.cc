#include "src/server/auth.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

constexpr int64_t kNow = 1'780'000'000'000;

std::string Bearer(const std::string& token) { return "Bearer " + token; }

TEST(AuthTest, ANamedTokenIsSaltedAndFoundByItsIdOnly) {
  MintedToken m = MintToken("team", "ci", kRoleTenant);
  EXPECT_EQ(m.token.size(), 4u + 16 + 1 + 64);
  EXPECT_TRUE(m.token.starts_with("gpt_" + m.record.id + "_"));
  EXPECT_NE(m.record.hash_hex, HashToken(m.token));  // salted
  EXPECT_EQ(m.record.salt_hex.size(), 32u);
  MintedToken again = MintToken("team", "ci", kRoleTenant);
  EXPECT_NE(again.record.salt_hex, m.record.salt_hex);
  EXPECT_NE(again.record.id, m.record.id);

  AuthStore auth;
  auth.Add(m.record);
  auto p = auth.Authenticate(Bearer(m.token), kNow);
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->admin);
  EXPECT_FALSE(p->read_only);
  EXPECT_EQ(p->tenant, "team");
  EXPECT_EQ(p->token_id, m.record.id);
  EXPECT_EQ(p->token_name, "ci");
  // One wrong digit of the secret, or of the ID, is unknown.
  std::string wrong = m.token;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  EXPECT_FALSE(auth.Authenticate(Bearer(wrong), kNow));
  wrong = m.token;
  wrong[4] = wrong[4] == '0' ? '1' : '0';
  EXPECT_FALSE(auth.Authenticate(Bearer(wrong), kNow));
  // The stored hash is no token.
  EXPECT_FALSE(auth.Authenticate(Bearer(m.record.hash_hex), kNow));
}

TEST(AuthTest, ATokenOfAnEarlierReleaseKeepsWorkingUnderAnIdFromItsHash) {
  const std::string old = NewToken();  // "gpt_" + 64 hex, stored as a plain SHA-256
  TokenRecord r{.hash_hex = HashToken(old), .tenant = "team", .created_ms = kNow};
  AuthStore auth;
  auth.Add(r);
  auto p = auth.Authenticate(Bearer(old), kNow);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->tenant, "team");
  EXPECT_EQ(p->token_id, r.hash_hex.substr(0, 16));
  EXPECT_EQ(p->token_name, "initial");
  EXPECT_EQ(TokenId(r), r.hash_hex.substr(0, 16));
  EXPECT_EQ(TokenRole(r), kRoleTenant);
  ASSERT_TRUE(auth.Find(r.hash_hex.substr(0, 16)));

  TokenRecord node{.hash_hex = HashToken("gpt_node-token-of-old"), .tenant = "node/n1", .created_ms = kNow};
  auth.Add(node);
  auto n = auth.Authenticate(Bearer("gpt_node-token-of-old"), kNow);
  ASSERT_TRUE(n);
  EXPECT_EQ(n->node, "n1");
  EXPECT_EQ(n->token_name, "node");
}

TEST(AuthTest, RevokedAndExpiredTokensAreRefused) {
  AuthStore auth;
  MintedToken a = MintToken("team", "a", kRoleTenant);
  MintedToken b = MintToken("team", "b", kRoleTenant, kNow + 1000);
  auth.Add(a.record);
  auth.Add(b.record);
  EXPECT_EQ(auth.LiveCount("team", kNow), 2);
  EXPECT_TRUE(auth.Authenticate(Bearer(b.token), kNow + 999));
  EXPECT_FALSE(auth.Authenticate(Bearer(b.token), kNow + 1000));
  EXPECT_EQ(auth.LiveCount("team", kNow + 1000), 1);

  ASSERT_TRUE(auth.Authenticate(Bearer(a.token), kNow));
  auth.Revoke(TokenRevocation{a.record.hash_hex, kNow + 5});
  EXPECT_FALSE(auth.Authenticate(Bearer(a.token), kNow));
  EXPECT_EQ(auth.Find(a.record.id)->revoked_ms, kNow + 5);
  auth.Revoke(TokenRevocation{a.record.hash_hex, kNow + 50});  // the first time stands
  EXPECT_EQ(auth.Find(a.record.id)->revoked_ms, kNow + 5);
  auth.Revoke(TokenRevocation{"unknown", kNow});  // ignored
  EXPECT_EQ(auth.List("team").size(), 2u);
  EXPECT_EQ(auth.List("other").size(), 0u);
}

TEST(AuthTest, ReadersAreReadOnlyOfATenantOrOfThePool) {
  AuthStore auth;
  MintedToken team = MintToken("team", "grafana", kRoleReader);
  MintedToken pool = MintToken("", "grafana", kRoleReader);
  auth.Add(team.record);
  auth.Add(pool.record);
  auto t = auth.Authenticate(Bearer(team.token), kNow);
  ASSERT_TRUE(t);
  EXPECT_TRUE(t->read_only);
  EXPECT_FALSE(t->admin);
  EXPECT_EQ(t->tenant, "team");
  auto p = auth.Authenticate(Bearer(pool.token), kNow);
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->read_only);
  EXPECT_TRUE(p->admin);  // sees what the admin sees, changes nothing
  EXPECT_TRUE(p->tenant.empty());
}

TEST(AuthTest, TheAdminTokenAndMalformedHeaders) {
  AuthStore auth;
  const std::string admin = NewToken();
  auth.SetAdmin(admin);
  auto a = auth.Authenticate(Bearer(admin), kNow);
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->admin);
  EXPECT_FALSE(a->read_only);
  for (const char* h : {"", "Bearer", "Bearer ", "Basic abcdefghijklmnopqrstuvwxyz", "Bearer short",
                        "Bearer gpt_0123456789abcdef_0123"}) {
    EXPECT_FALSE(auth.Authenticate(h, kNow)) << h;
  }
  EXPECT_FALSE(auth.Authenticate(Bearer(admin + " x"), kNow));
}

}  // namespace
}  // namespace gpupool
