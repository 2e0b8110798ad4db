// sandcastle-agent: who is on the other end of a loopback TCP connection.
// An install's listener (AgentExec::listen_port) leads to the server's
// proxy; the container shares one network namespace, so any of its
// processes could connect to it. The agent accepts a connection only from
// the install's own session: the client socket (found by its address in
// /proc/net/tcp{,6}) must be held by processes of that session alone.
#pragma once

#include <netinet/in.h>
#include <sys/types.h>

#include <string>

namespace sandcastle::sandbox::engine::agent {

// Upper bounds on one lookup: it is made for every accepted connection.
inline constexpr std::size_t kMaxSocketTableLines = 1 << 16;
inline constexpr std::size_t kMaxFdsScanned = 1 << 18;

// True when the TCP connection from `client` to `server` (both as seen by
// the server's accepted socket) comes from a socket held only by
// processes of session `sid` (at least one). Otherwise false, with why.
bool connection_from_session(const sockaddr_in& client, const sockaddr_in& server, pid_t sid,
                             std::string& why);

}  // namespace sandcastle::sandbox::engine::agent
