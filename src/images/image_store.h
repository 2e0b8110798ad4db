// The image store (issue 15): root filesystems a sandbox can start from,
// kept under <state dir>/images, content-addressed. Layers are unpacked once
// (libarchive) into read-only trees in overlayfs's on-disk format (whiteouts
// as 0:0 character devices, opaque directories marked with the overlay
// xattrs) and shared by every sandbox that uses them; metadata lives in the
// state database (SQLite).
//
// This header is the contract between the store (src/images/), the native
// backend (which mounts the layers) and the tools (list_images, create_sandbox
// {image}, save_sandbox). Lower layers never include tools/ or mcp/.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace sandcastle::images {

// What the image says about how to run in it (the OCI image config's
// "config" object, validated and bounded).
struct ImageConfig {
  std::vector<std::string> env;         // "NAME=value"
  std::string working_dir;              // absolute, or empty
  std::string user;                     // "uid[:gid]" or a name from the image's /etc/passwd; empty = none
  std::vector<std::string> entrypoint;
  std::vector<std::string> cmd;
};

struct ImageRecord {
  std::string id;                       // "sha256:<hex>" of the image config (or of the layer list for a rootfs)
  std::string name;                     // "debian-py", "127.0.0.1:5000/team/py:3.11"
  std::vector<std::string> tags;        // other names for the same id
  std::vector<std::string> layers;      // layer digests ("sha256:<hex>" of the uncompressed tar), bottom first
  std::uint64_t size_bytes = 0;         // unpacked, all layers
  std::chrono::system_clock::time_point created;
  std::string source;                   // "import:docker-archive", "import:oci", "import:rootfs", "pull:<ref>", "build:<suite>", "save:<sandbox>"
  ImageConfig config;
  std::vector<std::string> languages;   // languages whose interpreter/compiler the image has ("python", "javascript", ...)
  // Only in the result of import/add_layer: what was changed or dropped while
  // unpacking ("stripped setuid/setgid bits from 2 files", "skipped 3 device nodes").
  std::vector<std::string> warnings;
};

struct StoreLimits {
  std::uint64_t max_image_bytes = 8ull << 30;  // unpacked size of one image (--max-image-bytes)
  std::uint64_t max_entries = 2'000'000;       // tar entries in one image
  std::uint32_t max_path_depth = 256;
};

struct ImportOptions {
  std::string name;  // empty: derived from the archive (its RepoTags / ref annotation) or the file name
  std::string source;  // empty: "import:<format>"; `image build` passes "build:<suite>"
};

class ImageStore {
 public:
  virtual ~ImageStore() = default;

  // Opens (creating if missing) <state_dir>/images and the image tables in
  // <state_dir>/sandcastle.db. Unfinished imports left by a crash are removed.
  static Result<std::unique_ptr<ImageStore>> open(const std::string& state_dir, StoreLimits limits = {});

  // A docker/podman save archive, an OCI image layout (directory or tar), or
  // a plain rootfs tar; detected from the content. All or nothing: on any
  // error the store is unchanged and the error says what was wrong.
  virtual Result<ImageRecord> import(const std::string& path, const ImportOptions& opts) = 0;

  // By name, tag, full id or a unique id prefix of at least 12 hex digits.
  virtual Result<ImageRecord> find(const std::string& ref) const = 0;
  virtual std::vector<ImageRecord> list() const = 0;

  // The unpacked layer trees of an image, bottom first, as absolute paths: the
  // lowerdirs of an overlay mount (overlayfs wants them top first: reverse).
  virtual Result<std::vector<std::string>> layer_dirs(const ImageRecord& image) const = 0;

  // Refused (kFailedPrecondition, naming the users) while in_use(id) says a
  // sandbox runs on it. Layers no other image uses are deleted.
  // A name of an image that has other names removes only that name.
  virtual Status remove(const std::string& ref, const std::function<std::vector<std::string>(const std::string& image_id)>& in_use) = 0;

  // A new image: base's layers plus one layer from an uncompressed tar stream
  // (already in OCI layer format, whiteouts as .wh. entries), with config.
  // `owner` takes the name ("" the operator, else a tenant's owner string):
  // as check_name says.
  virtual Result<ImageRecord> add_layer(const ImageRecord& base, const std::string& layer_tar_path,
                                        const std::string& name, const ImageConfig& config,
                                        const std::string& source, const std::string& owner) = 0;

  // Whether `owner` may give `name` to a new image: a new name, or one the
  // same owner made, moves; a name another owner made (imports, pulls and
  // builds are the operator's, "") is kAlreadyExists, and so is a name a
  // lookup would reach before another owner's (`py` before `py:latest`). A
  // name that reads as an image id is kInvalidArgument.
  virtual Status check_name(const std::string& name, const std::string& owner) const = 0;

  // Records that a sandbox of this process runs on the image, so that
  // `sandcastle image rm` from another process refuses to delete it (rows of a
  // process that is gone no longer count); release() forgets it.
  virtual Status mark_in_use(const std::string& image_id, const std::string& sandbox_id) = 0;
  virtual Status release(const std::string& image_id, const std::string& sandbox_id) = 0;
};

}  // namespace sandcastle::images
