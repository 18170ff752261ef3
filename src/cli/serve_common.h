// What `gpupool server` and `gpupool dev` share: the --listen flag, the
// stop signals, and DIR/server.url.
#pragma once

#include <signal.h>

#include <cstdint>
#include <string>
#include <utility>

#include "src/base/status.h"

namespace gpupool {

// "HOST:PORT" (port 0: any free port) -> host, port; the error quotes the flag.
Result<std::pair<std::string, int>> ParseListen(const std::string& listen);

// Blocks SIGINT and SIGTERM in the calling thread and the threads it starts
// afterwards; one thread then takes them with sigwait on the returned set.
sigset_t BlockStopSignals();

// Raises the soft limit on open files to the hard one (every connection is a
// descriptor: server.http.max_connections needs that many and more); returns
// the limit now in force.
int64_t RaiseOpenFileLimit();

// Writes URL to DIR/server.url (atomically), for tools and tests that started
// the server on port 0.
Status WriteServerUrl(const std::string& data_dir, const std::string& url);

}  // namespace gpupool
