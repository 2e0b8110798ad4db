// Small host-filesystem helpers for the server side (not for the init helper).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
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
// The owner pid of a leftover named "<prefix><pid>...": nullopt unless decimal
// digits follow the prefix and make a pid_t above 0 (no overflow). `rest`, when
// given, gets what follows the digits.
std::optional<pid_t> owner_pid(std::string_view name, std::string_view prefix,
                               std::string_view* rest = nullptr);

}  // namespace sandcastle::sandbox::native
