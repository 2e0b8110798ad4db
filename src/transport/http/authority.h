// Parsers for what a request says about where it is going and where it comes
// from: the Host field (RFC 9110 §7.2: uri-host [":" port], RFC 3986 §3.2.2
// host grammar), the Origin field (RFC 6454 serialized origin) and the
// request-target forms of RFC 9112 §3.2. They accept exactly the grammar and
// nothing around it (no userinfo, path, whitespace or control characters), so
// the DNS-rebinding check compares the host a client really named.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sandcastle::transport::http {

struct Authority {
  std::string host;              // lower-case; an IPv6 literal keeps its brackets ("[::1]")
  std::optional<uint32_t> port;  // absent when no ":" (or an empty port) was given
};

// host [":" port] as a Host field or an http(s) URI carries it. The host is a
// reg-name (unreserved, %HH, sub-delims; may be empty), an IPv4 address or an
// [IPv6] literal; the port is up to 5 digits, at most 65535. nullopt when the
// value is anything else ("localhost:80@evil.com", "a b", "[::1", "x:1:2").
std::optional<Authority> parse_authority(std::string_view v);

struct Origin {
  std::string scheme;  // lower-case
  Authority authority;
};

// scheme "://" host [":" port], nothing before or after (RFC 6454 §6.2);
// nullopt for "null", a list of origins, userinfo, a path or anything else.
std::optional<Origin> parse_origin(std::string_view v);

// localhost, 127.0.0.1 or [::1] (as parse_authority returns them).
bool is_loopback_name(std::string_view host);

// A request-target (RFC 9112 §3.2) reduced to what the server routes on.
struct Target {
  std::string origin_form;             // "/path?query"
  std::optional<Authority> authority;  // set for the absolute-form (http://host/path)
};

// The origin-form ("/p?q") or the absolute-form with an http or https scheme
// ("http://host:1/p?q" → "/p?q" and host); nullopt for the authority and
// asterisk forms, a fragment, userinfo, or any other scheme.
std::optional<Target> parse_target(std::string_view target);

}  // namespace sandcastle::transport::http
