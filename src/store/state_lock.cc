#include "store/state_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>

namespace sandcastle::store {

Result<StateLock> StateLock::try_acquire(const std::string& state_dir) {
  const std::string path = state_dir + "/sandboxes.lock";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) {
    return Error::from_errno("open " + path);
  }
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err != EWOULDBLOCK) return Error::from_errno("lock " + path, err);
    char buf[32] = {};
    ssize_t n = ::pread(fd.get(), buf, sizeof buf - 1, 0);
    std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "?";
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    return Error::make(ErrorCode::kUnavailable,
                       "another sandcastle server (pid " + pid +
                           ") runs the persistent sandboxes of " + state_dir +
                           "; use that server, stop it, or start this one with another "
                           "--state-dir");
  }
  // The holder's pid, for the message above (informational only).
  const std::string me = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd.get(), 0) == 0) (void)!::pwrite(fd.get(), me.data(), me.size(), 0);
  return StateLock(std::move(fd));
}

}  // namespace sandcastle::store
