// sandcastle-agent init: the container's PID 1 (its Cmd). A PID 1 gets no
// signal it has no handler for, and every orphan of the container comes to
// it: so it reaps children forever and leaves on SIGTERM or SIGINT (the
// engine's stop).
#pragma once

namespace sandcastle::sandbox::engine::agent {

int run_init();

}  // namespace sandcastle::sandbox::engine::agent
