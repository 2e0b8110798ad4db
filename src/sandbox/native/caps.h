// Capabilities: the init helper keeps them across its own execve (ambient
// set) because it runs as uid 1000 inside the user namespace; every command
// loses all of them, bounding set included.
#pragma once

#include <optional>
#include <string_view>

#include "sandbox/native/step_error.h"

namespace sandcastle::sandbox::native {

// Async-signal-safe (raw syscalls only): runs between clone and execve in a
// child of the multithreaded server. Copies permitted into inheritable and
// raises every capability into the ambient set. Returns 0 or an errno.
int keep_caps_across_exec();

// Run once by the sandbox's init when setup is done: empties the bounding
// and ambient sets. Init never execs again, so its own (effective and
// permitted) capabilities are unaffected, but nothing it forks can regain a
// capability through execve — and each exec's child need not repeat the
// ~40 prctl calls of the bounding-set drop.
std::optional<StepError> drop_bounding_and_ambient();

// The command's child, before execve: clears ambient (again, cheaply) and
// inheritable/permitted/effective. The bounding set was emptied by init.
std::optional<StepError> drop_all_caps();

// Puts the sandbox's seccomp filter (a struct sock_filter array) in force
// on the calling thread and what it forks. Returns 0 or an errno.
int load_seccomp_filter(std::string_view bpf);

}  // namespace sandcastle::sandbox::native
