#include "mcp/pagination.h"

#include "common/base64.h"

#include <charconv>

namespace sandcastle::mcp {

namespace {
// A short checksum so a cursor edited by hand is rejected.
unsigned checksum(const std::string& s) {
  unsigned h = 2166136261u;
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h & 0xffffu;
}
}  // namespace

std::string encode_cursor(const std::string& list, size_t offset) {
  std::string body = list + ":" + std::to_string(offset);
  return base64_encode(body + ":" + std::to_string(checksum(body)), true);
}

std::optional<size_t> decode_cursor(const std::string& list, const std::string& cursor) {
  auto raw = base64_decode(cursor);
  if (!raw) return std::nullopt;
  auto last = raw->rfind(':');
  if (last == std::string::npos) return std::nullopt;
  std::string body = raw->substr(0, last);
  if (raw->substr(last + 1) != std::to_string(checksum(body))) return std::nullopt;
  if (body.rfind(list + ":", 0) != 0) return std::nullopt;
  std::string num = body.substr(list.size() + 1);
  size_t offset = 0;
  auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), offset);
  if (ec != std::errc() || p != num.data() + num.size()) return std::nullopt;
  // Only the exact form we issue: no padding, whitespace or leading zeros.
  if (encode_cursor(list, offset) != cursor) return std::nullopt;
  return offset;
}

}  // namespace sandcastle::mcp
