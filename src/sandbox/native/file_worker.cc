#include "sandbox/native/file_worker.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "sandbox/native/caps.h"
#include "sandbox/native/fd_passing.h"
#include "sandbox/native/file_wire.h"
#include "sandbox/native/init_loop.h"

namespace sandcastle::sandbox::native {

std::string encode(const FilesWire& f) {
  WireWriter w;
  w.u64(f.rlimit_fsize);
  return w.bytes();
}

std::optional<FilesWire> decode_files(std::string_view bytes) {
  WireReader r(bytes);
  FilesWire f;
  f.rlimit_fsize = r.u64();
  if (!r.ok() || !r.at_end()) return std::nullopt;
  return f;
}

namespace {

// One operation may take this long; then SIGALRM ends the worker (the server
// gives up a little later and starts a new one on the next call).
constexpr unsigned kOpSeconds = 120;
constexpr std::size_t kChunk = std::size_t{1024} * 1024;
// Listing entries are batched into one send of about this size.
constexpr std::size_t kListBatch = std::size_t{64} * 1024;

bool send_all(int sock, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(sock, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

bool recv_all(int sock, char* buf, std::size_t n) {
  while (n > 0) {
    ssize_t got = ::recv(sock, buf, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    buf += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

FileReply fail(const std::string& step, int err = errno) {
  FileReply r;
  r.status = FileStatus::kErrno;
  r.err = err;
  r.step = step;
  return r;
}

const char* special_type(mode_t m) {
  if (S_ISDIR(m)) return "directory";
  if (S_ISFIFO(m)) return "FIFO (named pipe)";
  if (S_ISSOCK(m)) return "socket";
  if (S_ISCHR(m)) return "character device";
  if (S_ISBLK(m)) return "block device";
  if (S_ISLNK(m)) return "symbolic link";
  return "special file";
}

FileReply not_regular(mode_t m) {
  FileReply r;
  r.status = FileStatus::kNotRegular;
  r.step = special_type(m);
  return r;
}

// Magic links (/proc/<pid>/fd/*, .../root) are refused even here, where they
// could only lead to what the sandbox user may open anyway.
int open_path(const std::string& path, std::uint64_t flags, mode_t mode = 0) {
  struct open_how how {};
  how.flags = flags | O_CLOEXEC | O_NOCTTY;
  how.mode = (flags & O_CREAT) ? mode : 0;
  how.resolve = RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(syscall(SYS_openat2, AT_FDCWD, path.c_str(), &how, sizeof how));
}

std::uint32_t type_of(mode_t m) {
  if (S_ISREG(m)) return 0;
  if (S_ISDIR(m)) return 1;
  if (S_ISLNK(m)) return 2;
  return 3;
}

FileEntryWire entry_of(std::string name, const struct stat& st) {
  FileEntryWire e;
  e.name = std::move(name);
  e.type = type_of(st.st_mode);
  e.size = static_cast<std::uint64_t>(st.st_size);
  e.mode = st.st_mode & 07777;
  e.mtime_sec = st.st_mtim.tv_sec;
  e.mtime_nsec = st.st_mtim.tv_nsec;
  return e;
}

std::string parent_of(const std::string& path) {
  auto pos = path.rfind('/');
  return pos == 0 ? "/" : path.substr(0, pos);
}

std::string base_of(const std::string& path) {
  return path.substr(path.rfind('/') + 1);
}

FileReply make_dirs(const std::string& path) {
  std::size_t pos = 1;
  while (pos <= path.size()) {
    std::size_t end = path.find('/', pos);
    if (end == std::string::npos) end = path.size();
    std::string prefix = path.substr(0, end);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return fail("mkdir " + prefix);
    pos = end + 1;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return fail("mkdir " + path);
  if (!S_ISDIR(st.st_mode)) return fail("mkdir " + path, ENOTDIR);
  return {};
}

// Files that do not know their size (procfs, sysfs: st_size 0) are read
// until EOF, at most req.length bytes, through the buffer.
bool send_until_eof(int sock, int fd, const FileRequest& req, char* buf) {
  off_t off = static_cast<off_t>(req.offset);
  std::uint64_t left = req.length;
  bool ok = true;
  while (ok && left > 0) {
    const std::size_t want = left < kChunk ? static_cast<std::size_t>(left) : kChunk;
    ssize_t n = ::pread(fd, buf, want, off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    const std::uint32_t len = static_cast<std::uint32_t>(n);
    ok = send_all(sock, std::string_view(reinterpret_cast<const char*>(&len), sizeof len)) &&
         send_all(sock, std::string_view(buf, len));
    off += n;
    left -= len;
  }
  ::close(fd);
  const std::uint32_t end = 0;
  return ok && send_all(sock, std::string_view(reinterpret_cast<const char*>(&end), sizeof end));
}

// read: the reply, then chunks (u32 length + bytes), then a zero length. A
// file that grows or shrinks meanwhile just ends where its bytes end; the
// server bounds the total by what it asked for.
// An open that failed: a socket (ENXIO) or a device on a nodev mount
// (EACCES) is named for what it is rather than by the errno.
FileReply open_failed(const std::string& path) {
  const int err = errno;
  struct stat st {};
  if ((err == ENXIO || err == EACCES || err == ENODEV) && ::stat(path.c_str(), &st) == 0 &&
      !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
    return not_regular(st.st_mode);
  return fail("open " + path, err);
}

bool do_read(int sock, const FileRequest& req, char* buf) {
  int fd = open_path(req.path, O_RDONLY | O_NONBLOCK);
  if (fd < 0) return send_all(sock, frame(encode(open_failed(req.path))));
  struct stat st {};
  FileReply r;
  if (::fstat(fd, &st) != 0)
    r = fail("stat " + req.path);
  else if (!S_ISREG(st.st_mode))
    r = not_regular(st.st_mode);
  r.size = static_cast<std::uint64_t>(st.st_size);
  const std::uint64_t avail = r.size > req.offset ? r.size - req.offset : 0;
  if (r.status == FileStatus::kOk && (req.flags & kFileWhole) && avail > req.length)
    r.status = FileStatus::kTooLarge;
  const bool sent = send_all(sock, frame(encode(r)));
  if (r.status != FileStatus::kOk || !sent) {
    ::close(fd);
    return sent;
  }
  if (st.st_size == 0) return send_until_eof(sock, fd, req, buf);
  // Chunks as long as the file says it has left (st_size at open); sendfile
  // moves each from the page cache to the socket without a copy through us.
  // A file that shrinks meanwhile has its chunk filled with zeros (the
  // sandbox's own data to corrupt); one that grows ends at the old size.
  off_t off = static_cast<off_t>(req.offset);
  std::uint64_t left = avail < req.length ? avail : req.length;
  bool ok = true;
  while (ok && left > 0) {
    const std::uint32_t n = static_cast<std::uint32_t>(left < kChunk ? left : kChunk);
    ok = send_all(sock, std::string_view(reinterpret_cast<const char*>(&n), sizeof n));
    std::uint32_t moved = 0;
    while (ok && moved < n) {
      ssize_t k = ::sendfile(sock, fd, &off, n - moved);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) {
        std::memset(buf, 0, n - moved);
        ok = send_all(sock, std::string_view(buf, n - moved));
        left = n;  // this chunk is the last
        break;
      }
      moved += static_cast<std::uint32_t>(k);
    }
    left -= n;
  }
  ::close(fd);
  const std::uint32_t end = 0;
  return ok && send_all(sock, std::string_view(reinterpret_cast<const char*>(&end), sizeof end));
}

bool do_write(int sock, const FileRequest& req, char* buf) {
  FileReply r;
  int fd = -1;
  if (req.flags & kFileParents) r = make_dirs(parent_of(req.path));
  if (r.status == FileStatus::kOk) {
    // No O_TRUNC before the type is known: truncating is for regular files.
    fd = open_path(req.path, O_WRONLY | O_CREAT | O_NONBLOCK, req.mode & 0777);
    struct stat st {};
    if (fd < 0)
      r = open_failed(req.path);
    else if (::fstat(fd, &st) != 0)
      r = fail("stat " + req.path);
    else if (!S_ISREG(st.st_mode))
      r = not_regular(st.st_mode);
    else if (::ftruncate(fd, 0) != 0)
      r = fail("truncate " + req.path);
  }
  std::uint64_t left = req.length;
  while (left > 0) {
    std::size_t want = left < kChunk ? static_cast<std::size_t>(left) : kChunk;
    if (!recv_all(sock, buf, want)) return false;
    left -= want;
    if (r.status != FileStatus::kOk) continue;
    std::string_view chunk(buf, want);
    while (!chunk.empty()) {
      ssize_t n = ::write(fd, chunk.data(), chunk.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        r = fail("write " + req.path);
        break;
      }
      chunk.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  if (r.status == FileStatus::kOk && ::fchmod(fd, req.mode & 0777) != 0)
    r = fail("chmod " + req.path);
  if (fd >= 0) ::close(fd);
  return send_all(sock, frame(encode(r)));
}

// kFileWatch: an inotify instance with a watch on every directory listed,
// each added before the directory is read, so that whatever the walk could
// miss is queued as an event instead. Given up (fd -1) past
// kMaxWatchedDirs directories or on any failure: the server then lists.
class TreeWatch {
 public:
  explicit TreeWatch(bool wanted) : fd_(wanted ? ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK) : -1) {}
  ~TreeWatch() { give_up(); }
  TreeWatch(const TreeWatch&) = delete;
  TreeWatch& operator=(const TreeWatch&) = delete;

  // dir: an open directory of the walk. Through its /proc/self/fd link, so
  // the watch lands on that very directory whatever was renamed meanwhile.
  void add(int dir) {
    if (fd_ < 0) return;
    if (++dirs_ > kMaxWatchedDirs) return give_up();
    constexpr std::uint32_t kEvents = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM |
                                      IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF |
                                      IN_MOVE_SELF | IN_ONLYDIR;
    const std::string link = "/proc/self/fd/" + std::to_string(dir);
    if (::inotify_add_watch(fd_, link.c_str(), kEvents) < 0) give_up();
  }
  int fd() const { return fd_; }

 private:
  void give_up() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd_;
  std::uint32_t dirs_ = 0;
};

// The reply's header, with the watch's fd attached when there is one (a
// stream socket: the fd travels with the header's first bytes).
bool send_list_header(int sock, const std::string& header, int watch) {
  if (watch < 0) return send_all(sock, header);
  // A short send would split the header from nothing the server needs: the
  // header is far below the socket's buffer, so this sends it whole.
  return send_with_fds(sock, header, &watch, 1) == 0;
}

// list: the reply says how many entries follow, each a framed entry. The
// walk is iterative (a stack of directories), never deeper than
// kMaxListDepth, and stops at req.length entries.
bool do_list(int sock, const FileRequest& req) {
  struct Dir {
    std::string rel;  // relative to req.path ("" for itself)
    std::uint32_t depth;
  };
  std::vector<Dir> stack{{"", 0}};
  std::vector<FileEntryWire> entries;
  bool truncated = false;
  const bool recursive = req.flags & kFileRecursive;
  TreeWatch watch(recursive && (req.flags & kFileWatch));
  while (!stack.empty() && !truncated) {
    Dir d = std::move(stack.back());
    stack.pop_back();
    const std::string full =
        d.rel.empty() ? req.path : (req.path == "/" ? "" : req.path) + "/" + d.rel;
    int fd = open_path(full, O_RDONLY | O_DIRECTORY | (d.rel.empty() ? 0 : O_NOFOLLOW));
    if (fd < 0) {
      if (d.rel.empty()) return send_all(sock, frame(encode(fail("list " + req.path))));
      continue;  // gone or unreadable meanwhile: list what is there
    }
    watch.add(fd);
    DIR* dp = ::fdopendir(fd);
    if (!dp) {
      ::close(fd);
      continue;
    }
    while (struct dirent* de = ::readdir(dp)) {
      if (std::strcmp(de->d_name, ".") == 0 || std::strcmp(de->d_name, "..") == 0) continue;
      if (d.rel.empty() && !req.skip.empty() && req.skip == de->d_name) continue;
      struct stat st {};
      if (::fstatat(::dirfd(dp), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (entries.size() >= req.length) {
        truncated = true;
        break;
      }
      std::string rel = d.rel.empty() ? de->d_name : d.rel + "/" + de->d_name;
      if (recursive && S_ISDIR(st.st_mode) && d.depth + 1 < kMaxListDepth &&
          rel.size() < kMaxFilePath - 256)
        stack.push_back({rel, d.depth + 1});
      entries.push_back(entry_of(std::move(rel), st));
    }
    ::closedir(dp);
  }
  FileReply r;
  r.count = entries.size();
  r.truncated = truncated;
  r.watching = watch.fd() >= 0 && !truncated;
  if (!send_list_header(sock, frame(encode(r)), r.watching ? watch.fd() : -1)) return false;
  std::string out;
  for (const auto& e : entries) {
    out += frame(encode(e));
    if (out.size() >= kListBatch) {
      if (!send_all(sock, out)) return false;
      out.clear();
    }
  }
  return send_all(sock, out);
}

FileReply remove_tree_reply(const std::string& path) {
  // Iterative: a directory is removed once its contents are; children that
  // are directories are visited first (pushed above their parent).
  std::vector<std::pair<std::string, bool>> stack{{path, false}};  // path, children pushed
  while (!stack.empty()) {
    auto& [p, expanded] = stack.back();
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) return fail("stat " + p);
    if (!S_ISDIR(st.st_mode)) {
      if (::unlink(p.c_str()) != 0) return fail("unlink " + p);
      stack.pop_back();
      continue;
    }
    if (expanded) {
      if (::rmdir(p.c_str()) != 0) return fail("rmdir " + p);
      stack.pop_back();
      continue;
    }
    expanded = true;
    std::string dir = p;
    int fd = open_path(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    if (fd < 0) return fail("open " + dir);
    DIR* dp = ::fdopendir(fd);
    if (!dp) {
      ::close(fd);
      return fail("opendir " + dir);
    }
    std::vector<std::string> children;
    while (struct dirent* de = ::readdir(dp))
      if (std::strcmp(de->d_name, ".") != 0 && std::strcmp(de->d_name, "..") != 0)
        children.push_back(dir + "/" + de->d_name);
    ::closedir(dp);
    for (auto& c : children) stack.emplace_back(std::move(c), false);
  }
  return {};
}

FileReply do_remove(const FileRequest& req) {
  if (req.path == "/") return fail("remove /", EINVAL);
  if (req.flags & kFileRecursive) return remove_tree_reply(req.path);
  struct stat st {};
  if (::lstat(req.path.c_str(), &st) != 0) return fail("stat " + req.path);
  int rc = S_ISDIR(st.st_mode) ? ::rmdir(req.path.c_str()) : ::unlink(req.path.c_str());
  if (rc != 0) return fail("remove " + req.path);
  return {};
}

// A path's parent directory, opened for *at calls (O_PATH: search rights
// only). Magic links are refused, as for every open here.
// (openat2 refuses O_NOCTTY beside O_PATH, so not open_path.)
int open_parent(const std::string& path) {
  struct open_how how {};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(
      syscall(SYS_openat2, AT_FDCWD, parent_of(path).c_str(), &how, sizeof how));
}

// rename: replaces a file (or a symlink, itself), never a directory. The
// kernel refuses a non-directory onto a directory (EISDIR) atomically, so
// `from` must not be one; both parents are resolved in this sandbox.
FileReply do_rename(const FileRequest& req) {
  const std::string from = base_of(req.path), to = base_of(req.to);
  if (from.empty() || to.empty()) return fail("rename " + req.path, EINVAL);
  const int from_dir = open_parent(req.path);
  if (from_dir < 0) return fail("open " + parent_of(req.path));
  const int to_dir = open_parent(req.to);
  FileReply r;
  struct stat st {};
  if (to_dir < 0)
    r = fail("open " + parent_of(req.to));
  else if (::fstatat(from_dir, from.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    r = fail("stat " + req.path);
  else if (S_ISDIR(st.st_mode))
    r = fail("rename " + req.path, EISDIR);
  else if (::renameat(from_dir, from.c_str(), to_dir, to.c_str()) != 0)
    r = fail("rename " + req.path + " to " + req.to);
  ::close(from_dir);
  if (to_dir >= 0) ::close(to_dir);
  return r;
}

FileReply do_usage() {
  FileReply r;
  struct statfs sf {};
  if (::statfs("/workspace", &sf) == 0)
    r.size = static_cast<std::uint64_t>(sf.f_blocks - sf.f_bfree) *
             static_cast<std::uint64_t>(sf.f_bsize);
  if (DIR* d = ::opendir("/proc")) {
    while (struct dirent* e = ::readdir(d))
      if (std::isdigit(static_cast<unsigned char>(e->d_name[0]))) ++r.count;
    ::closedir(d);
  }
  return r;
}

bool handle(int sock, const FileRequest& req, char* buf) {
  switch (req.op) {
    case FileOp::kRead: return do_read(sock, req, buf);
    case FileOp::kWrite: return do_write(sock, req, buf);
    case FileOp::kList: return do_list(sock, req);
    case FileOp::kStat: {
      struct stat st {};
      if (::lstat(req.path.c_str(), &st) != 0)
        return send_all(sock, frame(encode(fail("stat " + req.path))));
      FileReply r;
      r.count = 1;
      // The server names the entry itself; "/" has no last component to send.
      std::string name = req.path == "/" ? "root" : base_of(req.path);
      return send_all(sock, frame(encode(r)) + frame(encode(entry_of(name, st))));
    }
    case FileOp::kMkdir: {
      FileReply r;
      if (req.flags & kFileParents)
        r = make_dirs(req.path);
      else if (::mkdir(req.path.c_str(), 0755) != 0)
        r = fail("mkdir " + req.path);
      return send_all(sock, frame(encode(r)));
    }
    case FileOp::kRemove: return send_all(sock, frame(encode(do_remove(req))));
    case FileOp::kUsage: return send_all(sock, frame(encode(do_usage())));
    case FileOp::kRename: return send_all(sock, frame(encode(do_rename(req))));
  }
  return false;
}

}  // namespace

// The same context a command runs in (see run_exec_child), minus exec.
bool enter_sandbox_context(const InitConfig& config, const FilesWire& limits, const char* name) {
  sigset_t none;
  sigemptyset(&none);
  pthread_sigmask(SIG_SETMASK, &none, nullptr);
  prctl(PR_SET_NAME, name, 0, 0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  // A write past the file size limit fails with EFBIG instead of killing us.
  (void)signal(SIGXFSZ, SIG_IGN);
  (void)signal(SIGPIPE, SIG_IGN);
  struct rlimit core {
    0, 0
  };
  if (::setrlimit(RLIMIT_CORE, &core) != 0) return false;
  if (limits.rlimit_fsize) {
    struct rlimit fsize {
      limits.rlimit_fsize, limits.rlimit_fsize
    };
    if (::setrlimit(RLIMIT_FSIZE, &fsize) != 0) return false;
  }
  if (drop_all_caps()) return false;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  if (!config.seccomp_bpf.empty() && load_seccomp_filter(config.seccomp_bpf) != 0) return false;
  return ::chdir("/") == 0;
}

[[noreturn]] void run_file_worker(int sock, const InitConfig& config, const FilesWire& limits) {
  if (!enter_sandbox_context(config, limits, "sc-files")) {
    // Said on the channel: the server's first call fails with this step.
    (void)send_all(sock, frame(encode(fail("file worker: enter the sandbox's context"))));
    _exit(1);
  }
  auto buf = std::make_unique_for_overwrite<char[]>(kChunk);
  for (;;) {
    struct pollfd p {
      sock, POLLIN, 0
    };
    int r = ::poll(&p, 1, static_cast<int>(kSlotIdle.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) _exit(0);  // idle: the server starts a new one when needed
    std::uint32_t len = 0;
    if (!recv_all(sock, reinterpret_cast<char*>(&len), sizeof len) || len > kMaxFileMessage)
      _exit(0);
    std::string msg(len, '\0');
    if (!recv_all(sock, msg.data(), len)) _exit(0);
    auto req = decode_file_request(msg);
    if (!req) _exit(1);
    ::alarm(kOpSeconds);
    bool ok = handle(sock, *req, buf.get());
    ::alarm(0);
    if (!ok) _exit(0);
  }
}

}  // namespace sandcastle::sandbox::native
