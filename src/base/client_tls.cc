#include "src/base/client_tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace gpupool {
namespace {

std::string Named(const std::string& given_as, const std::string& path) { return given_as + " " + path; }

// Opens `path` for reading as a BIO, or says why not.
Result<BIO*> Open(const std::string& given_as, const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return IoError(Named(given_as, path) + ": cannot read: " + std::strerror(errno));
  BIO* bio = BIO_new_fp(f, BIO_CLOSE);
  if (bio == nullptr) {
    std::fclose(f);
    return IoError(Named(given_as, path) + ": cannot read: out of memory");
  }
  return bio;
}

// The first PEM certificate of `path` (the caller frees it).
Result<X509*> ReadCertificate(const std::string& given_as, const std::string& path) {
  GP_ASSIGN_OR_RETURN(BIO * bio, Open(given_as, path));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  ERR_clear_error();
  if (cert == nullptr) return InvalidArgument(Named(given_as, path) + ": no PEM certificate in it");
  return cert;
}

Status CheckClientCertificate(const ClientTls& tls) {
  const bool has_cert = !tls.client_cert_file.empty();
  const bool has_key = !tls.client_key_file.empty();
  if (has_cert != has_key) {
    return InvalidArgument(has_cert ? tls.cert_given_as + " is given without " + tls.key_given_as
                                    : tls.key_given_as + " is given without " + tls.cert_given_as);
  }
  if (!has_cert) return {};
  GP_ASSIGN_OR_RETURN(X509 * cert, ReadCertificate(tls.cert_given_as, tls.client_cert_file));
  auto key_bio = Open(tls.key_given_as, tls.client_key_file);
  if (!key_bio) {
    X509_free(cert);
    return std::unexpected(key_bio.error());
  }
  EVP_PKEY* key = PEM_read_bio_PrivateKey(*key_bio, nullptr, nullptr, nullptr);
  BIO_free(*key_bio);
  Status out;
  if (key == nullptr) {
    out = InvalidArgument(Named(tls.key_given_as, tls.client_key_file) + ": no PEM private key in it");
  } else if (X509_check_private_key(cert, key) != 1) {
    out = InvalidArgument(Named(tls.key_given_as, tls.client_key_file) + " does not match " +
                          Named(tls.cert_given_as, tls.client_cert_file));
  }
  ERR_clear_error();
  EVP_PKEY_free(key);
  X509_free(cert);
  return out;
}

}  // namespace

Status CheckClientTls(const ClientTls& tls) {
  if (!tls.ca_cert_file.empty()) {
    GP_ASSIGN_OR_RETURN(X509 * ca, ReadCertificate(tls.ca_given_as, tls.ca_cert_file));
    X509_free(ca);
  }
  return CheckClientCertificate(tls);
}

}  // namespace gpupool
