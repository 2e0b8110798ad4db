#include "sandbox/native/sandbox_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/unique_fd.h"
#include "sandbox/native/fs_util.h"

namespace sandcastle::sandbox::native {
namespace {

constexpr std::uint64_t kResolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;

UniqueFd open_in_root(int root, const std::string& rel, std::uint64_t flags, std::uint64_t mode = 0) {
  struct open_how how {};
  how.flags = flags | O_CLOEXEC;
  how.mode = mode;
  how.resolve = kResolve;
  const char* p = rel.empty() ? "." : rel.c_str();
  return UniqueFd(static_cast<int>(syscall(SYS_openat2, root, p, &how, sizeof how)));
}

std::string display(const std::string& rel) { return "/" + rel; }

// Splits rel into (parent, last component); the parent is opened as a dir.
std::pair<std::string, std::string> split(const std::string& rel) {
  auto pos = rel.rfind('/');
  if (pos == std::string::npos) return {"", rel};
  return {rel.substr(0, pos), rel.substr(pos + 1)};
}

FileStat to_stat(const std::string& name, const struct stat& st) {
  FileStat f;
  f.name = name;
  f.type = S_ISREG(st.st_mode)   ? FileType::kRegular
           : S_ISDIR(st.st_mode) ? FileType::kDirectory
           : S_ISLNK(st.st_mode) ? FileType::kSymlink
                                 : FileType::kOther;
  f.size = static_cast<std::uint64_t>(st.st_size);
  f.mode = st.st_mode & 07777;
  f.mtime_sec = st.st_mtim.tv_sec;
  f.mtime_nsec = st.st_mtim.tv_nsec;
  return f;
}

Result<UniqueFd> open_parent(int root, const std::string& rel, std::string* name) {
  auto [parent, last] = split(rel);
  if (last.empty()) return Error::make(ErrorCode::kInvalidArgument, "refusing to operate on /");
  UniqueFd dir = open_in_root(root, parent, O_PATH | O_DIRECTORY);
  if (!dir) return Error::from_errno("open " + display(parent));
  *name = last;
  return dir;
}

Status remove_recursive(int dirfd, const std::string& name, const std::string& shown) {
  struct stat st {};
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return Error::from_errno("stat " + shown);
  if (S_ISDIR(st.st_mode)) {
    UniqueFd d(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!d) return Error::from_errno("open " + shown);
    DIR* dp = ::fdopendir(::dup(d.get()));
    if (!dp) return Error::from_errno("opendir " + shown);
    std::vector<std::string> names;
    while (struct dirent* e = ::readdir(dp)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    ::closedir(dp);
    for (const auto& n : names)
      if (auto s = remove_recursive(d.get(), n, shown + "/" + n); !s) return s;
    if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0) return Error::from_errno("rmdir " + shown);
    return {};
  }
  if (::unlinkat(dirfd, name.c_str(), 0) != 0) return Error::from_errno("unlink " + shown);
  return {};
}

}  // namespace

Result<std::string> sandbox_relative_path(const std::string& path, const std::string& workdir) {
  if (path.empty()) return Error::make(ErrorCode::kInvalidArgument, "empty path");
  if (path.find('\0') != std::string::npos) return Error::make(ErrorCode::kInvalidArgument, "path contains NUL");
  if (path.size() > 4096) return Error::make(ErrorCode::kInvalidArgument, "path too long");
  std::string full = path.front() == '/' ? path : workdir + "/" + path;
  std::string out;
  std::size_t i = 0;
  while (i < full.size()) {
    std::size_t j = full.find('/', i);
    if (j == std::string::npos) j = full.size();
    std::string comp = full.substr(i, j - i);
    i = j + 1;
    if (comp.empty() || comp == ".") continue;
    if (comp == "..")
      return Error::make(ErrorCode::kInvalidArgument, "path '" + path + "': '..' is not allowed");
    if (!out.empty()) out += '/';
    out += comp;
  }
  // The server never touches kernel filesystems of the sandbox.
  for (const char* banned : {"proc", "dev", "sys"}) {
    std::string b = banned;
    if (out == b || out.starts_with(b + "/"))
      return Error::make(ErrorCode::kPermissionDenied, "path '" + path + "': /" + b + " is not accessible");
  }
  return out;
}

Result<FileStat> fs_stat(int root, const std::string& rel) {
  UniqueFd fd = open_in_root(root, rel, O_PATH | O_NOFOLLOW);
  if (!fd) return Error::from_errno("stat " + display(rel));
  struct stat st {};
  if (::fstatat(fd.get(), "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0)
    return Error::from_errno("stat " + display(rel));
  return to_stat(split(rel).second, st);
}

Result<std::vector<FileStat>> fs_list(int root, const std::string& rel) {
  UniqueFd fd = open_in_root(root, rel, O_RDONLY | O_DIRECTORY);
  if (!fd) return Error::from_errno("list " + display(rel));
  DIR* dp = ::fdopendir(::dup(fd.get()));
  if (!dp) return Error::from_errno("opendir " + display(rel));
  std::vector<FileStat> out;
  while (struct dirent* e = ::readdir(dp)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    struct stat st {};
    if (::fstatat(fd.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    out.push_back(to_stat(n, st));
  }
  ::closedir(dp);
  return out;
}

Result<std::string> fs_read(int root, const std::string& rel, std::uint64_t max_bytes) {
  UniqueFd fd = open_in_root(root, rel, O_RDONLY | O_NOCTTY | O_NONBLOCK);
  if (!fd) return Error::from_errno("open " + display(rel));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Error::from_errno("stat " + display(rel));
  if (!S_ISREG(st.st_mode)) return Error::make(ErrorCode::kInvalidArgument, display(rel) + " is not a regular file");
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes)
    return Error::make(ErrorCode::kResourceExhausted, display(rel) + " is larger than the read limit");
  std::string out;
  out.reserve(static_cast<std::size_t>(st.st_size));
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::from_errno("read " + display(rel));
    if (n == 0) break;
    if (out.size() + static_cast<std::size_t>(n) > max_bytes)
      return Error::make(ErrorCode::kResourceExhausted, display(rel) + " grew past the read limit");
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

Status fs_write(int root, const std::string& rel, std::string_view data, std::uint32_t mode) {
  UniqueFd fd = open_in_root(root, rel, O_WRONLY | O_CREAT | O_TRUNC | O_NOCTTY | O_NONBLOCK, mode & 0777);
  if (!fd) return Error::from_errno("open " + display(rel));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return Error::make(ErrorCode::kInvalidArgument, display(rel) + " is not a regular file");
  while (!data.empty()) {
    ssize_t n = ::write(fd.get(), data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::from_errno("write " + display(rel));
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  if (::fchmod(fd.get(), mode & 0777) != 0) return Error::from_errno("chmod " + display(rel));
  return {};
}

Status fs_mkdir(int root, const std::string& rel, bool parents) {
  if (!parents) {
    std::string name;
    auto dir = open_parent(root, rel, &name);
    if (!dir) return dir.take_error();
    if (::mkdirat(dir->get(), name.c_str(), 0755) != 0) return Error::from_errno("mkdir " + display(rel));
    return {};
  }
  if (rel.empty()) return {};
  std::string prefix;
  std::size_t i = 0;
  while (i <= rel.size()) {
    std::size_t j = rel.find('/', i);
    if (j == std::string::npos) j = rel.size();
    std::string comp = rel.substr(i, j - i);
    UniqueFd dir = open_in_root(root, prefix, O_PATH | O_DIRECTORY);
    if (!dir) return Error::from_errno("open " + display(prefix));
    if (::mkdirat(dir.get(), comp.c_str(), 0755) != 0 && errno != EEXIST)
      return Error::from_errno("mkdir " + display(prefix.empty() ? comp : prefix + "/" + comp));
    prefix = prefix.empty() ? comp : prefix + "/" + comp;
    i = j + 1;
  }
  UniqueFd check = open_in_root(root, rel, O_PATH | O_DIRECTORY);
  if (!check) return Error::from_errno("mkdir " + display(rel));
  return {};
}

Status fs_remove(int root, const std::string& rel, bool recursive) {
  std::string name;
  auto dir = open_parent(root, rel, &name);
  if (!dir) return dir.take_error();
  if (recursive) return remove_recursive(dir->get(), name, display(rel));
  struct stat st {};
  if (::fstatat(dir->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return Error::from_errno("stat " + display(rel));
  int flags = S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0;
  if (::unlinkat(dir->get(), name.c_str(), flags) != 0) return Error::from_errno("remove " + display(rel));
  return {};
}

std::uint64_t fs_used_bytes(int root, const std::string& rel) {
  UniqueFd fd = open_in_root(root, rel, O_PATH | O_DIRECTORY);
  struct statfs sf {};
  if (!fd || ::fstatfs(fd.get(), &sf) != 0) return 0;
  return static_cast<std::uint64_t>(sf.f_blocks - sf.f_bfree) * static_cast<std::uint64_t>(sf.f_bsize);
}

}  // namespace sandcastle::sandbox::native
