// sandcastle-agent: the stream to the server and the channels relayed over
// it (agent_wire.h). Each channel is one local fd; bytes from the server
// wait in the channel (at most kWindow: the server's window) until the fd
// takes them, then are credited back; bytes from the fd are read only as far
// as the server's credit allows. So neither side ever holds more than
// kWindow per channel and direction, and nothing blocks.
//
// Ends of a channel, as the server sees them:
// - the agent stops reading its fd (EOF, or the command ended and the pipe
//   is drained): a data frame of length 0;
// - the agent forgets the channel (both directions ended here, the command
//   ended, or its exec failed): kClose, always, so the server can release
//   its end too (the server's own kClose alone is not answered). It waits
//   until the server has credited all the channel's data (the server drops
//   what it still holds at kClose), unless the channel is closed by force
//   (a failed request, a drain that took too long);
// - the server's EOF: after the pending bytes are written, the fd is closed
//   (stdin) or shut down for writing (sockets); its kClose: the fd is closed.
#pragma once

#include <poll.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/unique_fd.h"
#include "sandbox/engine/agent_wire.h"

namespace sandcastle::sandbox::engine::agent {

enum class ChannelKind {
  kStdin,   // server -> command's fd 0 (a pipe)
  kOutput,  // command's fd 1 or 2 -> server (a pipe)
  kSocket,  // both ways: the command's fd 3, an accepted connection
  kFiles,   // both ways: a file worker's socket
};

// Bytes from the agent's pending output at which it stops reading the
// server and its channels until the server has taken some.
inline constexpr std::size_t kOutHigh = std::size_t{8} << 20;
// Bytes read from a channel after its command ended: output a process that
// escaped the kill keeps writing does not hold kDone back for ever.
inline constexpr std::size_t kDrainCap = std::size_t{1} << 20;

class Channels {
 public:
  // A control message (channel 0) to the server.
  void control(const std::string& payload) { frame(kControlChannel, payload); }
  // Writes what the server's pipe takes now; false when the server is gone.
  bool flush();
  bool pending_out() const { return out_.size() > out_off_; }
  bool backlogged() const { return out_.size() - out_off_ >= kOutHigh; }

  bool has(std::uint32_t id) const { return map_.count(id) != 0; }
  std::size_t size() const { return map_.size(); }
  // `fd` is made non-blocking; `exec` is the command it belongs to.
  void add(std::uint32_t id, ChannelKind kind, UniqueFd fd, std::optional<std::uint32_t> exec);
  // A channel of a request that failed: closed, and the server told (EOF
  // first when `output`: one the agent would have sent on), whether or not
  // it was registered yet.
  void abandon(std::uint32_t id, bool output);

  // From the server. An error text means a protocol violation.
  const char* on_data(std::uint32_t id, std::string_view data);
  const char* on_credit(std::uint32_t id, std::uint32_t bytes);
  void on_close(std::uint32_t id);

  // The command behind the channel ended: stdin is closed (kClose), what
  // can be read is read until the fd is empty (or at EOF), then its EOF.
  void end_of_command(std::uint32_t id);
  bool still_reading(std::uint32_t id) const;
  // Closes the channel: EOF if it was still read, then kClose, once the
  // server has credited everything sent on it (at once when `now`).
  void close(std::uint32_t id, bool now = false);

  // The pollfds for every channel with something to wait for, and which
  // channel each is (in `who`, in the same order).
  void poll_set(std::vector<struct pollfd>& pfds, std::vector<std::uint32_t>& who) const;
  void on_ready(std::uint32_t id, short revents);
  // Reads on from channels draining after their command ended whose reads
  // stopped for lack of room (no poll event wakes those).
  void resume_drains();
  // Execs one of whose channels stopped reading since the last call.
  std::vector<std::uint32_t> take_finished_execs() { return std::exchange(finished_, {}); }

 private:
  struct Channel {
    ChannelKind kind = ChannelKind::kStdin;
    UniqueFd fd;
    std::optional<std::uint32_t> exec;
    bool reading = false;  // fd -> server still open
    bool writing = false;  // server -> fd still open
    bool server_eof = false;
    bool draining = false;
    bool now = false;  // kClose without waiting for credit
    std::size_t drained = 0;
    std::string pending;  // from the server, not yet written to fd
    std::size_t pending_off = 0;
    std::uint32_t credit = kWindow;  // bytes we may still send
    std::uint32_t owed = 0;          // written to fd, not yet credited
    std::size_t in_flight() const { return pending.size() - pending_off; }
  };

  void frame(std::uint32_t id, std::string_view payload);
  void pump_write(std::uint32_t id, Channel& c);
  void pump_read(std::uint32_t id, Channel& c);
  void end_reading(std::uint32_t id, Channel& c);
  void end_writing(std::uint32_t id, Channel& c);
  // Erases the channel (kClose) when neither direction is open.
  void retire(std::uint32_t id, Channel& c);

  std::unordered_map<std::uint32_t, Channel> map_;
  std::string out_;
  std::size_t out_off_ = 0;
  std::vector<std::uint32_t> finished_;
};

}  // namespace sandcastle::sandbox::engine::agent
