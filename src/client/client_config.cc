#include "src/client/client_config.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace gpupool {
namespace {

std::string Trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return "";
  const auto last = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(first, last - first + 1));
}

std::string Where(const std::string& file, const YAML::Mark& mark) {
  return file + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

// What the config file says; empty strings for keys it does not give.
struct ConfigFile {
  std::string addr;
  std::string token;
  std::string token_file;  // already made absolute against the file's folder
  std::string ca_cert;     // the same
};

Result<ConfigFile> ReadConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return IoError("cannot read config file " + path);
  std::stringstream text;
  text << in.rdbuf();
  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    return InvalidArgument(Where(path, e.mark) + ": " + e.msg);
  }
  ConfigFile out;
  if (!root || root.IsNull()) return out;  // an empty file sets nothing
  if (!root.IsMap())
    return InvalidArgument(Where(path, root.Mark()) + ": expected a map with keys addr, token, token_file, ca_cert");
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    const YAML::Node& value = kv.second;
    std::string* slot = key == "addr"         ? &out.addr
                        : key == "token"      ? &out.token
                        : key == "token_file" ? &out.token_file
                        : key == "ca_cert"    ? &out.ca_cert
                                              : nullptr;
    if (slot == nullptr) {
      return InvalidArgument(Where(path, kv.first.Mark()) + ": unknown key '" + key +
                             "' (expected addr, token, token_file, ca_cert)");
    }
    if (!value.IsScalar()) return InvalidArgument(Where(path, value.Mark()) + ": " + key + ": expected a string");
    *slot = Trim(value.Scalar());
  }
  if (!out.token.empty() && !out.token_file.empty()) {
    return InvalidArgument(path + ": give either token or token_file, not both");
  }
  for (std::string* file : {&out.token_file, &out.ca_cert}) {
    if (file->empty()) continue;
    std::filesystem::path p(*file);
    if (p.is_relative()) p = std::filesystem::path(path).parent_path() / p;
    *file = p.lexically_normal().string();
  }
  return out;
}

std::optional<std::string> NonEmpty(const EnvLookup& env, const std::string& name) {
  auto v = env(name);
  if (!v || v->empty()) return std::nullopt;
  return v;
}

}  // namespace

EnvLookup ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

std::string ServerAddress::Url() const {
  const bool v6 = host.find(':') != std::string::npos;
  return scheme + "://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<ServerAddress> ParseServerAddress(std::string_view source, std::string_view text) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument(std::string(source) + ": " + why + " in '" + std::string(text) +
                           "' (expected http://HOST:PORT or https://HOST:PORT)");
  };
  ServerAddress a;
  std::string_view rest = text;
  if (const auto sep = rest.find("://"); sep != std::string_view::npos) {
    a.scheme = std::string(rest.substr(0, sep));
    if (a.scheme != "http" && a.scheme != "https") return bad("unsupported scheme '" + a.scheme + "'");
    rest.remove_prefix(sep + 3);
  } else {
    a.scheme = "http";
    if (rest.find(':') == std::string_view::npos) return bad("no scheme and no port");
  }
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) return bad("a path is not supported");
  std::string_view port_text;
  if (!rest.empty() && rest.front() == '[') {
    const auto close = rest.find(']');
    if (close == std::string_view::npos) return bad("unclosed '['");
    a.host = std::string(rest.substr(1, close - 1));
    std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad("unexpected text after ']'");
      port_text = after.substr(1);
      if (port_text.empty()) return bad("empty port");
    }
  } else {
    const auto colon = rest.rfind(':');
    if (colon != std::string_view::npos) {
      if (rest.substr(0, colon).find(':') != std::string_view::npos) return bad("IPv6 hosts need [brackets]");
      a.host = std::string(rest.substr(0, colon));
      port_text = rest.substr(colon + 1);
      if (port_text.empty()) return bad("empty port");
    } else {
      a.host = std::string(rest);
    }
  }
  if (a.host.empty()) return bad("no host");
  if (a.host.find_first_of(" \t@?#") != std::string::npos) return bad("invalid host");
  if (port_text.empty()) {
    a.port = a.scheme == "https" ? 443 : 80;
  } else {
    int port = 0;
    for (char c : port_text) {
      if (c < '0' || c > '9' || port > 65535) return bad("invalid port '" + std::string(port_text) + "'");
      port = port * 10 + (c - '0');
    }
    if (port < 1 || port > 65535) return bad("invalid port '" + std::string(port_text) + "'");
    a.port = port;
  }
  return a;
}

Result<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return IoError("cannot read token file " + path);
  std::stringstream text;
  text << in.rdbuf();
  std::string token = Trim(text.str());
  if (token.empty()) return InvalidArgument("token file " + path + " is empty");
  return token;
}

Result<ClientConfig> ResolveClientConfig(const ClientFlags& flags, const EnvLookup& env) {
  ClientConfig out;

  // The config file: explicit ones must exist, the default one may not.
  std::string config_path;
  bool must_exist = true;
  if (!flags.config.empty()) {
    config_path = flags.config;
  } else if (auto v = NonEmpty(env, "GPUPOOL_CONFIG")) {
    config_path = *v;
  } else if (auto home = NonEmpty(env, "HOME")) {
    config_path = *home + "/.config/gpupool/config.yaml";
    must_exist = false;
  }
  ConfigFile file;
  if (!config_path.empty()) {
    std::error_code ec;
    const bool exists = std::filesystem::exists(config_path, ec);
    if (!exists && must_exist) return NotFound("config file " + config_path + " does not exist");
    if (exists) {
      GP_ASSIGN_OR_RETURN(auto read, ReadConfigFile(config_path));
      file = read;
      out.config_path = config_path;
    }
  }

  // Address.
  std::string addr_text;
  if (!flags.addr.empty()) {
    addr_text = flags.addr;
    out.addr_source = "--addr";
  } else if (auto v = NonEmpty(env, "GPUPOOL_ADDR")) {
    addr_text = *v;
    out.addr_source = "GPUPOOL_ADDR";
  } else if (!file.addr.empty()) {
    addr_text = file.addr;
    out.addr_source = "addr in " + config_path;
  } else {
    addr_text = std::string(kDefaultServerAddr);
    out.addr_source = "the default address";
  }
  GP_ASSIGN_OR_RETURN(auto addr, ParseServerAddress(out.addr_source, addr_text));
  out.addr = addr;

  // Token.
  if (!flags.token.empty() && !flags.token_file.empty()) {
    return InvalidArgument("give either --token or --token-file, not both");
  }
  if (!flags.token.empty()) {
    out.token = flags.token;
    out.token_source = "--token";
  } else if (!flags.token_file.empty()) {
    GP_ASSIGN_OR_RETURN(auto t, ReadTokenFile(flags.token_file));
    out.token = t;
    out.token_source = "--token-file " + flags.token_file;
  } else if (auto v = NonEmpty(env, "GPUPOOL_TOKEN")) {
    out.token = Trim(*v);
    out.token_source = "GPUPOOL_TOKEN";
  } else if (!file.token.empty()) {
    out.token = file.token;
    out.token_source = "token in " + config_path;
  } else if (!file.token_file.empty()) {
    auto t = ReadTokenFile(file.token_file);
    if (!t) return std::unexpected(Error{t.error().code, config_path + ": token_file: " + t.error().message});
    out.token = *t;
    out.token_source = "token_file " + file.token_file + " (from " + config_path + ")";
  }

  // The CA for https addresses.
  const std::string where_to_give = "give the CA with --ca-cert, GPUPOOL_CA_CERT or 'ca_cert:' in the config file";
  if (!flags.ca_cert.empty()) {
    out.tls.ca_cert_file = flags.ca_cert;
    out.tls.ca_given_as = "--ca-cert";
  } else if (auto v = NonEmpty(env, "GPUPOOL_CA_CERT")) {
    out.tls.ca_cert_file = *v;
    out.tls.ca_given_as = "GPUPOOL_CA_CERT";
  } else if (!file.ca_cert.empty()) {
    out.tls.ca_cert_file = file.ca_cert;
    out.tls.ca_given_as = "ca_cert (in " + config_path + ")";
  }
  out.tls.ca_hint = out.tls.ca_cert_file.empty()
                        ? "no CA was given, so the system's CAs were used: " + where_to_give
                        : "check " + out.tls.ca_given_as + " " + out.tls.ca_cert_file + "; " + where_to_give;
  GP_TRY(CheckClientTls(out.tls));
  return out;
}

}  // namespace gpupool
