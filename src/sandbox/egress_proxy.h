// An HTTP proxy that is a sandbox's only way out, and only to allowed
// host:port pairs (the package indexes). It serves on a listening socket the
// backend opened in a network namespace made for the installer's exec alone
// (ExecRequest::private_listener_port), so no other program of the sandbox
// can reach it, and connects out from the server's. CONNECT (https) and
// absolute-form requests (plain http, e.g. a local index) are supported;
// everything else is refused with 403.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"

namespace sandcastle::sandbox {

struct EgressRule {
  std::string host;  // lower-case host name or literal address
  uint16_t port = 0;
  bool operator==(const EgressRule&) const = default;
};

// "https://pypi.org/simple" → {pypi.org, 443}; "http://127.0.0.1:8080/x" → {127.0.0.1, 8080}.
Result<EgressRule> rule_from_url(const std::string& url);

// An HTTP proxy of the host's ("http://[user:pass@]host[:port]").
struct UpstreamProxy {
  std::string host;
  uint16_t port = 0;
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

struct EgressLimits {
  size_t max_connections = 32;
  int handshake_timeout_ms = 10'000;
  int idle_timeout_ms = 120'000;
};

class EgressProxy {
 public:
  EgressProxy(UniqueFd listener, std::vector<EgressRule> allow, EgressLimits limits = {},
              UpstreamProxies upstream = {});
  ~EgressProxy();
  EgressProxy(const EgressProxy&) = delete;
  EgressProxy& operator=(const EgressProxy&) = delete;

  // Stops accepting, closes every connection and joins the threads.
  void stop();

  uint64_t allowed_count() const { return allowed_.load(); }
  uint64_t denied_count() const { return denied_.load(); }
  bool permits(const std::string& host, uint16_t port) const;
  // "host:port" of the last refused connection ("" if none).
  std::string last_denied() const;
  // Why the last allowed connection could not be made ("" if none did fail).
  std::string last_failure() const;

 private:
  void accept_loop();
  void serve(UniqueFd client);

  UniqueFd listener_;
  UniqueFd wake_;  // eventfd: stop() wakes every poll
  const std::vector<EgressRule> allow_;
  const EgressLimits limits_;
  const UpstreamProxies upstream_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> allowed_{0}, denied_{0};
  std::atomic<size_t> active_{0};
  mutable std::mutex mu_;
  std::vector<std::thread> workers_;
  std::string last_denied_;
  std::string last_failure_;
  std::thread acceptor_;
};

}  // namespace sandcastle::sandbox
