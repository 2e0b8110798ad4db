// list_files: a directory of a sandbox (its entries, recursively if asked),
// for the MCP tool and the REST API alike.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "service/caller.h"
#include "service/env.h"

namespace sandcastle::service {

struct FileEntry {
  std::string path;  // the listed directory joined with name
  std::string name;  // relative to the listed directory
  std::string type;  // "file", "directory", "symlink", "other"
  std::uint64_t size = 0;
  std::uint32_t mode = 0;
  std::string modified;  // ISO 8601, UTC
};

struct FileListing {
  std::string path;  // as asked
  std::vector<FileEntry> entries;
  bool truncated = false;  // more than the server's max_listed_files
};

// Which step failed: finding the caller's sandbox, or listing the path in
// it (an error with the errno the sandbox reported: ENOENT, ENOTDIR, ...).
// A face words them differently (the MCP tool adds what to do about a path).
enum class ListStep { kSandbox, kPath };

// The caller's sandbox (by id or name; a stopped one is started) at `path`
// (relative to the workdir, or absolute).
Result<FileListing> list_files(Env& env, const Caller& c, const std::string& id,
                               const std::string& path, bool recursive, ListStep* failed = nullptr);

}  // namespace sandcastle::service
