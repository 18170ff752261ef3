// The one way gpupool parses JSON text it did not write itself: API request
// bodies, agent messages, replies the client reads. nlohmann's parser is
// strict about syntax and UTF-8; this adds what a server must also refuse,
// and turns every library exception into an error value (a number such as
// 1e999 raises out_of_range, which must never become a 500):
//  - numbers that do not fit a double (1e999) or, written as integers,
//    an int64/uint64 (they are read as doubles otherwise; the field readers
//    then refuse a fraction where an integer is wanted);
//  - nesting deeper than max_depth (objects and arrays);
//  - a key given twice in one object (which one would win is a guess);
//  - more than max_values values (objects, arrays, scalars; keys not
//    counted), which bounds the parsed tree's memory whatever the text's
//    shape (a megabyte of "1," is half a million values);
//  - text longer than max_bytes.
// Errors say where: "line 3, column 14: ...". Thread-safe (no state).
#pragma once

#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

#include "src/base/status.h"

namespace gpupool {

struct JsonLimits {
  size_t max_bytes = size_t{64} << 20;
  int max_depth = 64;
  size_t max_values = size_t{1} << 22;
};

// The value of `text` (one JSON value, optionally surrounded by white
// space), or kInvalidArgument naming what is wrong and where.
Result<nlohmann::json> ParseJsonText(std::string_view text, const JsonLimits& limits = {});

}  // namespace gpupool
