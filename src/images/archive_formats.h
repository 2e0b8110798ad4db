// The three ways an image arrives (docker/podman save archive, OCI image
// layout as a directory or a tar, plain rootfs tar): which one a path is, the
// image's config and its layers in order, with the digests each must have.
// Layers are not read here; ImageSource streams them to the unpacker.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"
#include "images/image_store.h"
#include "images/layer_unpack.h"

namespace sandcastle::images {

// Where an image's files are: a directory, or the members of a tar.
class ImageSource {
 public:
  virtual ~ImageSource() = default;
  // A structural file (manifest.json, index.json, a small JSON blob), by its
  // path in the archive; kNotFound when it has none of that name.
  virtual Result<std::string> small_file(const std::string& path) = 0;
  virtual bool has(const std::string& path) const = 0;
  // Streams each of `paths` once, in the archive's order ("" is the whole
  // file: a rootfs tar).
  virtual Status stream(
      const std::set<std::string>& paths,
      const std::function<Status(const std::string& path, ByteSource& bytes)>& fn) = 0;
};

struct LayerPlan {
  std::string path;         // in the archive; "" for the archive itself
  std::string blob_digest;  // what its bytes must hash to, when the format names it
  std::string diff_id;      // what its uncompressed tar must hash to, from the config
};

struct ImagePlan {
  std::string format;       // "docker-archive", "oci", "rootfs"
  std::string config_json;  // the image config as stored (empty for a rootfs)
  std::string id;           // "sha256:<hex>" of config_json (a rootfs: set after unpacking)
  std::vector<LayerPlan> layers;
  std::string name_hint;  // RepoTags[0], the ref annotation, or the file's name
  ImageConfig config;
  std::vector<std::string> warnings;
};

// Opens `path` (a directory or a file) and reads what the image is made of.
// Digests of the manifests and configs are verified here; the layers' are
// verified while they are unpacked.
Result<ImagePlan> plan_import(const std::string& path, std::unique_ptr<ImageSource>* source);

// The "config" object of an OCI/docker image config, validated and bounded.
Result<ImageConfig> parse_run_config(const nlohmann::json& config);

// A name the store accepts: [A-Za-z0-9._/:@-], 1..255 characters, starting
// with a letter or digit, and not a digest.
bool valid_image_name(const std::string& name);

}  // namespace sandcastle::images
