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
      root_(std::move(root)) {}

NativeSandbox::~NativeSandbox() { (void)destroy(); }

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
