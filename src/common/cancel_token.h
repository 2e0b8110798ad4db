// CancelToken: how one thread ends (or interrupts) work another thread is
// doing, and how a request's cancellation reaches everything working for it.
// Nothing waits by polling the token (a server holds thousands of idle ones):
// cancel() and interrupt() reach the work at once, through two means:
//
//  - a channel, which the one piece of work running with the token registers
//    while it runs:
//     - a sandbox's exec: cancel() kills its whole process tree and the
//       result says kCancelled; interrupt() sends SIGINT to its main process
//       and lets it go on (a REPL is told to stop what it is doing without
//       losing its state);
//     - an engine's HTTP call: cancel() closes its connection and the call
//       returns kCancelled; it has nothing to interrupt.
//    One piece of work at a time per token uses the channel.
//  - callbacks (on_cancel/unsubscribe), any number: an MCP session cancels
//    a request's token (notifications/cancelled, the client went away) and
//    every handler part that subscribed is told (signal a child, wake a
//    condition variable, cancel a nested token).
//
// Also keep(): the token outlives the reply, so it can carry a request's
// reservations until the answer has been sent.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace sandcastle {

class CancelToken {
 public:
  // What a channel is asked to deliver (also the byte the native backend
  // sends its supervisor).
  enum class Signal : char { kCancel = 'c', kInterrupt = 'i' };

  CancelToken() = default;
  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;

  // Sticky: work started later with this token is cancelled at once, and a
  // callback registered later runs at once. Runs every registered callback
  // once (on this thread), then tells the running work's channel. A second
  // cancel() does nothing.
  void cancel();
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

  // False when no work runs with this token, or its channel could not
  // deliver (or has nothing to interrupt). Not sticky, runs no callbacks.
  bool interrupt() const {
    std::lock_guard l(channel_mu_);
    return channel_ && channel_(Signal::kInterrupt);
  }

  // For the work: how to reach it while it runs; null when it ends. Once
  // this returns (with null) the old channel is not running nor called
  // again, so it may capture the work's stack. Set, then check cancelled():
  // a cancel from before the channel existed is not lost. The channel is
  // not the token's state, hence const (work receives a const token).
  void set_channel(std::function<bool(Signal)> fn) const {
    std::lock_guard l(channel_mu_);
    channel_ = std::move(fn);
  }

  // Callbacks run on the cancelling thread: keep them short (signal a child,
  // wake a condition variable). Returns an id for unsubscribe(); 0 when the
  // token was already cancelled and `fn` has run here, at once.
  size_t on_cancel(std::function<void()> fn);
  // Removes a callback; once it returns, that callback is not running and
  // never will, so it may capture the caller's stack.
  void unsubscribe(size_t id);

  // Keeps `obj` alive as long as the token: the token outlives the reply,
  // so a handler's reservation (a transfer budget lease) also covers the
  // copies made while its result is serialized and sent.
  void keep(std::shared_ptr<void> obj) {
    std::lock_guard l(mu_);
    kept_.push_back(std::move(obj));
  }

 private:
  std::atomic<bool> cancelled_{false};
  // Two locks: a channel is called under channel_mu_ (so clearing it waits
  // for a delivery in progress), callbacks outside mu_ (so they may
  // unsubscribe themselves); neither is held while taking the other.
  mutable std::mutex channel_mu_;
  mutable std::function<bool(Signal)> channel_;
  std::mutex mu_;
  std::condition_variable done_cv_;
  bool running_ = false;  // cancel() is running callbacks (outside mu_)
  std::thread::id runner_;
  std::vector<std::pair<size_t, std::function<void()>>> callbacks_;
  std::vector<std::shared_ptr<void>> kept_;
  size_t next_id_ = 1;
};

}  // namespace sandcastle
