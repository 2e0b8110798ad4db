#include "sandbox/native/userns.h"

#include <unistd.h>

#include <string>

#include "sandbox/native/fs_util.h"

namespace sandcastle::sandbox::native {

IdMapping mapping_for_server(std::uint64_t sandbox_serial) {
  IdMapping m;
  if (::geteuid() == 0) {
    std::uint32_t id = kRootModeHostIdBase + static_cast<std::uint32_t>(sandbox_serial % kRootModeHostIdCount);
    m.host_uid = id;
    m.host_gid = id;
    m.deny_setgroups = false;  // init drops the server's supplementary groups
  } else {
    m.host_uid = ::geteuid();
    m.host_gid = ::getegid();
    m.deny_setgroups = true;
  }
  return m;
}

Status write_id_maps(pid_t pid, const IdMapping& m) {
  std::string base = "/proc/" + std::to_string(pid);
  if (m.deny_setgroups)
    if (auto st = write_small_file(base + "/setgroups", "deny"); !st) return st;
  if (auto st = write_small_file(base + "/uid_map", std::to_string(m.inside_uid) + " " +
                                                        std::to_string(m.host_uid) + " 1\n");
      !st)
    return st;
  return write_small_file(base + "/gid_map",
                          std::to_string(m.inside_gid) + " " + std::to_string(m.host_gid) + " 1\n");
}

}  // namespace sandcastle::sandbox::native
