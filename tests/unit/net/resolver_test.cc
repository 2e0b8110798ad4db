#include "net/resolver.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <optional>

#include "unit/net/net_test_servers.h"
#include "unit/net/net_test_util.h"

namespace sandcastle::net {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace)

using namespace test_util;  // ip(): an address literal

// Runs one lookup to completion on a loop of its own.
Result<Resolved> lookup(Resolver& r, boost::asio::io_context& io, const std::string& name,
                        Resolver::Want want) {
  std::optional<Result<Resolved>> out;
  r.resolve(name, want, [&](Result<Resolved> got) { out.emplace(std::move(got)); });
  io.restart();
  while (!out && io.run_one() > 0) {
  }
  if (!out) return Error::make(ErrorCode::kInternal, "no answer");
  return std::move(*out);
}

TEST(NetResolver, AsksTheConfiguredServerAndCaches) {
  DnsResponder dns({{"a.test", {ip("198.51.100.2"), ip("198.51.100.3")}}});
  boost::asio::io_context io;
  auto r = Resolver::make(io, dns.address());
  ASSERT_TRUE(r.ok());
  auto got = lookup(**r, io, "a.test", Resolver::Want::kV4);
  ASSERT_TRUE(got.ok()) << got.error().message();
  EXPECT_EQ(got->addrs, (std::vector<IpAddr>{ip("198.51.100.2"), ip("198.51.100.3")}));
  EXPECT_EQ(got->ttl, std::chrono::seconds(300));
  auto again = lookup(**r, io, "a.test", Resolver::Want::kV4);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->addrs.size(), 2U);
  EXPECT_EQ(dns.asked("a.test"), 1);  // the second came from the cache
}

TEST(NetResolver, BothFamiliesAndMissingNames) {
  DnsResponder dns({{"a.test", {ip("198.51.100.2")}}});
  boost::asio::io_context io;
  auto r = Resolver::make(io, dns.address());
  ASSERT_TRUE(r.ok());
  auto both = lookup(**r, io, "a.test", Resolver::Want::kBoth);
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->addrs, std::vector<IpAddr>{ip("198.51.100.2")});  // AAAA: NODATA
  auto none = lookup(**r, io, "missing.test", Resolver::Want::kV4);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->addrs.empty());
}

TEST(NetResolver, TruncatedAnswersAreAskedAgainOverTcp) {
  DnsResponder dns({{"big.test", {ip("198.51.100.7")}}}, {"big.test"});
  boost::asio::io_context io;
  auto r = Resolver::make(io, dns.address());
  ASSERT_TRUE(r.ok());
  auto got = lookup(**r, io, "big.test", Resolver::Want::kV4);
  ASSERT_TRUE(got.ok()) << got.error().message();
  EXPECT_EQ(got->addrs, std::vector<IpAddr>{ip("198.51.100.7")});
  EXPECT_EQ(dns.asked("big.test"), 2);  // UDP, then TCP
}

TEST(NetResolver, ASilentServerTimesOutAfterTwoTries) {
  DnsResponder dns({{"a.test", {ip("198.51.100.2")}}}, {}, /*silent=*/true);
  boost::asio::io_context io;
  auto r = Resolver::make(io, dns.address());
  ASSERT_TRUE(r.ok());
  const auto start = std::chrono::steady_clock::now();
  auto got = lookup(**r, io, "a.test", Resolver::Want::kV4);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, ErrorCode::kTimeout);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 2 * kResolverTimeout);
  EXPECT_EQ(dns.asked("a.test"), 2);
}

TEST(NetResolver, TheSettingMustBeAnAddressAndPort) {
  boost::asio::io_context io;
  EXPECT_TRUE(Resolver::make(io, "").ok());
  EXPECT_TRUE(Resolver::make(io, "[::1]:5353").ok());
  auto bad = Resolver::make(io, "dns.example:53");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace sandcastle::net
