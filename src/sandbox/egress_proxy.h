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
#include "net/upstream.h"

namespace sandcastle::sandbox {

// Moved to net/ (the per-sandbox proxies use them too); the old names stay
// until the installer moves onto net::Session.
using EgressRule = net::HostPort;
using net::rule_from_url;
using net::upstream_from_url;
using net::UpstreamProxies;
using net::UpstreamProxy;

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
