#include "sandbox/native/persist_mirror.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace sandcastle::sandbox::native {

namespace {

constexpr int kMirrorMaxDepth = 128;
constexpr std::size_t kMirrorChunk = std::size_t{256} << 10;
// The copy's own directory at its root (a source entry of that name is
// skipped): temporaries (written, then renamed into place) and "old", what
// the source no longer has, set aside until the pass is complete.
constexpr const char* kStageDir = ".sc-mirror";
constexpr const char* kOldDir = "old";

std::uint64_t round4k(std::uint64_t n) {
  return (n + 4095) & ~std::uint64_t{4095};
}

// A file's data as the bound counts it: its allocated bytes (a sparse file
// counts its data, not its holes), never more than its size, in 4 KiB units.
std::uint64_t charge(const struct stat& st) {
  if (!S_ISREG(st.st_mode)) return 0;
  const auto size = static_cast<std::uint64_t>(st.st_size);
  const auto alloc = static_cast<std::uint64_t>(st.st_blocks) * 512;
  return round4k(std::min(size, alloc));
}

// One name beneath `dir`: no symlink anywhere, no other mount, no escape.
int open_beneath(int dir, const char* name, int flags) {
  struct open_how how {};
  how.flags = static_cast<std::uint64_t>(flags | O_NOFOLLOW | O_CLOEXEC);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS;
  int fd;
  do fd = static_cast<int>(syscall(SYS_openat2, dir, name, &how, sizeof how));
  while (fd < 0 && errno == EINTR);
  return fd;
}

struct FdGuard {
  int fd;
  explicit FdGuard(int f) : fd(f) {}
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
  FdGuard(const FdGuard&) = delete;
  FdGuard& operator=(const FdGuard&) = delete;
};

// Names in `dir` (not . and ..), at most `cap` of them (else E2BIG).
int read_names(int dir, std::vector<std::string>& out, std::uint64_t cap) {
  int dup = ::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dup < 0) return errno;
  DIR* d = ::fdopendir(dup);
  if (!d) {
    int e = errno;
    ::close(dup);
    return e;
  }
  int err = 0;
  errno = 0;
  while (struct dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    if (out.size() >= cap) {
      err = E2BIG;
      break;
    }
    out.emplace_back(e->d_name);
  }
  if (!err && errno) err = errno;
  ::closedir(d);
  return err;
}

int remove_entry(int dir, const char* name, int depth);

int clear_dir(int dir, int depth) {
  if (depth > 2 * kMirrorMaxDepth) return ELOOP;
  std::vector<std::string> names;
  if (int e = read_names(dir, names, ~std::uint64_t{0}); e) return e;
  for (const auto& n : names)
    if (int e = remove_entry(dir, n.c_str(), depth + 1); e) return e;
  return 0;
}

int remove_entry(int dir, const char* name, int depth) {
  struct stat st {};
  if (::fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return errno == ENOENT ? 0 : errno;
  if (S_ISDIR(st.st_mode)) {
    FdGuard sub(open_beneath(dir, name, O_RDONLY | O_DIRECTORY));
    if (sub.fd < 0) return errno;  // EXDEV: a mount there, left alone
    if (int e = clear_dir(sub.fd, depth); e) return e;
    if (::unlinkat(dir, name, AT_REMOVEDIR) != 0 && errno != ENOENT) return errno;
    return 0;
  }
  if (::unlinkat(dir, name, 0) != 0 && errno != ENOENT) return errno;
  return 0;
}

// kWhiteout: an overlay whiteout (a 0:0 character device: one the kernel
// lets anyone make), how an image sandbox's upper dir records a deletion.
enum class Kind { kRegular, kDirectory, kSymlink, kWhiteout, kOther };

Kind kind_of(const struct stat& st) {
  if (S_ISREG(st.st_mode)) return Kind::kRegular;
  if (S_ISDIR(st.st_mode)) return Kind::kDirectory;
  if (S_ISLNK(st.st_mode)) return Kind::kSymlink;
  if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) return Kind::kWhiteout;
  return Kind::kOther;
}

// An overlay directory that hides the lower ones' (user.overlay.opaque).
constexpr const char* kOpaque = "user.overlay.opaque";

std::string opaque_of(int dir) {
  char v[8];
  ssize_t n = ::fgetxattr(dir, kOpaque, v, sizeof v);
  return n > 0 ? std::string(v, static_cast<std::size_t>(n)) : std::string();
}

int sync_opaque(int from, int to) {
  const std::string want = opaque_of(from), have = opaque_of(to);
  if (want == have) return 0;
  if (want.empty()) return ::fremovexattr(to, kOpaque) == 0 || errno == ENODATA ? 0 : errno;
  return ::fsetxattr(to, kOpaque, want.data(), want.size(), 0) == 0 ? 0 : errno;
}

bool same_file(const struct stat& a, const struct stat& b) {
  return a.st_size == b.st_size && a.st_mtim.tv_sec == b.st_mtim.tv_sec &&
         a.st_mtim.tv_nsec == b.st_mtim.tv_nsec && (a.st_mode & 0777) == (b.st_mode & 0777);
}

bool read_link(int dir, const char* name, std::string& out) {
  char buf[4097];
  ssize_t n = ::readlinkat(dir, name, buf, sizeof buf);
  if (n < 0 || n >= static_cast<ssize_t>(sizeof buf)) return false;
  out.assign(buf, static_cast<std::size_t>(n));
  return true;
}

// An unfinished pass's staged entries put back where the tree lacks them
// (each entry then has its old or its new state), and the staging removed.
int merge_back(int stage, int tree, int depth) {
  if (depth > 2 * kMirrorMaxDepth) return ELOOP;
  std::vector<std::string> names;
  if (int e = read_names(stage, names, ~std::uint64_t{0}); e) return e;
  for (const auto& n : names) {
    struct stat have {
    }, old{};
    if (::fstatat(tree, n.c_str(), &have, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT) return errno;
      if (::renameat(stage, n.c_str(), tree, n.c_str()) != 0) return errno;
      continue;
    }
    if (::fstatat(stage, n.c_str(), &old, AT_SYMLINK_NOFOLLOW) != 0) return errno;
    if (!S_ISDIR(have.st_mode) || !S_ISDIR(old.st_mode)) continue;  // the new state is there
    FdGuard s(open_beneath(stage, n.c_str(), O_RDONLY | O_DIRECTORY));
    FdGuard t(open_beneath(tree, n.c_str(), O_RDONLY | O_DIRECTORY));
    if (s.fd < 0 || t.fd < 0) continue;
    if (int e = merge_back(s.fd, t.fd, depth + 1); e) return e;
  }
  return 0;
}

// The directories of one tree as (parent, name) nodes, each name kept once
// (a full path per entry would cost depth x 255 bytes each), and opened
// again one name at a time beneath the tree's fd, the open chain cached.
class DirWalk {
 public:
  struct Node {
    std::uint32_t parent;
    std::string name;
  };
  DirWalk(int root, const std::vector<Node>& nodes) : root_(root), nodes_(nodes) {}
  ~DirWalk() { truncate(0); }
  DirWalk(const DirWalk&) = delete;
  DirWalk& operator=(const DirWalk&) = delete;

  // The directory `node` (0: the root itself), or -1 with errno.
  int at(std::uint32_t node) {
    std::vector<std::uint32_t> want;
    for (std::uint32_t n = node; n != 0; n = nodes_[n].parent) want.push_back(n);
    std::reverse(want.begin(), want.end());
    std::size_t same = 0;
    while (same < chain_.size() && same < want.size() && chain_[same] == want[same]) ++same;
    truncate(same);
    for (std::size_t i = same; i < want.size(); ++i) {
      const int parent = fds_.empty() ? root_ : fds_.back();
      int fd = open_beneath(parent, nodes_[want[i]].name.c_str(), O_RDONLY | O_DIRECTORY);
      if (fd < 0) return -1;
      chain_.push_back(want[i]);
      fds_.push_back(fd);
    }
    return fds_.empty() ? root_ : fds_.back();
  }

 private:
  void truncate(std::size_t n) {
    while (fds_.size() > n) {
      ::close(fds_.back());
      fds_.pop_back();
      chain_.pop_back();
    }
  }
  int root_;
  const std::vector<Node>& nodes_;
  std::vector<std::uint32_t> chain_;
  std::vector<int> fds_;
};

// What a directory, symlink or whiteout costs on the copy's disk (ext4: a
// block), though (almost) nothing on the sandbox's tmpfs.
constexpr std::uint64_t kEntryCharge = 4096;

std::uint64_t entry_charge(const struct stat& st) {
  return S_ISREG(st.st_mode) ? charge(st) : kEntryCharge;
}

// A file of the sandbox's uid without u+r (chmod 000): kept all the same,
// read after a brief u+r and its mode put back through the opened file.
// (Whatever name it is, it is the sandbox's own file in its own view.)
int open_unreadable(int dir, const char* name) {
  FdGuard path(open_beneath(dir, name, O_PATH));
  struct stat st {};
  if (path.fd < 0 || ::fstat(path.fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_uid != ::geteuid()) {
    errno = EACCES;
    return -1;
  }
  if (::fchmodat(dir, name, (st.st_mode & 07777) | S_IRUSR, 0) != 0) return -1;
  int fd = open_beneath(dir, name, O_RDONLY | O_NOCTTY | O_NONBLOCK);
  const int e = errno;
  struct stat now {};
  if (fd >= 0 && ::fstat(fd, &now) == 0 && now.st_ino == st.st_ino && now.st_dev == st.st_dev) {
    (void)::fchmod(fd, st.st_mode & 07777);
    return fd;
  }
  if (fd >= 0) ::close(fd);
  errno = fd >= 0 ? ENOENT : e;  // replaced meanwhile: the next pass sees it
  return -1;
}

class Mirror {
 public:
  Mirror(int from, int to, const MirrorLimits& limits) : from_(from), to_(to), limits_(limits) {
    nodes_.push_back({0, ""});
  }
  ~Mirror() {
    if (stage_root_ >= 0) ::close(stage_root_);
  }
  Mirror(const Mirror&) = delete;
  Mirror& operator=(const Mirror&) = delete;

  MirrorStats run() {
    struct stat root {};
    if (int e = recover_staging(to_); e) {
      fail(e, "recover the copy's unfinished sync");
    } else if (::fstat(from_, &root) != 0) {
      fail(errno, "stat the source");
    } else {
      Stage top{nullptr, nullptr, -1, 0};
      if (plan(from_, to_, 0, 0, top)) {
        if (int m = sync_opaque(from_, to_); m) fail(m, "mark the copy's root");
        apply();
      }
      if (top.fd >= 0) ::close(top.fd);
      // Complete: what the source no longer has goes for good.
      // (A failed one keeps what it set aside, for the next pass to put back.)
      if (stats_.err == 0 || staged_ == 0) {
        if (int d = drop_staging(); d) fail(d, "remove the copy's old entries");
      }
    }
    stats_.total_bytes = total_;
    return stats_;
  }

 private:
  using Node = DirWalk::Node;
  struct Pending {
    std::uint32_t dir;  // a node
    std::string name;
    Kind kind;
  };
  // A directory's place in the staging tree, made when first needed.
  struct Stage {
    Stage* parent;
    const std::string* name;
    int fd;
    std::uint64_t gen;
  };

  bool fail(int err, std::string message) {
    if (stats_.err == 0) {
      stats_.err = err == 0 ? EIO : err;
      stats_.message = std::move(message) + ": " + mirror_err_text(stats_.err);
    }
    return false;
  }

  std::string path_of(std::uint32_t node, const std::string& name = "") const {
    std::vector<const std::string*> parts;
    for (std::uint32_t n = node; n != 0 && parts.size() < 16; n = nodes_[n].parent)
      parts.push_back(&nodes_[n].name);
    std::string out = parts.size() == 16 ? "/..." : "";
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
      out.push_back('/');
      out.append(**it);
    }
    out.push_back('/');
    out.append(name);
    return out;
  }

  // <to>/.sc-mirror: made on first use; its "old" is the staging tree.
  int stage_root() {
    if (stage_root_ >= 0) return stage_root_;
    if (::mkdirat(to_, kStageDir, 0700) != 0 && errno != EEXIST) return -1;
    stage_root_ = open_beneath(to_, kStageDir, O_RDONLY | O_DIRECTORY);
    return stage_root_;
  }
  int stage_fd(Stage& s) {
    if (s.fd >= 0 && s.gen == stage_gen_) return s.fd;
    if (s.fd >= 0) ::close(s.fd);
    s.fd = -1;
    s.gen = stage_gen_;
    int parent;
    const char* name;
    if (!s.parent) {
      parent = stage_root();
      name = kOldDir;
    } else {
      parent = stage_fd(*s.parent);
      name = s.name->c_str();
    }
    if (parent < 0) return -1;
    if (::mkdirat(parent, name, 0700) != 0 && errno != EEXIST) return -1;
    s.fd = open_beneath(parent, name, O_RDONLY | O_DIRECTORY);
    return s.fd;
  }

  // Data of `dir` as the bound counts it (a staged entry still counts).
  std::uint64_t measure(int dir, int depth) {
    std::vector<std::string> names;
    if (depth > 2 * kMirrorMaxDepth || read_names(dir, names, ~std::uint64_t{0}) != 0) return 0;
    std::uint64_t sum = 0;
    for (const auto& n : names) {
      struct stat st {};
      if (::fstatat(dir, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (S_ISREG(st.st_mode) && st.st_nlink > 1 && !counted_.insert({st.st_dev, st.st_ino}).second)
        continue;
      sum += entry_charge(st);
      if (S_ISDIR(st.st_mode)) {
        FdGuard sub(open_beneath(dir, n.c_str(), O_RDONLY | O_DIRECTORY));
        if (sub.fd >= 0) sum += measure(sub.fd, depth + 1);
      }
    }
    return sum;
  }

  // `need` more bytes fit under the bound; staged entries (the old state
  // of what the source no longer has) are given up first if they must.
  bool room(std::uint64_t need) {
    if (total_ + need <= limits_.max_bytes) return true;
    if (staged_ > 0 && drop_old() == 0) return total_ + need <= limits_.max_bytes;
    return false;
  }
  // The staged entries given up (the temporary being written stays).
  int drop_old() {
    if (staged_ == 0) return 0;
    if (stage_root() < 0) return errno;
    if (int e = remove_entry(stage_root_, kOldDir, 0); e) return e;
    ++stage_gen_;  // the Stages' fds are of removed directories now
    total_ -= std::min(total_, staged_);
    staged_ = 0;
    return 0;
  }
  // The staging removed whole, at the end of a pass.
  int drop_staging() {
    if (int e = remove_entry(to_, kStageDir, 0); e) return e;
    if (stage_root_ >= 0) ::close(stage_root_);
    stage_root_ = -1;
    total_ -= std::min(total_, staged_);
    staged_ = 0;
    return 0;
  }

  // Pass 1, one directory: what `to` has and `from` has not is moved aside
  // (dropped once pass 2 is done); unchanged files are counted; changed
  // ones are noted for pass 2.
  bool plan(int from, int to, std::uint32_t node, int depth, Stage& stage) {
    if (depth > kMirrorMaxDepth)
      return fail(ELOOP, path_of(node) + ": deeper than 128 directories");
    std::vector<std::string> from_names, to_names;
    if (int e = read_names(from, from_names, limits_.max_entries); e)
      return fail(e, "list " + path_of(node));
    if (int e = read_names(to, to_names, 2 * limits_.max_entries + 16); e)
      return fail(e, "list copy of " + path_of(node));
    std::map<std::string, struct stat> src;
    for (const auto& n : from_names) {
      if (depth == 0 && n == kStageDir) {
        ++stats_.skipped;  // the name the copy keeps for itself
        continue;
      }
      struct stat st {};
      if (::fstatat(from, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;
        return fail(errno, "stat " + path_of(node, n));
      }
      if (++stats_.entries > limits_.max_entries)
        return fail(E2BIG, "more than " + std::to_string(limits_.max_entries) + " files");
      src.emplace(n, st);
    }
    std::vector<std::string> dirs;
    for (const auto& n : to_names) {
      if (depth == 0 && n == kStageDir) continue;
      auto it = src.find(n);
      struct stat dst {};
      if (::fstatat(to, n.c_str(), &dst, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;
        return fail(errno, "stat copy of " + path_of(node, n));
      }
      const Kind dk = kind_of(dst);
      const bool keep = it != src.end() && kind_of(it->second) == dk && dk != Kind::kOther;
      if (!keep) {
        // Aside, not away: a kill before pass 2 is done leaves it restorable.
        std::uint64_t c = dk == Kind::kRegular && dst.st_nlink > 1 &&
                                  !counted_.insert({dst.st_dev, dst.st_ino}).second
                              ? 0
                              : entry_charge(dst);
        if (dk == Kind::kDirectory) {
          FdGuard sub(open_beneath(to, n.c_str(), O_RDONLY | O_DIRECTORY));
          if (sub.fd >= 0) c += measure(sub.fd, depth + 1);
        }
        const int s = stage_fd(stage);
        if (s < 0) return fail(errno, "set aside copy of " + path_of(node, n));
        (void)remove_entry(s, n.c_str(), depth);  // an older staged one
        if (::renameat(to, n.c_str(), s, n.c_str()) != 0)
          return fail(errno, "set aside copy of " + path_of(node, n));
        total_ += c;
        staged_ += c;
        ++stats_.removed;
        continue;
      }
      if (dk == Kind::kRegular) {
        // A file with several names counts once.
        if (dst.st_nlink == 1 || counted_.insert({dst.st_dev, dst.st_ino}).second)
          total_ += charge(dst);
        if (!same_file(it->second, dst))
          pending_.push_back({node, n, dk});
        else if (it->second.st_nlink > 1)
          links_.emplace(std::make_pair(it->second.st_dev, it->second.st_ino),
                         std::make_pair(node, n));
      } else if (dk == Kind::kWhiteout) {
        total_ += kEntryCharge;  // nothing to compare
      } else if (dk == Kind::kSymlink) {
        total_ += kEntryCharge;
        std::string a, b;
        if (!read_link(from, n.c_str(), a) || !read_link(to, n.c_str(), b) || a != b)
          pending_.push_back({node, n, dk});
      } else {
        total_ += kEntryCharge;
        dirs.push_back(n);
      }
      src.erase(it);
    }
    if (total_ > limits_.max_bytes && !room(0))
      return fail(ENOSPC, "the copy on disk holds more than the disk limit");
    // What only `from` has: directories made now, files for pass 2.
    for (const auto& [n, st] : src) {
      const Kind k = kind_of(st);
      if (k == Kind::kOther) {
        ++stats_.skipped;
      } else if (k == Kind::kDirectory) {
        if (!room(kEntryCharge))
          return fail(ENOSPC, "make copy of " + path_of(node, n) +
                                  ": the copy on disk would pass the disk limit");
        if (::mkdirat(to, n.c_str(), 0700) != 0 && errno != EEXIST)
          return fail(errno, "make copy of " + path_of(node, n));
        total_ += kEntryCharge;
        dirs.push_back(n);
      } else {
        pending_.push_back({node, n, k});
      }
    }
    for (const auto& n : dirs) {
      FdGuard f(open_beneath(from, n.c_str(), O_RDONLY | O_DIRECTORY));
      if (f.fd < 0) {
        // Another mount, gone, replaced, or unreadable: its copy is kept as it is.
        if (errno == EXDEV || errno == ENOENT || errno == ELOOP || errno == ENOTDIR ||
            errno == EACCES) {
          ++stats_.skipped;
          continue;
        }
        return fail(errno, "open " + path_of(node, n));
      }
      FdGuard t(open_beneath(to, n.c_str(), O_RDONLY | O_DIRECTORY));
      if (t.fd < 0) return fail(errno, "open copy of " + path_of(node, n));
      if (nodes_.size() >= 0xffffffffu) return fail(E2BIG, "too many directories");
      const auto child = static_cast<std::uint32_t>(nodes_.size());
      nodes_.push_back({node, n});
      Stage sub{&stage, &n, -1, 0};
      const bool ok = plan(f.fd, t.fd, child, depth + 1, sub);
      if (sub.fd >= 0) ::close(sub.fd);
      if (!ok) return false;
      if (int e = sync_opaque(f.fd, t.fd); e) return fail(e, "mark copy of " + path_of(child));
      struct stat fs = {}, ts = {};
      // Writable for the next pass whatever the source says (0700 at least).
      if (::fstat(f.fd, &fs) == 0 && ::fstat(t.fd, &ts) == 0 &&
          (ts.st_mode & 07777) != ((fs.st_mode & 0777) | 0700))
        (void)::fchmod(t.fd, (fs.st_mode & 0777) | 0700);
    }
    return true;
  }

  // Pass 2: the changed and new files, with the running total.
  void apply() {
    DirWalk from_walk(from_, nodes_), to_walk(to_, nodes_);
    for (const auto& p : pending_) {
      const int from = from_walk.at(p.dir);
      if (from < 0) continue;  // its directory changed since pass 1: the next pass sees it
      const int to = to_walk.at(p.dir);
      if (to < 0) {
        fail(errno, "open copy of " + path_of(p.dir));
        return;
      }
      bool ok;
      if (p.kind == Kind::kSymlink)
        ok = copy_link(from, to, p);
      else if (p.kind == Kind::kWhiteout)
        ok = copy_whiteout(from, to, p);
      else
        ok = copy_file(from, to, p);
      if (!ok) return;
    }
  }

  // A temporary name in <to>/.sc-mirror, which no source entry can have;
  // unique per worker (pid) and per file.
  int make_tmp(std::string& name) {
    if (stage_root() < 0) return -1;
    name = "tmp-" + std::to_string(::getpid()) + "-" + std::to_string(++tmp_seq_);
    (void)::unlinkat(stage_root_, name.c_str(), 0);
    return stage_root_;
  }
  // The temporary renamed over `name` in `to` (a directory there first out).
  int put_in_place(int to, const std::string& tmp, const Pending& p, bool have_old) {
    if (!have_old) (void)remove_entry(to, p.name.c_str(), 0);
    if (::renameat(stage_root_, tmp.c_str(), to, p.name.c_str()) != 0) {
      int e = errno;
      (void)::unlinkat(stage_root_, tmp.c_str(), 0);
      return e;
    }
    return 0;
  }

  bool copy_link(int from, int to, const Pending& p) {
    std::string target, tmp;
    if (!read_link(from, p.name.c_str(), target)) return true;  // gone or changed
    struct stat old {};
    const bool have_old =
        ::fstatat(to, p.name.c_str(), &old, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(old.st_mode);
    if (!have_old && !room(kEntryCharge))
      return fail(ENOSPC, "copy symlink " + path_of(p.dir, p.name) +
                              ": the copy on disk would pass the disk limit");
    const int s = make_tmp(tmp);
    if (s < 0 || ::symlinkat(target.c_str(), s, tmp.c_str()) != 0)
      return fail(errno, "copy symlink " + path_of(p.dir, p.name));
    if (int e = put_in_place(to, tmp, p, have_old); e)
      return fail(e, "copy symlink " + path_of(p.dir, p.name));
    if (!have_old) total_ += kEntryCharge;
    ++stats_.copied_files;
    return true;
  }

  bool copy_whiteout(int from, int to, const Pending& p) {
    struct stat st = {};
    std::string tmp;
    if (::fstatat(from, p.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        kind_of(st) != Kind::kWhiteout)
      return true;  // changed since pass 1
    if (!room(kEntryCharge))
      return fail(ENOSPC, "copy whiteout " + path_of(p.dir, p.name) +
                              ": the copy on disk would pass the disk limit");
    const int s = make_tmp(tmp);
    if (s < 0 || ::mknodat(s, tmp.c_str(), S_IFCHR | 0600, makedev(0, 0)) != 0)
      return fail(errno, "copy whiteout " + path_of(p.dir, p.name));
    if (int e = put_in_place(to, tmp, p, false); e)
      return fail(e, "copy whiteout " + path_of(p.dir, p.name));
    total_ += kEntryCharge;
    ++stats_.copied_files;
    return true;
  }

  // Another name of this file copied already: linked to that copy, as the
  // source has it (hardlinks cost their space once, here as there). The
  // first name's directory is opened beneath `to_` and linked by one name.
  // 1: linked; 0: not possible (copy the data); -1: failed.
  int link_to_known(int to, const Pending& p, const struct stat& st, bool have_old,
                    std::uint64_t old_charge) {
    auto known = links_.find({st.st_dev, st.st_ino});
    if (known == links_.end()) return 0;
    if (!link_walk_) link_walk_ = std::make_unique<DirWalk>(to_, nodes_);
    const int dir = link_walk_->at(known->second.first);
    const char* first_name = known->second.second.c_str();
    struct stat first {};
    if (dir < 0 || ::fstatat(dir, first_name, &first, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(first.st_mode) || !same_file(st, first))
      return 0;
    std::string tmp;
    const int s = make_tmp(tmp);
    if (s < 0 || ::linkat(dir, first_name, s, tmp.c_str(), 0) != 0) {
      fail(errno, "link copy of " + path_of(p.dir, p.name));
      return -1;
    }
    if (!have_old) (void)remove_entry(to, p.name.c_str(), 0);
    const int renamed = ::renameat(s, tmp.c_str(), to, p.name.c_str());
    const int e = errno;
    // (A rename onto another name of the same file does nothing.)
    (void)::unlinkat(s, tmp.c_str(), 0);
    if (renamed != 0) {
      fail(e, "link copy of " + path_of(p.dir, p.name));
      return -1;
    }
    total_ -= std::min(total_, old_charge);
    ++stats_.copied_files;
    return 1;
  }

  bool copy_file(int from, int to, const Pending& p) {
    FdGuard src(open_beneath(from, p.name.c_str(), O_RDONLY | O_NOCTTY | O_NONBLOCK));
    if (src.fd < 0 && errno == EACCES) src.fd = open_unreadable(from, p.name.c_str());
    if (src.fd < 0) {
      if (errno == ENOENT || errno == ELOOP || errno == EXDEV || errno == ENXIO) return true;
      if (errno == EACCES) {
        ++stats_.skipped;  // not the worker's (the sandbox uid's) own file
        return true;
      }
      return fail(errno, "open " + path_of(p.dir, p.name));
    }
    struct stat st {};
    if (::fstat(src.fd, &st) != 0) return fail(errno, "stat " + path_of(p.dir, p.name));
    if (!S_ISREG(st.st_mode)) return true;  // replaced since pass 1
    struct stat old {};
    std::uint64_t old_charge = 0;
    bool have_old = false;
    if (::fstatat(to, p.name.c_str(), &old, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(old.st_mode)) {
      // (Its space stays in use while another name holds it.)
      old_charge = old.st_nlink == 1 ? charge(old) : 0;
      have_old = true;
    }
    if (st.st_nlink > 1) {
      const int linked = link_to_known(to, p, st, have_old, old_charge);
      if (linked != 0) return linked > 0;
    }
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (!room(round4k(std::min<std::uint64_t>(size, std::uint64_t(st.st_blocks) * 512))) &&
        have_old) {
      // Old and new together would not fit: the old copy goes first.
      if (::unlinkat(to, p.name.c_str(), 0) != 0)
        return fail(errno, "remove copy of " + path_of(p.dir, p.name));
      total_ -= old_charge;
      old_charge = 0;
    }
    std::string tmp;
    const int s = make_tmp(tmp);
    if (s < 0) return fail(errno, "write copy of " + path_of(p.dir, p.name));
    FdGuard dst(
        ::openat(s, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (dst.fd < 0) return fail(errno, "write copy of " + path_of(p.dir, p.name));
    auto drop_tmp = [&] { (void)::unlinkat(s, tmp.c_str(), 0); };
    if (!buf_) buf_ = std::make_unique_for_overwrite<char[]>(kMirrorChunk);
    std::uint64_t data = 0;  // bytes written
    std::uint64_t pos = 0;
    // Data segments up to the size the file had when opened: holes stay holes.
    while (pos < size) {
      off_t seg = ::lseek(src.fd, static_cast<off_t>(pos), SEEK_DATA);
      if (seg < 0) break;  // ENXIO: only a hole is left
      off_t hole = ::lseek(src.fd, seg, SEEK_HOLE);
      if (hole < 0) hole = static_cast<off_t>(size);
      const std::uint64_t end = std::min<std::uint64_t>(static_cast<std::uint64_t>(hole), size);
      for (pos = static_cast<std::uint64_t>(seg); pos < end;) {
        const std::size_t want =
            static_cast<std::size_t>(std::min<std::uint64_t>(kMirrorChunk, end - pos));
        ssize_t n = ::pread(src.fd, buf_.get(), want, static_cast<off_t>(pos));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          drop_tmp();
          return fail(errno, "read " + path_of(p.dir, p.name));
        }
        if (n == 0) {
          pos = size;  // shrank meanwhile
          break;
        }
        if (!room(round4k(data + static_cast<std::uint64_t>(n)))) {
          drop_tmp();
          return fail(ENOSPC, "copy " + path_of(p.dir, p.name) +
                                  ": the copy on disk would pass the disk limit of " +
                                  std::to_string(limits_.max_bytes) + " bytes");
        }
        for (ssize_t off = 0; off < n;) {
          ssize_t w = ::pwrite(dst.fd, buf_.get() + off, static_cast<std::size_t>(n - off),
                               static_cast<off_t>(pos) + off);
          if (w < 0 && errno == EINTR) continue;
          if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            drop_tmp();
            return fail(e, "write copy of " + path_of(p.dir, p.name));
          }
          off += w;
        }
        pos += static_cast<std::uint64_t>(n);
        data += static_cast<std::uint64_t>(n);
      }
    }
    const struct timespec times[2] = {st.st_atim, st.st_mtim};
    if (::ftruncate(dst.fd, static_cast<off_t>(size)) != 0 ||
        ::fchmod(dst.fd, st.st_mode & 0777) != 0 || ::futimens(dst.fd, times) != 0) {
      int e = errno;
      drop_tmp();
      return fail(e, "write copy of " + path_of(p.dir, p.name));
    }
    if (int e = put_in_place(to, tmp, p, have_old); e)
      return fail(e, "write copy of " + path_of(p.dir, p.name));
    total_ = total_ - old_charge + round4k(data);
    if (st.st_nlink > 1) links_[{st.st_dev, st.st_ino}] = {p.dir, p.name};
    ++stats_.copied_files;
    stats_.copied_bytes += data;
    return true;
  }

  int from_, to_;
  MirrorLimits limits_;
  MirrorStats stats_;
  std::uint64_t total_ = 0;   // the copy's data, staged entries included
  std::uint64_t staged_ = 0;  // of which set aside this pass
  std::vector<Node> nodes_;
  std::vector<Pending> pending_;
  // Files with several names: the source's inode -> its copy (dir, name).
  std::map<std::pair<dev_t, ino_t>, std::pair<std::uint32_t, std::string>> links_;
  std::set<std::pair<dev_t, ino_t>> counted_;  // the copy's, charged once
  std::unique_ptr<char[]> buf_;
  std::unique_ptr<DirWalk> link_walk_;
  int stage_root_ = -1;
  std::uint64_t stage_gen_ = 0;
  std::uint64_t tmp_seq_ = 0;
};
}  // namespace

MirrorStats mirror_tree(int from, int to, const MirrorLimits& limits) {
  return Mirror(from, to, limits).run();
}

int clear_tree(int dir) {
  return clear_dir(dir, 0);
}

int mirror_open_beneath(int dir, const char* name, int flags) {
  return open_beneath(dir, name, flags);
}

int recover_staging(int dir) {
  FdGuard stage(open_beneath(dir, kStageDir, O_RDONLY | O_DIRECTORY));
  if (stage.fd < 0) return errno == ENOENT ? 0 : errno;
  FdGuard old(open_beneath(stage.fd, kOldDir, O_RDONLY | O_DIRECTORY));
  if (old.fd >= 0) {
    if (int e = merge_back(old.fd, dir, 0); e) return e;
  } else if (errno != ENOENT) {
    return errno;
  }
  return remove_entry(dir, kStageDir, 0);
}

}  // namespace sandcastle::sandbox::native
