#include "sandbox/native/image_root.h"

#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <charconv>

#include "common/unique_fd.h"
#include "images/image_store.h"
#include "sandbox/native/fs_util.h"

namespace sandcastle::sandbox::native {

ImageResolver store_resolver(images::ImageStore& store) {
  return [&store](const std::string& ref) -> Result<ImageRoot> {
    auto rec = store.find(ref);
    if (!rec) return rec.take_error();
    auto dirs = store.layer_dirs(*rec);
    if (!dirs) return dirs.take_error();
    ImageRoot r;
    r.name = rec->name;
    r.id = rec->id;
    r.layers = std::move(*dirs);
    r.env = rec->config.env;
    r.working_dir = rec->config.working_dir;
    r.user = rec->config.user;
    r.languages = rec->languages;
    r.lease = [&store, id = rec->id](const std::string& sandbox_id) -> std::shared_ptr<void> {
      // A mark that cannot be written only weakens `image rm`'s refusal:
      // the sandbox still runs (its init holds the layers mounted).
      if (!store.mark_in_use(id, sandbox_id)) return nullptr;
      return std::shared_ptr<void>(nullptr, [&store, id, sandbox_id](void*) { (void)store.release(id, sandbox_id); });
    };
    return r;
  };
}

Status check_layer_paths(const std::vector<std::string>& layers) {
  if (layers.empty()) return Error::make(ErrorCode::kInvalidArgument, "image has no layers");
  if (layers.size() > 128)
    return Error::make(ErrorCode::kInvalidArgument,
                       "image has " + std::to_string(layers.size()) + " layers (at most 128)");
  std::size_t total = 0;
  for (const auto& l : layers) {
    bool bad = l.empty() || l[0] != '/';
    for (unsigned char c : l)
      bad = bad || c < 0x20 || c == 0x7f || c == ':' || c == ',' || c == '\\';
    if (bad)
      return Error::make(ErrorCode::kInvalidArgument,
                         "layer path unusable as an overlay lower dir: " + l);
    total += l.size() + 1;
  }
  // mount(2) takes one page of options; upper/work paths need the rest.
  if (total > 3000)
    return Error::make(ErrorCode::kInvalidArgument,
                       "image layer paths too long for one overlay mount");
  return {};
}

std::vector<MountOp> image_base_plan(const std::vector<std::string>& lowers_top_first,
                                     const RuntimeDirs& dirs, const Limits& limits,
                                     const std::string& storage, const std::string& restore_from) {
  std::vector<MountOp> p;
  auto op = [&p](MountKind kind, std::string src, std::string dst, std::uint64_t size = 0,
                 std::uint32_t mode = 0755, bool writable = false, std::string opts = "") {
    p.push_back(
        MountOp{kind, std::move(src), std::move(dst), size, mode, writable, std::move(opts)});
  };
  auto mkdir = [&op](std::string dst, std::uint32_t mode = 0755) {
    op(MountKind::kMkdir, "", std::move(dst), 0, mode);
  };
  const std::string m = std::string(kImageRootSubdir) + "/";

  // The disk limit: upper dir and work dir on one tmpfs. /workspace is a
  // directory of the overlay, not a mount of its own: an image's /workspace
  // (a saved sandbox's files, save_sandbox) shows there, and what a sandbox
  // writes there lands in the upper dir with its other writes.
  mkdir("rw");
  // Persistent: the same on the sandbox's storage (an ext4 image of
  // disk_bytes), where upper/ and work/ stay from one start to the next.
  if (storage.empty())
    op(MountKind::kTmpfs, "", "rw", limits.disk_bytes, 0755, true, "nr_inodes=262144");
  else
    op(MountKind::kBind, storage, "rw", 0, 0, true);
  mkdir("rw/upper");
  mkdir("rw/work", 0700);
  if (!restore_from.empty())
    op(MountKind::kRestoreMirror, restore_from, "rw/upper", limits.disk_bytes + (1u << 20));
  // The root tmpfs (1 MiB so far) holds /dev, /dev/shm and /tmp, as in the
  // host image: its size is their limit. They are moved under the overlay.
  op(MountKind::kResize, "", "", limits.tmp_bytes, 0, true, "nr_inodes=65536");
  mkdir("dev");
  op(MountKind::kSubmount, "", "dev", 0, 0, true, "noexec");
  for (const char* node : {"null", "zero", "full", "random", "urandom", "tty"})
    op(MountKind::kBindFile, std::string("/dev/") + node, std::string("dev/") + node, 0, 0, true);
  mkdir("dev/pts");
  op(MountKind::kDevpts, "", "dev/pts");
  op(MountKind::kSymlink, "pts/ptmx", "dev/ptmx");
  op(MountKind::kSymlink, "/proc/self/fd", "dev/fd");
  op(MountKind::kSymlink, "/proc/self/fd/0", "dev/stdin");
  op(MountKind::kSymlink, "/proc/self/fd/1", "dev/stdout");
  op(MountKind::kSymlink, "/proc/self/fd/2", "dev/stderr");
  mkdir("dev/shm", 01777);
  op(MountKind::kSubmount, "", "dev/shm", 0, 0, true, "noexec");
  mkdir("tmp", 01777);
  op(MountKind::kSubmount, "", "tmp", 0, 0, true);

  // The image.
  std::string lower;
  for (const auto& l : lowers_top_first) lower += (lower.empty() ? "" : ":") + l;
  mkdir(kImageRootSubdir);
  op(MountKind::kOverlay, lower, kImageRootSubdir, 0, 0, true, "rw");

  // Mount points in the image: real directories, whatever the image has
  // there (each one's parent is merged/ or made so just before).
  auto realdir = [&op](std::string dst, std::uint32_t mode = 0755) {
    op(MountKind::kRealDir, "", std::move(dst), 0, mode);
  };
  realdir(m + "proc", 0555);
  op(MountKind::kProc, "", m + "proc");
  for (const char* path : kProcMasked) op(MountKind::kMask, dirs.mask, m + path);
  for (const char* path : kProcReadOnly) op(MountKind::kReadOnlyPath, "", m + path);
  realdir(m + "dev");
  op(MountKind::kMove, "dev", m + "dev");
  realdir(m + "tmp", 01777);
  op(MountKind::kMove, "tmp", m + "tmp");
  realdir(m + "workspace");
  realdir(m + "opt");
  realdir(m + "opt/sandcastle");
  op(MountKind::kBind, dirs.share, m + "opt/sandcastle");
  return p;
}

std::vector<MountOp> image_finish_plan() {
  return {MountOp{MountKind::kReadOnly, "", "dev", 0, 0, false, ""}};
}

namespace {

// One file of the image as the merged tree would show it (the topmost layer
// that has it; a whiteout there means none), read inside each layer's root:
// symlinks resolve within the layer, never into the host. Opaque directories
// are not followed: a lower /etc/passwd under an opaque /etc may be found.
std::string read_image_file(const std::vector<std::string>& layers_bottom_first, const char* rel) {
  constexpr std::size_t kMax = 1 << 20;
  for (auto it = layers_bottom_first.rbegin(); it != layers_bottom_first.rend(); ++it) {
    UniqueFd dir(::open(it->c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!dir) continue;
    struct open_how how {};
    how.flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
    UniqueFd fd(static_cast<int>(syscall(SYS_openat2, dir.get(), rel, &how, sizeof how)));
    if (!fd) {
      if (errno == ENOENT || errno == ENOTDIR) continue;
      return {};  // a whiteout (0:0 device: ENXIO) or unreadable: none
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
    std::string out;
    char buf[16384];
    ssize_t n;
    while (out.size() <= kMax && (n = ::read(fd.get(), buf, sizeof buf)) > 0)
      out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > kMax) out.resize(kMax);
    return out;
  }
  return {};
}

bool parse_id(std::string_view s, std::uint32_t& out) {
  if (s.empty() || s.size() > 10) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

// The fields of the line whose first field is `name` in a passwd/group file.
std::vector<std::string_view> find_entry(std::string_view file, std::string_view name) {
  while (!file.empty()) {
    std::size_t nl = file.find('\n');
    std::string_view line = file.substr(0, nl);
    file = nl == std::string_view::npos ? std::string_view{} : file.substr(nl + 1);
    std::vector<std::string_view> fields;
    while (true) {
      std::size_t c = line.find(':');
      fields.push_back(line.substr(0, c));
      if (c == std::string_view::npos) break;
      line = line.substr(c + 1);
    }
    if (fields.size() >= 4 && fields[0] == name) return fields;
  }
  return {};
}

}  // namespace

Result<ImageIds> resolve_image_user(const ImageRoot& image) {
  ImageIds ids;
  std::string_view user = image.user;
  if (user.empty()) return ids;
  std::string_view group;
  if (auto c = user.find(':'); c != std::string_view::npos) {
    group = user.substr(c + 1);
    user = user.substr(0, c);
  }
  auto bad = [&](const std::string& why) {
    return Error::make(ErrorCode::kInvalidArgument,
                       "image " + image.name + ": user '" + image.user + "': " + why);
  };
  bool have_gid = false;
  if (!parse_id(user, ids.uid)) {
    const std::string passwd = read_image_file(image.layers, "etc/passwd");
    auto entry = find_entry(passwd, user);
    if (entry.empty() || !parse_id(entry[2], ids.uid) || !parse_id(entry[3], ids.gid))
      return bad("not in the image's /etc/passwd");
    have_gid = true;
  }
  if (!group.empty()) {
    if (!parse_id(group, ids.gid)) {
      const std::string groups = read_image_file(image.layers, "etc/group");
      auto entry = find_entry(groups, group);
      if (entry.empty() || !parse_id(entry[2], ids.gid))
        return bad("group not in the image's /etc/group");
    }
    have_gid = true;
  }
  if (!have_gid) ids.gid = ids.uid;
  // No sandbox runs as uid 0: an image made to run as root runs as 1000.
  if (ids.uid == 0) return ImageIds{};
  if (ids.gid == 0) ids.gid = 1000;
  if (ids.uid >= 65534 || ids.gid >= 65534)
    return bad("ids from 65534 up are not mapped in a sandbox");
  return ids;
}

// A child cloned into the namespace that only pauses while its maps are
// written and the namespace is opened, then is killed. A copy of our address
// space, not a sharer (CLONE_VM): a child running on our memory would also
// run on this thread's sanitizer and libc state, which TSan reports as races
// on whatever this thread touches next.

Result<UniqueFd> idmap_userns(std::uint32_t inside_uid, std::uint32_t inside_gid, std::uint32_t uid,
                              std::uint32_t gid) {
  const auto pid = static_cast<pid_t>(::syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, nullptr, nullptr, nullptr, nullptr));
  if (pid == 0)
    for (;;) ::syscall(SYS_pause);
  if (pid < 0) return Error::from_errno("clone an idmap namespace");
  const std::string proc = "/proc/" + std::to_string(pid);
  Status st = write_small_file(proc + "/uid_map",
                               std::to_string(inside_uid) + " " + std::to_string(uid) + " 1\n");
  if (st)
    st = write_small_file(proc + "/gid_map",
                          std::to_string(inside_gid) + " " + std::to_string(gid) + " 1\n");
  UniqueFd ns;
  if (st) {
    ns.reset(::open((proc + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns) st = Error::from_errno("open " + proc + "/ns/user");
  }
  ::kill(static_cast<pid_t>(pid), SIGKILL);
  int status = 0;
  while (::waitpid(static_cast<pid_t>(pid), &status, 0) < 0 && errno == EINTR) {
  }
  if (!st) return st.take_error();
  return ns;
}

namespace {

// The deepest directory holding every layer, when they are all on its
// filesystem (an unrecursive bind shows no other) and it is not "/" (a
// store keeps its layers side by side); else "".
std::string common_layer_parent(const std::vector<std::string>& layers) {
  if (layers.size() < 2) return {};
  std::string common = layers[0].substr(0, layers[0].rfind('/'));
  for (const auto& l : layers)
    while (!common.empty() && !(l.size() > common.size() && l.compare(0, common.size(), common) == 0 &&
                                l[common.size()] == '/'))
      common = common.substr(0, common.rfind('/'));
  if (common.empty()) return {};
  struct stat root {};
  if (::stat(common.c_str(), &root) != 0) return {};
  for (const auto& l : layers) {
    struct stat st {};
    if (::stat(l.c_str(), &st) != 0 || st.st_dev != root.st_dev) return {};
  }
  // The same mount, not only the same filesystem: a bind elsewhere on it
  // would be left out of an unrecursive clone.
  for (const auto& l : layers) {
    struct statx a {}, b {};
    if (::statx(AT_FDCWD, common.c_str(), 0, STATX_MNT_ID, &a) != 0 ||
        ::statx(AT_FDCWD, l.c_str(), 0, STATX_MNT_ID, &b) != 0 || !(a.stx_mask & STATX_MNT_ID) ||
        a.stx_mnt_id != b.stx_mnt_id)
      return {};
  }
  return common;
}

}  // namespace

Result<LayerMounts> LayerMounts::make(const RuntimeDirs& dirs, const std::string& sandbox_id,
                                      const std::vector<std::string>& layers_bottom_first,
                                      std::uint32_t host_uid, std::uint32_t host_gid) {
  LayerMounts lm;
  const std::string parent = dirs.base + "/img";
  if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST)
    return Error::from_errno("mkdir " + parent);
  lm.dir_ = parent + "/" + sandbox_id;
  if (::mkdir(lm.dir_.c_str(), 0755) != 0) {
    Error e = Error::from_errno("mkdir " + lm.dir_);
    lm.dir_.clear();
    return e;
  }
  // Only this sandbox's init (host_uid) may reach its layers through here:
  // the store's own modes stop other host users, these binds must too.
  if (::chmod(parent.c_str(), 0711) != 0 || ::chown(lm.dir_.c_str(), host_uid, host_gid) != 0 ||
      ::chmod(lm.dir_.c_str(), 0700) != 0)
    return Error::from_errno("chmod " + lm.dir_);
  // A mount of its own holding the layers' (private: nothing propagates to
  // or from the host's mounts), so that one detach removes them all.
  if (::mount(lm.dir_.c_str(), lm.dir_.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
      ::mount(nullptr, lm.dir_.c_str(), nullptr, MS_PRIVATE, nullptr) != 0)
    return Error::from_errno("bind " + lm.dir_);
  lm.own_mount_ = true;
  auto ns = idmap_userns(0, 0, host_uid, host_gid);
  if (!ns) return ns.take_error();
  auto attach = [&](const std::string& src, const std::string& target) -> Status {
    UniqueFd tree(static_cast<int>(
        syscall(SYS_open_tree, AT_FDCWD, src.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)));
    if (!tree) return Error::from_errno("open_tree " + src);
    struct mount_attr attr {};
    attr.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    attr.userns_fd = static_cast<std::uint64_t>(ns->get());
    if (syscall(SYS_mount_setattr, tree.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) != 0)
      return Error::from_errno("idmapped mount of " + src);
    if (::mkdir(target.c_str(), 0755) != 0) return Error::from_errno("mkdir " + target);
    if (syscall(SYS_move_mount, tree.get(), "", AT_FDCWD, target.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0)
      return Error::from_errno("attach idmapped " + src);
    return {};
  };
  // Layers in one directory of one filesystem (the store's layout): that
  // directory bound once, whatever the number of layers (each mount costs).
  const std::string common = common_layer_parent(layers_bottom_first);
  if (!common.empty()) {
    const std::string target = lm.dir_ + "/0";
    if (auto st = attach(common, target); !st) return st.take_error();
    for (auto it = layers_bottom_first.rbegin(); it != layers_bottom_first.rend(); ++it)
      lm.paths_.push_back(target + it->substr(common.size()));
    return lm;
  }
  std::size_t n = 0;
  for (auto it = layers_bottom_first.rbegin(); it != layers_bottom_first.rend(); ++it, ++n) {
    const std::string target = lm.dir_ + "/" + std::to_string(n);
    if (auto st = attach(*it, target); !st) return st.take_error();
    lm.paths_.push_back(target);
  }
  return lm;
}

LayerMounts::~LayerMounts() {
  if (dir_.empty()) return;
  // One detach for the whole tree (every unmount waits for a grace period).
  if (own_mount_) ::umount2(dir_.c_str(), MNT_DETACH);
  for (const auto& name : list_dir(dir_)) ::rmdir((dir_ + "/" + name).c_str());
  ::rmdir(dir_.c_str());
}

}  // namespace sandcastle::sandbox::native
