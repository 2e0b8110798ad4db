#include "net/http_head.h"

#include <cctype>
#include <charconv>

namespace sandcastle::net {

bool split_host_port(const std::string& hp, std::uint16_t default_port, std::string& host,
                     std::uint16_t& port) {
  std::string h = hp;
  std::string p;
  if (!h.empty() && h[0] == '[') {
    auto close = h.find(']');
    if (close == std::string::npos) return false;
    if (close + 1 < h.size()) {
      if (h[close + 1] != ':') return false;
      p = h.substr(close + 2);
    }
    h = h.substr(1, close - 1);
  } else if (auto colon = h.rfind(':'); colon != std::string::npos) {
    p = h.substr(colon + 1);
    h = h.substr(0, colon);
  }
  if (h.empty()) return false;
  port = default_port;
  if (!p.empty()) {
    unsigned v = 0;
    auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
    if (ec != std::errc() || end != p.data() + p.size() || v == 0 || v > 65535) return false;
    port = static_cast<std::uint16_t>(v);
  }
  host = ascii_lower(h);
  return true;
}

std::string authority(const std::string& host, std::uint16_t port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

std::string percent_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    unsigned v = 0;
    if (s[i] == '%' && i + 2 < s.size() &&
        std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16).ptr == s.data() + i + 3) {
      out.push_back(static_cast<char>(v));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::optional<RequestHead> parse_head(std::string_view data, bool* complete) {
  if (complete) *complete = false;
  const auto end = data.find("\r\n\r\n");
  if (end == std::string_view::npos) return std::nullopt;
  if (complete) *complete = true;
  RequestHead head;
  head.size = end + 4;
  const auto eol = data.find("\r\n");
  head.line = std::string(data.substr(0, eol));
  const auto sp1 = head.line.find(' ');
  const auto sp2 = head.line.rfind(' ');
  if (sp1 == std::string::npos || sp2 == sp1) return std::nullopt;
  head.method = head.line.substr(0, sp1);
  head.target = head.line.substr(sp1 + 1, sp2 - sp1 - 1);
  head.version = head.line.substr(sp2 + 1);
  if (head.method.empty() || head.target.empty() || head.version.rfind("HTTP/", 0) != 0)
    return std::nullopt;
  // Fields: after the request line's CRLF, up to the last field's CRLF.
  const std::size_t fields_start = eol + 2;
  if (end > fields_start) head.fields = std::string(data.substr(fields_start, end - fields_start));
  return head;
}

std::optional<std::string> header_value(std::string_view fields, std::string_view name) {
  const std::string want = ascii_lower(name);
  while (!fields.empty()) {
    auto eol = fields.find("\r\n");
    std::string_view field = fields.substr(0, eol);
    fields.remove_prefix(eol == std::string_view::npos ? fields.size() : eol + 2);
    const auto colon = field.find(':');
    if (colon == std::string_view::npos) continue;
    std::string key = ascii_lower(field.substr(0, colon));
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    if (key != want) continue;
    std::string_view value = field.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    return std::string(value);
  }
  return std::nullopt;
}

std::string forward_head(const std::string& request_line, std::string_view fields,
                         const std::string& extra) {
  std::string out = request_line + "\r\n";
  while (!fields.empty()) {
    auto eol = fields.find("\r\n");
    std::string_view field = fields.substr(0, eol);
    fields.remove_prefix(eol == std::string_view::npos ? fields.size() : eol + 2);
    std::string name = ascii_lower(field.substr(0, field.find(':')));
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.pop_back();
    if (name == "connection" || name == "proxy-connection" || name == "keep-alive" ||
        name == "proxy-authorization")
      continue;
    out.append(field).append("\r\n");
  }
  return out + extra + "Connection: close\r\n\r\n";
}

std::string plain_reply(const char* status, const std::string& body) {
  return std::string("HTTP/1.1 ") + status +
         "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

}  // namespace sandcastle::net
