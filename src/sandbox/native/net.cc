#include "sandbox/native/net.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace sandcastle::sandbox::native {

std::optional<StepError> bring_loopback_up() {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return step_failed("socket for lo");
  struct ifreq ifr {};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  std::optional<StepError> result;
  if (::ioctl(s, SIOCGIFFLAGS, &ifr) != 0) {
    result = step_failed("get lo flags");
  } else {
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
    if (::ioctl(s, SIOCSIFFLAGS, &ifr) != 0) result = step_failed("bring lo up");
  }
  ::close(s);
  return result;
}

std::optional<StepError> open_loopback_listener(std::uint16_t port, int* fd_out) {
  const std::string where = "127.0.0.1:" + std::to_string(port);
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return step_failed("socket for listener " + where);
  // No SO_REUSEADDR: a port a sandbox process already holds is refused
  // (EADDRINUSE) rather than shared.
  struct sockaddr_in addr {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::optional<StepError> err;
  if (::bind(s, reinterpret_cast<struct sockaddr*>(&addr), sizeof addr) != 0)
    err = step_failed("bind " + where);
  else if (::listen(s, SOMAXCONN) != 0)
    err = step_failed("listen " + where);
  if (err) {
    ::close(s);
    return err;
  }
  *fd_out = s;
  return std::nullopt;
}

std::optional<StepError> open_loopback_udp(std::uint16_t port, int* fd_out) {
  const std::string where = "udp 127.0.0.1:" + std::to_string(port);
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return step_failed("socket for " + where);
  struct sockaddr_in addr {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(s, reinterpret_cast<struct sockaddr*>(&addr), sizeof addr) != 0) {
    auto err = step_failed("bind " + where);
    ::close(s);
    return err;
  }
  *fd_out = s;
  return std::nullopt;
}

}  // namespace sandcastle::sandbox::native
