#include "sandbox/native/net.h"

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

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

}  // namespace sandcastle::sandbox::native
