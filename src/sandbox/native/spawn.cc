#include "sandbox/native/spawn.h"

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
#include <thread>

#include "sandbox/native/caps.h"
#include "sandbox/native/cgroup.h"
#include "sandbox/native/wire.h"

namespace sandcastle::sandbox::native {

Spawner::Spawner() : thread_([this] { loop(); }) {}

Spawner::~Spawner() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Spawner::run(const std::function<void()>& fn) {
  if (std::this_thread::get_id() == thread_.get_id()) {
    fn();
    return;
  }
  bool done = false;
  {
    std::lock_guard lock(mu_);
    jobs_.push_back(Job{fn, &done});
  }
  cv_.notify_all();
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return done; });
}

void Spawner::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) return;
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job.fn();
    lock.lock();
    if (job.done) *job.done = true;
    cv_.notify_all();
  }
}

namespace {

constexpr int kChildConfigFd = 3;
constexpr int kChildStatusFd = 4;
constexpr int kChildControlFd = 5;

struct ChildArgs {
  unsigned uid;  // inside the user namespace
  unsigned gid;
  int config_fd;
  int status_fd;
  int control_fd;
  const char* helper;
  char* const* argv;
  char* const* envp;
};

void child_report(int fd, int err, const char* step) {
  InitStatus st{};
  st.err = err;
  std::size_t n = std::strlen(step);
  if (n >= sizeof st.step) n = sizeof st.step - 1;
  std::memcpy(st.step, step, n);
  (void)!::write(fd, &st, sizeof st);
}

// Runs in the cloned child of a multithreaded process: raw syscalls only
// (no malloc, no locks, no stdio) until execve.
[[noreturn]] void child_main(const ChildArgs& a) {
  // First, before anything can block: die with the server, and keep no
  // descriptor but our three. A child still waiting for "go" must not hold
  // the server's stdio (the client would never see EOF) nor a sibling's
  // config socket (the sibling would never see EOF when the server dies).
  syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  // Parent-side fds were placed at >= 10, so these dup2s cannot collide.
  if (::dup2(a.config_fd, kChildConfigFd) < 0 || ::dup2(a.status_fd, kChildStatusFd) < 0 ||
      ::dup2(a.control_fd, kChildControlFd) < 0) {
    child_report(a.status_fd, errno, "dup2 init fds");
    _exit(1);
  }
  syscall(SYS_close_range, 6U, ~0U, 0U);
  syscall(SYS_close_range, 0U, 2U, 0U);  // init fills 0-2 with /dev/null
  char go = 0;
  ssize_t n;
  do {
    n = ::read(kChildConfigFd, &go, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) _exit(1);  // the parent gave up on us, or died
  // The id maps exist now, but our kernel ids are still the server's: take
  // the mapped identity (with CAP_SETUID/SETGID of the new namespace).
  if (syscall(SYS_setresgid, a.gid, a.gid, a.gid) != 0 || syscall(SYS_setresuid, a.uid, a.uid, a.uid) != 0) {
    child_report(kChildStatusFd, errno, "become sandbox uid/gid");
    _exit(1);
  }
  if (int err = keep_caps_across_exec(); err != 0) {
    child_report(kChildStatusFd, err, "keep capabilities across exec");
    _exit(1);
  }
  // Changing credentials cleared the parent-death signal: set it again.
  syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  ::execve(a.helper, a.argv, a.envp);
  child_report(kChildStatusFd, errno, "execve sandcastle-init");
  _exit(127);
}

UniqueFd high_fd(int fd) {
  // Above the numbers the child dup2s onto.
  int h = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
  ::close(fd);
  return UniqueFd(h);
}

Status write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Error::from_errno("write init config");
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return {};
}

Status read_init_status(int fd) {
  InitStatus result{};
  std::size_t got = 0;
  while (got < sizeof result) {
    struct pollfd p {fd, POLLIN, 0};
    int r = ::poll(&p, 1, 30'000);
    if (r == 0) return Error::make(ErrorCode::kTimeout, "sandbox init did not report");
    if (r < 0 && errno == EINTR) continue;
    ssize_t n = ::read(fd, reinterpret_cast<char*>(&result) + got, sizeof result - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Error::make(ErrorCode::kInternal, "sandbox init exited during setup");
    got += static_cast<std::size_t>(n);
  }
  if (result.err != 0) {
    result.step[sizeof result.step - 1] = '\0';
    return Error::from_errno(result.step, result.err);
  }
  return {};
}

}  // namespace

void kill_and_reap(InitProcess& init) {
  if (init.pidfd) {
    syscall(SYS_pidfd_send_signal, init.pidfd.get(), SIGKILL, nullptr, 0);
    siginfo_t si{};
    while (::waitid(P_PIDFD, static_cast<id_t>(init.pidfd.get()), &si, WEXITED) != 0 && errno == EINTR) {
    }
    init.pidfd.reset();
  }
  init.control.reset();
  init.pid = -1;
}

Result<PendingInit> spawn_pending_init(Spawner& spawner, const SpawnRequest& req) {
  int cfg[2], status[2], ctl[2];
  // A socket rather than a pipe, so writing to a helper that died is EPIPE
  // (MSG_NOSIGNAL) and never a SIGPIPE to the server.
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, cfg) != 0)
    return Error::from_errno("socketpair for init config");
  UniqueFd cfg_r = high_fd(cfg[0]), cfg_w(cfg[1]);
  if (::pipe2(status, O_CLOEXEC) != 0) return Error::from_errno("pipe for init status");
  UniqueFd st_r(status[0]), st_w = high_fd(status[1]);
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) != 0)
    return Error::from_errno("socketpair for init control");
  UniqueFd ctl_server(ctl[0]), ctl_child = high_fd(ctl[1]);
  if (!cfg_r || !st_w || !ctl_child) return Error::from_errno("dup init fds");

  static char arg0[] = "sandcastle-init";
  char* argv[] = {arg0, nullptr};
  char* envp[] = {nullptr};
  ChildArgs args{req.ids.inside_uid, req.ids.inside_gid, cfg_r.get(), st_w.get(), ctl_child.get(), req.helper_path.c_str(), argv, envp};

  int pidfd = -1;
  struct clone_args ca {};
  ca.flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
             CLONE_NEWUTS | CLONE_NEWCGROUP | CLONE_PIDFD;
  ca.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
  ca.exit_signal = SIGCHLD;
  // v2: born inside its cgroup, so not even the first instruction escapes it.
  if (req.cgroup && req.cgroup->v2_dir_fd() >= 0) {
    ca.flags |= CLONE_INTO_CGROUP;
    ca.cgroup = static_cast<std::uint64_t>(req.cgroup->v2_dir_fd());
  }
  long pid = -1;
  int clone_errno = 0;
  spawner.run([&] {
    pid = syscall(SYS_clone3, &ca, sizeof ca);
    if (pid == 0) child_main(args);
    clone_errno = errno;
  });
  if (pid < 0) return Error::from_errno("clone3 sandbox namespaces", clone_errno);

  PendingInit pending;
  InitProcess& init = pending.process;
  init.pid = static_cast<pid_t>(pid);
  init.pidfd = UniqueFd(pidfd);
  cfg_r.reset();
  st_w.reset();
  ctl_child.reset();
  auto fail = [&](Error e) -> Result<PendingInit> {
    kill_and_reap(init);
    return e;
  };

  if (auto st = write_id_maps(init.pid, req.ids); !st) return fail(st.take_error());
  if (req.cgroup)
    if (auto st = req.cgroup->add_process(init.pid); !st) return fail(st.take_error());
  // One write: the go byte (the child takes its mapped identity and execs
  // the helper), then the InitConfig the helper reads after exec.
  std::string msg(1, 'g');
  std::uint32_t len = static_cast<std::uint32_t>(req.config.size());
  msg.append(reinterpret_cast<const char*>(&len), sizeof len);
  msg += req.config;
  if (auto st = write_all(cfg_w.get(), msg.data(), msg.size()); !st) return fail(st.take_error());
  init.control = std::move(ctl_server);
  pending.config = std::move(cfg_w);
  pending.status = std::move(st_r);
  return pending;
}

Result<InitProcess> start_init(PendingInit pending, const std::string& finish_config) {
  InitProcess init = std::move(pending.process);
  auto fail = [&](Error e) -> Result<InitProcess> {
    kill_and_reap(init);
    return e;
  };
  std::string msg;
  std::uint32_t len = static_cast<std::uint32_t>(finish_config.size());
  msg.append(reinterpret_cast<const char*>(&len), sizeof len);
  msg += finish_config;
  if (auto st = write_all(pending.config.get(), msg.data(), msg.size()); !st) return fail(st.take_error());
  pending.config.reset();
  // "prepared" (usually written long ago by a prespawned init), then "ready".
  for (int i = 0; i < 2; ++i)
    if (auto st = read_init_status(pending.status.get()); !st) return fail(st.take_error());
  return init;
}

}  // namespace sandcastle::sandbox::native
