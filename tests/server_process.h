// A real `gpupool server` in a child process on loopback (port 0), for
// integration tests, and a small HTTP helper around cpp-httplib's client.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/server/testing/free_port.h"

namespace gpupool::testing {

class ServerProcess {
 public:
  // Starts the server on `data_dir` (created if missing) and waits until it
  // answers /healthz (or fails the calling test via the returned false).
  // `listen` is HOST:PORT (port 0: any free port, a new one at each start).
  explicit ServerProcess(std::string data_dir, std::vector<std::string> extra_args = {},
                         std::string listen = "127.0.0.1:0");
  ~ServerProcess();

  bool Start();
  // Talk to an https server (--tls-cert among the extra args) trusting this
  // CA, in Start's wait and in Http/HttpRaw; before Start.
  void set_ca_cert(std::string path) { ca_cert_ = std::move(path); }
  const std::string& ca_cert() const { return ca_cert_; }
  void Kill();  // SIGKILL, then reap
  // SIGTERM and wait; returns the exit code.
  int Stop();
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }  // for SIGSTOP / SIGCONT

  const std::string& url() const { return url_; }
  std::string host() const;
  int port() const;
  const std::string& data_dir() const { return data_dir_; }
  std::string admin_token() const;
  std::string log() const;  // stderr so far (kept in DATA_DIR.server.log)

 private:
  std::string data_dir_;
  std::vector<std::string> extra_args_;
  std::string listen_;
  pid_t pid_ = -1;
  std::string url_;
  std::string ca_cert_;
};

struct HttpResult {
  int status = 0;  // 0: no response (connection failed)
  nlohmann::json body;
  std::string text;
  std::string retry_after;  // the Retry-After header, when there is one
  std::string request_id;   // the X-Request-Id header
};

// One request; `token` empty sends no Authorization header.
// A port that was free a moment ago on 127.0.0.1 (free_port.h).
inline int FreePort() { return FreeLoopbackPort(); }

HttpResult Http(const ServerProcess& s, const std::string& method, const std::string& path, const std::string& token,
                const std::optional<nlohmann::json>& body = std::nullopt);
// The same to a host and port (threads that outlive a restart).
HttpResult HttpTo(const std::string& host, int port, const std::string& method, const std::string& path,
                  const std::string& token, const std::string& body);
// The same to a URL (http:// or https://, trusting `ca_cert` when not empty).
HttpResult HttpAt(const std::string& url, const std::string& ca_cert, const std::string& method,
                  const std::string& path, const std::string& token, const std::string& body);
// The same with a raw body text (malformed JSON tests).
HttpResult HttpRaw(const ServerProcess& s, const std::string& method, const std::string& path,
                   const std::string& token, const std::string& body);

}  // namespace gpupool::testing
