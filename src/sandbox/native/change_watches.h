// The inotify watches the server keeps on sandboxes' workdirs, so a run
// that changed nothing there needs no listing afterwards (a round trip to
// the sandbox's file worker, most of the server's own share of a short
// exec). Each watch is an inotify instance the file worker made inside its
// sandbox (charged to the sandbox's memory group) watching every directory
// of a listing; the server only asks whether an event is queued. Every
// instance counts against the host user's inotify instances (128 by
// default, shared with everything else the user runs), so the server holds
// at most `capacity` of them, the least recently used dropped first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>

#include "common/unique_fd.h"

namespace sandcastle::sandbox::native {

// Whether fd is an inotify instance: an fd from a sandbox is checked before
// the server keeps it (it is only ever polled, but a FIFO or socket held
// instead would make the answers meaningless).
bool is_inotify_fd(int fd);

class ChangeWatches {
 public:
  // An eighth of the default per-user inotify instance limit.
  static constexpr std::size_t kDefaultCapacity = 16;

  explicit ChangeWatches(std::size_t capacity = kDefaultCapacity) : capacity_(capacity) {}

  // Keeps `fd` as `owner`'s watch, replacing its earlier one; returns the
  // watch's id (never 0). May drop the least recently used other watch.
  std::uint64_t keep(const void* owner, UniqueFd fd);
  // Whether anything below the watched tree changed since the listing:
  // nullopt when the watch is gone (dropped, replaced, or never kept).
  std::optional<bool> changed(const void* owner, std::uint64_t id);
  // Drops owner's watch (its sandbox is going).
  void forget(const void* owner);
  std::size_t held() const;

 private:
  struct Held {
    const void* owner;
    std::uint64_t id;
    UniqueFd fd;
  };
  const std::size_t capacity_;
  mutable std::mutex mu_;
  std::list<Held> lru_;  // most recently used first
  std::uint64_t next_id_ = 0;
};

}  // namespace sandcastle::sandbox::native
