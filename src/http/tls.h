// A listener's TLS identity (issue 22): its certificate chain and private
// key, and optionally the CAs whose certificates its clients must present
// (mutual TLS). libmicrohttpd serves TLS through GnuTLS on the same event
// loop as plain HTTP (src/http/server.h, Server::Listen).
//
// Files are read and checked here, with GnuTLS itself, before a listener
// opens: what passes here is what the listener will load, so a bad file
// stops start-up with a message naming it instead of a listener that
// refuses to start with no reason.
//
// Client certificates (client_ca_pem non-empty): the listener requires one
// in the handshake and GnuTLS verifies it against client_ca_pem; a client
// without one, or with one signed by another CA, fails the handshake and
// never reaches a handler. Only the chain is checked (no host names, no
// revocation lists): the agent's node token still says which node it is.
//
// Thread-safety: plain functions and values; call from any thread.
#pragma once

#include <string>

#include "src/base/status.h"

namespace gpupool::http {

struct TlsIdentity {
  std::string cert_pem;       // the certificate chain, leaf first (PEM)
  std::string key_pem;        // the leaf's private key (PEM, unencrypted)
  std::string client_ca_pem;  // empty: no client certificates asked; else the CAs that sign them (PEM)
};

// One PEM file and how it was given (a flag such as "--tls-cert", a config
// key), for messages.
struct PemFile {
  std::string given_as;
  std::string path;
};

// Whether the linked libmicrohttpd was built with TLS (Debian's is).
bool TlsSupported();

// Reads and checks `cert` (one or more certificates), `key` (a private key
// that belongs to the first certificate) and, when its path is not empty,
// `client_ca` (one or more CA certificates). Fails, naming the flag and the
// file: "--tls-cert F: cannot read: REASON", "--tls-cert F: not a PEM
// certificate (GNUTLS REASON)", "--tls-key F: not a PEM private key (...)",
// "--tls-key K does not match the certificate in --tls-cert C".
Result<TlsIdentity> LoadTlsIdentity(const PemFile& cert, const PemFile& key, const PemFile& client_ca = {});

}  // namespace gpupool::http
