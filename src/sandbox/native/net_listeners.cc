// NativeSandbox::open_net_listeners: the proxy and DNS sockets, opened by the
// sandbox's init in the sandbox's network namespace (wire.h kNetListeners)
// and checked here before the server serves them. network_namespaces: the
// namespaces full mode's pasta and nft enter.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <array>
#include <cstring>
#include <mutex>

#include "sandbox/native/fd_passing.h"
#include "sandbox/native/native_sandbox.h"
#include "sandbox/native/wire.h"

namespace sandcastle::sandbox::native {
namespace {

constexpr int kAnswerTimeoutMs = 5'000;

// <linux/pidfd.h> of Linux 6.11; the build's headers may predate them.
constexpr unsigned long kPidfdGetNetNamespace = _IO(0xFF, 4);
constexpr unsigned long kPidfdGetUserNamespace = _IO(0xFF, 9);

// One namespace of the process behind `pidfd`. The ioctl needs no path; on a
// kernel without it (ENOTTY), /proc/<pid>/ns/<name>, which names a kernel
// object, not a file of the sandbox. The pid could have been reused by the
// time of the open, so the pidfd must still be alive after it.
Result<UniqueFd> namespace_of(int pidfd, pid_t pid, unsigned long request, const char* name) {
  UniqueFd fd(::ioctl(pidfd, request, 0));
  if (!fd && errno != ENOTTY)
    return Error::from_errno(std::string("the ") + name +
                             " namespace of sandbox init (pidfd ioctl)");
  if (!fd) {
    const std::string path = "/proc/" + std::to_string(pid) + "/ns/" + name;
    fd = UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return Error::from_errno("open " + path);
    struct pollfd p {
      pidfd, POLLIN, 0
    };
    if (::poll(&p, 1, 0) != 0) return Error::make(ErrorCode::kUnavailable, "sandbox init exited");
  }
  // nsfs fds come close-on-exec; made sure of, as pasta and nft are forked.
  if (::fcntl(fd.get(), F_SETFD, FD_CLOEXEC) != 0) return Error::from_errno("fcntl FD_CLOEXEC");
  return fd;
}

// A socket of `type`, bound to 127.0.0.1:port (and listening for a stream):
// the answer comes from init, which the sandbox's programs cannot replace,
// but it is checked like everything that crosses from a sandbox.
bool is_loopback_socket(int fd, bool udp, std::uint16_t port) {
  int domain = 0, type = 0, accepting = 0;
  socklen_t len = sizeof domain;
  if (::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != AF_INET)
    return false;
  len = sizeof type;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
      type != (udp ? SOCK_DGRAM : SOCK_STREAM))
    return false;
  if (!udp) {
    len = sizeof accepting;
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) != 0 || !accepting)
      return false;
  }
  struct sockaddr_in a {};
  len = sizeof a;
  return ::getsockname(fd, reinterpret_cast<struct sockaddr*>(&a), &len) == 0 &&
         a.sin_family == AF_INET && a.sin_addr.s_addr == htonl(INADDR_LOOPBACK) &&
         ntohs(a.sin_port) == port;
}

}  // namespace

Result<net::Listeners> NativeSandbox::open_net_listeners(bool proxies) {
  NetListenersWire w;
  if (proxies) {
    w.want.push_back({.udp = false, .port = net::kHttpProxyPort});
    w.want.push_back({.udp = false, .port = net::kSocksPort});
  }
  w.want.push_back({.udp = false, .port = net::kDnsPort});
  w.want.push_back({.udp = true, .port = net::kDnsPort});

  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0)
    return Error::from_errno("socketpair for the network listeners");
  UniqueFd ours(sp[0]), theirs(sp[1]);
  {
    std::shared_lock lock(mu_);
    if (auto st = check_alive(); !st) return st.take_error();
    const std::string bytes = encode_control(ControlKind::kNetListeners, encode(w));
    const int fds[1] = {theirs.get()};
    if (int e = send_with_fds(init_.control.get(), bytes, fds, 1); e != 0)
      return Error::from_errno("send network listener request to sandbox init", e);
  }
  theirs.reset();

  struct pollfd p {
    ours.get(), POLLIN, 0
  };
  if (::poll(&p, 1, kAnswerTimeoutMs) != 1)
    return Error::make(ErrorCode::kTimeout, "sandbox init did not open the network listeners");
  std::array<char, 64> buf{};
  ReceivedMessage m = recv_with_fds(ours.get(), buf.data(), buf.size());
  std::array<UniqueFd, kMaxPassedFds> passed;
  for (int i = 0; i < m.nfds; ++i) passed[static_cast<std::size_t>(i)] = UniqueFd(m.fds[i]);
  const auto n = w.want.size();
  if (m.len != static_cast<ssize_t>(n * sizeof(std::int32_t)) || m.truncated)
    return Error::make(ErrorCode::kInternal, "malformed network listener answer from sandbox init");

  net::Listeners out;
  int next = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::int32_t err = 0;
    std::memcpy(&err, buf.data() + i * sizeof err, sizeof err);
    const auto& want = w.want[i];
    const std::string where = std::string(want.udp ? "udp" : "tcp") +
                              " 127.0.0.1:" + std::to_string(want.port) + " in the sandbox";
    if (err != 0) return Error::from_errno("opening " + where, err);
    if (next >= m.nfds) return Error::make(ErrorCode::kInternal, "missing socket for " + where);
    UniqueFd fd = std::move(passed[static_cast<std::size_t>(next++)]);
    if (!is_loopback_socket(fd.get(), want.udp, want.port))
      return Error::make(ErrorCode::kInternal, "sandbox init sent a wrong socket for " + where);
    if (want.udp) {
      out.dns_udp = std::move(fd);
    } else if (want.port == net::kHttpProxyPort) {
      out.http = std::move(fd);
    } else if (want.port == net::kSocksPort) {
      out.socks = std::move(fd);
    } else {
      out.dns_tcp = std::move(fd);
    }
  }
  if (next != m.nfds) return Error::make(ErrorCode::kInternal, "extra sockets from sandbox init");
  return out;
}

Result<NetNamespaces> NativeSandbox::network_namespaces() {
  std::shared_lock lock(mu_);
  if (auto st = check_alive(); !st) return st.take_error();
  auto net = namespace_of(init_.pidfd.get(), init_.pid, kPidfdGetNetNamespace, "net");
  if (!net) return net.take_error();
  auto user = namespace_of(init_.pidfd.get(), init_.pid, kPidfdGetUserNamespace, "user");
  if (!user) return user.take_error();
  return NetNamespaces{.netns = std::move(*net), .userns = std::move(*user)};
}

}  // namespace sandcastle::sandbox::native
