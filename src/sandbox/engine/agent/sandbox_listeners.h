// sandcastle-agent: listeners for the whole sandbox (kListen, issue 19).
// The server's proxies for an allowlist sandbox are reached inside the
// container at 127.0.0.1:3128, :1080 and :53; the agent listens there and
// hands each connection to the server as a channel (kAccepted with the
// listener's id), exactly as an exec's private listener does, but for
// anyone in the container: no peer check, no network namespace of its own.
//
// DNS over UDP has no connection to hand over, so each datagram to :53
// becomes one: a socketpair whose far end is the channel, our end carrying
// the datagram in DNS-over-TCP framing and taking the first framed reply,
// which goes back to the datagram's source with sendto. The server thus only
// ever speaks TCP DNS.
#pragma once

#include <netinet/in.h>
#include <poll.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "sandbox/engine/agent/channels.h"
#include "sandbox/engine/agent_wire.h"

namespace sandcastle::sandbox::engine::agent {

class SandboxListeners {
 public:
  // `next_channel`: the agent's counter of the channels it picks (from
  // kAgentChannelBase; 0 once it wrapped, then nothing more is accepted).
  SandboxListeners(Channels& channels, std::uint32_t& next_channel)
      : ch_(channels), next_channel_(next_channel) {}

  // kListen: answers kListening or kExecFailed. An id already listening is
  // a protocol violation (the text returned).
  const char* listen(std::uint32_t id, ListenKind kind, std::uint16_t port);

  // Appends a pollfd for every listener and DNS flow; after poll, on_ready
  // gets the same range back.
  void poll_set(std::vector<struct pollfd>& pfds);
  void on_ready(const struct pollfd* pfds, std::size_t n);
  // Drops DNS flows the server did not answer in time; the next such
  // deadline (0: none).
  void expire(std::int64_t now_ms);
  std::int64_t next_deadline() const;

 private:
  struct Listener {
    std::uint32_t id = 0;
    bool udp = false;
    UniqueFd fd;
  };
  struct Flow {
    std::uint32_t listener = 0;
    int udp_fd = -1;  // the listener's socket the reply leaves from
    UniqueFd ours;    // our end of the channel's socketpair
    struct sockaddr_in source {};
    std::string reply;
    std::int64_t deadline = 0;
  };
  bool has_id(std::uint32_t id) const;
  bool take_channel(std::uint32_t& id);
  void accept_on(const Listener& l);
  void receive_on(const Listener& l);
  // false: the flow is done (answered, or its channel ended).
  bool read_reply(Flow& f);

  Channels& ch_;
  std::uint32_t& next_channel_;
  std::vector<Listener> listeners_;
  std::vector<Flow> flows_;
  std::size_t polled_listeners_ = 0;  // as of the last poll_set
  std::size_t polled_flows_ = 0;
};

}  // namespace sandcastle::sandbox::engine::agent
