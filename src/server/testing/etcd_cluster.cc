#include "src/server/testing/etcd_cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "src/server/etcd_client.h"
#include "src/server/testing/free_port.h"

namespace gpupool::testing {
namespace {

std::string Url(int port) { return "http://127.0.0.1:" + std::to_string(port); }

}  // namespace

std::string EtcdBinary() {
  if (const char* e = std::getenv("GPUPOOL_ETCD"); e && *e) return access(e, X_OK) == 0 ? e : "";
  return access("/usr/bin/etcd", X_OK) == 0 ? "/usr/bin/etcd" : "";
}

EtcdCluster::EtcdCluster(int members) : members_(members) {
  char tmpl[] = "/tmp/gpupool-etcd-XXXXXX";
  dir_ = mkdtemp(tmpl) ? tmpl : "";
  for (int i = 0; i < members_; ++i) {
    client_ports_.push_back(FreeLoopbackPort());
    peer_ports_.push_back(FreeLoopbackPort());
    pids_.push_back(-1);
  }
}

EtcdCluster::EtcdCluster(int members, EtcdTestTls tls) : EtcdCluster(members) { tls_ = std::move(tls); }

std::string EtcdCluster::ClientUrl(int port) const {
  return (tls_ ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(port);
}

EtcdCluster::~EtcdCluster() {
  for (int i = 0; i < members_; ++i) Kill(i);
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

std::string EtcdCluster::Endpoints() const {
  std::string out;
  for (int p : client_ports_) out += (out.empty() ? "" : ",") + ClientUrl(p);
  return out;
}

std::vector<std::string> EtcdCluster::EndpointList() const {
  std::vector<std::string> out;
  for (int p : client_ports_) out.push_back(ClientUrl(p));
  return out;
}

bool EtcdCluster::StartMember(int m, bool fresh) {
  std::string initial;
  for (int i = 0; i < members_; ++i) {
    initial += (initial.empty() ? "" : ",") + ("m" + std::to_string(i)) + "=" + Url(peer_ports_[i]);
  }
  const std::string name = "m" + std::to_string(m);
  std::vector<std::string> args = {EtcdBinary(),
                                   "--name", name,
                                   "--data-dir", dir_ + "/" + name,
                                   "--listen-client-urls", ClientUrl(client_ports_[m]),
                                   "--advertise-client-urls", ClientUrl(client_ports_[m]),
                                   "--listen-peer-urls", Url(peer_ports_[m]),
                                   "--initial-advertise-peer-urls", Url(peer_ports_[m]),
                                   "--initial-cluster", initial,
                                   "--initial-cluster-state", fresh ? "new" : "existing",
                                   "--initial-cluster-token", "gpupool-test",
                                   // Short timings for tests on a busy machine: still well above a loopback round trip.
                                   "--heartbeat-interval", "100", "--election-timeout", "1000",
                                   "--logger", "zap", "--log-outputs", dir_ + "/" + name + ".log"};
  if (tls_) {
    args.insert(args.end(),
                {"--cert-file", tls_->cert, "--key-file", tls_->key, "--trusted-ca-file", tls_->trusted_ca});
    if (tls_->client_cert_auth) args.push_back("--client-cert-auth");
  }
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  if (pid < 0) {
    error_ = "fork failed";
    return false;
  }
  pids_[m] = pid;
  return true;
}

bool EtcdCluster::Start() {
  if (dir_.empty()) {
    error_ = "cannot create a temporary directory";
    return false;
  }
  for (int i = 0; i < members_; ++i) {
    if (!StartMember(i, true)) return false;
  }
  EtcdClientOptions options{EndpointList(), std::chrono::milliseconds(200), std::chrono::milliseconds(2000)};
  if (tls_) {
    options.tls.ca_cert_file = tls_->trusted_ca;
    options.tls.client_cert_file = tls_->client_cert;
    options.tls.client_key_file = tls_->client_key;
  }
  EtcdClient client(std::move(options));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    auto put = client.Put("/gpupool-test/ready", "1");
    if (put) return true;
    error_ = put.error().message;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  error_ = "etcd did not accept a write within 20 s: " + error_;
  return false;
}

void EtcdCluster::Kill(int m) {
  if (pids_[m] <= 0) return;
  kill(pids_[m], SIGKILL);
  int status = 0;
  waitpid(pids_[m], &status, 0);
  pids_[m] = -1;
}

bool EtcdCluster::Restart(int m) {
  Kill(m);
  return StartMember(m, false);
}

}  // namespace gpupool::testing
