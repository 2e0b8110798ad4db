#include "sandbox/native/fd_passing.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sandcastle::sandbox::native {

int send_with_fds(int sock, std::string_view bytes, const int* fds, int nfds) {
  if (nfds < 0 || nfds > kMaxPassedFds) return EINVAL;
  struct iovec iov {const_cast<char*>(bytes.data()), bytes.size()};
  alignas(struct cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (nfds > 0) {
    msg.msg_control = cbuf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * static_cast<std::size_t>(nfds));
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * static_cast<std::size_t>(nfds));
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * static_cast<std::size_t>(nfds));
  }
  for (;;) {
    if (::sendmsg(sock, &msg, MSG_NOSIGNAL) >= 0) return 0;
    if (errno != EINTR) return errno;
  }
}

void ReceivedMessage::close_fds() {
  for (int& fd : fds) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  nfds = 0;
}

ReceivedMessage recv_with_fds(int sock, char* buf, std::size_t cap, int flags) {
  ReceivedMessage m;
  struct iovec iov {buf, cap};
  // Room for one more fd than we accept, so an over-full message is noticed
  // (and its fds closed) instead of being cut silently.
  alignas(struct cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * (kMaxPassedFds + 1))];
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof cbuf;
  do {
    m.len = ::recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
  } while (m.len < 0 && errno == EINTR);
  if (m.len < 0) {
    m.err = errno;
    return m;
  }
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    std::size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < n; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (m.nfds < kMaxPassedFds) {
        m.fds[m.nfds++] = fd;
      } else {
        ::close(fd);
        m.truncated = true;
      }
    }
  }
  if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) m.truncated = true;
  return m;
}

}  // namespace sandcastle::sandbox::native
