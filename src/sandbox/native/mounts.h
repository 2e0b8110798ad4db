// Building the sandbox filesystem inside the new mount namespace: execute the
// mount plan under a fresh root tmpfs, then pivot_root into it.
#pragma once

#include <optional>

#include "sandbox/native/step_error.h"
#include "sandbox/native/wire.h"

namespace sandcastle::sandbox::native {

// Runs in the init helper, after the namespaces exist. Order: make every
// mount private (so nothing propagates to the host), mount the root tmpfs,
// apply each MountOp in plan order, pivot_root, detach the old root.
std::optional<StepError> build_root_filesystem(const InitConfig& config);

// After pivot_root: applies the FinishConfig's ops relative to "/".
std::optional<StepError> finish_root_filesystem(const FinishConfig& config);

}  // namespace sandcastle::sandbox::native
