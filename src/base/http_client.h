// HTTP and HTTPS clients with gpupool's TLS settings (ClientTls,
// src/base/client_tls.h; issue 22), and a
// failed request in words. The CLI's API client and the agent make their
// clients here.
//
// cpp-httplib speaks HTTPS through OpenSSL when compiled with
// CPPHTTPLIB_OPENSSL_SUPPORT, and that define changes the layout of its
// classes: every translation unit must agree with the library. Debian's
// libcpp-httplib is built with it, and its pkg-config file adds it to the
// compile flags of everything that links it (gpupool_thirdparty links it for
// every target), so all agree; the #error below stops a file that would not.
//
// Thread-safety: a client is used by one thread at a time; the functions
// here may be called from any thread.
#pragma once

#include <memory>
#include <string>

#include <httplib.h>

#include "src/base/client_tls.h"
#include "src/base/status.h"

#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#error "cpp-httplib must be compiled with CPPHTTPLIB_OPENSSL_SUPPORT (its pkg-config flags), as libcpp-httplib is"
#endif

namespace gpupool {

// A client of `url` ("http://HOST:PORT" or "https://HOST:PORT"); `tls` is
// used only for https. Call CheckClientTls first: a file that cannot be
// loaded here makes every request fail (SSLConnection). The first https
// client sets SIGPIPE to ignored in the process unless it has a handler
// (OpenSSL writes without MSG_NOSIGNAL, and a server refusing the handshake
// would otherwise kill the process); children spawned by src/base and
// src/agent get default dispositions back.
std::unique_ptr<httplib::Client> NewHttpClient(const std::string& url, const ClientTls& tls);

// A request that got no answer, in words, with what to do for TLS failures:
//   "TLS: certificate verify failed for https://127.0.0.1:7443 (unable to get
//    local issuer certificate; check --ca-cert)"
//   "TLS: the certificate of https://10.0.0.1:7443 does not name 10.0.0.1 ..."
//   "TLS: handshake with https://... failed (...)"
// and DescribeHttpError's text otherwise (a plain http:// URL whose server
// closed the connection adds "if the server serves TLS, use https://").
std::string DescribeHttpFailure(const httplib::Client& client, httplib::Error e, const std::string& url,
                                const ClientTls& tls);

// Whether a failure is about TLS (the text then stands alone, without a
// "cannot reach" prefix).
bool IsTlsFailure(httplib::Error e);

}  // namespace gpupool
