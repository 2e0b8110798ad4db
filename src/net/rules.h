// The network policy of a sandbox: allow and deny rules, and the one
// function that decides a connection. Everything here is pure (no I/O), so
// the proxies, the DNS stub and the firewall rendering share one answer.
//
// Rule syntax: host[:ports]
//   host:  name | *.name | 1.2.3.4 | 10.0.0.0/8 | [2001:db8::1] | [2001:db8::]/32
//   ports: * | 443 | 80,443 | 8000-8100 (a comma list of ports and ranges)
// An allow rule without ports means 80,443; a deny rule without ports means
// every port (a deny that silently spared port 22 would be a trap).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "net/address.h"

namespace sandcastle::net {

enum class Mode : std::uint8_t {
  kNone,       // loopback only
  kAllowList,  // egress through the server's proxies, by rule
  kFull,       // a user-mode network stack; deny rules and built-in refusals enforced
};
// "none", "allowlist", "full".
const char* mode_name(Mode mode);
// Also takes "allow-list", the name stored before "full" existed.
std::optional<Mode> parse_mode(std::string_view name);

constexpr std::size_t kMaxRules = 256;       // per list
constexpr std::size_t kMaxNameLength = 253;  // DNS presentation form, no trailing dot
constexpr std::size_t kMaxRuleLength = 1024;  // a 253-character name and 32 port ranges fit
constexpr std::size_t kMaxPortItems = 32;    // "80,443,..." items in one rule

struct PortRange {
  std::uint16_t first = 0;
  std::uint16_t last = 0;
  friend bool operator==(const PortRange&, const PortRange&) = default;
};

struct Rule {
  enum class Kind : std::uint8_t {
    kName,      // exact name
    kWildcard,  // *.suffix: one or more labels before suffix
    kAddress,   // an address or prefix
  };
  Kind kind = Kind::kName;
  std::string name{};              // kName: the name; kWildcard: the suffix (no "*.")
  Cidr cidr{};                     // kAddress
  std::vector<PortRange> ports{};  // empty: every port

  bool matches_port(std::uint16_t port) const;
  // `name` must be normalized (normalize_name); false for address rules.
  bool matches_name(std::string_view name) const;
  // False for name rules.
  bool matches_address(const IpAddr& addr) const;
  // Canonical text that parses back to the same rule ("*.a.test:80,443").
  std::string to_string() const;
};

enum class ListKind : std::uint8_t { kAllow, kDeny };

// Parses one rule; the error says what is wrong, without the rule's text.
Result<Rule> parse_rule(std::string_view text, ListKind kind);
// Parses a list (at most kMaxRules); an error names the list, the index and
// the rule: `network.allow[2] "bad_rule!": ...`.
Result<std::vector<Rule>> parse_rules(const std::vector<std::string>& texts, ListKind kind);

// Lower-cased, trailing dot dropped, checked as LDH plus '_' (labels 1..63,
// no leading or trailing '-', at most 253 characters). nullopt for anything
// else, so a name with odd bytes matches no rule.
std::optional<std::string> normalize_name(std::string_view name);

// Immutable once built; a session swaps a shared_ptr<const Policy>.
struct Policy {
  Mode mode = Mode::kNone;
  std::vector<Rule> allow{};
  std::vector<Rule> deny{};
  // The operator's own exact host:port rules (the package installer's
  // indexes, which may well be on loopback or a private network): a name or
  // address one of them matches on that port passes the built-in refusal.
  // Never filled from a caller's rules.
  std::vector<Rule> trusted{};
};
Result<std::shared_ptr<const Policy>> make_policy(Mode mode, const std::vector<std::string>& allow,
                                                  const std::vector<std::string>& deny);

enum class Reason : std::uint8_t {
  kAllowed,
  kNotAllowed,      // no allow rule names the host
  kDenied,          // a deny rule matches
  kPrivateAddress,  // a built-in refusal (loopback, private, metadata, the host's own)
  kPortNotAllowed,  // a rule names the host, none names the port
  kSniMismatch,     // TLS server name differs from the tunnel's target
  kHostMismatch,    // HTTP Host differs from the target
  kRuleRemoved,     // the policy changed under an open tunnel
  kLimit,           // connection or rate limit
  kDnsRefused,      // the DNS stub refused the name
  kUnsupported,     // a protocol or command the proxies do not carry
};
// "allowed", "not_allowed", "denied", ... (the snake_case of the enumerator).
const char* reason_name(Reason reason);

struct Decision {
  bool allowed = false;
  Reason reason = Reason::kNotAllowed;
};

// The connection (name?, addr, port) under `policy`, in this order:
//  1. a deny rule matching the name or the address (on that port) refuses;
//  2. an address in a built-in refusal or in `host_addrs` is refused unless
//     an allow address rule lying inside that refused block matches
//     (addr, port), or a trusted rule matches (name or addr, port); a wide
//     rule (0.0.0.0/0) never opens loopback;
//  3. an allow name rule matching (name, port) or an allow address rule
//     matching (addr, port) allows;
//  4. otherwise port_not_allowed if some allow rule names the host on
//     another port, else not_allowed.
// `name` is the name the client asked for (or the DNS map's name for an IP
// literal); it is normalized here, and one that is not a valid name matches
// no name rule. In Mode::kNone the allow list counts as empty.
Decision decide(const Policy& policy, std::optional<std::string_view> name, const IpAddr& addr,
                std::uint16_t port, std::span<const IpAddr> host_addrs);

// Whether a name alone could be allowed on some port (the DNS stub's
// question: a name off the list is REFUSED and never forwarded). Deny name
// rules on every port count too.
bool name_allowed_somewhere(const Policy& policy, std::string_view name);

}  // namespace sandcastle::net
