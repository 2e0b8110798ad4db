// Which files a run created or changed in /workspace: a listing before and
// after, compared by size and modification time.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "sandbox/sandbox.h"

namespace sandcastle::tools {

struct FileSig {
  std::uint64_t size = 0;
  std::int64_t mtime_sec = 0;
  std::int64_t mtime_nsec = 0;
  bool operator==(const FileSig&) const = default;
};
using WorkspaceSnapshot = std::map<std::string, FileSig>;  // path relative to the workdir

// Regular files below the sandbox's workdir, at most `max_files`.
WorkspaceSnapshot snapshot_workspace(sandbox::Sandbox& sb, size_t max_files);

// [{path, size, mime_type}] for files new or changed in `after`.
nlohmann::json diff_workspace(const WorkspaceSnapshot& before, const WorkspaceSnapshot& after);

// A MIME type guessed from the file extension.
std::string mime_type_for(const std::string& path);

}  // namespace sandcastle::tools
