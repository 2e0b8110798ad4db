// A sandbox's network as the server serves it (issue 19): its session (live
// policy, tunnels, refusals), the attachment that serves the listeners its
// backend opened inside it, and in full mode the user-mode network stack
// and firewall in its namespaces.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

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
  // Restarts of an exited tool over the sandbox's life, and the wait before
  // the second (doubled for each after it; the first is at once).
  static constexpr int kMaxRestarts = 3;
  static constexpr std::chrono::seconds kRestartBackoff{10};

  // Loads the firewall for `policy` first, while the namespace has only
  // loopback, then starts the tool: the sandbox never has a route without
  // its rules. `log_id` names the sandbox in log lines.
  static Result<std::unique_ptr<FullNetwork>> start(sandbox::NetNamespaces ns,
                                                    std::shared_ptr<const net::Policy> policy,
                                                    std::span<const net::IpAddr> host_addrs,
                                                    std::string log_id);
  // Replaces the firewall atomically (nft -f); on failure the old one stays.
  // The host's addresses are read again here (the proxies' list is up to
  // 60 s old); `host_addrs` only when they cannot be. Hold change_mu().
  Status apply(std::shared_ptr<const net::Policy> policy, std::span<const net::IpAddr> host_addrs);

  // Upkeep, called periodically (SandboxManager::tend_networks):
  // - `host_addrs` (the host's addresses now; null when they could not be
  //   read) differ from those the firewall refuses: it is reloaded with the
  //   same policy;
  // - the tool exited: `session` records it ("pasta exited (status N)"),
  //   it is logged once, and the tool is started again (same arguments; the
  //   firewall stays loaded in the namespace) at most kMaxRestarts times.
  void tend(net::Session& session, const std::vector<net::IpAddr>* host_addrs);

  // The tool's pid now (another after a restart), and whether it runs.
  pid_t tool_pid() const;
  bool tool_running() const;
  int restarts() const;
  // Held across a rule change, so the firewall and the session agree.
  std::mutex& change_mu() { return change_mu_; }

 private:
  FullNetwork() = default;
  void tend_tool(net::Session& session);

  sandbox::NetNamespaces ns_;
  std::string log_id_;
  mutable std::mutex tool_mu_;  // user_net_
  std::unique_ptr<net::UserNet> user_net_;
  mutable std::mutex change_mu_;  // the rest
  std::shared_ptr<const net::Policy> policy_;
  std::vector<net::IpAddr> hosts_;  // sorted: what the loaded firewall refuses
  std::string exit_text_;           // "pasta exited (...)" while it is down
  int restarts_ = 0;
  std::chrono::steady_clock::time_point next_restart_{};
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
