#include "src/server/console.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace gpupool {
namespace {

namespace fs = std::filesystem;

http::Request Get(std::string file = "", std::string if_none_match = "") {
  http::Request req;
  req.method = "GET";
  req.path = file.empty() ? "/" : "/console/" + file;
  if (!file.empty()) req.captures.push_back(file);
  if (!if_none_match.empty()) req.headers.emplace_back("If-None-Match", if_none_match);
  return req;
}

http::Response Serve(const http::Request& req) {
  http::Response res;
  ServeConsole(req, res);
  return res;
}

std::string HeaderOf(const http::Response& res, std::string_view name) {
  for (const auto& [k, v] : res.headers) {
    if (k == name) return v;
  }
  return "";
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const ConsoleAsset& AssetNamed(std::string_view name) {
  for (const ConsoleAsset& a : ConsoleAssets()) {
    if (a.name == name) return a;
  }
  ADD_FAILURE() << "no embedded " << name;
  return ConsoleAssets().front();
}

const fs::path kConsoleDir = fs::path(GPUPOOL_SOURCE_DIR) / "src/server/console";

TEST(ConsoleTest, EveryFileUnderTheConsoleDirectoryIsEmbeddedByteForByteSortedByName) {
  std::vector<std::string> on_disk;
  for (const auto& e : fs::directory_iterator(kConsoleDir)) on_disk.push_back(e.path().filename().string());
  std::sort(on_disk.begin(), on_disk.end());
  std::vector<std::string> embedded;
  for (const ConsoleAsset& a : ConsoleAssets()) embedded.emplace_back(a.name);
  EXPECT_EQ(embedded, on_disk);
  for (const ConsoleAsset& a : ConsoleAssets()) {
    EXPECT_EQ(a.bytes, ReadFile(kConsoleDir / std::string(a.name))) << a.name;
  }
}

TEST(ConsoleTest, EachFileHasTheContentTypeOfItsExtensionAndAQuotedSixteenDigitEtag) {
  const std::regex etag("^\"[0-9a-f]{16}\"$");
  for (const ConsoleAsset& a : ConsoleAssets()) {
    const std::string name(a.name);
    EXPECT_TRUE(std::regex_match(std::string(a.etag), etag)) << name << ": " << a.etag;
    const std::string ext = fs::path(name).extension().string();
    const std::string want = ext == ".html" ? "text/html; charset=utf-8"
                             : ext == ".js"  ? "text/javascript; charset=utf-8"
                             : ext == ".css" ? "text/css; charset=utf-8"
                             : ext == ".svg" ? "image/svg+xml"
                                             : "image/png";
    EXPECT_EQ(a.content_type, want) << name;
  }
}

TEST(ConsoleTest, RootAnswersIndexHtmlWithTheSecurityAndCacheHeaders) {
  const http::Response res = Serve(Get());
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.content_type, "text/html; charset=utf-8");
  EXPECT_EQ(res.body, AssetNamed("index.html").bytes);
  EXPECT_EQ(HeaderOf(res, "Content-Security-Policy"), kConsoleCsp);
  EXPECT_EQ(HeaderOf(res, "X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(HeaderOf(res, "Referrer-Policy"), "no-referrer");
  EXPECT_EQ(HeaderOf(res, "X-Frame-Options"), "DENY");
  EXPECT_EQ(HeaderOf(res, "Cache-Control"), "no-cache");
  EXPECT_EQ(HeaderOf(res, "ETag"), AssetNamed("index.html").etag);
}

TEST(ConsoleTest, ThePolicyAllowsThisOriginOnlyAndNothingInline) {
  EXPECT_NE(kConsoleCsp.find("default-src 'self'"), std::string_view::npos);
  EXPECT_NE(kConsoleCsp.find("script-src 'self'"), std::string_view::npos);
  EXPECT_NE(kConsoleCsp.find("frame-ancestors 'none'"), std::string_view::npos);
  EXPECT_EQ(kConsoleCsp.find("unsafe"), std::string_view::npos);
  // So the page must not need inline script or style: index.html loads its script and stylesheet by URL.
  const std::string html(AssetNamed("index.html").bytes);
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_EQ(html.find("style="), std::string::npos);
  EXPECT_EQ(html.find("<style"), std::string::npos);
  EXPECT_NE(html.find("<script type=\"module\" src=\"/console/app.js\">"), std::string::npos);
}

TEST(ConsoleTest, AFileByNameWithItsType) {
  const http::Response res = Serve(Get("app.js"));
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(res.body, AssetNamed("app.js").bytes);
  EXPECT_EQ(HeaderOf(res, "ETag"), AssetNamed("app.js").etag);
}

TEST(ConsoleTest, AMatchingEtagIsNotModifiedWithNoBody) {
  const std::string etag(AssetNamed("app.js").etag);
  for (const std::string& header : {etag, "W/" + etag, "\"0000000000000000\", " + etag, etag + ",\"x\"", std::string("*")}) {
    const http::Response res = Serve(Get("app.js", header));
    EXPECT_EQ(res.status, 304) << header;
    EXPECT_TRUE(res.body.empty()) << header;
    EXPECT_EQ(HeaderOf(res, "ETag"), etag) << header;
    EXPECT_EQ(HeaderOf(res, "Content-Security-Policy"), kConsoleCsp) << header;
  }
}

TEST(ConsoleTest, AnotherFilesEtagOrAPartOfOneIsAFullAnswer) {
  const std::string etag(AssetNamed("app.js").etag);
  const std::string inner = etag.substr(1, etag.size() - 2);  // without its quotes: not the same tag
  for (const std::string& header : {std::string(AssetNamed("api.js").etag), inner, "x" + etag, etag + "x"}) {
    const http::Response res = Serve(Get("app.js", header));
    EXPECT_EQ(res.status, 200) << header;
    EXPECT_EQ(res.body, AssetNamed("app.js").bytes) << header;
  }
}

TEST(ConsoleTest, AnUnknownNameIsNotFoundAsTheApisJsonErrorNamingIt) {
  for (const std::string name : {"no-such.js", "index.htm", "..", "APP.JS"}) {
    const http::Response res = Serve(Get(name));
    EXPECT_EQ(res.status, 404) << name;
    EXPECT_EQ(res.content_type, "application/json");
    const auto j = nlohmann::json::parse(res.body);
    EXPECT_EQ(j["error"]["code"], "not_found");
    EXPECT_EQ(j["error"]["message"], "no console file '" + name + "'");
    EXPECT_EQ(HeaderOf(res, "Content-Security-Policy"), kConsoleCsp);
    EXPECT_EQ(HeaderOf(res, "ETag"), "");
  }
}

TEST(ConsoleTest, ANotFoundMessageQuotesAtMost64CharactersOfTheName) {
  const std::string name(500, 'a');
  const auto j = nlohmann::json::parse(Serve(Get(name)).body);
  EXPECT_EQ(j["error"]["message"], "no console file '" + std::string(64, 'a') + "'");
}

}  // namespace
}  // namespace gpupool
