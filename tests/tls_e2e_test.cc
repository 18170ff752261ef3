// TLS end to end (issue 22), with the real binary and certificates made at
// test time (tests/test_certs.h): the plain-listener rule and bad files at
// start-up, mutual TLS between agents and the agent listener, and
// `gpupool dev` over TLS with the CLI submitting a job that the agent runs.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "tests/agent_process.h"
#include "tests/run_binary.h"
#include "tests/server_process.h"
#include "tests/test_certs.h"

namespace gpupool::testing {
namespace {

using nlohmann::json;

bool WaitUntil(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pred();
}

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

class TlsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    certs_ = SharedTestCerts(&why);
    if (certs_ == nullptr) GTEST_SKIP() << why;
    root_ = MakeTempDir();
  }
  void TearDown() override {
    if (!root_.empty()) std::filesystem::remove_all(root_);
  }
  std::vector<std::string> ServerTls() const {
    return {"--tls-cert", certs_->server_cert, "--tls-key", certs_->server_key};
  }

  const TestCerts* certs_ = nullptr;
  std::string root_;
};

TEST_F(TlsE2eTest, APlainNonLoopbackListenerRefusesToStartUnlessInsecure) {
  const BinaryRun refused = RunGpupool({"server", "--data", root_ + "/a", "--listen", "0.0.0.0:0"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_TRUE(Contains(refused.err, "error: --listen 0.0.0.0 is not a loopback address and would serve plain HTTP"))
      << refused.err;
  EXPECT_FALSE(std::filesystem::exists(root_ + "/a/gpupool.db")) << "refused before the data directory is opened";

  ServerProcess insecure(root_ + "/b", {"--insecure"}, "0.0.0.0:0");
  ASSERT_TRUE(insecure.Start()) << insecure.log();
  EXPECT_TRUE(insecure.url().starts_with("http://0.0.0.0:")) << insecure.url();
  EXPECT_TRUE(Contains(insecure.log(), R"("level":"warning","msg":"serving plain HTTP on a non-loopback address)"))
      << insecure.log();
  EXPECT_EQ(insecure.Stop(), 0);

  // With a certificate no --insecure is needed, and nothing is warned.
  ServerProcess tls(root_ + "/c", ServerTls(), "0.0.0.0:0");
  tls.set_ca_cert(certs_->ca);
  ASSERT_TRUE(tls.Start()) << tls.log();  // answered /healthz over https
  EXPECT_FALSE(Contains(tls.log(), "\"level\":\"warning\"")) << tls.log();
  EXPECT_EQ(tls.Stop(), 0);
}

TEST_F(TlsE2eTest, BadCertificateFilesStopStartUpNamingTheFlagAndTheFile) {
  const std::string missing = root_ + "/missing.pem";
  const BinaryRun gone =
      RunGpupool({"server", "--data", root_ + "/d", "--tls-cert", missing, "--tls-key", certs_->server_key});
  EXPECT_EQ(gone.exit_code, 2);
  EXPECT_EQ(gone.err, "error: --tls-cert " + missing + ": cannot read: No such file or directory\n");

  const BinaryRun mismatch = RunGpupool(
      {"server", "--data", root_ + "/d", "--tls-cert", certs_->server_cert, "--tls-key", certs_->client_key});
  EXPECT_EQ(mismatch.exit_code, 2);
  EXPECT_EQ(mismatch.err, "error: --tls-key " + certs_->client_key + " does not match the certificate in --tls-cert " +
                              certs_->server_cert + "\n");

  const BinaryRun agent =
      RunGpupool({"agent", "--server", "https://127.0.0.1:1", "--token-file", certs_->ca, "--node", "n",
                  "--fake-gpus", "1xH100", "--ca-cert", certs_->ca_key});
  EXPECT_EQ(agent.exit_code, 2);
  EXPECT_EQ(agent.err, "error: --ca-cert " + certs_->ca_key + ": no PEM certificate in it\n");
}

// --agent-ca-cert: agents on --agent-listen present a certificate the CA
// signed, or their handshake fails; the API listener asks no certificate.
TEST_F(TlsE2eTest, AgentsNeedACertificateOfTheAgentCaOnTheAgentListener) {
  std::vector<std::string> args = ServerTls();
  const std::string agent_listen = "127.0.0.1:" + std::to_string(FreePort());
  for (const std::string& a : {std::string("--agent-listen"), agent_listen, std::string("--agent-ca-cert"), certs_->ca}) {
    args.push_back(a);
  }
  ServerProcess server(root_ + "/data", args);
  server.set_ca_cert(certs_->ca);
  ASSERT_TRUE(server.Start()) << server.log();
  const std::string admin = server.admin_token();
  const std::string agent_url = "https://" + agent_listen;

  auto start_agent = [&](const std::string& node, std::vector<std::string> tls) {
    auto t = Http(server, "POST", "/v1/nodes/" + node + "/token", admin, json::object());
    EXPECT_EQ(t.status, 201) << t.text;
    const std::string token_file = root_ + "/" + node + ".token";
    std::ofstream(token_file) << t.body.value("token", "") << "\n";
    std::vector<std::string> extra = {"--fake-gpus", "1xH100", "--cpu-cores", "2", "--memory-gib", "4",
                                      "--runtime",   "process", "--ca-cert",   certs_->ca};
    extra.insert(extra.end(), tls.begin(), tls.end());
    auto agent = std::make_unique<AgentProcess>(agent_url, token_file, node, root_ + "/agent-" + node, extra);
    agent->Start();
    return agent;
  };
  auto ready = [&](const std::string& node) {
    for (const json& n : Http(server, "GET", "/v1/nodes", admin).body.value("nodes", json::array())) {
      if (n.value("name", "") == node && n.value("condition", "") == "ready") return true;
    }
    return false;
  };

  auto without = start_agent("tls-bare", {});
  auto with = start_agent("tls-node-0", {"--client-cert", certs_->client_cert, "--client-key", certs_->client_key});
  EXPECT_TRUE(WaitUntil([&] { return ready("tls-node-0"); }, std::chrono::seconds(15))) << with->log();
  EXPECT_TRUE(WaitUntil([&] { return Contains(without->action_log(), "register_failed"); }, std::chrono::seconds(10)))
      << without->log();
  EXPECT_FALSE(ready("tls-bare"));
  EXPECT_TRUE(Contains(without->action_log(), "client certificate")) << without->action_log();
  EXPECT_EQ(with->Stop(), 0);
  without->Stop();
  EXPECT_EQ(server.Stop(), 0);
}

// The issue's acceptance: `gpupool dev` over TLS, the CLI submits a job that
// the in-process agent (speaking TLS to the server) runs to success; a CLI
// trusting another CA is refused with a clear message.
TEST_F(TlsE2eTest, DevModeOverTlsRunsACliSubmittedJobAndRefusesAWrongCa) {
  const int port = FreePort();
  const std::string url = "https://127.0.0.1:" + std::to_string(port);
  const std::string data = root_ + "/dev";
  pid_t pid = fork();
  if (pid == 0) {
    const int out = open((root_ + "/dev.out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = open((root_ + "/dev.err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(out, 1);
    dup2(err, 2);
    const std::string listen = "127.0.0.1:" + std::to_string(port);
    execl(GPUPOOL_BINARY, GPUPOOL_BINARY, "dev", "--data", data.c_str(), "--listen", listen.c_str(), "--tls-cert",
          certs_->server_cert.c_str(), "--tls-key", certs_->server_key.c_str(), "--ca-cert", certs_->ca.c_str(),
          nullptr);
    _exit(127);
  }
  const std::string admin_file = data + "/admin.token";
  ASSERT_TRUE(WaitUntil([&] { return HttpAt(url, certs_->ca, "GET", "/healthz", "", "").status == 200; },
                        std::chrono::seconds(30)))
      << ReadTextFile(root_ + "/dev.err");
  ASSERT_TRUE(WaitUntil([&] { return !ReadTextFile(admin_file).empty(); }, std::chrono::seconds(10)));
  EXPECT_TRUE(Contains(ReadTextFile(root_ + "/dev.out"), "address:      " + url)) << ReadTextFile(root_ + "/dev.out");
  // The in-process agent registers over TLS (it trusts --ca-cert).
  const std::string admin = Trimmed(ReadTextFile(admin_file));
  ASSERT_TRUE(WaitUntil(
      [&] {
        const HttpResult nodes = HttpAt(url, certs_->ca, "GET", "/v1/nodes", admin, "");
        for (const json& n : nodes.body.is_object() ? nodes.body.value("nodes", json::array()) : json::array()) {
          if (n.value("name", "") == "dev-node-0" && n.value("condition", "") == "ready") return true;
        }
        return false;
      },
      std::chrono::seconds(30)))
      << ReadTextFile(root_ + "/dev.err");

  const std::string job_file = root_ + "/job.yaml";
  std::ofstream(job_file) << "name: tls-e2e\ntenant: team-a\ngpus: 1\ncpu_cores: 1\nmemory_gib: 1\n"
                             "command: [sh, -c, 'echo hello-over-tls']\n";
  const std::vector<std::string> conn = {"--addr", url, "--token-file", admin_file, "--ca-cert", certs_->ca,
                                         "-o", "json"};
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.end(), conn.begin(), conn.end());
    return RunGpupool(args);
  };
  const BinaryRun submitted = cli({"job", "submit", "-f", job_file});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  const json job = json::parse(submitted.out, nullptr, false);
  ASSERT_TRUE(job.is_object() && job.contains("id")) << submitted.out;
  const std::string id = std::to_string(job["id"].get<int64_t>());
  std::string state;
  EXPECT_TRUE(WaitUntil(
      [&] {
        const json j = json::parse(cli({"job", "get", id}).out, nullptr, false);
        state = j.is_object() ? j.value("state", "") : "";
        return state == "succeeded";
      },
      std::chrono::seconds(30)))
      << state << "\n"
      << ReadTextFile(root_ + "/dev.err");
  const BinaryRun logs = RunGpupool({"job", "logs", id, "--addr", url, "--token-file", admin_file, "--ca-cert",
                                     certs_->ca});
  EXPECT_TRUE(Contains(logs.out, "hello-over-tls")) << logs.out << logs.err;

  const BinaryRun wrong = RunGpupool({"job", "list", "--addr", url, "--token-file", admin_file, "--ca-cert",
                                      certs_->other_ca});
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_TRUE(Contains(wrong.err, "TLS: certificate verify failed for " + url + " (")) << wrong.err;
  EXPECT_TRUE(Contains(wrong.err, "check --ca-cert " + certs_->other_ca)) << wrong.err;
  StopChild(pid);
}

}  // namespace
}  // namespace gpupool::testing
