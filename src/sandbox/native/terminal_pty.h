// The sandbox's side of a terminal (issue 18), in sandcastle-init: the
// command's process makes its own pty pair and the supervisor hands the
// master to the server. Both run inside the sandbox, so the pair belongs to
// the sandbox's devpts instance, the slave to the sandbox's uid, and the
// server never opens a path of the sandbox.
#pragma once

#include <optional>

#include "sandbox/native/step_error.h"
#include "sandbox/native/wire.h"

namespace sandcastle::sandbox::native {

// In the command's process (own session, no capabilities, seccomp loaded):
// opens /dev/ptmx, sizes it, takes the slave as controlling terminal
// (*slave, close-on-exec) and sends the master to the supervisor over
// `to_supervisor`, keeping no copy.
std::optional<StepError> open_terminal_pty(const ExecWire& req, int to_supervisor, int* slave);

// In the supervisor: waits (bounded) for the command's master, then for its
// execve, and only then forwards the master to the server as
// ReportKind::kTerminal and closes its own copy. The command's error pipe
// (`exec_errors`) is close-on-exec: EOF there means execve succeeded, data
// is the {errno, step} of a step after the pty (chdir, execve). Returns
// that step (nothing forwarded, the master closed: the caller reports
// kSetupError), or nullopt: forwarded, or no master came (the command
// failed before: its error pipe says why, reported at the exec's end).
std::optional<StepError> forward_terminal_master(int from_command, int exec_errors, int report_fd);

}  // namespace sandcastle::sandbox::native
