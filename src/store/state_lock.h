// Which server runs a state directory's persistent sandboxes. Several
// servers may share one state dir (a desktop client starts one stdio server
// per conversation), but a persistent sandbox's disk must be mounted by one
// of them only, and only that one may sweep what a crash left. The owner is
// whoever holds an exclusive flock on <state dir>/sandboxes.lock; the kernel
// drops it when that process dies, however it dies, so a kill -9 never
// leaves a stale lock.
#pragma once

#include <sys/types.h>

#include <string>

#include "common/result.h"
#include "common/unique_fd.h"

namespace sandcastle::store {

class StateLock {
 public:
  // Takes the lock without waiting. kUnavailable when another process holds
  // it: the message names its pid and what to do.
  static Result<StateLock> try_acquire(const std::string& state_dir);
  bool held() const { return fd_.valid(); }

 private:
  explicit StateLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

}  // namespace sandcastle::store
