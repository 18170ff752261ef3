#include "tests/http_fuzz_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpupool::testing {
namespace {

constexpr size_t kMaxHeaderBytes = 64 * 1024;       // an answer's status line and headers
constexpr size_t kMaxBodyBytes = size_t{128} << 20;  // an answer's body
constexpr size_t kReadBlock = 64 * 1024;

bool SameNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ::strncasecmp(a.data(), b.data(), a.size()) == 0;
}

int MsUntil(RawConnection::Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - RawConnection::Clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left.count(), 60000));
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// A decimal or hexadecimal count of at most 15 digits; false otherwise.
bool ParseCount(std::string_view s, int base, size_t* out) {
  if (s.empty() || s.size() > 15) return false;
  size_t n = 0;
  for (char c : s) {
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if (base == 16 && c >= 'a' && c <= 'f') d = c - 'a' + 10;
    if (base == 16 && c >= 'A' && c <= 'F') d = c - 'A' + 10;
    if (d < 0) return false;
    n = n * static_cast<size_t>(base) + static_cast<size_t>(d);
  }
  *out = n;
  return true;
}

// Parses "HTTP/1.x NNN reason" and the header lines; false when malformed.
bool ParseHead(std::string_view head, RawAnswer& a) {
  const size_t eol = head.find("\r\n");
  const std::string_view line = head.substr(0, eol);
  if (line.size() < 12 || !line.starts_with("HTTP/1.") || line[8] != ' ') return false;
  size_t status = 0;
  if (!ParseCount(line.substr(9, 3), 10, &status) || (line.size() > 12 && line[12] != ' ')) return false;
  a.status = static_cast<int>(status);
  a.headers.clear();
  size_t at = eol == std::string_view::npos ? head.size() : eol + 2;
  while (at < head.size()) {
    size_t end = head.find("\r\n", at);
    if (end == std::string_view::npos) end = head.size();
    const std::string_view h = head.substr(at, end - at);
    at = end + 2;
    if (h.empty()) continue;
    const size_t colon = h.find(':');
    if (colon == std::string_view::npos || colon == 0) return false;
    a.headers.emplace_back(std::string(h.substr(0, colon)), std::string(Trim(h.substr(colon + 1))));
  }
  return true;
}

}  // namespace

std::string_view RawAnswer::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (SameNoCase(k, name)) return v;
  }
  return {};
}

bool RawAnswer::Has(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (SameNoCase(k, name)) return true;
  }
  return false;
}

bool RawAnswer::Closes() const { return outcome != Outcome::kAnswered || SameNoCase(Header("Connection"), "close"); }

const char* OutcomeName(RawAnswer::Outcome o) {
  switch (o) {
    case RawAnswer::Outcome::kAnswered: return "answered";
    case RawAnswer::Outcome::kClosed: return "closed without an answer";
    case RawAnswer::Outcome::kTimeout: return "no answer within the deadline";
    case RawAnswer::Outcome::kConnectFailed: return "connection failed";
    case RawAnswer::Outcome::kMalformed: return "malformed answer";
  }
  return "?";
}

RawConnection::RawConnection(std::string host, int port) : host_(std::move(host)), port_(port) {}

RawConnection::~RawConnection() { Close(); }

void RawConnection::Close() {
  if (fd_ < 0) return;
  // Abortive: an RST instead of a FIN leaves no TIME_WAIT on this side.
  linger l{1, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  ::close(fd_);
  fd_ = -1;
  eof_ = false;
  in_.clear();
}

bool RawConnection::Connect(Clock::time_point deadline, std::string* detail) {
  if (fd_ >= 0) return true;
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) {
    *detail = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  int yes = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port_));
  if (::inet_pton(AF_INET, host_.c_str(), &to.sin_addr) != 1) {
    *detail = "not an IPv4 address: " + host_;
    Close();
    return false;
  }
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0 && errno != EINPROGRESS) {
    *detail = std::string("connect: ") + std::strerror(errno);
    Close();
    return false;
  }
  pollfd p{fd_, POLLOUT, 0};
  if (::poll(&p, 1, MsUntil(deadline)) != 1) {
    *detail = "connect: no answer before the deadline";
    Close();
    return false;
  }
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    *detail = std::string("connect: ") + std::strerror(err);
    Close();
    return false;
  }
  return true;
}

bool RawConnection::Send(std::string_view bytes, Clock::time_point deadline) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    pollfd p{fd_, POLLOUT | POLLIN, 0};
    if (::poll(&p, 1, MsUntil(deadline)) != 1) return false;
    // Not writable but readable: the server answered (or closed) before
    // taking everything, as it may for a body it refuses on its length.
    if (!(p.revents & POLLOUT)) return false;
    const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

bool RawConnection::Readable() {
  if (!in_.empty() || eof_) return true;
  pollfd p{fd_, POLLIN, 0};
  return fd_ >= 0 && ::poll(&p, 1, 0) == 1;
}

void RawConnection::HalfClose() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

bool RawConnection::Fill(size_t need, Clock::time_point deadline, RawAnswer::Outcome* why) {
  while (in_.size() < need) {
    if (eof_) {
      *why = RawAnswer::Outcome::kClosed;
      return false;
    }
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, MsUntil(deadline));
    if (ready == 0) {
      *why = RawAnswer::Outcome::kTimeout;
      return false;
    }
    if (ready < 0 && errno == EINTR) continue;
    char buf[kReadBlock];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) {
      eof_ = true;  // an end or a reset: nothing more will come
      continue;
    }
    in_.append(buf, static_cast<size_t>(n));
  }
  return true;
}

bool RawConnection::FillUntil(std::string_view marker, size_t limit, Clock::time_point deadline, size_t* at,
                              RawAnswer::Outcome* why) {
  size_t from = 0;
  while (true) {
    const size_t found = in_.find(marker, from);
    if (found != std::string::npos) {
      *at = found;
      return true;
    }
    if (in_.size() > limit) {
      *why = RawAnswer::Outcome::kMalformed;
      return false;
    }
    from = in_.size() >= marker.size() ? in_.size() - marker.size() + 1 : 0;
    if (!Fill(in_.size() + 1, deadline, why)) return false;
  }
}

bool RawConnection::ReadChunked(RawAnswer& a, Clock::time_point deadline) {
  RawAnswer::Outcome why = RawAnswer::Outcome::kClosed;
  while (true) {
    size_t eol = 0;
    if (!FillUntil("\r\n", 1024, deadline, &eol, &why)) {
      a.outcome = why;
      return false;
    }
    std::string_view size_text = std::string_view(in_).substr(0, eol);
    size_text = size_text.substr(0, size_text.find(';'));
    size_t size = 0;
    if (!ParseCount(Trim(size_text), 16, &size) || a.body.size() + size > kMaxBodyBytes) {
      a.outcome = RawAnswer::Outcome::kMalformed;
      a.detail = "bad chunk size";
      return false;
    }
    in_.erase(0, eol + 2);
    if (size == 0) {  // the last chunk, then trailers up to an empty line
      size_t end = 0;
      const bool no_trailers = in_.starts_with("\r\n") || (Fill(2, deadline, &why) && in_.starts_with("\r\n"));
      if (no_trailers) {
        in_.erase(0, 2);
        return true;
      }
      if (!FillUntil("\r\n\r\n", kMaxHeaderBytes, deadline, &end, &why)) {
        a.outcome = why;
        return false;
      }
      in_.erase(0, end + 4);
      return true;
    }
    if (!Fill(size + 2, deadline, &why)) {
      a.outcome = why;
      return false;
    }
    a.body.append(in_, 0, size);
    in_.erase(0, size + 2);
  }
}

RawAnswer RawConnection::ReadOne(bool head, Clock::time_point deadline) {
  RawAnswer a;
  RawAnswer::Outcome why = RawAnswer::Outcome::kClosed;
  size_t end = 0;
  const bool whole_head = FillUntil("\r\n\r\n", kMaxHeaderBytes, deadline, &end, &why);
  a.bytes_seen = !in_.empty();
  if (!whole_head) {
    a.outcome = why;
    if (why == RawAnswer::Outcome::kMalformed) a.detail = "no end of headers within 64 KiB";
    return a;
  }
  const std::string head_text = in_.substr(0, end);
  in_.erase(0, end + 4);
  if (!ParseHead(head_text, a)) {
    a.outcome = RawAnswer::Outcome::kMalformed;
    a.detail = "not an HTTP/1.x status line and headers: " + head_text.substr(0, 200);
    return a;
  }
  // 1xx, 204 and 304 answers, and answers to HEAD, have no body.
  if (head || (a.status >= 100 && a.status < 200) || a.status == 204 || a.status == 304) {
    a.outcome = RawAnswer::Outcome::kAnswered;
    return a;
  }
  if (SameNoCase(a.Header("Transfer-Encoding"), "chunked")) {
    if (!ReadChunked(a, deadline)) return a;
    a.outcome = RawAnswer::Outcome::kAnswered;
    return a;
  }
  size_t length = 0;
  if (a.Has("Content-Length")) {
    if (!ParseCount(a.Header("Content-Length"), 10, &length) || length > kMaxBodyBytes) {
      a.outcome = RawAnswer::Outcome::kMalformed;
      a.detail = "bad Content-Length: " + std::string(a.Header("Content-Length"));
      return a;
    }
    if (!Fill(length, deadline, &why)) {
      a.outcome = why;
      return a;
    }
  } else {  // the body runs to the end of the connection
    while (Fill(in_.size() + 1, deadline, &why) && in_.size() <= kMaxBodyBytes) {
    }
    if (why != RawAnswer::Outcome::kClosed || in_.size() > kMaxBodyBytes) {
      a.outcome = in_.size() > kMaxBodyBytes ? RawAnswer::Outcome::kMalformed : why;
      return a;
    }
    length = in_.size();
  }
  a.body = in_.substr(0, length);
  in_.erase(0, length);
  a.outcome = RawAnswer::Outcome::kAnswered;
  return a;
}

RawAnswer RawConnection::Read(bool head, Clock::time_point deadline) {
  while (true) {
    RawAnswer a = ReadOne(head, deadline);
    if (a.outcome != RawAnswer::Outcome::kAnswered || a.status < 100 || a.status >= 200) return a;
  }
}

std::vector<RawAnswer> RawConnection::ReadUntilClosed(Clock::time_point deadline) {
  std::vector<RawAnswer> out;
  while (true) {
    RawAnswer a = Read(false, deadline);
    const bool answered = a.outcome == RawAnswer::Outcome::kAnswered;
    // A clean end after whole answers is not an outcome worth reporting.
    if (!answered && a.outcome == RawAnswer::Outcome::kClosed && !a.bytes_seen) return out;
    out.push_back(std::move(a));
    if (!answered) return out;
  }
}

}  // namespace gpupool::testing
