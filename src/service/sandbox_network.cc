#include "service/sandbox_network.h"

#include <unistd.h>

#include "net/nft.h"

namespace sandcastle::service {

Result<std::unique_ptr<FullNetwork>> FullNetwork::start(sandbox::NetNamespaces ns,
                                                        const net::Policy& policy,
                                                        std::span<const net::IpAddr> host_addrs) {
  std::unique_ptr<FullNetwork> full(new FullNetwork());
  full->ns_ = std::move(ns);
  if (auto s = full->apply(policy, host_addrs); !s)
    return Error::make(s.error().code, "full mode's firewall: " + s.error().message());
  // As root, pasta must stay uid 0 to enter the sandbox's user namespace.
  auto tool = net::UserNet::start(full->ns_.netns.get(), full->ns_.userns.get(), ::geteuid() == 0);
  if (!tool)
    return Error::make(tool.error().code, "full mode's network: " + tool.error().message());
  full->user_net_ = std::move(*tool);
  return full;
}

Status FullNetwork::apply(const net::Policy& policy, std::span<const net::IpAddr> host_addrs) {
  return net::nft::apply(ns_.userns.get(), ns_.netns.get(),
                         net::nft::render_ruleset(policy, host_addrs));
}

Result<NetworkHandle> attach_network(sandbox::Sandbox& sb, net::ProxyService* proxies,
                                     const std::string& id) {
  const auto& spec = sb.spec();
  const auto mode = spec.network();
  if (mode == sandbox::NetworkMode::kNone) return NetworkHandle{};
  if (proxies == nullptr)
    return Error::make(ErrorCode::kFailedPrecondition,
                       std::string("network mode \"") + sandbox::network_mode_name(mode) +
                           "\" is not enabled on this server (config [network] modes)");
  auto policy = net::make_policy(mode, spec.network_allow(), spec.network_deny());
  if (!policy) return policy.take_error();
  // Full mode has no proxies (its programs connect directly), only the DNS
  // stub: the sandbox's resolv.conf names no server, so glibc asks
  // 127.0.0.1:53, and names reach the resolver only through the policy.
  auto listeners = sb.open_net_listeners(mode == sandbox::NetworkMode::kAllowList);
  if (!listeners) return listeners.take_error();
  NetworkHandle h;
  h.session = std::make_shared<net::Session>(id, *policy);
  auto attachment = proxies->attach(h.session, std::move(*listeners));
  if (!attachment) return attachment.take_error();
  h.attachment = std::move(*attachment);
  if (mode == sandbox::NetworkMode::kFull) {
    auto ns = sb.network_namespaces();
    if (!ns) return ns.take_error();
    auto full = FullNetwork::start(std::move(*ns), **policy, proxies->host_addrs());
    if (!full) return full.take_error();
    h.full = std::move(*full);
  }
  return h;
}

Result<std::size_t> change_network_policy(net::Session& session, FullNetwork* full,
                                          std::shared_ptr<const net::Policy> policy,
                                          std::span<const net::IpAddr> host_addrs) {
  if (full == nullptr) return session.set_policy(std::move(policy), host_addrs);
  std::lock_guard lock(full->change_mu());
  if (auto s = full->apply(*policy, host_addrs); !s)
    return Error::make(s.error().code,
                       "the sandbox's firewall was not changed: " + s.error().message());
  return session.set_policy(std::move(policy), host_addrs);
}

}  // namespace sandcastle::service
