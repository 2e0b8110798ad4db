#include "sandbox/native/layer_export.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sandbox/native/file_wire.h"
#include "sandbox/native/file_worker.h"

namespace sandcastle::sandbox::native {

std::string encode(const LayerExportWire& w) {
  WireWriter o;
  o.u64(w.max_bytes);
  o.u64(w.max_entries);
  return o.bytes();
}

std::optional<LayerExportWire> decode_layer_export(std::string_view bytes) {
  WireReader r(bytes);
  LayerExportWire w;
  w.max_bytes = r.u64();
  w.max_entries = r.u64();
  if (!r.ok() || !r.at_end()) return std::nullopt;
  return w;
}

std::string encode(const LayerSummaryWire& s) {
  WireWriter o;
  o.i32(s.err);
  o.str(s.message);
  o.u64(s.entries);
  o.u64(s.bytes);
  o.u64(s.skipped);
  o.u64(s.unreadable);
  o.strs(s.skipped_paths);
  o.u32(s.whole_root ? 1 : 0);
  return o.bytes();
}

std::optional<LayerSummaryWire> decode_layer_summary(std::string_view bytes) {
  WireReader r(bytes);
  LayerSummaryWire s;
  s.err = r.i32();
  s.message = r.str();
  s.entries = r.u64();
  s.bytes = r.u64();
  s.skipped = r.u64();
  s.unreadable = r.u64();
  s.skipped_paths = r.strs();
  s.whole_root = r.u32() != 0;
  if (!r.ok() || !r.at_end() || s.skipped_paths.size() > 64) return std::nullopt;
  return s;
}

namespace {

constexpr unsigned kExportSeconds = 600;  // then SIGALRM ends the worker
constexpr int kMaxDepth = 128;
constexpr std::size_t kMaxSkippedNamed = 20;
constexpr std::uint64_t kUstarMaxSize = 077777777777ull;  // 11 octal digits

bool send_all(int sock, const void* p, std::size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t k = ::send(sock, c, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

// A failure that ends the export: the summary carries it.
struct Failure {
  int err;
  std::string message;
};

class Exporter {
 public:
  Exporter(int sock, const LayerExportWire& limits) : sock_(sock), limits_(limits) {}

  // Writes the tree under `dir` as `prefix` ("" or "workspace/").
  bool walk_root(int dir, const std::string& prefix) {
    if (!prefix.empty() && !emit_dir(prefix, dir)) return false;
    return walk(dir, prefix, 0);
  }
  bool finish() {
    // Two zero blocks end a tar archive.
    static const char zeros[1024] = {};
    if (!chunk(zeros, sizeof zeros)) return false;
    const std::uint32_t end = 0;
    return send_all(sock_, &end, sizeof end);
  }
  LayerSummaryWire& summary() { return sum_; }
  std::optional<Failure> failure;

 private:
  bool fail(int err, std::string message) {
    if (!failure) failure = Failure{err, std::move(message)};
    return false;
  }

  void skip(const std::string& path, bool unreadable) {
    ++(unreadable ? sum_.unreadable : sum_.skipped);
    if (sum_.skipped_paths.size() < kMaxSkippedNamed) sum_.skipped_paths.push_back("/" + path);
  }

  // bytes: what the entry adds to the tar; size: the file's own, for the error.
  bool account(std::uint64_t bytes, const std::string& path, std::uint64_t size = 0) {
    if (++sum_.entries > limits_.max_entries)
      return fail(EFBIG, "the layer would have more than " + std::to_string(limits_.max_entries) +
                             " entries (at /" + path + ")");
    if (sum_.bytes + bytes > limits_.max_bytes)
      return fail(EFBIG, "/" + path + " (" + std::to_string(size) +
                             " bytes) would make the layer larger than the limit of " +
                             std::to_string(limits_.max_bytes) + " bytes (--max-image-bytes)");
    return true;
  }

  bool chunk(const void* p, std::size_t n) {
    const std::uint32_t len = static_cast<std::uint32_t>(n);
    if (!send_all(sock_, &len, sizeof len) || !send_all(sock_, p, n))
      return fail(EPIPE, "the server stopped reading the layer");
    sum_.bytes += n;
    return true;
  }

  static void octal(char* field, std::size_t width, std::uint64_t v) {
    // width includes the terminating NUL.
    std::memset(field, '0', width - 1);
    field[width - 1] = '\0';
    for (std::size_t i = width - 1; i-- > 0 && v;) {
      field[i] = static_cast<char>('0' + (v & 7));
      v >>= 3;
    }
  }

  static void pax_record(std::string& out, const std::string& key, const std::string& value) {
    // "LEN key=value\n", LEN counting itself.
    std::string body = " " + key + "=" + value + "\n";
    std::size_t len = body.size() + 1;
    while (std::to_string(len).size() + body.size() != len) ++len;
    out += std::to_string(len) + body;
  }

  // One header block (and a pax header before it when a field does not fit).
  bool header(const std::string& name, char type, std::uint32_t mode, std::uint64_t size,
              std::int64_t mtime, const std::string& link = {}) {
    std::string pax;
    if (name.size() > 100) pax_record(pax, "path", name);
    if (link.size() > 100) pax_record(pax, "linkpath", link);
    if (size > kUstarMaxSize) pax_record(pax, "size", std::to_string(size));
    if (!pax.empty()) {
      std::string block = make_block("PaxHeaders/x", 'x', 0644, pax.size(), mtime, {});
      pax.resize((pax.size() + 511) / 512 * 512, '\0');
      block += pax;
      if (!chunk(block.data(), block.size())) return false;
    }
    std::string block = make_block(name, type, mode, size, mtime, link);
    return chunk(block.data(), block.size());
  }

  static std::string make_block(const std::string& name, char type, std::uint32_t mode,
                                std::uint64_t size, std::int64_t mtime, const std::string& link) {
    std::string b(512, '\0');
    std::memcpy(b.data(), name.data(), std::min<std::size_t>(name.size(), 100));
    octal(&b[100], 8, mode & 07777);
    octal(&b[108], 8, 0);
    octal(&b[116], 8, 0);
    octal(&b[124], 12, size > kUstarMaxSize ? 0 : size);
    octal(&b[136], 12, mtime > 0 ? static_cast<std::uint64_t>(mtime) : 0);
    b[156] = type;
    std::memcpy(&b[157], link.data(), std::min<std::size_t>(link.size(), 100));
    std::memcpy(&b[257], "ustar", 6);
    std::memcpy(&b[263], "00", 2);
    std::memset(&b[148], ' ', 8);
    unsigned sum = 0;
    for (unsigned char c : b) sum += c;
    octal(&b[148], 7, sum);
    b[155] = ' ';
    return b;
  }

  bool emit_dir(const std::string& path, int fd) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return fail(errno, "stat /" + path);
    if (!account(512, path)) return false;
    return header(path, '5', st.st_mode, 0, st.st_mtim.tv_sec);
  }

  static bool has_xattr(int fd, const char* name, char* value = nullptr, std::size_t n = 0) {
    char buf[8];
    ssize_t r = ::fgetxattr(fd, name, value ? value : buf, value ? n : sizeof buf);
    return r >= 0;
  }

  static int open_beneath(int dir, const char* name, std::uint64_t flags) {
    struct open_how how {};
    how.flags = flags | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS;
    return static_cast<int>(syscall(SYS_openat2, dir, name, &how, sizeof how));
  }

  bool whiteout(const std::string& dir_path, const std::string& name, std::int64_t mtime) {
    const std::string path = dir_path + ".wh." + name;
    if (!account(512, path)) return false;
    return header(path, '0', 0644, 0, mtime);
  }

  bool regular(int dir, const std::string& dir_path, const std::string& name,
               const struct stat& st) {
    const std::string path = dir_path + name;
    if (st.st_nlink > 1) {
      auto key = std::make_pair(st.st_dev, st.st_ino);
      auto it = links_.find(key);
      if (it != links_.end()) {
        if (!account(512, path)) return false;
        return header(path, '1', st.st_mode, 0, st.st_mtim.tv_sec, it->second);
      }
    }
    int fd = open_beneath(dir, name.c_str(), O_RDONLY);
    if (fd < 0) {
      if (errno == EACCES || errno == EPERM) {
        skip(path, true);
        return true;
      }
      if (errno == ENOENT) return true;  // removed meanwhile
      return fail(errno, "open /" + path);
    }
    struct stat fst {};
    if (::fstat(fd, &fst) != 0 || !S_ISREG(fst.st_mode)) {
      ::close(fd);
      return true;  // replaced meanwhile by something else: not in this layer
    }
    char wbuf[8];
    if (fst.st_size == 0 && ::fgetxattr(fd, "user.overlay.whiteout", wbuf, sizeof wbuf) >= 0) {
      ::close(fd);
      return whiteout(dir_path, name, fst.st_mtim.tv_sec);
    }
    const std::uint64_t size = static_cast<std::uint64_t>(fst.st_size);
    const std::uint64_t padded = (size + 511) / 512 * 512;
    if (!account(512 + padded, path, size) ||
        !header(path, '0', fst.st_mode, size, fst.st_mtim.tv_sec)) {
      ::close(fd);
      return false;
    }
    if (fst.st_nlink > 1) links_.emplace(std::make_pair(fst.st_dev, fst.st_ino), path);
    // The data: chunks moved by sendfile (page cache to socket); a file that
    // shrinks meanwhile is padded with zeros, one that grows is cut at the
    // size in its header.
    off_t off = 0;
    std::uint64_t left = padded;
    static char zeros[kMaxLayerChunk];
    while (left > 0) {
      const std::uint32_t n =
          static_cast<std::uint32_t>(std::min<std::uint64_t>(left, kMaxLayerChunk));
      if (!send_all(sock_, &n, sizeof n)) {
        ::close(fd);
        return fail(EPIPE, "the server stopped reading the layer");
      }
      std::uint32_t moved = 0;
      const std::uint64_t data_left =
          static_cast<std::uint64_t>(off) < size ? size - static_cast<std::uint64_t>(off) : 0;
      const std::uint32_t from_file =
          static_cast<std::uint32_t>(std::min<std::uint64_t>(n, data_left));
      while (moved < from_file) {
        ssize_t k = ::sendfile(sock_, fd, &off, from_file - moved);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        moved += static_cast<std::uint32_t>(k);
      }
      if (moved < n && !send_all(sock_, zeros, n - moved)) {
        ::close(fd);
        return fail(EPIPE, "the server stopped reading the layer");
      }
      if (moved < from_file) off = static_cast<off_t>(size);  // shrank: zeros to the end
      sum_.bytes += n;
      left -= n;
    }
    ::close(fd);
    return true;
  }

  bool walk(int dir, const std::string& dir_path, int depth) {
    if (depth > kMaxDepth) return fail(ELOOP, "/" + dir_path + " is nested too deep (over 128)");
    int dup = ::fcntl(dir, F_DUPFD_CLOEXEC, 0);
    if (dup < 0) return fail(errno, "dup /" + dir_path);
    DIR* dp = ::fdopendir(dup);
    if (!dp) {
      ::close(dup);
      return fail(errno, "opendir /" + dir_path);
    }
    std::vector<std::string> names;
    while (struct dirent* de = ::readdir(dp)) {
      if (std::strcmp(de->d_name, ".") == 0 || std::strcmp(de->d_name, "..") == 0) continue;
      names.emplace_back(de->d_name);
    }
    ::closedir(dp);
    // A stable order: the same tree gives the same tar (and layer digest).
    std::sort(names.begin(), names.end());
    for (const auto& name : names) {
      struct stat st {};
      if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;
        return fail(errno, "stat /" + dir_path + name);
      }
      const std::string path = dir_path + name;
      if (S_ISDIR(st.st_mode)) {
        int fd = open_beneath(dir, name.c_str(), O_RDONLY | O_DIRECTORY);
        if (fd < 0) {
          if (errno == EACCES || errno == EPERM) {
            skip(path, true);
            continue;
          }
          if (errno == ENOENT) continue;
          return fail(errno, "open /" + path);
        }
        char val[4] = {};
        bool ok = emit_dir(path + "/", fd);
        if (ok && ::fgetxattr(fd, "user.overlay.opaque", val, sizeof val) == 1 && val[0] == 'y') {
          ok = account(512, path + "/.wh..wh..opq") &&
               header(path + "/.wh..wh..opq", '0', 0644, 0, st.st_mtim.tv_sec);
        }
        ok = ok && walk(fd, path + "/", depth + 1);
        ::close(fd);
        if (!ok) return false;
      } else if (S_ISREG(st.st_mode)) {
        if (!regular(dir, dir_path, name, st)) return false;
      } else if (S_ISLNK(st.st_mode)) {
        char target[4097];
        ssize_t n = ::readlinkat(dir, name.c_str(), target, sizeof target - 1);
        if (n < 0) {
          if (errno == ENOENT) continue;
          return fail(errno, "readlink /" + path);
        }
        if (!account(512, path) || !header(path, '2', 0777, 0, st.st_mtim.tv_sec,
                                           std::string(target, static_cast<std::size_t>(n))))
          return false;
      } else if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) {
        if (!whiteout(dir_path, name, st.st_mtim.tv_sec)) return false;
      } else {
        skip(path, false);
      }
    }
    return true;
  }

  int sock_;
  LayerExportWire limits_;
  LayerSummaryWire sum_;
  std::map<std::pair<dev_t, ino_t>, std::string> links_;
};

// The summary after the tar (a zero length first when the tar was cut short).
[[noreturn]] void finish_export(int sock, const LayerSummaryWire& s) {
  const std::uint32_t end = 0;
  if (s.err != 0) (void)send_all(sock, &end, sizeof end);
  std::string msg = frame(encode(s));
  (void)send_all(sock, msg.data(), msg.size());
  _exit(s.err == 0 ? 0 : 1);
}

// Tells the server who the worker is (the kernel vouches for the pid, in
// the server's namespace), so it can freeze every other process, then waits
// for its go-ahead: one byte, once the others are frozen (or cannot be).
bool announce_and_wait(int sock) {
  char byte = 'w';
  struct iovec iov {
    &byte, 1
  };
  union {
    char buf[CMSG_SPACE(sizeof(struct ucred))];
    struct cmsghdr align;
  } u{};
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = u.buf;
  msg.msg_controllen = sizeof u.buf;
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_CREDENTIALS;
  c->cmsg_len = CMSG_LEN(sizeof(struct ucred));
  struct ucred cred {
    ::getpid(), ::getuid(), ::getgid()
  };
  std::memcpy(CMSG_DATA(c), &cred, sizeof cred);
  ssize_t n;
  do n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n != 1) return false;
  do n = ::recv(sock, &byte, 1, 0);
  while (n < 0 && errno == EINTR);
  return n == 1 && byte == 'g';
}

int open_dir_beneath(int dir, const char* name) {
  struct open_how how {};
  how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(syscall(SYS_openat2, dir, name, &how, sizeof how));
}

}  // namespace

[[noreturn]] void run_layer_export(int sock, int rw_fd, const InitConfig& config,
                                   const LayerExportWire& w) {
  LayerSummaryWire result;
  if (!enter_sandbox_context(config, FilesWire{}, "sc-save")) {
    result.err = EPERM;
    result.message = "layer worker: enter the sandbox's context";
    finish_export(sock, result);
  }
  ::alarm(kExportSeconds);
  if (!announce_and_wait(sock)) _exit(1);  // the server gave up: nothing to say
  Exporter ex(sock, w);
  int upper = -1, workspace = -1;
  if (rw_fd >= 0) {
    // /workspace is a directory of the overlay: the upper dir has it all.
    upper = open_dir_beneath(rw_fd, "upper");
  } else {
    // Image "host": no overlay; /workspace in the worker's (the sandbox's) view.
    // (A mount of its own there, so no RESOLVE_NO_XDEV for this one step.)
    workspace = ::open("/workspace", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  }
  if (upper < 0 && workspace < 0) {
    result.err = errno;
    result.message = "layer worker: open the sandbox's changed trees";
    finish_export(sock, result);
  }
  bool ok = true;
  if (upper >= 0) ok = ex.walk_root(upper, "");
  if (workspace >= 0) ok = ok && ex.walk_root(workspace, "workspace/");
  ok = ok && ex.finish();
  LayerSummaryWire s = ex.summary();
  s.whole_root = upper >= 0;
  if (!ok) {
    s.err = ex.failure ? ex.failure->err : EIO;
    s.message = ex.failure ? ex.failure->message : "layer worker failed";
  }
  finish_export(sock, s);
}

}  // namespace sandcastle::sandbox::native
