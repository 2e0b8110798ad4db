// sandcastle-agent: a terminal's pty (issue 18). The agent, which runs as
// the sandbox user inside the container, opens the pair in the container's
// own devpts; the master is relayed to the server as the exec's channel
// (agent_wire.h: AgentExec::pty_rows), the slave becomes the command's
// controlling terminal and its fds 0-2.
#pragma once

#include <cstdint>
#include <string>

#include "common/unique_fd.h"
#include "sandbox/engine/agent_wire.h"

namespace sandcastle::sandbox::engine::agent {

struct AgentPty {
  UniqueFd master;  // non-blocking, close-on-exec
  UniqueFd slave;   // close-on-exec (the child dup2s it)
  int err = 0;
  std::string step;  // what failed
};

AgentPty open_pty(std::uint16_t cols, std::uint16_t rows);

// In a terminal's command, between fork and execve (only syscalls): a
// seccomp filter of its own that refuses ioctl TIOCSTI (typing into a
// terminal), TIOCLINUX and TIOCSETD (line disciplines: kernel code few
// use) with EPERM, as the native backend's filter does; an unknown arch
// gets EPERM for every call;
// an engine's default profile allows both, and so does this host's kernel
// (dev.tty.legacy_tiocsti=1). Needs no_new_privs (set here). False with
// errno if the engine's profile refuses seccomp(2) itself.
bool deny_terminal_injection();

// TIOCSWINSZ on the master: the kernel signals the foreground group.
bool resize_pty(int master, std::uint16_t cols, std::uint16_t rows);

}  // namespace sandcastle::sandbox::engine::agent
