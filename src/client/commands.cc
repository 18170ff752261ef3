#include "src/client/commands.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <sstream>

#include "src/base/time_text.h"
#include "src/client/api_client.h"
#include "src/client/client_config.h"
#include "src/client/job_file.h"
#include "src/client/json_yaml.h"
#include "src/client/resource_tables.h"
#include "src/client/table.h"

namespace gpupool {
namespace {

using nlohmann::json;

enum class Output { kTable, kJson, kYaml, kCsv };

struct GlobalFlags {
  ClientFlags client;
  std::string output = "table";
};

Output ParseOutput(const std::string& s) {
  if (s == "json") return Output::kJson;
  if (s == "yaml") return Output::kYaml;
  if (s == "csv") return Output::kCsv;  // only where the command offers it
  return Output::kTable;  // CLI11 has checked the value
}

int64_t NowUnixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Whole numbers as JSON integers, so that `--guaranteed 2` sends 2, not 2.0.
json Number(double v) {
  if (std::isfinite(v) && std::floor(v) == v && std::fabs(v) < 9007199254740992.0) {
    return json(static_cast<int64_t>(v));
  }
  return json(v);
}

// Prints `data` as the format asks; `table` renders -o table.
void Print(const json& data, Output out, const std::function<std::string()>& table) {
  switch (out) {
    case Output::kJson:
      std::cout << data.dump(2) << "\n";
      break;
    case Output::kYaml:
      std::cout << JsonToYaml(data);
      break;
    case Output::kTable:
    case Output::kCsv:
      std::cout << table();
      break;
  }
}

// The body of one command: returns the exit status (0 or 1) or an Error.
using Body = std::function<Result<int>(ApiClient& api, Output out)>;

// Resolves the configuration, runs `body`, prints an error as
// "error: MESSAGE" on stderr and turns a non-zero status into CLI11's exit.
void Run(const GlobalFlags& g, const Body& body) {
  auto fail = [](const std::string& message) {
    std::cerr << "error: " << message << "\n";
    throw CLI::RuntimeError(1);
  };
  auto config = ResolveClientConfig(g.client, ProcessEnvironment());
  if (!config) fail(config.error().message);
  ApiClient api(std::move(*config));
  auto rc = body(api, ParseOutput(g.output));
  if (!rc) fail(rc.error().message);
  if (*rc != 0) throw CLI::RuntimeError(*rc);
}

// `csv`: the command also prints -o csv (through Print's table function).
void AddGlobalFlags(CLI::App* cmd, GlobalFlags& g, bool csv = false) {
  const std::string group = "Connection and output";
  cmd->add_option("--addr", g.client.addr,
                  "server URL, e.g. http://127.0.0.1:7070 (else $GPUPOOL_ADDR, the config file, "
                  "http://127.0.0.1:7070)")
      ->group(group);
  auto* token =
      cmd->add_option("--token", g.client.token, "bearer token (else $GPUPOOL_TOKEN, the config file)")->group(group);
  auto* token_file =
      cmd->add_option("--token-file", g.client.token_file, "file holding the bearer token")->group(group);
  token->excludes(token_file);
  cmd->add_option("--config", g.client.config,
                  "client config file (else $GPUPOOL_CONFIG, else ~/.config/gpupool/config.yaml; keys addr, token, "
                  "token_file, ca_cert)")
      ->group(group);
  cmd->add_option("--ca-cert", g.client.ca_cert,
                  "PEM file of the CA that signs an https:// server's certificate (else $GPUPOOL_CA_CERT, the "
                  "config file, the system's CAs)")
      ->group(group);
  cmd->add_option("-o,--output", g.output, csv ? "output format: table, csv, json or yaml" : "output format: table, json or yaml")
      ->check(csv ? CLI::IsMember({"table", "csv", "json", "yaml"}) : CLI::IsMember({"table", "json", "yaml"}))
      ->capture_default_str()
      ->group(group);
}

// Writes a token and a newline to `path`, mode 0600 (--write).
Status WriteTokenFile(const std::string& path, const std::string& token) {
  const std::string line = token + "\n";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  const bool ok = fd >= 0 && ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  if (fd >= 0) ::close(fd);
  if (!ok) return IoError("--write: cannot write " + path);
  return {};
}

std::string JobPath(int64_t id) { return "/v1/jobs/" + std::to_string(id); }
std::string TenantPath(const std::string& name) { return "/v1/tenants/" + UrlEncode(name); }

// --- jobs -------------------------------------------------------------------

// `job submit`'s flags for the common keys of a job request
// (docs/api/openapi.yaml's JobRequest); each one given overrides the file's.
struct JobFlags {
  std::string name, tenant, kind, priority, sharing, image, pool, requirement, deadline_after;
  double gpus = std::nan(""), gpu_fraction = std::nan(""), gpu_memory_gib = std::nan(""), cpu_cores = std::nan(""),
         memory_gib = std::nan("");
  int64_t replicas = 0;
  bool checkpointable = false;
  std::vector<std::string> env, command;
};

void AddJobFlags(CLI::App* cmd, JobFlags& j) {
  const std::string group = "Job (override the file's keys)";
  cmd->add_option("--name", j.name, "the job's name")->group(group);
  cmd->add_option("--tenant", j.tenant, "whose job (the admin must say; a tenant token is its own)")->group(group);
  cmd->add_option("--kind", j.kind, "training, batch, online-inference or development")->group(group);
  cmd->add_option("--priority", j.priority, "a priority class name or an integer within the classes")->group(group);
  auto* gpus = cmd->add_option("--gpus", j.gpus, "whole GPUs per replica")->check(CLI::NonNegativeNumber)->group(group);
  cmd->add_option("--gpu-fraction", j.gpu_fraction, "a share of one GPU, e.g. 0.25")
      ->check(CLI::Range(0.0, 1.0))
      ->excludes(gpus)
      ->group(group);
  cmd->add_option("--gpu-memory-gib", j.gpu_memory_gib, "GPU memory of a share")->check(CLI::NonNegativeNumber)->group(group);
  cmd->add_option("--sharing", j.sharing, "how a share is shared: any (the default), time-slice, mps, mig or auto")->group(group);
  cmd->add_option("--replicas", j.replicas, "replicas (a gang)")->check(CLI::PositiveNumber)->group(group);
  cmd->add_option("--cpu-cores", j.cpu_cores, "CPU cores per replica")->check(CLI::NonNegativeNumber)->group(group);
  cmd->add_option("--memory-gib", j.memory_gib, "memory per replica")->check(CLI::NonNegativeNumber)->group(group);
  cmd->add_option("--pool", j.pool, "only this pool")->group(group);
  cmd->add_option("--requirement", j.requirement, "a configured placement requirement, e.g. nvlink")->group(group);
  cmd->add_option("--image", j.image, "host, or an OCI image layout or rootfs path on the node")->group(group);
  cmd->add_flag("--checkpointable", j.checkpointable, "the job saves and resumes its state")->group(group);
  cmd->add_option("--deadline-after", j.deadline_after, "a deadline from now, e.g. 6h")->group(group);
  cmd->add_option("--env", j.env, "an environment variable NAME=VALUE (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->group(group);
  cmd->add_option("command", j.command, "the command and its arguments, after --")->group(group);
}

// The flags given, over `request` (an object).
void ApplyJobFlags(const JobFlags& j, json& request) {
  const auto text = [&](const char* key, const std::string& v) {
    if (!v.empty()) request[key] = v;
  };
  const auto number = [&](const char* key, double v) {
    if (!std::isnan(v)) request[key] = Number(v);
  };
  text("name", j.name);
  text("tenant", j.tenant);
  text("kind", j.kind);
  text("sharing", j.sharing);
  text("image", j.image);
  text("requirement", j.requirement);
  text("deadline_after", j.deadline_after);
  if (!j.priority.empty()) {
    const std::string digits = j.priority[0] == '-' ? j.priority.substr(1) : j.priority;
    const bool integer =
        !digits.empty() && digits.size() < 10 && digits.find_first_not_of("0123456789") == std::string::npos;
    request["priority"] = integer ? json(std::stoll(j.priority)) : json(j.priority);
  }
  if (!std::isnan(j.gpus)) request.erase("gpu_fraction");
  if (!std::isnan(j.gpu_fraction)) request.erase("gpus");
  number("gpus", j.gpus);
  number("gpu_fraction", j.gpu_fraction);
  number("gpu_memory_gib", j.gpu_memory_gib);
  number("cpu_cores", j.cpu_cores);
  number("memory_gib", j.memory_gib);
  if (j.replicas > 0) request["replicas"] = j.replicas;
  if (!j.pool.empty()) request["pools"] = json::array({j.pool});
  if (j.checkpointable) request["checkpointable"] = true;
  for (const std::string& e : j.env) {
    const size_t eq = e.find('=');
    request["env"][eq == std::string::npos ? e : e.substr(0, eq)] = eq == std::string::npos ? "" : e.substr(eq + 1);
  }
  if (!j.command.empty()) request["command"] = j.command;
}

bool IsTerminalState(const std::string& state) {
  return state == "succeeded" || state == "failed" || state == "cancelled" || state == "rejected" ||
         state == "evicted";
}

// `job logs -f`: polls the job's logs (GET .../logs?format=json) and prints
// what each log gained since the last poll, with a header line when there is
// more than one (a replica, a new attempt). Ends once the job has ended and
// two more polls bring nothing new. A log that grew by more than the tail the
// server returns says how much was skipped.
Result<int> FollowLogs(ApiClient& api, int64_t id, int64_t tail_bytes, double interval_s) {
  std::map<std::pair<int64_t, int64_t>, int64_t> printed;  // (replica, attempt) -> bytes
  std::pair<int64_t, int64_t> last_shown{-1, -1};
  int quiet_after_end = -1;  // polls without news since the job ended; -1: not ended
  const auto interval = std::chrono::milliseconds(static_cast<int64_t>(interval_s * 1000));
  while (quiet_after_end < 2) {
    GP_ASSIGN_OR_RETURN(auto page, api.Get(JobPath(id) + "/logs",
                                           {{"format", "json"}, {"tail_bytes", std::to_string(tail_bytes)}}));
    const json& parts = page["parts"];
    bool news = false;
    for (const json& p : parts.is_array() ? parts : json::array()) {
      const auto key = std::make_pair(p.value("replica", int64_t{0}), p.value("attempt", int64_t{0}));
      const int64_t bytes = p.value("bytes", int64_t{0});
      const std::string text = p.value("text", std::string());
      int64_t& done = printed[key];
      if (bytes <= done) continue;
      news = true;
      if (parts.size() > 1 || key.second > 1) {
        if (key != last_shown) {
          std::cout << "==> replica " << key.first << ", attempt " << key.second << " <==\n";
        }
        last_shown = key;
      }
      const int64_t fresh = bytes - done;
      if (fresh > static_cast<int64_t>(text.size())) {
        std::cout << "[... " << fresh - static_cast<int64_t>(text.size()) << " bytes not shown ...]\n";
      }
      std::cout << text.substr(text.size() - static_cast<size_t>(std::min<int64_t>(fresh, text.size())));
      std::cout.flush();
      done = bytes;
    }
    if (quiet_after_end >= 0) {
      quiet_after_end = news ? 0 : quiet_after_end + 1;
    } else {
      GP_ASSIGN_OR_RETURN(auto job, api.Get(JobPath(id)));
      if (IsTerminalState(job.value("state", std::string()))) quiet_after_end = 0;
    }
    if (quiet_after_end < 2) std::this_thread::sleep_for(interval);
  }
  return 0;
}

// gpupool job submit
void AddJobSubmit(CLI::App* job) {
  struct Flags {
    GlobalFlags g;
    std::string file;
    JobFlags job;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = job->add_subcommand(
      "submit", "Submit a job: from a YAML file (examples/*.yaml), from flags, or a file with flags overriding it");
  cmd->add_option("-f,--file", f->file, "job file (YAML, the keys of a job request)");
  AddJobFlags(cmd, f->job);
  AddGlobalFlags(cmd, f->g);
  cmd->callback([f] {
    Run(f->g, [f](ApiClient& api, Output out) -> Result<int> {
      json request = json::object();
      if (!f->file.empty()) {
        GP_ASSIGN_OR_RETURN(request, LoadJobFile(f->file));
      } else if (f->job.name.empty()) {
        return InvalidArgument("give --file FILE, or at least --name (and the job's other flags)");
      }
      ApplyJobFlags(f->job, request);
      GP_ASSIGN_OR_RETURN(auto job, api.Post("/v1/jobs", request));
      const std::string id = job.value("id", json()).dump();
      const std::string state = job.value("state", std::string("?"));
      Print(job, out, [&] {
        if (state == "rejected") return std::string();  // said on stderr below
        std::string line = "job " + id + " submitted (" + state + ")";
        if (auto w = job.find("waiting"); w != job.end() && w->is_string()) line += ": " + w->get<std::string>();
        return line + "\n";
      });
      if (state == "rejected") {
        std::cerr << "error: job " << id << " was rejected: " << job.value("reason", std::string("no reason given"))
                  << "\n";
        return 1;
      }
      return 0;
    });
  });
}

// gpupool job list
void AddJobList(CLI::App* job) {
  struct Flags {
    GlobalFlags g;
    std::string state, tenant;
    int64_t limit = 100;
    bool all = false, oldest_first = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd =
      job->add_subcommand("list", "List jobs, the newest first: the newest 100 unless --limit or --all");
  cmd->add_option("--state", f->state, "only jobs in this state")
      ->check(CLI::IsMember(
          {"pending", "running", "checkpointing", "succeeded", "failed", "cancelled", "rejected", "evicted"}));
  cmd->add_option("--tenant", f->tenant, "only this tenant's jobs (admin)");
  auto* limit = cmd->add_option("--limit", f->limit, "at most this many jobs")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_flag("--all", f->all, "every job (in pages of 1000)")->excludes(limit);
  cmd->add_flag("--oldest-first", f->oldest_first, "in ascending id instead");
  AddGlobalFlags(cmd, f->g);
  cmd->callback([f] {
    Run(f->g, [f](ApiClient& api, Output out) -> Result<int> {
      // Pages of at most 1000 (the server's maximum), following the
      // cursor until the server has no more or the limit is reached.
      constexpr int64_t kPage = 1000;
      const char* cursor = f->oldest_first ? "after" : "before";
      const std::string next_key = f->oldest_first ? "next_after" : "next_before";
      const int64_t cap = f->all ? INT64_MAX : f->limit;
      json jobs = json::array();
      json next = nullptr;
      while (true) {
        QueryParams q;
        if (!f->state.empty()) q.push_back({"state", f->state});
        if (!f->tenant.empty()) q.push_back({"tenant", f->tenant});
        q.push_back({"order", f->oldest_first ? "oldest" : "newest"});
        q.push_back({"limit", std::to_string(std::min(kPage, cap - static_cast<int64_t>(jobs.size())))});
        if (!next.is_null()) q.push_back({cursor, next.dump()});
        GP_ASSIGN_OR_RETURN(auto page, api.Get("/v1/jobs", q));
        const json& items = page["jobs"];
        if (items.is_array()) {
          for (const auto& j : items) jobs.push_back(j);
        }
        const json previous = next;
        next = page.value(next_key, json());
        if (!next.is_null() && (!next.is_number_integer() || next == previous)) {
          return FailedPrecondition("the server's job list did not advance (" + next_key + " " + next.dump() +
                                    " after " + previous.dump() + ")");
        }
        const bool full = static_cast<int64_t>(jobs.size()) >= cap;
        if (next.is_null() || full || !items.is_array() || items.empty()) break;
      }
      const json result = {{"jobs", jobs}, {next_key, next}};
      Print(result, out, [&] { return FormatJobsTable(jobs, NowUnixMillis()); });
      return 0;
    });
  });
}

// A job subcommand on one job by id: `call` asks the server and returns
// the answer, `text` gives its table form.
using JobCall = std::function<Result<json>(ApiClient&, int64_t id)>;
using JobText = std::function<std::string(const json& answer, int64_t id)>;
void AddJobIdCommand(CLI::App* job, const char* name, const char* help, JobCall call, JobText text) {
  struct Flags {
    GlobalFlags g;
    int64_t id = 0;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = job->add_subcommand(name, help);
  cmd->add_option("id", f->id, "job id")->required()->check(CLI::NonNegativeNumber);
  AddGlobalFlags(cmd, f->g);
  cmd->callback([f, call, text] {
    Run(f->g, [f, &call, &text](ApiClient& api, Output out) -> Result<int> {
      GP_ASSIGN_OR_RETURN(auto answer, call(api, f->id));
      Print(answer, out, [&] { return text(answer, f->id); });
      return 0;
    });
  });
}

// gpupool job get
void AddJobGet(CLI::App* job) {
  AddJobIdCommand(
      job, "get", "Show one job", [](ApiClient& api, int64_t id) { return api.Get(JobPath(id)); },
      [](const json& answer, int64_t) { return FormatJobDetail(answer, NowUnixMillis()); });
}

// gpupool job cancel
void AddJobCancel(CLI::App* job) {
  AddJobIdCommand(
      job, "cancel", "Cancel a job (pending or running)",
      [](ApiClient& api, int64_t id) { return api.Delete(JobPath(id)); },
      [](const json& answer, int64_t id) {
        return "job " + std::to_string(id) + " " + answer.value("state", std::string("cancelled")) + "\n";
      });
}

// gpupool job logs
void AddJobLogs(CLI::App* job) {
  struct Flags {
    GlobalFlags g;
    int64_t id = 0;
    int64_t tail_bytes = 1 << 20;
    bool follow = false;
    double interval_s = 1;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = job->add_subcommand("logs", "Print a job's task output (stdout and stderr, every replica and attempt)");
  cmd->add_option("--tail-bytes", f->tail_bytes, "at most this many bytes of each log, from its end")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{64} << 20));
  auto* follow = cmd->add_flag("-f,--follow", f->follow, "keep printing what the job writes until it ends");
  cmd->add_option("--interval", f->interval_s, "with --follow: seconds between polls")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 60.0))
      ->needs(follow);
  cmd->add_option("id", f->id, "job id")->required()->check(CLI::NonNegativeNumber);
  AddGlobalFlags(cmd, f->g);
  cmd->callback([f] {
    Run(f->g, [f](ApiClient& api, Output out) -> Result<int> {
      if (f->follow) {
        if (out != Output::kTable) return InvalidArgument("--follow prints the text as it comes: leave out -o");
        return FollowLogs(api, f->id, f->tail_bytes, f->interval_s);
      }
      GP_ASSIGN_OR_RETURN(auto text,
                          api.GetText(JobPath(f->id) + "/logs", {{"tail_bytes", std::to_string(f->tail_bytes)}}));
      Print(json{{"job", f->id}, {"logs", text}}, out, [&] { return text; });
      return 0;
    });
  });
}

void AddJobCommands(CLI::App& app) {
  CLI::App* job = app.add_subcommand("job", "Submit, list, inspect and cancel jobs (REST API client)");
  job->require_subcommand(1);
  AddJobSubmit(job);
  AddJobList(job);
  AddJobGet(job);
  AddJobCancel(job);
  AddJobLogs(job);
}

// --- tenants ----------------------------------------------------------------

// NaN: not given (the server applies its default).
struct QuotaFlags {
  std::string pool;
  double guaranteed = std::nan(""), limit = std::nan(""), weight = std::nan("");
  bool reserved = false;
};

json QuotaJson(const QuotaFlags& q) {
  json out = {{"guaranteed_gpus", Number(std::isnan(q.guaranteed) ? 0 : q.guaranteed)}};
  if (!std::isnan(q.limit)) out["limit_gpus"] = Number(q.limit);
  if (!std::isnan(q.weight)) out["weight"] = Number(q.weight);
  if (q.reserved) out["reserved"] = true;
  return out;
}

void AddQuotaFlags(CLI::App* cmd, QuotaFlags& q, bool required) {
  auto* pool = cmd->add_option("--pool", q.pool, "pool of the quota");
  auto* guaranteed = cmd->add_option("--guaranteed", q.guaranteed, "guaranteed GPUs (fractions allowed)")
                         ->check(CLI::NonNegativeNumber);
  auto* limit = cmd->add_option("--limit", q.limit, "elastic limit in GPUs (default: the guarantee)")
                    ->check(CLI::NonNegativeNumber);
  auto* weight =
      cmd->add_option("--weight", q.weight, "fair-share weight (> 0, default 1)")->check(CLI::PositiveNumber);
  auto* reserved = cmd->add_flag("--reserved", q.reserved, "never lend this guarantee to others");
  if (required) {
    pool->required();
    guaranteed->required();
  } else {
    guaranteed->needs(pool);
    pool->needs(guaranteed);
  }
  limit->needs(pool);
  weight->needs(pool);
  reserved->needs(pool);
}

void AddTenantCommands(CLI::App& app) {
  CLI::App* tenant = app.add_subcommand("tenant", "Create tenants, set quotas, list them (REST API client)");
  tenant->require_subcommand(1);

  {
    struct Flags {
      GlobalFlags g;
      std::string name;
      QuotaFlags quota;
    };
    auto f = std::make_shared<Flags>();
    CLI::App* cmd = tenant->add_subcommand("create", "Create a tenant (admin); prints its token once");
    cmd->add_option("name", f->name, "tenant name: [a-z0-9-], starting with a letter")->required();
    AddQuotaFlags(cmd, f->quota, /*required=*/false);
    AddGlobalFlags(cmd, f->g);
    cmd->callback([f] {
      Run(f->g, [f](ApiClient& api, Output out) -> Result<int> {
        json body = {{"name", f->name}};
        if (!f->quota.pool.empty()) body["quota"] = {{f->quota.pool, QuotaJson(f->quota)}};
        GP_ASSIGN_OR_RETURN(auto created, api.Post("/v1/tenants", body));
        Print(created, out, [&] {
          return FormatTenantsTable(json::array({created})) + "\ntoken: " + created.value("token", std::string("-")) +
                 "\n(shown only this once: keep it, e.g. in a file for --token-file)\n";
        });
        return 0;
      });
    });
  }

  {
    struct Flags {
      GlobalFlags g;
      std::string name;
      QuotaFlags quota;
    };
    auto f = std::make_shared<Flags>();
    CLI::App* cmd = tenant->add_subcommand("quota", "Set a tenant's quota in one pool (admin)");
    cmd->add_option("name", f->name, "tenant name")->required();
    AddQuotaFlags(cmd, f->quota, /*required=*/true);
    AddGlobalFlags(cmd, f->g);
    cmd->callback([f] {
      Run(f->g, [f](ApiClient& api, Output out) -> Result<int> {
        json body = QuotaJson(f->quota);
        body["pool"] = f->quota.pool;
        GP_ASSIGN_OR_RETURN(auto updated, api.Put(TenantPath(f->name) + "/quota", body));
        Print(updated, out, [&] { return FormatTenantsTable(json::array({updated})); });
        return 0;
      });
    });
  }

  {
    auto g = std::make_shared<GlobalFlags>();
    CLI::App* cmd = tenant->add_subcommand("list", "List tenants with their quotas and usage (admin)");
    AddGlobalFlags(cmd, *g);
    cmd->callback([g] {
      Run(*g, [](ApiClient& api, Output out) -> Result<int> {
        GP_ASSIGN_OR_RETURN(auto list, api.Get("/v1/tenants"));
        Print(list, out, [&] { return FormatTenantsTable(list.value("tenants", json::array())); });
        return 0;
      });
    });
  }

  {
    struct Flags {
      GlobalFlags g;
      std::string name;
    };
    auto f = std::make_shared<Flags>();
    CLI::App* cmd = tenant->add_subcommand("get", "Show one tenant's quotas and usage");
    cmd->add_option("name", f->name, "tenant name")->required();
    AddGlobalFlags(cmd, f->g);
    cmd->callback([f] {
      Run(f->g, [f](ApiClient& api, Output out) -> Result<int> {
        GP_ASSIGN_OR_RETURN(auto t, api.Get(TenantPath(f->name)));
        Print(t, out, [&] { return FormatTenantsTable(json::array({t})); });
        return 0;
      });
    });
  }
}

// --- tokens -----------------------------------------------------------------

void AddTokenCommands(CLI::App& app) {
  CLI::App* token = app.add_subcommand("token", "Create, list and revoke named tokens (REST API client)");
  token->require_subcommand(1);

  {
    struct Flags {
      GlobalFlags g;
      std::string name, tenant, expires_in, file;
      bool read_only = false;
    };
    auto f = std::make_shared<Flags>();
    CLI::App* cmd = token->add_subcommand(
        "create", "Create a named token of a tenant (the admin, or the tenant itself) or a read-only one; prints it once");
    cmd->add_option("name", f->name, "the token's name: [a-z0-9-], starting with a letter")->required();
    cmd->add_option("--tenant", f->tenant, "the tenant it acts for (default: the caller's; none with --read-only: the whole pool)");
    cmd->add_flag("--read-only", f->read_only, "a reader: GET requests only (dashboards)");
    cmd->add_option("--expires-in", f->expires_in, "lifetime such as 12h or 90d (default: until revoked)");
    cmd->add_option("--write", f->file, "write the token to this file (mode 0600) instead of printing it");
    AddGlobalFlags(cmd, f->g);
    cmd->callback([f] {
      Run(f->g, [f](ApiClient& api, Output out) -> Result<int> {
        json body = {{"name", f->name}};
        if (!f->tenant.empty()) body["tenant"] = f->tenant;
        if (f->read_only) body["read_only"] = true;
        if (!f->expires_in.empty()) body["expires_in"] = f->expires_in;
        GP_ASSIGN_OR_RETURN(auto created, api.Post("/v1/tokens", body));
        const std::string secret = created.value("token", "");
        if (!f->file.empty()) {
          GP_TRY(WriteTokenFile(f->file, secret));
          created.erase("token");
          created["token_file"] = f->file;
        }
        Print(created, out, [&] {
          std::string text = FormatTokensTable(json::array({created}));
          if (f->file.empty()) return text + "\ntoken: " + secret + "\n(shown only this once: keep it, e.g. in a file for --token-file)\n";
          return text + "token written to " + f->file + "\n";
        });
        return 0;
      });
    });
  }

  {
    struct Flags {
      GlobalFlags g;
      std::string tenant;
    };
    auto f = std::make_shared<Flags>();
    CLI::App* cmd = token->add_subcommand("list", "List tokens, revoked ones too (the admin: all; a tenant: its own)");
    cmd->add_option("--tenant", f->tenant, "only this tenant's (admin)");
    AddGlobalFlags(cmd, f->g);
    cmd->callback([f] {
      Run(f->g, [f](ApiClient& api, Output out) -> Result<int> {
        GP_ASSIGN_OR_RETURN(auto list, api.Get("/v1/tokens" + (f->tenant.empty() ? "" : "?tenant=" + UrlEncode(f->tenant))));
        Print(list, out, [&] { return FormatTokensTable(list.value("tokens", json::array())); });
        return 0;
      });
    });
  }

  {
    struct Flags {
      GlobalFlags g;
      std::string id;
    };
    auto f = std::make_shared<Flags>();
    CLI::App* cmd = token->add_subcommand("revoke", "Revoke a token by its ID (at once, for good)");
    cmd->add_option("id", f->id, "the token's ID (gpupool token list)")->required();
    AddGlobalFlags(cmd, f->g);
    cmd->callback([f] {
      Run(f->g, [f](ApiClient& api, Output out) -> Result<int> {
        GP_ASSIGN_OR_RETURN(auto revoked, api.Delete("/v1/tokens/" + UrlEncode(f->id)));
        Print(revoked, out, [&] { return FormatTokensTable(json::array({revoked})); });
        return 0;
      });
    });
  }
}

// --- audit ------------------------------------------------------------------

void AddAuditCommand(CLI::App& app) {
  struct Flags {
    GlobalFlags g;
    std::string actor;
    int64_t since = 0, limit = 1000;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("audit", "Who did what: the events requests caused, with actor and request id (admin)");
  cmd->add_option("--actor", f->actor, "only this actor (tenant/T:TOKEN) or principal (tenant/T, admin, node/N)");
  cmd->add_option("--since", f->since, "after this event sequence number")->check(CLI::NonNegativeNumber);
  cmd->add_option("--limit", f->limit, "scan at most this many events (1 to 10000)")->check(CLI::Range(1, 10000));
  AddGlobalFlags(cmd, f->g);
  cmd->callback([f] {
    Run(f->g, [f](ApiClient& api, Output out) -> Result<int> {
      std::string path = "/v1/audit?since=" + std::to_string(f->since) + "&limit=" + std::to_string(f->limit);
      if (!f->actor.empty()) path += "&actor=" + UrlEncode(f->actor);
      GP_ASSIGN_OR_RETURN(auto page, api.Get(path));
      Print(page, out, [&] { return FormatAuditTable(page.value("entries", json::array())); });
      return 0;
    });
  });
}

// --- usage accounting -------------------------------------------------------

void AddUsageCommand(CLI::App& app) {
  struct Flags {
    GlobalFlags g;
    std::string tenant, pool, from, to, by = "day";
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "usage", "GPU-seconds and GPU-memory-seconds per tenant, pool and period, by tier (like sacct)");
  cmd->add_option("--tenant", f->tenant, "only this tenant (a tenant's token: its own only)");
  cmd->add_option("--pool", f->pool, "only this pool");
  cmd->add_option("--from", f->from, "from this UTC day: YYYY-MM-DD or an RFC 3339 time (default: the oldest kept)");
  cmd->add_option("--to", f->to, "up to this UTC day, exclusive: YYYY-MM-DD or an RFC 3339 time (default: the end of today)");
  cmd->add_option("--by", f->by, "one row per day, week (from Monday) or in total, per tenant and pool")
      ->check(CLI::IsMember({"day", "week", "total"}))
      ->capture_default_str();
  AddGlobalFlags(cmd, f->g, /*csv=*/true);
  cmd->callback([f] {
    Run(f->g, [f](ApiClient& api, Output out) -> Result<int> {
      QueryParams q;
      for (const auto& [name, value] : {std::pair<const char*, const std::string&>{"tenant", f->tenant},
                                        {"pool", f->pool}, {"from", f->from}, {"to", f->to}, {"by", f->by}}) {
        if (!value.empty()) q.push_back({name, value});
      }
      GP_ASSIGN_OR_RETURN(auto report, api.Get("/v1/usage", q));
      const json& rows = report.contains("rows") ? report["rows"] : json::array();
      Print(report, out, [&] { return out == Output::kCsv ? FormatUsageCsv(rows) : FormatUsageTable(rows); });
      if (report.value("truncated", false)) std::cerr << "warning: more rows than the server returns; narrow the query\n";
      return 0;
    });
  });
}

// --- nodes and pools --------------------------------------------------------

std::string NodePath(const std::string& name) { return "/v1/nodes/" + UrlEncode(name); }

// One node, as `node get` and the operators' commands print it: the table
// row, then who holds it cordoned and why.
std::string FormatNode(const json& n) {
  std::string out = FormatNodesTable(json::array({n}));
  const std::string cordons = FormatCordons(n);
  if (!cordons.empty()) out += cordons;
  return out;
}

// What a drain answer says of the node: "drained" when nothing was left on
// it (the operator's cordon says so at once), else "draining".
std::string DrainState(const json& node) {
  for (const json& c : node.value("cordons", json::array())) {
    if (c.is_object() && c.value("drain", "") == "drained") return "drained";
  }
  return "draining";
}

// `node cordon|uncordon|drain|remove` and `node get` (issue 19).
void AddNodeOpCommands(CLI::App& node) {
  {
    struct Flags {
      GlobalFlags g;
      std::string name;
    };
    auto f = std::make_shared<Flags>();
    CLI::App* cmd = node.add_subcommand("get", "Show one node: its GPUs, condition, and who cordoned it and why (admin)");
    cmd->add_option("name", f->name, "node name")->required();
    AddGlobalFlags(cmd, f->g);
    cmd->callback([f] {
      Run(f->g, [f](ApiClient& api, Output out) -> Result<int> {
        GP_ASSIGN_OR_RETURN(auto n, api.Get(NodePath(f->name)));
        Print(n, out, [&] { return FormatNode(n); });
        return 0;
      });
    });
  }
  struct Flags {
    GlobalFlags g;
    std::string name, reason, timeout;
    bool force = false;
  };
  struct Op {
    const char* name;
    const char* help;
    const char* verb;  // the table output's first line: "node n1 VERB"
  };
  static constexpr Op kOps[] = {
      {"cordon", "Cordon a node: it takes no new work; what runs there stays (admin)", "cordoned"},
      {"uncordon", "Uncordon a node: it takes new work again (a hotspot's or a scale-in's cordon stays) (admin)",
       "uncordoned"},
      {"drain",
       "Drain a node: cordon it, move checkpointable, elastic and stateless work off it, stop the rest at --timeout "
       "(admin)",
       "draining"},
      {"remove",
       "Remove a node from its pool (refused while work runs there, unless --force interrupts it as a node "
       "failure would) and revoke its agent's tokens (admin)",
       "removed"},
  };
  for (const Op& op : kOps) {
    auto f = std::make_shared<Flags>();
    const std::string name = op.name;
    CLI::App* cmd = node.add_subcommand(name, op.help);
    cmd->add_option("name", f->name, "node name")->required();
    if (name != "uncordon") cmd->add_option("--reason", f->reason, "why, kept with the cordon and in the events");
    if (name == "drain") {
      cmd->add_option("--timeout", f->timeout,
                      "how long work that cannot move may still run before it is stopped, e.g. 10m, 2h "
                      "(0s to 168h; default 1h)");
    }
    if (name == "remove") cmd->add_flag("--force", f->force, "interrupt the work still on the node (queued again)");
    AddGlobalFlags(cmd, f->g);
    cmd->callback([f, name, verb = std::string(op.verb)] {
      Run(f->g, [f, name, verb](ApiClient& api, Output out) -> Result<int> {
        json body = json::object();
        if (!f->reason.empty()) body["reason"] = f->reason;
        if (!f->timeout.empty()) {
          auto d = ParseDurationText(f->timeout);
          if (!d) return InvalidArgument("--timeout: " + d.error().message);
          if (*d < Duration(0) || *d > std::chrono::hours(168) || *d % std::chrono::seconds(1) != Duration(0)) {
            return InvalidArgument("--timeout: whole seconds from 0s to 168h, got " + f->timeout);
          }
          body["timeout_s"] = std::chrono::duration_cast<std::chrono::seconds>(*d).count();
        }
        json n;
        if (name == "remove") {
          std::string path = NodePath(f->name) + "?force=" + (f->force ? "true" : "false");
          if (!f->reason.empty()) path += "&reason=" + UrlEncode(f->reason);
          GP_ASSIGN_OR_RETURN(n, api.Delete(path));
        } else {
          GP_ASSIGN_OR_RETURN(n, api.Post(NodePath(f->name) + "/" + name, body));
        }
        Print(n, out, [&] {
          const bool changed = n.value("changed", false);
          const std::string said = name == "drain" ? DrainState(n) : verb;
          return "node " + f->name + (changed ? " " + said : " unchanged (already " + said + ")") + "\n" +
                 FormatNode(n);
        });
        return 0;
      });
    });
  }
}

void AddNodeCommands(CLI::App& app) {
  CLI::App* node = app.add_subcommand(
      "node", "Add, list, cordon, drain and remove nodes, issue agent tokens (REST API client, admin)");
  node->require_subcommand(1);
  AddNodeOpCommands(*node);

  {
    struct Flags {
      GlobalFlags g;
      std::string name, file;
    };
    auto f = std::make_shared<Flags>();
    CLI::App* cmd = node->add_subcommand("token", "Issue a token for a node's agent (admin); prints it once");
    cmd->add_option("name", f->name, "node name (the agent's --node)")->required();
    cmd->add_option("--write", f->file, "write the token to this file (mode 0600) instead of printing it");
    AddGlobalFlags(cmd, f->g);
    cmd->callback([f] {
      Run(f->g, [f](ApiClient& api, Output out) -> Result<int> {
        GP_ASSIGN_OR_RETURN(auto issued, api.Post("/v1/nodes/" + UrlEncode(f->name) + "/token", json::object()));
        if (!f->file.empty()) {
          GP_TRY(WriteTokenFile(f->file, issued.value("token", "")));
          Print(json{{"node", f->name}, {"token_file", f->file}}, out,
                [&] { return "token for node " + f->name + " written to " + f->file + "\n"; });
          return 0;
        }
        Print(issued, out, [&] { return issued.value("token", "") + "\n"; });
        return 0;
      });
    });
  }

  {
    auto g = std::make_shared<GlobalFlags>();
    CLI::App* cmd = node->add_subcommand("list", "List nodes with their free GPUs (admin)");
    AddGlobalFlags(cmd, *g);
    cmd->callback([g] {
      Run(*g, [](ApiClient& api, Output out) -> Result<int> {
        GP_ASSIGN_OR_RETURN(auto list, api.Get("/v1/nodes"));
        Print(list, out, [&] { return FormatNodesTable(list.value("nodes", json::array())); });
        return 0;
      });
    });
  }

  {
    struct Flags {
      GlobalFlags g;
      std::string name, model, region, zone, rack, node_class;
      int gpus = 0;
      double cpu_cores = 0, memory_gib = 0;
    };
    auto f = std::make_shared<Flags>();
    CLI::App* cmd = node->add_subcommand("add", "Add a node (admin); it joins the first pool that takes its model");
    cmd->add_option("name", f->name, "node name")->required();
    cmd->add_option("--model", f->model, "GPU model (a catalog name: T4, A100-80GB, H100, ...)")->required();
    cmd->add_option("--gpus", f->gpus, "GPUs in the node (0..16)")->required()->check(CLI::Range(0, 16));
    cmd->add_option("--cpu-cores", f->cpu_cores, "CPU cores")->required()->check(CLI::PositiveNumber);
    cmd->add_option("--memory-gib", f->memory_gib, "memory in GiB")->required()->check(CLI::PositiveNumber);
    cmd->add_option("--region", f->region, "region");
    cmd->add_option("--zone", f->zone, "zone");
    cmd->add_option("--rack", f->rack, "rack");
    cmd->add_option("--class", f->node_class, "node class of the server config: what requirements see (e.g. nvlink)");
    AddGlobalFlags(cmd, f->g);
    cmd->callback([f] {
      Run(f->g, [f](ApiClient& api, Output out) -> Result<int> {
        json body = {{"name", f->name},
                     {"model", f->model},
                     {"gpus", f->gpus},
                     {"cpu_cores", Number(f->cpu_cores)},
                     {"memory_gib", Number(f->memory_gib)}};
        if (!f->region.empty()) body["region"] = f->region;
        if (!f->zone.empty()) body["zone"] = f->zone;
        if (!f->rack.empty()) body["rack"] = f->rack;
        if (!f->node_class.empty()) body["class"] = f->node_class;
        GP_ASSIGN_OR_RETURN(auto added, api.Post("/v1/nodes", body));
        Print(added, out, [&] { return FormatNodesTable(json::array({added})); });
        return 0;
      });
    });
  }

  CLI::App* pool = app.add_subcommand("pool", "List pools and their capacity (REST API client)");
  pool->require_subcommand(1);
  {
    auto g = std::make_shared<GlobalFlags>();
    CLI::App* cmd = pool->add_subcommand("list", "List pools with their GPU capacity");
    AddGlobalFlags(cmd, *g);
    cmd->callback([g] {
      Run(*g, [](ApiClient& api, Output out) -> Result<int> {
        GP_ASSIGN_OR_RETURN(auto list, api.Get("/v1/pools"));
        Print(list, out, [&] { return FormatPoolsTable(list.value("pools", json::array())); });
        return 0;
      });
    });
  }
}

// --- regions (TOPO-2) ---------------------------------------------------------

void AddRegionCommands(CLI::App& app) {
  CLI::App* regions = app.add_subcommand("regions", "Show or replace the region table (REST API client)");
  regions->require_subcommand(1);
  {
    auto g = std::make_shared<GlobalFlags>();
    CLI::App* cmd = regions->add_subcommand("get", "Show the region table in force");
    AddGlobalFlags(cmd, *g);
    cmd->callback([g] {
      Run(*g, [](ApiClient& api, Output out) -> Result<int> {
        GP_ASSIGN_OR_RETURN(auto table, api.Get("/v1/regions"));
        Print(table, out, [&] { return FormatRegionsTable(table); });
        return 0;
      });
    });
  }
  {
    struct Flags {
      GlobalFlags g;
      std::string file;
    };
    auto f = std::make_shared<Flags>();
    CLI::App* cmd = regions->add_subcommand("set", "Replace the region table (admin) with a file's (JSON or YAML: "
                                                   "policy, regions, users as PUT /v1/regions takes them)");
    cmd->add_option("-f,--file", f->file, "the table (JSON or YAML)")->required();
    AddGlobalFlags(cmd, f->g);
    cmd->callback([f] {
      Run(f->g, [f](ApiClient& api, Output out) -> Result<int> {
        std::ifstream in(f->file);
        if (!in) return IoError(f->file + ": cannot open");
        std::stringstream text;
        text << in.rdbuf();
        GP_ASSIGN_OR_RETURN(auto body, YamlToJson(text.str(), f->file));  // JSON is YAML
        GP_ASSIGN_OR_RETURN(auto table, api.Put("/v1/regions", body));
        Print(table, out, [&] { return FormatRegionsTable(table); });
        return 0;
      });
    });
  }
}

}  // namespace

void AddClientCommands(CLI::App& app) {
  AddJobCommands(app);
  AddTenantCommands(app);
  AddTokenCommands(app);
  AddAuditCommand(app);
  AddUsageCommand(app);
  AddNodeCommands(app);
  AddRegionCommands(app);
}

}  // namespace gpupool
