// The server's egress proxies for every sandbox in allowlist (and the DNS
// stub in full) mode: an HTTP proxy (CONNECT and absolute-form), a SOCKS5
// proxy and a DNS stub, served on listening sockets the sandbox's init opened
// inside the sandbox's own network namespace and handed over (so the
// sandbox reaches them at 127.0.0.1 and nothing else reaches them). One
// Boost.Asio loop for the whole server; every connection is bounded (head,
// connect and idle timeouts, a per-sandbox and a per-server cap).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "net/session.h"
#include "net/upstream.h"

namespace sandcastle::net {

// Ports inside the sandbox.
constexpr std::uint16_t kHttpProxyPort = 3128;
constexpr std::uint16_t kSocksPort = 1080;
constexpr std::uint16_t kDnsPort = 53;

// Listening sockets bound in the sandbox's netns. Any may be empty (full
// mode hands over only the DNS pair).
struct Listeners {
  UniqueFd http{};     // TCP 127.0.0.1:3128, listening
  UniqueFd socks{};    // TCP 127.0.0.1:1080, listening
  UniqueFd dns_tcp{};  // TCP 127.0.0.1:53, listening
  UniqueFd dns_udp{};  // UDP 127.0.0.1:53, bound
};

struct ProxyOptions {
  // "" = the system resolver; "HOST:PORT" = ask that server over UDP (TCP
  // on truncation), which the tests use for their own responder.
  std::string resolver{};
  std::size_t max_per_sandbox = 256;
  std::size_t max_total = 4096;
  std::chrono::milliseconds head_timeout{10'000};
  std::chrono::milliseconds connect_timeout{30'000};
  std::chrono::milliseconds idle_timeout{300'000};
  int dns_queries_per_second = 200;  // per sandbox
  std::chrono::seconds dns_ttl_cap{30};
  // The host's HTTP proxy: tunnels and plain requests chain through it as
  // curl would on the host (no_proxy honoured). Empty: direct.
  UpstreamProxies upstream{};
};

// Served while it lives: the destructor stops the listeners and closes every
// connection of its sandbox, and returns once the loop no longer uses them
// (at once when called on the loop itself, or after the service is gone).
class Attachment {
 public:
  virtual ~Attachment() = default;
};

class ProxyService {
 public:
  virtual ~ProxyService() = default;
  // Starts the loop thread. Fails when the resolver setting does not parse.
  static Result<std::unique_ptr<ProxyService>> start(ProxyOptions options);

  // Serves `session`'s policy on `listeners` until the attachment is
  // destroyed. Each fd is checked (a socket of the right type, listening,
  // bound to 127.0.0.1, or an AF_UNIX stream listener: the engine relays
  // connections to one) before it is adopted; kInvalidArgument otherwise.
  //
  // A name no allow rule names is refused by the proxies before any lookup,
  // as the DNS stub refuses it, so a refused name never reaches a DNS
  // server; address rules apply to addresses asked for (and to the DNS
  // map's). A name is resolved once and the connection goes to the exact
  // address allowed.
  virtual Result<std::unique_ptr<Attachment>> attach(std::shared_ptr<Session> session,
                                                     Listeners listeners) = 0;

  // The host's own addresses (refreshed every 60 s), for Session::set_policy.
  virtual std::vector<IpAddr> host_addrs() const = 0;
  // Connections open now, across sandboxes.
  virtual std::size_t open_connections() const = 0;
};

}  // namespace sandcastle::net
