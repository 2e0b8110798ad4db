#include "sandbox/native/native_sandbox.h"

#include <dirent.h>
#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cctype>
#include <mutex>
#include <vector>

#include "common/log.h"
#include "sandbox/native/fd_passing.h"
#include "sandbox/native/sandbox_fs.h"
#include "sandbox/native/wire.h"

namespace sandcastle::sandbox::native {
namespace {

// As root, file operations run with the sandbox user's host ids on this
// thread only (fsuid/fsgid and the group list are per-thread in the kernel;
// the raw syscalls avoid glibc's process-wide broadcast). Dropping fsuid 0
// also drops CAP_DAC_OVERRIDE, so a path the sandbox user cannot read — a
// host file bound read-only into the sandbox, say — is refused to us too.
class FsCredsGuard {
 public:
  FsCredsGuard(uid_t uid, gid_t gid) : active_(::geteuid() == 0) {
    if (!active_) return;
    int n = ::getgroups(0, nullptr);
    groups_.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    if (n > 0) ::getgroups(n, groups_.data());
    syscall(SYS_setgroups, 0, nullptr);
    old_gid_ = static_cast<gid_t>(syscall(SYS_setfsgid, gid));
    old_uid_ = static_cast<uid_t>(syscall(SYS_setfsuid, uid));
  }
  ~FsCredsGuard() {
    if (!active_) return;
    syscall(SYS_setfsuid, old_uid_);
    syscall(SYS_setfsgid, old_gid_);
    syscall(SYS_setgroups, groups_.size(), groups_.data());
  }
  FsCredsGuard(const FsCredsGuard&) = delete;
  FsCredsGuard& operator=(const FsCredsGuard&) = delete;

 private:
  bool active_;
  std::vector<gid_t> groups_;
  uid_t old_uid_ = 0;
  gid_t old_gid_ = 0;
};

}  // namespace

NativeSandbox::NativeSandbox(std::string id, SandboxSpec spec, std::shared_ptr<BackendShared> shared,
                             IdMapping ids, std::shared_ptr<SandboxCgroup> cgroup, InitProcess init,
                             UniqueFd root)
    : id_(std::move(id)),
      spec_(std::move(spec)),
      shared_(std::move(shared)),
      ids_(ids),
      cgroup_(std::move(cgroup)),
      init_(std::move(init)),
      root_(std::move(root)) {
  shared_->track(this);
}

// Destroyed before it is untracked: a shutdown running meanwhile may still
// call destroy() on it (a no-op then), never on a destructed object.
NativeSandbox::~NativeSandbox() {
  (void)destroy();
  shared_->untrack(this);
}

Status NativeSandbox::check_alive() const {
  if (destroyed_) return Error::make(ErrorCode::kUnavailable, "sandbox " + id_ + " was destroyed");
  return {};
}

template <typename F>
auto NativeSandbox::with_root(F&& f) -> decltype(f(0)) {
  std::shared_lock lock(mu_);
  if (auto st = check_alive(); !st) return st.take_error();
  FsCredsGuard creds(ids_.host_uid, ids_.host_gid);
  return f(root_.get());
}

Result<FileStat> NativeSandbox::stat(const std::string& path) {
  auto rel = sandbox_relative_path(path, spec_.workdir());
  if (!rel) return rel.take_error();
  return with_root([&](int root) { return fs_stat(root, *rel); });
}

Result<std::vector<FileStat>> NativeSandbox::list(const std::string& path) {
  auto rel = sandbox_relative_path(path, spec_.workdir());
  if (!rel) return rel.take_error();
  return with_root([&](int root) { return fs_list(root, *rel); });
}

Result<std::string> NativeSandbox::read_file(const std::string& path, std::uint64_t max_bytes) {
  auto rel = sandbox_relative_path(path, spec_.workdir());
  if (!rel) return rel.take_error();
  return with_root([&](int root) { return fs_read(root, *rel, max_bytes); });
}

Status NativeSandbox::write_file(const std::string& path, std::string_view data, std::uint32_t mode) {
  auto rel = sandbox_relative_path(path, spec_.workdir());
  if (!rel) return rel.take_error();
  return with_root([&](int root) { return fs_write(root, *rel, data, mode); });
}

Status NativeSandbox::mkdir(const std::string& path, bool parents) {
  auto rel = sandbox_relative_path(path, spec_.workdir());
  if (!rel) return rel.take_error();
  return with_root([&](int root) { return fs_mkdir(root, *rel, parents); });
}

Status NativeSandbox::remove(const std::string& path, bool recursive) {
  auto rel = sandbox_relative_path(path, spec_.workdir());
  if (!rel) return rel.take_error();
  return with_root([&](int root) { return fs_remove(root, *rel, recursive); });
}

Result<Usage> NativeSandbox::usage() {
  std::shared_lock lock(mu_);
  if (auto st = check_alive(); !st) return st.take_error();
  Usage u;
  u.disk_bytes = fs_used_bytes(root_.get(), "workspace");
  if (cgroup_) {
    u.accounting = std::string("cgroup ") + cgroup_version_name(cgroup_->version());
    u.memory_bytes = cgroup_->memory_current();
    u.peak_memory_bytes = cgroup_->memory_peak();
    u.cpu_time = std::chrono::microseconds(cgroup_->cpu_usage_us());
    u.processes = cgroup_->process_count();
  } else {
    u.accounting = "rlimits only";
    // Count the sandbox's processes through its own /proc.
    std::string proc = "/proc/" + std::to_string(init_.pid) + "/root/proc";
    if (DIR* d = ::opendir(proc.c_str())) {
      while (struct dirent* e = ::readdir(d))
        if (std::isdigit(static_cast<unsigned char>(e->d_name[0]))) ++u.processes;
      ::closedir(d);
    }
  }
  return u;
}

Status NativeSandbox::publish_shared(const std::string& name, std::string_view data) {
  return publish_shared_file(shared_->dirs, name, data);
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

  struct pollfd p {reply.get(), POLLIN, 0};
  int r;
  do {
    r = ::poll(&p, 1, 10'000);
  } while (r < 0 && errno == EINTR);
  if (r < 0) return Error::from_errno("poll listener reply");
  if (r == 0) return Error::make(ErrorCode::kTimeout, "sandbox " + id_ + ": init did not answer the listen request");
  char buf[512];
  ReceivedMessage m = recv_with_fds(reply.get(), buf, sizeof buf, MSG_DONTWAIT);
  UniqueFd listener(m.nfds > 0 ? m.fds[0] : -1);
  if (m.nfds > 0) m.fds[0] = -1;
  m.close_fds();
  if (m.len < 0) return Error::from_errno("receive listener from sandbox init", m.err);
  if (m.len == 0) return Error::make(ErrorCode::kUnavailable, "sandbox " + id_ + " went away");
  auto rep = decode_listen_reply(std::string_view(buf, static_cast<std::size_t>(m.len)));
  if (!rep || m.truncated) return Error::make(ErrorCode::kInternal, "listen: malformed reply from sandbox init");
  if (rep->err != 0) return Error::from_errno(rep->step, rep->err);
  if (!listener) return Error::make(ErrorCode::kInternal, "listen: sandbox init sent no socket");
  // The fd crossed from the sandbox: make sure it is what was asked for.
  int domain = 0, accepting = 0;
  socklen_t len = sizeof domain;
  bool is_listener = ::getsockopt(listener.get(), SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 &&
                     domain == AF_INET;
  len = sizeof accepting;
  is_listener = is_listener &&
                ::getsockopt(listener.get(), SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) == 0 && accepting;
  if (!is_listener) return Error::make(ErrorCode::kInternal, "listen: sandbox init sent something else");
  return listener;
}

Status NativeSandbox::destroy() {
  std::unique_lock lock(mu_);
  if (destroyed_) return {};
  destroyed_ = true;
  root_.reset();
  // SIGKILL to PID 1 now: the kernel kills every process of the sandbox,
  // and with the last one its mounts go. Waiting for that and removing the
  // cgroup happen on the reaper thread, off the caller's path.
  shared_->reaper.kill_and_release(id_, std::move(init_), cgroup_);
  return {};
}

}  // namespace sandcastle::sandbox::native
