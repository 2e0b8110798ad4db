// Sandboxes rooted in an image (issue 15): the mount plan that puts an image
// store's layers under a sandbox as its /, and what the image's config says
// about running in it.
//
// The filesystem. The sandbox's init, inside its own user and mount
// namespaces, mounts:
//   - a tmpfs of the spec's disk_bytes ("rw") holding the overlay's upper/
//     and work/ dirs: writes to / and to /workspace (a directory of the
//     overlay, so an image's /workspace shows there) share that one limit,
//     and a full disk is ENOSPC inside, nothing on the host;
//   - overlayfs (userxattr: whiteouts and opaque markers as user.overlay.*
//     xattrs, as overlay in a user namespace needs) with the image's layers
//     as lower dirs, top first; this becomes the sandbox's root;
//   - /proc (masked, /proc/sys read-only), /dev, /dev/shm, /tmp (one tmpfs
//     of tmp_bytes) exactly as the host image has them, /workspace, and
//     /opt/sandcastle (kernel drivers) read-only.
// All of it lives only in the sandbox's mount namespace: when its last
// process dies the upper dir is gone, and the server never walks the merged
// tree (file operations go through the in-sandbox worker).
//
// Ids. The store keeps every layer file owned by the server's uid. A
// sandbox maps one id: inside U (the image's user, else 1000) <-> one host
// id H. The image's files must look owned by U inside, so that U can write
// its / (copy-up keeps the owner, and a new file in /usr needs a writable
// /usr) while the layers on disk stay untouchable:
//   - unprivileged server: H is the server's uid, which owns the layers:
//     they appear owned by U with nothing more to do;
//   - root server: H is a fresh high uid (1.5e9 + serial), and the layers
//     (owned by host uid 0, which no sandbox maps) would appear as nobody,
//     unwritable and uncopyable. The layers' directory (each layer, if they
//     have none in common) is therefore bound, for the moments the init
//     needs to mount its overlay, as an idmapped mount (mount_setattr
//     MOUNT_ATTR_IDMAP, on-disk 0 -> H, read-only, nosuid, nodev) under the
//     server's runtime dir, in a directory only H may enter; the init's
//     mount namespace keeps its copy when cloned, and the server detaches
//     its own once the sandbox is ready (on the reaper's thread).
// Why not a 65536-id range per sandbox: the layers' owner (host 0, or the
// unprivileged server) would still be outside it, so a range needs idmapped
// mounts too, plus subuid delegation unprivileged; one id keeps both modes
// the same and every sandbox's host identity distinct. Either way the
// lower dirs themselves are out of reach: they are read-only binds (root)
// or host paths detached with the old root (pivot_root), and every write
// lands in the sandbox's own upper dir. An image whose user is root runs as
// 1000: no sandbox has uid 0.
//
// The image is hostile input: its symlinks are never followed while the
// plan runs (mount points are made real directories, kRealDir), and the
// user is looked up with openat2(RESOLVE_IN_ROOT) inside each layer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "sandbox/native/host_image.h"
#include "sandbox/native/wire.h"
#include "sandbox/spec.h"

namespace sandcastle::images {
class ImageStore;
}

namespace sandcastle::sandbox::native {

// An image as the backend needs it.
struct ImageRoot {
  std::string name;
  std::string id;
  std::vector<std::string> layers;  // absolute, bottom first
  std::vector<std::string> env;     // "NAME=value", under the spec's env
  std::string working_dir;          // absolute or empty (then /workspace)
  std::string user;                 // the image's config user ("" = none)
  std::vector<std::string> languages;
  // Marks the image in use by a sandbox until the returned handle is
  // released (null: nothing to mark).
  std::function<std::shared_ptr<void>(const std::string& sandbox_id)> lease;
};

// Finds an image by reference (name, tag, id); kNotFound if there is none.
using ImageResolver = std::function<Result<ImageRoot>(const std::string& ref)>;

// A resolver over the image store (which must outlive it).
ImageResolver store_resolver(images::ImageStore& store);

// The directory the plan pivots into (InitConfig::root_subdir).
inline constexpr const char* kImageRootSubdir = "merged";

// Layer paths usable as overlay lower dirs: absolute, no ':' ',' '\\' or
// control characters (they are joined into mount options), at most 128.
Status check_layer_paths(const std::vector<std::string>& layers);

// The plan before pivot_root (relative to dirs.root_mount); lowers top first.
// `storage`: a persistent sandbox's storage (a host path its init binds as
// rw/ instead of the tmpfs; persist_disk.h), else "". `restore_from`:
// without root, the storage's copy of the upper dir (a host path), copied
// onto the tmpfs before the overlay is mounted (persist_mirror.h), or "".
std::vector<MountOp> image_base_plan(const std::vector<std::string>& lowers_top_first,
                                     const RuntimeDirs& dirs, const Limits& limits,
                                     const std::string& storage = {},
                                     const std::string& restore_from = {});
// After pivot_root: /dev read-only (/ stays writable: it is the overlay).
std::vector<MountOp> image_finish_plan();

// The ids a sandbox on this image runs as inside: the image's user looked
// up in its /etc/passwd (and /etc/group) read from the layer trees with
// openat2(RESOLVE_IN_ROOT), so no symlink in an image leads out of its
// layer; root and absent mean 1000. An unknown name is an error.
struct ImageIds {
  std::uint32_t uid = 1000;
  std::uint32_t gid = 1000;
};
Result<ImageIds> resolve_image_user(const ImageRoot& image);

// A user namespace (an fd on it) mapping inside_uid/gid to uid/gid, one id
// each: for MOUNT_ATTR_IDMAP (on-disk inside ids shown as the host ids).
Result<UniqueFd> idmap_userns(std::uint32_t inside_uid, std::uint32_t inside_gid, std::uint32_t uid,
                              std::uint32_t gid);

// Root mode: each layer bound read-only and idmapped (on-disk uid/gid 0 ->
// host_uid/host_gid) under dirs.base/img/<sandbox id>/<n>, for as long as
// this object lives (the init keeps its own copies once mounted).
class LayerMounts {
 public:
  LayerMounts() = default;
  LayerMounts(LayerMounts&& o) noexcept
      : dir_(std::move(o.dir_)), paths_(std::move(o.paths_)), own_mount_(o.own_mount_) {
    o.dir_.clear();
  }
  LayerMounts& operator=(LayerMounts&&) = delete;
  ~LayerMounts();
  static Result<LayerMounts> make(const RuntimeDirs& dirs, const std::string& sandbox_id,
                                  const std::vector<std::string>& layers_bottom_first,
                                  std::uint32_t host_uid, std::uint32_t host_gid);
  const std::vector<std::string>& paths_top_first() const { return paths_; }

 private:
  std::string dir_;
  std::vector<std::string> paths_;
  bool own_mount_ = false;  // dir_ is bound onto itself
};

}  // namespace sandcastle::sandbox::native
