// Opaque list cursors: clients must hand them back unchanged, so they carry a
// list tag and offset in a form that a typo or a cursor for another list fails
// to decode (→ -32602) instead of silently returning the wrong page.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace sandcastle::mcp {

std::string encode_cursor(const std::string& list, size_t offset);
std::optional<size_t> decode_cursor(const std::string& list, const std::string& cursor);

}  // namespace sandcastle::mcp
