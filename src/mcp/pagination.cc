#include "mcp/pagination.h"

#include <charconv>

namespace sandcastle::mcp {

namespace {
constexpr char kStd[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr char kUrl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int b64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

// A short checksum so a cursor edited by hand is rejected.
unsigned checksum(const std::string& s) {
  unsigned h = 2166136261u;
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h & 0xffffu;
}
}  // namespace

std::string base64_encode(const std::string& in, bool url_safe) {
  const char* alphabet = url_safe ? kUrl : kStd;
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                 (static_cast<unsigned char>(in[i + 1]) << 8) | static_cast<unsigned char>(in[i + 2]);
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
    out += alphabet[v & 63];
  }
  if (i < in.size()) {
    unsigned v = static_cast<unsigned char>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<unsigned char>(in[i + 1]) << 8;
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    if (i + 1 < in.size()) {
      out += alphabet[(v >> 6) & 63];
    } else if (!url_safe) {
      out += '=';
    }
    if (!url_safe) out += '=';
  }
  return out;
}

std::optional<std::string> base64_decode(const std::string& in) {
  std::string out;
  unsigned buf = 0;
  int bits = 0;
  size_t pad = 0;
  for (char c : in) {
    if (c == '=') {
      ++pad;
      continue;
    }
    if (pad) return std::nullopt;  // data after padding
    if (c == '\n' || c == '\r') continue;
    int v = b64_value(c);
    if (v < 0) return std::nullopt;
    buf = (buf << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buf >> bits) & 0xff);
    }
  }
  if (pad > 2) return std::nullopt;
  return out;
}

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
