// Expected failures as values.
//
// Contract: functions that can fail on external input (files, flags, requests)
// return Result<T>. An Error names what was wrong (the field, file, line, column)
// in `message`, ready to show to an operator. Nothing throws across module
// boundaries; exceptions from third-party libraries are caught at the edge and
// turned into an Error there.
#pragma once

#include <expected>
#include <string>
#include <utility>

namespace gpupool {

enum class ErrorCode {
  kInvalidArgument,  // bad input: a flag, a field, a file's contents
  kNotFound,         // a named thing does not exist
  kIo,               // the operating system refused (open, read, write)
  kFailedPrecondition,
};

struct Error {
  ErrorCode code = ErrorCode::kInvalidArgument;
  std::string message;
};

template <class T>
using Result = std::expected<T, Error>;

// Status is a Result that carries no value.
using Status = std::expected<void, Error>;

inline std::unexpected<Error> InvalidArgument(std::string message) {
  return std::unexpected(Error{ErrorCode::kInvalidArgument, std::move(message)});
}
inline std::unexpected<Error> NotFound(std::string message) {
  return std::unexpected(Error{ErrorCode::kNotFound, std::move(message)});
}
inline std::unexpected<Error> IoError(std::string message) {
  return std::unexpected(Error{ErrorCode::kIo, std::move(message)});
}
inline std::unexpected<Error> FailedPrecondition(std::string message) {
  return std::unexpected(Error{ErrorCode::kFailedPrecondition, std::move(message)});
}

}  // namespace gpupool
