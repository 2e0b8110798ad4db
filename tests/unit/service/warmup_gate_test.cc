// WarmupGate: at most N holders; an urgent waiter goes ahead without a slot;
// a leave lets the next waiter in.
#include "service/warmup_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace sandcastle::service {
namespace {

using namespace std::chrono_literals;

TEST(WarmupGate, AdmitsUpToItsSlotsThenWaits) {
  WarmupGate gate(2);
  std::atomic<bool> no{false};
  EXPECT_TRUE(gate.enter(no));
  EXPECT_TRUE(gate.enter(no));
  EXPECT_EQ(gate.free_slots(), 0u);
  std::atomic<bool> entered{false};
  std::thread third([&] {
    EXPECT_TRUE(gate.enter(no));
    entered = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(entered) << "a third warm-up ran beside two";
  gate.leave();
  third.join();
  EXPECT_TRUE(entered);
  EXPECT_EQ(gate.free_slots(), 0u);
  gate.leave();
  gate.leave();
  EXPECT_EQ(gate.free_slots(), 2u);
}

TEST(WarmupGate, UrgentWaiterGoesAheadWithoutASlot) {
  WarmupGate gate(1);
  std::atomic<bool> no{false}, urgent{false};
  ASSERT_TRUE(gate.enter(no));
  std::atomic<int> result{-1};
  std::thread waiter([&] { result = gate.enter(urgent) ? 1 : 0; });
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(result, -1);
  urgent = true;
  gate.wake();
  waiter.join();
  EXPECT_EQ(result, 0);  // went ahead, holds nothing
  EXPECT_EQ(gate.free_slots(), 0u);
  gate.leave();
  EXPECT_EQ(gate.free_slots(), 1u);
}

TEST(WarmupGate, ZeroSlotsMeansOne) {
  WarmupGate gate(0);
  EXPECT_EQ(gate.free_slots(), 1u);
}

}  // namespace
}  // namespace sandcastle::service
