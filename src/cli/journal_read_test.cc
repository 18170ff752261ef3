#include "src/cli/journal_read.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>

namespace gpupool {
namespace {

// A server whose /v1/export answers the pages given, by `since`.
class FakeExport {
 public:
  explicit FakeExport(std::map<std::string, std::string> pages) : pages_(std::move(pages)) {
    server_.Get("/v1/export", [this](const httplib::Request& req, httplib::Response& res) {
      auto it = pages_.find(req.get_param_value("since"));
      if (it == pages_.end()) {
        res.status = 500;
        return;
      }
      res.set_content(it->second, "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeExport() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  std::map<std::string, std::string> pages_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

const char* kTenant1 = R"({"at":0,"name":"a","seq":1,"tenant":0,"type":"TenantAdded"})";
const char* kTenant2 = R"({"at":0,"name":"b","seq":2,"tenant":1,"type":"TenantAdded"})";
const char* kTenant4 = R"({"at":0,"name":"d","seq":4,"tenant":3,"type":"TenantAdded"})";

TEST(JournalReadTest, PagesAreReadToTheLastEventTheFirstPageNamed) {
  FakeExport server({{"0", std::string(R"({"format":1,"last_seq":2,"configs":[],"events":[)") + kTenant1 +
                               R"(],"next_since":1})"},
                     {"1", std::string(R"({"format":1,"last_seq":3,"events":[)") + kTenant2 + R"(],"next_since":2})"}});
  ClientFlags flags;
  flags.token = "gpa_test";
  auto r = ReadServerExport(server.url(), flags);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  ASSERT_EQ(r->events.size(), 2u) << "stops at the first page's last_seq";
}

TEST(JournalReadTest, AGapInTheEventsIsATruncatedExport) {
  FakeExport server({{"0", std::string(R"({"format":1,"last_seq":4,"configs":[],"events":[)") + kTenant1 + "," +
                               kTenant4 + R"(],"next_since":4})"}});
  auto r = ReadServerExport(server.url(), ClientFlags{.token = "gpa_test"});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("event 4 where 2 was expected (a truncated or damaged export)"), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find(server.url() + "/v1/export (the page after event 0)"), std::string::npos);
}

TEST(JournalReadTest, AnEmptyPageBeforeTheEndIsATruncatedExport) {
  FakeExport server({{"0", std::string(R"({"format":1,"last_seq":9,"configs":[],"events":[)") + kTenant1 +
                               R"(],"next_since":1})"},
                     {"1", R"({"format":1,"last_seq":9,"events":[],"next_since":1})"}});
  auto r = ReadServerExport(server.url(), ClientFlags{.token = "gpa_test"});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("a truncated export"), std::string::npos) << r.error().message;
}

TEST(JournalReadTest, AnExportOfANewerFormatIsNamed) {
  FakeExport server(std::map<std::string, std::string>{{"0", R"({"format":2,"last_seq":0,"events":[],"next_since":0})"}});
  auto r = ReadServerExport(server.url(), ClientFlags{.token = "gpa_test"});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("export format 2; this release reads 1"), std::string::npos) << r.error().message;
}

TEST(JournalReadTest, UrlsAreToldFromDirectories) {
  EXPECT_TRUE(IsServerUrl("http://127.0.0.1:7070"));
  EXPECT_TRUE(IsServerUrl("https://pool.example"));
  EXPECT_FALSE(IsServerUrl("/var/lib/gpupool"));
  EXPECT_FALSE(IsServerUrl("httpdata"));
}

}  // namespace
}  // namespace gpupool
