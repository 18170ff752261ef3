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
  kResourceExhausted,  // out of a resource outside the request's control: a full disk (retry later)
  kDataLoss,           // stored data does not read back: a corrupt or truncated file
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

inline std::unexpected<Error> ResourceExhausted(std::string message) {
  return std::unexpected(Error{ErrorCode::kResourceExhausted, std::move(message)});
}
inline std::unexpected<Error> DataLoss(std::string message) {
  return std::unexpected(Error{ErrorCode::kDataLoss, std::move(message)});
}

}  // namespace gpupool

// Propagating failures (the enclosing function returns a Result or Status):
//
//   GP_TRY(WriteFile(path, bytes));                    // a Status or Result
//   GP_ASSIGN_OR_RETURN(auto text, ReadFile(path));    // declares `text`
//   GP_ASSIGN_OR_RETURN(config.nodes, ParseNodes(n));  // or assigns to an lvalue
//
// On failure the enclosing function returns the callee's Error unchanged;
// add context by hand where the caller knows more (the file, the field).
// GP_ASSIGN_OR_RETURN expands to several statements: use it only where a
// statement may stand in a block, never as the body of a brace-less if.
#define GP_TRY(...)                                              \
  do {                                                           \
    if (auto gp_try_result_ = (__VA_ARGS__); !gp_try_result_) {  \
      return std::unexpected(std::move(gp_try_result_).error()); \
    }                                                            \
  } while (0)
#define GP_ASSIGN_OR_RETURN(lhs, ...) \
  GP_ASSIGN_OR_RETURN_IMPL_(GP_STATUS_CONCAT_(gp_result_, __LINE__), lhs, __VA_ARGS__)
#define GP_ASSIGN_OR_RETURN_IMPL_(result, lhs, ...)               \
  auto result = (__VA_ARGS__);                                    \
  if (!result) return std::unexpected(std::move(result).error()); \
  lhs = std::move(*result)
#define GP_STATUS_CONCAT_(a, b) GP_STATUS_CONCAT_INNER_(a, b)
#define GP_STATUS_CONCAT_INNER_(a, b) a##b
