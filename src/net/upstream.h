// Where a connection goes out: the host:port a URL names, and the host's own
// HTTP proxy (http_proxy/https_proxy/no_proxy), which the proxies chain
// through as curl and pip would on the host.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace sandcastle::net {

struct HostPort {
  std::string host;  // lower-case host name or literal address (no brackets)
  std::uint16_t port = 0;
  bool operator==(const HostPort&) const = default;
};

// "https://pypi.org/simple" → {pypi.org, 443}; "http://127.0.0.1:8080/x" → {127.0.0.1, 8080}.
Result<HostPort> rule_from_url(const std::string& url);

// An HTTP proxy of the host's ("http://[user:pass@]host[:port]").
struct UpstreamProxy {
  std::string host;
  std::uint16_t port = 0;
  std::string authorization;  // the Proxy-Authorization value ("Basic ..."), or empty
};
Result<UpstreamProxy> upstream_from_url(const std::string& url);

// The host's proxy settings as curl and pip read them: https_proxy for
// tunnels, http_proxy for plain requests (lower case first, then upper),
// no_proxy a comma-separated list of hosts, domains (".x.org" or "x.org"
// covers its subdomains) or "*".
struct UpstreamProxies {
  std::optional<UpstreamProxy> http, https;
  std::vector<std::string> no_proxy;
  // Unusable settings (an https:// proxy, a bad port) are left out and
  // named in `warnings`.
  static UpstreamProxies from_env(const std::function<const char*(const char*)>& getenv,
                                  std::vector<std::string>* warnings = nullptr);
  // The proxy to reach host through, or null for a direct connection.
  const UpstreamProxy* route(bool tunnel, const std::string& host) const;
};

}  // namespace sandcastle::net
