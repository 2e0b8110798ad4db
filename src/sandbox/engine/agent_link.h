// AgentLink: the server's end of one container's agent stream (agent_wire.h).
// One relay thread per link moves bytes between the stream and local
// descriptors: every channel is a socket of the server's (a socketpair end
// this link made, or one the caller handed over, such as a kernel's fd 3),
// so the code above reads and writes plain descriptors, and the native
// file client, the kernel channel and the exec pumps work unchanged.
//
// Control messages that answer a request (kStarted, kExecFailed, kDone,
// kUsage, kListening) go to the Waiter registered for the request's id; a
// waiter's descriptor becomes readable when one is queued, so an exec waits
// on its outputs and its control messages in one poll.
//
// The agent is hostile: every frame is bounded (kMaxFrameFromAgent), data
// past a channel's window or credit past kWindow ends the link, and the
// server's buffers are bounded: per channel kWindow towards the server's
// descriptor, and the queue towards the agent (kMaxQueued) is not added to
// while it is full.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "common/result.h"
#include "common/unique_fd.h"
#include "sandbox/engine/agent_wire.h"
#include "sandbox/engine/stream_demuxer.h"

namespace sandcastle::sandbox::engine {

class AgentLink {
 public:
  // Bytes read from channels but not yet written to the stream; past it,
  // channels are not read until the agent takes what is queued.
  static constexpr std::size_t kMaxQueued = std::size_t{1} << 20;
  // Past this the agent is not reading at all: the link ends.
  static constexpr std::size_t kMaxQueuedHard = 4 * kMaxQueued + kMaxFrameToAgent;

  struct Options {
    // The stream from the agent is wrapped in the engine's stdout/stderr
    // frames (an attached exec without a TTY); false: raw (tests running
    // the agent as a local child).
    bool engine_framed = true;
    std::chrono::milliseconds hello_timeout{std::chrono::seconds(10)};
    std::string name;  // for log lines: the container's short id
  };

  class Waiter {
   public:
    Waiter();
    int fd() const { return event_.get(); }  // readable while a message is queued
    // The next message, or nothing (queue empty). After the link died,
    // dead() is true and no more come.
    std::optional<AgentControl> pop();
    bool dead() const;

   private:
    friend class AgentLink;
    bool push(AgentControl m);  // false: the queue is full
    void kill();
    UniqueFd event_;
    mutable std::mutex mu_;
    std::deque<AgentControl> queue_;
    bool dead_ = false;
  };

  // Takes the stream (a duplex socket), reads the agent's kHello and starts
  // the relay. `buffered`: stream bytes already read (in the stream's
  // framing).
  static Result<std::unique_ptr<AgentLink>> start(UniqueFd stream, std::string buffered,
                                                  const Options& options);
  ~AgentLink();
  AgentLink(const AgentLink&) = delete;
  AgentLink& operator=(const AgentLink&) = delete;

  bool alive() const { return alive_.load(std::memory_order_acquire); }
  std::uint32_t agent_pid() const { return agent_pid_; }
  // Why the link ended ("" while alive).
  std::string end_reason() const;

  // A fresh id for a request or channel (never reused on this link).
  std::uint32_t next_id() { return next_id_.fetch_add(1, std::memory_order_relaxed); }
  // Relays `local` (a SOCK_STREAM socket of the caller's, made non-blocking
  // here) as channel `channel`. The agent learns of it from the caller's
  // control message: until that is sent (send_control's `starts`), nothing
  // is read from `local`, so no data reaches the agent before its channel.
  Status attach(std::uint32_t channel, UniqueFd local);
  // A socketpair: one end relayed as a new channel, the other returned.
  Result<std::pair<std::uint32_t, UniqueFd>> open_channel();
  // Forgets a channel (its descriptor closed, the agent told): for a
  // request that failed or ended with channels still open. Unknown: no-op.
  void drop(std::uint32_t channel);

  // Control messages whose id (exec id, request id, or channel for a file
  // session's failure) is `id` go to the waiter until unwatch.
  std::shared_ptr<Waiter> watch(std::uint32_t id);
  // Forgets the waiter and the accept handler of `id`.
  void unwatch(std::uint32_t id);
  // Forgets the waiter only: a sandbox listener's accepts go on.
  void unwatch_answers(std::uint32_t id);
  // Accepted connections (kAccepted) of exec or listener `id` are attached
  // to the descriptors this makes (called on the relay thread; an empty fd
  // refuses).
  using AcceptHandler = std::function<UniqueFd()>;
  void on_accept(std::uint32_t id, AcceptHandler handler);

  // Queues a control message; then the channels in `starts` (named in it)
  // begin to be read.
  Status send_control(const std::string& payload, std::initializer_list<std::uint32_t> starts = {});
  // Closes the stream (the agent sees EOF, kills every command and exits)
  // and stops the relay. Idempotent.
  void close();

 private:
  struct Channel;
  AgentLink() = default;
  void run();
  void die(std::string why);
  bool on_frame(std::uint32_t channel, std::string_view payload);
  bool on_control(std::string_view payload);
  void queue_frame(std::uint32_t channel, std::string_view payload);  // mu_ held
  void wake();
  bool feed_agent_bytes(std::string_view bytes);
  bool read_stream();
  bool write_stream();
  void service_channel(std::uint32_t id, Channel& c, short revents);
  void finish_channel(std::uint32_t id, Channel& c);

  UniqueFd stream_;
  UniqueFd wake_;  // eventfd
  Options options_;
  std::unique_ptr<StreamDemuxer> demux_;
  std::string frame_buf_;  // the agent's frames as they come
  std::atomic<bool> alive_{true};
  std::atomic<std::uint32_t> next_id_{1};
  std::uint32_t agent_pid_ = 0;
  std::thread thread_;

  mutable std::mutex mu_;
  std::map<std::uint32_t, std::unique_ptr<Channel>> channels_;
  std::map<std::uint32_t, std::shared_ptr<Waiter>> waiters_;
  std::map<std::uint32_t, AcceptHandler> accepts_;
  std::string out_;  // frames towards the agent, not yet written
  std::string end_reason_;
  bool stopping_ = false;
};

}  // namespace sandcastle::sandbox::engine
