// Real etcd processes on loopback ports for tests (issue 17): a cluster of
// 1 or 3 members in a temporary directory, each member a child process of
// the test, killed and its directory removed when the cluster goes away.
//
// EtcdBinary() is where etcd is (/usr/bin/etcd, or $GPUPOOL_ETCD), empty
// when absent: tests then skip with GTEST_SKIP naming the package.
//
// Thread-safety: one thread (the test's).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace gpupool::testing {

std::string EtcdBinary();
// The skip message when EtcdBinary() is empty.
inline constexpr const char* kNoEtcdMessage =
    "etcd is not installed (apt-get install etcd-server, or set GPUPOOL_ETCD): the etcd tests need a real etcd";

// TLS on the members' client URLs (issue 22): etcd serves `cert`/`key`
// (which must allow clientAuth as well as serverAuth: etcd's JSON gateway
// dials its own gRPC with them) and, with client_cert_auth, asks every
// client for a certificate `trusted_ca` signed. Peer URLs stay plain.
struct EtcdTestTls {
  std::string cert, key, trusted_ca;
  bool client_cert_auth = false;
  std::string client_cert, client_key;  // what Start() presents when it waits for the cluster
};

class EtcdCluster {
 public:
  explicit EtcdCluster(int members = 1);
  EtcdCluster(int members, EtcdTestTls tls);
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  // Starts every member and waits (at most 20 s) until the cluster answers
  // a write; false (with why in error()) otherwise.
  bool Start();
  // SIGKILL of one member (its data stays); Restart brings it back.
  void Kill(int member);
  bool Restart(int member);

  // "http://127.0.0.1:P,http://127.0.0.1:Q,..." (the --etcd flag; https:// with TLS).
  std::string Endpoints() const;
  std::vector<std::string> EndpointList() const;
  const std::string& error() const { return error_; }
  const std::string& dir() const { return dir_; }

 private:
  bool StartMember(int member, bool fresh);

  std::string ClientUrl(int port) const;

  int members_;
  std::optional<EtcdTestTls> tls_;
  std::string dir_;
  std::vector<int> client_ports_, peer_ports_;
  std::vector<pid_t> pids_;
  std::string error_;
};

}  // namespace gpupool::testing
