#include "common/json_parse.h"

#include <cstring>
#include <string>

#include "common/utf8.h"

namespace sandcastle {

namespace {

Error limit_error(std::string what) {
  return Error::make(ErrorCode::kResourceExhausted, std::move(what));
}

// One pass over the text that counts, outside strings, what nlohmann would
// build: open arrays/objects (depth) and array elements plus object members
// (each is the first in its container or follows a comma). For text the
// parser accepts this is exact; where the parser would stop at a syntax
// error, the counts up to that point are still an upper bound, so nothing
// deeper than the limit is ever built.
Result<std::size_t> prescan(std::string_view text, const JsonLimits& limits) {
  std::size_t depth = 0, values = 0;
  const char* const begin = text.data();
  const char* const end = begin + text.size();
  const char* p = begin;
  while (p < end) {
    const char c = *p++;
    switch (c) {
      case '"': {
        // The closing quote is the first one preceded by an even run of
        // backslashes (each escape takes exactly the next byte).
        const char* const start = p;
        for (;;) {
          const auto* hit =
              static_cast<const char*>(std::memchr(p, '"', static_cast<std::size_t>(end - p)));
          if (!hit) return values;  // unterminated: the parser says so
          std::size_t backslashes = 0;
          for (const char* b = hit; b > start && b[-1] == '\\'; --b) ++backslashes;
          p = hit + 1;
          if (backslashes % 2 == 0) break;
        }
        break;
      }
      case '[':
      case '{':
        if (++depth > limits.max_depth)
          return limit_error("the JSON nests arrays and objects deeper than the limit of " +
                             std::to_string(limits.max_depth) + " levels (at byte " +
                             std::to_string(p - 1 - begin) + ")");
        [[fallthrough]];
      case ',':
        if (++values > limits.max_values)
          return limit_error("the JSON holds more than the limit of " +
                             std::to_string(limits.max_values) +
                             " values (array elements and object members)");
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default: break;
    }
  }
  return values;
}

}  // namespace

Result<nlohmann::json> parse_json(std::string_view text, const JsonLimits& limits,
                                  std::size_t* values) {
  if (text.size() > limits.max_bytes) {
    std::string what = "the JSON text is " + std::to_string(text.size()) +
                       " bytes, over the limit of " + std::to_string(limits.max_bytes) + " bytes";
    if (limits.bytes_setting) what += std::string(" (") + limits.bytes_setting + ")";
    return limit_error(std::move(what));
  }
  auto counted = prescan(text, limits);
  if (!counted) return counted.error();
  if (values) *values = *counted;
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    // parse_error, and out_of_range for a number too large for a double
    // ("1E1111"); invalid UTF-8 inside strings is a parse_error too.
    // nlohmann quotes the bytes it stopped at: keep the message UTF-8.
    std::string what = e.what();
    if (!valid_utf8(what))
      for (auto& c : what)
        if (static_cast<unsigned char>(c) >= 0x80) c = '?';
    return Error::make(ErrorCode::kInvalidArgument, "not valid JSON (UTF-8): " + what);
  }
}

}  // namespace sandcastle
