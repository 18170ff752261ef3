#include "src/base/yaml_documents.h"

#include <sstream>
#include <string>

#include <yaml-cpp/eventhandler.h>

namespace gpupool {
namespace {

// Notes where each document starts, and where its root node does.
class DocumentStarts : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    last = root = mark;
    root_seen = false;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override { Root(m); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { Root(m); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t, const std::string&) override { Root(m); }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    Root(m);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    Root(m);
  }
  void OnMapEnd() override {}
  YAML::Mark last = YAML::Mark::null_mark(), root = YAML::Mark::null_mark();

 private:
  void Root(const YAML::Mark& m) {
    if (!root_seen) root = m;
    root_seen = true;
  }
  bool root_seen = false;
};

}  // namespace

YamlDocuments CountYamlDocuments(std::string_view text, size_t max_documents) {
  YamlDocuments out;
  std::istringstream in{std::string(text)};
  YAML::Parser parser(in);
  DocumentStarts starts;
  int previous_pos = -1;
  while (out.count < max_documents && parser.HandleNextDocument(starts)) {
    if (starts.last.pos <= previous_pos) {
      out.stuck = starts.last;
      break;
    }
    previous_pos = starts.last.pos;
    if (++out.count == 2) out.second = starts.root;
  }
  return out;
}

}  // namespace gpupool
