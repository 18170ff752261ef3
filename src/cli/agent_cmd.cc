#include "src/cli/agent_cmd.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "src/agent/agent.h"
#include "src/agent/fake_backend.h"
#include "src/agent/mig_check.h"
#include "src/agent/nvml_backend.h"
#include "src/cli/listener_tls.h"
#include "src/cli/serve_common.h"
#include "src/server/auth.h"
#include "src/server/dev_config.h"
#include "src/server/http_api.h"
#include "src/server/log.h"
#include "src/server/exit_codes.h"
#include "src/server/server_core.h"

namespace gpupool {
namespace {

namespace fs = std::filesystem;

struct AgentFlags {
  std::string server, token_file, node, fake_gpus, scrub_record, nvml_library, scrub_tool;
  std::string node_class, region = "region-1", zone = "zone-1", rack = "rack-1";
  std::string work_dir, checkpoint_root;
  double cpu_cores = 0, memory_gib = 0;
  bool quiet = false;
  std::string runtime = "auto", oci_runtime, shim, fake_dev_dir, mps_control;
  int64_t pids_limit = 4096;
  bool expose_all_gpu_nodes = false;
  bool print_devices = false;
  int mig_check = -1;  // a GPU index: --mig-check
  std::string metrics_listen;  // HOST:PORT; empty: no metrics listener
  int protocol = kAgentProtocol;
  ClientTls server_tls;      // --ca-cert, --client-cert, --client-key (to the server)
  ListenerTlsFlags metrics_tls;  // --tls-cert, --tls-key, --insecure (the metrics listener)
};

std::string WorkDirOf(const AgentFlags& f) {
  return f.work_dir.empty() ? (fs::temp_directory_path() / ("gpupool-agent-" + f.node)).string() : f.work_dir;
}

// Fake GPUs' device nodes: WORK/dev unless given.
std::string FakeDevDir(const AgentFlags& f) {
  return f.fake_dev_dir.empty() ? (fs::absolute(WorkDirOf(f)) / "dev").string() : f.fake_dev_dir;
}

Result<std::unique_ptr<DeviceBackend>> MakeBackend(const AgentFlags& f) {
  if (!f.fake_gpus.empty()) {
    GP_ASSIGN_OR_RETURN(auto gpus, ParseFakeGpus(f.fake_gpus, f.node));
    auto fake = std::make_unique<FakeBackend>(std::move(gpus), f.scrub_record, FakeDevDir(f));
    if (auto ok = fake->MakeDeviceNodes(); !ok) {
      std::cerr << "warning: fake GPUs without device nodes: " << ok.error().message << "\n";
    }
    return std::unique_ptr<DeviceBackend>(std::move(fake));
  }
  NvmlOptions o;
  if (!f.nvml_library.empty()) o.library = f.nvml_library;
  o.scrub_tool = f.scrub_tool;
  return OpenNvmlBackend(o);
}

AgentOptions OptionsOf(const AgentFlags& f) {
  AgentOptions o;
  o.server_url = f.server;
  o.node = f.node;
  o.node_class = f.node_class;
  o.region = f.region;
  o.zone = f.zone;
  o.rack = f.rack;
  o.work_dir = WorkDirOf(f);
  o.checkpoint_root = f.checkpoint_root;
  o.cpu_milli = std::llround(f.cpu_cores * 1000);
  o.memory_mib = std::llround(f.memory_gib * 1024);
  o.quiet = f.quiet;
  o.runtime = f.runtime;
  o.oci_runtime = f.oci_runtime;
  o.shim = f.shim;
  o.pids_limit = f.pids_limit;
  o.expose_all_gpu_nodes = f.expose_all_gpu_nodes;
  o.mps_control = f.mps_control;
  o.protocol = f.protocol;
  return o;
}

// --print-devices: the GPUs as registration would send them, as JSON on
// stdout ({"backend": ..., "gpus": [...]}); nothing else is started, no
// server is needed and no device node is made.
int PrintDevices(const AgentFlags& f) {
  Result<std::vector<GpuDevice>> gpus;
  std::string backend = "fake";
  if (!f.fake_gpus.empty()) {
    gpus = ParseFakeGpus(f.fake_gpus, f.node.empty() ? "local" : f.node);
  } else {
    NvmlOptions o;
    if (!f.nvml_library.empty()) o.library = f.nvml_library;
    auto nvml = OpenNvmlBackend(o);
    if (!nvml) {
      std::cerr << "error: " << nvml.error().message << "\n";
      return 1;
    }
    backend = (*nvml)->name();
    gpus = (*nvml)->Discover();
  }
  if (!gpus) {
    std::cerr << "error: " << gpus.error().message << "\n";
    return 1;
  }
  RegisterRequest r;
  r.gpus = *gpus;
  std::cout << nlohmann::json{{"backend", backend}, {"gpus", ToJson(r)["gpus"]}}.dump(2) << "\n";
  return 0;
}

// --metrics-listen HOST:PORT into the options; false (with the error
// printed) when malformed.
bool SetMetricsListen(const std::string& listen, AgentOptions& o) {
  if (listen.empty()) return true;
  auto l = ParseListen(listen);
  if (!l) {
    std::cerr << "error: --metrics-listen: expected HOST:PORT such as 0.0.0.0:9400 (port 0 picks a free port), got '"
              << listen << "'\n";
    return false;
  }
  o.metrics_host = l->first;
  o.metrics_port = l->second;
  return true;
}

// The TLS flags into the options: the server's CA and the agent's client
// certificate (checked now), the metrics listener's identity and the rule
// for a plain one; false (with the error printed) when they do not hold.
bool SetTls(const AgentFlags& f, AgentOptions& o) {
  const bool https = f.server.starts_with("https://");
  const bool any_client_tls = !f.server_tls.ca_cert_file.empty() || !f.server_tls.client_cert_file.empty() ||
                              !f.server_tls.client_key_file.empty();
  if (any_client_tls && !https) {
    std::cerr << "error: --ca-cert, --client-cert and --client-key need an https:// --server, got '" << f.server
              << "'\n";
    return false;
  }
  if (auto ok = CheckClientTls(f.server_tls); !ok) {
    std::cerr << "error: " << ok.error().message << "\n";
    return false;
  }
  o.server_tls = f.server_tls;
  auto tls = LoadListenerTls(f.metrics_tls);
  if (!tls) {
    std::cerr << "error: " << tls.error().message << "\n";
    return false;
  }
  if (o.metrics_port >= 0) {
    if (auto ok = CheckPlainListener("--metrics-listen", o.metrics_host, tls->has_value(), f.metrics_tls.insecure);
        !ok) {
      std::cerr << "error: " << ok.error().message << "\n";
      return false;
    }
  } else if (tls->has_value()) {
    std::cerr << "error: --tls-cert is for the metrics listener: give --metrics-listen too\n";
    return false;
  }
  o.metrics_tls = std::move(*tls);
  return true;
}

// --mig-check GPU: RunMigCheck (src/agent/mig_check.h) on that GPU, its
// result as JSON on stdout; exit 1 with the reason when it fails.
int MigCheck(const AgentFlags& f) {
  AgentFlags local = f;
  if (local.node.empty()) local.node = "local";
  auto backend = MakeBackend(local);
  if (!backend) {
    std::cerr << "error: " << backend.error().message << "\n";
    return 1;
  }
  auto r = RunMigCheck(**backend, f.mig_check);
  if (!r) {
    std::cerr << "error: " << r.error().message << "\n";
    return 1;
  }
  std::cout << r->dump() << "\n";
  return 0;
}

int RunAgent(const AgentFlags& f) {
  if (f.print_devices) return PrintDevices(f);
  if (f.mig_check >= 0) return MigCheck(f);
  for (const auto& [flag, value] : {std::pair{"--server", &f.server}, std::pair{"--token-file", &f.token_file},
                                    std::pair{"--node", &f.node}}) {
    if (value->empty()) {
      std::cerr << flag << " is required\n";
      return 2;
    }
  }
  const sigset_t signals = BlockStopSignals();
  std::ifstream in(f.token_file);
  std::string token;
  if (!(in >> token) || token.empty()) {
    std::cerr << "error: --token-file: " << f.token_file << " holds no token\n";
    return 2;
  }
  auto backend = MakeBackend(f);
  if (!backend) {
    std::cerr << "error: " << backend.error().message << "\n";
    return 1;
  }
  AgentOptions o = OptionsOf(f);
  o.token = token;
  if (!SetMetricsListen(f.metrics_listen, o)) return 2;
  if (!SetTls(f, o)) return 2;
  Agent agent(o, std::move(*backend));
  if (o.metrics_port >= 0) {
    auto url = agent.StartMetrics();
    if (!url) {
      std::cerr << "error: " << url.error().message << "\n";
      return 2;
    }
  }
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    agent.Stop();
  });
  const int rc = agent.Run();
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  return rc;
}

struct DevFlags {
  std::string data_dir = "gpupool-dev";
  std::string listen = "127.0.0.1:7070";
  std::string config;
  // Three plain GPUs and one in MIG mode, so that every sharing mode runs.
  std::string fake_gpus = "H100,H100,H100,H100:mig";
  std::string node = "dev-node-0";
  ListenerTlsFlags tls;  // --tls-cert, --tls-key, --insecure: the server's listener
  std::string ca_cert;   // --ca-cert: what the local agent trusts for the server's certificate
};

// What `gpupool dev`'s flags give, checked before anything starts.
struct DevSetUp {
  std::string host;
  int port = 0;
  std::vector<GpuDevice> gpus;
  std::optional<http::TlsIdentity> tls;
  ClientTls agent_tls;  // the local agent's TLS to the server
};

Result<DevSetUp> CheckDevFlags(const DevFlags& f) {
  DevSetUp d;
  GP_ASSIGN_OR_RETURN(auto listen, ParseListen(f.listen));
  std::tie(d.host, d.port) = listen;
  GP_ASSIGN_OR_RETURN(d.gpus, ParseFakeGpus(f.fake_gpus, f.node));
  GP_ASSIGN_OR_RETURN(d.tls, LoadListenerTls(f.tls));
  GP_TRY(CheckPlainListener("--listen", d.host, d.tls.has_value(), f.tls.insecure));
  d.agent_tls.ca_cert_file = f.ca_cert;
  if (!f.ca_cert.empty() && !d.tls.has_value()) {
    return InvalidArgument("--ca-cert is for the local agent's TLS to the server: give --tls-cert and --tls-key too");
  }
  GP_TRY(CheckClientTls(d.agent_tls));
  return d;
}

// The local agent: fake GPUs, its work under the data folder.
AgentOptions DevAgentOptions(const DevFlags& f, const std::string& url, const ClientTls& tls, std::string token) {
  AgentOptions o;
  o.server_url = url;
  o.server_tls = tls;
  o.token = std::move(token);
  o.node = f.node;
  o.node_class = "nvlink";
  o.work_dir = (fs::path(f.data_dir) / "agent").string();
  o.checkpoint_root = (fs::path(f.data_dir) / "checkpoints").string();
  // The agent's device metrics, as the DCGM exporter would serve them.
  o.metrics_host = "127.0.0.1";
  o.metrics_port = 0;
  return o;
}

void PrintDevBanner(const DevFlags& f, const std::string& url, const std::string& work_dir,
                    const std::string& metrics_url) {
  const std::string admin = (fs::path(f.data_dir) / "admin.token").string();
  std::cout << "gpupool dev: server and one agent (" << f.node << ", fake GPUs " << f.fake_gpus << ")\n"
            << "  address:      " << url << "\n"
            << "  console:      " << url << "/ (the web console: sign in with a token below)\n"
            << "  admin token:  " << admin << "\n"
            << "  team-a token: " << (fs::path(f.data_dir) / "tokens" / "team-a.token").string()
            << " (created with an empty data folder)\n"
            << "  agent log:    " << work_dir << "/agent.log\n"
            << "  metrics:      " << metrics_url << " (the agent's GPUs, DCGM exporter names)\n"
            << "  try:\n"
            << "    export GPUPOOL_ADDR=" << url << " GPUPOOL_TOKEN=$(cat " << admin << ")"
            << (f.ca_cert.empty() ? "" : " GPUPOOL_CA_CERT=" + f.ca_cert) << "\n"
            << "    build/gpupool job submit -f examples/dev-training.yaml\n"
            << "    build/gpupool job submit -f examples/dev-idle-notebook.yaml   # goes idle, is reclaimed\n"
            << "    build/gpupool job list; build/gpupool job logs 1; build/gpupool node list\n"
            << "  Ctrl-C stops everything." << std::endl;
}

int RunDev(const DevFlags& f) {
  auto setup = CheckDevFlags(f);
  if (!setup) {
    std::cerr << "error: " << setup.error().message << "\n";
    return 2;
  }
  const std::string& host = setup->host;
  const int port = setup->port;
  auto& tls = setup->tls;
  const sigset_t signals = BlockStopSignals();
  ::setenv("GPUPOOL_LOG_REQUESTS", "0", /*overwrite=*/0);  // heartbeats would drown the rest

  ServerOptions so;
  so.data_dir = f.data_dir;
  so.config_path = f.config;
  if (f.config.empty()) so.config_text = kDevConfig;
  auto core = ServerCore::Open(so);
  if (!core) {
    std::cerr << "error: " << core.error().message << "\n";
    return core.error().code == ErrorCode::kDataLoss ? kExitDataLoss : kExitStartFailed;
  }
  HttpApi api(**core);
  const bool serves_tls = tls.has_value();
  auto bound = api.Bind(host, port, std::move(tls));
  if (!bound) {
    std::cerr << "error: --listen: " << bound.error().message << "\n";
    return 1;
  }
  (*core)->Start();
  const std::string url = (serves_tls ? "https://" : "http://") + host + ":" + std::to_string(*bound);
  if (auto ok = WriteServerUrl(f.data_dir, url); !ok) {
    std::cerr << "error: " << ok.error().message << "\n";
    return 1;
  }
  // The local agent's node token (a new one each start; only its hash is kept).
  MintedToken minted = MintToken(std::string(kNodeTokenPrefix) + f.node, "node", kRoleNode);
  const std::string token = std::move(minted.token);
  if (const Reply r = (*core)->Call(IssueNodeTokenCmd{f.node, std::move(minted.record)}); r.error) {
    std::cerr << "error: cannot issue the agent's token: " << r.error->message << "\n";
    return 1;
  }
  const AgentOptions o = DevAgentOptions(f, url, setup->agent_tls, token);
  // Containers where runc works (the agent probes it), else plain
  // processes with a warning.
  auto fake = std::make_unique<FakeBackend>(std::move(setup->gpus), "", (fs::absolute(o.work_dir) / "dev").string());
  if (auto ok = fake->MakeDeviceNodes(); !ok) LogInfo("fake GPUs without device nodes", {{"reason", ok.error().message}});
  Agent agent(o, std::move(fake));
  auto metrics_url = agent.StartMetrics();
  if (!metrics_url) {
    std::cerr << "error: " << metrics_url.error().message << "\n";
    return 1;
  }

  std::thread http([&] {
    if (auto ok = api.Serve(); !ok) {
      LogError("cannot serve", {{"error", ok.error().message}});
      agent.Stop();
    }
  });
  std::thread agent_thread([&] { agent.Run(); });
  PrintDevBanner(f, url, o.work_dir, *metrics_url);
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    LogInfo("stopping", {{"signal", sig == SIGINT ? "SIGINT" : "SIGTERM"}});
    agent.Stop();
    api.Stop();
  });
  agent_thread.join();
  http.join();
  (*core)->Stop();
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  LogInfo("stopped", {});
  return 0;
}

}  // namespace

void AddAgentCommand(CLI::App& app) {
  auto f = std::make_shared<AgentFlags>();
  CLI::App* cmd = app.add_subcommand("agent", "Run a node agent: register the node, heartbeat, run its tasks");
  // Required unless --print-devices (checked in RunAgent).
  cmd->add_option("--server", f->server, "Server URL, e.g. http://10.0.0.1:7070 (required)");
  cmd->add_option("--token-file", f->token_file, "File holding the node token (POST /v1/nodes/NAME/token; required)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--node", f->node, "This node's name (the token's node; required)");
  cmd->add_flag("--print-devices", f->print_devices,
                "Discover the GPUs (NVML, or --fake-gpus), print them as JSON as registration sends them, and exit");
  cmd->add_option("--mig-check", f->mig_check,
                  "Create, list and destroy one MIG instance on this GPU (already in MIG mode), print the result as "
                  "JSON, and exit (scripts/device-check.sh)")
      ->check(CLI::Range(0, kMaxGpusPerNode - 1));
  cmd->add_option("--fake-gpus", f->fake_gpus,
                  "Fake GPUs instead of NVML: 4xH100, or a list H100,H100; MODEL:mig for MIG mode (docs/agent.md)");
  cmd->add_option("--scrub-record", f->scrub_record, "Fake GPUs: append each scrub to this file (JSON lines)");
  cmd->add_option("--nvml-library", f->nvml_library, "NVML library to load (default libnvidia-ml.so.1)");
  cmd->add_option("--scrub-tool", f->scrub_tool, "gpupool-scrub executable (default: beside this binary)");
  cmd->add_option("--class", f->node_class, "Node class of the server configuration (e.g. nvlink)");
  cmd->add_option("--region", f->region, "Region")->capture_default_str();
  cmd->add_option("--zone", f->zone, "Zone")->capture_default_str();
  cmd->add_option("--rack", f->rack, "Rack")->capture_default_str();
  cmd->add_option("--work-dir", f->work_dir, "Task directories and logs (default: TMPDIR/gpupool-agent-NODE)");
  cmd->add_option("--checkpoint-root", f->checkpoint_root,
                  "Checkpoint directories, shared by the nodes (default: WORK/checkpoints)");
  cmd->add_option("--cpu-cores", f->cpu_cores, "CPU cores to offer (default: the machine's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--memory-gib", f->memory_gib, "Memory to offer in GiB (default: the machine's)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--quiet", f->quiet, "Log actions to WORK/agent.log only");
  cmd->add_option("--runtime", f->runtime,
                  "How tasks run: oci (containers through runc; fails when runc does not work), process (plain "
                  "processes, no isolation), auto (oci when it works, else process with a warning)")
      ->check(CLI::IsMember({"auto", "oci", "process"}))
      ->capture_default_str();
  cmd->add_option("--oci-runtime", f->oci_runtime, "The OCI runtime binary (default: runc on PATH)");
  cmd->add_option("--shim", f->shim, "gpupool-shim (default: beside this binary)");
  cmd->add_option("--pids-limit", f->pids_limit, "Most processes in one task container (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--mps-control", f->mps_control,
                  "The MPS control daemon binary, run per GPU for MPS shares (default: nvidia-cuda-mps-control on "
                  "PATH with NVML GPUs; none with fake GPUs, whose MPS tasks get their limits in the environment only)");
  cmd->add_option("--metrics-listen", f->metrics_listen,
                  "HOST:PORT to serve the GPUs' DCGM-named metrics on (GET /metrics, like the DCGM exporter; port 0: "
                  "any free port; default: off)");
  const std::string tls_group = "TLS";
  cmd->add_option("--ca-cert", f->server_tls.ca_cert_file,
                  "PEM CA certificates that sign an https:// --server's certificate (default: the system's CAs)")
      ->group(tls_group);
  cmd->add_option("--client-cert", f->server_tls.client_cert_file,
                  "PEM certificate to present to the server (mutual TLS: gpupool server --agent-ca-cert); with "
                  "--client-key")
      ->group(tls_group);
  cmd->add_option("--client-key", f->server_tls.client_key_file, "PEM private key of --client-cert")->group(tls_group);
  cmd->add_option("--tls-cert", f->metrics_tls.cert, "PEM certificate chain for --metrics-listen to serve TLS with")
      ->group(tls_group);
  cmd->add_option("--tls-key", f->metrics_tls.key, "PEM private key of --tls-cert")->group(tls_group);
  cmd->add_flag("--insecure", f->metrics_tls.insecure,
                "Serve plain HTTP on a non-loopback --metrics-listen without --tls-cert (logged as a warning)")
      ->group(tls_group);
  cmd->add_option("--protocol", f->protocol,
                  "Agent protocol to speak: 2, or 1 as an agent older than the watch (upgrade tests)")
      ->check(CLI::Range(kOldestAgentProtocol, kAgentProtocol))
      ->capture_default_str();
  cmd->add_option("--fake-dev-dir", f->fake_dev_dir, "Fake GPUs: where their device nodes are made (default WORK/dev)");
  cmd->add_flag("--test-expose-all-gpu-nodes", f->expose_all_gpu_nodes,
                "Tests only: bind every GPU's device node into each container (the devices cgroup still denies "
                "the others)");
  cmd->callback([f] { std::exit(RunAgent(*f)); });
}

void AddDevCommand(CLI::App& app) {
  auto f = std::make_shared<DevFlags>();
  CLI::App* cmd = app.add_subcommand("dev", "Run a server and one local agent with fake GPUs (the quickest start)");
  cmd->add_option("--data", f->data_dir, "Data directory (journal, tokens, agent work)")->capture_default_str();
  cmd->add_option("--listen", f->listen, "HOST:PORT to serve on (port 0: any free port)")->capture_default_str();
  cmd->add_option("--config", f->config, "Server configuration (default: the embedded dev one)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--fake-gpus", f->fake_gpus, "The local node's fake GPUs")->capture_default_str();
  cmd->add_option("--tls-cert", f->tls.cert, "PEM certificate chain to serve TLS with (default: plain HTTP)");
  cmd->add_option("--tls-key", f->tls.key, "PEM private key of --tls-cert");
  cmd->add_option("--ca-cert", f->ca_cert,
                  "PEM CA certificates the local agent trusts for --tls-cert (default: the system's CAs)");
  cmd->add_flag("--insecure", f->tls.insecure,
                "Serve plain HTTP on a non-loopback --listen (logged as a warning)");
  cmd->callback([f] { std::exit(RunDev(*f)); });
}

}  // namespace gpupool
