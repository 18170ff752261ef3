#include "src/cli/server_cmd.h"

#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>

#include "src/cli/serve_common.h"
#include "src/server/http_api.h"
#include "src/server/log.h"
#include "src/server/server_core.h"

namespace gpupool {
namespace {

struct ServerFlags {
  std::string data_dir;
  std::string listen = "127.0.0.1:7070";
  std::string agent_listen;  // empty: agents use --listen
  std::string config;
  std::string admin_token_file;
};

std::string HostForUrl(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

// Every connection is a descriptor: says so when the limit is below what
// the connection limits allow (connections beyond it are refused by the kernel).
void WarnOnFewDescriptors(const ServerSettings& s, int listeners) {
  const int64_t have = RaiseOpenFileLimit();
  constexpr int64_t kOwnDescriptors = 256;  // journal, logs, provider pipes, epoll, ...
  const int64_t want = s.http.max_connections * listeners + kOwnDescriptors;
  if (have >= 0 && have < want) {
    LogInfo("open file limit below the HTTP connection limits",
            {{"limit", std::to_string(have)}, {"wanted", std::to_string(want)}});
  }
}

int RunServer(const ServerFlags& f) {
  const auto listen = ParseListen(f.listen);
  if (!listen) {
    std::cerr << "error: " << listen.error().message << "\n";
    return 2;
  }
  const auto& [host, port] = *listen;
  std::optional<std::pair<std::string, int>> agent_listen;
  if (!f.agent_listen.empty()) {
    auto a = ParseListen(f.agent_listen);
    if (!a) {
      std::cerr << "error: --agent-listen: " << a.error().message << "\n";
      return 2;
    }
    agent_listen = *a;
  }
  // Signals are taken by one thread (sigwait); every other thread blocks them.
  const sigset_t signals = BlockStopSignals();

  auto core = ServerCore::Open(ServerOptions{f.data_dir, f.config, f.admin_token_file});
  if (!core) {
    std::cerr << "error: " << core.error().message << "\n";
    return 1;
  }
  LogInfo("recovered", {{"data_dir", f.data_dir},
                        {"replayed_events", std::to_string((*core)->replayed_events())},
                        {"seconds", std::to_string((*core)->recovery_seconds())}});
  WarnOnFewDescriptors((*core)->settings(), agent_listen ? 2 : 1);
  HttpApi api(**core);
  auto bound = api.Bind(host, port);
  if (!bound) {
    std::cerr << "error: --listen: " << bound.error().message << "\n";
    return 1;
  }
  std::string agent_url;
  if (agent_listen) {
    auto b = api.BindAgent(agent_listen->first, agent_listen->second);
    if (!b) {
      std::cerr << "error: --agent-listen: " << b.error().message << "\n";
      return 1;
    }
    agent_url = "http://" + HostForUrl(agent_listen->first) + ":" + std::to_string(*b);
  }
  (*core)->Start();
  const std::string url = "http://" + HostForUrl(host) + ":" + std::to_string(*bound);
  if (auto ok = WriteServerUrl(f.data_dir, url); !ok) {
    std::cerr << "error: " << ok.error().message << "\n";
    return 1;
  }
  std::cout << "gpupool server: listening on " << url << "\n"
            << (agent_url.empty() ? "" : "  agents:      " + agent_url + " (agent protocol and /healthz only)\n")
            << "  data:        " << f.data_dir << "\n"
            << "  admin token: "
            << (f.admin_token_file.empty() ? (std::filesystem::path(f.data_dir) / "admin.token").string()
                                           : f.admin_token_file)
            << "\n"
            << "  try:         GPUPOOL_ADDR=" << url << " GPUPOOL_TOKEN=$(cat "
            << (f.admin_token_file.empty() ? (std::filesystem::path(f.data_dir) / "admin.token").string()
                                           : f.admin_token_file)
            << ") build/gpupool pool list" << std::endl;
  LogInfo("listening", {{"url", url}, {"agent_url", agent_url}});

  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    LogInfo("stopping", {{"signal", sig == SIGINT ? "SIGINT" : "SIGTERM"}});
    api.Stop();
  });
  const Status served = api.Serve();
  if (!served) LogError("cannot serve", {{"error", served.error().message}});
  (*core)->Stop();
  pthread_kill(waiter.native_handle(), SIGTERM);  // when Serve ended for another reason
  waiter.join();
  LogInfo("stopped", {});
  return served ? 0 : 1;
}

}  // namespace

void AddServerCommand(CLI::App& app) {
  auto flags = std::make_shared<ServerFlags>();
  CLI::App* cmd = app.add_subcommand("server", "Run the gpupool server (REST API, journal, metrics)");
  cmd->add_option("--data", flags->data_dir, "Data directory (journal, snapshots, admin token)")->required();
  cmd->add_option("--listen", flags->listen, "HOST:PORT to serve on (port 0: any free port)")
      ->capture_default_str();
  cmd->add_option("--agent-listen", flags->agent_listen,
                  "HOST:PORT of a second listener for agents only (agent protocol and /healthz, with its own "
                  "connection limits; default: agents use --listen)");
  cmd->add_option("--config", flags->config, "Server configuration (YAML; default: the embedded one)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--admin-token-file", flags->admin_token_file,
                  "File holding the admin token (default: DATA/admin.token, created on first start)")
      ->check(CLI::ExistingFile);
  cmd->callback([flags] { std::exit(RunServer(*flags)); });
}

}  // namespace gpupool
