// What an HTTP client error means, in words, for messages (cpp-httplib's
// own names are terse: "Connection"). Used by the CLI's API client and the
// server's etcd client.
#pragma once

#include <string>

#include <httplib.h>

namespace gpupool {

std::string DescribeHttpError(httplib::Error e);

}  // namespace gpupool
