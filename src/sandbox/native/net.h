// Network namespace setup: a new namespace has only `lo`, and it is down.
#pragma once

#include <cstdint>
#include <optional>

#include "sandbox/native/step_error.h"

namespace sandcastle::sandbox::native {

std::optional<StepError> bring_loopback_up();

// A TCP socket bound to 127.0.0.1:port (0 = kernel's choice) and listening,
// in the caller's network namespace; close-on-exec. Run by the supervisor of
// an exec with a network namespace of its own (ExecWire::listen_port): the
// socket belongs to that namespace, where only the exec's processes can
// connect to it, and the server, which accepts on it, needs no setns (which
// an unprivileged server could not do).
std::optional<StepError> open_loopback_listener(std::uint16_t port, int* fd_out);

// A UDP socket bound to 127.0.0.1:port; close-on-exec. Like the listener,
// without SO_REUSEADDR/SO_REUSEPORT, so no sandbox program can share it.
std::optional<StepError> open_loopback_udp(std::uint16_t port, int* fd_out);

}  // namespace sandcastle::sandbox::native
