// End to end: the `gpupool job|tenant|node|pool` client against a real
// `gpupool server` on loopback, both as child processes, as an operator runs
// them. The examples/ job files must be accepted by the server's embedded
// default configuration.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "src/client/json_yaml.h"
#include "tests/run_binary.h"

namespace gpupool {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// One server per test, in a fresh data folder, on a free port.
class ClientCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir();
    ASSERT_FALSE(dir_.empty());
    config_ = dir_ + "/client.yaml";
    std::ofstream(config_) << "# no settings: flags decide\n";
    pid_ = fork();
    if (pid_ == 0) {
      const int log = open((dir_ + "/server.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      dup2(log, 1);
      dup2(log, 2);
      std::string binary = GPUPOOL_BINARY;
      std::vector<std::string> args = {binary, "server", "--data", dir_ + "/data", "--listen", "127.0.0.1:0"};
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
    ASSERT_GT(pid_, 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!fs::exists(dir_ + "/data/server.url")) {
      int status = 0;
      ASSERT_EQ(waitpid(pid_, &status, WNOHANG), 0) << "server exited: " << ReadFile(dir_ + "/server.log");
      ASSERT_LT(std::chrono::steady_clock::now(), deadline)
          << "server did not start: " << ReadFile(dir_ + "/server.log");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    url_ = ReadFile(dir_ + "/data/server.url");
    admin_ = ReadFile(dir_ + "/data/admin.token");
    ASSERT_FALSE(admin_.empty());
  }

  void TearDown() override {
    StopServer();
    fs::remove_all(dir_);
  }

  void StopServer() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  // `gpupool ARGS... --addr URL --token TOKEN --config EMPTY`.
  testing::BinaryRun As(const std::string& token, std::vector<std::string> args) {
    const std::vector<std::string> extra = {"--addr", url_, "--token", token, "--config", config_};
    args.insert(args.end(), extra.begin(), extra.end());
    return testing::RunGpupool(args);
  }
  testing::BinaryRun Admin(std::vector<std::string> args) { return As(admin_, std::move(args)); }

  json AdminJson(std::vector<std::string> args) {
    args.insert(args.end(), {"-o", "json"});
    const auto run = Admin(args);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return json::parse(run.out, nullptr, false);
  }

  static std::string Example(const std::string& name) { return std::string(GPUPOOL_SOURCE_DIR) + "/examples/" + name; }

  // Two nodes (the H100 one NVLink-connected) and team-a with 16 GPUs.
  void AddClusterAndTenant() {
    auto h100 = Admin({"node", "add", "h100-0", "--model", "H100", "--gpus", "8", "--cpu-cores", "96", "--memory-gib",
                       "1024", "--region", "r1", "--zone", "z1", "--rack", "rack-1", "--class", "nvlink"});
    ASSERT_EQ(h100.exit_code, 0) << h100.err;
    auto a100 = Admin(
        {"node", "add", "a100-0", "--model", "A100-80GB", "--gpus", "8", "--cpu-cores", "128", "--memory-gib", "1024"});
    ASSERT_EQ(a100.exit_code, 0) << a100.err;
    auto tenant = Admin({"tenant", "create", "team-a", "--pool", "default", "--guaranteed", "8", "--limit", "16"});
    ASSERT_EQ(tenant.exit_code, 0) << tenant.err;
  }

  std::string dir_, config_, url_, admin_;
  pid_t pid_ = -1;
};

TEST_F(ClientCliTest, ExamplesAreAcceptedByTheDefaultConfigAndPlaced) {
  AddClusterAndTenant();
  // The 8-GPU NVLink gang first, so that it finds the H100 node empty.
  const json training = AdminJson({"job", "submit", "-f", Example("training-8gpu-nvlink.yaml")});
  ASSERT_TRUE(training.contains("id")) << training.dump();
  EXPECT_EQ(training["state"], "running") << training.dump();
  ASSERT_EQ(training["placements"].size(), 1u);
  EXPECT_EQ(training["placements"][0]["node"], "h100-0");
  EXPECT_EQ(training["placements"][0]["gpus"].size(), 8u);
  EXPECT_EQ(training["request"]["requirement"], "nvlink");

  for (const char* file : {"inference-quarter-gpu.yaml", "batch-deadline.yaml"}) {
    const json job = AdminJson({"job", "submit", "-f", Example(file)});
    ASSERT_TRUE(job.contains("id")) << file << ": " << job.dump();
    EXPECT_EQ(job["state"], "running") << file << ": " << job.dump();
    EXPECT_EQ(job["placements"][0]["node"], "a100-0") << file;
  }
  // The server keeps what the files said.
  const json inference = AdminJson({"job", "get", "2"});
  EXPECT_EQ(inference["request"]["sharing"], "mps");
  EXPECT_DOUBLE_EQ(inference["request"]["gpu_fraction"].get<double>(), 0.25);
  const json batch = AdminJson({"job", "get", "3"});
  EXPECT_TRUE(batch["request"].contains("deadline")) << batch.dump();  // from deadline_after
}

TEST_F(ClientCliTest, ListsInEveryFormat) {
  AddClusterAndTenant();
  for (const char* file : {"inference-quarter-gpu.yaml", "batch-deadline.yaml", "inference-quarter-gpu.yaml"}) {
    ASSERT_EQ(Admin({"job", "submit", "-f", Example(file)}).exit_code, 0);
  }
  // The newest first by default; --oldest-first in ascending id; pages
  // followed across --limit and --all.
  const json all = AdminJson({"job", "list"});
  ASSERT_EQ(all["jobs"].size(), 3u);
  EXPECT_TRUE(all["next_before"].is_null());
  EXPECT_EQ(all["jobs"][0]["id"], 3);
  EXPECT_EQ(all["jobs"][2]["id"], 1);
  const json oldest = AdminJson({"job", "list", "--oldest-first", "--all"});
  ASSERT_EQ(oldest["jobs"].size(), 3u);
  EXPECT_EQ(oldest["jobs"][0]["id"], 1);
  EXPECT_TRUE(oldest["next_after"].is_null());
  const json two = AdminJson({"job", "list", "--limit", "2", "--state", "running"});
  ASSERT_EQ(two["jobs"].size(), 2u);
  EXPECT_EQ(two["jobs"][0]["id"], 3);
  const json newest = AdminJson({"job", "list", "--limit", "1"});
  ASSERT_EQ(newest["jobs"].size(), 1u);
  EXPECT_EQ(newest["jobs"][0]["id"], 3);
  EXPECT_EQ(newest["next_before"], 3);
  EXPECT_NE(Admin({"job", "list", "--all", "--limit", "2"}).exit_code, 0);  // one or the other

  const auto yaml = Admin({"tenant", "list", "-o", "yaml"});
  ASSERT_EQ(yaml.exit_code, 0) << yaml.err;
  auto tenants = YamlToJson(yaml.out, "stdout");
  ASSERT_TRUE(tenants) << tenants.error().message;
  EXPECT_EQ((*tenants)["tenants"][0]["name"], "team-a");

  const auto table = Admin({"job", "list"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(table.out.rfind("ID   NAME", 0), 0u) << table.out;
  EXPECT_NE(table.out.find("nightly-embedding-backfill"), std::string::npos);

  for (const std::vector<std::string>& cmd :
       {std::vector<std::string>{"node", "list"}, {"pool", "list"}, {"tenant", "get", "team-a"}}) {
    const auto run = Admin(cmd);
    EXPECT_EQ(run.exit_code, 0) << cmd[0] << " " << cmd[1] << ": " << run.err;
    EXPECT_EQ(run.out.rfind("NAME ", 0), 0u) << run.out;
  }
}

TEST_F(ClientCliTest, TenantTokensSubmitTheirOwnJobsOnly) {
  AddClusterAndTenant();
  const json created = AdminJson({"tenant", "create", "team-b", "--pool", "default", "--guaranteed", "1"});
  ASSERT_TRUE(created.contains("token")) << created.dump();
  const std::string token = created["token"];

  const std::string mine = dir_ + "/mine.yaml";
  std::ofstream(mine) << "name: notebook\nkind: development\ngpu_fraction: 0.5\n";
  const auto submitted = As(token, {"job", "submit", "-f", mine, "-o", "json"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  EXPECT_EQ(json::parse(submitted.out)["tenant"], "team-b");

  // The examples name team-a.
  const auto other = As(token, {"job", "submit", "-f", Example("inference-quarter-gpu.yaml")});
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_EQ(other.err.rfind("error: ", 0), 0u);
  EXPECT_NE(other.err.find("(field: tenant)\n"), std::string::npos) << other.err;

  const auto nodes = As(token, {"node", "list"});
  EXPECT_EQ(nodes.exit_code, 1);
  EXPECT_EQ(nodes.err.rfind("error: ", 0), 0u) << nodes.err;
  EXPECT_EQ(nodes.out, "");
}

TEST_F(ClientCliTest, TokensAreCreatedListedAndRevoked) {
  AddClusterAndTenant();
  const std::string file = dir_ + "/ci.token";
  const json created = AdminJson({"token", "create", "ci", "--tenant", "team-a", "--expires-in", "30d", "--write", file});
  ASSERT_FALSE(created.contains("token")) << created.dump();  // in the file only
  EXPECT_EQ(created["token_file"], file);
  EXPECT_TRUE(created.contains("expires_at"));
  EXPECT_EQ(fs::status(file).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  const std::string ci = ReadFile(file);
  EXPECT_EQ(As(ci, {"job", "list"}).exit_code, 0);

  const auto reader = As(ci, {"token", "create", "grafana", "--read-only"});
  ASSERT_EQ(reader.exit_code, 0) << reader.err;
  EXPECT_NE(reader.out.find("token: gpt_"), std::string::npos) << reader.out;
  EXPECT_NE(reader.out.find("shown only this once"), std::string::npos) << reader.out;

  const auto table = Admin({"token", "list", "--tenant", "team-a"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  for (const char* word : {"ID", "REVOKED", "initial", "ci", "grafana", "reader", "team-a"}) {
    EXPECT_NE(table.out.find(word), std::string::npos) << word << "\n" << table.out;
  }
  const auto revoked = As(ci, {"token", "revoke", created["id"].get<std::string>(), "-o", "json"});
  ASSERT_EQ(revoked.exit_code, 0) << revoked.err;
  EXPECT_TRUE(json::parse(revoked.out).contains("revoked_at")) << revoked.out;
  const auto refused = As(ci, {"job", "list"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("revoked or expired"), std::string::npos) << refused.err;

  const auto audit = Admin({"audit", "--actor", "admin"});
  ASSERT_EQ(audit.exit_code, 0) << audit.err;
  for (const char* word : {"SEQ", "ACTOR", "QuotaSet", "admin"}) {
    EXPECT_NE(audit.out.find(word), std::string::npos) << word << "\n" << audit.out;
  }
}

TEST_F(ClientCliTest, JobSubmitTakesFlagsAloneOrOverAFile) {
  AddClusterAndTenant();
  // The connection flags before `--`: what follows it is the command.
  const auto flags = testing::RunGpupool(
      {"job", "submit", "--name", "from-flags", "--tenant", "team-a", "--gpu-fraction", "0.25", "--gpu-memory-gib", "10",
       "--sharing", "time-slice", "--kind", "online-inference", "--priority", "high", "--env", "A=1", "--env", "B=x=y",
       "--image", "host", "-o", "json", "--addr", url_, "--token", admin_, "--config", config_, "--", "python3",
       "serve.py", "--port",
       "80"});
  ASSERT_EQ(flags.exit_code, 0) << flags.err;
  const json job = json::parse(flags.out, nullptr, false);
  const json& r = job["request"];
  EXPECT_EQ(r["name"], "from-flags") << job.dump();
  EXPECT_EQ(r["gpu_fraction"], 0.25);
  EXPECT_EQ(r["sharing"], "time-slice");
  EXPECT_EQ(r["env"], json({{"A", "1"}, {"B", "x=y"}}));
  EXPECT_EQ(r["command"], json({"python3", "serve.py", "--port", "80"}));
  EXPECT_EQ(r["image"], "host");
  // Over a file: the flags win, the rest is the file's.
  const auto over = Admin({"job", "submit", "-f", Example("inference-quarter-gpu.yaml"), "--name", "renamed",
                           "--gpu-fraction", "0.5", "--priority", "100", "-o", "json"});
  ASSERT_EQ(over.exit_code, 0) << over.err;
  const json o = json::parse(over.out, nullptr, false)["request"];
  EXPECT_EQ(o["name"], "renamed") << o.dump();
  EXPECT_EQ(o["gpu_fraction"], 0.5);
  EXPECT_EQ(o["priority"], 100);
  EXPECT_EQ(o["sharing"], "mps");  // the file's
  // Neither a file nor a name; both GPU flags.
  EXPECT_NE(Admin({"job", "submit", "--gpus", "1"}).exit_code, 0);
  EXPECT_NE(Admin({"job", "submit", "--name", "x", "--gpus", "1", "--gpu-fraction", "0.5"}).exit_code, 0);
}

TEST_F(ClientCliTest, ServerErrorsNameTheFieldAndExitOne) {
  AddClusterAndTenant();
  const std::string bad = dir_ + "/bad.yaml";
  std::ofstream(bad) << "name: x\ntenant: team-a\nstages:\n  - {gpus: 1}\n  - {gpus: 1, cpu_cores: -2}\n";
  const auto run = Admin({"job", "submit", "-f", bad});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err.rfind("error: ", 0), 0u) << run.err;
  EXPECT_NE(run.err.find(" (field: stages[1].cpu_cores)\n"), std::string::npos) << run.err;

  const auto exists = Admin({"tenant", "create", "team-a"});
  EXPECT_EQ(exists.exit_code, 1);
  EXPECT_NE(exists.err.find("(field: name)"), std::string::npos) << exists.err;

  const auto missing = Admin({"job", "get", "999"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err.rfind("error: ", 0), 0u) << missing.err;
}

TEST_F(ClientCliTest, CancelOnceThenConflict) {
  AddClusterAndTenant();
  const json job = AdminJson({"job", "submit", "-f", Example("batch-deadline.yaml")});
  const std::string id = job["id"].dump();
  const json cancelled = AdminJson({"job", "cancel", id});
  EXPECT_EQ(cancelled["state"], "cancelled");
  const auto again = Admin({"job", "cancel", id});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_EQ(again.err.rfind("error: ", 0), 0u) << again.err;
}

TEST_F(ClientCliTest, RegionsGetAndSetFromAFile) {
  // The default configuration has no region table: policy off, no regions.
  const json before = AdminJson({"regions", "get"});
  EXPECT_EQ(before["policy"], "off") << before.dump();
  EXPECT_TRUE(before["regions"].empty()) << before.dump();

  const std::string file = dir_ + "/regions.yaml";
  std::ofstream(file) << "policy: cost-aware\nregions:\n  - {name: east, price_per_gpu_hour: 2, latency_ms: {nyc: 10}}\n"
                         "  - {name: west, price_per_gpu_hour: 3}\n";
  const auto set = Admin({"regions", "set", "-f", file});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_EQ(set.out.rfind("policy: cost-aware\nREGION ", 0), 0u) << set.out;
  EXPECT_NE(set.out.find("nyc=10"), std::string::npos) << set.out;
  const json after = AdminJson({"regions", "get"});
  ASSERT_EQ(after["regions"].size(), 2u) << after.dump();
  EXPECT_EQ(after["regions"][1]["name"], "west");

  // A bad table names the field; a tenant may read the table but not set it.
  const std::string bad = dir_ + "/bad.json";
  std::ofstream(bad) << R"({"regions": [{"name": "east", "price_per_gpu_hour": -1}]})";
  const auto refused = Admin({"regions", "set", "-f", bad});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("(field: regions[0].price_per_gpu_hour)"), std::string::npos) << refused.err;
  AddClusterAndTenant();
  const json created = AdminJson({"tenant", "create", "team-r"});
  const std::string token = created["token"];
  EXPECT_EQ(As(token, {"regions", "get"}).exit_code, 0);
  const auto tenant_set = As(token, {"regions", "set", "-f", file});
  EXPECT_EQ(tenant_set.exit_code, 1);
  EXPECT_EQ(tenant_set.err.rfind("error: ", 0), 0u) << tenant_set.err;
}

TEST_F(ClientCliTest, MissingTokenAndStoppedServerSayWhatToDo) {
  const auto no_token = testing::RunGpupool({"pool", "list", "--addr", url_, "--config", config_});
  // GPUPOOL_TOKEN may be set where the tests run; only assert when it is not.
  if (std::getenv("GPUPOOL_TOKEN") == nullptr) {
    EXPECT_EQ(no_token.exit_code, 1);
    EXPECT_NE(no_token.err.find("no token was given: give a token with --token"), std::string::npos) << no_token.err;
  }
  StopServer();
  const auto down = Admin({"pool", "list"});
  EXPECT_EQ(down.exit_code, 1);
  EXPECT_EQ(down.err.rfind("error: cannot reach the gpupool server at " + url_ + " (--addr): ", 0), 0u) << down.err;
}

}  // namespace
}  // namespace gpupool
