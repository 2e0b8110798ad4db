// Writing several files as one change: all of them, or none. Each file goes
// to a temp name beside its target, then every temp is renamed into place
// (Sandbox::rename, inside the sandbox); anything that fails before the
// renames removes the temps and the directories this call made.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/byte_budget.h"
#include "common/result.h"
#include "sandbox/sandbox.h"

namespace sandcastle::service {

struct FileUpload {
  std::string path;       // a sandbox path (absolute, or relative to the workdir)
  std::string_view data;  // owned by the caller until the call returns
};

// Sizes are the caller's to check (Sandboxes::write_files does, before the
// sandbox is looked up). Refused before anything is written: the total
// above what the transfer budget can lend
// (kResourceExhausted), a target that is an existing directory (EISDIR), a
// path without a file name (kInvalidArgument). Missing parent directories
// are made. A rename that fails after others went through (the sandbox
// changed the tree meanwhile) leaves those in place and says which failed.
Status write_all_or_none(sandbox::Sandbox& sb, ByteBudget& budget,
                         const std::vector<FileUpload>& files);

// The name a file is written under before it is renamed to `path`:
// ".<name>.upload-<16 hex digits>" in the same directory.
Result<std::string> upload_temp_path(const std::string& path);

}  // namespace sandcastle::service
