// sandcastle-agent: starting one command of an AgentExec (agent_wire.h).
// Everything the child needs is prepared before the fork, so between fork
// and execve it makes only syscalls; a failing step reaches the agent as
// {errno, step} over a close-on-exec pipe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "common/unique_fd.h"
#include "sandbox/engine/agent_wire.h"

namespace sandcastle::sandbox::engine::agent {

// The command's fds 0, 1, 2 and 3 (-1: no fd 3). The caller keeps
// ownership; the child gets copies.
struct CommandFds {
  int in = -1;
  int out = -1;
  int err = -1;
  int fd3 = -1;
  // A terminal: fd 0 (a pty slave) becomes the new session's controlling tty.
  bool ctty = false;
};

struct SpawnOutcome {
  pid_t pid = -1;          // > 0: execve succeeded; the command's keeper (below)
  pid_t command_pid = -1;  // the command itself: its session and process group
  UniqueFd listener;  // own_net: the listener in the command's namespace
  int err = 0;
  std::string step;  // "execve", "chdir", "setrlimit", "fork", ...
};

// Forks a keeper, which forks and execs e.argv in a new session and a Landlock domain of its own
// (where the kernel and the engine's seccomp profile allow Landlock): fds
// as given, everything else
// closed, signals reset, rlimits lowered as asked (a core limit of 0 always),
// env exactly e.env, cwd e.cwd. Waits only until execve succeeded or failed.
// own_net: in network (and user) namespaces of its own, listening on
// 127.0.0.1:e.listen_port there (own_net.h).
//
// The keeper is the command's child subreaper: whatever the command starts
// and leaves (a daemon that double-forked and called setsid) is reparented
// to the keeper, not to the agent, so it is known to be this command's
// whatever else runs at the time (a terminal). The keeper holds none of the
// agent's descriptors; it waits for the command, kills everything left
// under it, and exits as the command did (the same exit code, or killed by
// the same signal), so the agent reaps the keeper as the command's end.
SpawnOutcome spawn_command(const AgentExec& e, const CommandFds& fds, bool own_net);

// The step names a child may report, by index (the pipe carries the index).
inline constexpr const char* kSpawnSteps[] = {
    "setsid",    "dup2",   "close_range", "setrlimit",       "chdir",   "execve",
    "sigaction", "listen", "landlock",    "ioctl TIOCSCTTY", "seccomp", "fork"};

}  // namespace sandcastle::sandbox::engine::agent
