#include "net/session.h"

#include <gtest/gtest.h>
#include <spdlog/fmt/fmt.h>

#include <string>

#include "unit/net/net_test_util.h"

namespace sandcastle::net {
namespace {

using namespace test_util;  // ip(): an address literal

TEST(NetSession, ANewPolicyClosesOnlyTheTunnelsItNoLongerAllows) {
  Session s("sb1", test_util::allow_policy({"a.test:443", "b.test:443"}));
  int closed_a = 0, closed_b = 0;
  s.tunnel_opened({.name = "a.test", .addr = ip("198.51.100.2"), .port = 443}, [&] { ++closed_a; });
  s.tunnel_opened({.name = "b.test", .addr = ip("198.51.100.3"), .port = 443}, [&] { ++closed_b; });
  EXPECT_EQ(s.stats().open, 2U);

  EXPECT_EQ(s.set_policy(test_util::allow_policy({"b.test:443"}), {}), 1U);
  EXPECT_EQ(closed_a, 1);
  EXPECT_EQ(closed_b, 0);
  EXPECT_EQ(s.generation(), 2U);
  EXPECT_EQ(s.stats().open, 1U);
  auto ring = s.last_refusals();
  ASSERT_EQ(ring.size(), 1U);
  EXPECT_EQ(ring[0].reason, Reason::kRuleRemoved);
  EXPECT_EQ(ring[0].target, "a.test");
  EXPECT_EQ(ring[0].port, 443);
}

TEST(NetSession, DecideCountsAndRecordsRefusals) {
  Session s("sb1", test_util::allow_policy({"a.test:443"}));
  EXPECT_TRUE(s.decide(Via::kConnect, "a.test:443", "a.test", ip("198.51.100.2"), 443, {}).allowed);
  auto refused = s.decide(Via::kConnect, "a.test:22", "a.test", ip("198.51.100.2"), 22, {});
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.reason, Reason::kPortNotAllowed);
  auto stats = s.stats();
  EXPECT_EQ(stats.allowed, 1U);
  EXPECT_EQ(stats.refused, 1U);
  EXPECT_EQ(stats.refused_by_reason[Reason::kPortNotAllowed], 1U);
}

TEST(NetSession, TheRefusalRingKeepsTheLastTwentyAndCleansTargets) {
  Session s("sb1", test_util::allow_policy({}));
  for (int i = 0; i < 25; ++i) {
    const std::string target = fmt::format("n{}\x01\n", i);
    s.record_refusal(Via::kDns, target, "", 53, Reason::kDnsRefused);
  }
  auto ring = s.last_refusals();
  ASSERT_EQ(ring.size(), kRefusalRing);
  EXPECT_EQ(ring.front().target, "n5??");
  EXPECT_EQ(ring.back().target, "n24??");
  EXPECT_EQ(s.stats().refused, 25U);
}

TEST(NetSession, TheDnsMapIsBoundedAndForgetsNothingLive) {
  Session s("sb1", test_util::allow_policy({}));
  s.remember(ip("198.51.100.2"), "a.test", std::chrono::seconds(30));
  EXPECT_EQ(s.name_for(ip("198.51.100.2")), "a.test");
  EXPECT_EQ(s.name_for(ip("198.51.100.3")), std::nullopt);
  for (std::size_t i = 0; i < kDnsMapMax + 10; ++i) {
    auto a = IpAddr::v4({10, static_cast<std::uint8_t>(i >> 16), static_cast<std::uint8_t>(i >> 8),
                         static_cast<std::uint8_t>(i)});
    s.remember(a, "x.test", std::chrono::seconds(300));
  }
  // The shortest-lived entry went first, then the oldest ones.
  EXPECT_EQ(s.name_for(ip("198.51.100.2")), std::nullopt);
  EXPECT_EQ(s.name_for(ip("10.0.0.5")), std::nullopt);
  EXPECT_EQ(s.name_for(ip("10.0.0.10")), "x.test");
  EXPECT_EQ(s.name_for(ip("10.0.16.9")), "x.test");
}

}  // namespace
}  // namespace sandcastle::net
