// The full-mode firewall's rendering (net/nft.h), compared with a golden
// ruleset that `nft -c -f` accepts (checked by hand with nftables 1.0.6; the
// net_tests load the same rendering into a namespace).
#include "net/nft.h"

#include <gtest/gtest.h>

namespace sandcastle::net::nft {
namespace {

std::shared_ptr<const Policy> policy(const std::vector<std::string>& allow,
                                     const std::vector<std::string>& deny) {
  auto p = make_policy(Mode::kFull, allow, deny);
  EXPECT_TRUE(p) << p.error().message();
  return p ? *p : std::make_shared<const Policy>();
}

// Allow rules lift a refusal only from inside the refused block (10.1/16,
// the host's 192.0.2.2 exactly); 0.0.0.0/0, 192.0.2.0/24 and test-net rules
// render nothing (full mode allows them anyway). Deny comes first, name
// rules are left to the DNS stub, and 255.255.255.255 and fd00:ec2::254 sit
// inside larger blocks, so the interval sets leave them out.
TEST(NftTest, RendersTheGoldenRuleset) {
  auto p =
      policy({"198.51.100.0/24:*", "10.1.0.0/16:443", "192.0.2.2:8080", "192.0.2.0/24",
              "0.0.0.0/0:*", "allowed.test"},
             {"198.51.100.3", "203.0.113.0/24:22,8000-8100", "[2001:db8::]/32:443", "evil.test"});
  std::vector<IpAddr> host{*IpAddr::parse("192.0.2.2"), *IpAddr::parse("127.0.0.1"),
                           *IpAddr::parse("2001:db8:5::1")};
  const char* golden = R"nft(table inet sandcastle
delete table inet sandcastle
table inet sandcastle {
	set refused_v4 {
		type ipv4_addr
		flags interval
		elements = { 0.0.0.0/8, 127.0.0.0/8, 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10, 169.254.0.0/16, 224.0.0.0/4, 240.0.0.0/4, 192.0.2.2 }
	}
	set refused_v6 {
		type ipv6_addr
		flags interval
		elements = { fe80::/10, fc00::/7, ff00::/8, 64:ff9b::/96, 64:ff9b:1::/48, ::/96, 2002::/16, 2001:db8:5::1 }
	}
	chain output {
		type filter hook output priority filter; policy accept;
		oif "lo" accept
		# deny 198.51.100.3:*
		ip daddr 198.51.100.3 meta l4proto tcp counter reject with tcp reset
		ip daddr 198.51.100.3 counter reject with icmpx port-unreachable
		# deny 203.0.113.0/24:22,8000-8100
		ip daddr 203.0.113.0/24 tcp dport { 22, 8000-8100 } counter reject with tcp reset
		ip daddr 203.0.113.0/24 udp dport { 22, 8000-8100 } counter reject with icmpx port-unreachable
		# deny [2001:db8::]/32:443
		ip6 daddr 2001:db8::/32 tcp dport 443 counter reject with tcp reset
		ip6 daddr 2001:db8::/32 udp dport 443 counter reject with icmpx port-unreachable
		# deny evil.test:*: by the DNS stub
		# DNS only through the stub on lo
		tcp dport 53 counter reject with tcp reset
		udp dport 53 counter reject with icmpx port-unreachable
		ip daddr 127.0.0.1 meta l4proto tcp counter reject with tcp reset
		ip daddr 127.0.0.1 counter reject with icmpx port-unreachable
		ip6 daddr 2001:db8:5::1 meta l4proto tcp counter reject with tcp reset
		ip6 daddr 2001:db8:5::1 counter reject with icmpx port-unreachable
		ip daddr 169.254.169.254 meta l4proto tcp counter reject with tcp reset
		ip daddr 169.254.169.254 counter reject with icmpx port-unreachable
		ip6 daddr fd00:ec2::254 meta l4proto tcp counter reject with tcp reset
		ip6 daddr fd00:ec2::254 counter reject with icmpx port-unreachable
		ip daddr 168.63.129.16 meta l4proto tcp counter reject with tcp reset
		ip daddr 168.63.129.16 counter reject with icmpx port-unreachable
		# allow 10.1.0.0/16:443
		ip daddr 10.1.0.0/16 tcp dport 443 accept
		ip daddr 10.1.0.0/16 udp dport 443 accept
		# allow 192.0.2.2:8080
		ip daddr 192.0.2.2 tcp dport 8080 accept
		ip daddr 192.0.2.2 udp dport 8080 accept
		# built-in refusals and the host's addresses
		ip daddr @refused_v4 meta l4proto tcp counter reject with tcp reset
		ip daddr @refused_v4 counter reject with icmpx port-unreachable
		ip6 daddr @refused_v6 meta l4proto tcp counter reject with tcp reset
		ip6 daddr @refused_v6 counter reject with icmpx port-unreachable
	}
}
)nft";
  EXPECT_EQ(render_ruleset(*p, host), golden);
}

TEST(NftTest, EmptyPolicyStillRefusesBuiltinBlocksAndDns) {
  auto p = policy({}, {});
  const std::string r = render_ruleset(*p, {});
  EXPECT_NE(r.find("\t\toif \"lo\" accept\n\t\t# DNS only through the stub on lo\n"),
            std::string::npos)
      << r;
  EXPECT_NE(r.find("elements = { 0.0.0.0/8, 127.0.0.0/8,"), std::string::npos) << r;
  EXPECT_NE(r.find("ip daddr @refused_v4 meta l4proto tcp counter reject with tcp reset"),
            std::string::npos);
  EXPECT_EQ(r.find(" accept\n\t\t# built-in"), std::string::npos) << "no lift rendered";
  EXPECT_EQ(r.find("established"), std::string::npos) << "no conntrack bypass";
}

TEST(NftTest, DuplicateHostAddressesRenderOnce) {
  auto p = policy({}, {});
  std::vector<IpAddr> host{*IpAddr::parse("192.0.2.2"), *IpAddr::parse("192.0.2.2"),
                           *IpAddr::parse("10.0.0.5")};
  const std::string r = render_ruleset(*p, host);
  EXPECT_NE(r.find("240.0.0.0/4, 192.0.2.2 }"), std::string::npos) << r;
}

}  // namespace
}  // namespace sandcastle::net::nft
