// sandcastle-agent: the processes of a container, read from /proc (the
// agent has no PID namespace of its own per command, so "the command's
// tree" is found by walking parent links and sessions).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <set>
#include <vector>

namespace sandcastle::sandbox::engine::agent {

// True for a non-empty run of ASCII digits (a /proc entry that names a pid).
bool is_decimal(const char* s);

// Direct children of pid, over all its threads (/proc/PID/task/*/children).
std::vector<pid_t> children_of(pid_t pid);

// The session of pid, or -1 when it is gone.
pid_t session_of(pid_t pid);

// SIGKILL to the roots and every process below them (walking children).
// Returns how many were not in `seen` before (and adds them): callers repeat
// with fresh roots until a walk finds nothing new, as processes fork while
// they are walked.
std::size_t kill_trees(const std::vector<pid_t>& roots, std::set<pid_t>& seen);

// Processes in the agent's PID namespace (numeric entries in /proc).
std::uint32_t count_processes();

// Bytes used on the filesystem of `path` (0 when it cannot be read).
std::uint64_t bytes_used(const char* path);

}  // namespace sandcastle::sandbox::engine::agent
