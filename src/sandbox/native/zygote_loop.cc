// The zygote's request loop and the child it clones (built into the init
// helper). Single-threaded: the child may use ordinary code until execve.
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "sandbox/native/caps.h"
#include "sandbox/native/fd_passing.h"
#include "sandbox/native/wire.h"
#include "sandbox/native/zygote.h"

namespace sandcastle::sandbox::native {
namespace {

constexpr int kChildConfigFd = 3;
constexpr int kChildStatusFd = 4;
constexpr int kChildControlFd = 5;

void child_report(int fd, int err, const char* step) {
  InitStatus st{};
  st.err = err;
  std::strncpy(st.step, step, sizeof st.step - 1);
  (void)!::write(fd, &st, sizeof st);
}

// The cloned child, in its new namespaces. `fds` were moved above 9 by the
// loop, so the dup2s below cannot overwrite one another.
[[noreturn]] void child_main(const ZygoteRequest& req, const int* fds, const char* helper) {
  // Die with the zygote (and so with the server).
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (::dup2(fds[0], kChildConfigFd) < 0 || ::dup2(fds[1], kChildStatusFd) < 0 ||
      ::dup2(fds[2], kChildControlFd) < 0) {
    child_report(fds[1], errno, "dup2 init fds");
    _exit(1);
  }
  // Nothing of the zygote's (its socket, other requests' fds) stays open.
  syscall(SYS_close_range, 6U, ~0U, 0U);
  syscall(SYS_close_range, 0U, 2U, 0U);  // init fills 0-2 with /dev/null
  // The server writes our id maps and cgroup, then sends "go".
  char go = 0;
  ssize_t n;
  do {
    n = ::read(kChildConfigFd, &go, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) _exit(1);  // the server gave up on us, or died
  // The maps exist now, but our kernel ids are still the server's: take the
  // mapped identity (with CAP_SETUID/SETGID of the new namespace).
  if (::setresgid(req.gid, req.gid, req.gid) != 0 || ::setresuid(req.uid, req.uid, req.uid) != 0) {
    child_report(kChildStatusFd, errno, "become sandbox uid/gid");
    _exit(1);
  }
  if (int err = keep_caps_across_exec(); err != 0) {
    child_report(kChildStatusFd, err, "keep capabilities across exec");
    _exit(1);
  }
  // Changing credentials cleared the parent-death signal: set it again.
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  static char arg0[] = "sandcastle-init";
  char* argv[] = {arg0, nullptr};
  char* envp[] = {nullptr};
  ::execve(helper, argv, envp);
  child_report(kChildStatusFd, errno, "execve sandcastle-init");
  _exit(127);
}

}  // namespace

int run_zygote(int sock, const char* helper) {
  prctl(PR_SET_NAME, "sc-zygote", 0, 0, 0);
  // Children are reaped by the kernel: the server follows them by pidfd.
  // (Each init resets every disposition, this one included, at its start.)
  (void)signal(SIGCHLD, SIG_IGN);
  for (;;) {
    char buf[sizeof(ZygoteRequest) + 1];
    ReceivedMessage m = recv_with_fds(sock, buf, sizeof buf);
    if (m.len == 0) return 0;  // the server is gone
    if (m.len < 0) {
      if (m.err == EINTR) continue;
      return 1;
    }
    ZygoteReply rep;
    if (m.len != static_cast<ssize_t>(sizeof(ZygoteRequest)) || m.truncated || m.nfds < 3) {
      rep.err = EPROTO;
      (void)send_with_fds(sock, std::string_view(reinterpret_cast<const char*>(&rep), sizeof rep), nullptr, 0);
      m.close_fds();
      continue;
    }
    ZygoteRequest req;
    std::memcpy(&req, buf, sizeof req);
    int fds[kMaxPassedFds] = {-1, -1, -1, -1};
    for (int i = 0; i < m.nfds; ++i) {
      fds[i] = ::fcntl(m.fds[i], F_DUPFD_CLOEXEC, 10);
      ::close(m.fds[i]);
      m.fds[i] = -1;
    }
    int pidfd = -1;
    struct clone_args ca {};
    ca.flags = (req.clone_flags & (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
                                   CLONE_NEWUTS | CLONE_NEWCGROUP)) |
               CLONE_PIDFD;
    ca.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
    ca.exit_signal = SIGCHLD;
    // v2: born inside its cgroup, so not even the first instruction escapes it.
    if (m.nfds > 3 && fds[3] >= 0) {
      ca.flags |= CLONE_INTO_CGROUP;
      ca.cgroup = static_cast<std::uint64_t>(fds[3]);
    }
    bool usable = fds[0] >= 0 && fds[1] >= 0 && fds[2] >= 0;
    long pid = usable ? syscall(SYS_clone3, &ca, sizeof ca) : -1;
    if (pid == 0) child_main(req, fds, helper);
    rep.pid = static_cast<std::int32_t>(pid);
    rep.err = pid < 0 ? (usable ? errno : EBADF) : 0;
    (void)send_with_fds(sock, std::string_view(reinterpret_cast<const char*>(&rep), sizeof rep), &pidfd,
                        pid > 0 ? 1 : 0);
    if (pidfd >= 0) ::close(pidfd);
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }
}

}  // namespace sandcastle::sandbox::native
