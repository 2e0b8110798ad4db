#include "sandbox/native/zygote.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "sandbox/native/fd_passing.h"

namespace sandcastle::sandbox::native {
namespace {

constexpr int kZygoteSockFd = 3;

struct ZygoteArgs {
  int sock;
  const char* helper;
  char* const* argv;
  char* const* envp;
};

// Runs in the cloned child of the multithreaded server: raw syscalls only
// until execve (sanitizer runtimes intercept dup2 and _exit, and their locks
// may have been held by another thread at the clone).
[[noreturn]] void zygote_child(const ZygoteArgs& a) {
  syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  // a.sock was placed above 9, so this dup2 makes a fresh fd 3 (without
  // close-on-exec) and nothing else of the server's survives the exec.
  if (syscall(SYS_dup2, a.sock, kZygoteSockFd) < 0) syscall(SYS_exit_group, 126);
  syscall(SYS_close_range, 4U, ~0U, 0U);
  syscall(SYS_close_range, 0U, 2U, 0U);  // never the server's stdio
  syscall(SYS_execve, a.helper, a.argv, a.envp);
  syscall(SYS_exit_group, 127);
  __builtin_unreachable();
}

}  // namespace

Zygote::~Zygote() {
  stop();
}

void Zygote::stop() {
  std::lock_guard lock(mu_);
  stopped_ = true;
  stop_locked();
}

void Zygote::stop_locked() {
  sock_.reset();  // EOF: its loop ends
  if (!pidfd_) return;
  syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
  siginfo_t si{};
  while (::waitid(P_PIDFD, static_cast<id_t>(pidfd_.get()), &si, WEXITED) != 0 && errno == EINTR) {
  }
  pidfd_.reset();
  std::lock_guard live(live_mu_);
  live_pidfd_.reset();
}

bool Zygote::alive(std::uint64_t generation) const {
  std::lock_guard live(live_mu_);
  if (generation != generation_ || !live_pidfd_) return false;
  struct pollfd p {
    live_pidfd_.get(), POLLIN, 0
  };
  return ::poll(&p, 1, 0) == 0;  // readable once it has exited
}

Status Zygote::start_locked(const std::string& helper) {
  stop_locked();  // a predecessor, dead or out of step
  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0)
    return Error::from_errno("socketpair for the zygote");
  UniqueFd ours(sp[0]);
  UniqueFd theirs(::fcntl(sp[1], F_DUPFD_CLOEXEC, 10));
  ::close(sp[1]);
  if (!theirs) return Error::from_errno("dup zygote socket");

  // Its own name in ps (and to tools that look for sandboxes' inits).
  static char arg0[] = "sandcastle-zygote";
  static char arg1[] = "--zygote";
  char* argv[] = {arg0, arg1, const_cast<char*>(helper.c_str()), nullptr};
  char* envp[] = {nullptr};
  ZygoteArgs args{theirs.get(), helper.c_str(), argv, envp};
  int pidfd = -1;
  struct clone_args ca {};
  ca.flags = CLONE_PIDFD;
  ca.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
  ca.exit_signal = SIGCHLD;
  long pid = -1;
  int clone_errno = 0;
  // From the spawner thread: PDEATHSIG follows the thread that forked.
  spawner_.run([&] {
    pid = syscall(SYS_clone3, &ca, sizeof ca);
    if (pid == 0) zygote_child(args);
    clone_errno = errno;
  });
  if (pid < 0) return Error::from_errno("clone3 the zygote", clone_errno);
  pidfd_ = UniqueFd(pidfd);
  sock_ = std::move(ours);
  std::lock_guard live(live_mu_);
  ++generation_;
  live_pidfd_ = UniqueFd(::fcntl(pidfd_.get(), F_DUPFD_CLOEXEC, 0));
  return {};
}

Result<Zygote::Child> Zygote::ask_locked(const ZygoteRequest& req, const int* fds, int nfds, bool* gone) {
  *gone = false;
  std::string_view bytes(reinterpret_cast<const char*>(&req), sizeof req);
  if (int e = send_with_fds(sock_.get(), bytes, fds, nfds); e != 0) {
    *gone = true;
    return Error::from_errno("send to the zygote", e);
  }
  struct pollfd p {sock_.get(), POLLIN, 0};
  int r;
  do {
    r = ::poll(&p, 1, 30'000);
  } while (r < 0 && errno == EINTR);
  if (r == 0) {
    // A late answer would be taken for the next request's: this zygote is
    // out of step, and the next request starts a new one.
    stop_locked();
    return Error::make(ErrorCode::kTimeout, "the zygote did not answer");
  }
  char buf[sizeof(ZygoteReply) + 1];
  ReceivedMessage m = recv_with_fds(sock_.get(), buf, sizeof buf);
  UniqueFd pidfd(m.nfds > 0 ? m.fds[0] : -1);
  if (m.nfds > 0) m.fds[0] = -1;
  m.close_fds();
  if (m.len <= 0) {
    *gone = true;
    return Error::from_errno("receive from the zygote", m.len == 0 ? EPIPE : m.err);
  }
  ZygoteReply rep;
  if (m.len != static_cast<ssize_t>(sizeof rep) || m.truncated) {
    stop_locked();
    return Error::make(ErrorCode::kInternal, "malformed reply from the zygote");
  }
  std::memcpy(&rep, buf, sizeof rep);
  if (rep.pid <= 0) return Error::from_errno("clone3 sandbox namespaces", rep.err);
  if (!pidfd) return Error::make(ErrorCode::kInternal, "the zygote sent no pidfd");
  std::uint64_t generation = 0;
  {
    std::lock_guard live(live_mu_);
    generation = generation_;
  }
  return Child{static_cast<pid_t>(rep.pid), std::move(pidfd), generation};
}

Result<Zygote::Child> Zygote::clone_init(const std::string& helper, const ZygoteRequest& req, int config_fd,
                                         int status_fd, int control_fd, int cgroup_fd) {
  const int fds[4] = {config_fd, status_fd, control_fd, cgroup_fd};
  int nfds = cgroup_fd >= 0 ? 4 : 3;
  std::lock_guard lock(mu_);
  if (stopped_)
    return Error::make(ErrorCode::kUnavailable, "the zygote was stopped (shutting down)");
  if (!sock_)
    if (auto st = start_locked(helper); !st) return st.take_error();
  bool gone = false;
  auto child = ask_locked(req, fds, nfds, &gone);
  if (child || !gone) return child;
  // Its socket is closed: the zygote is gone (killed, say). A new one, asked
  // once more. (A clone that failed in a live zygote is an answer, as is a
  // zygote that does not answer.)
  if (auto st = start_locked(helper); !st) return st.take_error();
  return ask_locked(req, fds, nfds, &gone);
}

}  // namespace sandcastle::sandbox::native
