// The client commands end to end against a fake server that speaks the API
// contract (docs/api/openapi.yaml): what each command sends, what it prints,
// and its exit status. The commands run in this process; stdout and stderr
// are captured.
#include "src/client/commands.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "src/client/job_file.h"
#include "src/client/json_yaml.h"

namespace gpupool {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr char kAdminToken[] = "gpt_admin_secret";

json ErrorBody(const std::string& code, const std::string& message, const std::string& field = "") {
  json e = {{"code", code}, {"message", message}};
  if (!field.empty()) e["field"] = field;
  return {{"error", e}};
}

json Job(int64_t id, const std::string& state) {
  return {{"id", id},
          {"name", "job-" + std::to_string(id)},
          {"tenant", "team-a"},
          {"state", state},
          {"kind", "training"},
          {"priority", 100},
          {"replicas", 1},
          {"submitted_at", "2026-11-29T12:00:00.000Z"},
          {"borrowed", false},
          {"placements", json::array()},
          {"preemptions", 0},
          {"interruptions", 0},
          {"request", {{"name", "job-" + std::to_string(id)}, {"gpus", 1}, {"replicas", 1}}}};
}

// A server with five jobs that answers pages of at most two.
class FakeServer {
 public:
  FakeServer() {
    auto reply = [](httplib::Response& res, int status, const json& body) {
      res.status = status;
      res.set_content(body.dump(), "application/json");
    };
    // Bodies are read after pre-routing: each handler records its request.
    server_.set_pre_routing_handler([this, reply](const httplib::Request& req, httplib::Response& res) {
      if (req.get_header_value("Authorization") != std::string("Bearer ") + kAdminToken) {
        Record(req);
        reply(res, 401, ErrorBody("unauthorized", "missing or unknown token"));
        return httplib::Server::HandlerResponse::Handled;
      }
      return httplib::Server::HandlerResponse::Unhandled;
    });
    server_.Post("/v1/jobs", [this, reply](const httplib::Request& req, httplib::Response& res) {
      Record(req);
      const json body = json::parse(req.body);
      if (body.value("gpu_fraction", 0.5) >= 1) {
        return reply(res, 400, ErrorBody("invalid_argument", "gpu_fraction must be in (0, 1)", "gpu_fraction"));
      }
      json job = Job(7, "pending");
      job["name"] = body["name"];
      job["request"] = body;
      job["waiting"] = "no node has 8 free GPUs with nvlink";
      if (body["name"] == "never") {
        job["state"] = "rejected";
        job["reason"] = "no pool can ever hold 8 x H100";
        job.erase("waiting");
      }
      reply(res, 201, job);
    });
    server_.Get("/v1/jobs", [this, reply](const httplib::Request& req, httplib::Response& res) {
      Record(req);
      const int64_t after = req.has_param("after") ? std::stoll(req.get_param_value("after")) : 0;
      const int64_t limit = std::min<int64_t>(2, std::stoll(req.get_param_value("limit")));
      json jobs = json::array();
      for (int64_t id = after + 1; id <= 5 && static_cast<int64_t>(jobs.size()) < limit; ++id) {
        jobs.push_back(Job(id, id == 1 ? "succeeded" : "running"));
      }
      const json next = !jobs.empty() && jobs.back()["id"] != 5 ? jobs.back()["id"] : json(nullptr);
      reply(res, 200, {{"jobs", jobs}, {"next_after", next}});
    });
    server_.Get(R"(/v1/jobs/(\d+))", [this, reply](const httplib::Request& req, httplib::Response& res) {
      Record(req);
      const int64_t id = std::stoll(req.matches[1]);
      if (id > 5) return reply(res, 404, ErrorBody("not_found", "no job " + std::to_string(id)));
      reply(res, 200, Job(id, "running"));
    });
    server_.Delete(R"(/v1/jobs/(\d+))", [this, reply](const httplib::Request& req, httplib::Response& res) {
      Record(req);
      const int64_t id = std::stoll(req.matches[1]);
      if (id == 1) return reply(res, 409, ErrorBody("conflict", "job 1 has already ended (succeeded)"));
      reply(res, 200, Job(id, "cancelled"));
    });
    server_.Post("/v1/tenants", [this, reply](const httplib::Request& req, httplib::Response& res) {
      Record(req);
      const json body = json::parse(req.body);
      json t = {{"name", body["name"]}, {"quota", body.value("quota", json::object())}, {"usage", json::object()}};
      t["token"] = "gpt_team_a_token";
      reply(res, 201, t);
    });
    server_.Put(R"(/v1/tenants/([a-z0-9-]+)/quota)",
                [this, reply](const httplib::Request& req, httplib::Response& res) {
                  Record(req);
                  json body = json::parse(req.body);
                  const std::string pool = body["pool"];
                  body.erase("pool");
                  reply(res, 200, {{"name", req.matches[1]}, {"quota", {{pool, body}}}, {"usage", json::object()}});
                });
    server_.Get("/v1/tenants", [this, reply](const httplib::Request& req, httplib::Response& res) {
      Record(req);
      reply(
          res, 200,
          {{"tenants",
            {{{"name", "team-a"},
              {"quota", {{"default", {{"guaranteed_gpus", 2}, {"limit_gpus", 4}, {"weight", 1}, {"reserved", false}}}}},
              {"usage", {{"default", {{"used_gpus", 1.25}, {"borrowed_gpus", 0}, {"lent_gpus", 0}}}}}}}}});
    });
    server_.Post("/v1/nodes", [this, reply](const httplib::Request& req, httplib::Response& res) {
      Record(req);
      json node = json::parse(req.body);
      node["pool"] = "default";
      node["condition"] = "ready";
      node["free_gpus"] = node["gpus"];
      node["gpu"] = json::array();
      node.erase("class");
      reply(res, 201, node);
    });
    // The operators' node commands (issue 19): node n1 answers with an
    // operator's cordon; "busy" refuses a removal without force.
    auto node_view = [](const std::string& name, const std::string& drain) {
      json c = {{"by", "operator"}, {"actor", "admin"}, {"reason", "fan"}, {"since", "2026-11-29T12:00:00.000Z"}};
      if (!drain.empty()) {
        c["drain"] = drain;
        c["drain_deadline"] = "2026-11-29T12:10:00.000Z";
      }
      return json{{"name", name},     {"pool", "default"},   {"model", "H100"},      {"gpus", 8},
                  {"free_gpus", 8},   {"cpu_cores", 96},     {"memory_gib", 1024},   {"condition", "cordoned"},
                  {"gpu", json::array()}, {"cordons", json::array({c})}, {"changed", true}};
    };
    server_.Post(R"(/v1/nodes/([a-z0-9-]+)/(cordon|uncordon|drain))",
                 [this, reply, node_view](const httplib::Request& req, httplib::Response& res) {
                   Record(req);
                   const std::string name = req.matches[1], op = req.matches[2];
                   if (name == "nope") return reply(res, 404, ErrorBody("not_found", "no node 'nope'", "name"));
                   json n = node_view(name, op != "drain" ? "" : name == "idle-node" ? "drained" : "draining");
                   if (op == "uncordon") {
                     n["condition"] = "ready";
                     n["cordons"] = json::array();
                     n["changed"] = false;
                   }
                   reply(res, 200, n);
                 });
    server_.Delete(R"(/v1/nodes/([a-z0-9-]+))", [this, reply, node_view](const httplib::Request& req,
                                                                           httplib::Response& res) {
      Record(req);
      const std::string name = req.matches[1];
      if (name == "busy" && req.get_param_value("force") != "true") {
        return reply(res, 409, ErrorBody("conflict", "node 'busy' runs job 4 (tenant a, replica 0): drain it first, "
                                                     "or remove it with force to interrupt them", "name"));
      }
      json n = node_view(name, "");
      n["condition"] = "removed";
      reply(res, 200, n);
    });
    server_.Get("/v1/pools", [this, reply](const httplib::Request& req, httplib::Response& res) {
      Record(req);
      reply(res, 200,
            {{"pools",
              {{{"name", "default"},
                {"models", json::array()},
                {"regions", json::array()},
                {"dedicated_to", json::array()},
                {"nodes", 2},
                {"capacity",
                 {{"total_gpus", 16},
                  {"allocated_gpus", 8},
                  {"reserved_gpus", 0},
                  {"fragmented_gpus", 0.5},
                  {"available_gpus", 7.5}}}}}}});
    });
    server_.Put("/v1/regions", [this, reply](const httplib::Request& req, httplib::Response& res) {
      Record(req);
      json body = json::parse(req.body);
      if (!body.contains("users")) body["users"] = json::array();
      reply(res, 200, body);
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() is a no-op until the accept loop runs, so wait for it.
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeServer() {
    server_.stop();
    thread_.join();
  }

  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<std::string> Log() {
    std::lock_guard lock(mu_);
    return log_;
  }
  json LastBody() {
    std::lock_guard lock(mu_);
    return bodies_.empty() ? json() : json::parse(bodies_.back());
  }

 private:
  void Record(const httplib::Request& req) {
    std::lock_guard lock(mu_);
    log_.push_back(req.method + " " + req.path + (req.params.empty() ? "" : "?" + Query(req)));
    bodies_.push_back(req.body);
  }

  static std::string Query(const httplib::Request& req) {
    std::string q;
    for (const char* key : {"state", "tenant", "order", "limit", "after", "before", "force", "reason"}) {
      if (req.has_param(key)) q += std::string(q.empty() ? "" : "&") + key + "=" + req.get_param_value(key);
    }
    return q;
  }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> log_;
  std::vector<std::string> bodies_;
};

struct Outcome {
  int exit_code = -1;
  std::string out, err;
};

class ClientCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Only the flags given below may decide; nothing from the developer's shell.
    for (const char* name : {"GPUPOOL_ADDR", "GPUPOOL_TOKEN", "GPUPOOL_CONFIG"}) unsetenv(name);
    std::string templ = (fs::temp_directory_path() / "gpupool-client-cli-XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    config_ = dir_ + "/config.yaml";
    std::ofstream(config_) << "# empty\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `gpupool ARGS...` in this process.
  Outcome Run(std::vector<std::string> args) {
    args.insert(args.begin(), "gpupool");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    CLI::App app{"gpupool"};
    app.require_subcommand(1);
    AddClientCommands(app);
    std::stringstream out, err;
    auto* old_out = std::cout.rdbuf(out.rdbuf());
    auto* old_err = std::cerr.rdbuf(err.rdbuf());
    Outcome o;
    try {
      app.parse(static_cast<int>(argv.size()), argv.data());
      o.exit_code = 0;
    } catch (const CLI::ParseError& e) {
      o.exit_code = app.exit(e, out, err);
    }
    std::cout.rdbuf(old_out);
    std::cerr.rdbuf(old_err);
    o.out = out.str();
    o.err = err.str();
    return o;
  }
  // As the admin, against the fake server.
  Outcome Admin(std::vector<std::string> args) {
    const std::vector<std::string> extra = {"--addr", server_.Url(), "--token", kAdminToken, "--config", config_};
    args.insert(args.end(), extra.begin(), extra.end());
    return Run(std::move(args));
  }

  std::string Example(const std::string& name) const { return std::string(GPUPOOL_SOURCE_DIR) + "/examples/" + name; }

  FakeServer server_;
  std::string dir_, config_;
};

TEST_F(ClientCommandsTest, SubmitSendsTheJobFileAsJsonAndPrintsTheServersJob) {
  const Outcome o = Admin({"job", "submit", "-f", Example("training-8gpu-nvlink.yaml"), "-o", "json"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(o.err, "");
  const json printed = json::parse(o.out);
  EXPECT_EQ(printed["id"], 7);
  EXPECT_EQ(printed["state"], "pending");
  EXPECT_EQ(server_.Log(), std::vector<std::string>{"POST /v1/jobs"});
  EXPECT_EQ(server_.LastBody().dump(), LoadJobFile(Example("training-8gpu-nvlink.yaml"))->dump());
}

TEST_F(ClientCommandsTest, SubmitTableSaysTheIdStateAndWhyItWaits) {
  const Outcome o = Admin({"job", "submit", "-f", Example("batch-deadline.yaml")});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(o.out, "job 7 submitted (pending): no node has 8 free GPUs with nvlink\n");
}

TEST_F(ClientCommandsTest, RejectedSubmissionExitsOne) {
  const std::string file = dir_ + "/never.yaml";
  std::ofstream(file) << "name: never\ntenant: team-a\ngpus: 8\n";
  const Outcome o = Admin({"job", "submit", "-f", file, "-o", "json"});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_EQ(json::parse(o.out)["state"], "rejected");
  EXPECT_EQ(o.err, "error: job 7 was rejected: no pool can ever hold 8 x H100\n");
  const Outcome table = Admin({"job", "submit", "-f", file});
  EXPECT_EQ(table.exit_code, 1);
  EXPECT_EQ(table.out, "");
  EXPECT_EQ(table.err, o.err);
}

TEST_F(ClientCommandsTest, ServerErrorsArePrintedWithTheirField) {
  const std::string file = dir_ + "/bad.yaml";
  std::ofstream(file) << "name: x\ngpu_fraction: 1.5\n";
  const Outcome o = Admin({"job", "submit", "-f", file});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_EQ(o.out, "");
  EXPECT_EQ(o.err, "error: gpu_fraction must be in (0, 1) (field: gpu_fraction)\n");
}

TEST_F(ClientCommandsTest, JobFileErrorsNameTheLocationAndSendNothing) {
  const std::string file = dir_ + "/typo.yaml";
  std::ofstream(file) << "name: x\nraplicas: 2\n";
  const Outcome o = Admin({"job", "submit", "-f", file});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_EQ(o.err.rfind("error: " + file + ":2:1: unknown key 'raplicas'", 0), 0u) << o.err;
  EXPECT_TRUE(server_.Log().empty());
}

TEST_F(ClientCommandsTest, ListFollowsNextAfterUntilTheLastPage) {
  const Outcome o = Admin({"job", "list", "-o", "json", "--state", "running", "--oldest-first", "--all"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const json printed = json::parse(o.out);
  ASSERT_EQ(printed["jobs"].size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(printed["jobs"][i]["id"], i + 1);
  EXPECT_TRUE(printed["next_after"].is_null());
  EXPECT_EQ(server_.Log(), (std::vector<std::string>{"GET /v1/jobs?state=running&order=oldest&limit=1000",
                                                     "GET /v1/jobs?state=running&order=oldest&limit=1000&after=2",
                                                     "GET /v1/jobs?state=running&order=oldest&limit=1000&after=4"}));
}

TEST_F(ClientCommandsTest, ListStopsAtTheLimit) {
  const Outcome o = Admin({"job", "list", "--limit", "3", "--tenant", "team-a", "-o", "yaml", "--oldest-first"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  auto printed = YamlToJson(o.out, "stdout");
  ASSERT_TRUE(printed) << printed.error().message;
  ASSERT_EQ((*printed)["jobs"].size(), 3u);
  EXPECT_EQ((*printed)["next_after"], 3);
  EXPECT_EQ(server_.Log(), (std::vector<std::string>{"GET /v1/jobs?tenant=team-a&order=oldest&limit=3",
                                                     "GET /v1/jobs?tenant=team-a&order=oldest&limit=1&after=2"}));
}

TEST_F(ClientCommandsTest, ListTableHasAColumnPerField) {
  const Outcome o = Admin({"job", "list", "--limit", "1"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  std::istringstream lines(o.out);
  auto words = [](const std::string& line) {
    std::istringstream in(line);
    std::vector<std::string> out;
    for (std::string w; in >> w;) out.push_back(w);
    return out;
  };
  std::string header, row, extra;
  std::getline(lines, header);
  std::getline(lines, row);
  EXPECT_FALSE(std::getline(lines, extra));
  EXPECT_EQ(words(header),
            (std::vector<std::string>{"ID", "NAME", "TENANT", "STATE", "PRIORITY", "GPUS", "AGE", "NODES", "REASON"}));
  const auto cells = words(row);
  ASSERT_EQ(cells.size(), 8u) << row;  // no REASON
  EXPECT_EQ(std::vector<std::string>(cells.begin(), cells.begin() + 6),
            (std::vector<std::string>{"1", "job-1", "team-a", "succeeded", "100", "1"}));
  EXPECT_EQ(cells[7], "-");
  EXPECT_EQ(row.find("succeeded"), header.find("STATE"));
}

TEST_F(ClientCommandsTest, GetPrintsTheJobAsYamlOrJson) {
  const Outcome yaml = Admin({"job", "get", "3", "-o", "yaml"});
  ASSERT_EQ(yaml.exit_code, 0) << yaml.err;
  auto parsed = YamlToJson(yaml.out, "stdout");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->dump(), Job(3, "running").dump());
  const Outcome j = Admin({"job", "get", "3", "-o", "json"});
  EXPECT_EQ(json::parse(j.out)["state"], "running");
}

TEST_F(ClientCommandsTest, NotFoundAndConflictExitOne) {
  const Outcome missing = Admin({"job", "get", "99"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err, "error: no job 99\n");
  const Outcome ended = Admin({"job", "cancel", "1"});
  EXPECT_EQ(ended.exit_code, 1);
  EXPECT_EQ(ended.err, "error: job 1 has already ended (succeeded)\n");
  const Outcome ok = Admin({"job", "cancel", "2"});
  EXPECT_EQ(ok.exit_code, 0);
  EXPECT_EQ(ok.out, "job 2 cancelled\n");
  EXPECT_EQ(server_.Log().back(), "DELETE /v1/jobs/2");
}

TEST_F(ClientCommandsTest, TenantCreateSendsTheQuotaAndPrintsTheToken) {
  const Outcome o =
      Admin({"tenant", "create", "team-a", "--pool", "default", "--guaranteed", "2", "--limit", "4.5", "-o", "json"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(json::parse(o.out)["token"], "gpt_team_a_token");
  EXPECT_EQ(server_.LastBody().dump(),
            R"({"name":"team-a","quota":{"default":{"guaranteed_gpus":2,"limit_gpus":4.5}}})");

  const Outcome table = Admin({"tenant", "create", "team-b"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(server_.LastBody().dump(), R"({"name":"team-b"})");
  EXPECT_NE(table.out.find("\ntoken: gpt_team_a_token\n"), std::string::npos) << table.out;
}

TEST_F(ClientCommandsTest, TenantQuotaPutsOnePool) {
  const Outcome o =
      Admin({"tenant", "quota", "team-a", "--pool", "h100", "--guaranteed", "1.5", "--weight", "2", "--reserved"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(server_.Log().back(), "PUT /v1/tenants/team-a/quota");
  EXPECT_EQ(server_.LastBody().dump(), R"({"guaranteed_gpus":1.5,"pool":"h100","reserved":true,"weight":2})");
  EXPECT_EQ(o.out,
            "NAME     POOL   GUARANTEED   LIMIT   WEIGHT   RESERVED   USED   BORROWED   LENT\n"
            "team-a   h100   1.5          -       2        true       -      -          -\n");
}

TEST_F(ClientCommandsTest, QuotaNeedsPoolAndGuarantee) {
  const Outcome o = Admin({"tenant", "quota", "team-a", "--guaranteed", "1"});
  EXPECT_NE(o.exit_code, 0);
  EXPECT_NE(o.err.find("--pool is required"), std::string::npos) << o.err;
  EXPECT_TRUE(server_.Log().empty());
}

TEST_F(ClientCommandsTest, TenantListTable) {
  const Outcome o = Admin({"tenant", "list"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(o.out,
            "NAME     POOL      GUARANTEED   LIMIT   WEIGHT   RESERVED   USED   BORROWED   LENT\n"
            "team-a   default   2            4       1        false      1.25   0          0\n");
}

TEST_F(ClientCommandsTest, NodeAddSendsOnlyGivenPlacementLabels) {
  const Outcome o = Admin({"node", "add", "h100-0", "--model", "H100", "--gpus", "8", "--cpu-cores", "96",
                           "--memory-gib", "1024", "--rack", "rack-1", "--class", "nvlink"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(
      server_.LastBody().dump(),
      R"({"class":"nvlink","cpu_cores":96,"gpus":8,"memory_gib":1024,"model":"H100","name":"h100-0","rack":"rack-1"})");
  EXPECT_EQ(o.out,
            "NAME     POOL      MODEL   GPUS   FREE   CPU   MEMORY_GIB   REGION   ZONE   RACK     CONDITION   CORDONED_BY   UNHEALTHY   ISOLATION\n"
            "h100-0   default   H100    8      8      96    1024         -        -      rack-1   ready       -             -           -\n");
}

TEST_F(ClientCommandsTest, NodeCordonDrainUncordonAndRemoveSendTheirRequestsAndPrintTheNode) {
  const Outcome cordon = Admin({"node", "cordon", "n1", "--reason", "fan"});
  ASSERT_EQ(cordon.exit_code, 0) << cordon.err;
  EXPECT_EQ(server_.Log().back(), "POST /v1/nodes/n1/cordon");
  EXPECT_EQ(server_.LastBody().dump(), R"({"reason":"fan"})");
  EXPECT_TRUE(cordon.out.starts_with("node n1 cordoned\nNAME ")) << cordon.out;
  EXPECT_NE(cordon.out.find("cordoned by operator (admin) since 2026-11-29T12:00:00.000Z: fan\n"), std::string::npos)
      << cordon.out;

  const Outcome drain = Admin({"node", "drain", "n1", "--timeout", "10m", "-o", "json"});
  ASSERT_EQ(drain.exit_code, 0) << drain.err;
  EXPECT_EQ(server_.Log().back(), "POST /v1/nodes/n1/drain");
  EXPECT_EQ(server_.LastBody().dump(), R"({"timeout_s":600})");
  EXPECT_EQ(json::parse(drain.out)["cordons"][0]["drain"], "draining");
  const Outcome draining = Admin({"node", "drain", "n1"});
  EXPECT_TRUE(draining.out.starts_with("node n1 draining\n")) << draining.out;
  // A node with nothing on it is drained at once, and the line says so.
  const Outcome drained = Admin({"node", "drain", "idle-node"});
  ASSERT_EQ(drained.exit_code, 0) << drained.err;
  EXPECT_TRUE(drained.out.starts_with("node idle-node drained\n")) << drained.out;

  const Outcome uncordon = Admin({"node", "uncordon", "n1"});
  ASSERT_EQ(uncordon.exit_code, 0) << uncordon.err;
  EXPECT_EQ(server_.Log().back(), "POST /v1/nodes/n1/uncordon");
  EXPECT_EQ(server_.LastBody().dump(), "{}");
  EXPECT_TRUE(uncordon.out.starts_with("node n1 unchanged (already uncordoned)\n")) << uncordon.out;

  const Outcome refused = Admin({"node", "remove", "busy"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_EQ(refused.err,
            "error: node 'busy' runs job 4 (tenant a, replica 0): drain it first, or remove it with force to "
            "interrupt them (field: name)\n");
  EXPECT_EQ(server_.Log().back(), "DELETE /v1/nodes/busy?force=false");
  const Outcome forced = Admin({"node", "remove", "busy", "--force", "--reason", "rma 12"});
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_EQ(server_.Log().back(), "DELETE /v1/nodes/busy?force=true&reason=rma 12");
  EXPECT_TRUE(forced.out.starts_with("node busy removed\n")) << forced.out;

  const Outcome missing = Admin({"node", "cordon", "nope"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err, "error: no node 'nope' (field: name)\n");
}

TEST_F(ClientCommandsTest, NodeDrainRefusesABadTimeoutBeforeSending) {
  for (const char* bad : {"soon", "-5m", "169h", "1500ms"}) {
    const Outcome o = Admin({"node", "drain", "n1", std::string("--timeout=") + bad});
    EXPECT_NE(o.exit_code, 0) << bad;
    EXPECT_TRUE(o.err.starts_with("error: --timeout: ")) << bad << ": " << o.err;
  }
  EXPECT_TRUE(server_.Log().empty());
  // Only drain takes a timeout, only remove --force.
  EXPECT_NE(Admin({"node", "cordon", "n1", "--timeout", "5m"}).exit_code, 0);
  EXPECT_NE(Admin({"node", "drain", "n1", "--force"}).exit_code, 0);
  EXPECT_TRUE(server_.Log().empty());
}

TEST_F(ClientCommandsTest, RegionsSetSendsTheFileAsJson) {
  const std::string file = dir_ + "/regions.yaml";
  std::ofstream(file) << "policy: nearest\nregions:\n  - {name: east, price_per_gpu_hour: 2.5, latency_ms: {nyc: 10}}\n";
  const Outcome o = Admin({"regions", "set", "-f", file});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(server_.Log().back(), "PUT /v1/regions");
  EXPECT_EQ(server_.LastBody().dump(),
            R"({"policy":"nearest","regions":[{"latency_ms":{"nyc":10},"name":"east","price_per_gpu_hour":2.5}]})");
  EXPECT_EQ(o.out,
            "policy: nearest\n"
            "REGION   PRICE_PER_GPU_HOUR   LATENCY_MS\n"
            "east     2.5                  nyc=10\n");
  const Outcome missing = Admin({"regions", "set", "-f", dir_ + "/nope.json"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("nope.json: cannot open"), std::string::npos) << missing.err;
}

TEST_F(ClientCommandsTest, PoolListShowsCapacity) {
  const Outcome o = Admin({"pool", "list"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(
      o.out,
      "NAME      MODELS   REGIONS   NODES   TOTAL   ALLOCATED   RESERVED   FRAGMENTED   AVAILABLE   DEDICATED_TO\n"
      "default   -        -         2       16      8           0          0.5          7.5         -\n");
}

TEST_F(ClientCommandsTest, MissingTokenSaysHowToGiveOne) {
  const Outcome o = Run({"pool", "list", "--addr", server_.Url(), "--config", config_});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_EQ(o.err,
            "error: missing or unknown token; no token was given: give a token with --token, --token-file, the "
            "GPUPOOL_TOKEN environment variable, or 'token:' / 'token_file:' in ~/.config/gpupool/config.yaml\n");
}

TEST_F(ClientCommandsTest, TokenFromConfigFileAndEnvironment) {
  const std::string token_file = dir_ + "/admin.token";
  std::ofstream(token_file) << kAdminToken << "\n";
  std::ofstream(config_) << "addr: " << server_.Url() << "\ntoken_file: admin.token\n";
  EXPECT_EQ(Run({"pool", "list", "--config", config_}).exit_code, 0);

  std::ofstream(config_) << "addr: " << server_.Url() << "\n";
  setenv("GPUPOOL_TOKEN", "gpt_wrong", 1);
  const Outcome wrong = Run({"pool", "list", "--config", config_});
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_EQ(wrong.err, "error: missing or unknown token; the token came from GPUPOOL_TOKEN\n");
  // The flag wins over the environment.
  EXPECT_EQ(Run({"pool", "list", "--config", config_, "--token-file", token_file}).exit_code, 0);
  unsetenv("GPUPOOL_TOKEN");
}

TEST_F(ClientCommandsTest, UnreachableServerNamesTheAddressAndHowToSetIt) {
  const Outcome o = Run({"job", "list", "--addr", "http://127.0.0.1:1", "--config", config_});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_EQ(o.err.rfind("error: cannot reach the gpupool server at http://127.0.0.1:1 (--addr): ", 0), 0u) << o.err;
  EXPECT_NE(o.err.find("set the server address with --addr URL, the GPUPOOL_ADDR environment variable, or 'addr:' "
                       "in ~/.config/gpupool/config.yaml"),
            std::string::npos)
      << o.err;
}

TEST_F(ClientCommandsTest, BadOutputFormatIsAUsageError) {
  const Outcome o = Admin({"pool", "list", "-o", "xml"});
  EXPECT_NE(o.exit_code, 0);
  EXPECT_NE(o.exit_code, 1);
  EXPECT_NE(o.err.find("xml"), std::string::npos) << o.err;
  EXPECT_TRUE(server_.Log().empty());
}

}  // namespace
}  // namespace gpupool
