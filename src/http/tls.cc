#include "src/http/tls.h"

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace gpupool::http {
namespace {

std::string Named(const PemFile& f) { return f.given_as + " " + f.path; }

Result<std::string> ReadWhole(const PemFile& f) {
  std::ifstream in(f.path, std::ios::binary);
  if (!in) return IoError(Named(f) + ": cannot read: " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return IoError(Named(f) + ": cannot read: " + std::strerror(errno));
  return text.str();
}

gnutls_datum_t Datum(const std::string& s) {
  return gnutls_datum_t{reinterpret_cast<unsigned char*>(const_cast<char*>(s.data())),
                        static_cast<unsigned int>(s.size())};
}

// At least one PEM certificate in `text`.
Status CheckCertificates(const PemFile& f, const std::string& text, const char* what) {
  gnutls_x509_crt_t* list = nullptr;
  unsigned int n = 0;
  const gnutls_datum_t d = Datum(text);
  const int rc = gnutls_x509_crt_list_import2(&list, &n, &d, GNUTLS_X509_FMT_PEM, 0);
  for (unsigned int i = 0; i < n; ++i) gnutls_x509_crt_deinit(list[i]);
  gnutls_free(list);
  if (rc < 0 || n == 0) {
    return InvalidArgument(Named(f) + ": not a PEM " + what + " (" + (rc < 0 ? gnutls_strerror(rc) : "none found") +
                           ")");
  }
  return {};
}

Status CheckKey(const PemFile& f, const std::string& text) {
  gnutls_x509_privkey_t key = nullptr;
  if (gnutls_x509_privkey_init(&key) < 0) return IoError(Named(f) + ": GnuTLS cannot allocate a key");
  const gnutls_datum_t d = Datum(text);
  const int rc = gnutls_x509_privkey_import2(key, &d, GNUTLS_X509_FMT_PEM, nullptr, 0);
  gnutls_x509_privkey_deinit(key);
  if (rc < 0) return InvalidArgument(Named(f) + ": not a PEM private key (" + gnutls_strerror(rc) + ")");
  return {};
}

// What libmicrohttpd will do with the pair (gnutls_certificate_set_x509_key_mem),
// so that a mismatch is found here.
Status CheckPair(const PemFile& cert, const std::string& cert_pem, const PemFile& key, const std::string& key_pem) {
  gnutls_certificate_credentials_t cred = nullptr;
  if (gnutls_certificate_allocate_credentials(&cred) < 0) return IoError("GnuTLS cannot allocate credentials");
  const gnutls_datum_t c = Datum(cert_pem);
  const gnutls_datum_t k = Datum(key_pem);
  const int rc = gnutls_certificate_set_x509_key_mem2(cred, &c, &k, GNUTLS_X509_FMT_PEM, nullptr, 0);
  gnutls_certificate_free_credentials(cred);
  if (rc == GNUTLS_E_CERTIFICATE_KEY_MISMATCH) {
    return InvalidArgument(Named(key) + " does not match the certificate in " + Named(cert));
  }
  if (rc < 0) {
    return InvalidArgument(Named(cert) + " and " + Named(key) + ": not a usable pair (" + gnutls_strerror(rc) + ")");
  }
  return {};
}

}  // namespace

bool TlsSupported() { return MHD_is_feature_supported(MHD_FEATURE_TLS) == MHD_YES; }

Result<TlsIdentity> LoadTlsIdentity(const PemFile& cert, const PemFile& key, const PemFile& client_ca) {
  TlsIdentity out;
  GP_ASSIGN_OR_RETURN(out.cert_pem, ReadWhole(cert));
  GP_TRY(CheckCertificates(cert, out.cert_pem, "certificate"));
  GP_ASSIGN_OR_RETURN(out.key_pem, ReadWhole(key));
  GP_TRY(CheckKey(key, out.key_pem));
  GP_TRY(CheckPair(cert, out.cert_pem, key, out.key_pem));
  if (!client_ca.path.empty()) {
    GP_ASSIGN_OR_RETURN(out.client_ca_pem, ReadWhole(client_ca));
    GP_TRY(CheckCertificates(client_ca, out.client_ca_pem, "CA certificate"));
  }
  return out;
}

}  // namespace gpupool::http
