#include "sandbox/native/fs_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>

#include "common/unique_fd.h"

namespace sandcastle::sandbox::native {

std::optional<pid_t> owner_pid(std::string_view name, std::string_view prefix,
                               std::string_view* rest) {
  if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
  const char* first = name.data() + prefix.size();
  const char* last = name.data() + name.size();
  pid_t pid = 0;
  auto [end, ec] = std::from_chars(first, last, pid);
  if (ec != std::errc() || pid <= 0) return std::nullopt;
  if (rest) *rest = std::string_view(end, static_cast<std::size_t>(last - end));
  return pid;
}

std::string read_small_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return {};
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd.get(), buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  return out;
}

Status write_small_file(const std::string& path, const std::string& value) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_TRUNC));
  if (!fd) return Error::from_errno("open " + path);
  if (::write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size()))
    return Error::from_errno("write " + path);
  return {};
}

std::vector<std::string> list_dir(const std::string& path) {
  std::vector<std::string> out;
  DIR* d = ::opendir(path.c_str());
  if (!d) return out;
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
  return out;
}

namespace {

Status remove_at(int parent, const std::string& name, dev_t dev) {
  struct stat st {};
  if (::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return errno == ENOENT ? Status{} : Error::from_errno("stat " + name);
  if (S_ISDIR(st.st_mode) && st.st_dev == dev) {
    UniqueFd dir(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dir) return Error::from_errno("open " + name);
    int dup = ::dup(dir.get());
    DIR* d = ::fdopendir(dup);
    if (!d) {
      ::close(dup);
      return Error::from_errno("fdopendir " + name);
    }
    std::vector<std::string> names;
    while (struct dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    ::closedir(d);
    for (const auto& n : names)
      if (auto s = remove_at(dir.get(), n, dev); !s) return s;
    if (::unlinkat(parent, name.c_str(), AT_REMOVEDIR) != 0) return Error::from_errno("rmdir " + name);
    return {};
  }
  if (S_ISDIR(st.st_mode)) return Error::make(ErrorCode::kIo, "refusing to cross mount at " + name);
  if (::unlinkat(parent, name.c_str(), 0) != 0) return Error::from_errno("unlink " + name);
  return {};
}

}  // namespace

Status remove_tree(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT ? Status{} : Error::from_errno("stat " + path);
  return remove_at(AT_FDCWD, path, st.st_dev);
}

}  // namespace sandcastle::sandbox::native
