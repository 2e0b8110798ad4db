// EngineSandbox::open_net_listeners: the allowlist proxies' ports inside an
// engine sandbox (issue 19). The agent listens in the container (kListen)
// and relays each connection over its stream to a unix listener of the
// server's, which the proxy service accepts on as on any listener.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <vector>

#include "sandbox/engine/engine_sandbox.h"
#include "sandbox/engine/relay_listener.h"

namespace sandcastle::sandbox::engine {
namespace {

// The agent binds three sockets: far less than this, unless it is stuck.
constexpr auto kListenTimeout = std::chrono::seconds(10);

struct Port {
  std::uint16_t port;
  ListenKind kind;
  UniqueFd net::Listeners::*slot;
};

// The agent's failure is hostile input: the errno is passed on only if it
// is one, the step only as one of the names the agent uses.
Error listen_error(const AgentFailure& f, std::uint16_t port) {
  std::string step = "listen";
  for (const char* known : {"socket", "bind", "listen"})
    if (f.step == known) step = known;
  const int err = f.err > 0 && f.err < 4096 ? f.err : EPROTO;
  return Error::from_errno(step + " 127.0.0.1:" + std::to_string(port) + " in the sandbox", err);
}

}  // namespace

Result<net::Listeners> EngineSandbox::open_net_listeners(bool proxies) {
  if (auto st = check_alive(); !st) return st.take_error();
  // Its container was made without the sysctl that lets the agent bind :53.
  if (spec_.network() == NetworkMode::kNone)
    return Error::make(ErrorCode::kFailedPrecondition,
                       "sandbox " + id_ + " has network mode none: no network listeners");
  {
    std::lock_guard l(mu_);
    if (net_opened_)
      return Error::make(ErrorCode::kFailedPrecondition,
                         "sandbox " + id_ + ": its network listeners are open already");
    net_opened_ = true;
  }
  AgentLink& link = *container_.link;
  std::vector<Port> ports{{net::kDnsPort, ListenKind::kDns, &net::Listeners::dns_tcp}};
  if (proxies) {
    ports.push_back({net::kHttpProxyPort, ListenKind::kTcp, &net::Listeners::http});
    ports.push_back({net::kSocksPort, ListenKind::kTcp, &net::Listeners::socks});
  }
  net::Listeners out;
  std::vector<std::uint32_t> ids(ports.size(), 0);
  std::vector<std::shared_ptr<AgentLink::Waiter>> waiters(ports.size());
  struct Unwatch {
    AgentLink& link;
    std::vector<std::uint32_t>& ids;
    ~Unwatch() {
      for (std::uint32_t id : ids)
        if (id) link.unwatch_answers(id);
    }
  } unwatch{link, ids};
  // All asked at once: one round trip to the agent.
  for (std::size_t i = 0; i < ports.size(); ++i) {
    auto l = make_relay_listener(kListenBacklog, "a sandbox's network listener");
    if (!l) return l.take_error();
    UniqueFd copy(::fcntl(l->fd.get(), F_DUPFD_CLOEXEC, 0));
    if (!copy) return Error::from_errno("dup a sandbox's network listener");
    {
      std::lock_guard g(mu_);
      net_listeners_.push_back(std::move(copy));
    }
    ids[i] = link.next_id();
    waiters[i] = link.watch(ids[i]);
    link.on_accept(ids[i], [to = l->address] { return connect_relay(to); });
    out.*(ports[i].slot) = std::move(l->fd);
    if (auto st = link.send_control(encode_listen(ids[i], ports[i].kind, ports[i].port)); !st)
      return st.take_error();
  }
  const auto deadline = std::chrono::steady_clock::now() + kListenTimeout;
  for (std::size_t i = 0; i < ports.size(); ++i) {
    for (;;) {
      if (auto m = waiters[i]->pop()) {
        if (m->kind == AgentMsg::kExecFailed) return listen_error(*m->failure, ports[i].port);
        if (m->kind == AgentMsg::kListening && m->b == ports[i].port) break;
        return Error::make(ErrorCode::kInternal, "the sandbox's agent answered a listen oddly");
      }
      if (waiters[i]->dead())
        return Error::make(ErrorCode::kUnavailable,
                           "sandbox " + id_ + " went away (" + link.end_reason() + ")");
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0)
        return Error::make(ErrorCode::kTimeout,
                           "sandbox " + id_ + ": the agent did not open its listeners");
      struct pollfd p {
        waiters[i]->fd(), POLLIN, 0
      };
      (void)::poll(&p, 1, static_cast<int>(left.count()) + 1);
    }
  }
  return out;
}

// Whoever serves the listeners sees POLLHUP, and connects to them are
// refused; their descriptors stay the caller's to close.
void EngineSandbox::shut_net_listeners() {
  std::lock_guard l(mu_);
  for (UniqueFd& fd : net_listeners_) (void)::shutdown(fd.get(), SHUT_RDWR);
  net_listeners_.clear();
}

}  // namespace sandcastle::sandbox::engine
