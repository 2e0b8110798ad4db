// SCM_RIGHTS over the SOCK_SEQPACKET sockets between the server and a
// sandbox's init: one message carries some bytes and up to kMaxPassedFds
// descriptors. Used on both sides, so it sticks to plain syscalls.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string_view>

namespace sandcastle::sandbox::native {

constexpr int kMaxPassedFds = 5;

// One sendmsg of `bytes` with `nfds` fds attached (nfds may be 0), retried on
// EINTR. Returns 0 or the errno.
int send_with_fds(int sock, std::string_view bytes, const int* fds, int nfds);

struct ReceivedMessage {
  ssize_t len = -1;  // bytes received; 0 = EOF; -1 = error (err says which)
  int err = 0;
  int fds[kMaxPassedFds] = {-1, -1, -1, -1, -1};
  int nfds = 0;
  bool truncated = false;  // data or fds did not fit: the message is unusable
  // Closes every received fd still held (fds taken out must be set to -1).
  void close_fds();
};

// One recvmsg into buf; received fds are close-on-exec. Fds beyond
// kMaxPassedFds are closed and the message marked truncated.
ReceivedMessage recv_with_fds(int sock, char* buf, std::size_t cap, int flags = 0);

}  // namespace sandcastle::sandbox::native
