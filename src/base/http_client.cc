#include "src/base/http_client.h"

#include <openssl/x509.h>
#include <signal.h>

#include <mutex>

#include "src/base/http_error_text.h"

namespace gpupool {
namespace {

// OpenSSL writes to its socket with write(2), so a server that closes the
// connection mid-handshake (a refused client certificate) would kill the
// process with SIGPIPE; cpp-httplib's plain sockets use MSG_NOSIGNAL and
// need nothing. Ignored only while nobody installed a handler.
void IgnoreSigpipeOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction old {};
    if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
  });
}

}  // namespace

std::unique_ptr<httplib::Client> NewHttpClient(const std::string& url, const ClientTls& tls) {
  if (!url.starts_with("https://")) return std::make_unique<httplib::Client>(url);
  IgnoreSigpipeOnce();
  auto client = tls.client_cert_file.empty()
                    ? std::make_unique<httplib::Client>(url)
                    : std::make_unique<httplib::Client>(url, tls.client_cert_file, tls.client_key_file);
  if (!tls.ca_cert_file.empty()) client->set_ca_cert_path(tls.ca_cert_file);
  client->enable_server_certificate_verification(true);
  return client;
}

bool IsTlsFailure(httplib::Error e) {
  return e == httplib::Error::SSLConnection || e == httplib::Error::SSLLoadingCerts ||
         e == httplib::Error::SSLServerVerification;
}

std::string DescribeHttpFailure(const httplib::Client& client, httplib::Error e, const std::string& url,
                                const ClientTls& tls) {
  switch (e) {
    case httplib::Error::SSLServerVerification: {
      const long verify = client.get_openssl_verify_result();
      if (verify != X509_V_OK && verify >= 0) {
        return "TLS: certificate verify failed for " + url + " (" + X509_verify_cert_error_string(verify) + "; " +
               tls.ca_hint + ")";
      }
      // The chain is good but names another host (cpp-httplib checks the
      // subjectAltName after the chain).
      return "TLS: the certificate of " + url +
             " does not name the host of that address (use an address it names in its subjectAltName)";
    }
    case httplib::Error::SSLLoadingCerts:
      return "TLS: cannot load the CA certificates for " + url + " (" +
             (tls.ca_cert_file.empty() ? std::string("the system's") : tls.ca_given_as + " " + tls.ca_cert_file) +
             ")";
    case httplib::Error::SSLConnection:
      return "TLS: handshake with " + url + " failed (if the server serves plain HTTP, use http://" +
             (tls.client_cert_file.empty() ? std::string("; it may require a client certificate")
                                           : "; it may refuse " + tls.cert_given_as + " " + tls.client_cert_file) +
             ")";
    case httplib::Error::Read:
    case httplib::Error::Write:
      if (url.starts_with("http://")) {
        return DescribeHttpError(e) + " (if the server serves TLS, use https://)";
      }
      // With TLS 1.3 a server that refuses the client's certificate (or its
      // absence) says so after the client's side of the handshake is done:
      // the client's next read, or its write of the request when the
      // server has already closed (as under load), fails.
      return DescribeHttpError(e) + (tls.client_cert_file.empty()
                                         ? " (if the server requires a client certificate, it closes like this)"
                                         : " (if the server refused " + tls.cert_given_as + " " + tls.client_cert_file +
                                               ", it closes like this)");
    default:
      return DescribeHttpError(e);
  }
}

}  // namespace gpupool
