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
// Without root there are no loop mounts: persistent specs are refused.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
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

 private:
  friend class PersistStore;
  AttachedDisk() = default;
  std::string id_;
  std::string mount_;  // <runtime>/pst/<id>
  UniqueFd loop_;      // held until unmounted (AUTOCLEAR detaches after)
  UniqueFd root_;      // the mount's root, for FIFREEZE/FITHAW
  bool mounted_ = false;
  bool frozen_ = false;
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
  Status copy(const std::string& from, const std::string& to);
  // Unmounts whatever is still attached (shutdown).
  void detach_all();

  const std::string& storage_dir() const { return storage_dir_; }

 private:
  std::string dir_of(const std::string& id) const { return storage_dir_ + "/" + id; }
  Status prepare_dirs();
  std::shared_ptr<AttachedDisk> find_attached(const std::string& id);

  std::string storage_dir_;
  RuntimeDirs dirs_;
  mutable std::mutex mu_;  // attach/remove/copy of one id at a time, and attached_
  std::map<std::string, std::weak_ptr<AttachedDisk>> attached_;
  bool dirs_ready_ = false;
};

// A valid storage id: [a-z0-9-], 1..64 characters.
bool valid_storage_id(const std::string& id);

// `criu check`, run once (cached): ok, or its first error line
// ("criu 3.17.1: vdso: Unexpected rt vDSO area bounds" on kernel 6.18).
Status criu_check_once();

}  // namespace sandcastle::sandbox::native
