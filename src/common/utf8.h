// UTF-8 validation: text handed to JSON must be valid, binary goes as base64.
#pragma once

#include <string_view>

namespace sandcastle {

// True when `s` is well-formed UTF-8 (no overlongs, surrogates or > U+10FFFF).
bool valid_utf8(std::string_view s);

}  // namespace sandcastle
