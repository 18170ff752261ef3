// ResolveImage (oci_runtime.h): what a job's `image` is on this node.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "src/agent/oci_runtime.h"
#include "src/base/sha256.h"
#include "src/base/subprocess.h"

namespace gpupool {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr auto kUnpackTimeout = std::chrono::minutes(10);
constexpr size_t kMaxLayers = 256;

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return json();
  return json::parse(in, nullptr, false);
}

bool IsDir(const std::string& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

// "sha256:abc..." -> LAYOUT/blobs/sha256/abc...
Result<std::string> BlobPath(const std::string& layout, const json& descriptor, const std::string& what) {
  if (!descriptor.is_object() || !descriptor.contains("digest") || !descriptor["digest"].is_string()) {
    return InvalidArgument("image: " + layout + ": " + what + " has no digest");
  }
  const std::string digest = descriptor["digest"].get<std::string>();
  const size_t colon = digest.find(':');
  if (colon == std::string::npos || digest.find('/') != std::string::npos || digest.find("..") != std::string::npos) {
    return InvalidArgument("image: " + layout + ": bad digest '" + digest + "'");
  }
  const std::string path = layout + "/blobs/" + digest.substr(0, colon) + "/" + digest.substr(colon + 1);
  if (!fs::exists(path)) return InvalidArgument("image: " + layout + ": blob " + digest + " is missing");
  return path;
}

// The manifest of `ref` (or the only one) in an OCI image layout.
Result<json> FindManifest(const std::string& layout, const std::string& ref) {
  json index = ReadJson(layout + "/index.json");
  for (int depth = 0; depth < 4; ++depth) {
    if (!index.is_object() || !index.contains("manifests") || !index["manifests"].is_array()) {
      return InvalidArgument("image: " + layout + ": index.json has no manifests");
    }
    const json& list = index["manifests"];
    const json* chosen = nullptr;
    std::string refs;
    for (const json& m : list) {
      const std::string name = m.is_object() && m.contains("annotations") && m["annotations"].is_object()
                                   ? m["annotations"].value("org.opencontainers.image.ref.name", "")
                                   : "";
      refs += (refs.empty() ? "" : ", ") + (name.empty() ? std::string("(unnamed)") : name);
      if (!ref.empty() && name == ref) chosen = &m;
    }
    if (ref.empty() && list.size() == 1) chosen = &list[0];
    if (depth > 0 && !chosen && !list.empty()) chosen = &list[0];  // a nested index: its first platform
    if (!chosen) {
      return InvalidArgument("image: " + layout + (ref.empty() ? " holds several images; name one as PATH:REF"
                                                               : " has no image '" + ref + "'") +
                             " (it has: " + refs + ")");
    }
    GP_ASSIGN_OR_RETURN(auto blob, BlobPath(layout, *chosen, "the manifest"));
    json m = ReadJson(blob);
    if (m.is_object() && m.contains("layers")) return m;
    index = std::move(m);  // an image index: look inside
  }
  return InvalidArgument("image: " + layout + ": no manifest with layers");
}

// Applies the whiteouts a layer brought (.wh.NAME deletes NAME; the opaque
// marker .wh..wh..opq was handled before extraction) and removes them.
void ApplyWhiteouts(const std::string& rootfs, const std::vector<std::string>& entries) {
  std::error_code ec;
  for (const std::string& e : entries) {
    const fs::path p(e);
    const std::string name = p.filename().string();
    if (name.rfind(".wh.", 0) != 0) continue;
    if (name != ".wh..wh..opq") fs::remove_all(fs::path(rootfs) / p.parent_path() / name.substr(4), ec);
    fs::remove(fs::path(rootfs) / p, ec);
  }
}

Result<std::vector<std::string>> ListLayer(const std::string& blob) {
  // tar prints names one per line; only the last lines are kept by
  // RunProgram, so list into a file.
  const std::string list = blob + ".list.tmp";
  const CommandOutcome o = RunProgram({"/bin/sh", "-c", "tar -tf \"$0\" > \"$1\"", blob, list}, {}, kUnpackTimeout);
  if (!o.ok) return InvalidArgument("image: cannot read layer " + blob + ": tar " + o.Describe());
  std::vector<std::string> entries;
  std::ifstream in(list);
  for (std::string line; std::getline(in, line);) entries.push_back(line);
  std::error_code ec;
  fs::remove(list, ec);
  return entries;
}

Status UnpackLayer(const std::string& blob, const std::string& rootfs) {
  GP_ASSIGN_OR_RETURN(auto entries, ListLayer(blob));
  std::error_code ec;
  for (const std::string& e : entries) {
    const fs::path p(e);
    if (p.filename() != ".wh..wh..opq") continue;
    for (const auto& child : fs::directory_iterator(fs::path(rootfs) / p.parent_path(), ec)) {
      fs::remove_all(child.path(), ec);
    }
  }
  const CommandOutcome o =
      RunProgram({"/bin/tar", "-xf", blob, "-C", rootfs, "--numeric-owner"}, {}, kUnpackTimeout);
  if (!o.ok) return InvalidArgument("image: cannot unpack layer " + blob + ": tar " + o.Describe());
  ApplyWhiteouts(rootfs, entries);
  return {};
}

// Unpacks an OCI image layout once into WORK/images/<hash of its manifest>.
Result<std::string> UnpackLayout(const std::string& layout, const std::string& ref, const std::string& work_dir) {
  GP_ASSIGN_OR_RETURN(auto manifest, FindManifest(layout, ref));
  const json& layers = manifest["layers"];
  if (!layers.is_array() || layers.size() > kMaxLayers) {
    return InvalidArgument("image: " + layout + ": the manifest's layers are not a list of at most " +
                           std::to_string(kMaxLayers));
  }
  Sha256 hash;
  hash.Update(manifest.dump());
  const std::string key = hash.HexDigest().substr(0, 24);
  const std::string dir = work_dir + "/images/" + key;
  if (fs::exists(dir + "/done")) return dir + "/rootfs";
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir + "/rootfs", ec);
  if (ec) return IoError("image: " + dir + ": " + ec.message());
  ::chmod(dir.c_str(), 0755);
  ::chmod((dir + "/rootfs").c_str(), 0755);
  for (const json& layer : layers) {
    GP_ASSIGN_OR_RETURN(auto blob, BlobPath(layout, layer, "a layer"));
    GP_TRY(UnpackLayer(blob, dir + "/rootfs"));
  }
  std::ofstream(dir + "/done") << layout << (ref.empty() ? "" : ":" + ref) << "\n";
  return dir + "/rootfs";
}

}  // namespace

Result<ResolvedImage> ResolveImage(const std::string& image, const std::string& work_dir) {
  // An order from a server of an earlier release names no image: the host's.
  if (image.empty() || image == "host") return ResolvedImage{true, ""};
  if (image[0] != '/') return InvalidArgument("image: expected \"host\" or an absolute path (got '" + image + "')");
  std::string path = image, ref;
  const size_t colon = image.rfind(':');
  if (colon != std::string::npos && colon > image.rfind('/') && !fs::exists(image)) {
    path = image.substr(0, colon);
    ref = image.substr(colon + 1);
  }
  if (!fs::exists(path)) {
    return InvalidArgument("image: " + path + " is not on this node (images are pre-loaded on each node; see "
                           "docs/agent.md)");
  }
  if (!IsDir(path)) return InvalidArgument("image: " + path + " is not a directory");
  if (fs::exists(path + "/oci-layout")) {
    GP_ASSIGN_OR_RETURN(auto rootfs, UnpackLayout(path, ref, work_dir));
    return ResolvedImage{false, rootfs};
  }
  if (IsDir(path + "/rootfs")) return ResolvedImage{false, path + "/rootfs"};
  if (IsDir(path + "/bin") || IsDir(path + "/usr")) return ResolvedImage{false, path};
  return InvalidArgument("image: " + path +
                         " is not an image: no oci-layout file (an OCI image layout), no rootfs/ (an unpacked "
                         "bundle) and no bin/ or usr/ (a root file system)");
}

}  // namespace gpupool
