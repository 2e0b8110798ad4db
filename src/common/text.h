// Small ASCII text helpers shared by the protocol parsers (HTTP heads,
// headers, multipart, media types): one definition each, so no file keeps a
// private copy that drifts.
#pragma once

#include <string>
#include <string_view>

namespace sandcastle {

// `s` with A-Z lowered; other bytes unchanged (no locale: HTTP field names and
// tokens are ASCII).
std::string ascii_lower(std::string_view s);

// `s` without leading and trailing spaces and tabs (HTTP's OWS).
std::string_view trim_blanks(std::string_view s);

// Whether `a` and `b` are equal with A-Z and a-z taken as the same (HTTP
// tokens: codings, field names; no locale).
bool ascii_iequals(std::string_view a, std::string_view b);

}  // namespace sandcastle
