#include "transport/http/authority.h"

#include <arpa/inet.h>

#include <array>

namespace sandcastle::transport::http {

namespace {

bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
bool is_unreserved(char c) {
  return is_alpha(c) || is_digit(c) || c == '-' || c == '.' || c == '_' || c == '~';
}
bool is_sub_delim(char c) {
  return c == '!' || c == '$' || c == '&' || c == '\'' || c == '(' || c == ')' || c == '*' ||
         c == '+' || c == ',' || c == ';' || c == '=';
}

char to_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

std::string lowered(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = to_lower(c);
  return out;
}

// reg-name = *( unreserved / pct-encoded / sub-delims ); IPv4 addresses are a
// subset of it.
bool is_reg_name(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (is_unreserved(c) || is_sub_delim(c)) continue;
    if (c == '%' && i + 2 < s.size() && is_hex(s[i + 1]) && is_hex(s[i + 2])) {
      i += 2;
      continue;
    }
    return false;
  }
  return true;
}

// IPvFuture = "v" 1*HEXDIG "." 1*( unreserved / sub-delims / ":" )
bool is_ipvfuture(std::string_view s) {
  if (s.size() < 4 || (s[0] != 'v' && s[0] != 'V')) return false;
  size_t i = 1;
  while (i < s.size() && is_hex(s[i])) ++i;
  if (i == 1 || i >= s.size() || s[i] != '.') return false;
  if (++i >= s.size()) return false;
  for (; i < s.size(); ++i)
    if (!is_unreserved(s[i]) && !is_sub_delim(s[i]) && s[i] != ':') return false;
  return true;
}

// The inside of "[...]": an IPv6 address, written back in its canonical
// form so "[0:0::1]" and "[::1]" compare equal, or an IPvFuture.
std::string bracketed(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('[');
  out.append(s);
  out.push_back(']');
  return out;
}

std::optional<std::string> ip_literal(std::string_view inside) {
  if (is_ipvfuture(inside)) return bracketed(lowered(inside));
  if (inside.empty() || inside.size() > 45) return std::nullopt;
  std::string text(inside);
  std::array<unsigned char, 16> addr{};
  if (inet_pton(AF_INET6, text.c_str(), addr.data()) != 1) return std::nullopt;
  char buf[INET6_ADDRSTRLEN];
  if (!inet_ntop(AF_INET6, addr.data(), buf, sizeof buf)) return std::nullopt;
  return bracketed(buf);
}

}  // namespace

std::optional<Authority> parse_authority(std::string_view v) {
  Authority a;
  std::string_view rest;
  if (!v.empty() && v.front() == '[') {
    auto close = v.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    auto host = ip_literal(v.substr(1, close - 1));
    if (!host) return std::nullopt;
    a.host = std::move(*host);
    rest = v.substr(close + 1);
  } else {
    auto colon = v.find(':');
    std::string_view host = v.substr(0, colon);
    if (!is_reg_name(host)) return std::nullopt;
    a.host = lowered(host);
    rest = colon == std::string_view::npos ? std::string_view() : v.substr(colon);
  }
  if (rest.empty()) return a;
  if (rest.front() != ':') return std::nullopt;
  rest.remove_prefix(1);
  if (rest.empty()) return a;  // "host:" — an empty port is allowed and means the default
  if (rest.size() > 5) return std::nullopt;
  uint32_t port = 0;
  for (char c : rest) {
    if (!is_digit(c)) return std::nullopt;
    port = port * 10 + static_cast<uint32_t>(c - '0');
  }
  if (port > 65535) return std::nullopt;
  a.port = port;
  return a;
}

std::optional<Origin> parse_origin(std::string_view v) {
  auto sep = v.find("://");
  if (sep == std::string_view::npos || sep == 0 || !is_alpha(v[0])) return std::nullopt;
  for (char c : v.substr(0, sep))
    if (!is_alpha(c) && !is_digit(c) && c != '+' && c != '-' && c != '.') return std::nullopt;
  std::string_view auth = v.substr(sep + 3);
  // A serialized origin never has an empty host or an empty port.
  if (auth.empty() || auth.back() == ':') return std::nullopt;
  auto a = parse_authority(auth);
  if (!a || a->host.empty()) return std::nullopt;
  return Origin{lowered(v.substr(0, sep)), std::move(*a)};
}

bool is_loopback_name(std::string_view host) {
  return host == "localhost" || host == "127.0.0.1" || host == "[::1]";
}

std::optional<Target> parse_target(std::string_view target) {
  // A fragment is never sent (RFC 9112 §3.2); '#' in a target is malformed.
  if (target.find('#') != std::string_view::npos) return std::nullopt;
  if (!target.empty() && target.front() == '/') return Target{std::string(target), std::nullopt};
  // absolute-form: only the schemes this server is an origin for.
  auto sep = target.find("://");
  if (sep == std::string_view::npos) return std::nullopt;
  std::string scheme = lowered(target.substr(0, sep));
  if (scheme != "http" && scheme != "https") return std::nullopt;
  std::string_view rest = target.substr(sep + 3);
  auto end = rest.find_first_of("/?");
  std::string_view auth = rest.substr(0, end);
  auto a = parse_authority(auth);
  // An http(s) URI with an empty host is invalid (RFC 9110 §4.2.1); userinfo
  // ("user@host") fails the host grammar.
  if (!a || a->host.empty()) return std::nullopt;
  std::string path = end == std::string_view::npos ? std::string() : std::string(rest.substr(end));
  if (path.empty() || path.front() == '?') path.insert(path.begin(), '/');
  return Target{std::move(path), std::move(*a)};
}

}  // namespace sandcastle::transport::http
