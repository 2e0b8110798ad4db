#include "service/sandbox_network.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "net/nft.h"

namespace sandcastle::service {

namespace {

std::vector<net::IpAddr> sorted(std::span<const net::IpAddr> addrs) {
  std::vector<net::IpAddr> out(addrs.begin(), addrs.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

Result<std::unique_ptr<FullNetwork>> FullNetwork::start(sandbox::NetNamespaces ns,
                                                        std::shared_ptr<const net::Policy> policy,
                                                        std::span<const net::IpAddr> host_addrs,
                                                        std::string log_id) {
  std::unique_ptr<FullNetwork> full(new FullNetwork());
  full->ns_ = std::move(ns);
  full->log_id_ = std::move(log_id);
  if (auto s = full->apply(std::move(policy), host_addrs); !s)
    return Error::make(s.error().code, "full mode's firewall: " + s.error().message());
  // As root, pasta stays uid 0 (--runas 0, net/user_net.cc says why).
  auto tool = net::UserNet::start(full->ns_.netns.get(), full->ns_.userns.get(), ::geteuid() == 0);
  if (!tool)
    return Error::make(tool.error().code, "full mode's network: " + tool.error().message());
  full->user_net_ = std::move(*tool);
  return full;
}

Status FullNetwork::apply(std::shared_ptr<const net::Policy> policy,
                          std::span<const net::IpAddr> host_addrs) {
  auto now = net::host_addresses();
  std::vector<net::IpAddr> hosts = now.ok() ? sorted(*now) : sorted(host_addrs);
  if (auto s = net::nft::apply(ns_.userns.get(), ns_.netns.get(),
                               net::nft::render_ruleset(*policy, hosts));
      !s)
    return s;
  policy_ = std::move(policy);
  hosts_ = std::move(hosts);
  return {};
}

void FullNetwork::tend(net::Session& session, const std::vector<net::IpAddr>* host_addrs) {
  std::lock_guard lock(change_mu_);
  if (host_addrs != nullptr && policy_ && sorted(*host_addrs) != hosts_) {
    if (auto s = apply(policy_, *host_addrs); !s)
      spdlog::warn(
          "network: sandbox {}: the firewall was not reloaded for the host's new "
          "addresses: {}",
          log_id_, s.error().message());
  }
  tend_tool(session);
}

void FullNetwork::tend_tool(net::Session& session) {
  std::string exited;
  {
    std::lock_guard tool(tool_mu_);
    if (user_net_->running()) return;
    exited = user_net_->exit_text();
  }
  if (exit_text_.empty()) {  // once per exit
    exit_text_ = exited.empty() ? "the network tool exited" : exited;
    session.record_failure(exit_text_ + (restarts_ < kMaxRestarts ? "" : "; not restarted"));
    spdlog::warn("network: sandbox {}: {}; {}", log_id_, exit_text_,
                 restarts_ < kMaxRestarts ? "starting it again" : "not restarted again");
  }
  const auto now = std::chrono::steady_clock::now();
  if (restarts_ >= kMaxRestarts || now < next_restart_) return;
  ++restarts_;
  next_restart_ = now + kRestartBackoff * (1 << (restarts_ - 1));
  const std::string count = std::to_string(restarts_) + " of " + std::to_string(kMaxRestarts);
  // The firewall lives in the namespace, so it is loaded still: the new
  // tool's route comes after it, as at start.
  auto tool = net::UserNet::start(ns_.netns.get(), ns_.userns.get(), ::geteuid() == 0);
  if (!tool) {
    session.record_failure(exit_text_ + "; restart " + count +
                           " failed: " + tool.error().message());
    spdlog::warn("network: sandbox {}: restart {} failed: {}", log_id_, count,
                 tool.error().message());
    return;
  }
  std::unique_ptr<net::UserNet> old;
  {
    std::lock_guard lock(tool_mu_);
    old = std::exchange(user_net_, std::move(*tool));
  }
  session.record_failure(exit_text_ + "; restarted (" + count + ")");
  spdlog::info("network: sandbox {}: {} started again ({})", log_id_,
               user_net_->tool() == net::UserNetTool::kPasta ? "pasta" : "slirp4netns", count);
  exit_text_.clear();
}

pid_t FullNetwork::tool_pid() const {
  std::lock_guard lock(tool_mu_);
  return user_net_->pid();
}

bool FullNetwork::tool_running() const {
  std::lock_guard lock(tool_mu_);
  return user_net_->running();
}

int FullNetwork::restarts() const {
  std::lock_guard lock(change_mu_);
  return restarts_;
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
    auto full = FullNetwork::start(std::move(*ns), *policy, proxies->host_addrs(), id);
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
  if (auto s = full->apply(policy, host_addrs); !s)
    return Error::make(s.error().code,
                       "the sandbox's firewall was not changed: " + s.error().message());
  return session.set_policy(std::move(policy), host_addrs);
}

}  // namespace sandcastle::service
