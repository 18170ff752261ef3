// Request bodies of about `bytes` (the largest the server takes) shaped to
// cost the most once parsed, which the parser must take whole before a
// field reader refuses them: one long string, hundreds of thousands of tiny
// values, a wide object of short keys. Shared by ServerMemoryTest and the
// server load benchmark's hostile phase (bench/server_load).
#pragma once

#include <string>
#include <vector>

namespace gpupool::testing {

inline std::vector<std::string> HostileBodies(size_t bytes) {
  std::vector<std::string> out;
  out.push_back(R"({"name": ")" + std::string(bytes - 64, 'x') + R"(", "gpus": 1})");
  std::string values = R"({"name": "v", "env": {"A": "b"}, "command": [)";
  while (values.size() < bytes - 16) values += "1,";
  values += "1]}";
  out.push_back(values);
  std::string keys = R"({"name": "k", "labels": {)";
  for (int i = 0; keys.size() < bytes - 32; ++i) keys += "\"" + std::to_string(i) + "\":0,";
  keys += "\"end\":0}}";
  out.push_back(keys);
  return out;
}

}  // namespace gpupool::testing
