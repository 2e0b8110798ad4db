// The init helper's life after setup: PID 1 of the sandbox. It waits for exec
// requests on the control socket and starts one supervisor per exec; it exits
// (taking the whole sandbox with it) when the server closes the socket.
#pragma once

#include "sandbox/native/wire.h"

namespace sandcastle::sandbox::native {

// Each request is one SOCK_SEQPACKET message (see ControlKind in wire.h);
// an exec carries four fds via SCM_RIGHTS: report socket, stdin, stdout,
// stderr.
constexpr int kExecRequestFds = 4;
constexpr std::size_t kMaxExecRequestBytes = 200 * 1024;

int run_init_loop(int control_fd, const InitConfig& config);

}  // namespace sandcastle::sandbox::native
