#include "common/byte_budget.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

// GCC 12 at -O1 (the TSan build) sees std::optional<Lease>'s payload as
// maybe uninitialized where the tests move or reset it after checking it:
// a known false positive of optional with a user-defined move.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace sandcastle {
namespace {

using namespace std::chrono_literals;

TEST(ByteBudget, ReservesUpToTheTotalAndGivesBackOnRelease) {
  ByteBudget b(100);
  auto a = b.reserve(60, 0ms);
  ASSERT_TRUE(a);
  EXPECT_EQ(b.used(), 60u);
  EXPECT_FALSE(b.reserve(41, 0ms));  // does not fit now
  EXPECT_FALSE(b.reserve(101, 1h));  // never fits: refused without waiting
  {
    auto c = b.reserve(40, 0ms);
    ASSERT_TRUE(c);
    EXPECT_EQ(b.used(), 100u);
  }
  EXPECT_EQ(b.used(), 60u);
  a.reset();
  EXPECT_EQ(b.used(), 0u);
}

TEST(ByteBudget, AWaiterGetsItsBytesWhenAnotherLeaseEnds) {
  ByteBudget b(10);
  auto first = b.reserve(10, 0ms);
  ASSERT_TRUE(first);
  std::promise<void> waiting;
  auto got = std::async(std::launch::async, [&] {
    waiting.set_value();
    return b.reserve(5, 1h).has_value();
  });
  waiting.get_future().wait();
  first.reset();  // wakes the waiter
  EXPECT_TRUE(got.get());
}

TEST(ByteBudget, LeasesMoveWithoutDoubleRelease) {
  ByteBudget b(10);
  auto a = b.reserve(7, 0ms);
  ASSERT_TRUE(a);
  ByteBudget::Lease moved = std::move(*a);
  a.reset();
  EXPECT_EQ(b.used(), 7u);
  EXPECT_EQ(moved.bytes(), 7u);
  moved = ByteBudget::Lease{};
  EXPECT_EQ(b.used(), 0u);
}

}  // namespace
}  // namespace sandcastle
