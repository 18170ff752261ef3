#include "src/cli/server_cmd.h"

#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>

#include <cstdio>
#include <expected>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>
#include <tuple>

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

// Why start-up stops: the process's exit code and the message after "error: ".
struct StartFailure {
  int exit_code = kExitStartFailed;
  std::string message;
};
template <typename T>
using Started = std::expected<T, StartFailure>;

StartFailure Usage(std::string message) { return {kExitUsage, std::move(message)}; }

// Where the server listens, checked against the plain-listener rule.
struct ListenPlan {
  std::string host;
  int port = 0;
  std::optional<std::pair<std::string, int>> agent;  // --agent-listen
  std::optional<http::TlsIdentity> tls;               // both listeners (the agent one asks for client CAs)
  std::optional<http::TlsIdentity> api_tls;           // the API listener's: never asks for client certificates
  std::string scheme;                                 // "http://" or "https://"
};

Started<ListenPlan> PlanListeners(const ServerFlags& f) {
  ListenPlan plan;
  const auto listen = ParseListen(f.listen);
  if (!listen) return std::unexpected(Usage(listen.error().message));
  std::tie(plan.host, plan.port) = *listen;
  if (!f.agent_listen.empty()) {
    auto a = ParseListen(f.agent_listen);
    if (!a) return std::unexpected(Usage("--agent-listen: " + a.error().message));
    plan.agent = *a;
  }
  auto tls = LoadListenerTls(f.tls);
  if (!tls) return std::unexpected(Usage(tls.error().message));
  if (!f.tls.client_ca.empty() && !plan.agent) {
    return std::unexpected(Usage(
        "--agent-ca-cert needs --agent-listen: the API listener serves clients without certificates, so agents "
        "that must present one get a listener of their own"));
  }
  plan.tls = *tls;
  plan.api_tls = *tls;
  if (plan.api_tls) plan.api_tls->client_ca_pem.clear();
  for (const auto& [flag, where] : {std::pair{std::string("--listen"), std::optional(*listen)},
                                    std::pair{std::string("--agent-listen"), plan.agent}}) {
    if (!where) continue;
    if (auto ok = CheckPlainListener(flag, where->first, plan.tls.has_value(), f.tls.insecure); !ok) {
      return std::unexpected(Usage(ok.error().message));
    }
  }
  plan.scheme = plan.tls ? "https://" : "http://";
  return plan;
}

// The replicated server's parts (--etcd): the client and the won election.
struct Replication {
  std::unique_ptr<EtcdClient> etcd;
  std::unique_ptr<EtcdElection> election;
};

// Connects to etcd, checks the prefix, and waits to lead (a standby waits
// here; a stop signal meanwhile ends it with exit code 0 and no message).
// Sets `options` to open the journal in etcd, fenced by the leadership.
Started<std::unique_ptr<Replication>> LeadInEtcd(const ServerFlags& f, const ListenPlan& plan,
                                                 const sigset_t& signals, ServerOptions& options) {
  auto etcd_options = EtcdClientOptionsFromFlags(f.etcd, f.tls.insecure);
  if (!etcd_options) return std::unexpected(Usage(etcd_options.error().message));
  if (auto ok = CheckEtcdPrefix(f.etcd_prefix); !ok) return std::unexpected(Usage(ok.error().message));
  auto r = std::make_unique<Replication>();
  r->etcd = std::make_unique<EtcdClient>(std::move(*etcd_options));
  if (auto v = r->etcd->Version(); !v) {
    return std::unexpected(StartFailure{kExitStartFailed,
                                        "cannot reach etcd at " + r->etcd->Describe() + ": " + v.error().message});
  }
  // A prefix holding another cluster's keys stops a standby too, before it waits.
  if (auto probe = OpenEtcdJournal(*r->etcd, EtcdJournalOptions{f.etcd_prefix}); !probe) {
    return std::unexpected(StartFailure{kExitStartFailed, probe.error().message});
  }
  const std::string url = plan.scheme + HostForUrl(plan.host) + ":" + std::to_string(plan.port);
  r->election = std::make_unique<EtcdElection>(*r->etcd, EtcdElectionOptions{f.etcd_prefix, url, f.lease_ttl_seconds});
  LogInfo("campaigning for leadership", {{"etcd", r->etcd->Describe()}, {"prefix", f.etcd_prefix}});
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
  if (auto won = r->election->Campaign(stop_asked, waiting, lost); !won) {
    if (won.error().message == "stopped") return std::unexpected(StartFailure{kExitOk, ""});
    return std::unexpected(StartFailure{kExitStartFailed, won.error().message});
  }
  LogInfo("leading", {{"prefix", f.etcd_prefix}, {"lease", std::to_string(r->election->lease())}});
  options.state_name = "etcd " + f.etcd_prefix + " at " + r->etcd->Describe();
  options.open_journal = [etcd = r->etcd.get(), election = r->election.get(), prefix = f.etcd_prefix] {
    return OpenEtcdJournal(*etcd, EtcdJournalOptions{prefix, election});
  };
  return r;
}

// Binds both listeners; the URLs they serve on (the agent's empty without
// --agent-listen).
Started<std::pair<std::string, std::string>> BindListeners(HttpApi& api, const ListenPlan& plan) {
  auto bound = api.Bind(plan.host, plan.port, plan.api_tls);
  if (!bound) return std::unexpected(StartFailure{kExitStartFailed, "--listen: " + bound.error().message});
  std::string agent_url;
  if (plan.agent) {
    auto b = api.BindAgent(plan.agent->first, plan.agent->second, plan.tls);
    if (!b) return std::unexpected(StartFailure{kExitStartFailed, "--agent-listen: " + b.error().message});
    agent_url = plan.scheme + HostForUrl(plan.agent->first) + ":" + std::to_string(*b);
  }
  return std::pair{plan.scheme + HostForUrl(plan.host) + ":" + std::to_string(*bound), agent_url};
}

void PrintListening(const ServerFlags& f, const std::string& url, const std::string& agent_url) {
  const std::string token_file = f.admin_token_file.empty()
                                     ? (std::filesystem::path(f.data_dir) / "admin.token").string()
                                     : f.admin_token_file;
  std::cout << "gpupool server: listening on " << url << "\n"
            << (agent_url.empty() ? "" : "  agents:      " + agent_url + " (agent protocol and /healthz only)\n")
            << "  data:        " << f.data_dir << "\n"
            << "  admin token: " << token_file << "\n"
            << "  try:         GPUPOOL_ADDR=" << url << " GPUPOOL_TOKEN=$(cat " << token_file
            << ") build/gpupool pool list" << std::endl;
  LogInfo("listening", {{"url", url}, {"agent_url", agent_url}});
}

// Opens the state (the data directory's journal, or etcd's), binds, and
// starts the core; with --recover-from-journal, writes fresh snapshots.
Started<std::unique_ptr<ServerCore>> OpenCore(const ServerFlags& f, const ServerOptions& options, int listeners) {
  auto core = ServerCore::Open(options);
  if (!core) {
    return std::unexpected(StartFailure{
        core.error().code == ErrorCode::kDataLoss ? kExitDataLoss : kExitStartFailed, core.error().message});
  }
  LogInfo("recovered", {{"data_dir", f.data_dir},
                        {"replayed_events", std::to_string((*core)->replayed_events())},
                        {"seconds", std::to_string((*core)->recovery_seconds())},
                        {"integrity_check_seconds", std::to_string((*core)->integrity_check_seconds())},
                        {"from", f.recover_from_journal ? "the journal's events alone" : "snapshots and events"}});
  WarnOnFewDescriptors((*core)->settings(), listeners);
  return std::move(*core);
}

// Fresh snapshots of both kinds after --recover-from-journal, so that the
// next plain start does not meet the damaged ones again.
Status WriteFreshSnapshots(ServerCore& core, const std::string& data_dir) {
  if (const Reply r = core.Call(SnapshotCmd{}); r.error) {
    return FailedPrecondition("cannot write fresh snapshots: " + r.error->message);
  }
  LogInfo("rebuilt the state from the journal and wrote fresh snapshots", {{"data_dir", data_dir}});
  return {};
}

// Serves until SIGINT or SIGTERM (or until serving fails); true when it
// stopped cleanly.
bool ServeUntilSignalled(HttpApi& api, const sigset_t& signals) {
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    LogInfo("stopping", {{"signal", sig == SIGINT ? "SIGINT" : "SIGTERM"}});
    api.Stop();
  });
  const Status served = api.Serve();
  if (!served) LogError("cannot serve", {{"error", served.error().message}});
  pthread_kill(waiter.native_handle(), SIGTERM);  // when Serve ended for another reason
  waiter.join();
  return served.has_value();
}

int Fail(const StartFailure& why) {
  if (!why.message.empty()) std::cerr << "error: " << why.message << "\n";
  return why.exit_code;
}

int RunServer(const ServerFlags& f) {
  const auto plan = PlanListeners(f);
  if (!plan) return Fail(plan.error());
  // Signals are taken by one thread (sigwait); every other thread blocks them.
  const sigset_t signals = BlockStopSignals();
  // Whatever the server creates is its owner's alone (the Env and the
  // journal ask for 0600 and 0700 themselves; this covers the rest).
  ::umask(077);

  ServerOptions options{f.data_dir, f.config, f.admin_token_file};
  options.replay_from_start = f.recover_from_journal;
  // With --etcd: wait to lead, then open the journal in etcd (fenced by the
  // leadership: a deposed server's appends fail, and it stops).
  std::unique_ptr<Replication> replication;
  if (!f.etcd.endpoints.empty()) {
    auto r = LeadInEtcd(f, *plan, signals, options);
    if (!r) return Fail(r.error());
    replication = std::move(*r);
  }
  auto core = OpenCore(f, options, plan->agent ? 2 : 1);
  if (!core) return Fail(core.error());
  HttpApi api(**core);
  const auto urls = BindListeners(api, *plan);
  if (!urls) return Fail(urls.error());
  const auto& [url, agent_url] = *urls;
  (*core)->Start();
  if (f.recover_from_journal) {
    if (auto ok = WriteFreshSnapshots(**core, f.data_dir); !ok) {
      (*core)->Stop();
      return Fail({kExitStartFailed, ok.error().message});
    }
  }
  if (replication) {
    if (auto ok = replication->election->Advertise(url); !ok) return Fail({kExitStartFailed, ok.error().message});
  }
  if (auto ok = WriteServerUrl(f.data_dir, url); !ok) return Fail({kExitStartFailed, ok.error().message});
  PrintListening(f, url, agent_url);

  const bool clean = ServeUntilSignalled(api, signals);
  (*core)->Stop();
  if (replication) replication->election->Resign();  // a standby takes over at once
  LogInfo("stopped", {});
  return clean ? 0 : 1;
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
