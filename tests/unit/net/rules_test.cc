#include "net/rules.h"

#include <gtest/gtest.h>

#include "unit/net/net_test_util.h"

namespace sandcastle::net {
namespace {

Rule rule(const char* text, ListKind kind = ListKind::kAllow) {
  auto r = parse_rule(text, kind);
  EXPECT_TRUE(r.ok()) << text << ": " << (r ? "" : r.error().context);
  return r ? *r : Rule{};
}

std::string rule_error(const std::string& text) {
  auto r = parse_rule(text, ListKind::kAllow);
  EXPECT_FALSE(r.ok()) << text;
  return r ? "" : r.error().context;
}

using namespace test_util;  // ip(): an address literal

TEST(RuleGrammar, CanonicalForms) {
  const std::pair<const char*, const char*> table[] = {
      {"Allowed.TEST.", "allowed.test:80,443"},
      {"allowed.test:443", "allowed.test:443"},
      {"allowed.test:*", "allowed.test:*"},
      {"allowed.test:80,443", "allowed.test:80,443"},
      {"allowed.test:8000-8100", "allowed.test:8000-8100"},
      {"allowed.test:22,8000-8100", "allowed.test:22,8000-8100"},
      {"*.allowed.test:443", "*.allowed.test:443"},
      {"_srv.my_host.test", "_srv.my_host.test:80,443"},
      {"2130706433", "2130706433:80,443"},
      {"0x7f.1:80", "0x7f.1:80"},
      {"198.51.100.2", "198.51.100.2:80,443"},
      {"198.51.100.2/32:7000", "198.51.100.2:7000"},
      {"10.0.0.0/8:*", "10.0.0.0/8:*"},
      {"[2001:db8::1]", "[2001:db8::1]:80,443"},
      {"[2001:DB8::1]:443", "[2001:db8::1]:443"},
      {"[2001:db8::]/32", "[2001:db8::]/32:80,443"},
      {"[2001:db8::]/32:1-65535", "[2001:db8::]/32:1-65535"},
      {"[::ffff:198.51.100.2]:80", "198.51.100.2:80"},
      {"  spaced.test  ", "spaced.test:80,443"},
  };
  for (const auto& [in, canonical] : table) {
    EXPECT_EQ(rule(in).to_string(), canonical) << in;
    EXPECT_EQ(rule(canonical).to_string(), canonical) << canonical;
  }
  EXPECT_EQ(rule("2130706433").kind, Rule::Kind::kName);
  EXPECT_EQ(rule("*.a.test").kind, Rule::Kind::kWildcard);
  EXPECT_EQ(rule("[::1]").kind, Rule::Kind::kAddress);
}

TEST(RuleGrammar, DenyWithoutPortsMeansEveryPort) {
  EXPECT_EQ(rule("evil.test", ListKind::kDeny).to_string(), "evil.test:*");
  EXPECT_EQ(rule("[2001:db8::]/32", ListKind::kDeny).to_string(), "[2001:db8::]/32:*");
  EXPECT_EQ(rule("evil.test:22", ListKind::kDeny).to_string(), "evil.test:22");
}

TEST(RuleGrammar, RefusalsSayWhy) {
  EXPECT_EQ(rule_error(""), "empty rule");
  EXPECT_EQ(rule_error("*"), "'*' alone would allow every name: list the names, or use mode full");
  EXPECT_EQ(rule_error("a.*.test"), "'*' only as the whole leftmost label (*.example.com)");
  EXPECT_EQ(rule_error("*a.test"), "'*' only as the whole leftmost label (*.example.com)");
  EXPECT_EQ(rule_error("*.*.test"), "'*' only as the whole leftmost label (*.example.com)");
  EXPECT_EQ(rule_error("bücher.test"), "non-ASCII name: use punycode (xn--...)");
  EXPECT_EQ(rule_error("a..test"), "empty label");
  EXPECT_EQ(rule_error(".a.test"), "empty label");
  EXPECT_EQ(rule_error("-a.test"), "a label starts with '-'");
  EXPECT_EQ(rule_error("a-.test"), "a label ends with '-'");
  EXPECT_EQ(rule_error("a b.test"), "' ' in a name: letters, digits, '-', '_' and '.' only");
  EXPECT_EQ(rule_error("a.test:0"), "port 0 out of range 1-65535");
  EXPECT_EQ(rule_error("a.test:65536"), "port 65536 out of range 1-65535");
  EXPECT_EQ(rule_error("a.test:"), "bad port ''");
  EXPECT_EQ(rule_error("a.test:http"), "bad port 'http'");
  EXPECT_EQ(rule_error("a.test:90-80"), "port range 90-80 runs backwards");
  EXPECT_EQ(rule_error("a.test:80,"), "bad port ''");
  EXPECT_EQ(rule_error("2001:db8::1"), "an IPv6 address goes in brackets: [2001:db8::1]:443");
  EXPECT_EQ(rule_error("[2001:db8::1"), "'[' without ']'");
  EXPECT_EQ(rule_error("[2001:db8::1]443"), "expected ':ports' after ']'");
  EXPECT_EQ(rule_error("[1.2.3.4]"),
            "brackets hold an IPv6 address: [2001:db8::1] or [2001:db8::]/32");
  EXPECT_EQ(rule_error("[a.test]"),
            "brackets hold an IPv6 address: [2001:db8::1] or [2001:db8::]/32");
  EXPECT_EQ(rule_error("10.0.0.1/8"),
            "address has bits set past the prefix (did you mean 10.0.0.0/8?)");
  EXPECT_EQ(rule_error("10.0.0.0/40"), "prefix length past 32");
  std::string long_label(64, 'a');
  long_label += ".test";
  EXPECT_EQ(rule_error(long_label), "a label longer than 63 characters");
  std::string long_name;
  for (int i = 0; i < 50; ++i) long_name += "abcd.";
  long_name += "test";  // 254 characters
  EXPECT_EQ(rule_error(long_name), "name longer than 253 characters");
  long_name.erase(0, 1);  // 253
  EXPECT_EQ(rule(long_name.c_str()).name.size(), 253u);
  std::string many_ports = "a.test:1";
  for (int i = 2; i <= 33; ++i) many_ports.append(",").append(std::to_string(i));
  EXPECT_EQ(rule_error(many_ports), "more than 32 port items");
  // The longest name with 32 port ranges is still one rule.
  std::string widest = long_name + ":";
  for (int i = 0; i < 32; ++i) widest.append(i ? "," : "").append("60000-65535");
  EXPECT_EQ(rule(widest.c_str()).ports.size(), 32u);
  EXPECT_EQ(rule_error(std::string(1025, 'a')), "rule longer than 1024 characters");
}

TEST(RuleGrammar, ListErrorsNameTheRule) {
  auto r = parse_rules({"ok.test", "bad\x01rule"}, ListKind::kAllow);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().context,
            "network.allow[1] \"bad\\x01rule\": '\x01' in a name: letters, digits, '-', '_' and "
            "'.' only");
  auto d = parse_rules({"*"}, ListKind::kDeny);
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(d.error().context.starts_with("network.deny[0] \"*\": ")) << d.error().context;
  std::vector<std::string> many(257, "a.test");
  EXPECT_EQ(parse_rules(many, ListKind::kAllow).error().context,
            "network.allow: at most 256 rules (got 257)");
  many.resize(256);
  EXPECT_TRUE(parse_rules(many, ListKind::kAllow).ok());
}

TEST(RuleMatch, WildcardNeedsOneMoreLabel) {
  const Rule w = rule("*.allowed.test:443");
  EXPECT_TRUE(w.matches_name("a.allowed.test"));
  EXPECT_TRUE(w.matches_name("a.b.allowed.test"));
  for (const char* n : {"allowed.test", "allowed.test.evil", "evilallowed.test", ".allowed.test",
                        "allowed.tes", "test"})
    EXPECT_FALSE(w.matches_name(n)) << n;
  const Rule exact = rule("allowed.test");
  EXPECT_TRUE(exact.matches_name("allowed.test"));
  EXPECT_FALSE(exact.matches_name("a.allowed.test"));
  EXPECT_FALSE(exact.matches_name("allowed.test.evil"));
  EXPECT_FALSE(exact.matches_address(ip("198.51.100.2")));
}

TEST(RuleMatch, Ports) {
  const Rule r = rule("a.test:80,8000-8100");
  EXPECT_TRUE(r.matches_port(80));
  EXPECT_TRUE(r.matches_port(8000));
  EXPECT_TRUE(r.matches_port(8100));
  EXPECT_FALSE(r.matches_port(443));
  EXPECT_FALSE(r.matches_port(8101));
  EXPECT_TRUE(rule("a.test:*").matches_port(22));
  EXPECT_TRUE(rule("a.test").matches_port(443));
  EXPECT_FALSE(rule("a.test").matches_port(8080));
}

TEST(NormalizeName, LowerCasesAndChecks) {
  EXPECT_EQ(normalize_name("X.Allowed.Test."), "x.allowed.test");
  EXPECT_FALSE(normalize_name("a\\.b").has_value());
  EXPECT_FALSE(normalize_name("a..b").has_value());
  EXPECT_FALSE(normalize_name("").has_value());
  EXPECT_FALSE(normalize_name("xn--bcher-kva.test\xc3").has_value());
}

struct Case {
  const char* name;  // nullptr: an IP literal without a DNS-map name
  const char* addr;
  std::uint16_t port;
  Reason reason;
};

class Decide : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = make_policy(
        Mode::kAllowList,
        {"allowed.test", "*.allowed.test:443", "198.51.100.2/32:7000", "loop.test",
         "127.0.0.1:8080", "[2001:db8::]/32:443", "203.0.113.0/24:9999", "denied.allowed.test:443"},
        {"denied.allowed.test", "203.0.113.66"});
    ASSERT_TRUE(p.ok()) << p.error().context;
    policy_ = *p;
  }
  Decision run(const Case& c) {
    std::optional<std::string_view> name;
    if (c.name != nullptr) name = c.name;
    return decide(*policy_, name, ip(c.addr), c.port, host_);
  }
  std::shared_ptr<const Policy> policy_;
  std::vector<IpAddr> host_{ip("192.0.2.2")};
};

TEST_F(Decide, Table) {
  const Case table[] = {
      {"allowed.test", "198.51.100.2", 443, Reason::kAllowed},
      {"ALLOWED.test.", "198.51.100.2", 80, Reason::kAllowed},
      {"allowed.test", "198.51.100.2", 8080, Reason::kPortNotAllowed},
      {"allowed.test", "198.51.100.2", 22, Reason::kPortNotAllowed},
      {"x.allowed.test", "198.51.100.2", 443, Reason::kAllowed},
      {"x.allowed.test", "198.51.100.2", 80, Reason::kPortNotAllowed},
      {"allowed.test.evil", "198.51.100.3", 443, Reason::kNotAllowed},
      {"evilallowed.test", "198.51.100.3", 443, Reason::kNotAllowed},
      {"other.test", "198.51.100.3", 443, Reason::kNotAllowed},
      {nullptr, "198.51.100.3", 80, Reason::kNotAllowed},
      {nullptr, "198.51.100.2", 7000, Reason::kAllowed},
      {nullptr, "198.51.100.2", 7001, Reason::kPortNotAllowed},
      {nullptr, "::ffff:198.51.100.2", 7000, Reason::kAllowed},
      {nullptr, "2001:db8::5", 443, Reason::kAllowed},
      // deny wins over an allow of the same name, and over any address rule
      {"denied.allowed.test", "198.51.100.2", 443, Reason::kDenied},
      {"DENIED.allowed.test.", "198.51.100.2", 443, Reason::kDenied},
      {nullptr, "203.0.113.66", 9999, Reason::kDenied},
      {"allowed.test", "203.0.113.66", 443, Reason::kDenied},
      // an allowed name resolving to a refused address stays refused
      {"loop.test", "127.0.0.1", 443, Reason::kPrivateAddress},
      {"allowed.test", "169.254.169.254", 80, Reason::kPrivateAddress},
      {"allowed.test", "::1", 443, Reason::kPrivateAddress},
      {"allowed.test", "::ffff:127.0.0.1", 443, Reason::kPrivateAddress},
      {"allowed.test", "0.0.0.0", 443, Reason::kPrivateAddress},
      {"allowed.test", "192.0.2.2", 443, Reason::kPrivateAddress},
      {nullptr, "192.0.2.2", 443, Reason::kPrivateAddress},
      {nullptr, "203.0.113.9", 9999, Reason::kAllowed},
      // an address rule inside the refused block lifts it, on its port only
      {nullptr, "127.0.0.1", 8080, Reason::kAllowed},
      {"loop.test", "127.0.0.1", 8080, Reason::kAllowed},
      {nullptr, "127.0.0.1", 8081, Reason::kPrivateAddress},
      {nullptr, "127.0.0.2", 8080, Reason::kPrivateAddress},
      // numeric shorthand is a name, never an address
      {"2130706433", "198.51.100.3", 80, Reason::kNotAllowed},
      {"a\\.allowed.test", "198.51.100.3", 443, Reason::kNotAllowed},
  };
  for (const Case& c : table) {
    const Decision d = run(c);
    EXPECT_EQ(reason_name(d.reason), std::string(reason_name(c.reason)))
        << (c.name ? c.name : "-") << " " << c.addr << ":" << c.port;
    EXPECT_EQ(d.allowed, c.reason == Reason::kAllowed);
  }
}

TEST_F(Decide, WideRuleLiftsNoRefusal) {
  auto p = make_policy(Mode::kAllowList, {"0.0.0.0/0:*", "[::]/0:*", "192.0.2.0/24:*"}, {});
  ASSERT_TRUE(p.ok());
  for (const char* a : {"127.0.0.1", "169.254.169.254", "10.0.0.1", "::1", "192.0.2.2"})
    EXPECT_EQ(decide(**p, std::nullopt, ip(a), 80, host_).reason, Reason::kPrivateAddress) << a;
  EXPECT_EQ(decide(**p, std::nullopt, ip("192.0.2.3"), 80, host_).reason, Reason::kAllowed);
  EXPECT_EQ(decide(**p, std::nullopt, ip("2001:db8::1"), 22, host_).reason, Reason::kAllowed);
  // The host's own address opens only to a rule naming exactly it.
  auto exact = make_policy(Mode::kAllowList, {"192.0.2.2:8080", "169.254.169.254:80"}, {});
  ASSERT_TRUE(exact.ok());
  EXPECT_TRUE(decide(**exact, std::nullopt, ip("192.0.2.2"), 8080, host_).allowed);
  EXPECT_TRUE(decide(**exact, std::nullopt, ip("169.254.169.254"), 80, host_).allowed);
}

// A private range a rule opens does not open the host's own address or a
// metadata endpoint inside it: those open only to a rule naming exactly them.
TEST_F(Decide, APrivateRangeRuleOpensNeitherTheHostNorMetadata) {
  const std::vector<IpAddr> host = {ip("10.0.0.5")};
  auto p = make_policy(Mode::kAllowList, {"10.0.0.0/8:*", "169.254.0.0/16:*", "[fc00::]/7:*"}, {});
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(decide(**p, std::nullopt, ip("10.0.0.6"), 80, host).allowed);
  for (const char* a : {"10.0.0.5", "169.254.169.254", "fd00:ec2::254"})
    EXPECT_EQ(decide(**p, std::nullopt, ip(a), 80, host).reason, Reason::kPrivateAddress) << a;
  EXPECT_TRUE(decide(**p, std::nullopt, ip("169.254.1.1"), 80, host).allowed);
  // Azure's WireServer is a public address, refused as metadata all the same.
  auto wide = make_policy(Mode::kAllowList, {"0.0.0.0/0:*"}, {});
  ASSERT_TRUE(wide.ok());
  EXPECT_EQ(decide(**wide, std::nullopt, ip("168.63.129.16"), 80, host).reason,
            Reason::kPrivateAddress);
  auto exact = make_policy(Mode::kAllowList, {"10.0.0.5:22"}, {});
  ASSERT_TRUE(exact.ok());
  EXPECT_TRUE(decide(**exact, std::nullopt, ip("10.0.0.5"), 22, host).allowed);
}

TEST_F(Decide, ModeNoneAllowsNothing) {
  Policy none = *policy_;
  none.mode = Mode::kNone;
  EXPECT_EQ(decide(none, "allowed.test", ip("198.51.100.2"), 443, host_).reason,
            Reason::kNotAllowed);
  EXPECT_FALSE(name_allowed_somewhere(none, "allowed.test"));
}

TEST_F(Decide, NameAllowedSomewhere) {
  EXPECT_TRUE(name_allowed_somewhere(*policy_, "allowed.test"));
  EXPECT_TRUE(name_allowed_somewhere(*policy_, "X.allowed.test."));
  EXPECT_FALSE(name_allowed_somewhere(*policy_, "denied.allowed.test"));
  EXPECT_FALSE(name_allowed_somewhere(*policy_, "other.test"));
  EXPECT_FALSE(name_allowed_somewhere(*policy_, "allowed.test.evil"));
  EXPECT_FALSE(name_allowed_somewhere(*policy_, "198.51.100.2"));
}

TEST(Mode, NamesAndTheOldSpelling) {
  EXPECT_STREQ(mode_name(Mode::kAllowList), "allowlist");
  EXPECT_STREQ(mode_name(Mode::kFull), "full");
  EXPECT_EQ(parse_mode("allow-list"), Mode::kAllowList);
  EXPECT_EQ(parse_mode("allowlist"), Mode::kAllowList);
  EXPECT_EQ(parse_mode("none"), Mode::kNone);
  EXPECT_FALSE(parse_mode("open").has_value());
  EXPECT_STREQ(reason_name(Reason::kPortNotAllowed), "port_not_allowed");
  EXPECT_STREQ(reason_name(Reason::kSniMismatch), "sni_mismatch");
}

// The installer's index rules: a trusted exact host:port passes the
// built-in refusal for that name or address and port only.
TEST(DecideTrusted, LiftsTheRefusalForItsExactHostAndPortOnly) {
  Policy p;
  p.mode = Mode::kAllowList;
  for (const char* text : {"index.test:8080", "127.0.0.1:3141"}) {
    p.allow.push_back(rule(text));
    p.trusted.push_back(rule(text));
  }
  const std::vector<IpAddr> hosts{ip("192.0.2.2")};
  EXPECT_EQ(decide(p, "index.test", ip("127.0.0.1"), 8080, hosts).reason, Reason::kAllowed);
  EXPECT_EQ(decide(p, "index.test", ip("10.1.2.3"), 8080, hosts).reason, Reason::kAllowed);
  EXPECT_EQ(decide(p, "index.test", ip("127.0.0.1"), 8081, hosts).reason, Reason::kPrivateAddress);
  EXPECT_EQ(decide(p, "other.test", ip("127.0.0.1"), 8080, hosts).reason, Reason::kPrivateAddress);
  EXPECT_EQ(decide(p, std::nullopt, ip("127.0.0.1"), 3141, hosts).reason, Reason::kAllowed);
  EXPECT_EQ(decide(p, std::nullopt, ip("127.0.0.2"), 3141, hosts).reason, Reason::kPrivateAddress);
  // The same rules, not trusted (a caller's): the name's loopback address stays refused.
  Policy caller = p;
  caller.trusted.clear();
  EXPECT_EQ(decide(caller, "index.test", ip("127.0.0.1"), 8080, hosts).reason,
            Reason::kPrivateAddress);
  // A deny rule still wins.
  p.deny.push_back(rule("index.test", ListKind::kDeny));
  EXPECT_EQ(decide(p, "index.test", ip("127.0.0.1"), 8080, hosts).reason, Reason::kDenied);
}

}  // namespace
}  // namespace sandcastle::net
