// CancelToken: how one thread ends (or interrupts) work another thread is
// doing. The work registers a channel while it runs; cancel() and interrupt()
// go through it at once, so nothing waits by polling the token (a server
// holds thousands of idle ones).
//
// Two kinds of work use it today:
//  - a sandbox's exec (sandbox::CancelToken): cancel() kills its whole
//    process tree and the result says kCancelled; interrupt() sends SIGINT
//    to its main process and lets it go on (a REPL is told to stop what it
//    is doing without losing its state);
//  - an engine's HTTP call: cancel() closes its connection and the call
//    returns kCancelled; it has nothing to interrupt.
// One piece of work at a time per token.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <utility>

namespace sandcastle {

class CancelToken {
 public:
  // What a channel is asked to deliver (also the byte the native backend
  // sends its supervisor).
  enum class Signal : char { kCancel = 'c', kInterrupt = 'i' };

  // Sticky: work started later with this token is cancelled at once.
  void cancel() {
    cancelled_.store(true, std::memory_order_release);
    std::lock_guard l(mu_);
    if (channel_) (void)channel_(Signal::kCancel);
  }
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

  // False when no work runs with this token, or its channel could not
  // deliver (or has nothing to interrupt).
  bool interrupt() const {
    std::lock_guard l(mu_);
    return channel_ && channel_(Signal::kInterrupt);
  }

  // For the work: how to reach it while it runs; null when it ends. Once
  // this returns (with null) the old channel is not running nor called
  // again, so it may capture the work's stack. Set, then check cancelled():
  // a cancel from before the channel existed is not lost. The channel is
  // not the token's state, hence const (work receives a const token).
  void set_channel(std::function<bool(Signal)> fn) const {
    std::lock_guard l(mu_);
    channel_ = std::move(fn);
  }

 private:
  std::atomic<bool> cancelled_{false};
  mutable std::mutex mu_;
  mutable std::function<bool(Signal)> channel_;
};

}  // namespace sandcastle
