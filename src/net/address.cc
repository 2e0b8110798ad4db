#include "net/address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>

namespace sandcastle::net {

namespace {

constexpr std::array<std::uint8_t, 12> kMappedPrefix = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

bool is_mapped(const std::array<std::uint8_t, 16>& b) {
  return std::equal(kMappedPrefix.begin(), kMappedPrefix.end(), b.begin());
}

unsigned width(Family f) {
  return f == Family::kV4 ? 32 : 128;
}

Error invalid(std::string what) {
  return Error::make(ErrorCode::kInvalidArgument, std::move(what));
}

}  // namespace

std::optional<IpAddr> IpAddr::parse(std::string_view text) {
  // inet_pton needs a NUL-terminated string; the longest IPv6 text is 45.
  if (text.empty() || text.size() > 45) return std::nullopt;
  char buf[64];
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  std::array<std::uint8_t, 16> b{};
  if (inet_pton(AF_INET, buf, b.data()) == 1) return v4({b[0], b[1], b[2], b[3]});
  if (inet_pton(AF_INET6, buf, b.data()) == 1) return v6(b);
  return std::nullopt;
}

IpAddr IpAddr::v4(std::array<std::uint8_t, 4> bytes) {
  IpAddr a;
  a.family_ = Family::kV4;
  std::copy(bytes.begin(), bytes.end(), a.bytes_.begin());
  return a;
}

IpAddr IpAddr::v6(const std::array<std::uint8_t, 16>& bytes) {
  if (is_mapped(bytes)) return v4({bytes[12], bytes[13], bytes[14], bytes[15]});
  IpAddr a;
  a.family_ = Family::kV6;
  a.bytes_ = bytes;
  return a;
}

std::span<const std::uint8_t> IpAddr::bytes() const {
  return {bytes_.data(), is_v4() ? std::size_t{4} : std::size_t{16}};
}

std::string IpAddr::to_string() const {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(is_v4() ? AF_INET : AF_INET6, bytes_.data(), buf, sizeof buf);
  return buf;
}

Result<Cidr> Cidr::parse(std::string_view text) {
  const auto slash = text.find('/');
  auto addr = IpAddr::parse(text.substr(0, slash));
  if (!addr) return invalid("not an IP address: use a.b.c.d or an IPv6 literal");
  const unsigned max = width(addr->family());
  unsigned prefix = max;
  if (slash != std::string_view::npos) {
    const std::string_view len = text.substr(slash + 1);
    if (len.empty() || len.size() > 3) return invalid("bad prefix length");
    prefix = 0;
    for (char c : len) {
      if (c < '0' || c > '9') return invalid("bad prefix length");
      prefix = prefix * 10 + static_cast<unsigned>(c - '0');
    }
    // A mapped prefix was folded to IPv4 by IpAddr::parse; its length moves too.
    const bool folded = addr->is_v4() && text.substr(0, slash).find(':') != std::string_view::npos;
    if (folded) {
      if (prefix < 96 || prefix > 128)
        return invalid("an IPv4-mapped prefix needs a length of 96 to 128");
      prefix -= 96;
    }
    if (prefix > max) return invalid("prefix length past " + std::to_string(max));
  }
  Cidr c = of(*addr, prefix);
  if (!(c.base_ == *addr))
    return invalid("address has bits set past the prefix (did you mean " + c.to_string() + "?)");
  return c;
}

Cidr Cidr::of(const IpAddr& base, unsigned prefix) {
  Cidr c;
  prefix = std::min(prefix, width(base.family()));
  std::array<std::uint8_t, 16> b{};
  auto src = base.bytes();
  std::copy(src.begin(), src.end(), b.begin());
  for (unsigned i = 0; i < src.size(); ++i) {
    const unsigned bits_before = i * 8;
    if (bits_before >= prefix) {
      b[i] = 0;
    } else if (prefix - bits_before < 8) {
      b[i] &= static_cast<std::uint8_t>(0xff << (8 - (prefix - bits_before)));
    }
  }
  // Masking only clears bits, so an IPv6 base (never a mapped one) cannot
  // turn into ::ffff:a.b.c.d here and v6() keeps it IPv6.
  c.base_ = base.is_v4() ? IpAddr::v4({b[0], b[1], b[2], b[3]}) : IpAddr::v6(b);
  c.prefix_ = prefix;
  return c;
}

bool Cidr::contains(const IpAddr& addr) const {
  if (addr.family() != base_.family()) return false;
  return of(addr, prefix_).base_ == base_;
}

bool Cidr::covers(const Cidr& other) const {
  return other.prefix_ >= prefix_ && contains(other.base_);
}

std::string Cidr::to_string() const {
  return base_.to_string() + "/" + std::to_string(prefix_);
}

bool is_metadata_address(const IpAddr& addr) {
  static const std::vector<IpAddr> list = {*IpAddr::parse("169.254.169.254"),
                                           *IpAddr::parse("fd00:ec2::254"),
                                           *IpAddr::parse("168.63.129.16")};
  return std::find(list.begin(), list.end(), addr) != list.end();
}

std::span<const Cidr> builtin_refusals() {
  static const std::vector<Cidr> list = [] {
    std::vector<Cidr> v;
    for (const char* text :
         {"0.0.0.0/8", "127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
          "100.64.0.0/10", "169.254.0.0/16", "224.0.0.0/4", "240.0.0.0/4", "255.255.255.255/32",
          "::/128", "::1/128", "fe80::/10", "fc00::/7", "ff00::/8", "fd00:ec2::254/128",
          // IPv6 that carries an IPv4 address: NAT64 (RFC 6052, 8215),
          // IPv4-compatible, 6to4. A DNS64 resolver turns a private A
          // record into one of these, which a NAT64 gateway delivers.
          "64:ff9b::/96", "64:ff9b:1::/48", "::/96", "2002::/16"}) {
      v.push_back(*Cidr::parse(text));
    }
    return v;
  }();
  return list;
}

std::optional<Cidr> builtin_refusal(const IpAddr& addr) {
  for (const Cidr& c : builtin_refusals())
    if (c.contains(addr)) return c;
  return std::nullopt;
}

Result<std::vector<IpAddr>> host_addresses() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return Error::from_errno("getifaddrs");
  std::vector<IpAddr> out;
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    IpAddr a;
    if (i->ifa_addr->sa_family == AF_INET) {
      sockaddr_in sin{};
      std::memcpy(&sin, i->ifa_addr, sizeof sin);
      std::array<std::uint8_t, 4> b{};
      std::memcpy(b.data(), &sin.sin_addr, 4);
      a = IpAddr::v4(b);
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      sockaddr_in6 sin6{};
      std::memcpy(&sin6, i->ifa_addr, sizeof sin6);
      std::array<std::uint8_t, 16> b{};
      std::memcpy(b.data(), &sin6.sin6_addr, 16);
      a = IpAddr::v6(b);
    } else {
      continue;
    }
    if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  }
  freeifaddrs(list);
  return out;
}

}  // namespace sandcastle::net
