// The bits of HTTP/1.1 the proxies read and write: a request head (request
// line and header fields, bounded), authorities, and the replies the proxy
// makes itself. Everything parsed here comes from a sandbox: hostile input.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/text.h"

namespace sandcastle::net {

// A request head is at most this long (request line and fields).
constexpr std::size_t kMaxHead = std::size_t{16} * 1024;

// Splits "host:port" (host may be a [v6] literal, unbracketed in `host`);
// `default_port` when absent. The host is lower-cased. False when empty or
// the port is not 1..65535.
bool split_host_port(const std::string& hp, std::uint16_t default_port, std::string& host,
                     std::uint16_t& port);

// "host:port", "[v6]:port" for an IPv6 literal.
std::string authority(const std::string& host, std::uint16_t port);

std::string percent_decode(std::string_view s);

// A request head: the request line split in three, the fields between the
// request line's CRLF and the blank line (each field ending in CRLF but the
// last), and the size of the whole head including the blank line.
struct RequestHead {
  std::string method{};
  std::string target{};
  std::string version{};
  std::string line{};    // the request line as sent
  std::string fields{};  // "Name: value\r\nName: value"
  std::size_t size = 0;  // bytes up to and including "\r\n\r\n"
};
// nullopt until `data` holds a complete head; a malformed one is an
// error-like nullopt too, told apart by `complete`.
std::optional<RequestHead> parse_head(std::string_view data, bool* complete = nullptr);

// The value of the first field named `name` (case-insensitive), trimmed.
std::optional<std::string> header_value(std::string_view fields, std::string_view name);

// A plain-http request in origin form, as the last one on its connection:
// the hop-by-hop headers that would keep it open (or hand the proxy's
// credentials on) are dropped and "Connection: close" added, then `extra`
// (whole "Name: value\r\n" lines).
std::string forward_head(const std::string& request_line, std::string_view fields,
                         const std::string& extra = "");

// "HTTP/1.1 <status>" with a text/plain body and Connection: close.
std::string plain_reply(const char* status, const std::string& body);

}  // namespace sandcastle::net
