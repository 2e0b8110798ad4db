#include "service/host_paths.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

namespace sandcastle::service {

HostPaths::HostPaths(std::vector<std::string> allowed) {
  for (auto& a : allowed) {
    char buf[PATH_MAX];
    // Allowed directories are resolved once; a missing one is simply unusable.
    if (::realpath(a.c_str(), buf)) allowed_.emplace_back(buf);
  }
}

Result<UniqueFd> HostPaths::open_beneath(const std::string& path, int flags, int mode) const {
  if (allowed_.empty())
    return Error::make(ErrorCode::kPermissionDenied,
                       "host file access is disabled: start sandcastle with --allow-host-path DIR "
                       "to let upload_file/download_file use files below DIR");
  if (path.empty() || path[0] != '/')
    return Error::make(ErrorCode::kInvalidArgument, "host path must be absolute: " + path);
  std::string list;
  for (const auto& root : allowed_) {
    list += (list.empty() ? "" : ", ") + root;
    if (path != root && path.rfind(root + "/", 0) != 0 && root != "/") continue;
    size_t start = root == "/" ? 1 : root.size();
    while (start < path.size() && path[start] == '/') ++start;
    const std::string rel = start < path.size() ? path.substr(start) : std::string(".");
    UniqueFd dir(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!dir) return Error::from_errno("open allowed host directory " + root);
    open_how how{};
    // Non-blocking, and without O_TRUNC until the type is known: a FIFO or
    // device below an allowed directory is refused, never waited on.
    how.flags =
        static_cast<uint64_t>((flags & ~O_TRUNC) | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    how.mode = static_cast<uint64_t>(mode);
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS;
    long fd = ::syscall(SYS_openat2, dir.get(), rel.c_str(), &how, sizeof how);
    if (fd < 0) {
      int err = errno;
      if (err == EXDEV || err == ELOOP)
        return Error{ErrorCode::kPermissionDenied, err,
                     "host path " + path + " leaves the allowed directory " + root +
                         " (symlinks and '..' are not followed)"};
      if (err == ENXIO)  // a FIFO without a reader, or a socket
        return Error{
            ErrorCode::kFailedPrecondition, err,
            "host path " + path +
                " is not a regular file; upload_file and download_file move regular files only"};
      return Error::from_errno("open host path " + path, err);
    }
    UniqueFd out(static_cast<int>(fd));
    struct stat st {};
    if (::fstat(out.get(), &st) != 0) return Error::from_errno("stat host path " + path);
    if (!S_ISREG(st.st_mode))
      return Error::make(
          ErrorCode::kFailedPrecondition,
          "host path " + path +
              " is not a regular file; upload_file and download_file move regular files only");
    if ((flags & O_TRUNC) && ::ftruncate(out.get(), 0) != 0)
      return Error::from_errno("truncate host path " + path);
    return out;
  }
  return Error::make(ErrorCode::kPermissionDenied,
                     "host path " + path + " is outside the allowed directories (" + list +
                         "); the operator can allow another with --allow-host-path DIR");
}

Result<UniqueFd> HostPaths::open_read(const std::string& path) const {
  return open_beneath(path, O_RDONLY, 0);
}

Result<UniqueFd> HostPaths::open_write(const std::string& path) const {
  return open_beneath(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
}

Result<std::string> read_all(int fd, std::uint64_t max, const std::string& what) {
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno("read " + what);
    }
    if (n == 0) return out;
    if (out.size() + static_cast<size_t>(n) > max)
      return Error::make(ErrorCode::kResourceExhausted,
                         what + " is larger than the limit of " + std::to_string(max) + " bytes");
    out.append(buf, static_cast<size_t>(n));
  }
}

Status write_all(int fd, std::string_view data, const std::string& what) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno("write " + what);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

}  // namespace sandcastle::service
