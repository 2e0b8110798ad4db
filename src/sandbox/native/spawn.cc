#include "sandbox/native/spawn.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <thread>

#include "sandbox/native/cgroup.h"
#include "sandbox/native/wire.h"
#include "sandbox/native/zygote.h"

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

Status send_all(int fd, const char* p, std::size_t n) {
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
    // Not our child (the zygote's, which the kernel reaps for it): the pidfd
    // turns readable once init and, with it, its PID namespace are gone.
    struct pollfd p {init.pidfd.get(), POLLIN, 0};
    while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
    }
    init.pidfd.reset();
  }
  init.control.reset();
  init.pid = -1;
}

Result<PendingInit> spawn_pending_init(Zygote& zygote, const SpawnRequest& req) {
  int cfg[2], status[2], ctl[2];
  // A socket rather than a pipe, so writing to a helper that died is EPIPE
  // (MSG_NOSIGNAL) and never a SIGPIPE to the server.
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, cfg) != 0)
    return Error::from_errno("socketpair for init config");
  UniqueFd cfg_r(cfg[0]), cfg_w(cfg[1]);
  if (::pipe2(status, O_CLOEXEC) != 0) return Error::from_errno("pipe for init status");
  UniqueFd st_r(status[0]), st_w(status[1]);
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) != 0)
    return Error::from_errno("socketpair for init control");
  UniqueFd ctl_server(ctl[0]), ctl_child(ctl[1]);

  ZygoteRequest zr;
  zr.clone_flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
                   CLONE_NEWCGROUP;
  zr.uid = req.ids.inside_uid;
  zr.gid = req.ids.inside_gid;
  int cgroup_fd = req.cgroup ? req.cgroup->v2_dir_fd() : -1;
  auto child = zygote.clone_init(req.helper_path, zr, cfg_r.get(), st_w.get(), ctl_child.get(), cgroup_fd);
  if (!child) return child.take_error();

  PendingInit pending;
  InitProcess& init = pending.process;
  init.pid = child->pid;
  init.pidfd = std::move(child->pidfd);
  init.zygote_generation = child->generation;
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
  if (auto st = send_all(cfg_w.get(), msg.data(), msg.size()); !st) return fail(st.take_error());
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
  if (auto st = send_all(pending.config.get(), msg.data(), msg.size()); !st)
    return fail(st.take_error());
  pending.config.reset();
  // "prepared" (usually written long ago by a prespawned init), then "ready".
  for (int i = 0; i < 2; ++i)
    if (auto st = read_init_status(pending.status.get()); !st) return fail(st.take_error());
  return init;
}

}  // namespace sandcastle::sandbox::native
