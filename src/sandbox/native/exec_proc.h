// Each exec's own /proc. A command runs in a PID namespace of its own (its
// supervisor is that namespace's init, supervisor.h), so the sandbox's /proc
// would show it under another PID than getpid() returns: `ps` fails ("lookup
// self"), psutil and /proc/<getpid()> read some other process, and every
// exec sees the others' processes. The supervisor therefore takes a mount
// namespace of its own and mounts a procfs of its PID namespace over /proc,
// with the sandbox's masks and read-only paths moved onto it unchanged.
#pragma once

#include <optional>

#include "sandbox/native/step_error.h"
#include "sandbox/native/wire.h"

namespace sandcastle::sandbox::native {

// In the supervisor, before its command process is forked. The kernel allows
// the new procfs because the sandbox's /proc is fully visible in its user
// namespace: init made its masks there (unlocked binds), none was inherited.
// The namespace's mounts are slaves of init's (which init_main makes
// shared), so storage mounted into init's later reaches every exec. On an
// error the supervisor is back in init's namespace, with the sandbox's /proc.
std::optional<StepError> mount_exec_proc(const InitConfig& config);

}  // namespace sandcastle::sandbox::native
