// A sandbox's network as the server serves it (issue 19): in allowlist mode
// its session (live policy, tunnels, refusals) and the attachment that
// serves the listeners its backend opened inside it.
#pragma once

#include <memory>
#include <string>

#include "common/result.h"
#include "net/proxy_service.h"
#include "net/session.h"
#include "sandbox/sandbox.h"

namespace sandcastle::service {

struct NetworkHandle {
  std::shared_ptr<net::Session> session{};  // null in mode none
  std::unique_ptr<net::Attachment> attachment{};
};

// Nothing for mode none. Allowlist: opens the listeners inside `sb` and
// serves them with `proxies` (null: the server runs no proxies, and the
// error says how to turn them on).
Result<NetworkHandle> attach_network(sandbox::Sandbox& sb, net::ProxyService* proxies,
                                     const std::string& id);

}  // namespace sandcastle::service
