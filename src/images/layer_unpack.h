// Unpacks one image layer (a tar, maybe gzip/zstd/xz compressed) into an
// empty directory in overlayfs's on-disk format, treating every byte as
// hostile: no entry may land outside the directory, nothing is written
// through a symlink, and the image's limits bound what it may cost.
//
// What is kept of an entry: its type, its mode minus setuid/setgid (and the
// sticky bit on files), its mtime. What is not: the owner and group in the
// tar (every file belongs to the server's uid; the tar's ids are recorded
// nowhere for now), xattrs (file capabilities included: a layer cannot plant
// overlay.* xattrs either), device nodes (skipped, counted).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace sandcastle::images {

// A pull source of raw (maybe compressed) layer bytes.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Points *data at the next bytes and returns their count: 0 at the end,
  // -1 on an error (then error() says what).
  virtual ssize_t read(const void** data) = 0;
  virtual std::string error() const = 0;
};

// Reads a file through its descriptor (the caller keeps it open).
class FdSource : public ByteSource {
 public:
  explicit FdSource(int fd) : fd_(fd), buf_(1 << 20) {}
  ssize_t read(const void** data) override;
  std::string error() const override { return error_; }

 private:
  int fd_;
  std::vector<char> buf_;
  std::string error_;
};

// What one image may still cost; shared by the layers of one import.
struct UnpackBudget {
  std::uint64_t bytes_left = 0;    // file data, unpacked
  std::uint64_t entries_left = 0;  // tar entries
  std::uint32_t max_path_depth = 256;
};

struct LayerResult {
  std::string diff_id;      // "sha256:<hex>" of the uncompressed tar
  std::string blob_digest;  // "sha256:<hex>" of the bytes as read (compressed)
  std::uint64_t size_bytes = 0;
  std::uint64_t entries = 0;
  std::uint64_t setid_stripped = 0;   // files and directories whose setuid/setgid bits were dropped
  std::uint64_t devices_skipped = 0;  // device nodes (other than whiteouts), sockets
};

// `dest_dir` must exist and be empty. On error the directory holds a partial
// tree the caller deletes; the error's context says which entry was refused.
Result<LayerResult> unpack_layer(ByteSource& src, const std::string& dest_dir,
                                 UnpackBudget& budget);

// Deletes a tree without following symlinks, making directories writable
// first (layers keep the modes of their tar, 0555 included).
Status remove_tree(const std::string& path);

// "sha256:<hex>" streaming hash.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t n);
  std::string finish();  // "sha256:<64 hex>"

 private:
  void* ctx_;
};

}  // namespace sandcastle::images
