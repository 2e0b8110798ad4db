#include "sandbox/native/sweep.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>

#include "common/log.h"
#include "common/unique_fd.h"
#include "sandbox/native/cgroup.h"
#include "sandbox/native/fs_util.h"
#include "sandbox/native/host_image.h"
#include "sandbox/native/save_freeze.h"

namespace sandcastle::sandbox::native {
namespace {

bool pid_exists(pid_t pid) {
  return ::kill(pid, 0) == 0 || errno == EPERM;
}

// Everything below is reached from a directory another user may have made
// (a runtime dir named like a dead server's, or a symlink inside one): as
// root, a followed symlink would unmount the host's own mounts. So every
// directory is opened relative to one already verified, never through a
// symlink, and the ones the server made itself must be ours and writable
// by no one else (so what is in them cannot be swapped).
UniqueFd open_dir_at(int parent, const std::string& name, bool must_be_ours) {
  UniqueFd fd(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return {};
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISDIR(st.st_mode)) return {};
  if (must_be_ours && (st.st_uid != ::geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0))
    return {};
  return fd;
}

std::vector<std::string> names_in(int dir) {
  std::vector<std::string> out;
  const int copy = ::fcntl(dir, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return out;
  DIR* d = ::fdopendir(copy);
  if (!d) {
    ::close(copy);
    return out;
  }
  ::rewinddir(d);
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
  return out;
}

bool is_real_dir_at(int dir, const std::string& name) {
  struct stat st {};
  return ::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

bool is_mount_root_at(int dir, const std::string& name, int flags = AT_SYMLINK_NOFOLLOW) {
  struct statx sx {};
  return ::statx(dir, name.c_str(), flags, 0, &sx) == 0 &&
         (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
         (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

// umount2 takes a path, not a directory fd: `name` in `dir` (open, verified)
// is unmounted by path only when `dir_path` still resolves, with no symlink
// anywhere on the way, to that very directory (every directory on it is
// the server's, so nobody else can redirect it before the call); the last
// component is not followed either (UMOUNT_NOFOLLOW).
int unmount_entry(int dir, const std::string& dir_path, const std::string& name, int flags) {
  if (!is_real_dir_at(dir, name)) return -1;
  struct open_how how {};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_NO_SYMLINKS;
  UniqueFd again(
      static_cast<int>(::syscall(SYS_openat2, AT_FDCWD, dir_path.c_str(), &how, sizeof how)));
  struct stat a {
  }, b{};
  if (!again || ::fstat(again.get(), &a) != 0 || ::fstat(dir, &b) != 0 || a.st_dev != b.st_dev ||
      a.st_ino != b.st_ino)
    return -1;
  return ::umount2((dir_path + "/" + name).c_str(), flags | UMOUNT_NOFOLLOW);
}

// A server killed during copy_storage leaves its source ext4 frozen
// (FIFREEZE): its sandboxes' writers sit in D state, unkillable, until it is
// thawed; so this comes before the cgroup sweep, which waits for them.
void thaw_persist_mounts(int base) {
  UniqueFd pst = open_dir_at(base, "pst", true);
  if (!pst) return;
  for (const auto& id : names_in(pst.get())) {
    UniqueFd root(::openat(pst.get(), id.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (root && is_mount_root_at(root.get(), "", AT_EMPTY_PATH))
      (void)::ioctl(root.get(), FITHAW, 0);
  }
}

// The mounts a dead server left in its runtime dir `path` (open as `base`)
// unmounted, never deleted: idmapped layer binds of an image sandbox being
// made (image_root.h: each sandbox's dir bound onto itself, the layers'
// binds inside) and persistent storage (persist_disk.h: pst/<id> the ext4,
// whose loop device then detaches itself; pmap/<sandbox>/d its idmapped
// binds). False if a storage stayed mounted.
bool unmount_leftovers(int base, const std::string& path) {
  if (UniqueFd img = open_dir_at(base, "img", true)) {
    const std::string img_path = path + "/img";
    for (const auto& sb : names_in(img.get())) {
      UniqueFd sb_dir = open_dir_at(img.get(), sb, false);
      if (!sb_dir) continue;
      const std::string sb_path = img_path + "/" + sb;
      for (const auto& n : names_in(sb_dir.get()))
        (void)unmount_entry(sb_dir.get(), sb_path, n, MNT_DETACH);
      (void)unmount_entry(img.get(), img_path, sb, MNT_DETACH);
    }
  }
  if (UniqueFd pmap = open_dir_at(base, "pmap", true)) {
    const std::string pmap_path = path + "/pmap";
    for (const auto& sb : names_in(pmap.get())) {
      UniqueFd sb_dir = open_dir_at(pmap.get(), sb, false);
      if (sb_dir) (void)unmount_entry(sb_dir.get(), pmap_path + "/" + sb, "d", MNT_DETACH);
    }
    pmap.reset();
    (void)unmount_entry(base, path, "pmap", MNT_DETACH);
  }
  bool all = true;
  if (UniqueFd pst = open_dir_at(base, "pst", true)) {
    const std::string pst_path = path + "/pst";
    for (const auto& id : names_in(pst.get())) {
      // At once when nothing uses it, lazily when something still does.
      if (unmount_entry(pst.get(), pst_path, id, 0) != 0 && errno == EBUSY)
        (void)unmount_entry(pst.get(), pst_path, id, MNT_DETACH);
      if (is_mount_root_at(pst.get(), id)) all = false;
    }
    pst.reset();
    (void)unmount_entry(base, path, "pst", MNT_DETACH);
  }
  return all;
}

struct StaleDir {
  std::string path;
  UniqueFd fd;
};

}  // namespace

SweepReport sweep_leftovers() {
  SweepReport rep;
  // A dead server's runtime dirs: only where this server would make its own
  // (as root /run, which only root may write; never another user's /tmp
  // entries), and only real directories that are ours.
  std::vector<StaleDir> stale;
  const std::string parent = runtime_parent();
  if (UniqueFd pfd{::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)}) {
    for (const auto& name : names_in(pfd.get())) {
      std::string_view rest;
      auto owner = owner_pid(name, "sandcastle-", &rest);
      // sandcastle-<pid>, or an engine backend's sandcastle-<pid>-engine-<n>.
      if (!owner || (!rest.empty() && rest.rfind("-engine-", 0) != 0) || pid_exists(*owner))
        continue;
      UniqueFd fd = open_dir_at(pfd.get(), name, true);
      if (!fd) continue;  // another user's, or not a directory
      stale.push_back({parent + "/" + name, std::move(fd)});
    }
  }
  for (const auto& s : stale) thaw_persist_mounts(s.fd.get());
  // A frozen sandbox's processes keep its cgroups busy until thawed.
  for (auto& g : sweep_stale_save_freezers()) rep.removed.push_back(std::move(g));
  CgroupSupport cg = detect_cgroups();
  for (const auto& dir : find_stale_cgroups(cg)) {
    if (auto st = remove_cgroup_dir(dir, cg.version); st)
      rep.removed.push_back(dir);
    else
      rep.failed.push_back(dir + ": " + st.error().message());
  }
  for (auto& s : stale) {
    // One that stays mounted keeps the directory: remove_tree would not
    // cross into it, but nothing of it is touched at all.
    if (!unmount_leftovers(s.fd.get(), s.path)) {
      rep.failed.push_back(s.path + ": persistent storage still mounted");
      continue;
    }
    s.fd.reset();
    if (auto st = remove_tree(s.path); st)
      rep.removed.push_back(s.path);
    else
      rep.failed.push_back(s.path + ": " + st.error().message());
  }
  for (const auto& r : rep.removed) spdlog::info("sweep: removed leftover {}", r);
  for (const auto& f : rep.failed) spdlog::warn("sweep: {}", f);
  return rep;
}

}  // namespace sandcastle::sandbox::native
