// IP addresses and prefixes as the network policy sees them, and the
// addresses no sandbox reaches unless a rule names them (loopback, private
// ranges, cloud metadata, the host's own interfaces).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace sandcastle::net {

enum class Family : std::uint8_t { kV4, kV6 };

// An IPv4 or IPv6 address in network byte order. An IPv4-mapped IPv6
// address (::ffff:a.b.c.d) is always stored as the IPv4 address, so one
// rule or refusal covers both spellings.
class IpAddr {
 public:
  IpAddr() = default;
  // inet_pton only: "1.2.3.4" or an IPv6 literal without brackets. Shorthand
  // that inet_aton would take ("2130706433", "0x7f.1", "127.1") is not an
  // address here, so it stays a name and never matches an address rule.
  static std::optional<IpAddr> parse(std::string_view text);
  static IpAddr v4(std::array<std::uint8_t, 4> bytes);
  // Folds ::ffff:a.b.c.d to IPv4.
  static IpAddr v6(const std::array<std::uint8_t, 16>& bytes);

  Family family() const { return family_; }
  bool is_v4() const { return family_ == Family::kV4; }
  // 4 bytes for IPv4, 16 for IPv6.
  std::span<const std::uint8_t> bytes() const;
  // "1.2.3.4" or "2001:db8::1" (no brackets).
  std::string to_string() const;

  friend bool operator==(const IpAddr&, const IpAddr&) = default;
  friend auto operator<=>(const IpAddr&, const IpAddr&) = default;  // map keys

 private:
  Family family_ = Family::kV4;
  std::array<std::uint8_t, 16> bytes_{};
};

// A prefix: base address plus length. The base never has bits set past the
// length (parse refuses "10.0.0.1/8").
class Cidr {
 public:
  Cidr() = default;
  // "10.0.0.0/8", "2001:db8::/32", or a bare address (a /32 or /128). An
  // IPv4-mapped IPv6 prefix of length >= 96 folds to IPv4.
  static Result<Cidr> parse(std::string_view text);
  // Clears the bits past `prefix`; prefix is clamped to the family's width.
  static Cidr of(const IpAddr& base, unsigned prefix);

  const IpAddr& base() const { return base_; }
  unsigned prefix() const { return prefix_; }
  bool contains(const IpAddr& addr) const;
  // True when every address of `other` is in this prefix.
  bool covers(const Cidr& other) const;
  std::string to_string() const;

  friend bool operator==(const Cidr&, const Cidr&) = default;

 private:
  IpAddr base_{};
  unsigned prefix_ = 32;
};

// The built-in refusal that holds `addr`, if any: loopback, unspecified,
// RFC 1918, CGNAT, link-local (169.254.169.254, the cloud metadata address,
// is in it), multicast, reserved and broadcast for IPv4; ::, ::1, fe80::/10,
// fc00::/7, ff00::/8 and fd00:ec2::254 for IPv6.
std::optional<Cidr> builtin_refusal(const IpAddr& addr);
inline bool builtin_refused(const IpAddr& addr) {
  return builtin_refusal(addr).has_value();
}
// The cloud metadata endpoints (169.254.169.254, fd00:ec2::254, Azure's
// 168.63.129.16): refused as single addresses that a wider rule never opens.
bool is_metadata_address(const IpAddr& addr);

// The list above, for rendering into firewall rules.
std::span<const Cidr> builtin_refusals();

// Every address on the host's own interfaces (getifaddrs), loopback
// included; a sandbox must not reach the server's host by its LAN address.
Result<std::vector<IpAddr>> host_addresses();

}  // namespace sandcastle::net
