// The server's end of a listener inside a container: a unix socket of the
// server's in the abstract namespace, which each connection the agent
// accepts in the container (kAccepted) is relayed to. It is never in the
// container: nothing there can reach it but through the agent. Used for an
// installer exec's private listener and for a sandbox's proxy listeners
// (EngineSandbox::open_net_listeners).
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include "common/result.h"
#include "common/unique_fd.h"

namespace sandcastle::sandbox::engine {

struct RelayAddress {
  struct sockaddr_un addr {};
  socklen_t len = 0;
};

struct RelayListener {
  UniqueFd fd;
  RelayAddress address;
};

// Listening, with a random name; `what` names it in errors.
Result<RelayListener> make_relay_listener(int backlog, const char* what);

// On the link's relay thread: never blocks (a full backlog refuses the
// connection rather than stalling every channel of the sandbox). Empty on
// failure, which makes the link close the agent's channel.
UniqueFd connect_relay(const RelayAddress& to);

}  // namespace sandcastle::sandbox::engine
