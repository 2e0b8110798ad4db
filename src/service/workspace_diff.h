// Which files a run created or changed in /workspace: a listing before and
// after, compared by size and modification time.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "sandbox/sandbox.h"

namespace sandcastle::service {

struct FileSig {
  std::uint64_t size = 0;
  std::int64_t mtime_sec = 0;
  std::int64_t mtime_nsec = 0;
  bool operator==(const FileSig&) const = default;
};
using WorkspaceSnapshot = std::map<std::string, FileSig>;  // path relative to the workdir

// sandcastle's own state in the workdir (installed packages): not a
// program's output, so never listed.
inline constexpr const char* kSandcastleStateDir = ".sandcastle";

// A snapshot and the backend's watch on the tree it was taken from
// (Sandbox::changed_since; 0: none).
struct WatchedSnapshot {
  WorkspaceSnapshot files;
  std::uint64_t watch = 0;
};

// Regular files below the sandbox's workdir, from a listing of at most
// `max_files` entries (made inside the sandbox), watched where the backend
// can. `truncated` (if given) says the workdir held more than that.
WatchedSnapshot snapshot_workspace(sandbox::Sandbox& sb, size_t max_files,
                                   bool* truncated = nullptr);

// Whether the workdir is known unchanged since `snap` was taken (its watch
// saw nothing), so a listing now would find the same.
bool unchanged_since(sandbox::Sandbox& sb, const WatchedSnapshot& snap);

// How many changed files one result names (each becomes a link and a
// content block): the rest are counted, not listed.
constexpr size_t kMaxFilesReported = 1'000;

// [{path, size, mime_type}] for files new or changed in `after`, at most
// `max_reported`; `changed` (if given) receives how many there are in all.
nlohmann::json diff_workspace(const WorkspaceSnapshot& before, const WorkspaceSnapshot& after,
                              size_t max_reported = kMaxFilesReported, size_t* changed = nullptr);

// A MIME type guessed from the file extension.
std::string mime_type_for(const std::string& path);

}  // namespace sandcastle::service
