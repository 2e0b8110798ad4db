// The exec supervisor: PID 1 of a PID namespace nested in the sandbox's.
// Because it is that namespace's init, the command cannot kill it, and its
// kill(-1) reaches every process in the namespace — double-forked daemons
// included — as does the kernel when it exits. It enforces the wall-clock
// timeout and cancellation and reports the outcome over the exec's report
// socket.
#pragma once

#include "sandbox/native/wire.h"

namespace sandcastle::sandbox::native {

struct ExecFds {
  int report = -1;
  int in = -1;
  int out = -1;
  int err = -1;
  int pass = -1;  // the command's fd 3, if the exec has one
};

// A supervisor is started ahead of its exec (an "exec slot"): it mounts the
// exec's /proc (exec_proc.h) and forks the command's process at once, which
// does the request-independent setup and waits; the supervisor then waits on
// slot_fd for the request (an encoded ExecWire + report, stdin, stdout,
// stderr fds), hands it on, and supervises. Once a plain exec is over and
// every process of it is reaped, it says kSlotReady on slot_fd, forks the
// next command process and waits for another exec; init ends it by closing
// slot_fd.
// own_netns: init cloned it into a new network namespace for an exec with a
// listen_port; it opens that listener and sends it over the report socket.
// ahead: the command is started at once (AheadWire), and handed the exec
// that matches it; init sends such a slot no other.
[[noreturn]] void run_supervisor(int slot_fd, const InitConfig& config, int signal_fd,
                                 bool own_netns, const AheadWire* ahead = nullptr);

}  // namespace sandcastle::sandbox::native
