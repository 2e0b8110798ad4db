#include "service/ended_sandboxes.h"

#include <gtest/gtest.h>

namespace sandcastle::service {
namespace {

TEST(EndedSandboxes, RemembersReasonsAndForgetsTheOldestPastCapacity) {
  EndedSandboxes ended(3);
  EXPECT_FALSE(ended.reason("sb-1").has_value());
  for (int i = 1; i <= 5; ++i)
    ended.remember("sb-" + std::to_string(i), "reason " + std::to_string(i));
  EXPECT_EQ(ended.size(), 3u);
  EXPECT_FALSE(ended.reason("sb-1").has_value());
  EXPECT_FALSE(ended.reason("sb-2").has_value());
  EXPECT_EQ(ended.reason("sb-5"), "reason 5");
  ended.remember("sb-3", "again");  // replaced in place, not duplicated
  EXPECT_EQ(ended.size(), 3u);
  EXPECT_EQ(ended.reason("sb-3"), "again");
  ended.remember("sb-6", "six");
  EXPECT_FALSE(ended.reason("sb-3").has_value());  // still the oldest
  EXPECT_EQ(ended.size(), 3u);
}

TEST(EndedSandboxes, ZeroCapacityRemembersNothing) {
  EndedSandboxes ended(0);
  ended.remember("sb-1", "x");
  EXPECT_EQ(ended.size(), 0u);
}

}  // namespace
}  // namespace sandcastle::service
