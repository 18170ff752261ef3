// A TCP port on 127.0.0.1 that was free a moment ago (the kernel picked it
// for a socket bound to port 0, then closed), for tests that must name a
// port before a child process binds it. Another process may take it in
// between; tests that start servers on port 0 and read the port back are
// safer where they can.
#pragma once

namespace gpupool::testing {

int FreeLoopbackPort();

}  // namespace gpupool::testing
