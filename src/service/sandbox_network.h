// A sandbox's network as the server serves it (issue 19): its session (live
// policy, tunnels, refusals), the attachment that serves the listeners its
// backend opened inside it, and in full mode the user-mode network stack
// and firewall in its namespaces.
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "common/result.h"
#include "common/unique_fd.h"
#include "net/proxy_service.h"
#include "net/session.h"
#include "net/user_net.h"
#include "sandbox/sandbox.h"

namespace sandcastle::service {

// Full mode: pasta (or slirp4netns) in the sandbox's network namespace, and
// the nft table there that enforces the policy's addresses. Destroying it
// kills the tool; the namespaces go with the sandbox.
class FullNetwork {
 public:
  // Loads the firewall for `policy` first, while the namespace has only
  // loopback, then starts the tool: the sandbox never has a route without
  // its rules.
  static Result<std::unique_ptr<FullNetwork>> start(sandbox::NetNamespaces ns,
                                                    const net::Policy& policy,
                                                    std::span<const net::IpAddr> host_addrs);
  // Replaces the firewall atomically (nft -f); on failure the old one stays.
  Status apply(const net::Policy& policy, std::span<const net::IpAddr> host_addrs);

  const net::UserNet& user_net() const { return *user_net_; }
  // Held across a rule change, so the firewall and the session agree.
  std::mutex& change_mu() { return change_mu_; }

 private:
  FullNetwork() = default;
  sandbox::NetNamespaces ns_;
  std::unique_ptr<net::UserNet> user_net_;
  std::mutex change_mu_;
};

struct NetworkHandle {
  std::shared_ptr<net::Session> session{};  // null in mode none
  std::unique_ptr<net::Attachment> attachment{};
  std::shared_ptr<FullNetwork> full{};  // full mode only
};

// Nothing for mode none. Allowlist: opens the proxy and DNS listeners inside
// `sb` and serves them with `proxies`. Full: the DNS listeners only (names go
// through the policy), then FullNetwork::start. `proxies` null: the server
// runs no proxies, and the error says how to turn them on.
Result<NetworkHandle> attach_network(sandbox::Sandbox& sb, net::ProxyService* proxies,
                                     const std::string& id);

// A new policy for a networked sandbox: in full mode the firewall first (a
// failure changes nothing), then the session, which closes the proxied
// tunnels no longer allowed. Returns how many it closed.
Result<std::size_t> change_network_policy(net::Session& session, FullNetwork* full,
                                          std::shared_ptr<const net::Policy> policy,
                                          std::span<const net::IpAddr> host_addrs);

}  // namespace sandcastle::service
