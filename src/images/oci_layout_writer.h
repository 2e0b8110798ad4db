// Writes an OCI image layout directory (image-spec "image-layout.md":
// oci-layout, index.json, blobs/sha256/<hex>) from blobs that arrive as
// streams: each blob is written to a temporary file while its SHA-256 is
// computed, and only enters blobs/ once its digest and size match what the
// manifest promised. The image store then imports the directory as a whole
// (a temporary, so nothing here is fsynced: a crash leaves a directory that
// is removed, never a blob that is trusted).
#pragma once

#include <openssl/evp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/result.h"
#include "common/unique_fd.h"

namespace sandcastle::images {

// True for "sha256:" followed by 64 lower-case hex digits (the only
// algorithm pulled images may use here).
bool is_sha256_digest(std::string_view digest);
// "sha256:<hex>" of `data`.
std::string sha256_digest(std::string_view data);

// One blob being written: bytes in, digest checked at the end.
class BlobSink {
 public:
  BlobSink(BlobSink&&) noexcept;
  BlobSink& operator=(BlobSink&&) = delete;
  ~BlobSink();  // removes the temporary file unless committed

  // Appends; refused (kInvalidArgument) once more than the expected size arrived.
  Status write(std::string_view data);
  std::uint64_t bytes() const { return bytes_; }

  // Renames the file to blobs/sha256/<hex> when the content's digest and
  // size are the expected ones; otherwise a digest-mismatch error naming both.
  Status commit();

 private:
  friend class OciLayoutWriter;
  BlobSink(std::string tmp_path, std::string final_path, std::string digest, std::uint64_t size,
           UniqueFd fd, EVP_MD_CTX* ctx);

  std::string tmp_path_, final_path_, digest_;
  std::uint64_t expected_size_ = 0, bytes_ = 0;
  UniqueFd fd_;
  EVP_MD_CTX* ctx_ = nullptr;
  bool committed_ = false;
};

class OciLayoutWriter {
 public:
  // Creates dir (which must not exist, or be empty) with oci-layout and blobs/sha256.
  static Result<OciLayoutWriter> create(const std::string& dir);

  const std::string& dir() const { return dir_; }
  bool has_blob(std::string_view digest) const;

  // A sink for the blob with this digest and size.
  Result<BlobSink> begin_blob(const std::string& digest, std::uint64_t size);
  // A small blob held in memory (manifest, config), checked the same way.
  Status write_blob(const std::string& digest, std::string_view bytes);

  // index.json naming the one image manifest, with its ref name (the tag)
  // and platform. Written last, so a layout with index.json is complete.
  Status write_index(const std::string& manifest_media_type, const std::string& manifest_digest,
                     std::uint64_t manifest_size, const std::string& ref_name,
                     const std::string& os, const std::string& architecture,
                     const std::string& variant);

 private:
  explicit OciLayoutWriter(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

}  // namespace sandcastle::images
