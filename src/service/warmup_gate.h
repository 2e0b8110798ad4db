// Kernel warm-ups (the interpreter a sandbox starts when it is created,
// before any cell) run a few at a time: a burst of creates must not start
// hundreds of interpreters at once, which starves the server's own requests
// for seconds. A warm-up that somebody waits for (a cell has arrived) goes
// ahead at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>

namespace sandcastle::service {

class WarmupGate {
 public:
  explicit WarmupGate(unsigned slots) : free_(slots == 0 ? 1 : slots) {}
  // One slot per hardware thread, for the whole server.
  static WarmupGate& shared();

  // Blocks until a slot is free (then takes it and returns true) or
  // `urgent` turns true (returns false: nothing to leave).
  bool enter(const std::atomic<bool>& urgent);
  void leave();
  // Some `urgent` flag was set: its waiter re-checks.
  void wake();
  unsigned free_slots();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  unsigned free_;
};

}  // namespace sandcastle::service
