#include "src/cli/server_cmd.h"

#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
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
  std::string config;
  std::string admin_token_file;
};

int RunServer(const ServerFlags& f) {
  const auto listen = ParseListen(f.listen);
  if (!listen) {
    std::cerr << "error: " << listen.error().message << "\n";
    return 2;
  }
  const auto& [host, port] = *listen;
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
  HttpApi api(**core);
  auto bound = api.Bind(host, port);
  if (!bound) {
    std::cerr << "error: --listen: " << bound.error().message << "\n";
    return 1;
  }
  (*core)->Start();
  const std::string url = "http://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
                          std::to_string(*bound);
  if (auto ok = WriteServerUrl(f.data_dir, url); !ok) {
    std::cerr << "error: " << ok.error().message << "\n";
    return 1;
  }
  std::cout << "gpupool server: listening on " << url << "\n"
            << "  data:        " << f.data_dir << "\n"
            << "  admin token: "
            << (f.admin_token_file.empty() ? (std::filesystem::path(f.data_dir) / "admin.token").string()
                                           : f.admin_token_file)
            << "\n"
            << "  try:         GPUPOOL_ADDR=" << url << " GPUPOOL_TOKEN=$(cat "
            << (f.admin_token_file.empty() ? (std::filesystem::path(f.data_dir) / "admin.token").string()
                                           : f.admin_token_file)
            << ") build/gpupool pool list" << std::endl;
  LogInfo("listening", {{"url", url}});

  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    LogInfo("stopping", {{"signal", sig == SIGINT ? "SIGINT" : "SIGTERM"}});
    api.Stop();
  });
  api.Serve();
  (*core)->Stop();
  pthread_kill(waiter.native_handle(), SIGTERM);  // when Serve ended for another reason
  waiter.join();
  LogInfo("stopped", {});
  return 0;
}

}  // namespace

void AddServerCommand(CLI::App& app) {
  auto flags = std::make_shared<ServerFlags>();
  CLI::App* cmd = app.add_subcommand("server", "Run the gpupool server (REST API, journal, metrics)");
  cmd->add_option("--data", flags->data_dir, "Data directory (journal, snapshots, admin token)")->required();
  cmd->add_option("--listen", flags->listen, "HOST:PORT to serve on (port 0: any free port)")
      ->capture_default_str();
  cmd->add_option("--config", flags->config, "Server configuration (YAML; default: the embedded one)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--admin-token-file", flags->admin_token_file,
                  "File holding the admin token (default: DATA/admin.token, created on first start)")
      ->check(CLI::ExistingFile);
  cmd->callback([flags] { std::exit(RunServer(*flags)); });
}

}  // namespace gpupool
