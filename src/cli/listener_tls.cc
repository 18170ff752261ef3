#include "src/cli/listener_tls.h"

#include <arpa/inet.h>

#include "src/server/log.h"

namespace gpupool {

bool IsLoopbackHost(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host == "localhost") return true;
  const std::string h(host);
  in_addr v4{};
  if (::inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, h.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

Result<std::optional<http::TlsIdentity>> LoadListenerTls(const ListenerTlsFlags& f) {
  if (f.cert.empty() != f.key.empty()) {
    return InvalidArgument(f.cert.empty() ? "--tls-key is given without --tls-cert"
                                          : "--tls-cert is given without --tls-key");
  }
  if (f.cert.empty()) {
    if (!f.client_ca.empty()) {
      return InvalidArgument(f.client_ca_flag + " needs TLS: give --tls-cert and --tls-key too");
    }
    return std::optional<http::TlsIdentity>();
  }
  if (!http::TlsSupported()) {
    return FailedPrecondition("--tls-cert: this build's libmicrohttpd has no TLS support");
  }
  GP_ASSIGN_OR_RETURN(auto identity, http::LoadTlsIdentity({"--tls-cert", f.cert}, {"--tls-key", f.key},
                                                           {f.client_ca_flag, f.client_ca}));
  return std::optional<http::TlsIdentity>(std::move(identity));
}

Status CheckPlainListener(const std::string& flag, const std::string& host, bool tls, bool insecure) {
  if (tls || IsLoopbackHost(host)) return {};
  if (!insecure) {
    return FailedPrecondition(flag + " " + host +
                              " is not a loopback address and would serve plain HTTP (tokens in clear): give "
                              "--tls-cert and --tls-key, or --insecure to serve plain HTTP anyway");
  }
  LogWarning("serving plain HTTP on a non-loopback address (--insecure): tokens cross the network in clear",
             {{"listener", flag}, {"host", host}});
  return {};
}

}  // namespace gpupool
