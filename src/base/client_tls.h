// A TLS client's settings (issue 22): whom to trust and what to present.
// Light on purpose (no cpp-httplib), so that options structs can hold it;
// src/base/http_client.h makes clients with it.
//
// Server certificates are always verified, chain and host name (an IP
// address must be in the certificate's subjectAltName), against ca_cert_file
// when given, else against the system's CAs. There is no switch to skip it.
#pragma once

#include <string>

#include "src/base/status.h"

namespace gpupool {

struct ClientTls {
  std::string ca_cert_file;  // PEM CA certificates for the server's; empty: the system's CAs
  std::string ca_given_as = "--ca-cert";  // how ca_cert_file was given, for messages ("GPUPOOL_CA_CERT", ...)
  // A certificate to present when the server asks (mutual TLS); both or neither.
  std::string client_cert_file;
  std::string client_key_file;
  std::string cert_given_as = "--client-cert";  // how they were given, for messages ("--etcd-cert", ...)
  std::string key_given_as = "--client-key";
  // Said after a refused server certificate, e.g. "check --ca-cert".
  std::string ca_hint = "check --ca-cert";
};

// Checks the files before any request: the CA file holds at least one PEM
// certificate; the client certificate and key are given both or neither,
// hold a PEM certificate and a PEM private key, and belong together.
// Messages name the flag and the file: "--ca-cert F: cannot read: REASON",
// "--ca-cert F: no PEM certificate in it", "--client-key K does not match
// --client-cert C", "--client-cert is given without --client-key" (with
// the names of ca_given_as, cert_given_as and key_given_as).
Status CheckClientTls(const ClientTls& tls);

}  // namespace gpupool
