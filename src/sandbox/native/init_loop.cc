#include "sandbox/native/init_loop.h"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "sandbox/native/supervisor.h"

namespace sandcastle::sandbox::native {
namespace {

void reap_children() {
  int status = 0;
  while (::waitpid(-1, &status, WNOHANG) > 0) {
  }
}

// Receives one request; returns false when the server has gone away.
bool handle_request(int control_fd, int signal_fd, const InitConfig& config,
                    std::vector<char>& buf) {
  struct iovec iov {buf.data(), buf.size()};
  alignas(struct cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kExecRequestFds)];
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof cbuf;
  ssize_t n = ::recvmsg(control_fd, &msg, MSG_CMSG_CLOEXEC);
  if (n == 0) return false;
  if (n < 0) return errno == EINTR || errno == EAGAIN;

  int fds[kExecRequestFds] = {-1, -1, -1, -1};
  int nfds = 0;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      nfds = static_cast<int>((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      if (nfds > kExecRequestFds) nfds = kExecRequestFds;
      std::memcpy(fds, CMSG_DATA(c), sizeof(int) * static_cast<std::size_t>(nfds));
    }
  }
  auto req = decode_exec(std::string_view(buf.data(), static_cast<std::size_t>(n)));
  bool truncated = (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
  if (req && nfds == kExecRequestFds && !truncated) {
    ExecFds exec_fds{fds[0], fds[1], fds[2], fds[3]};
    // A fork into a new PID namespace: the child is that namespace's PID 1.
    long pid = syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
    if (pid == 0) {
      ::close(control_fd);
      run_supervisor(*req, config, exec_fds, signal_fd);
    }
    if (pid < 0) {
      ExecReport rep;
      rep.kind = ReportKind::kSetupError;
      rep.err = errno;
      rep.step = "clone exec supervisor";
      std::string bytes = encode(rep);
      (void)!::send(fds[0], bytes.data(), bytes.size(), MSG_NOSIGNAL);
    }
  }
  for (int i = 0; i < nfds; ++i) ::close(fds[i]);
  return true;
}

}  // namespace

int run_init_loop(int control_fd, const InitConfig& config) {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  int signal_fd = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd < 0) return 1;

  std::vector<char> buf(kMaxExecRequestBytes + 1);
  for (;;) {
    struct pollfd pfds[2] = {{control_fd, POLLIN, 0}, {signal_fd, POLLIN, 0}};
    if (::poll(pfds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    if (pfds[1].revents & POLLIN) {
      struct signalfd_siginfo si;
      while (::read(signal_fd, &si, sizeof si) > 0) {
      }
      reap_children();
    }
    if (pfds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      // Server gone (EOF): returning ends PID 1, and the kernel kills the rest.
      if (!handle_request(control_fd, signal_fd, config, buf)) return 0;
    }
  }
}

}  // namespace sandcastle::sandbox::native
