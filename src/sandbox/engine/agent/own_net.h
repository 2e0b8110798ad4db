// sandcastle-agent: a network namespace of the command's own for an exec
// with a listener (AgentExec::listen_port: an install, whose listener
// leads to the server's proxy). As in the native backend, the
// listener then lives where only the command and its children are: another
// program of the container connecting to 127.0.0.1:<port> is refused
// (ECONNREFUSED), not accepted and closed. The namespace comes with a user
// namespace mapping the agent's own uid and gid to themselves (no
// privilege needed; the command keeps its ids and loses the namespace's
// capabilities at execve). An engine whose seccomp profile forbids it
// (Docker's default) leaves the listener in the container's namespace,
// guarded by the session check alone (peer_owner.h).
#pragma once

#include <cstdint>
#include <string>

#include "common/unique_fd.h"

namespace sandcastle::sandbox::engine::agent {

// Whether unshare(CLONE_NEWUSER | CLONE_NEWNET) works here (tried once, in
// a child that exits at once).
bool own_netns_supported();

// Everything the child needs, made before the fork.
struct OwnNetPlan {
  std::uint16_t port = 0;  // 0: no own namespace
  std::string uid_map;     // "<euid> <euid> 1\n"
  std::string gid_map;
};
OwnNetPlan plan_own_net(std::uint16_t port);

// In the child between fork and execve (syscalls only): enters the new
// namespaces, brings `lo` up and listens on 127.0.0.1:port. The listener
// (close-on-exec), or -1 with errno.
int enter_own_net(const OwnNetPlan& plan);

// The listener from the child to the agent, over their SOCK_SEQPACKET
// report socket: one message of one byte, 'L', with the descriptor.
inline constexpr char kListenerMark = 'L';
bool send_listener(int sock, int fd);

}  // namespace sandcastle::sandbox::engine::agent
