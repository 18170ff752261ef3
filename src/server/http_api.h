// The REST API over HTTP/1.1 (cpp-httplib's thread-pooled server), as
// described in docs/api/openapi.yaml. Handlers parse and authorize, then
// either read the read model (shared lock) or hand a command to the core
// and wait for it to be durable. No scheduling logic lives here.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "src/base/status.h"
#include "src/server/server_core.h"

namespace httplib {
class Server;
}

namespace gpupool {

class HttpApi {
 public:
  explicit HttpApi(ServerCore& core);
  ~HttpApi();

  // Binds host:port (port 0: any free port); returns the bound port.
  Result<int> Bind(const std::string& host, int port);
  // Serves until Stop (blocks).
  void Serve();
  // Stops Serve; safe from another thread before Serve has started (it
  // waits for the server to run, or for Serve to have returned).
  void Stop();

 private:
  void Routes();
  ServerCore& core_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<bool> served_{false};  // Serve has returned
};

}  // namespace gpupool
