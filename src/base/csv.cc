#include "src/base/csv.h"

#include <csv.h>

#include <charconv>
#include <fstream>
#include <sstream>
#include <vector>

namespace gpupool {
namespace {

// libcsv reports fields and record ends through C callbacks; this collects
// them. Input is fed one physical line at a time, so the line being fed when
// a record ends is the record's line number.
struct Collector {
  std::string_view source;
  const CsvRecordFn* on_record = nullptr;
  int line = 0;
  std::vector<std::string> storage;
  size_t used = 0;
  std::vector<std::string_view> views;
  Status status;

  static void OnField(void* data, size_t len, void* self_ptr) {
    auto* self = static_cast<Collector*>(self_ptr);
    if (self->used == self->storage.size()) self->storage.emplace_back();
    self->storage[self->used++].assign(static_cast<const char*>(data), data ? len : 0);
  }
  static void OnRecordEnd(int, void* self_ptr) {
    auto* self = static_cast<Collector*>(self_ptr);
    const size_t n = self->used;
    self->used = 0;
    if (!self->status) return;  // already failed: ignore the rest
    if (n == 1 && self->storage[0].empty()) return;  // blank line
    self->views.assign(self->storage.begin(), self->storage.begin() + static_cast<std::ptrdiff_t>(n));
    self->status = (*self->on_record)(CsvRecord{self->line, self->views});
  }
};

Status Parse(std::istream& in, std::string_view source, const CsvRecordFn& on_record) {
  csv_parser parser;
  if (csv_init(&parser, CSV_STRICT | CSV_STRICT_FINI) != 0) {
    return IoError(std::string(source) + ": cannot initialise the CSV parser");
  }
  Collector c;
  c.source = source;
  c.on_record = &on_record;
  std::string line;
  while (c.status && std::getline(in, line)) {
    ++c.line;
    line.push_back('\n');
    if (csv_parse(&parser, line.data(), line.size(), &Collector::OnField, &Collector::OnRecordEnd, &c) !=
        line.size()) {
      std::string why = csv_strerror(csv_error(&parser));
      csv_free(&parser);
      return InvalidArgument(std::string(source) + ":" + std::to_string(c.line) + ": malformed CSV: " + why);
    }
  }
  if (c.status && csv_fini(&parser, &Collector::OnField, &Collector::OnRecordEnd, &c) != 0) {
    csv_free(&parser);
    return InvalidArgument(std::string(source) + ":" + std::to_string(c.line) +
                           ": malformed CSV: unterminated quoted field at end of file");
  }
  csv_free(&parser);
  return c.status;
}

}  // namespace

Status ReadCsvFile(const std::string& path, const CsvRecordFn& on_record) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError(path + ": cannot open for reading");
  return Parse(in, path, on_record);
}

Status ReadCsvText(std::string_view text, std::string_view source, const CsvRecordFn& on_record) {
  std::istringstream in{std::string(text)};
  return Parse(in, source, on_record);
}

std::string CsvFieldError(const CsvFieldRef& f, std::string_view problem) {
  std::string out;
  out.append(f.source).append(":").append(std::to_string(f.line)).append(":").append(std::to_string(f.column));
  out.append(" (").append(f.name).append("): ").append(problem);
  return out;
}

Result<int64_t> CsvInt(const CsvFieldRef& f, int64_t min, int64_t max) {
  int64_t value = 0;
  const char* begin = f.text.data();
  const char* end = begin + f.text.size();
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (f.text.empty() || ec == std::errc::invalid_argument || ptr != end) {
    return InvalidArgument(CsvFieldError(f, "expected an integer, got '" + std::string(f.text) + "'"));
  }
  if (ec == std::errc::result_out_of_range || value < min || value > max) {
    return InvalidArgument(CsvFieldError(f, "must be between " + std::to_string(min) + " and " +
                                                std::to_string(max) + ", got '" + std::string(f.text) + "'"));
  }
  return value;
}

Result<int64_t> CsvIntOr(const CsvFieldRef& f, int64_t min, int64_t max, int64_t when_empty) {
  if (f.text.empty()) return when_empty;
  return CsvInt(f, min, max);
}

}  // namespace gpupool
