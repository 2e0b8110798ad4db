// Which languages an image can run: looks up the interpreters and compilers
// the language table uses (/usr/bin/python3, /usr/bin/node, ...) in the
// image's layers as overlayfs would merge them (whiteouts, opaque
// directories), resolving symlinks inside the image only: an absolute target
// is taken from the image's root, never the host's.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace sandcastle::images {

// Layer directories bottom first (as ImageStore::layer_dirs gives them).
class MergedTree {
 public:
  explicit MergedTree(std::vector<std::string> layers_bottom_first);
  // The host path of the file an absolute image path names after symlinks,
  // when it is a regular file; nullopt when missing, whited out, or a loop.
  std::optional<std::string> resolve_file(const std::string& image_path) const;
  bool is_executable(const std::string& image_path) const;

 private:
  std::vector<std::string> top_first_;
};

// Language names as the language table has them ("python", "javascript",
// "bash", "sh", "c", "cpp", "go", "rust", "typescript", "java", "perl", "ruby").
std::vector<std::string> probe_languages(const std::vector<std::string>& layers_bottom_first);

}  // namespace sandcastle::images
