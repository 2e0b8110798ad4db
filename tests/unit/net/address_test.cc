#include "net/address.h"

#include <gtest/gtest.h>

#include "unit/net/net_test_util.h"

namespace sandcastle::net {
namespace {

using namespace test_util;  // ip(): an address literal

TEST(IpAddr, ParsesOnlyWhatInetPtonTakes) {
  EXPECT_EQ(ip("198.51.100.2").to_string(), "198.51.100.2");
  EXPECT_EQ(ip("2001:DB8::1").to_string(), "2001:db8::1");
  // inet_aton shorthand is a name here, never 127.0.0.1.
  for (const char* name : {"2130706433", "0x7f.1", "127.1", "0177.0.0.1", "localhost", "", "[::1]",
                           "1.2.3.4 ", "1.2.3.4.5"})
    EXPECT_FALSE(IpAddr::parse(name).has_value()) << name;
}

TEST(IpAddr, FoldsMappedIpv6ToIpv4) {
  const IpAddr mapped = ip("::ffff:127.0.0.1");
  EXPECT_TRUE(mapped.is_v4());
  EXPECT_EQ(mapped, ip("127.0.0.1"));
  EXPECT_EQ(mapped.bytes().size(), 4u);
  // Only ::ffff:0:0/96 is mapped; the old compatible form is plain IPv6.
  EXPECT_FALSE(ip("::127.0.0.1").is_v4());
}

TEST(Cidr, ContainmentByPrefix) {
  auto c = Cidr::parse("10.0.0.0/8");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->contains(ip("10.255.1.2")));
  EXPECT_FALSE(c->contains(ip("11.0.0.1")));
  EXPECT_FALSE(c->contains(ip("::ffff:11.0.0.1")));
  EXPECT_TRUE(c->contains(ip("::ffff:10.0.0.1")));
  auto v6 = Cidr::parse("2001:db8::/32");
  ASSERT_TRUE(v6.ok());
  EXPECT_TRUE(v6->contains(ip("2001:db8:ffff::1")));
  EXPECT_FALSE(v6->contains(ip("2001:db9::1")));
  EXPECT_FALSE(v6->contains(ip("10.0.0.1")));
  auto odd = Cidr::parse("198.51.100.0/25");
  ASSERT_TRUE(odd.ok());
  EXPECT_TRUE(odd->contains(ip("198.51.100.127")));
  EXPECT_FALSE(odd->contains(ip("198.51.100.128")));
  auto all = Cidr::parse("0.0.0.0/0");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->contains(ip("203.0.113.9")));
  EXPECT_TRUE(all->covers(*odd));
  EXPECT_FALSE(odd->covers(*all));
}

TEST(Cidr, MappedPrefixFoldsToIpv4) {
  auto c = Cidr::parse("::ffff:10.0.0.0/104");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->to_string(), "10.0.0.0/8");
  EXPECT_EQ(Cidr::parse("::ffff:10.0.0.0/64").error().code, ErrorCode::kInvalidArgument);
}

TEST(Cidr, RefusesBadPrefixes) {
  EXPECT_EQ(Cidr::parse("10.0.0.1/8").error().context,
            "address has bits set past the prefix (did you mean 10.0.0.0/8?)");
  EXPECT_EQ(Cidr::parse("10.0.0.0/33").error().context, "prefix length past 32");
  EXPECT_EQ(Cidr::parse("2001:db8::/129").error().context, "prefix length past 128");
  EXPECT_EQ(Cidr::parse("10.0.0.0/").error().context, "bad prefix length");
  EXPECT_EQ(Cidr::parse("10.0.0.0/-1").error().context, "bad prefix length");
  EXPECT_EQ(Cidr::parse("10.0/8").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(Cidr::parse("1.2.3.4")->prefix(), 32u);
  EXPECT_EQ(Cidr::parse("::1")->prefix(), 128u);
}

TEST(BuiltinRefusal, CoversLoopbackPrivateAndMetadata) {
  for (const char* a : {"0.0.0.0",
                        "127.0.0.1",
                        "127.255.255.254",
                        "10.1.2.3",
                        "172.16.0.1",
                        "172.31.255.255",
                        "192.168.1.1",
                        "100.64.0.1",
                        "169.254.169.254",
                        "224.0.0.1",
                        "240.0.0.1",
                        "255.255.255.255",
                        "::",
                        "::1",
                        "fe80::1",
                        "fc00::1",
                        "fd12::1",
                        "ff02::1",
                        "fd00:ec2::254",
                        "::ffff:127.0.0.1",
                        "::ffff:169.254.169.254"})
    EXPECT_TRUE(builtin_refused(ip(a))) << a;
  for (const char* a : {"198.51.100.2", "203.0.113.1", "172.32.0.1", "100.128.0.1", "8.8.8.8",
                        "2001:db8::1", "2001:4860::8888"})
    EXPECT_FALSE(builtin_refused(ip(a))) << a;
  // IPv6 that carries an IPv4 address: NAT64, IPv4-compatible, 6to4.
  for (const char* a : {"64:ff9b::a00:5", "64:ff9b:1::1", "::2", "::a00:5", "2002:a00:5::1"})
    EXPECT_TRUE(builtin_refused(ip(a))) << a;
  EXPECT_EQ(builtin_refusal(ip("169.254.169.254"))->to_string(), "169.254.0.0/16");
}

TEST(HostAddresses, IncludeLoopback) {
  auto list = host_addresses();
  ASSERT_TRUE(list.ok()) << list.error().message();
  EXPECT_NE(std::find(list->begin(), list->end(), ip("127.0.0.1")), list->end());
}

}  // namespace
}  // namespace sandcastle::net
