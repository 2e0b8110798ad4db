// Persistent sandbox storage (issue 16): a sandbox's writable files in an
// ext4 image of its own, storage_dir/<storage id>/disk.img, kept across
// sandbox restarts and server restarts.
//
// The disk limit is the image's size: a sparse file of disk_bytes made with
// mkfs.ext4 (journal on: a write the sandbox completed survives a kill -9 of
// the server, replayed at the next mount). As root the server attaches it to
// a loop device (LOOP_CONFIGURE, LO_FLAGS_AUTOCLEAR: the device goes with
// the filesystem's last mount) and mounts it (nosuid, nodev) at
// <runtime dir>/pst/<storage id>; each sandbox gets it as an idmapped bind
// (MOUNT_ATTR_IDMAP, on-disk U <-> this sandbox's host id) made under
// <runtime dir>/pmap/<sandbox id>, which the sandbox's init binds into its
// own mount namespace before it is cloned away from the host's tree. So the
// files on disk carry the sandbox's own ids (1000 inside = 1000 on disk)
// whatever host id the next start maps. The server handles only disk.img
// and its own mount point (FIFREEZE, unmount): never a path inside them.
//
// A copy (fork_sandbox) gets its loop device before its bytes: attaching
// one syncs its backing file, which for a fresh 50 MiB copy meant writing
// it all to the host disk on the fork's path (22-25 ms). Attached to the
// empty file first, the copy then goes through the same page cache, and
// the next attach of that id mounts it, without write barriers at first
// (the device turns a flush into an fsync of its whole file, so the mount's
// own superblock write cost the same again); a thread then writes the copy
// out (fdatasync) and turns barriers on. A warm sandbox (the pool's) takes
// a disk over its /workspace last (mount_into).
//
// Without root there are no loop mounts: persistent specs are refused.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "sandbox/native/host_image.h"

namespace sandcastle::sandbox::native {

class PersistStore;

// One storage's filesystem, mounted by the server, for as long as this
// lives: unmounted (and so its loop device detached) on destruction.
class AttachedDisk {
 public:
  ~AttachedDisk();
  AttachedDisk(const AttachedDisk&) = delete;
  AttachedDisk& operator=(const AttachedDisk&) = delete;

  const std::string& id() const { return id_; }
  const std::string& mount_point() const { return mount_; }
  // Holds every write to the filesystem (FIFREEZE) until thaw: what is on
  // disk.img is then a clean filesystem.
  Status freeze_writes();
  void thaw_writes();
  // The same on a thread of its own (joined by the next freeze or thaw).
  void thaw_writes_later();
  // Write barriers on (a copy is mounted without them until it is on the
  // host disk: PersistStore::copy) in two steps: the filesystem's context
  // (fspick, quick), then the reconfiguration, which syncs the filesystem
  // and so may take a flush of the image: done without the store's lock.
  Result<UniqueFd> pick_fs() const;
  static Status set_barrier(int fs_context, const std::string& what);

 private:
  friend class PersistStore;
  AttachedDisk() = default;
  std::string id_;
  std::string mount_;  // <runtime>/pst/<id>
  UniqueFd loop_;      // held until unmounted (AUTOCLEAR detaches after)
  UniqueFd root_;      // the mount's root, for FIFREEZE/FITHAW
  bool mounted_ = false;
  bool frozen_ = false;
  std::thread thaw_;
};

// An idmapped bind of an attached disk for one sandbox, until destroyed
// (the sandbox's init keeps its own copy once it has bound it).
class DiskBind {
 public:
  ~DiskBind();
  DiskBind(const DiskBind&) = delete;
  DiskBind& operator=(const DiskBind&) = delete;
  // The path the sandbox's init binds (a host path it may reach).
  const std::string& path() const { return path_; }

 private:
  friend class PersistStore;
  DiskBind() = default;
  std::string dir_;   // <runtime>/pmap/<sandbox id>, owned by the host id, 0700
  std::string path_;  // dir_/d: the idmapped mount
  bool mounted_ = false;
};

class PersistStore {
 public:
  // storage_dir empty: no persistent storage at all.
  PersistStore(std::string storage_dir, RuntimeDirs dirs);
  ~PersistStore();

  // Why a persistent spec cannot be made here (ok: it can).
  Status usable() const;
  // The storage mounted, made first when missing (an ext4 of `size` bytes
  // whose root belongs to uid:gid). kFailedPrecondition while another
  // sandbox has it.
  Result<std::shared_ptr<AttachedDisk>> attach(const std::string& id, std::uint64_t size,
                                               std::uint32_t uid, std::uint32_t gid);
  // An idmapped bind of `disk`: on-disk inside_uid/gid <-> host_uid/gid.
  Result<std::unique_ptr<DiskBind>> bind_for(const AttachedDisk& disk,
                                             const std::string& sandbox_id,
                                             std::uint32_t inside_uid, std::uint32_t inside_gid,
                                             std::uint32_t host_uid, std::uint32_t host_gid);
  Status remove(const std::string& id);
  // Every storage directory (a valid id), with or without its image yet.
  std::vector<std::string> list() const;
  // A clean copy of `from` as storage `to`, with its loop device already
  // attached for the next attach(to). While a sandbox runs on `from`, a
  // thread copies the bytes as they are while the source freezes (FIFREEZE
  // mostly waits for RCU grace periods), and once frozen the pages that
  // changed are copied again: the copy is the frozen filesystem exactly.
  Status copy(const std::string& from, const std::string& to);
  // Mounts an idmapped clone of `disk` (on-disk inside_uid/gid <->
  // host_uid/gid, nosuid, nodev) over /workspace in the mount namespace of
  // the process `pidfd` names: a warm sandbox's init that no code has run
  // in yet (the path is resolved in its tree).
  Status mount_into(const AttachedDisk& disk, pid_t pid, int pidfd, std::uint32_t inside_uid,
                    std::uint32_t inside_gid, std::uint32_t host_uid, std::uint32_t host_gid);
  // Unmounts whatever is still attached (shutdown).
  void detach_all();

  const std::string& storage_dir() const { return storage_dir_; }

 private:
  std::string dir_of(const std::string& id) const { return storage_dir_ + "/" + id; }
  Status prepare_dirs();
  std::shared_ptr<AttachedDisk> find_attached(const std::string& id);
  Result<std::shared_ptr<AttachedDisk>> mount_loop(const std::string& id, UniqueFd loop,
                                                   const std::string& dev, bool barrier = true);
  // The copy's attached device mounted; null when there is none for `id`
  // (or it is smaller than `size`: then the usual path grows it).
  Result<std::shared_ptr<AttachedDisk>> take_prepared(const std::string& id, std::uint64_t size);
  // fdatasync of a copy's image, then barriers on for its disk (if still
  // mounted), on a thread of its own.
  void write_out_later(UniqueFd file, const std::string& id);
  void join_syncs();

  std::string storage_dir_;
  RuntimeDirs dirs_;
  mutable std::mutex mu_;  // attach/remove/copy of one id at a time, and attached_
  std::map<std::string, std::weak_ptr<AttachedDisk>> attached_;
  // A copy's loop device, attached (and locked against udev's probe) but
  // not mounted, until the first attach of its id: fd and device name.
  struct Prepared {
    UniqueFd loop;
    std::string dev;
    UniqueFd file;  // the image, written out once mounted
    std::uint64_t seq = 0;
  };
  static constexpr std::size_t kMaxPrepared = 8;
  std::map<std::string, Prepared> prepared_;
  std::uint64_t prepared_seq_ = 0;
  // Copies being written out to the host disk (joined at detach_all).
  struct Sync {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::mutex sync_mu_;
  std::vector<Sync> syncs_;
  bool dirs_ready_ = false;
};

// A valid storage id: [a-z0-9-], 1..64 characters.
bool valid_storage_id(const std::string& id);

// `criu check`, run once (cached): ok, or its first error line
// ("criu 3.17.1: vdso: Unexpected rt vDSO area bounds" on kernel 6.18).
Status criu_check_once();

}  // namespace sandcastle::sandbox::native
