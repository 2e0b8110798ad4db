// User namespace identity. Inside, everything runs as uid/gid 1000
// ("sandbox"); outside, that is one host id: the server's own uid when it is
// unprivileged, or an otherwise unused high uid when the server is root — so
// a process that escapes every other fence is still nobody on the host.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "common/result.h"

namespace sandcastle::sandbox::native {

struct IdMapping {
  std::uint32_t inside_uid = 1000;
  std::uint32_t inside_gid = 1000;
  std::uint32_t host_uid = 0;
  std::uint32_t host_gid = 0;
  // Unprivileged writers must deny setgroups before writing gid_map.
  bool deny_setgroups = true;
};

// Host ids used for sandboxes when the server runs as root: one per sandbox,
// so sandboxes cannot signal each other even by pid.
constexpr std::uint32_t kRootModeHostIdBase = 1'500'000'000;
constexpr std::uint32_t kRootModeHostIdCount = 100'000;

IdMapping mapping_for_server(std::uint64_t sandbox_serial);

// A plain single-id map written by the parent itself: no newuidmap, no
// /etc/subuid, works for every user allowed to create user namespaces.
Status write_id_maps(pid_t pid, const IdMapping& m);

}  // namespace sandcastle::sandbox::native
