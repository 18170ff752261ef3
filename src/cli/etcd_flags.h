// `gpupool server`'s etcd flags (issue 17's --etcd, issue 22's TLS to etcd)
// made into the etcd client's options, with the rule for plain etcd:
//
//   --etcd URL[,URL...]      http://HOST:PORT or https://HOST:PORT, one scheme
//   --etcd-ca-cert FILE      PEM CA certificates for etcd's server certificate
//                            (default: the system's CAs)
//   --etcd-cert FILE         a client certificate for an etcd run with
//   --etcd-key FILE          --client-cert-auth (both or neither)
//
// The rule, as for the server's own listeners (listener_tls.h): the journal
// (job environments included) and the leader's lease cross the network to
// etcd, so http:// endpoints on an address other than loopback are refused
// unless the operator says --insecure, which is logged as a warning. The
// TLS flags with http:// endpoints are an error (they would be ignored).
#pragma once

#include <string>

#include "src/base/status.h"
#include "src/server/etcd_client.h"

namespace gpupool {

struct EtcdFlags {
  std::string endpoints;  // --etcd; empty: no etcd
  std::string ca_cert;    // --etcd-ca-cert
  std::string cert;       // --etcd-cert
  std::string key;        // --etcd-key
};

// The client's options (default timeouts), or an error naming the flag and
// the file (the TLS files are read and checked here, before any request).
Result<EtcdClientOptions> EtcdClientOptionsFromFlags(const EtcdFlags& flags, bool insecure);

}  // namespace gpupool
