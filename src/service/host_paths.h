// Host files that upload_file/download_file may touch: only below the
// directories the operator allowed with --allow-host-path. Resolution is done
// by the kernel (openat2 RESOLVE_BENEATH from the allowed directory), so
// symlinks and '..' cannot lead outside.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"

namespace sandcastle::service {

class HostPaths {
 public:
  explicit HostPaths(std::vector<std::string> allowed);

  // Opens an existing host file for reading.
  Result<UniqueFd> open_read(const std::string& path) const;
  // Creates or truncates a host file for writing (parent must exist).
  Result<UniqueFd> open_write(const std::string& path) const;
  const std::vector<std::string>& allowed() const { return allowed_; }

 private:
  Result<UniqueFd> open_beneath(const std::string& path, int flags, int mode) const;
  std::vector<std::string> allowed_;  // absolute, normalised, no trailing '/'
};

// Reads a whole fd up to `max` bytes; more is an error naming the limit.
Result<std::string> read_all(int fd, std::uint64_t max, const std::string& what);
Status write_all(int fd, std::string_view data, const std::string& what);

}  // namespace sandcastle::service
