#include "service/sandbox_network.h"

namespace sandcastle::service {

Result<NetworkHandle> attach_network(sandbox::Sandbox& sb, net::ProxyService* proxies,
                                     const std::string& id) {
  const auto& spec = sb.spec();
  if (spec.network() == sandbox::NetworkMode::kNone) return NetworkHandle{};
  if (proxies == nullptr)
    return Error::make(ErrorCode::kFailedPrecondition,
                       std::string("network mode \"") + sandbox::network_mode_name(spec.network()) +
                           "\" is not enabled on this server (config [network] modes)");
  auto policy = net::make_policy(spec.network(), spec.network_allow(), spec.network_deny());
  if (!policy) return policy.take_error();
  auto listeners = sb.open_net_listeners(spec.network() == sandbox::NetworkMode::kAllowList);
  if (!listeners) return listeners.take_error();
  NetworkHandle h;
  h.session = std::make_shared<net::Session>(id, std::move(*policy));
  auto attachment = proxies->attach(h.session, std::move(*listeners));
  if (!attachment) return attachment.take_error();
  h.attachment = std::move(*attachment);
  return h;
}

}  // namespace sandcastle::service
