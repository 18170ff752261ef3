#include "tests/server_process.h"

#include "tests/run_binary.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <httplib.h>

#include "src/base/http_client.h"

namespace gpupool::testing {
namespace {

std::string ReadFile(const std::string& path) { return ReadTextFile(path); }

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

ServerProcess::ServerProcess(std::string data_dir, std::vector<std::string> extra_args, std::string listen)
    : data_dir_(std::move(data_dir)), extra_args_(std::move(extra_args)), listen_(std::move(listen)) {}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) Kill();
}

bool ServerProcess::Start() {
  std::filesystem::create_directories(data_dir_);
  std::filesystem::remove(data_dir_ + "/server.url");
  // Beside the directory, not in it: a server refuses a directory that
  // holds files but no database.
  const std::string log = data_dir_ + ".server.log";
  pid_ = fork();
  if (pid_ == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(fd, 2);
    std::vector<std::string> args = {GPUPOOL_BINARY, "server", "--data", data_dir_, "--listen", listen_};
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    setenv("GPUPOOL_LOG_REQUESTS", "0", 1);
    execv(argv[0], argv.data());
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    const std::string url = Trim(ReadFile(data_dir_ + "/server.url"));
    if (!url.empty()) {
      url_ = url;
      if (Http(*this, "GET", "/healthz", "").status == 200) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Kill();
  return false;
}

void ServerProcess::Kill() { KillChild(pid_); }
int ServerProcess::Stop() { return StopChild(pid_); }

std::string ServerProcess::host() const {
  const std::string rest = url_.substr(url_.find("://") + 3);
  return rest.substr(0, rest.rfind(':'));
}

int ServerProcess::port() const { return std::stoi(url_.substr(url_.rfind(':') + 1)); }

std::string ServerProcess::admin_token() const { return Trim(ReadFile(data_dir_ + "/admin.token")); }

std::string ServerProcess::log() const { return ReadFile(data_dir_ + ".server.log"); }

HttpResult HttpRaw(const ServerProcess& s, const std::string& method, const std::string& path,
                   const std::string& token, const std::string& body) {
  if (s.url().starts_with("https://")) {
    // A certificate names no wildcard address: reach one on loopback.
    std::string url = s.url();
    if (const auto at = url.find("://0.0.0.0:"); at != std::string::npos) url.replace(at, 11, "://127.0.0.1:");
    return HttpAt(url, s.ca_cert(), method, path, token, body);
  }
  return HttpTo(s.host(), s.port(), method, path, token, body);
}

namespace {

HttpResult Send(httplib::Client& c, const std::string& method, const std::string& path, const std::string& token,
                const std::string& body) {
  c.set_connection_timeout(5);
  c.set_tcp_nodelay(true);
  c.set_read_timeout(30);
  httplib::Headers headers;
  if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
  auto send = [&]() -> httplib::Result {
    if (method == "GET") return c.Get(path, headers);
    if (method == "DELETE") return c.Delete(path, headers);
    if (method == "POST") return c.Post(path, headers, body, "application/json");
    return c.Put(path, headers, body, "application/json");
  };
  httplib::Result r = send();
  HttpResult out;
  if (!r) return out;
  out.status = r->status;
  out.text = r->body;
  out.retry_after = r->get_header_value("Retry-After");
  out.request_id = r->get_header_value("X-Request-Id");
  out.body = nlohmann::json::parse(r->body, nullptr, false);
  return out;
}

}  // namespace

HttpResult HttpTo(const std::string& host, int port, const std::string& method, const std::string& path,
                  const std::string& token, const std::string& body) {
  httplib::Client c(host, port);
  return Send(c, method, path, token, body);
}

HttpResult HttpAt(const std::string& url, const std::string& ca_cert, const std::string& method,
                  const std::string& path, const std::string& token, const std::string& body) {
  ClientTls tls;
  tls.ca_cert_file = ca_cert;
  auto c = NewHttpClient(url, tls);
  return Send(*c, method, path, token, body);
}

HttpResult Http(const ServerProcess& s, const std::string& method, const std::string& path, const std::string& token,
                const std::optional<nlohmann::json>& body) {
  return HttpRaw(s, method, path, token, body ? body->dump() : "");
}

}  // namespace gpupool::testing
