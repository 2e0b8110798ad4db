#include "service/sandbox_uri.h"

#include <cctype>
#include <string_view>

namespace sandcastle::service {

namespace {

constexpr std::string_view kScheme = "sandbox://";

bool unreserved(unsigned char c) {
  return std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

std::string encode_segment(std::string_view s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (unreserved(c)) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

}  // namespace

std::string sandbox_resource_uri(const std::string& sandbox_id, const std::string& path) {
  std::string out(kScheme);
  out += encode_segment(sandbox_id);
  out += '/';
  size_t start = 0;
  while (true) {
    size_t slash = path.find('/', start);
    out += encode_segment(std::string_view(path).substr(
        start, slash == std::string::npos ? std::string::npos : slash - start));
    if (slash == std::string::npos) break;
    out += '/';
    start = slash + 1;
  }
  return out;
}

std::optional<SandboxUri> parse_sandbox_uri(const std::string& uri) {
  if (uri.rfind(kScheme, 0) != 0) return std::nullopt;
  std::string_view rest = std::string_view(uri).substr(kScheme.size());
  size_t slash = rest.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 >= rest.size())
    return std::nullopt;
  auto id = decode(rest.substr(0, slash));
  auto path = decode(rest.substr(slash + 1));
  if (!id || !path || path->empty() || path->find('\0') != std::string::npos) return std::nullopt;
  return SandboxUri{*id, *path};
}

}  // namespace sandcastle::service
