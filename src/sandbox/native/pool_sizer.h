// How many warm sandboxes the native backend keeps ready, from how creates
// arrive: as many as came close together lately (a decayed count over about
// `window`), held whole for `hold` after the burst so the next burst finds
// the pool grown, then fading (time constant `hold`) back to the floor.
// A steady stream needs few ready (each is made while the next is awaited);
// a burst of N at once needs N.
//
//   PoolSizer sizer(policy);
//   sizer.on_create(now);                       // every create, pooled or not
//   std::size_t n = sizer.target(now, live);    // what the refill aims for
//
// Pure arithmetic on the time points it is given (no clock of its own), so
// tests drive it with made-up times.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace sandcastle::sandbox::native {

struct PoolPolicy {
  // Kept ready even when idle (--pool-size). 0 turns the pool off: no
  // sandbox and no init is made ahead of demand, however busy the server.
  std::size_t min = 2;
  // Never more than this many ready (--pool-max).
  std::size_t max = 64;
  // Nor more than this much memory held by ready sandboxes (--pool-memory-mb),
  // each counted at kPooledSandboxBytes.
  std::uint64_t memory_budget_bytes = 64ull << 20;
  // The server's cap on live sandboxes: ready + live never exceed it
  // (0 = no cap of its own).
  std::size_t server_cap = 0;
  // Creates closer together than this count as one burst.
  std::chrono::milliseconds window{100};
  // How long a burst's size is kept whole, and then the time constant of
  // its decay.
  std::chrono::milliseconds hold{5000};
};

// What one ready sandbox is counted at: measured 0.61 MiB (0.46 MiB of it
// kernel memory: the namespaces, the netns above all) as the memory-cgroup
// usage of a process holding 32 more (`sandbox_bench pool-hold`, Debian 12,
// kernel 6.18), rounded up.
constexpr std::uint64_t kPooledSandboxBytes = 1ull << 20;
// And one whose exec slot runs an AheadCommand, this much more: measured
// 3.9 MiB more memory-cgroup usage for the Python one (service/ahead.h),
// nearly all its anonymous pages, rounded up.
constexpr std::uint64_t kAheadCommandBytes = 4ull << 20;

// What the pool is doing, for tests, the bench and diagnostics.
struct PoolStats {
  std::size_t ready = 0;                        // made and waiting
  std::size_t target = 0;                       // what the refill aims for now
  double rate = 0;                              // creates per second, decayed to now
  std::uint64_t made = 0, taken = 0, shed = 0;  // since start; shed: destroyed unused
  std::size_t peak_ready = 0;                   // the most ever ready at once
  std::size_t ahead = 0;                        // ready ones running an AheadCommand
};

class PoolSizer {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  explicit PoolSizer(PoolPolicy policy) : policy_(policy) {}

  // A create arrived at `now` (times must not go backwards).
  void on_create(TimePoint now);
  // Creates per second lately (the burst count over its window), at `now`.
  double rate(TimePoint now) const;
  // The remembered burst size at `now`.
  double peak(TimePoint now) const;
  // Ready sandboxes to keep at `now` while `live` are handed out: the
  // remembered burst size, at least min, at most the budget and the cap allow.
  std::size_t target(TimePoint now, std::size_t live) const;
  // The most the pool may ever hold (max and memory budget; before the cap).
  std::size_t ceiling() const;
  const PoolPolicy& policy() const { return policy_; }

 private:
  PoolPolicy policy_;
  double burst_ = 0;  // creates within about a window, as of last_
  double peak_ = 0;   // the largest burst lately, reached at peak_at_
  TimePoint peak_at_{};
  TimePoint last_{};
  double held_peak(TimePoint now) const;
};

}  // namespace sandcastle::sandbox::native
