// File operations on a sandbox's tree from the server, through an O_PATH fd
// on the sandbox root. Every lookup uses openat2(RESOLVE_IN_ROOT): absolute
// symlinks and ".." resolve against the sandbox root, never the host's, and
// magic /proc links are refused. Paths with ".." are rejected up front.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "sandbox/sandbox.h"

namespace sandcastle::sandbox::native {

// Sandbox path -> path relative to the sandbox root ("" = the root itself).
// Relative paths are taken relative to workdir.
Result<std::string> sandbox_relative_path(const std::string& path, const std::string& workdir);

Result<FileStat> fs_stat(int root, const std::string& rel);
Result<std::vector<FileStat>> fs_list(int root, const std::string& rel);
Result<std::string> fs_read(int root, const std::string& rel, std::uint64_t max_bytes);
Status fs_write(int root, const std::string& rel, std::string_view data, std::uint32_t mode);
Status fs_mkdir(int root, const std::string& rel, bool parents);
Status fs_remove(int root, const std::string& rel, bool recursive);
// Bytes used on the filesystem holding rel (statfs).
std::uint64_t fs_used_bytes(int root, const std::string& rel);

}  // namespace sandcastle::sandbox::native
