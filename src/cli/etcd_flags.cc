#include "src/cli/etcd_flags.h"

#include "src/cli/listener_tls.h"
#include "src/server/log.h"

namespace gpupool {
namespace {

// HOST of SCHEME://HOST:PORT (brackets of an IPv6 address kept).
std::string EndpointHost(const std::string& url) {
  const std::string rest = url.substr(url.find("://") + 3);
  return rest.substr(0, rest.rfind(':'));
}

ClientTls TlsOf(const EtcdFlags& f) {
  ClientTls tls;
  tls.ca_cert_file = f.ca_cert;
  tls.ca_given_as = "--etcd-ca-cert";
  tls.ca_hint = "check --etcd-ca-cert";
  tls.client_cert_file = f.cert;
  tls.client_key_file = f.key;
  tls.cert_given_as = "--etcd-cert";
  tls.key_given_as = "--etcd-key";
  return tls;
}

// Plain endpoints: no TLS flags, and loopback only unless `insecure`.
Status CheckPlainEtcd(const EtcdFlags& f, const std::vector<std::string>& endpoints, bool insecure) {
  for (const auto& [flag, value] : {std::pair{"--etcd-ca-cert", &f.ca_cert}, std::pair{"--etcd-cert", &f.cert},
                                    std::pair{"--etcd-key", &f.key}}) {
    if (!value->empty()) {
      return InvalidArgument(std::string(flag) + " is for TLS to etcd: give https:// endpoints in --etcd");
    }
  }
  for (const std::string& url : endpoints) {
    const std::string host = EndpointHost(url);
    if (IsLoopbackHost(host)) continue;
    if (!insecure) {
      return FailedPrecondition("--etcd " + url +
                                " is plain HTTP to an address that is not loopback (the journal, job environments "
                                "included, in clear): use https:// with --etcd-ca-cert, or --insecure to use plain "
                                "HTTP anyway");
    }
    LogWarning("plain HTTP to etcd on a non-loopback address (--insecure): the journal crosses the network in clear",
               {{"etcd", url}});
  }
  return {};
}

}  // namespace

Result<EtcdClientOptions> EtcdClientOptionsFromFlags(const EtcdFlags& f, bool insecure) {
  GP_ASSIGN_OR_RETURN(std::vector<std::string> endpoints, ParseEtcdEndpoints(f.endpoints));
  EtcdClientOptions options;
  if (endpoints.front().starts_with("http://")) {
    GP_TRY(CheckPlainEtcd(f, endpoints, insecure));
  } else {
    options.tls = TlsOf(f);
    GP_TRY(CheckClientTls(options.tls));
  }
  options.endpoints = std::move(endpoints);
  return options;
}

}  // namespace gpupool
