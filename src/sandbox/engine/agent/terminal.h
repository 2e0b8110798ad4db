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

// TIOCSWINSZ on the master: the kernel signals the foreground group.
bool resize_pty(int master, std::uint16_t cols, std::uint16_t rows);

}  // namespace sandcastle::sandbox::engine::agent
