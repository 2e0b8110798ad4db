// Building the sandbox filesystem inside the new mount namespace: execute the
// mount plan under a fresh root tmpfs, then pivot_root into it.
#pragma once

#include <optional>

#include "sandbox/native/step_error.h"
#include "sandbox/native/wire.h"

namespace sandcastle::sandbox::native {

// Ptys one sandbox's devpts instance hands out (its max=): kernel.pty.max is
// shared by the whole host, so one tenant must not use it up. The server's
// terminals (kMaxTerminalsPerSandbox) need only a few of these.
inline constexpr int kMaxPtysPerSandbox = 64;

// Runs in the init helper, after the namespaces exist. Order: make every
// mount private (so nothing propagates to the host), mount the root tmpfs,
// apply each MountOp in plan order, pivot_root, detach the old root.
// For an image's plan (root_subdir set), *rw_fd receives an O_PATH fd of the
// tmpfs holding the overlay's upper dir and /workspace (plan dir "rw"),
// opened before pivot_root: save_sandbox's worker walks it (layer_export.h).
std::optional<StepError> build_root_filesystem(const InitConfig& config, int* rw_fd = nullptr);

// After pivot_root: applies the FinishConfig's ops relative to "/".
std::optional<StepError> finish_root_filesystem(const FinishConfig& config);

}  // namespace sandcastle::sandbox::native
