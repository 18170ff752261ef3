// Counting the documents of a YAML stream without YAML::LoadAll.
//
// yaml-cpp 0.7 (Debian 12) loops for ever in LoadAll on some malformed
// input, a stream of just "," among them: its parser hands back the same
// broken document again and again without reading on (found by
// fuzz/job_file_fuzz.cc). This reads the stream's documents with a parser
// of its own, stops where a document starts no later than the one before
// it, and bounds the count.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include <yaml-cpp/yaml.h>

namespace gpupool {

struct YamlDocuments {
  size_t count = 0;                 // documents read, at most the limit given
  std::optional<YAML::Mark> second;  // where the second document's root node starts
  // Where the parser stopped making progress (the stream is malformed there).
  std::optional<YAML::Mark> stuck;
};

// Throws YAML::Exception as YAML::Load does. Reads at most `max_documents`.
YamlDocuments CountYamlDocuments(std::string_view text, size_t max_documents = 1024);

}  // namespace gpupool
