#include "src/cli/server_cmd.h"

#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>

#include "src/cli/etcd_flags.h"
#include "src/cli/listener_tls.h"
#include "src/cli/serve_common.h"
#include "src/server/etcd_election.h"
#include "src/server/etcd_journal.h"
#include "src/server/exit_codes.h"
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
  // Replicated (issue 17): the journal in etcd, leadership by lease.
  EtcdFlags etcd;  // --etcd URL[,URL...] and its TLS files; no URLs: the SQLite journal in --data
  std::string etcd_prefix = "/gpupool/default";
  int64_t lease_ttl_seconds = 3;
  // TLS on both listeners (issue 22); agent_ca (--agent-ca-cert) asks agents
  // on --agent-listen for certificates it signed.
  ListenerTlsFlags tls;
  // Rebuild the state from the journal's events alone, ignoring the
  // snapshots, and write fresh ones (a damaged snapshot; docs/server.md).
  bool recover_from_journal = false;
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
  auto tls = LoadListenerTls(f.tls);
  if (!tls) {
    std::cerr << "error: " << tls.error().message << "\n";
    return 2;
  }
  if (!f.tls.client_ca.empty() && !agent_listen) {
    std::cerr << "error: --agent-ca-cert needs --agent-listen: the API listener serves clients without "
                 "certificates, so agents that must present one get a listener of their own\n";
    return 2;
  }
  // The API listener never asks for client certificates (the CLI has none).
  std::optional<http::TlsIdentity> api_tls = *tls;
  if (api_tls) api_tls->client_ca_pem.clear();
  for (const auto& [flag, where] : {std::pair{std::string("--listen"), std::optional(*listen)},
                                    std::pair{std::string("--agent-listen"), agent_listen}}) {
    if (!where) continue;
    if (auto ok = CheckPlainListener(flag, where->first, tls->has_value(), f.tls.insecure); !ok) {
      std::cerr << "error: " << ok.error().message << "\n";
      return 2;
    }
  }
  const std::string scheme = *tls ? "https://" : "http://";
  // Signals are taken by one thread (sigwait); every other thread blocks them.
  const sigset_t signals = BlockStopSignals();
  // Whatever the server creates is its owner's alone (the Env and the
  // journal ask for 0600 and 0700 themselves; this covers the rest).
  ::umask(077);

  ServerOptions options{f.data_dir, f.config, f.admin_token_file};
  options.replay_from_start = f.recover_from_journal;
  // With --etcd: wait to lead, then open the journal in etcd (fenced by the
  // leadership: a deposed server's appends fail, and it stops).
  std::unique_ptr<EtcdClient> etcd;
  std::unique_ptr<EtcdElection> election;
  if (!f.etcd.endpoints.empty()) {
    auto etcd_options = EtcdClientOptionsFromFlags(f.etcd, f.tls.insecure);
    if (!etcd_options) {
      std::cerr << "error: " << etcd_options.error().message << "\n";
      return 2;
    }
    if (auto ok = CheckEtcdPrefix(f.etcd_prefix); !ok) {
      std::cerr << "error: " << ok.error().message << "\n";
      return 2;
    }
    etcd = std::make_unique<EtcdClient>(std::move(*etcd_options));
    if (auto v = etcd->Version(); !v) {
      std::cerr << "error: cannot reach etcd at " << etcd->Describe() << ": " << v.error().message << "\n";
      return 1;
    }
    // A prefix holding another cluster's keys stops a standby too, before it waits.
    if (auto probe = OpenEtcdJournal(*etcd, EtcdJournalOptions{f.etcd_prefix}); !probe) {
      std::cerr << "error: " << probe.error().message << "\n";
      return 1;
    }
    election = std::make_unique<EtcdElection>(
        *etcd, EtcdElectionOptions{f.etcd_prefix, scheme + HostForUrl(host) + ":" + std::to_string(port),
                                   f.lease_ttl_seconds});
    LogInfo("campaigning for leadership", {{"etcd", etcd->Describe()}, {"prefix", f.etcd_prefix}});
    const auto stop_asked = [&signals] {
      const timespec zero{0, 0};
      sigset_t s = signals;
      return sigtimedwait(&s, nullptr, &zero) > 0;
    };
    const auto waiting = [](const std::string& leader) {
      LogInfo("standing by: another server leads", {{"leader", leader}});
    };
    const auto lost = [](const std::string& why) {
      // Commits fail from now on (answered 503 naming the leader); give
      // them a moment, then stop: a restarted server campaigns again.
      LogError("lost the leadership: stopping", {{"reason", why}});
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        std::fflush(nullptr);
        std::_Exit(kExitLostLeadership);
      }).detach();
    };
    if (auto won = election->Campaign(stop_asked, waiting, lost); !won) {
      if (won.error().message == "stopped") return 0;
      std::cerr << "error: " << won.error().message << "\n";
      return 1;
    }
    LogInfo("leading", {{"prefix", f.etcd_prefix}, {"lease", std::to_string(election->lease())}});
    options.state_name = "etcd " + f.etcd_prefix + " at " + etcd->Describe();
    options.open_journal = [&etcd, &election, &f] {
      return OpenEtcdJournal(*etcd, EtcdJournalOptions{f.etcd_prefix, election.get()});
    };
  }
  auto core = ServerCore::Open(options);
  if (!core) {
    std::cerr << "error: " << core.error().message << "\n";
    return core.error().code == ErrorCode::kDataLoss ? kExitDataLoss : kExitStartFailed;
  }
  LogInfo("recovered", {{"data_dir", f.data_dir},
                        {"replayed_events", std::to_string((*core)->replayed_events())},
                        {"seconds", std::to_string((*core)->recovery_seconds())},
                        {"integrity_check_seconds", std::to_string((*core)->integrity_check_seconds())},
                        {"from", f.recover_from_journal ? "the journal's events alone" : "snapshots and events"}});
  WarnOnFewDescriptors((*core)->settings(), agent_listen ? 2 : 1);
  HttpApi api(**core);
  auto bound = api.Bind(host, port, api_tls);
  if (!bound) {
    std::cerr << "error: --listen: " << bound.error().message << "\n";
    return 1;
  }
  std::string agent_url;
  if (agent_listen) {
    auto b = api.BindAgent(agent_listen->first, agent_listen->second, *tls);
    if (!b) {
      std::cerr << "error: --agent-listen: " << b.error().message << "\n";
      return 1;
    }
    agent_url = scheme + HostForUrl(agent_listen->first) + ":" + std::to_string(*b);
  }
  (*core)->Start();
  if (f.recover_from_journal) {
    // Fresh snapshots of both kinds, so that the next plain start does not
    // meet the damaged ones again.
    if (const Reply r = (*core)->Call(SnapshotCmd{}); r.error) {
      std::cerr << "error: cannot write fresh snapshots: " << r.error->message << "\n";
      (*core)->Stop();
      return kExitStartFailed;
    }
    LogInfo("rebuilt the state from the journal and wrote fresh snapshots", {{"data_dir", f.data_dir}});
  }
  const std::string url = scheme + HostForUrl(host) + ":" + std::to_string(*bound);
  if (election) {
    if (auto ok = election->Advertise(url); !ok) {
      std::cerr << "error: " << ok.error().message << "\n";
      return 1;
    }
  }
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
  if (election) election->Resign();  // a standby takes over at once
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
  cmd->add_option("--etcd", flags->etcd.endpoints,
                  "Keep the journal in etcd at these client URLs (http(s)://HOST:PORT[,...]) and lead by lease: "
                  "servers sharing a prefix elect one leader (docs/server.md, \"Running replicated\")");
  cmd->add_option("--etcd-ca-cert", flags->etcd.ca_cert,
                  "PEM CA certificates for etcd's certificate (https:// --etcd; default: the system's CAs)");
  cmd->add_option("--etcd-cert", flags->etcd.cert,
                  "PEM client certificate for an etcd that asks for one (--client-cert-auth); with --etcd-key");
  cmd->add_option("--etcd-key", flags->etcd.key, "PEM private key of --etcd-cert");
  cmd->add_option("--etcd-prefix", flags->etcd_prefix, "Key prefix of this cluster's state in etcd")
      ->capture_default_str();
  cmd->add_option("--lease-ttl", flags->lease_ttl_seconds,
                  "Seconds a leader's lease lasts unrenewed (with --etcd): a dead leader is replaced after it")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{2}, kMaxLeaseTtlSeconds));
  cmd->add_option("--tls-cert", flags->tls.cert,
                  "PEM certificate chain (leaf first) to serve TLS with on every listener; with --tls-key");
  cmd->add_option("--tls-key", flags->tls.key, "PEM private key of --tls-cert");
  cmd->add_option("--agent-ca-cert", flags->tls.client_ca,
                  "PEM CA certificates: agents on --agent-listen must present a certificate one of them signed "
                  "(mutual TLS; needs --tls-cert and --agent-listen)");
  cmd->add_flag("--insecure", flags->tls.insecure,
                "Serve plain HTTP on a non-loopback --listen/--agent-listen without --tls-cert, and speak plain HTTP "
                "to a non-loopback --etcd (each logged as a warning)");
  cmd->add_flag("--recover-from-journal", flags->recover_from_journal,
                 "Rebuild the state from the journal's events alone, ignoring the snapshots, and write fresh ones "
                 "(for a snapshot that does not load; docs/server.md, \"When start-up refuses\")");
  cmd->callback([flags] { std::exit(RunServer(*flags)); });
}

}  // namespace gpupool
