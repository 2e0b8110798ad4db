// Base64 (RFC 4648), the one codec of the project: the standard alphabet
// with padding, or base64url without (§5). The decoder takes either
// alphabet, skips line breaks and rejects anything else.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sandcastle {

std::string base64_encode(std::string_view bytes, bool url_safe = false);
// nullopt for a character outside both alphabets or data after padding.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace sandcastle
