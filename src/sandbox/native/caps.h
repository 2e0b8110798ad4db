// Capabilities: the init helper keeps them across its own execve (ambient
// set) because it runs as uid 1000 inside the user namespace; every command
// loses all of them, bounding set included.
#pragma once

#include <optional>

#include "sandbox/native/step_error.h"

namespace sandcastle::sandbox::native {

// Async-signal-safe (raw syscalls only): runs between clone and execve in a
// child of the multithreaded server. Copies permitted into inheritable and
// raises every capability into the ambient set. Returns 0 or an errno.
int keep_caps_across_exec();

// Single-threaded code only. Clears ambient, bounding, inheritable,
// permitted and effective sets, in that order (dropping the bounding set
// needs CAP_SETPCAP, which the last step removes).
std::optional<StepError> drop_all_caps();

}  // namespace sandcastle::sandbox::native
