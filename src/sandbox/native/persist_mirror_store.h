// The server's half of persistent sandboxes without root (persist_mirror.h):
// where each storage's copy lives, which sandbox has it, and removal,
// listing and copying of storages.
//
// Layout: <storage dir>/<id>/mirror/workspace (image "host": its /workspace)
// or <id>/mirror/upper (a store image: its overlay's upper dir, which holds
// /workspace and every write to /). A root server's storage
// (<id>/disk.img, persist_disk.h) is refused here, and a root server
// refuses this kind (refuse_other_kind), each with a message saying so,
// rather than misreading the other's files.
//
// The server opens only the directories it made (<id>, mirror, workspace);
// what is beneath is written by the sandbox's worker, and every walk of it
// (remove, copy) is a Walker's: a persist worker in a sandbox (the backend
// makes one for it), given the directories' fds.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "sandbox/native/persist_mirror.h"

namespace sandcastle::sandbox::native {

class MirrorStore;

// One storage held by one running sandbox, until destroyed.
class MirrorAttachment {
 public:
  ~MirrorAttachment();
  MirrorAttachment(const MirrorAttachment&) = delete;
  MirrorAttachment& operator=(const MirrorAttachment&) = delete;

  const std::string& id() const { return id_; }
  // The on-disk directory (passed to the sandbox's worker).
  int workspace_fd() const { return workspace_.get(); }
  // Its host path (for an image sandbox's init, which copies it into the
  // upper dir before mounting the overlay).
  const std::string& path() const { return path_; }

  // One sync at a time; a call whose writes a sync begun after them covers
  // waits for that one instead of starting its own (see NativeSandbox::
  // persist_changes).
  std::mutex sync_mu;
  std::atomic<std::uint64_t> requested{0};
  std::uint64_t done = 0;  // under sync_mu

 private:
  friend class MirrorStore;
  MirrorAttachment() = default;
  std::string id_;
  std::string path_;
  UniqueFd workspace_;
  MirrorStore* store_ = nullptr;
};

class MirrorStore {
 public:
  explicit MirrorStore(std::string storage_dir) : storage_dir_(std::move(storage_dir)) {}

  // Why a persistent spec cannot be made here (ok: it can).
  Status usable() const;
  // The storage, made when missing; kFailedPrecondition while another
  // sandbox has it, kInvalidArgument for a root server's storage.
  // `image`: a sandbox from a store image (its upper dir is kept).
  Result<std::shared_ptr<MirrorAttachment>> attach(const std::string& id, bool image = false);
  // Runs one persist worker request (kCopy, kClear) on these directory fds
  // (`to` -1 unless kCopy) inside a sandbox.
  using Walker = std::function<Status(const PersistMirrorWire&, int store_fd, int to_fd)>;
  Status remove(const std::string& id, const Walker& walk);
  std::vector<std::string> list() const;
  // A new storage `to` with the files of `from` as its last sync left them
  // (a sync in progress is waited for).
  Status copy(const std::string& from, const std::string& to, const Walker& walk);

 private:
  friend class MirrorAttachment;
  std::string dir_of(const std::string& id) const { return storage_dir_ + "/" + id; }
  // The kept tree of `id`: "workspace" or "upper" (kind), made if `create`.
  Result<UniqueFd> open_kept(const std::string& id, const char* kind, bool create);
  // Which one storage `id` holds ("workspace" when new or empty).
  const char* kind_of(const std::string& id) const;
  std::shared_ptr<MirrorAttachment> find_attached(const std::string& id);

  std::string storage_dir_;
  mutable std::mutex mu_;
  std::map<std::string, std::weak_ptr<MirrorAttachment>> attached_;
  // Being removed, made by copy, or copied from while not running (under mu_).
  std::multiset<std::string> busy_;
};

// A storage of the other kind: a root server's disk image for an
// unprivileged server (root = false), or this mirror for a root server.
// Ok when `id` has none (or does not exist).
Status refuse_other_kind(const std::string& storage_dir, const std::string& id, bool root);

// The bound on a mirror's size for a sandbox whose disk limit is
// disk_bytes: file data in 4 KiB units plus 4 KiB per directory, symlink
// and whiteout; the limit + 1/8 + 1 MiB.
std::uint64_t mirror_bound(std::uint64_t disk_bytes);

}  // namespace sandcastle::sandbox::native
