#include "sandbox/native/persist_disk.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <linux/mount.h>
#include <poll.h>
#include <sched.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/log.h"
#include "sandbox/native/disk_copy.h"
#include "sandbox/native/fs_util.h"
#include "sandbox/native/image_root.h"

extern char** environ;

namespace sandcastle::sandbox::native {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kImage = "disk.img";
constexpr const char* kNewImage = "disk.img.new";
// A loop device still attached to an image (the filesystem of a sandbox
// just ended, whose mount namespace the kernel is still tearing down) goes
// within milliseconds; past this it is someone else's and we refuse.
constexpr auto kLoopGoneWait = std::chrono::seconds(10);

// An e2fsprogs tool by name ("" when missing).
std::string tool_path(const std::string& name) {
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/"})
    if (::access((dir + name).c_str(), X_OK) == 0) return dir + name;
  return {};
}

std::string find_mkfs() {
  return tool_path("mkfs.ext4");
}

struct ToolRun {
  int status = -1;  // as from waitpid
  std::string out;  // stdout and stderr, the first 16 KiB
};

// Runs argv (an absolute path first) with stdin closed and a bare PATH.
Result<ToolRun> run_capture(const std::vector<std::string>& argv) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return Error::from_errno("pipe");
  UniqueFd rd(pipefd[0]), wr(pipefd[1]);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, wr.get(), 1);
  posix_spawn_file_actions_adddup2(&fa, wr.get(), 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  char env0[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
  char* envp[] = {env0, nullptr};
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, args[0], &fa, nullptr, args.data(), envp);
  posix_spawn_file_actions_destroy(&fa);
  wr.reset();
  if (rc != 0) return Error::from_errno("run " + argv[0], rc);
  ToolRun r;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(rd.get(), buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0 && r.out.size() < 16384) r.out.append(buf, static_cast<std::size_t>(n));
  while (::waitpid(pid, &r.status, 0) < 0 && errno == EINTR) {
  }
  return r;
}

Status run_tool(const std::vector<std::string>& argv) {
  auto r = run_capture(argv);
  if (!r) return r.take_error();
  if (WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0) return {};
  std::string out = r->out.substr(0, 4096);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return Error::make(ErrorCode::kIo,
                     argv[0] + " failed (status " + std::to_string(r->status) + "): " + out);
}

// The loop device whose backing file is `path` (as the kernel names it),
// or "" when none is.
std::string loop_backed_by(const std::string& path) {
  for (const auto& name : list_dir("/sys/block")) {
    if (name.rfind("loop", 0) != 0) continue;
    std::string f = read_small_file("/sys/block/" + name + "/loop/backing_file");
    while (!f.empty() && f.back() == '\n') f.pop_back();
    if (f == path) return "/dev/" + name;
  }
  return {};
}

// Waits until no loop device backs the image `img` (a sandbox of storage
// `id` that just ended: its mount namespace, and so its filesystem, goes
// within milliseconds); past kLoopGoneWait it is someone else's: refused.
Status wait_until_unattached(const std::string& img, const std::string& id) {
  // The kernel names a backing file by its resolved path.
  std::string resolved = img;
  if (char* rp = ::realpath(img.c_str(), nullptr)) {
    resolved = rp;
    std::free(rp);
  }
  const auto deadline = std::chrono::steady_clock::now() + kLoopGoneWait;
  for (auto wait = std::chrono::milliseconds(1);;
       wait = std::min(wait * 2, std::chrono::milliseconds(50))) {
    const std::string dev = loop_backed_by(resolved);
    if (dev.empty()) return {};
    if (std::chrono::steady_clock::now() > deadline)
      return Error::make(ErrorCode::kUnavailable,
                         "storage " + id + " is still attached to " + dev +
                             " (not by this server): another mount namespace may hold a copy "
                             "of its mount (find the process with `grep " +
                             dev +
                             " /proc/*/mountinfo`, then end it or unmount it there), or "
                             "another program attached it (detach with `losetup -d " +
                             dev + "` once nothing mounts it)");
    std::this_thread::sleep_for(wait);
  }
}

// lock: the device locked (flock LOCK_EX) from before it is attached: udev
// probes a device only while no one holds that lock (systemd's block device
// locking), so nothing reads a copy's blocks into the device's cache before
// they are written.
Result<UniqueFd> attach_loop(int file_fd, const std::string& path, std::string* dev_name,
                             bool lock = false) {
  UniqueFd ctl(::open("/dev/loop-control", O_RDWR | O_CLOEXEC));
  if (!ctl) return Error::from_errno("open /dev/loop-control");
  for (int attempt = 0; attempt < 32; ++attempt) {
    const int n = ::ioctl(ctl.get(), LOOP_CTL_GET_FREE);
    if (n < 0) return Error::from_errno("LOOP_CTL_GET_FREE");
    const std::string dev = "/dev/loop" + std::to_string(n);
    UniqueFd lfd(::open(dev.c_str(), O_RDWR | O_CLOEXEC));
    if (!lfd) return Error::from_errno("open " + dev);
    if (lock && ::flock(lfd.get(), LOCK_EX) != 0) return Error::from_errno("lock " + dev);
    struct loop_config cfg {};
    cfg.fd = static_cast<std::uint32_t>(file_fd);
    // Detached by the kernel when the filesystem lets go of it: a server
    // killed with the mount in place leaves no device once it is unmounted.
    cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
    std::strncpy(reinterpret_cast<char*>(cfg.info.lo_file_name), path.c_str(), LO_NAME_SIZE - 1);
    if (::ioctl(lfd.get(), LOOP_CONFIGURE, &cfg) == 0) {
      *dev_name = dev;
      return lfd;
    }
    if (errno != EBUSY) return Error::from_errno("LOOP_CONFIGURE " + dev);
    // Another taker got it between GET_FREE and CONFIGURE: the next one.
  }
  return Error::make(ErrorCode::kUnavailable,
                     "no free loop device: they are all in use (see `losetup -a`; `losetup -f` "
                     "names a free one); load the loop module (`modprobe loop`) or allow more "
                     "devices (the loop module's max_loop parameter)");
}

Status make_private_self_bind(const std::string& dir, mode_t mode) {
  if (::mkdir(dir.c_str(), mode) != 0 && errno != EEXIST) return Error::from_errno("mkdir " + dir);
  if (::chmod(dir.c_str(), mode) != 0) return Error::from_errno("chmod " + dir);
  // Private: the mounts below never propagate to the host's peers (which
  // would hold the filesystem, and so its loop device, forever).
  if (::mount(dir.c_str(), dir.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
      ::mount(nullptr, dir.c_str(), nullptr, MS_PRIVATE, nullptr) != 0)
    return Error::from_errno("bind " + dir);
  return {};
}

// Unmounts `path` (its own mount point): at once when nothing uses it,
// lazily when something still does.
void unmount_own(const std::string& path) {
  if (::umount2(path.c_str(), UMOUNT_NOFOLLOW) == 0) return;
  if (errno == EINVAL || errno == ENOENT) return;  // not mounted
  ::umount2(path.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
}

}  // namespace

bool valid_storage_id(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

AttachedDisk::~AttachedDisk() {
  thaw_writes();
  root_.reset();
  if (mounted_) unmount_own(mount_);
  // The device detaches itself once the filesystem lets go of it (AUTOCLEAR).
  loop_.reset();
  if (!mount_.empty()) ::rmdir(mount_.c_str());
}

Status AttachedDisk::freeze_writes() {
  if (thaw_.joinable()) thaw_.join();
  if (frozen_) return {};
  if (::ioctl(root_.get(), FIFREEZE, 0) != 0) return Error::from_errno("FIFREEZE " + mount_);
  frozen_ = true;
  return {};
}

Result<UniqueFd> AttachedDisk::pick_fs() const {
  // The superblock's options only (fspick): the mount's own flags stay.
  UniqueFd fs(
      static_cast<int>(syscall(SYS_fspick, root_.get(), "", FSPICK_EMPTY_PATH | FSPICK_CLOEXEC)));
  if (!fs) return Error::from_errno("fspick " + mount_);
  return fs;
}

Status AttachedDisk::set_barrier(int fs_context, const std::string& what) {
  if (syscall(SYS_fsconfig, fs_context, FSCONFIG_SET_FLAG, "barrier", nullptr, 0) != 0 ||
      syscall(SYS_fsconfig, fs_context, FSCONFIG_CMD_RECONFIGURE, nullptr, nullptr, 0) != 0)
    return Error::from_errno("barriers on for " + what);
  return {};
}

void AttachedDisk::thaw_writes_later() {
  if (!frozen_) return;
  frozen_ = false;
  // FITHAW writes the superblock with a flush: a fsync of the image, which
  // the copy that was taken meanwhile does not wait for.
  thaw_ = std::thread([fd = root_.get(), mount = mount_] {
    if (::ioctl(fd, FITHAW, 0) != 0)
      spdlog::warn("native sandbox: FITHAW {}: {}", mount, errno_text(errno));
  });
}

void AttachedDisk::thaw_writes() {
  if (thaw_.joinable()) thaw_.join();
  if (!frozen_) return;
  if (::ioctl(root_.get(), FITHAW, 0) != 0)
    spdlog::warn("native sandbox: FITHAW {}: {}", mount_, errno_text(errno));
  frozen_ = false;
}

DiskBind::~DiskBind() {
  if (mounted_) ::umount2(path_.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
  if (!path_.empty()) ::rmdir(path_.c_str());
  if (!dir_.empty()) ::rmdir(dir_.c_str());
}

PersistStore::PersistStore(std::string storage_dir, RuntimeDirs dirs)
    : storage_dir_(std::move(storage_dir)), dirs_(std::move(dirs)) {
  while (storage_dir_.size() > 1 && storage_dir_.back() == '/') storage_dir_.pop_back();
}

PersistStore::~PersistStore() {
  detach_all();
}

Status PersistStore::usable() const {
  if (storage_dir_.empty())
    return Error::make(
        ErrorCode::kInvalidArgument,
        "persistent sandboxes (kept across server restarts) are not available: this "
        "server has no storage directory for them; omit persistent, or set it to false");
  if (::geteuid() != 0)
    return Error::make(
        ErrorCode::kInvalidArgument,
        "persistent sandboxes need the server to run as root (their files are an ext4 "
        "image mounted through a loop device, which an unprivileged server cannot "
        "mount); omit persistent, or set it to false");
  for (const char* tool : {"mkfs.ext4", "e2fsck", "resize2fs"})
    if (tool_path(tool).empty())
      return Error::make(ErrorCode::kInvalidArgument,
                         std::string("persistent sandboxes need ") + tool +
                             ", which is not installed (Debian's e2fsprogs package)");
  return {};
}

Status PersistStore::prepare_dirs() {
  if (dirs_ready_) return {};
  if (::mkdir(storage_dir_.c_str(), 0700) != 0 && errno != EEXIST)
    return Error::from_errno("mkdir " + storage_dir_);
  // The server's mounts: only root may look; the sandboxes' binds: each in
  // a directory only its own host id may enter.
  if (auto st = make_private_self_bind(dirs_.base + "/pst", 0700); !st) return st;
  if (auto st = make_private_self_bind(dirs_.base + "/pmap", 0711); !st) return st;
  dirs_ready_ = true;
  return {};
}

std::shared_ptr<AttachedDisk> PersistStore::find_attached(const std::string& id) {
  auto it = attached_.find(id);
  if (it == attached_.end()) return nullptr;
  auto d = it->second.lock();
  if (!d) attached_.erase(it);
  return d;
}

Result<std::shared_ptr<AttachedDisk>> PersistStore::attach(const std::string& id,
                                                           std::uint64_t size, std::uint32_t uid,
                                                           std::uint32_t gid) {
  if (auto st = usable(); !st) return st.take_error();
  if (!valid_storage_id(id))
    return Error::make(ErrorCode::kInvalidArgument,
                       "storage id '" + id + "': [a-z0-9-], 1..64 characters");
  std::lock_guard lock(mu_);
  if (find_attached(id))
    return Error::make(ErrorCode::kFailedPrecondition,
                       "storage " + id +
                           " is in use by a running sandbox: close it (close_sandbox) or "
                           "pause it (pause_sandbox) first");
  if (auto st = prepare_dirs(); !st) return st.take_error();
  // A copy whose device is attached already (copy()): only mounted.
  if (auto p = take_prepared(id, size); p && *p)
    return p;
  else if (!p)
    spdlog::warn("native sandbox: storage {}: its copy's device: {} (attached again)", id,
                 p.error().message());
  const std::string dir = dir_of(id);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return Error::from_errno("mkdir " + dir);
  const std::string img = dir + "/" + kImage;
  bool fresh = false;
  if (::access(img.c_str(), F_OK) != 0) {
    // Made under another name and renamed once whole: a crash mid-mkfs
    // leaves no image that looks usable.
    const std::string tmp = dir + "/" + kNewImage;
    ::unlink(tmp.c_str());
    {
      UniqueFd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
      if (!f) return Error::from_errno("create " + tmp);
      if (::ftruncate(f.get(), static_cast<off_t>(size)) != 0)
        return Error::from_errno("size " + tmp);
    }
    // The file is sparse and reads as zeros: inode tables and journal need
    // no zeroing (lazy init, and noinit_itable at mount).
    const std::string owner = "root_owner=" + std::to_string(uid) + ":" + std::to_string(gid);
    if (auto st = run_tool({find_mkfs(), "-q", "-F", "-m", "0", "-E",
                            owner + ",lazy_itable_init=1,lazy_journal_init=1,nodiscard", tmp});
        !st) {
      ::unlink(tmp.c_str());
      return st.take_error();
    }
    if (::rename(tmp.c_str(), img.c_str()) != 0) return Error::from_errno("rename " + tmp);
    fresh = true;
  }
  // Never two filesystems on one image: one still attached (a sandbox of
  // this storage that just ended, its namespace still being torn down)
  // must be gone first.
  if (auto st = wait_until_unattached(img, id); !st) return st.take_error();
  UniqueFd file(::open(img.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (!file) return Error::from_errno("open " + img);
  struct stat st {};
  if (::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return Error::make(ErrorCode::kFailedPrecondition, img + " is not a regular file");
  // A larger disk_bytes than the image has (a restart with a new limit):
  // grown offline, checked first (e2fsck replays a journal a crash left).
  // Online growth (EXT4_IOC_RESIZE_FS) needs CAP_SYS_RESOURCE, which root
  // lacks on some hosts. A smaller limit keeps the image as it is:
  // shrinking could not keep files that no longer fit.
  if (!fresh && static_cast<std::uint64_t>(st.st_size) < size) {
    if (::ftruncate(file.get(), static_cast<off_t>(size)) != 0)
      return Error::from_errno("grow " + img);
    auto checked = run_capture({tool_path("e2fsck"), "-fy", img});
    if (!checked) return checked.take_error();
    // 0: clean, 1: fixed; anything else is a filesystem we must not grow.
    if (!WIFEXITED(checked->status) || WEXITSTATUS(checked->status) > 1)
      return Error::make(ErrorCode::kIo, "storage " + id + ": e2fsck before growing it failed: " +
                                             checked->out.substr(0, 2048));
    if (auto st2 = run_tool({tool_path("resize2fs"), img}); !st2) return st2.take_error();
  }
  std::string dev;
  auto loop = attach_loop(file.get(), img, &dev);
  if (!loop) return loop.take_error();
  file.reset();
  auto disk = mount_loop(id, std::move(*loop), dev);
  if (!disk) return disk.take_error();
  // A fresh filesystem no sandbox has seen yet: its lost+found would only
  // clutter the sandbox's /workspace (e2fsck makes one when it needs it).
  if (fresh) ::unlinkat((*disk)->root_.get(), "lost+found", AT_REMOVEDIR);
  return disk;
}

Result<std::shared_ptr<AttachedDisk>> PersistStore::mount_loop(const std::string& id, UniqueFd loop,
                                                               const std::string& dev,
                                                               bool barrier) {
  std::shared_ptr<AttachedDisk> disk(new AttachedDisk);
  disk->id_ = id;
  disk->loop_ = std::move(loop);
  disk->mount_ = dirs_.base + "/pst/" + id;
  if (::mkdir(disk->mount_.c_str(), 0700) != 0) {
    Error e = Error::from_errno("mkdir " + disk->mount_);
    disk->mount_.clear();
    return e;
  }
  const char* opts =
      barrier ? "noinit_itable,errors=remount-ro" : "noinit_itable,errors=remount-ro,nobarrier";
  if (::mount(dev.c_str(), disk->mount_.c_str(), "ext4", MS_NOSUID | MS_NODEV, opts) != 0)
    return Error::from_errno("mount storage " + id);
  disk->mounted_ = true;
  disk->root_.reset(::open(disk->mount_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!disk->root_) return Error::from_errno("open " + disk->mount_);
  // A copy's device was locked against udev's probe until mounted.
  ::flock(disk->loop_.get(), LOCK_UN);
  attached_[id] = disk;
  return disk;
}

Result<std::shared_ptr<AttachedDisk>> PersistStore::take_prepared(const std::string& id,
                                                                  std::uint64_t size) {
  auto it = prepared_.find(id);
  if (it == prepared_.end()) return std::shared_ptr<AttachedDisk>();
  Prepared p = std::move(it->second);
  prepared_.erase(it);
  struct stat st {};
  const std::string img = dir_of(id) + "/" + kImage;
  // A larger limit than the copy has: grown on the usual path (the device
  // goes once closed: AUTOCLEAR, and that path waits for it).
  if (::stat(img.c_str(), &st) != 0 || static_cast<std::uint64_t>(st.st_size) < size)
    return std::shared_ptr<AttachedDisk>();
  // Blocks read through the device before the copy was written (none
  // while it was locked) would be stale: dropped.
  if (::ioctl(p.loop.get(), BLKFLSBUF, 0) != 0) return Error::from_errno("BLKFLSBUF " + p.dev);
  // Without barriers until the copy is on the host disk: the device turns
  // the first flush (the mount's own superblock write) into an fsync of
  // the whole copy, 25-45 ms here. Turned on again once written out.
  auto disk = mount_loop(id, std::move(p.loop), p.dev, /*barrier=*/false);
  if (!disk) return disk.take_error();
  write_out_later(std::move(p.file), id);
  return disk;
}

Result<std::unique_ptr<DiskBind>> PersistStore::bind_for(
    const AttachedDisk& disk, const std::string& sandbox_id, std::uint32_t inside_uid,
    std::uint32_t inside_gid, std::uint32_t host_uid, std::uint32_t host_gid) {
  std::unique_ptr<DiskBind> b(new DiskBind);
  const std::string dir = dirs_.base + "/pmap/" + sandbox_id;
  if (::mkdir(dir.c_str(), 0700) != 0) return Error::from_errno("mkdir " + dir);
  b->dir_ = dir;
  // Only this sandbox's init (host_uid) may reach its files through here.
  if (::chown(dir.c_str(), host_uid, host_gid) != 0 || ::chmod(dir.c_str(), 0700) != 0)
    return Error::from_errno("chown " + dir);
  const std::string path = dir + "/d";
  if (::mkdir(path.c_str(), 0755) != 0) return Error::from_errno("mkdir " + path);
  b->path_ = path;
  auto ns = idmap_userns(inside_uid, inside_gid, host_uid, host_gid);
  if (!ns) return ns.take_error();
  UniqueFd tree(static_cast<int>(syscall(SYS_open_tree, AT_FDCWD, disk.mount_point().c_str(),
                                         OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)));
  if (!tree) return Error::from_errno("open_tree " + disk.mount_point());
  struct mount_attr attr {};
  attr.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  attr.userns_fd = static_cast<std::uint64_t>(ns->get());
  if (syscall(SYS_mount_setattr, tree.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) != 0)
    return Error::from_errno("idmapped mount of storage " + disk.id());
  if (syscall(SYS_move_mount, tree.get(), "", AT_FDCWD, path.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0)
    return Error::from_errno("attach idmapped storage " + disk.id());
  b->mounted_ = true;
  return b;
}

Status PersistStore::mount_into(const AttachedDisk& disk, pid_t pid, int pidfd,
                                std::uint32_t inside_uid, std::uint32_t inside_gid,
                                std::uint32_t host_uid, std::uint32_t host_gid) {
  // The idmap is the sandbox's own user namespace (inside_uid -> host_uid,
  // one id each way, as idmap_userns would make it): opened by pid, and
  // used only if that pid was still the sandbox's init afterwards (its
  // pidfd not readable yet).
  UniqueFd own(::open(("/proc/" + std::to_string(pid) + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC));
  struct pollfd alive {
    pidfd, POLLIN, 0
  };
  Result<UniqueFd> ns = Error::make(ErrorCode::kInternal, "no idmap");
  if (own && ::poll(&alive, 1, 0) == 0)
    ns = std::move(own);
  else
    ns = idmap_userns(inside_uid, inside_gid, host_uid, host_gid);
  if (!ns) return ns.take_error();
  UniqueFd tree(static_cast<int>(syscall(SYS_open_tree, AT_FDCWD, disk.mount_point().c_str(),
                                         OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)));
  if (!tree) return Error::from_errno("open_tree " + disk.mount_point());
  struct mount_attr attr {};
  attr.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  attr.userns_fd = static_cast<std::uint64_t>(ns->get());
  if (syscall(SYS_mount_setattr, tree.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) != 0)
    return Error::from_errno("idmapped mount of storage " + disk.id());
  // Entering another mount namespace takes a thread with a filesystem
  // context of its own (setns refuses a shared one); it ends right after.
  Status result;
  std::thread t([&] {
    if (::unshare(CLONE_FS) != 0) {
      result = Error::from_errno("unshare CLONE_FS");
      return;
    }
    if (::setns(pidfd, CLONE_NEWNS) != 0) {
      result = Error::from_errno("enter the sandbox's mount namespace");
      return;
    }
    // Over the empty tmpfs the warm sandbox has there; a trailing symlink
    // is not followed (no MOVE_MOUNT_T_SYMLINKS).
    if (syscall(SYS_move_mount, tree.get(), "", AT_FDCWD, "/workspace", MOVE_MOUNT_F_EMPTY_PATH) !=
        0)
      result = Error::from_errno("mount storage " + disk.id() + " as /workspace");
  });
  t.join();
  return result;
}

Status PersistStore::remove(const std::string& id) {
  if (!valid_storage_id(id))
    return Error::make(ErrorCode::kInvalidArgument,
                       "storage id '" + id + "': [a-z0-9-], 1..64 characters");
  if (storage_dir_.empty()) return {};
  std::lock_guard lock(mu_);
  if (find_attached(id))
    return Error::make(ErrorCode::kFailedPrecondition,
                       "storage " + id +
                           " is in use by a running sandbox: close it (close_sandbox) or "
                           "pause it (pause_sandbox) first");
  prepared_.erase(id);  // its device detaches once closed (AUTOCLEAR)
  // Only the image and its temporary: never a walk of anything mounted.
  const std::string dir = dir_of(id);
  for (const char* name : {kImage, kNewImage})
    if (::unlink((dir + "/" + name).c_str()) != 0 && errno != ENOENT)
      return Error::from_errno("remove storage " + id);
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) return Error::from_errno("rmdir " + dir);
  return {};
}

std::vector<std::string> PersistStore::list() const {
  std::vector<std::string> out;
  if (storage_dir_.empty()) return out;
  // Every storage's directory, whole or not: one a kill left without its
  // image (mid-mkfs, mid-copy, mid-remove) is listed too, so the server can
  // remove those no sandbox names (remove() copes with them).
  for (const auto& name : list_dir(storage_dir_)) {
    struct stat st {};
    if (valid_storage_id(name) && ::lstat(dir_of(name).c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      out.push_back(name);
  }
  return out;
}

Status PersistStore::copy(const std::string& from, const std::string& to) {
  for (const auto* id : {&from, &to})
    if (!valid_storage_id(*id))
      return Error::make(ErrorCode::kInvalidArgument,
                         "storage id '" + *id + "': [a-z0-9-], 1..64 characters");
  if (auto st = usable(); !st) return st;
  std::lock_guard lock(mu_);
  const std::string src_path = dir_of(from) + "/" + kImage;
  // A source no sandbox of this server runs may still be mounted by one
  // that just ended (release() returns before the kernel lets go of its
  // filesystem): copying it then would copy a live, dirty ext4. (A copy
  // not mounted yet has a device of ours, which writes nothing.)
  std::shared_ptr<AttachedDisk> running = find_attached(from);
  if (!running && !prepared_.count(from) && ::access(src_path.c_str(), F_OK) == 0)
    if (auto st = wait_until_unattached(src_path, from); !st) return st;
  UniqueFd src(::open(src_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!src) {
    if (errno == ENOENT) return Error::make(ErrorCode::kNotFound, "no storage " + from);
    return Error::from_errno("open " + src_path);
  }
  struct stat src_st {};
  if (::fstat(src.get(), &src_st) != 0) return Error::from_errno("stat " + src_path);
  const std::string dir = dir_of(to);
  const std::string tmp = dir + "/" + kNewImage;
  if (::mkdir(dir.c_str(), 0700) != 0) {
    if (errno != EEXIST) return Error::from_errno("mkdir " + dir);
    // Only the half-made copy of a server killed while copying: made again.
    if (::access((dir + "/" + kImage).c_str(), F_OK) == 0 || find_attached(to) ||
        prepared_.count(to))
      return Error::make(ErrorCode::kAlreadyExists, "storage " + to + " exists");
    ::unlink(tmp.c_str());
  }
  UniqueFd loop;  // declared before `fail`: closed (and detached) after the unlink
  auto fail = [&](Error e) -> Status {
    ::unlink(tmp.c_str());
    ::rmdir(dir.c_str());
    return e;
  };
  UniqueFd dst(::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!dst) return fail(Error::from_errno("create " + tmp));
  if (::ftruncate(dst.get(), src_st.st_size) != 0) return fail(Error::from_errno("size " + tmp));
  const auto t0 = Clock::now();
  // The device first, on the empty (sparse) file: attaching syncs the
  // backing file, all 50 MiB of it once the copy is written. Locked until
  // mounted, so udev reads none of its blocks meanwhile.
  std::string dev;
  Result<UniqueFd> attached = Error::make(ErrorCode::kInternal, "not attached");
  Status copied;
  // A running source's writes are held (FIFREEZE) for the copy: the kernel
  // first writes everything out, so the copy is a clean filesystem (no
  // journal to replay), and a process writing meanwhile only waits. The
  // freeze mostly waits (three RCU grace periods, 10-16 ms each here): a
  // thread meanwhile attaches the copy's device and copies the bytes as
  // they are; once frozen, the pages that changed are copied again.
  std::thread early([&] {
    attached = attach_loop(dst.get(), tmp, &dev, /*lock=*/true);
    if (attached && ::ioctl(dst.get(), FICLONE, src.get()) != 0)
      // No reflinks here (ext4, or another filesystem): data extents only.
      copied = sparse_copy(src.get(), dst.get(), src_st.st_size);
  });
  Status frozen = running ? running->freeze_writes() : Status{};
  early.join();
  const auto t1 = Clock::now();
  if (!frozen || !attached) {
    if (running) running->thaw_writes();
    return fail(!frozen ? frozen.take_error() : attached.take_error());
  }
  loop = std::move(*attached);
  if (copied && running) copied = make_equal(src.get(), dst.get(), src_st.st_size);
  const auto t2 = Clock::now();
  if (running) running->thaw_writes_later();
  if (!copied) return fail(copied.take_error());
  using ms = std::chrono::duration<double, std::milli>;
  spdlog::debug(
      "native sandbox: copy {} -> {}: frozen (copied meanwhile) {:.1f} ms, changed pages {:.1f} ms",
      from, to, ms(t1 - t0).count(), ms(t2 - t1).count());
  if (::rename(tmp.c_str(), (dir + "/" + kImage).c_str()) != 0)
    return fail(Error::from_errno("rename " + tmp));
  // Forks that are never started (a wake refused by the caller's quota)
  // must not pile up devices and fds: past kMaxPrepared the oldest gives its
  // device back, and its start attaches as any other.
  if (prepared_.size() >= kMaxPrepared) {
    auto oldest = std::min_element(prepared_.begin(), prepared_.end(),
                                   [](auto& a, auto& b) { return a.second.seq < b.second.seq; });
    prepared_.erase(oldest);
  }
  prepared_[to] = Prepared{std::move(loop), dev, std::move(dst), ++prepared_seq_};
  return {};
}

void PersistStore::write_out_later(UniqueFd file, const std::string& id) {
  std::lock_guard lock(sync_mu_);
  // The ones done by now are joined (each ends after one fdatasync).
  for (auto it = syncs_.begin(); it != syncs_.end();) {
    if (it->done->load()) {
      it->thread.join();
      it = syncs_.erase(it);
    } else {
      ++it;
    }
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  syncs_.push_back(
      Sync{std::thread([this, f = std::move(file), id, done]() mutable {
             // On the host disk soon, off the caller's path (the
             // kernel's own writeback would take ~30 s), then
             // barriers on: from here a flush is a small fsync.
             if (::fdatasync(f.get()) != 0) {
               spdlog::warn("native sandbox: writing storage {} out: {}", id, errno_text(errno));
             } else {
               // The context under mu_, so this thread never holds the
               // disk (a remove() right after the fork finds it gone);
               // the reconfiguration (a sync, so a flush) outside it,
               // or every other attach would wait for it (+30 ms).
               Result<UniqueFd> fs = Error::make(ErrorCode::kNotFound, "");
               {
                 std::lock_guard store_lock(mu_);
                 std::shared_ptr<AttachedDisk> d = find_attached(id);
                 if (d) fs = d->pick_fs();
               }
               if (!fs && fs.error().code != ErrorCode::kNotFound)
                 spdlog::warn("native sandbox: storage {}: {}", id, fs.error().message());
               if (fs)
                 if (auto st = AttachedDisk::set_barrier(fs->get(), id); !st)
                   spdlog::warn("native sandbox: storage {}: {}", id, st.error().message());
             }
             done->store(true);
           }),
           done});
}

void PersistStore::join_syncs() {
  std::vector<Sync> all;
  {
    std::lock_guard lock(sync_mu_);
    all.swap(syncs_);
  }
  for (auto& s : all) s.thread.join();
}

void PersistStore::detach_all() {
  join_syncs();
  std::lock_guard lock(mu_);
  attached_.clear();  // the disks go with their last holder
  prepared_.clear();  // the devices detach once closed (AUTOCLEAR)
  if (!dirs_ready_) return;
  ::umount2((dirs_.base + "/pmap").c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
  ::umount2((dirs_.base + "/pst").c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
  dirs_ready_ = false;
}

Status criu_check_once() {
  static const Status result = []() -> Status {
    std::string criu;
    for (const char* p : {"/usr/sbin/criu", "/sbin/criu", "/usr/bin/criu"})
      if (::access(p, X_OK) == 0) criu = p;
    if (criu.empty())
      return Error::make(ErrorCode::kUnavailable, "checkpoints need CRIU, which is not installed");
    std::string version = "criu";
    if (auto v = run_capture({criu, "--version"}); v && v->out.rfind("Version: ", 0) == 0)
      version += " " + v->out.substr(9, v->out.find('\n') - 9);
    auto r = run_capture({criu, "check"});
    if (!r) return Error::make(ErrorCode::kUnavailable, version + ": " + r.error().message());
    // Its first complaint, without the source location ("Error (file:line): ").
    std::string first;
    std::size_t at = 0;
    while (at < r->out.size()) {
      std::size_t nl = r->out.find('\n', at);
      std::string line = r->out.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
      at = nl == std::string::npos ? r->out.size() : nl + 1;
      if (line.rfind("Error", 0) == 0) {
        if (auto c = line.find("): "); c != std::string::npos) line = line.substr(c + 3);
        first = line;
        break;
      }
    }
    if (WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0) return {};
    if (first.empty()) first = "criu check failed (status " + std::to_string(r->status) + ")";
    return Error::make(ErrorCode::kUnavailable, version + ": " + first);
  }();
  return result;
}

}  // namespace sandcastle::sandbox::native
