#include "sandbox/native/host_image.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <climits>

#include "common/unique_fd.h"
#include "sandbox/native/fs_util.h"

namespace sandcastle::sandbox::native {
namespace {

constexpr const char* kPasswd =
    "root:x:0:0:root:/root:/bin/sh\n"
    "sandbox:x:1000:1000:sandbox:/workspace:/bin/sh\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
constexpr const char* kGroup = "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n";
constexpr const char* kHosts =
    "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n";
constexpr const char* kResolv = "# no network in this sandbox\n";
constexpr const char* kNsswitch = "passwd: files\ngroup: files\nhosts: files dns\n";

Status write_file(const std::string& path, const std::string& content) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) return Error::from_errno("create " + path);
  if (::write(fd.get(), content.data(), content.size()) != static_cast<ssize_t>(content.size()))
    return Error::from_errno("write " + path);
  ::fchmod(fd.get(), 0644);
  return {};
}

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// fontconfig's prebuilt cache is in the host's /var, which a sandbox lacks:
// a copy beside the configuration and a conf.d entry naming it spare every
// run the font scan (and, without a writable cache, its warnings on stderr).
constexpr const char* kFontCacheConf =
    "<?xml version=\"1.0\"?>\n<!DOCTYPE fontconfig SYSTEM \"urn:fontconfig:fonts.dtd\">\n"
    "<fontconfig><cachedir>/etc/fonts/sandcastle-cache</cachedir></fontconfig>\n";

Status copy_font_cache(const std::string& etc) {
  if (!is_dir(etc + "/fonts/conf.d") || !is_dir("/var/cache/fontconfig")) return {};
  const std::string dst = etc + "/fonts/sandcastle-cache";
  std::uint64_t budget = 64ULL << 20;
  if (auto st = copy_public_tree("/var/cache/fontconfig", dst, budget); !st) return st;
  return write_file(etc + "/fonts/conf.d/00-sandcastle-cache.conf", kFontCacheConf);
}

}  // namespace

Status copy_public_tree(const std::string& src, const std::string& dst, std::uint64_t& budget,
                        int depth) {
  constexpr std::uint64_t kMaxFile = 1 << 20;
  constexpr int kMaxDepth = 8;
  struct stat st {};
  if (::lstat(src.c_str(), &st) != 0) return {};  // gone meanwhile: nothing to copy
  if (S_ISLNK(st.st_mode)) {
    char target[PATH_MAX];
    ssize_t n = ::readlink(src.c_str(), target, sizeof target - 1);
    if (n <= 0) return {};
    target[n] = '\0';
    if (::symlink(target, dst.c_str()) != 0) return Error::from_errno("symlink " + dst);
    return {};
  }
  if (S_ISDIR(st.st_mode)) {
    if ((st.st_mode & (S_IROTH | S_IXOTH)) != (S_IROTH | S_IXOTH) || depth >= kMaxDepth) return {};
    if (::mkdir(dst.c_str(), 0755) != 0 || ::chmod(dst.c_str(), 0755) != 0)
      return Error::from_errno("mkdir " + dst);
    for (const auto& name : list_dir(src))
      if (auto r = copy_public_tree(src + "/" + name, dst + "/" + name, budget, depth + 1); !r)
        return r;
    return {};
  }
  if (!S_ISREG(st.st_mode) || !(st.st_mode & S_IROTH)) return {};
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > kMaxFile || size > budget) return {};
  UniqueFd in(::open(src.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!in) return {};
  std::string content;
  char buf[16384];
  ssize_t n;
  while (content.size() <= kMaxFile && (n = ::read(in.get(), buf, sizeof buf)) > 0)
    content.append(buf, static_cast<std::size_t>(n));
  if (content.size() > kMaxFile || content.size() > budget) return {};  // grew since the stat
  budget -= content.size();
  return write_file(dst, content);
}

std::string runtime_parent() {
  if (::geteuid() == 0 && ::access("/run", W_OK) == 0) return "/run";
  return "/tmp";
}

Result<RuntimeDirs> prepare_runtime_dirs(const std::string& tag) {
  RuntimeDirs d;
  d.base = runtime_parent() + "/" + kRuntimePrefix + std::to_string(::getpid()) +
           (tag.empty() ? "" : "-" + tag);
  d.etc_template = d.base + "/etc";
  d.root_mount = d.base + "/root";
  d.share = d.base + "/share";
  d.mask = d.base + "/mask";
  (void)remove_tree(d.base);  // a predecessor with our pid: stale by definition
  for (const auto& dir : {d.base, d.etc_template, d.root_mount, d.share, d.mask, d.mask + "/dir"}) {
    if (::mkdir(dir.c_str(), 0755) != 0) return Error::from_errno("mkdir " + dir);
    // World-searchable: in root mode the sandbox's init runs as an
    // unprivileged host uid and must reach these paths.
    if (::chmod(dir.c_str(), 0755) != 0) return Error::from_errno("chmod " + dir);
  }
  // The masks: empty, and not writable by anyone in a sandbox (in root mode
  // they belong to a uid no sandbox maps; unprivileged, the mount is read-only
  // and the mode stops even their owner).
  if (auto st = write_file(d.mask + "/file", ""); !st) return st.take_error();
  if (::chmod((d.mask + "/file").c_str(), 0444) != 0 ||
      ::chmod((d.mask + "/dir").c_str(), 0555) != 0)
    return Error::from_errno("chmod " + d.mask);
  const std::string& e = d.etc_template;
  for (auto [name, content] : {std::pair{"passwd", kPasswd},
                               {"group", kGroup},
                               {"hosts", kHosts},
                               {"resolv.conf", kResolv},
                               {"nsswitch.conf", kNsswitch},
                               {"hostname", "sandbox\n"}}) {
    if (auto st = write_file(e + "/" + name, content); !st) return st.take_error();
  }
  // The dynamic loader's cache: without it every exec searches the default
  // paths only, and libraries in /usr/lib/x86_64-linux-gnu/<sub> are missed.
  std::string cache = read_small_file("/etc/ld.so.cache");
  if (!cache.empty())
    if (auto st = write_file(e + "/ld.so.cache", cache); !st) return st.take_error();
  // Mount points for the parts of /etc that are bound from the host.
  for (const char* sub : {"ssl", "alternatives", "ca-certificates"})
    if (is_dir(std::string("/etc/") + sub)) ::mkdir((e + "/" + sub).c_str(), 0755);
  // Toolchains' own configuration, copied once here so a sandbox pays no
  // mount for it.
  std::uint64_t budget = 16ULL << 20;
  for (const auto& name : list_dir("/etc")) {
    bool wanted = false;
    for (const char* pattern : kHostEtcCopied)
      wanted = wanted || ::fnmatch(pattern, name.c_str(), 0) == 0;
    if (!wanted) continue;
    if (auto st = copy_public_tree("/etc/" + name, e + "/" + name, budget); !st)
      return st.take_error();
  }
  if (auto st = copy_font_cache(e); !st) return st.take_error();
  char target[PATH_MAX];
  ssize_t n = ::readlink("/etc/os-release", target, sizeof target - 1);
  if (n > 0) {
    target[n] = '\0';
    (void)!::symlink(target, (e + "/os-release").c_str());
  }
  if (::access("/usr/share/zoneinfo/Etc/UTC", R_OK) == 0)
    (void)!::symlink("/usr/share/zoneinfo/Etc/UTC", (e + "/localtime").c_str());
  return d;
}

namespace {

struct PlanBuilder {
  std::vector<MountOp> p;
  void mkdir(std::string dst, std::uint32_t mode = 0755) {
    p.push_back(MountOp{MountKind::kMkdir, "", std::move(dst), 0, mode, false, ""});
  }
  void bind(std::string src, std::string dst) {
    mkdir(dst);
    p.push_back(MountOp{MountKind::kBind, std::move(src), std::move(dst), 0, 0, false, ""});
  }
  // The mount point exists already (made by the base plan).
  void tmpfs(std::string dst, std::uint64_t size, std::uint32_t mode, std::string opts) {
    p.push_back(MountOp{MountKind::kTmpfs, "", std::move(dst), size, mode, true, std::move(opts)});
  }
  void link(std::string target, std::string dst) {
    p.push_back(MountOp{MountKind::kSymlink, std::move(target), std::move(dst), 0, 0, false, ""});
  }
};

}  // namespace

Status publish_shared_file(const RuntimeDirs& dirs, const std::string& name,
                           std::string_view data) {
  if (name.empty() || name.find('/') != std::string::npos || name[0] == '.')
    return Error::make(ErrorCode::kInvalidArgument, "shared file name: " + name);
  static std::atomic<std::uint64_t> serial{0};
  const std::string tmp = dirs.share + "/.tmp-" + std::to_string(serial.fetch_add(1)) + "-" + name;
  const std::string dst = dirs.share + "/" + name;
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444));
  if (!fd) return Error::from_errno("create " + tmp);
  std::string_view rest = data;
  while (!rest.empty()) {
    ssize_t n = ::write(fd.get(), rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Error e = Error::from_errno("write " + tmp);
      ::unlink(tmp.c_str());
      return e;
    }
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
  ::fchmod(fd.get(), 0444);  // whatever the umask: every sandbox user reads it
  fd.reset();
  if (::rename(tmp.c_str(), dst.c_str()) != 0) {
    Error e = Error::from_errno("rename " + tmp + " to " + dst);
    ::unlink(tmp.c_str());
    return e;
  }
  return {};
}

std::vector<MountOp> host_image_base_plan(const RuntimeDirs& dirs) {
  const std::string& etc_template = dirs.etc_template;
  PlanBuilder b;
  std::vector<MountOp>& p = b.p;
  auto mkdir = [&](std::string dst, std::uint32_t mode = 0755) { b.mkdir(std::move(dst), mode); };
  auto bind = [&](std::string src, std::string dst) { b.bind(std::move(src), std::move(dst)); };
  auto link = [&](std::string target, std::string dst) {
    b.link(std::move(target), std::move(dst));
  };

  bind("/usr", "usr");
  // /bin, /lib, ... exactly as on the host: merged-/usr links stay links.
  for (const char* top : {"bin", "sbin", "lib", "lib32", "lib64", "libx32"}) {
    std::string host = std::string("/") + top;
    struct stat st {};
    if (::lstat(host.c_str(), &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      ssize_t n = ::readlink(host.c_str(), target, sizeof target - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      link(target, top);
    } else if (S_ISDIR(st.st_mode)) {
      bind(host, top);
    }
  }
  bind(etc_template, "etc");
  for (const char* sub : {"ssl", "alternatives", "ca-certificates"})
    if (is_dir(std::string("/etc/") + sub))
      p.push_back(MountOp{MountKind::kBind, std::string("/etc/") + sub, std::string("etc/") + sub,
                          0, 0, false, ""});

  mkdir("proc");
  p.push_back(MountOp{MountKind::kProc, "", "proc", 0, 0, false, ""});
  // Right after the mount, by init in the user namespace that owns this
  // procfs: a command has no capability to undo them, and seccomp denies
  // mount and umount anyway.
  for (const char* path : kProcMasked)
    p.push_back(MountOp{MountKind::kMask, dirs.mask, path, 0, 0, false, ""});
  for (const char* path : kProcReadOnly)
    p.push_back(MountOp{MountKind::kReadOnlyPath, "", path, 0, 0, false, ""});

  // /dev, /dev/shm and /tmp are directories of the root tmpfs, each made a
  // mount of its own (so /dev can be sealed read-only and the others stay
  // writable): one filesystem where there were four. Every filesystem costs
  // kernel memory, and a shrinker whose count the kernel charges again to
  // every memory cgroup on the host.
  mkdir("dev");
  p.push_back(MountOp{MountKind::kSubmount, "", "dev", 0, 0, true, "noexec"});
  for (const char* node : {"null", "zero", "full", "random", "urandom", "tty"})
    p.push_back(MountOp{MountKind::kBindFile, std::string("/dev/") + node,
                        std::string("dev/") + node, 0, 0, true, ""});
  mkdir("dev/pts");
  p.push_back(MountOp{MountKind::kDevpts, "", "dev/pts", 0, 0, false, ""});
  link("pts/ptmx", "dev/ptmx");
  link("/proc/self/fd", "dev/fd");
  link("/proc/self/fd/0", "dev/stdin");
  link("/proc/self/fd/1", "dev/stdout");
  link("/proc/self/fd/2", "dev/stderr");
  mkdir("dev/shm", 01777);
  p.push_back(MountOp{MountKind::kSubmount, "", "dev/shm", 0, 0, true, "noexec"});
  mkdir("tmp", 01777);
  p.push_back(MountOp{MountKind::kSubmount, "", "tmp", 0, 0, true, ""});
  mkdir("workspace", 0755);
  mkdir("root", 0700);
  // kSharedDir: the server's files for every sandbox (kernel drivers), one
  // copy in the page cache for all of them.
  mkdir("opt");
  bind(dirs.share, "opt/sandcastle");
  return p;
}

std::vector<MountOp> host_image_spec_plan(const SandboxSpec& spec) {
  const Limits& l = spec.limits();
  PlanBuilder b;
  // The root tmpfs holds /tmp and /dev/shm: its size is their limit.
  b.p.push_back(MountOp{MountKind::kResize, "", "", l.tmp_bytes, 0, true, "nr_inodes=65536"});
  b.p.push_back(MountOp{MountKind::kReadOnly, "", "dev", 0, 0, false, ""});
  // The disk limit: a tmpfs of exactly that size, so a full disk is ENOSPC
  // inside the sandbox and nothing on the host.
  // (A persistent sandbox's /workspace is its storage, bound by the base
  // plan: an ext4 image of that size, persist_disk.h; without root it is a
  // tmpfs too, copied to disk after each call, persist_mirror.h.)
  if (spec.persistence() != Persistence::kPersistent || ::geteuid() != 0)
    b.tmpfs("workspace", l.disk_bytes, 0755, "uid=1000,gid=1000,nr_inodes=262144");
  // Last: the root mount itself becomes read-only (/tmp and /dev/shm are
  // mounts of their own and stay writable).
  b.p.push_back(MountOp{MountKind::kReadOnly, "", "", 0, 0, false, ""});
  return b.p;
}

std::vector<MountOp> host_image_plan(const SandboxSpec& spec, const RuntimeDirs& dirs) {
  std::vector<MountOp> p = host_image_base_plan(dirs);
  std::vector<MountOp> rest = host_image_spec_plan(spec);
  p.insert(p.end(), rest.begin(), rest.end());
  return p;
}

}  // namespace sandcastle::sandbox::native
