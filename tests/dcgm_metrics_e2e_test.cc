// `gpupool dev` serves its agent's DCGM-named device metrics (EXEC-10): the
// URL is printed and shown by GET /v1/nodes, every family is a DCGM
// exporter name with the exporter's type, the series carry the exporter's
// labels plus pool, tenant and job, and the memory in use is the device's
// reading, not the scheduler's booking.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "src/agent/fake_backend.h"
#include "src/agent/oci_runtime.h"
#include "tests/run_binary.h"
#include "tests/server_process.h"

namespace gpupool::testing {
namespace {

using nlohmann::json;

bool WaitUntil(const std::function<bool()>& pred, std::chrono::seconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return pred();
}

// The exporter's names and types (tests/fixtures/dcgm_exporter_fields.csv).
std::map<std::string, std::string> ExporterFields() {
  std::map<std::string, std::string> out;
  std::istringstream in(ReadTextFile(std::string(GPUPOOL_SOURCE_DIR) + "/tests/fixtures/dcgm_exporter_fields.csv"));
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t comma = line.find(',');
    std::string type = line.substr(comma + 1);
    type.erase(0, type.find_first_not_of(' '));
    out[line.substr(0, comma)] = type;
  }
  return out;
}

struct Series {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// A strict reading of the text format: HELP and TYPE once per family,
// before its samples; every other line NAME{LABELS} VALUE. Failures are
// test failures naming the line.
void ParseExposition(const std::string& text, std::map<std::string, std::string>* types, std::vector<Series>* out) {
  static const std::regex sample(R"(^([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})? (\S+)$)");
  static const std::regex label(R"(([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)\"(,|$))");
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    if (line.starts_with("# HELP ")) continue;
    if (line.starts_with("# TYPE ")) {
      std::istringstream t(line.substr(7));
      std::string name, type;
      t >> name >> type;
      EXPECT_FALSE(types->contains(name)) << "two TYPE lines for " << name;
      (*types)[name] = type;
      continue;
    }
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, sample)) << "not a sample line: " << line;
    Series s;
    s.name = m[1];
    EXPECT_TRUE(types->contains(s.name)) << "a sample before its TYPE: " << line;
    const std::string labels = m[3];
    for (auto it = std::sregex_iterator(labels.begin(), labels.end(), label); it != std::sregex_iterator(); ++it) {
      s.labels[(*it)[1]] = (*it)[2];
    }
    s.value = std::stod(m[4]);
    out->push_back(std::move(s));
  }
}

class DcgmMetricsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = MakeTempDir();
    port_ = FreePort();
    pid_ = fork();
    if (pid_ == 0) {
      const int out = open((root_ + "/dev.out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      const int err = open((root_ + "/dev.err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      dup2(out, 1);
      dup2(err, 2);
      const std::string listen = "127.0.0.1:" + std::to_string(port_);
      const std::string data = root_ + "/data";
      execl(GPUPOOL_BINARY, GPUPOOL_BINARY, "dev", "--data", data.c_str(), "--listen", listen.c_str(), nullptr);
      _exit(127);
    }
    ASSERT_TRUE(WaitUntil([&] { return HttpTo("127.0.0.1", port_, "GET", "/healthz", "", "").status == 200; },
                          std::chrono::seconds(30)))
        << ReadTextFile(root_ + "/dev.err");
    ASSERT_TRUE(WaitUntil([&] { return !admin().empty(); }, std::chrono::seconds(10)));
  }
  void TearDown() override {
    StopChild(pid_);
    std::filesystem::remove_all(root_);
  }
  std::string admin() const {
    std::string t = ReadTextFile(root_ + "/data/admin.token");
    while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
    return t;
  }
  HttpResult Api(const std::string& method, const std::string& path, const json& body = nullptr) {
    return HttpTo("127.0.0.1", port_, method, path, admin(), body.is_null() ? "" : body.dump());
  }
  // The agent's metrics URL as GET /v1/nodes shows it ("" until then).
  std::string MetricsUrl() {
    for (const json& n : Api("GET", "/v1/nodes").body.value("nodes", json::array())) {
      if (n.value("name", "") == "dev-node-0" && n.contains("agent")) return n["agent"].value("metrics_url", "");
    }
    return "";
  }
  HttpResult Scrape(const std::string& url) {
    static const std::regex parts(R"(^http://([^:/]+):(\d+)(/.*)$)");
    std::smatch m;
    if (!std::regex_match(url, m, parts)) return {};
    return HttpTo(m[1], std::stoi(m[2]), "GET", m[3], "", "");
  }

  std::string root_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// Dev mode's banner names the web console, which its one listener serves without a token.
TEST_F(DcgmMetricsE2eTest, TheDevBannerNamesTheWebConsoleThatItsListenerServes) {
  const std::string console = "http://127.0.0.1:" + std::to_string(port_) + "/";
  // The banner is printed once the listener is up, so it may come just after /healthz first answers.
  EXPECT_TRUE(WaitUntil([&] { return ReadTextFile(root_ + "/dev.out").find("  console:      " + console + " ") != std::string::npos; },
                        std::chrono::seconds(5)))
      << ReadTextFile(root_ + "/dev.out");
  const HttpResult page = HttpTo("127.0.0.1", port_, "GET", "/", "", "");
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.text.find("<title>gpupool console</title>"), std::string::npos) << page.text;
}

TEST_F(DcgmMetricsE2eTest, TheAgentServesTheDcgmFamiliesWithDeviceReadings) {
  std::string url;
  ASSERT_TRUE(WaitUntil([&] { return !(url = MetricsUrl()).empty(); }, std::chrono::seconds(20)))
      << Api("GET", "/v1/nodes").text;
  EXPECT_TRUE(url.starts_with("http://127.0.0.1:")) << url;
  EXPECT_TRUE(url.ends_with("/metrics")) << url;
  EXPECT_NE(ReadTextFile(root_ + "/dev.out").find("metrics:      " + url), std::string::npos)
      << ReadTextFile(root_ + "/dev.out");

  // A job on one GPU, so that a series carries its tenant and job; busy
  // half the time (a fake GPU's utilization is its task's CPU), so that
  // idle reclamation leaves it alone.
  json job{{"name", "metrics-e2e"}, {"tenant", "team-a"}, {"gpus", 1}, {"cpu_cores", 1}, {"memory_gib", 1},
           {"command",
            {"sh", "-c", "while :; do i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 0.05; done"}}};
  auto submitted = Api("POST", "/v1/jobs", job);
  ASSERT_EQ(submitted.status, 201) << submitted.text;
  const std::string id = std::to_string(submitted.body.value("id", int64_t{-1}));
  std::string text;
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto r = Scrape(url);
        text = r.text;
        return r.status == 200 && text.find("job=\"" + id + "\"") != std::string::npos;
      },
      std::chrono::seconds(40)))
      << text << ReadTextFile(root_ + "/dev.err");

  std::map<std::string, std::string> types;
  std::vector<Series> series;
  ParseExposition(text, &types, &series);
  const auto exporter = ExporterFields();
  ASSERT_FALSE(exporter.empty());
  for (const auto& [name, type] : types) {
    ASSERT_TRUE(exporter.contains(name)) << name << " is not a DCGM exporter name";
    EXPECT_EQ(type, exporter.at(name)) << name;
  }
  // The fake's boards have every field but a fan.
  for (const DcgmFieldInfo& f : DcgmFieldTable()) {
    if (f.field == DcgmField::kFanSpeed) {
      EXPECT_FALSE(types.contains(f.name)) << "a fake board has no fan";
    } else {
      EXPECT_TRUE(types.contains(f.name)) << f.name << " missing:\n" << text;
    }
  }

  // Labels: the exporter's, the pool, and the job's tenant and id on its GPU.
  auto devices = ParseFakeGpus("4xH100", "dev-node-0");
  ASSERT_TRUE(devices.has_value());
  int job_gpu = -1;
  double fb_used = -1;
  for (const Series& s : series) {
    for (const char* l : {"gpu", "UUID", "device", "modelName", "Hostname", "pool"}) {
      ASSERT_TRUE(s.labels.contains(l)) << s.name << " lacks " << l;
    }
    EXPECT_EQ(s.labels.at("Hostname"), "dev-node-0");
    EXPECT_EQ(s.labels.at("modelName"), "fake H100");
    const int gpu = std::stoi(s.labels.at("gpu"));
    ASSERT_TRUE(gpu >= 0 && gpu < 4) << s.name;
    EXPECT_EQ(s.labels.at("UUID"), (*devices)[gpu].uuid);
    if (s.labels.contains("job") && s.labels.at("job") == id) {
      EXPECT_EQ(s.labels.at("tenant"), "team-a");
      job_gpu = gpu;
      if (s.name == "DCGM_FI_DEV_FB_USED") fb_used = s.value;
    }
  }
  ASSERT_GE(job_gpu, 0) << text;
  // Device memory in use, not the booking: the server books the whole GPU
  // for the job, while the device holds the driver's overhead.
  EXPECT_EQ(fb_used, static_cast<double>(kFakeDriverOverheadMib)) << text;
  const std::string server = Api("GET", "/metrics").text;
  std::smatch booked;
  const std::regex booked_re("gpupool_gpu_memory_booked_mib\\{[^}]*gpu=\"" + std::to_string(job_gpu) +
                             "\"[^}]*\\} (\\S+)");
  ASSERT_TRUE(std::regex_search(server, booked, booked_re)) << server;
  EXPECT_NE(std::stod(booked[1]), fb_used);
  EXPECT_EQ(std::stod(booked[1]), static_cast<double>((*devices)[job_gpu].memory_mib));
  EXPECT_EQ(server.find("DCGM_FI_"), std::string::npos) << "the server's /metrics has gpupool_* names only";

  // promtool, where installed: the text must parse; the only lints it may
  // report are about the exporter's own names: counters without _total or
  // with "counter" in the name, camelCase labels (modelName, UUID, Hostname).
  if (FindOnPath("promtool").empty()) {
    std::cout << "[ SKIPPED  ] promtool check metrics: promtool is not installed (Debian: apt-get install "
                 "prometheus)\n";
    return;
  }
  const std::string file = root_ + "/scrape.txt";
  std::ofstream(file) << text;
  const std::string cmd = "promtool check metrics < " + file + " 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  pclose(p);
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    // promtool's naming lints, about names the DCGM exporter chose.
    const bool exporters_names = line.find("_total") != std::string::npos ||
                                 line.find("label names should be written in 'snake_case' not 'camelCase'") !=
                                     std::string::npos ||
                                 line.find("metric name should not include type 'counter'") != std::string::npos;
    EXPECT_TRUE(exporters_names) << "promtool: " << line;
  }
}

}  // namespace
}  // namespace gpupool::testing
