// sandcastle-agent: a file worker (native/file_worker.h) for one kFiles
// channel. Inside a container the engine's seccomp profile and dropped
// capabilities are the fence, so the worker loads no filter of its own.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "common/unique_fd.h"
#include "sandbox/engine/agent_wire.h"

namespace sandcastle::sandbox::engine::agent {

// Forks the worker on a socketpair; returns the agent's end (and the
// worker's pid), or an invalid fd with `failure` filled in.
UniqueFd start_file_worker(std::uint64_t rlimit_fsize, pid_t* pid, AgentFailure& failure);

}  // namespace sandcastle::sandbox::engine::agent
