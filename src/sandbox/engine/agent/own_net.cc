#include "sandbox/engine/agent/own_net.h"

#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sandcastle::sandbox::engine::agent {
namespace {

bool write_file(const char* path, const std::string& text) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = errno;
  ::close(fd);
  errno = err;
  return n == static_cast<ssize_t>(text.size());
}

}  // namespace

bool own_netns_supported() {
  static int known = -1;
  if (known < 0) {
    pid_t pid = ::fork();
    if (pid == 0) _exit(::unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0 ? 0 : 1);
    int st = 0;
    while (pid > 0 && ::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    known = pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 1 : 0;
  }
  return known == 1;
}

OwnNetPlan plan_own_net(std::uint16_t port) {
  OwnNetPlan p;
  p.port = port;
  p.uid_map = std::to_string(::geteuid()) + " " + std::to_string(::geteuid()) + " 1\n";
  p.gid_map = std::to_string(::getegid()) + " " + std::to_string(::getegid()) + " 1\n";
  return p;
}

int enter_own_net(const OwnNetPlan& plan) {
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0) return -1;
  // An unprivileged map: our own ids only, setgroups denied first. The
  // agent is not dumpable, and so this fork of it: its /proc files are
  // root's, which our uid may not write. Dumpable for as long as that
  // takes (the caller has closed every descriptor of the agent's), then not
  // again until execve.
  if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0) return -1;
  const bool mapped = write_file("/proc/self/setgroups", "deny") &&
                      write_file("/proc/self/uid_map", plan.uid_map) &&
                      write_file("/proc/self/gid_map", plan.gid_map);
  int err = errno;
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 || !mapped) {
    errno = mapped ? errno : err;
    return -1;
  }
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  struct ifreq ifr {};
  std::memcpy(ifr.ifr_name, "lo", 3);
  int r = ::ioctl(s, SIOCGIFFLAGS, &ifr);
  if (r == 0) {
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
    r = ::ioctl(s, SIOCSIFFLAGS, &ifr);
  }
  err = errno;
  ::close(s);
  if (r != 0) {
    errno = err;
    return -1;
  }
  int l = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (l < 0) return -1;
  struct sockaddr_in addr {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(plan.port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(l, reinterpret_cast<struct sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(l, 64) != 0) {
    err = errno;
    ::close(l);
    errno = err;
    return -1;
  }
  return l;
}

bool send_listener(int sock, int fd) {
  char mark = kListenerMark;
  struct iovec iov {
    &mark, 1
  };
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  return ::sendmsg(sock, &msg, MSG_NOSIGNAL) == 1;
}

}  // namespace sandcastle::sandbox::engine::agent
