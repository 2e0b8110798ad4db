// The warm pool's size from the arrival rate, on made-up time points: it
// grows to a burst's size, stays small for a steady stream, shrinks back to
// its floor when creates stop, and stays
// within its maximum, its memory budget and the server's cap.
#include "sandbox/native/pool_sizer.h"

#include <gtest/gtest.h>

namespace sandcastle::sandbox::native {
namespace {

using namespace std::chrono_literals;
using TimePoint = PoolSizer::TimePoint;

const TimePoint kT0 = TimePoint{} + 1000s;

PoolPolicy policy(std::size_t min, std::size_t max) {
  PoolPolicy p;
  p.min = min;
  p.max = max;
  p.memory_budget_bytes = 1ull << 30;
  return p;
}

TEST(PoolSizer, IdleServerKeepsItsFloor) {
  PoolSizer s(policy(2, 32));
  EXPECT_EQ(s.target(kT0, 0), 2u);
  EXPECT_EQ(s.rate(kT0), 0.0);
}

TEST(PoolSizer, BurstGrowsThePoolToTheBurstSize) {
  PoolSizer s(policy(2, 32));
  for (int i = 0; i < 20; ++i) s.on_create(kT0);
  EXPECT_EQ(s.target(kT0, 0), 20u);
  // Spread over a few ms it is still one burst (a little decayed).
  PoolSizer spread(policy(2, 32));
  for (int i = 0; i < 20; ++i) spread.on_create(kT0 + i * 100us);
  EXPECT_GE(spread.target(kT0 + 2ms, 0), 19u);
  EXPECT_LE(spread.target(kT0 + 2ms, 0), 20u);
  // A bigger burst stops at the maximum.
  for (int i = 0; i < 200; ++i) s.on_create(kT0 + 1ms);
  EXPECT_EQ(s.target(kT0 + 1ms, 0), 32u);
}

TEST(PoolSizer, ShrinksToTheFloorWhenCreatesStop) {
  PoolSizer s(policy(2, 32));
  for (int i = 0; i < 30; ++i) s.on_create(kT0);
  EXPECT_EQ(s.target(kT0, 0), 30u);
  // Kept whole for a hold (the next burst finds the pool grown)...
  EXPECT_EQ(s.target(kT0 + 1s, 0), 30u);
  EXPECT_EQ(s.target(kT0 + 4900ms, 0), 30u);
  // ...then fading...
  const std::size_t later = s.target(kT0 + 6s, 0);
  EXPECT_LT(later, 30u);
  EXPECT_GE(later, 20u);
  // ...and forgotten after a few holds.
  EXPECT_EQ(s.target(kT0 + 30s, 0), 2u);
}

// Bursts a little apart keep the pool at their size; a much smaller one
// after them neither shrinks it before its hold is over nor holds it again.
TEST(PoolSizer, RepeatedBurstsKeepThePoolWhole) {
  PoolSizer s(policy(2, 64));
  TimePoint t = kT0;
  for (int round = 0; round < 5; ++round, t += 2s)
    for (int i = 0; i < 50; ++i) s.on_create(t + i * 100us);
  EXPECT_GE(s.target(t, 0), 49u);
  // One a little smaller (40, its arrival more spread) holds it again:
  // kept whole for a hold from now.
  for (int i = 0; i < 40; ++i) s.on_create(t + i * 100us);
  EXPECT_GE(s.target(t + 4s, 0), 49u);
  // A small one does not: held from the burst of 40 (at t), fading once
  // its hold is over.
  t += 2s;
  for (int i = 0; i < 10; ++i) s.on_create(t + i * 100us);
  EXPECT_GE(s.target(t + 2s, 0), 49u);
  EXPECT_LT(s.target(t + 5s, 0), 49u);
}

// A steady load after a burst lets the burst's size fade, down to at most
// 4/3 of its own size (where it holds the pool again), not to the floor.
TEST(PoolSizer, SteadyLoadSettlesNearItsOwnSize) {
  PoolSizer s(policy(1, 64));
  TimePoint t = kT0;
  for (int i = 0; i < 30; ++i) s.on_create(t + i * 100us);  // one burst of 30
  // Then bursts of 10 every 3 s (within the hold) for a minute.
  for (int round = 0; round < 20; ++round) {
    t += 3s;
    for (int i = 0; i < 10; ++i) s.on_create(t + i * 100us);
  }
  EXPECT_LE(s.target(t, 0), 14u);
  EXPECT_GE(s.target(t, 0), 10u);
}

TEST(PoolSizer, SteadyTrickleKeepsTheFloorOnly) {
  PoolSizer s(policy(2, 32));
  TimePoint t = kT0;
  for (int i = 0; i < 50; ++i, t += 5s) s.on_create(t);
  EXPECT_EQ(s.target(t, 0), 2u);
}

// Fifty a second, one every 20 ms: each is made while the next is awaited,
// so a handful ready is enough (not a second's worth).
TEST(PoolSizer, SteadyStreamKeepsASmallPool) {
  PoolSizer s(policy(2, 32));
  TimePoint t = kT0;
  for (int i = 0; i < 200; ++i, t += 20ms) s.on_create(t);
  EXPECT_GE(s.target(t, 0), 5u);
  EXPECT_LE(s.target(t, 0), 7u);
  EXPECT_NEAR(s.rate(t - 20ms), 50.0, 8.0);
}

TEST(PoolSizer, MemoryBudgetBoundsTheCeiling) {
  PoolPolicy p = policy(1, 100);
  p.memory_budget_bytes = 5 * kPooledSandboxBytes;
  PoolSizer s(p);
  EXPECT_EQ(s.ceiling(), 5u);
  for (int i = 0; i < 500; ++i) s.on_create(kT0 + i * 10us);
  EXPECT_EQ(s.target(kT0 + 5ms, 0), 5u);
}

TEST(PoolSizer, NeverAboveTheServerCap) {
  PoolPolicy p = policy(4, 32);
  p.server_cap = 10;
  PoolSizer s(p);
  for (int i = 0; i < 100; ++i) s.on_create(kT0 + i * 10us);
  const TimePoint t = kT0 + 1ms;
  EXPECT_EQ(s.target(t, 0), 10u);
  EXPECT_EQ(s.target(t, 7), 3u);
  // Even the floor gives way to the cap: a full server pools nothing.
  EXPECT_EQ(s.target(t + 60s, 8), 2u);
  EXPECT_EQ(s.target(t, 10), 0u);
  EXPECT_EQ(s.target(t, 12), 0u);
}

TEST(PoolSizer, ZeroFloorMeansNoPoolAtAll) {
  PoolSizer s(policy(0, 32));
  for (int i = 0; i < 100; ++i) s.on_create(kT0 + i * 10us);
  EXPECT_EQ(s.target(kT0 + 1ms, 0), 0u);
  EXPECT_EQ(s.ceiling(), 0u);
}

}  // namespace
}  // namespace sandcastle::sandbox::native
