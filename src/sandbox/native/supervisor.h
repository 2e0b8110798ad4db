// The per-exec supervisor: PID 1 of a PID namespace nested in the sandbox's.
// Because it is that namespace's init, the command cannot kill it, and when it
// exits the kernel kills every process left in the namespace — double-forked
// daemons included. It enforces the wall-clock timeout and cancellation and
// reports the outcome over the exec's report socket.
#pragma once

#include "sandbox/native/wire.h"

namespace sandcastle::sandbox::native {

struct ExecFds {
  int report = -1;
  int in = -1;
  int out = -1;
  int err = -1;
};

[[noreturn]] void run_supervisor(const ExecWire& req, const InitConfig& config, ExecFds fds,
                                 int signal_fd);

}  // namespace sandcastle::sandbox::native
