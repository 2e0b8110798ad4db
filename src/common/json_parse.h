// The one way the server parses JSON that comes from outside (a stdio line,
// an HTTP body, a kernel frame): bounded in size, nesting and value count
// before nlohmann builds anything.
//
// Why a depth limit: nlohmann's parser and destructor are iterative, but
// copies, dump(), comparisons, the JSON-schema validator and our own walkers
// recurse, so a value nested 100k deep overflows the stack of whichever
// thread touches it next. Why a value limit: the DOM costs far more than the
// text (a 16-byte node per "0," and ~100 bytes per object member), so bytes
// alone do not bound memory.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string_view>

#include "common/result.h"

namespace sandcastle {

inline constexpr std::size_t kJsonMaxDepth = 128;
inline constexpr std::size_t kJsonMaxValues = std::size_t{1} << 18;  // 262144

struct JsonLimits {
  std::size_t max_bytes;                    // the source's own limit, stated by the caller
  std::size_t max_depth = kJsonMaxDepth;    // arrays and objects open at once
  std::size_t max_values = kJsonMaxValues;  // array elements and object members, in total
  const char* bytes_setting = nullptr;      // what sets max_bytes, named in the error
};

// The parsed value, or an error: ErrorCode::kResourceExhausted when the text
// breaks a limit (the message names it), kInvalidArgument when it is not
// JSON (or not UTF-8, or a number out of range). Never throws on any input.
// `values`, when given, receives the value count (what max_values bounds),
// for callers that budget several parsed texts together.
Result<nlohmann::json> parse_json(std::string_view text, const JsonLimits& limits,
                                  std::size_t* values = nullptr);

// True for the errors parse_json gives when a limit (not the syntax) refused
// the text: JSON-RPC answers those -32600, the others -32700.
inline bool is_json_limit_error(const Error& e) {
  return e.code == ErrorCode::kResourceExhausted;
}

}  // namespace sandcastle
