#include "sandbox/native/pool_sizer.h"

#include <algorithm>
#include <cmath>

namespace sandcastle::sandbox::native {

namespace {
double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}
}  // namespace

double PoolSizer::rate(TimePoint now) const {
  if (rate_ == 0) return 0;
  const double dt = std::max(0.0, seconds(now - last_));
  return rate_ * std::exp(-dt / seconds(policy_.tau));
}

void PoolSizer::on_create(TimePoint now) {
  // An exponentially decayed count of arrivals, divided by tau: each create
  // adds 1/tau per second, fading with time constant tau.
  rate_ = rate(now) + 1.0 / seconds(policy_.tau);
  last_ = now;
}

std::size_t PoolSizer::ceiling() const {
  if (policy_.min == 0) return 0;
  const std::uint64_t by_memory = policy_.memory_budget_bytes / kPooledSandboxBytes;
  return static_cast<std::size_t>(
      std::max<std::uint64_t>(policy_.min, std::min<std::uint64_t>(policy_.max, by_memory)));
}

std::size_t PoolSizer::target(TimePoint now, std::size_t live) const {
  if (policy_.min == 0) return 0;
  const double want = std::ceil(rate(now) * seconds(policy_.tau) - 1e-9);
  std::size_t n =
      std::max<std::size_t>(policy_.min, want > 1e6 ? 1000000 : static_cast<std::size_t>(want));
  n = std::min(n, ceiling());
  if (policy_.server_cap > 0)
    n = std::min(n, policy_.server_cap > live ? policy_.server_cap - live : 0);
  return n;
}

}  // namespace sandcastle::sandbox::native
