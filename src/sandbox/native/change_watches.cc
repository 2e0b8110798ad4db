#include "sandbox/native/change_watches.h"

#include <poll.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <string_view>

namespace sandcastle::sandbox::native {

namespace {
constexpr long kAnonInodeFsMagic = 0x09041934;  // ANON_INODE_FS_MAGIC
}

bool is_inotify_fd(int fd) {
  struct statfs sf {};
  if (::fstatfs(fd, &sf) != 0 || sf.f_type != kAnonInodeFsMagic) return false;
  // Anonymous inodes share one filesystem; the kernel names the kind.
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  char buf[64];
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
  return n > 0 && std::string_view(buf, static_cast<std::size_t>(n)) == "anon_inode:inotify";
}

std::uint64_t ChangeWatches::keep(const void* owner, UniqueFd fd) {
  std::lock_guard lock(mu_);
  lru_.remove_if([owner](const Held& h) { return h.owner == owner; });
  while (capacity_ > 0 && lru_.size() >= capacity_) lru_.pop_back();
  const std::uint64_t id = ++next_id_;
  if (capacity_ > 0) lru_.push_front({owner, id, std::move(fd)});
  return id;
}

std::optional<bool> ChangeWatches::changed(const void* owner, std::uint64_t id) {
  std::lock_guard lock(mu_);
  auto it = std::find_if(lru_.begin(), lru_.end(),
                         [&](const Held& h) { return h.owner == owner && h.id == id; });
  if (it == lru_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it);
  struct pollfd p {
    it->fd.get(), POLLIN, 0
  };
  int r;
  while ((r = ::poll(&p, 1, 0)) < 0 && errno == EINTR) {
  }
  // An error or hang-up says nothing: count it as a change.
  return r != 0;
}

void ChangeWatches::forget(const void* owner) {
  std::lock_guard lock(mu_);
  lru_.remove_if([owner](const Held& h) { return h.owner == owner; });
}

std::size_t ChangeWatches::held() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

}  // namespace sandcastle::sandbox::native
