// sandcastle-agent serve: one attached exec per container, speaking
// agent_wire.h's protocol with the server on stdin (from it) and stdout (to
// it). Single-threaded: one poll loop over the stream, every channel's fd,
// the exec listeners and a signalfd for SIGCHLD; every fd non-blocking, so
// one slow channel never stalls another.
//
// What ends an exec (as the native supervisor does it): the command's main
// process is reaped. Then everything the command started that the agent can
// find (its process group, its session, the orphans it left with the agent,
// which is a child subreaper) is killed; output already in the pipes is
// read until the pipe is empty or at EOF, sent, and then comes kDone.
#pragma once

namespace sandcastle::sandbox::engine::agent {

// Returns the exit code: 0 when the server closed the stream, 2 on a
// protocol violation, 1 when the agent cannot set itself up.
int run_serve();

}  // namespace sandcastle::sandbox::engine::agent
