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
#include <string_view>
#include <vector>

#include "sandbox/native/fd_passing.h"
#include "sandbox/native/net.h"
#include "sandbox/native/supervisor.h"

namespace sandcastle::sandbox::native {
namespace {

void reap_children() {
  int status = 0;
  while (::waitpid(-1, &status, WNOHANG) > 0) {
  }
}

void start_exec(int control_fd, int signal_fd, const InitConfig& config, std::string_view payload,
                ReceivedMessage& m) {
  auto req = decode_exec(payload);
  if (!req || m.nfds != kExecRequestFds) return;
  ExecFds exec_fds{m.fds[0], m.fds[1], m.fds[2], m.fds[3]};
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
    (void)!::send(m.fds[0], bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }
}

// The listener is created here, in the sandbox's network namespace, and
// handed over; init keeps no copy, so the server's close is the end of it.
void open_listener(std::string_view payload, ReceivedMessage& m) {
  auto req = decode_listen(payload);
  if (!req || m.nfds != 1) return;
  ListenReply rep;
  int listener = -1;
  if (auto e = open_loopback_listener(req->port, &listener)) {
    rep.err = e->err == 0 ? EIO : e->err;
    rep.step = e->step;
  }
  std::string bytes = encode(rep);
  (void)send_with_fds(m.fds[0], bytes, &listener, listener >= 0 ? 1 : 0);
  if (listener >= 0) ::close(listener);
}

// Receives one request; returns false when the server has gone away.
bool handle_request(int control_fd, int signal_fd, const InitConfig& config,
                    std::vector<char>& buf) {
  ReceivedMessage m = recv_with_fds(control_fd, buf.data(), buf.size());
  if (m.len == 0) return false;
  if (m.len < 0) return m.err == EINTR || m.err == EAGAIN;
  auto msg = decode_control(std::string_view(buf.data(), static_cast<std::size_t>(m.len)));
  if (msg && !m.truncated) {
    switch (msg->kind) {
      case ControlKind::kExec: start_exec(control_fd, signal_fd, config, msg->payload, m); break;
      case ControlKind::kListen: open_listener(msg->payload, m); break;
    }
  }
  m.close_fds();
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
