// Streaming CSV reading (RFC 4180, via libcsv) with exact error locations.
//
// ReadCsv calls `on_record` once per non-empty record, header included, with
// the 1-based line number on which the record ends and its fields. A callback
// that returns an error stops the read; that error is returned unchanged.
// Syntax errors (e.g. an unterminated quote) are reported as
// "SOURCE:LINE: ..." errors. Fields are passed as string_views valid only
// during the call.
//
// CsvField helpers turn a field into a typed value or an error of the form
// "SOURCE:LINE:COLUMN (NAME): expected ..., got '...'".
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "src/base/status.h"

namespace gpupool {

struct CsvRecord {
  int line = 0;
  std::span<const std::string_view> fields;
};

using CsvRecordFn = std::function<Status(const CsvRecord&)>;

// Reads the file at `path`; its path is the SOURCE in messages.
Status ReadCsvFile(const std::string& path, const CsvRecordFn& on_record);
// Parses `text`; `source` names it in messages.
Status ReadCsvText(std::string_view text, std::string_view source, const CsvRecordFn& on_record);

// Location of one field, for messages.
struct CsvFieldRef {
  std::string_view source;
  int line = 0;
  int column = 0;  // 1-based
  std::string_view name;
  std::string_view text;
};

std::string CsvFieldError(const CsvFieldRef& f, std::string_view problem);
// An integer in [min, max]; the whole field must be digits (optional '-').
Result<int64_t> CsvInt(const CsvFieldRef& f, int64_t min, int64_t max);
// Like CsvInt, but an empty field gives `when_empty`.
Result<int64_t> CsvIntOr(const CsvFieldRef& f, int64_t min, int64_t max, int64_t when_empty);

}  // namespace gpupool
