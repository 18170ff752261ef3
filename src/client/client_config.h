// Where the client finds its server and its token.
//
// Contract (docs/api/openapi.yaml, "Client configuration"): each of the two
// values is taken from the first source that gives it, highest precedence
// first:
//
//   address: --addr URL > GPUPOOL_ADDR > `addr` in the config file > http://127.0.0.1:7070
//   token:   --token T or --token-file F > GPUPOOL_TOKEN > `token` or `token_file` in the
//            config file > none
//   CA:      --ca-cert F > GPUPOOL_CA_CERT > `ca_cert` in the config file > the system's CAs
//            (used for https:// addresses: the CA that signs the server's certificate)
//
// The config file is --config F, else $GPUPOOL_CONFIG, else
// $HOME/.config/gpupool/config.yaml. A file named by --config or
// $GPUPOOL_CONFIG must exist; the default one may be absent. The file is a YAML
// map with the keys `addr`, `token`, `token_file` and `ca_cert` only (a relative
// token_file or ca_cert is relative to the config file's folder). Empty flags and empty
// environment variables count as not given.
//
// Resolution reads files (the config file, token files) but no clock and no
// socket; the environment comes in through `EnvLookup` so that tests choose it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "src/base/client_tls.h"
#include "src/base/status.h"

namespace gpupool {

inline constexpr std::string_view kDefaultServerAddr = "http://127.0.0.1:7070";

// The flags as given on the command line; an empty string means "not given".
struct ClientFlags {
  std::string addr;
  std::string token;
  std::string token_file;
  std::string config;
  std::string ca_cert;
};

// Returns the value of an environment variable, or nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The process environment (getenv).
EnvLookup ProcessEnvironment();

// A parsed server address: scheme "http" or "https", a host and a port.
struct ServerAddress {
  std::string scheme;
  std::string host;  // IPv6 literals without their brackets
  int port = 0;

  // "http://127.0.0.1:7070" (brackets around IPv6 literals).
  std::string Url() const;
};

// Accepts "http://HOST[:PORT][/]", "https://HOST[:PORT][/]" and "HOST:PORT"
// (taken as http). The default port is 80 for http and 443 for https. Fails
// on any other scheme, a path, a missing host or a port outside 1..65535;
// the message names `source` (e.g. "--addr").
Result<ServerAddress> ParseServerAddress(std::string_view source, std::string_view text);

struct ClientConfig {
  ServerAddress addr;
  std::string addr_source;   // "--addr", "GPUPOOL_ADDR", "addr in FILE", "the default address"
  std::string token;         // empty: no token (the server answers 401 where one is needed)
  std::string token_source;  // "--token", "--token-file FILE", "GPUPOOL_TOKEN", "token in FILE",
                             // "token_file FILE (from CONFIG)"; empty when there is no token
  std::string config_path;   // the config file read, empty when none was
  // For https addresses: the CA file (empty: the system's), how it was
  // given ("--ca-cert", "GPUPOOL_CA_CERT", "ca_cert in FILE") and the hint
  // a refused certificate gets.
  ClientTls tls;
};

// Resolves the address and the token as the file comment says. Fails, with
// a message naming the file (and line:column for YAML errors), when a config
// file that must exist does not, when the config file is malformed or has an
// unknown key, when it gives both `token` and `token_file`, when a token file
// cannot be read or is empty, when the chosen CA file cannot be read or holds
// no PEM certificate, or when the chosen address is malformed.
Result<ClientConfig> ResolveClientConfig(const ClientFlags& flags, const EnvLookup& env);

// Reads a token file: its contents without leading and trailing whitespace.
// Fails when the file cannot be read or holds only whitespace.
Result<std::string> ReadTokenFile(const std::string& path);

}  // namespace gpupool
