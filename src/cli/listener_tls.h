// The daemons' listener TLS flags and the rule for plain listeners
// (issue 22), shared by `gpupool server`, `gpupool agent` and `gpupool dev`.
//
// The rule: a listener on an address other than loopback serves TLS
// (--tls-cert and --tls-key), or the operator says --insecure, which is
// logged as a warning per plain listener. Loopback listeners may stay plain
// without a word, so that `make run` and the quick start keep plain HTTP.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "src/base/status.h"
#include "src/http/tls.h"

namespace gpupool {

// 127.0.0.0/8, ::1 (with or without brackets) and "localhost". Every other
// address is not loopback, the wildcards 0.0.0.0 and :: included (they
// accept connections from anywhere).
bool IsLoopbackHost(std::string_view host);

struct ListenerTlsFlags {
  std::string cert;       // --tls-cert FILE (PEM chain, leaf first)
  std::string key;        // --tls-key FILE (PEM private key)
  std::string client_ca;  // e.g. --agent-ca-cert FILE: clients must present a certificate it signed
  std::string client_ca_flag = "--agent-ca-cert";
  bool insecure = false;  // --insecure: plain HTTP on a non-loopback address is allowed (with a warning)
};

// The identity the flags name: none without --tls-cert and --tls-key (a
// client CA without them is an error: it needs TLS); fails naming the flag
// and the file (LoadTlsIdentity), or when only one of the two is given.
Result<std::optional<http::TlsIdentity>> LoadListenerTls(const ListenerTlsFlags& flags);

// Applies the rule to the listener `flag` (e.g. "--listen") on `host`:
// fine with TLS or on loopback; otherwise an error naming the flag, the
// address and both ways out, unless `insecure`, when it logs a warning
// (LogWarning) and is fine.
Status CheckPlainListener(const std::string& flag, const std::string& host, bool tls, bool insecure);

}  // namespace gpupool
