#include "src/base/http_error_text.h"

namespace gpupool {

std::string DescribeHttpError(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection:
      return "connection refused or host unreachable";
    case httplib::Error::ConnectionTimeout:
      return "timed out connecting";
    case httplib::Error::Read:
      return "the connection closed or timed out before an answer";
    case httplib::Error::Write:
      return "the connection closed while sending the request";
    case httplib::Error::SSLConnection:
      return "TLS handshake failed";
    case httplib::Error::SSLLoadingCerts:
      return "cannot load the system's CA certificates";
    case httplib::Error::SSLServerVerification:
      return "the server's TLS certificate is not trusted";
    case httplib::Error::BindIPAddress:
      return "cannot bind the local address";
    default:
      return httplib::to_string(e);
  }
}

}  // namespace gpupool
