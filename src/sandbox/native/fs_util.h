// Small host-filesystem helpers for the server side (not for the init helper).
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace sandcastle::sandbox::native {

// Whole content of a small file (/proc, cgroupfs); empty on error.
std::string read_small_file(const std::string& path);
// One write(2) of `value` (cgroupfs wants the value in a single write).
Status write_small_file(const std::string& path, const std::string& value);
// Entry names except "." and "..".
std::vector<std::string> list_dir(const std::string& path);
// rm -rf without following symlinks; stays on one filesystem.
Status remove_tree(const std::string& path);

}  // namespace sandcastle::sandbox::native
