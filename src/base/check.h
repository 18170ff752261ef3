// Invariant checks.
//
// GP_CHECK(cond) << "context"; aborts with file, line, the condition and the
// streamed context when `cond` is false. Use it for invariants of our own code,
// never for external input (reject that with an Error instead).
#pragma once

#include <cstdlib>
#include <iostream>
#include <sstream>

namespace gpupool::internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition) {
    stream_ << file << ":" << line << ": CHECK failed: " << condition << " ";
  }
  [[noreturn]] ~CheckFailure() {
    std::cerr << stream_.str() << std::endl;
    std::abort();
  }
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

// Lets `GP_CHECK(x) << ...` compile as a void expression.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace gpupool::internal

#define GP_CHECK(condition)                 \
  (condition) ? (void)0                     \
              : ::gpupool::internal::Voidify() & \
                    ::gpupool::internal::CheckFailure(__FILE__, __LINE__, #condition).stream()
