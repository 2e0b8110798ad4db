#include "sandbox/native/exec_proc.h"

#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace sandcastle::sandbox::native {
namespace {

// A plan path (relative to the host-side new root) as the sandbox sees it
// after pivot_root into new_root/root_subdir; empty when outside it.
std::string sandbox_path(const InitConfig& config, const std::string& dst) {
  std::size_t skip = 0;
  if (!config.root_subdir.empty()) {
    skip = config.root_subdir.size() + 1;
    if (dst.size() < skip || dst.compare(0, skip - 1, config.root_subdir) != 0 ||
        dst[skip - 1] != '/')
      return {};
  }
  std::string path(1, '/');
  path.append(dst, skip, std::string::npos);
  return path;
}

struct Detached {
  std::string path;
  int fd = -1;
};

// The new namespace's part: slave mounts, the masks cloned, procfs, the
// masks put back. On failure the caller returns to init's namespace.
std::optional<StepError> own_proc(const InitConfig& config, const std::string& proc) {
  // What init mounts later reaches this copy; nothing mounted here goes back.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0)
    return step_failed("make the exec's mounts slaves of init's");
  // The masks and read-only paths on the sandbox's /proc, detached copies
  // (with their attributes) to put on the new one.
  std::vector<Detached> subs;
  struct Closer {
    std::vector<Detached>& subs;
    ~Closer() {
      for (auto& d : subs) ::close(d.fd);
    }
  } closer{subs};
  for (const MountOp& op : config.mounts) {
    if (op.kind != MountKind::kMask && op.kind != MountKind::kReadOnlyPath) continue;
    std::string path = sandbox_path(config, op.dst);
    if (path.compare(0, proc.size() + 1, proc + "/") != 0) continue;
    long fd = syscall(SYS_open_tree, AT_FDCWD, path.c_str(),
                      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_SYMLINK_NOFOLLOW);
    if (fd < 0) {
      if (errno == ENOENT) continue;  // masked only where this kernel has it
      return step_failed("clone the mount on " + path);
    }
    subs.push_back({std::move(path), static_cast<int>(fd)});
  }
  if (::mount("proc", proc.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    return step_failed("mount the exec's " + proc);
  for (const auto& d : subs)
    if (syscall(SYS_move_mount, d.fd, "", AT_FDCWD, d.path.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0)
      return step_failed("mount " + d.path + " on the exec's " + proc);
  return std::nullopt;
}

}  // namespace

std::optional<StepError> mount_exec_proc(const InitConfig& config) {
  std::string proc;
  for (const MountOp& op : config.mounts)
    if (op.kind == MountKind::kProc) proc = sandbox_path(config, op.dst);
  if (proc.empty()) return std::nullopt;  // a plan without /proc: nothing to mirror
  const int init_ns = ::open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
  if (init_ns < 0) return step_failed("open init's mount namespace");
  std::optional<StepError> e;
  if (::unshare(CLONE_NEWNS) != 0) {
    e = step_failed("unshare mount namespace for /proc");
  } else if ((e = own_proc(config, proc)) && ::setns(init_ns, CLONE_NEWNS) != 0) {
    // Neither the exec's /proc nor init's namespace: no exec may run here.
    _exit(1);
  }
  ::close(init_ns);
  return e;
}

}  // namespace sandcastle::sandbox::native
