#include "sandbox/engine/relay_listener.h"

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <random>
#include <string>

namespace sandcastle::sandbox::engine {

Result<RelayListener> make_relay_listener(int backlog, const char* what) {
  RelayListener l;
  l.fd = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!l.fd) return Error::from_errno(std::string("socket for ") + what);
  RelayAddress& a = l.address;
  a.addr.sun_family = AF_UNIX;
  std::random_device rd;
  std::string name = "sandcastle-engine-" + std::to_string(::getpid()) + "-" +
                     std::to_string(rd()) + std::to_string(rd());
  std::copy(name.begin(), name.end(), a.addr.sun_path + 1);
  a.len = static_cast<socklen_t>(offsetof(struct sockaddr_un, sun_path) + 1 + name.size());
  if (::bind(l.fd.get(), reinterpret_cast<struct sockaddr*>(&a.addr), a.len) != 0 ||
      ::listen(l.fd.get(), backlog) != 0)
    return Error::from_errno(std::string("listen for ") + what);
  return l;
}

UniqueFd connect_relay(const RelayAddress& to) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return fd;
  if (::connect(fd.get(), reinterpret_cast<const struct sockaddr*>(&to.addr), to.len) != 0)
    return {};
  return fd;
}

}  // namespace sandcastle::sandbox::engine
