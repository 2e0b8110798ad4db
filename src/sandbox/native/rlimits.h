// rlimits: a fence behind the cgroup limits, and the only fence for memory
// and processes when cgroups are not delegated to us.
#pragma once

#include <optional>

#include "sandbox/native/step_error.h"
#include "sandbox/native/wire.h"

namespace sandcastle::sandbox::native {

// RLIMIT_NPROC counts per (user namespace, uid): each sandbox has its own user
// namespace, so the limit caps the processes of this sandbox only, not every
// process of a uid the host shares with others.
std::optional<StepError> apply_exec_rlimits(const ExecWire& req);

}  // namespace sandcastle::sandbox::native
