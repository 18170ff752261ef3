#include "src/client/client_config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

namespace gpupool {
namespace {

namespace fs = std::filesystem;

// A temporary HOME with helpers to write files into it.
class ClientConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "gpupool-client-config-XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    home_ = templ;
    env_["HOME"] = home_;
  }
  void TearDown() override { fs::remove_all(home_); }

  std::string Write(const std::string& relative, const std::string& text) {
    const fs::path p = fs::path(home_) / relative;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
  std::string DefaultConfig(const std::string& text) { return Write(".config/gpupool/config.yaml", text); }

  EnvLookup Env() const {
    return [env = env_](const std::string& name) -> std::optional<std::string> {
      auto it = env.find(name);
      if (it == env.end()) return std::nullopt;
      return it->second;
    };
  }
  ClientConfig Resolve(const ClientFlags& flags = {}) {
    auto c = ResolveClientConfig(flags, Env());
    EXPECT_TRUE(c) << c.error().message;
    return c ? *c : ClientConfig{};
  }
  std::string ResolveError(const ClientFlags& flags = {}) {
    auto c = ResolveClientConfig(flags, Env());
    EXPECT_FALSE(c) << "resolved to " << c->addr.Url();
    return c ? "" : c.error().message;
  }

  std::string home_;
  std::map<std::string, std::string> env_;
};

// --- each precedence step, lowest first --------------------------------------

TEST_F(ClientConfigTest, DefaultAddressAndNoTokenWhenNothingIsGiven) {
  const ClientConfig c = Resolve();
  EXPECT_EQ(c.addr.Url(), "http://127.0.0.1:7070");
  EXPECT_EQ(c.addr_source, "the default address");
  EXPECT_EQ(c.token, "");
  EXPECT_EQ(c.token_source, "");
  EXPECT_EQ(c.config_path, "");
}

TEST_F(ClientConfigTest, DefaultConfigFileBeatsTheDefault) {
  const std::string path = DefaultConfig("addr: http://gpupool.internal:8080\ntoken: gpt_file\n");
  const ClientConfig c = Resolve();
  EXPECT_EQ(c.addr.Url(), "http://gpupool.internal:8080");
  EXPECT_EQ(c.addr_source, "addr in " + path);
  EXPECT_EQ(c.token, "gpt_file");
  EXPECT_EQ(c.token_source, "token in " + path);
  EXPECT_EQ(c.config_path, path);
}

TEST_F(ClientConfigTest, ConfigTokenFileIsRelativeToTheConfigFile) {
  Write(".config/gpupool/team-a.token", "  gpt_from_token_file\n\n");
  DefaultConfig("token_file: team-a.token\n");
  const ClientConfig c = Resolve();
  EXPECT_EQ(c.token, "gpt_from_token_file");
  EXPECT_EQ(c.token_source,
            "token_file " + home_ + "/.config/gpupool/team-a.token (from " + home_ + "/.config/gpupool/config.yaml)");
}

TEST_F(ClientConfigTest, GpupoolConfigBeatsTheDefaultConfigFile) {
  DefaultConfig("addr: http://default-file:1\n");
  env_["GPUPOOL_CONFIG"] = Write("other.yaml", "addr: http://env-file:2\n");
  EXPECT_EQ(Resolve().addr.Url(), "http://env-file:2");
}

TEST_F(ClientConfigTest, ConfigFlagBeatsGpupoolConfig) {
  env_["GPUPOOL_CONFIG"] = Write("other.yaml", "addr: http://env-file:2\n");
  ClientFlags f;
  f.config = Write("flag.yaml", "addr: http://flag-file:3\n");
  EXPECT_EQ(Resolve(f).addr.Url(), "http://flag-file:3");
}

TEST_F(ClientConfigTest, EnvironmentBeatsTheConfigFile) {
  DefaultConfig("addr: http://from-file:1\ntoken: gpt_file\n");
  env_["GPUPOOL_ADDR"] = "http://from-env:2";
  env_["GPUPOOL_TOKEN"] = "gpt_env\n";
  const ClientConfig c = Resolve();
  EXPECT_EQ(c.addr.Url(), "http://from-env:2");
  EXPECT_EQ(c.addr_source, "GPUPOOL_ADDR");
  EXPECT_EQ(c.token, "gpt_env");
  EXPECT_EQ(c.token_source, "GPUPOOL_TOKEN");
}

TEST_F(ClientConfigTest, EnvironmentTokenBeatsTheConfigTokenFile) {
  Write(".config/gpupool/t", "gpt_file\n");
  DefaultConfig("token_file: t\n");
  env_["GPUPOOL_TOKEN"] = "gpt_env";
  EXPECT_EQ(Resolve().token, "gpt_env");
}

TEST_F(ClientConfigTest, FlagsBeatTheEnvironment) {
  env_["GPUPOOL_ADDR"] = "http://from-env:2";
  env_["GPUPOOL_TOKEN"] = "gpt_env";
  ClientFlags f;
  f.addr = "https://from-flag:3";
  f.token = "gpt_flag";
  const ClientConfig c = Resolve(f);
  EXPECT_EQ(c.addr.Url(), "https://from-flag:3");
  EXPECT_EQ(c.addr_source, "--addr");
  EXPECT_EQ(c.token, "gpt_flag");
  EXPECT_EQ(c.token_source, "--token");
}

TEST_F(ClientConfigTest, TokenFileFlagBeatsTheEnvironment) {
  env_["GPUPOOL_TOKEN"] = "gpt_env";
  ClientFlags f;
  f.token_file = Write("admin.token", "gpt_admin\n");
  const ClientConfig c = Resolve(f);
  EXPECT_EQ(c.token, "gpt_admin");
  EXPECT_EQ(c.token_source, "--token-file " + f.token_file);
}

TEST_F(ClientConfigTest, EachValueIsResolvedOnItsOwn) {
  DefaultConfig("addr: http://from-file:1\ntoken: gpt_file\n");
  env_["GPUPOOL_TOKEN"] = "gpt_env";
  ClientFlags f;
  f.addr = "http://from-flag:3";
  const ClientConfig c = Resolve(f);
  EXPECT_EQ(c.addr.Url(), "http://from-flag:3");
  EXPECT_EQ(c.token, "gpt_env");
}

TEST_F(ClientConfigTest, EmptyEnvironmentVariablesCountAsUnset) {
  DefaultConfig("addr: http://from-file:1\n");
  env_["GPUPOOL_ADDR"] = "";
  env_["GPUPOOL_TOKEN"] = "";
  env_["GPUPOOL_CONFIG"] = "";
  const ClientConfig c = Resolve();
  EXPECT_EQ(c.addr.Url(), "http://from-file:1");
  EXPECT_EQ(c.token, "");
}

TEST_F(ClientConfigTest, NoHomeMeansNoDefaultConfigFile) {
  env_.erase("HOME");
  EXPECT_EQ(Resolve().addr.Url(), "http://127.0.0.1:7070");
}

TEST_F(ClientConfigTest, EmptyConfigFileSetsNothing) {
  DefaultConfig("");
  EXPECT_EQ(Resolve().addr_source, "the default address");
}

// --- errors -------------------------------------------------------------------

TEST_F(ClientConfigTest, ExplicitConfigFilesMustExist) {
  ClientFlags f;
  f.config = home_ + "/missing.yaml";
  EXPECT_EQ(ResolveError(f), "config file " + home_ + "/missing.yaml does not exist");
  env_["GPUPOOL_CONFIG"] = home_ + "/gone.yaml";
  EXPECT_EQ(ResolveError(), "config file " + home_ + "/gone.yaml does not exist");
}

TEST_F(ClientConfigTest, UnknownConfigKeyIsNamedWithItsLocation) {
  const std::string path = DefaultConfig("addr: http://x:1\nadress: http://y:2\n");
  EXPECT_EQ(ResolveError(), path + ":2:1: unknown key 'adress' (expected addr, token, token_file, ca_cert)");
}

TEST_F(ClientConfigTest, MalformedConfigIsNamedWithItsLocation) {
  const std::string path = DefaultConfig("addr: [http://x:1\n");
  EXPECT_EQ(ResolveError().rfind(path + ":", 0), 0u);
  const std::string list = DefaultConfig("- addr\n");
  EXPECT_EQ(ResolveError(), list + ":1:1: expected a map with keys addr, token, token_file, ca_cert");
}

// The CA (issue 22): --ca-cert > GPUPOOL_CA_CERT > ca_cert in the file (relative
// to the file's folder) > the system's; the chosen file must hold a PEM
// certificate (only its readability is tried here: no openssl needed).
TEST_F(ClientConfigTest, TheCaCertComesFromTheFirstSourceThatGivesIt) {
  EXPECT_EQ(Resolve().tls.ca_cert_file, "");
  EXPECT_TRUE(Resolve().tls.ca_hint.starts_with("no CA was given, so the system's CAs were used"));
  const std::string path = DefaultConfig("ca_cert: certs/ca.pem\n");
  EXPECT_EQ(ResolveError(), "ca_cert (in " + path + ") " + home_ + "/.config/gpupool/certs/ca.pem" +
                                ": cannot read: No such file or directory");
  env_["GPUPOOL_CA_CERT"] = home_ + "/env.pem";
  EXPECT_EQ(ResolveError(), "GPUPOOL_CA_CERT " + home_ + "/env.pem: cannot read: No such file or directory");
  ClientFlags f;
  f.ca_cert = home_ + "/flag.pem";
  EXPECT_EQ(ResolveError(f), "--ca-cert " + home_ + "/flag.pem: cannot read: No such file or directory");
  const std::string not_pem = Write("flag.pem", "not a certificate\n");
  EXPECT_EQ(ResolveError(f), "--ca-cert " + not_pem + ": no PEM certificate in it");
}

TEST_F(ClientConfigTest, ConfigWithTokenAndTokenFileIsRefused) {
  const std::string path = DefaultConfig("token: a\ntoken_file: b\n");
  EXPECT_EQ(ResolveError(), path + ": give either token or token_file, not both");
}

TEST_F(ClientConfigTest, TokenAndTokenFileFlagsAreRefusedTogether) {
  ClientFlags f;
  f.token = "a";
  f.token_file = "b";
  EXPECT_EQ(ResolveError(f), "give either --token or --token-file, not both");
}

TEST_F(ClientConfigTest, UnreadableOrEmptyTokenFiles) {
  ClientFlags f;
  f.token_file = home_ + "/none";
  EXPECT_EQ(ResolveError(f), "cannot read token file " + home_ + "/none");
  f.token_file = Write("blank", " \n");
  EXPECT_EQ(ResolveError(f), "token file " + f.token_file + " is empty");
}

TEST_F(ClientConfigTest, MalformedAddressNamesItsSource) {
  env_["GPUPOOL_ADDR"] = "ftp://x:1";
  EXPECT_EQ(ResolveError(),
            "GPUPOOL_ADDR: unsupported scheme 'ftp' in 'ftp://x:1' (expected http://HOST:PORT or https://HOST:PORT)");
}

// --- addresses ----------------------------------------------------------------

TEST(ParseServerAddressTest, AcceptedForms) {
  auto url = [](std::string_view text) {
    auto a = ParseServerAddress("--addr", text);
    EXPECT_TRUE(a) << a.error().message;
    return a ? a->Url() : "";
  };
  EXPECT_EQ(url("http://127.0.0.1:7070"), "http://127.0.0.1:7070");
  EXPECT_EQ(url("http://127.0.0.1:7070/"), "http://127.0.0.1:7070");
  EXPECT_EQ(url("127.0.0.1:40123"), "http://127.0.0.1:40123");
  EXPECT_EQ(url("http://gpupool.internal"), "http://gpupool.internal:80");
  EXPECT_EQ(url("https://gpupool.internal"), "https://gpupool.internal:443");
  EXPECT_EQ(url("http://[::1]:7070"), "http://[::1]:7070");
  auto v6 = ParseServerAddress("--addr", "http://[::1]:7070");
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 7070);
}

TEST(ParseServerAddressTest, RejectedForms) {
  auto error = [](std::string_view text) {
    auto a = ParseServerAddress("--addr", text);
    EXPECT_FALSE(a) << text;
    return a ? "" : a.error().message;
  };
  const std::string tail = " (expected http://HOST:PORT or https://HOST:PORT)";
  EXPECT_EQ(error("localhost"), "--addr: no scheme and no port in 'localhost'" + tail);
  EXPECT_EQ(error("http://h:0"), "--addr: invalid port '0' in 'http://h:0'" + tail);
  EXPECT_EQ(error("http://h:65536"), "--addr: invalid port '65536' in 'http://h:65536'" + tail);
  EXPECT_EQ(error("http://h:x"), "--addr: invalid port 'x' in 'http://h:x'" + tail);
  EXPECT_EQ(error("http://h:"), "--addr: empty port in 'http://h:'" + tail);
  EXPECT_EQ(error("http://:80"), "--addr: no host in 'http://:80'" + tail);
  EXPECT_EQ(error("http://h:80/api"), "--addr: a path is not supported in 'http://h:80/api'" + tail);
  EXPECT_EQ(error("http://::1:80"), "--addr: IPv6 hosts need [brackets] in 'http://::1:80'" + tail);
}

}  // namespace
}  // namespace gpupool
