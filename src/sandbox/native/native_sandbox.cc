#include "sandbox/native/native_sandbox.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <mutex>
#include <vector>

#include "common/log.h"
#include "sandbox/native/fd_passing.h"
#include "sandbox/native/file_worker.h"
#include "sandbox/native/wire.h"

namespace sandcastle::sandbox::native {
NativeSandbox::NativeSandbox(std::string id, SandboxSpec spec,
                             std::shared_ptr<BackendShared> shared, IdMapping ids,
                             std::shared_ptr<SandboxCgroup> cgroup, InitProcess init)
    : id_(std::move(id)),
      spec_(std::move(spec)),
      shared_(std::move(shared)),
      ids_(ids),
      cgroup_(std::move(cgroup)),
      init_(std::move(init)) {}

NativeSandbox::~NativeSandbox() {
  (void)destroy();
}

Status NativeSandbox::check_alive() const {
  if (destroyed_) return Error::make(ErrorCode::kUnavailable, "sandbox " + id_ + " was destroyed");
  return {};
}

Result<UniqueFd> NativeSandbox::connect_files() {
  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0)
    return Error::from_errno("socketpair for the file channel");
  UniqueFd ours(sp[0]), theirs(sp[1]);
  std::shared_lock lock(mu_);
  if (auto st = check_alive(); !st) return st.take_error();
  std::string bytes =
      encode_control(ControlKind::kFiles, encode(FilesWire{spec_.limits().file_size_bytes}));
  const int fds[1] = {theirs.get()};
  if (int e = send_with_fds(init_.control.get(), bytes, fds, 1); e != 0)
    return Error::from_errno("send file worker request to sandbox init", e);
  return ours;
}

Result<std::string> NativeSandbox::worker_path(const std::string& path) const {
  auto rel = sandbox_relative_path(path, spec_.workdir());
  if (!rel) return rel.take_error();
  return "/" + *rel;
}

Result<FileStat> NativeSandbox::stat(const std::string& path) {
  auto p = worker_path(path);
  if (!p) return p.take_error();
  return files_.stat(*p);
}

Result<Listing> NativeSandbox::list(const std::string& path, const ListOptions& options) {
  auto p = worker_path(path);
  if (!p) return p.take_error();
  return files_.list(*p, options);
}

Result<FileData> NativeSandbox::read_file(const std::string& path, const ReadRange& range) {
  auto p = worker_path(path);
  if (!p) return p.take_error();
  return files_.read(*p, range);
}

Status NativeSandbox::write_file(const std::string& path, std::string_view data, std::uint32_t mode,
                                 bool parents) {
  auto p = worker_path(path);
  if (!p) return p.take_error();
  if (*p == "/") return Error::make(ErrorCode::kInvalidArgument, "refusing to write /");
  return files_.write(*p, data, mode, parents);
}

Status NativeSandbox::mkdir(const std::string& path, bool parents) {
  auto p = worker_path(path);
  if (!p) return p.take_error();
  return files_.mkdir(*p, parents);
}

Status NativeSandbox::remove(const std::string& path, bool recursive) {
  auto p = worker_path(path);
  if (!p) return p.take_error();
  if (*p == "/") return Error::make(ErrorCode::kInvalidArgument, "refusing to operate on /");
  return files_.remove(*p, recursive);
}

Result<Usage> NativeSandbox::usage() {
  {
    std::shared_lock lock(mu_);
    if (auto st = check_alive(); !st) return st.take_error();
  }
  Usage u;
  // Disk use and (without a cgroup) the process count are looked up inside
  // the sandbox, like every other look at its tree. A sandbox whose init
  // has died can start no worker: it has no processes and no disk left.
  auto figures = files_.usage();
  if (!figures) figures = UsageFigures{};
  u.disk_bytes = figures->disk_bytes;
  if (cgroup_) {
    u.accounting = std::string("cgroup ") + cgroup_version_name(cgroup_->version());
    u.memory_bytes = cgroup_->memory_current();
    u.peak_memory_bytes = cgroup_->memory_peak();
    u.cpu_time = std::chrono::microseconds(cgroup_->cpu_usage_us());
    u.processes = cgroup_->process_count();
  } else {
    u.accounting = "rlimits only";
    u.processes = figures->processes;
  }
  return u;
}

Status NativeSandbox::publish_shared(const std::string& name, std::string_view data) {
  return publish_shared_file(shared_->dirs, name, data);
}

bool NativeSandbox::has_shared(const std::string& name) const {
  if (name.empty() || name.find('/') != std::string::npos || name[0] == '.') return false;
  return ::access((shared_->dirs.share + "/" + name).c_str(), F_OK) == 0;
}

Result<UniqueFd> NativeSandbox::listen_loopback(std::uint16_t port) {
  // The sandbox's init opens the socket in its network namespace and sends
  // it back on a reply socket of our own, so concurrent requests cannot
  // pick up each other's answers.
  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0)
    return Error::from_errno("socketpair for listener reply");
  UniqueFd reply(sp[0]), reply_remote(sp[1]);
  {
    std::shared_lock lock(mu_);
    if (auto st = check_alive(); !st) return st.take_error();
    std::string bytes = encode_control(ControlKind::kListen, encode(ListenWire{port}));
    const int fds[1] = {reply_remote.get()};
    if (int e = send_with_fds(init_.control.get(), bytes, fds, 1); e != 0)
      return Error::from_errno("send listen request to sandbox init", e);
  }
  reply_remote.reset();  // init's copy is its only one: EOF if it dies

  struct pollfd p {
    reply.get(), POLLIN, 0
  };
  int r;
  do {
    r = ::poll(&p, 1, 10'000);
  } while (r < 0 && errno == EINTR);
  if (r < 0) return Error::from_errno("poll listener reply");
  if (r == 0)
    return Error::make(ErrorCode::kTimeout,
                       "sandbox " + id_ + ": init did not answer the listen request");
  char buf[512];
  ReceivedMessage m = recv_with_fds(reply.get(), buf, sizeof buf, MSG_DONTWAIT);
  UniqueFd listener(m.nfds > 0 ? m.fds[0] : -1);
  if (m.nfds > 0) m.fds[0] = -1;
  m.close_fds();
  if (m.len < 0) return Error::from_errno("receive listener from sandbox init", m.err);
  if (m.len == 0) return Error::make(ErrorCode::kUnavailable, "sandbox " + id_ + " went away");
  auto rep = decode_listen_reply(std::string_view(buf, static_cast<std::size_t>(m.len)));
  if (!rep || m.truncated)
    return Error::make(ErrorCode::kInternal, "listen: malformed reply from sandbox init");
  if (rep->err != 0) return Error::from_errno(rep->step, rep->err);
  if (!listener) return Error::make(ErrorCode::kInternal, "listen: sandbox init sent no socket");
  // The fd crossed from the sandbox: make sure it is what was asked for.
  int domain = 0, accepting = 0;
  socklen_t len = sizeof domain;
  bool is_listener =
      ::getsockopt(listener.get(), SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && domain == AF_INET;
  len = sizeof accepting;
  is_listener = is_listener &&
                ::getsockopt(listener.get(), SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) == 0 &&
                accepting;
  if (!is_listener)
    return Error::make(ErrorCode::kInternal, "listen: sandbox init sent something else");
  return listener;
}

Status NativeSandbox::destroy() {
  {
    std::unique_lock lock(mu_);
    if (destroyed_) return {};
    destroyed_ = true;
    // SIGKILL to PID 1 now: the kernel kills every process of the sandbox,
    // and with the last one its mounts go. Waiting for that and removing the
    // cgroup happen on the reaper thread, off the caller's path.
    shared_->reaper.kill_and_release(id_, std::move(init_), cgroup_);
  }
  // Outside mu_: a call in progress holds the channel until its worker's
  // death reaches it (at once: the worker died with init).
  files_.close();
  return {};
}

}  // namespace sandcastle::sandbox::native
