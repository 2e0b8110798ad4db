// Pulling one image from a registry into an OCI image layout directory:
// the manifest (through an index / manifest list, for the wanted platform),
// then the config and layer blobs, each verified against its digest and size
// while it streams to disk. The directory is complete (index.json written)
// only when every blob arrived intact; the image store imports it from there.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "images/registry_client.h"

namespace sandcastle::images {

inline constexpr std::size_t kMaxManifestEntries =
    1000;  // layers of a manifest, entries of an index

struct PullOptions {
  RegistryOptions registry;
  Platform platform;                           // which image of an index
  std::uint64_t max_image_bytes = 8ull << 30;  // the config and layers together, as downloaded
  std::function<void(const std::string&)> progress;  // one line per step (stderr), optional
};

struct PullResult {
  ImageReference reference;
  std::string manifest_media_type;
  std::string
      manifest_digest;  // the image manifest (of the chosen platform) as the registry serves it
  std::string layout_manifest_digest;  // the manifest in the layout: the same, or its OCI form for
                                       // a Docker one
  std::string index_digest;            // the index the reference named, if it named one
  std::string config_digest;
  std::vector<std::string> layers;  // blob digests as in the manifest, bottom first
  std::uint64_t bytes = 0;          // blob bytes written
  Platform platform;                // as the image's config states it
};

// `dir` must not exist or be empty. On error it may hold partial blobs but no
// index.json; the caller removes it.
Result<PullResult> pull_to_layout(const ImageReference& ref, const PullOptions& opts,
                                  const std::string& dir);

}  // namespace sandcastle::images
