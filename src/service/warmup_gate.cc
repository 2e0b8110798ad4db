#include "service/warmup_gate.h"

#include <thread>

namespace sandcastle::service {

WarmupGate& WarmupGate::shared() {
  static WarmupGate gate(std::thread::hardware_concurrency());
  return gate;
}

bool WarmupGate::enter(const std::atomic<bool>& urgent) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return free_ > 0 || urgent.load(); });
  if (free_ == 0) return false;
  --free_;
  return true;
}

void WarmupGate::leave() {
  {
    std::lock_guard lock(mu_);
    ++free_;
  }
  cv_.notify_all();
}

void WarmupGate::wake() {
  // Taking the lock orders the flag's store before the waiters' re-check.
  { std::lock_guard lock(mu_); }
  cv_.notify_all();
}

unsigned WarmupGate::free_slots() {
  std::lock_guard lock(mu_);
  return free_;
}

}  // namespace sandcastle::service
