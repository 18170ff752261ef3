#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "src/agent/oci_runtime.h"
#include "src/base/sha256.h"
#include "src/base/subprocess.h"

namespace gpupool {
namespace {

namespace fs = std::filesystem;

class OciImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("gpupool-image-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::create_directories(dir_ + "/work");
  }
  void TearDown() override { fs::remove_all(dir_); }

  static void Write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << text;
  }
  // Stores `file` as a blob of `layout`; its digest.
  static std::string Blob(const std::string& layout, const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Sha256 h;
    h.Update(bytes);
    const std::string hex = h.HexDigest();
    Write(layout + "/blobs/sha256/" + hex, bytes);
    return "sha256:" + hex;
  }
  // A layer tarball of directory `tree`.
  std::string Layer(const std::string& layout, const std::string& tree) {
    const std::string tar = dir_ + "/layer.tar";
    const CommandOutcome o = RunProgram({"/bin/tar", "-cf", tar, "-C", tree, "."}, {}, std::chrono::seconds(30));
    EXPECT_TRUE(o.ok) << o.Describe();
    return Blob(layout, tar);
  }
  // An OCI image layout with the given layer digests, named `ref`.
  void Layout(const std::string& layout, const std::vector<std::string>& layers, const std::string& ref) {
    std::string list;
    for (const std::string& l : layers) {
      list += (list.empty() ? "" : ",") + std::string(R"({"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":")") +
              l + R"(","size":1})";
    }
    Write(dir_ + "/manifest.json", R"({"schemaVersion":2,"layers":[)" + list + "]}");
    const std::string manifest = Blob(layout, dir_ + "/manifest.json");
    Write(layout + "/oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
    Write(layout + "/index.json", R"({"schemaVersion":2,"manifests":[{"digest":")" + manifest +
                                      R"(","size":1,"annotations":{"org.opencontainers.image.ref.name":")" + ref +
                                      R"("}}]})");
  }

  std::string dir_;
};

TEST_F(OciImageTest, HostAndEmptyMeanTheNodesOwnSystem) {
  for (const char* image : {"host", ""}) {
    auto r = ResolveImage(image, dir_ + "/work");
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->host);
  }
}

TEST_F(OciImageTest, BadImagesAreRefusedNamingTheField) {
  Write(dir_ + "/plain-file", "x");
  fs::create_directories(dir_ + "/empty-dir");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"pytorch:latest", "absolute path"},
      {dir_ + "/missing", "is not on this node"},
      {dir_ + "/plain-file", "is not a directory"},
      {dir_ + "/empty-dir", "is not an image"},
  };
  for (const auto& [image, words] : cases) {
    auto r = ResolveImage(image, dir_ + "/work");
    ASSERT_FALSE(r) << image;
    EXPECT_EQ(r.error().message.rfind("image: ", 0), 0u) << r.error().message;
    EXPECT_NE(r.error().message.find(words), std::string::npos) << r.error().message;
  }
}

TEST_F(OciImageTest, AnUnpackedRootfsOrBundleIsUsedInPlace) {
  fs::create_directories(dir_ + "/rootfs-image/usr/bin");
  fs::create_directories(dir_ + "/bundle-image/rootfs/bin");
  auto a = ResolveImage(dir_ + "/rootfs-image", dir_ + "/work");
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_FALSE(a->host);
  EXPECT_EQ(a->rootfs, dir_ + "/rootfs-image");
  auto b = ResolveImage(dir_ + "/bundle-image", dir_ + "/work");
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(b->rootfs, dir_ + "/bundle-image/rootfs");
}

TEST_F(OciImageTest, AnOciLayoutIsUnpackedOnceWithItsWhiteouts) {
  const std::string layout = dir_ + "/layout";
  Write(dir_ + "/l1/etc/kept", "base");
  Write(dir_ + "/l1/etc/removed", "gone later");
  Write(dir_ + "/l1/opt/old/file", "replaced dir");
  Write(dir_ + "/l2/etc/.wh.removed", "");
  Write(dir_ + "/l2/opt/old/.wh..wh..opq", "");
  Write(dir_ + "/l2/opt/old/new", "upper");
  const std::string l1 = Layer(layout, dir_ + "/l1");
  const std::string l2 = Layer(layout, dir_ + "/l2");
  Layout(layout, {l1, l2}, "v1");
  auto r = ResolveImage(layout, dir_ + "/work");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->host);
  EXPECT_TRUE(fs::exists(r->rootfs + "/etc/kept"));
  EXPECT_FALSE(fs::exists(r->rootfs + "/etc/removed"));
  EXPECT_FALSE(fs::exists(r->rootfs + "/etc/.wh.removed"));
  EXPECT_FALSE(fs::exists(r->rootfs + "/opt/old/file"));
  EXPECT_FALSE(fs::exists(r->rootfs + "/opt/old/.wh..wh..opq"));
  EXPECT_TRUE(fs::exists(r->rootfs + "/opt/old/new"));
  // By reference too, and the second resolve reuses the unpacked tree.
  auto again = ResolveImage(layout + ":v1", dir_ + "/work");
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->rootfs, r->rootfs);
  auto missing = ResolveImage(layout + ":v2", dir_ + "/work");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("has no image 'v2' (it has: v1)"), std::string::npos)
      << missing.error().message;
}

TEST_F(OciImageTest, ALayoutWithAMissingBlobOrABadDigestIsRefused) {
  const std::string layout = dir_ + "/layout";
  Write(dir_ + "/l1/etc/x", "x");
  const std::string l1 = Layer(layout, dir_ + "/l1");
  fs::remove(layout + "/blobs/sha256/" + l1.substr(7));
  Layout(layout, {l1}, "v1");
  auto r = ResolveImage(layout, dir_ + "/work");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("is missing"), std::string::npos) << r.error().message;

  Layout(layout, {"sha256:../../../etc/passwd"}, "v1");
  r = ResolveImage(layout, dir_ + "/work");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("bad digest"), std::string::npos) << r.error().message;

  Write(layout + "/index.json", "{not json");
  r = ResolveImage(layout, dir_ + "/work");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("index.json has no manifests"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace gpupool
