// GPU usage accounting end to end: the real `gpupool server` on loopback,
// jobs that run and end, GET /v1/usage and `gpupool usage` against the
// jobs' own figures, who may read what, bad queries, and the totals across
// a clean restart (from the snapshot) and a crash (replaying the journal).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/run_binary.h"
#include "tests/server_process.h"

namespace gpupool::testing {
namespace {

using nlohmann::json;

// One pool of one A100-80GB node without an agent (failure detection off).
constexpr const char* kConfig = R"(name: usage
engine: {heartbeat_timeout: 0s}
pools:
  - name: a100
    models: [A100-80GB]
cluster:
  nodes:
    - {count: 1, model: A100-80GB, gpus: 8, cpu_cores: 64, memory_gib: 512}
server:
  tick: 200ms
)";

class UsageE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = MakeTempDir();
    const std::string config = root_ + "/config.yaml";
    std::ofstream(config) << kConfig;
    server_ = std::make_unique<ServerProcess>(root_ + "/data", std::vector<std::string>{"--config", config});
    ASSERT_TRUE(server_->Start()) << server_->log();
    admin_ = server_->admin_token();
    // team-a: 2 GPUs guaranteed; team-b: none (all it uses is borrowed).
    for (auto [name, guaranteed, token] : {std::tuple{"team-a", 2, &token_a_}, std::tuple{"team-b", 0, &token_b_}}) {
      auto t = Http(*server_, "POST", "/v1/tenants", admin_,
                    json{{"name", name}, {"quota", {{"a100", {{"guaranteed_gpus", guaranteed}, {"limit_gpus", 8}}}}}});
      ASSERT_EQ(t.status, 201) << t.text;
      *token = t.body["token"];
    }
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(root_);
  }

  // Runs a job of `gpus` whole GPUs (or a share when below 1) for about
  // `ms` and cancels it; returns its id.
  int64_t RunFor(const std::string& token, double gpus, int ms) {
    json req = {{"name", "work"}, {"kind", "training"}};
    if (gpus < 1) req["gpu_fraction"] = gpus;
    else req["gpus"] = gpus;
    auto s = Http(*server_, "POST", "/v1/jobs", token, req);
    EXPECT_EQ(s.status, 201) << s.text;
    EXPECT_EQ(s.body["state"], "running") << s.text;
    const int64_t id = s.body["id"];
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    auto c = Http(*server_, "DELETE", "/v1/jobs/" + std::to_string(id), token);
    EXPECT_EQ(c.status, 200) << c.text;
    return id;
  }
  double JobGpuSeconds(int64_t id) {
    auto j = Http(*server_, "GET", "/v1/jobs/" + std::to_string(id), admin_);
    EXPECT_EQ(j.status, 200) << j.text;
    return j.body["usage"]["gpu_seconds"].get<double>();
  }
  json Usage(const std::string& query, const std::string& token, int status = 200) {
    auto u = Http(*server_, "GET", "/v1/usage" + query, token);
    EXPECT_EQ(u.status, status) << query << ": " << u.text;
    return u.body;
  }
  BinaryRun Cli(const std::string& token, std::vector<std::string> args) {
    const std::string empty = root_ + "/client.yaml";
    std::ofstream(empty) << "# flags decide\n";
    args.insert(args.end(), {"--addr", server_->url(), "--token", token, "--config", empty});
    return RunGpupool(args);
  }

  std::string root_, admin_, token_a_, token_b_;
  std::unique_ptr<ServerProcess> server_;
};

const json* RowOf(const json& report, const std::string& tenant) {
  for (const json& r : report["rows"]) {
    if (r["tenant"] == tenant) return &r;
  }
  return nullptr;
}

TEST_F(UsageE2eTest, TotalsAreTheJobsOwnByTierAndSurviveRestartAndCrash) {
  const int64_t a1 = RunFor(token_a_, 3, 600);   // 2 of its 3 GPUs within team-a's guarantee
  const int64_t a2 = RunFor(token_a_, 0.5, 300);  // a half GPU, within
  const int64_t b1 = RunFor(token_b_, 1, 400);   // borrowed: team-b has no guarantee
  const double ga1 = JobGpuSeconds(a1), ga2 = JobGpuSeconds(a2), gb1 = JobGpuSeconds(b1);
  EXPECT_GT(ga1, 3 * 0.5);
  EXPECT_GT(gb1, 0.3);

  const json total = Usage("?by=total", admin_);
  ASSERT_EQ(total["rows"].size(), 2u) << total.dump();
  const json& a = *RowOf(total, "team-a");
  EXPECT_EQ(a["pool"], "a100");
  EXPECT_NEAR(a["gpu_seconds"].get<double>(), ga1 + ga2, 1e-6);
  EXPECT_NEAR(a["guaranteed_gpu_seconds"].get<double>(), ga1 * 2 / 3 + ga2, 1e-6);
  EXPECT_NEAR(a["borrowed_gpu_seconds"].get<double>(), ga1 / 3, 1e-6);
  EXPECT_EQ(a["jobs_started"], 2);
  // Whole GPUs hold their 80 GiB; the half GPU half of it.
  EXPECT_NEAR(a["gpu_memory_gib_seconds"].get<double>(), ga1 / 3 * 3 * 80 + ga2 * 2 * 40, 1e-3);
  const json& b = *RowOf(total, "team-b");
  EXPECT_NEAR(b["borrowed_gpu_seconds"].get<double>(), gb1, 1e-6);
  EXPECT_EQ(b["guaranteed_gpu_seconds"], 0.0);

  // By day: today's row per tenant adds up to the same.
  const json days = Usage("?by=day&tenant=team-a", admin_);
  ASSERT_GE(days["rows"].size(), 1u);
  double sum = 0;
  for (const json& r : days["rows"]) sum += r["gpu_seconds"].get<double>();
  EXPECT_NEAR(sum, ga1 + ga2, 1e-6);

  // A clean stop writes the snapshot; a crash replays the journal after it.
  ASSERT_EQ(server_->Stop(), 0) << server_->log();
  ASSERT_TRUE(server_->Start()) << server_->log();
  EXPECT_EQ(Usage("?by=total", admin_)["rows"], total["rows"]);
  EXPECT_NEAR(JobGpuSeconds(a1), ga1, 1e-9);
  const int64_t b2 = RunFor(token_b_, 1, 200);
  const double gb2 = JobGpuSeconds(b2);
  const json before_crash = Usage("?by=total", admin_);
  server_->Kill();
  ASSERT_TRUE(server_->Start()) << server_->log();
  const json after_crash = Usage("?by=total", admin_);
  EXPECT_EQ(after_crash["rows"], before_crash["rows"]);
  EXPECT_NEAR((*RowOf(after_crash, "team-b"))["gpu_seconds"].get<double>(), gb1 + gb2, 1e-6);
}

TEST_F(UsageE2eTest, TenantsSeeTheirOwnReadersSeeAllAndBadQueriesNameTheirField) {
  RunFor(token_a_, 1, 200);
  RunFor(token_b_, 1, 200);
  const json mine = Usage("?by=total", token_b_);
  ASSERT_EQ(mine["rows"].size(), 1u) << mine.dump();
  EXPECT_EQ(mine["rows"][0]["tenant"], "team-b");
  EXPECT_EQ(Usage("?tenant=team-b&by=total", token_b_)["rows"], mine["rows"]);
  const json other = Usage("?tenant=team-a", token_b_, 403);
  EXPECT_EQ(other["error"]["field"], "tenant");
  auto reader = Http(*server_, "POST", "/v1/tokens", admin_, json{{"name", "auditor"}, {"read_only", true}});
  ASSERT_EQ(reader.status, 201) << reader.text;
  EXPECT_EQ(Usage("?by=total", reader.body["token"])["rows"].size(), 2u);
  EXPECT_EQ(Usage("", "", 401)["error"]["code"], "unauthorized");

  for (const auto& [query, field] : std::vector<std::pair<std::string, std::string>>{
           {"?from=yesterday", "from"},
           {"?to=2026-02-30", "to"},
           {"?from=2026-12-05&to=2026-12-01", "to"},
           {"?by=month", "by"},
           {"?pool=nowhere", "pool"},
           {"?tenant=nobody", "tenant"}}) {
    const json e = Usage(query, admin_, 400);
    EXPECT_EQ(e["error"]["field"], field) << query << ": " << e.dump();
  }
}

TEST_F(UsageE2eTest, TheCliPrintsTheSameRowsAsTableCsvAndJson) {
  const int64_t id = RunFor(token_a_, 2, 300);
  RunFor(token_b_, 0.25, 200);
  const json api = Usage("?by=total", admin_);

  const BinaryRun j = Cli(admin_, {"usage", "--by", "total", "-o", "json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_EQ(json::parse(j.out)["rows"], api["rows"]);

  const BinaryRun csv = Cli(admin_, {"usage", "--by", "total", "-o", "csv"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_EQ(csv.out.substr(0, csv.out.find('\n')),
            "tenant,pool,period_start,period_end,gpu_seconds,guaranteed_gpu_seconds,borrowed_gpu_seconds,"
            "lent_gpu_seconds,gpu_memory_gib_seconds,jobs_started");
  EXPECT_EQ(std::count(csv.out.begin(), csv.out.end(), '\n'), 3) << csv.out;
  EXPECT_NE(csv.out.find("\nteam-a,a100,"), std::string::npos) << csv.out;

  const BinaryRun table = Cli(admin_, {"usage", "--tenant", "team-a", "--from", "2020-01-01"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(table.out.rfind("TENANT   POOL   FROM", 0), 0u) << table.out;
  EXPECT_NE(table.out.find("team-a"), std::string::npos);
  EXPECT_EQ(table.out.find("team-b"), std::string::npos);

  // A tenant's token: its own rows; another tenant's is refused.
  const BinaryRun own = Cli(token_b_, {"usage", "-o", "json"});
  ASSERT_EQ(own.exit_code, 0) << own.err;
  for (const json& r : json::parse(own.out)["rows"]) EXPECT_EQ(r["tenant"], "team-b");
  const BinaryRun refused = Cli(token_b_, {"usage", "--tenant", "team-a"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("tenant"), std::string::npos) << refused.err;
  const BinaryRun bad = Cli(admin_, {"usage", "--from", "soon"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("from"), std::string::npos) << bad.err;

  const BinaryRun get = Cli(admin_, {"job", "get", std::to_string(id)});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  EXPECT_NE(get.out.find("gpu hours:"), std::string::npos) << get.out;
}

}  // namespace
}  // namespace gpupool::testing
