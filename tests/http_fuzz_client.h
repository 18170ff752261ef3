// A raw HTTP/1.1 client for the API fuzzer (tests/http_fuzz_test.cc). It
// sends exactly the bytes it is given (a lying Content-Length, a broken
// request line, half a body) and reads answers within a deadline.
//
// Guarantees: nothing it reads is trusted. A missing, late, oversized or
// malformed answer is an outcome (RawAnswer::Outcome), never a crash and
// never a wait past the deadline. Sockets are closed abortively (SO_LINGER
// 0), so that a run of 100,000 requests leaves no TIME_WAIT behind to
// exhaust the ephemeral ports.
//
// Threads: one RawConnection per thread.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpupool::testing {

struct RawAnswer {
  enum class Outcome {
    kAnswered,       // a whole answer (status, headers, body) was read
    kClosed,         // the server closed (or reset) the connection before a whole answer
    kTimeout,        // no whole answer before the deadline: a hang
    kConnectFailed,  // no connection at all
    kMalformed,      // bytes that are not an HTTP/1.x answer, or over the size limits
  };
  Outcome outcome = Outcome::kClosed;
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names as sent
  std::string body;
  std::string detail;  // for kMalformed / kConnectFailed: what was wrong
  bool bytes_seen = false;  // whether any byte of an answer arrived

  // The first header of that name (case-insensitive); empty when absent.
  std::string_view Header(std::string_view name) const;
  bool Has(std::string_view name) const;
  // Whether the server said it closes the connection after this answer.
  bool Closes() const;
};

const char* OutcomeName(RawAnswer::Outcome o);

class RawConnection {
 public:
  using Clock = std::chrono::steady_clock;
  RawConnection(std::string host, int port);
  ~RawConnection();
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  // Connects when not connected; false (and `detail`) when that fails.
  bool Connect(Clock::time_point deadline, std::string* detail);
  bool connected() const { return fd_ >= 0; }
  // Whether bytes (or the end) are waiting to be read; does not block.
  bool Readable();
  // Sends `bytes`; false when not all of them went: the connection broke,
  // the deadline passed, or the server stopped reading (it may refuse a
  // body on its Content-Length without reading it). Read the answer either
  // way: an early one is already on its way.
  bool Send(std::string_view bytes, Clock::time_point deadline);
  // Shuts the write side: the server sees the end of the request stream.
  void HalfClose();
  // Reads one answer; `head`: the answer to a HEAD request (no body).
  // Interim 1xx answers are skipped.
  RawAnswer Read(bool head, Clock::time_point deadline);
  // After a half-close: every further answer until the server closes.
  // Stops at the first outcome other than kAnswered (kClosed is the end).
  std::vector<RawAnswer> ReadUntilClosed(Clock::time_point deadline);
  void Close();

 private:
  // Appends what arrives to in_ until `need` bytes are buffered or the
  // connection ends; the outcome when it ends first.
  bool Fill(size_t need, Clock::time_point deadline, RawAnswer::Outcome* why);
  bool FillUntil(std::string_view marker, size_t limit, Clock::time_point deadline, size_t* at,
                 RawAnswer::Outcome* why);
  RawAnswer ReadOne(bool head, Clock::time_point deadline);
  bool ReadChunked(RawAnswer& a, Clock::time_point deadline);

  std::string host_;
  int port_;
  int fd_ = -1;
  bool eof_ = false;
  std::string in_;  // read and not yet consumed
};

}  // namespace gpupool::testing
