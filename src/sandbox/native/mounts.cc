#include "sandbox/native/mounts.h"

#include <fcntl.h>
#include <linux/mount.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "sandbox/native/persist_mirror.h"

namespace sandcastle::sandbox::native {
namespace {

// Attributes applied to binds: mounts inherited from the host are locked in a
// user namespace, so we may only add restrictions, which is all we want.
int set_attrs(const std::string& path, std::uint64_t attrs, bool recursive) {
  struct mount_attr attr {};
  attr.attr_set = attrs;
  return static_cast<int>(syscall(SYS_mount_setattr, AT_FDCWD, path.c_str(),
                                  recursive ? AT_RECURSIVE : 0, &attr, sizeof attr));
}

constexpr std::uint64_t kSealed = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;

std::optional<StepError> apply(const std::string& root, const MountOp& op) {
  std::string dst = op.dst.empty() ? root : (root == "/" ? root : root + "/") + op.dst;
  switch (op.kind) {
    case MountKind::kMkdir:
      if (::mkdir(dst.c_str(), op.mode) != 0 && errno != EEXIST) return step_failed(op.describe());
      // mkdir honours the umask; the plan's mode is what we want.
      if (::chmod(dst.c_str(), op.mode) != 0) return step_failed(op.describe());
      return std::nullopt;
    case MountKind::kTmpfs: {
      char mode[16];
      (void)std::snprintf(mode, sizeof mode, "0%o", op.mode);  // at most 13 bytes
      std::string data = "size=" + std::to_string(op.size) + ",mode=" + mode;
      // "noexec" is a mount flag, the rest are tmpfs options.
      unsigned long flags = MS_NOSUID | MS_NODEV;
      std::size_t start = 0;
      while (start < op.options.size()) {
        std::size_t end = op.options.find(',', start);
        if (end == std::string::npos) end = op.options.size();
        std::string opt = op.options.substr(start, end - start);
        if (opt == "noexec") flags |= MS_NOEXEC;
        else if (!opt.empty()) data += "," + opt;
        start = end + 1;
      }
      if (::mount("tmpfs", dst.c_str(), "tmpfs", flags, data.c_str()) != 0)
        return step_failed(op.describe());
      return std::nullopt;
    }
    case MountKind::kBind:
      if (::mount(op.src.c_str(), dst.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
        return step_failed(op.describe());
      if (set_attrs(dst, (op.writable ? 0 : MOUNT_ATTR_RDONLY) | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                    true) != 0)
        return step_failed("restrict " + op.describe());
      return std::nullopt;
    case MountKind::kBindFile: {
      int fd = ::open(dst.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
      if (fd < 0) return step_failed("create /" + op.dst);
      ::close(fd);
      if (::mount(op.src.c_str(), dst.c_str(), nullptr, MS_BIND, nullptr) != 0)
        return step_failed(op.describe());
      // Device nodes keep dev (they are the point) but lose suid and exec.
      if (set_attrs(dst, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false) != 0)
        return step_failed("restrict " + op.describe());
      return std::nullopt;
    }
    case MountKind::kProc:
      if (::mount("proc", dst.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
        return step_failed(op.describe());
      return std::nullopt;
    case MountKind::kDevpts: {
      std::string data = "newinstance,ptmxmode=0666,mode=0620,max=" + std::to_string(kMaxPtysPerSandbox);
      if (::mount("devpts", dst.c_str(), "devpts", MS_NOSUID | MS_NOEXEC, data.c_str()) != 0)
        return step_failed(op.describe());
      return std::nullopt;
    }
    case MountKind::kSymlink:
      if (::symlink(op.src.c_str(), dst.c_str()) != 0 && errno != EEXIST)
        return step_failed(op.describe());
      return std::nullopt;
    case MountKind::kReadOnly:
      if (set_attrs(dst, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false) != 0)
        return step_failed(op.describe());
      return std::nullopt;
    case MountKind::kSubmount: {
      if (::mount(dst.c_str(), dst.c_str(), nullptr, MS_BIND, nullptr) != 0) return step_failed(op.describe());
      std::uint64_t attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
      if (!op.writable) attrs |= MOUNT_ATTR_RDONLY;
      if (op.options == "noexec") attrs |= MOUNT_ATTR_NOEXEC;
      if (set_attrs(dst, attrs, false) != 0) return step_failed("restrict " + op.describe());
      return std::nullopt;
    }
    case MountKind::kResize: {
      std::string data = "size=" + std::to_string(op.size);
      if (!op.options.empty()) data += "," + op.options;
      // The mount's own flags are restated: a remount sets them too.
      if (::mount(nullptr, dst.c_str(), nullptr, MS_REMOUNT | MS_NOSUID | MS_NODEV, data.c_str()) != 0)
        return step_failed(op.describe());
      return std::nullopt;
    }
    case MountKind::kMask: {
      // Binds, not tmpfs instances: hiding a directory costs no filesystem.
      struct stat st {};
      if (::lstat(dst.c_str(), &st) != 0) {
        if (errno == ENOENT) return std::nullopt;  // this kernel has no such entry
        return step_failed(op.describe());
      }
      std::string src = op.src + (S_ISDIR(st.st_mode) ? "/dir" : "/file");
      if (::mount(src.c_str(), dst.c_str(), nullptr, MS_BIND, nullptr) != 0)
        return step_failed(op.describe());
      if (set_attrs(dst, kSealed, false) != 0) return step_failed("restrict " + op.describe());
      return std::nullopt;
    }
    case MountKind::kReadOnlyPath: {
      struct stat st {};
      if (::lstat(dst.c_str(), &st) != 0) {
        if (errno == ENOENT) return std::nullopt;
        return step_failed(op.describe());
      }
      if (::mount(dst.c_str(), dst.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
        return step_failed(op.describe());
      if (set_attrs(dst, kSealed, true) != 0) return step_failed("restrict " + op.describe());
      return std::nullopt;
    }
    case MountKind::kOverlay: {
      // In a user namespace overlayfs keeps whiteouts and opaque markers as
      // user.overlay.* xattrs (userxattr); the layer paths come from the
      // server's store and never hold ',' or ':' (image_root.cc checks).
      const std::string rw = root + "/" + op.options;
      std::string data =
          "lowerdir=" + op.src + ",upperdir=" + rw + "/upper,workdir=" + rw + "/work,userxattr";
      if (::mount("overlay", dst.c_str(), "overlay", MS_NOSUID | MS_NODEV, data.c_str()) != 0)
        return step_failed(op.describe());
      return std::nullopt;
    }
    case MountKind::kRealDir: {
      // The image is hostile input: a symlink where a mount point goes would
      // be followed to the host's tree (the init still sees it). Its parent
      // was made a real directory by the op before, so lstat is enough.
      struct stat st {};
      if (::lstat(dst.c_str(), &st) == 0 && !S_ISDIR(st.st_mode) && ::unlink(dst.c_str()) != 0)
        return step_failed(op.describe());
      if (::mkdir(dst.c_str(), op.mode) != 0 && errno != EEXIST) return step_failed(op.describe());
      if (::lstat(dst.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return step_failed(op.describe(), ENOTDIR);
      if (::chmod(dst.c_str(), op.mode) != 0) return step_failed(op.describe());
      return std::nullopt;
    }
    case MountKind::kMove: {
      std::string src = root + "/" + op.src;
      if (::mount(src.c_str(), dst.c_str(), nullptr, MS_MOVE, nullptr) != 0)
        return step_failed(op.describe());
      return std::nullopt;
    }
    case MountKind::kRestoreMirror:  // only in the base plan (build_root_filesystem)
      return step_failed(op.describe(), EINVAL);
  }
  return step_failed("unknown mount op", EINVAL);
}

}  // namespace

std::optional<StepError> build_root_filesystem(const InitConfig& config, int* rw_fd) {
  const std::string& root = config.new_root;
  // 1. Nothing we mount may propagate back to the host's mount table.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return step_failed("make / private");
  // 2. The new root is a small tmpfs holding only mount points and links.
  if (::mount("tmpfs", root.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755") != 0)
    return step_failed("mount root tmpfs on " + root);
  // 3. The plan, in order (parents before children).
  for (const MountOp& op : config.mounts) {
    if (op.kind == MountKind::kRestoreMirror) {
      // A persistent sandbox without root: its upper dir from disk.
      if (auto err = restore_mirror_at_mount(config, op.src, root + "/" + op.dst, op.size))
        return err;
      continue;
    }
    if (auto err = apply(root, op)) return err;
  }
  // 4. Swap roots: pivot_root(".", ".") stacks the old root under the new
  // one, so a lazy unmount of "." removes the host tree from view entirely.
  if (rw_fd && !config.root_subdir.empty()) {
    *rw_fd = ::open((root + "/rw").c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (*rw_fd < 0) return step_failed("keep the image's rw dir");
  }
  const std::string top = config.root_subdir.empty() ? root : root + "/" + config.root_subdir;
  if (::chdir(top.c_str()) != 0) return step_failed("chdir new root");
  if (syscall(SYS_pivot_root, ".", ".") != 0) return step_failed("pivot_root");
  if (::umount2(".", MNT_DETACH) != 0) return step_failed("detach old root");
  if (::chdir("/") != 0) return step_failed("chdir /");
  return std::nullopt;
}

std::optional<StepError> finish_root_filesystem(const FinishConfig& config) {
  for (const MountOp& op : config.mounts) {
    if (auto err = apply("/", op)) return err;
  }
  return std::nullopt;
}

}  // namespace sandcastle::sandbox::native
