#include "net/rules.h"

#include <algorithm>

namespace sandcastle::net {

namespace {

Error invalid_rules(std::string what) {
  return Error::make(ErrorCode::kInvalidArgument, std::move(what));
}

bool is_ldh(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

// Why `name` (already lower-cased, no trailing dot) is not a valid name, or
// empty when it is.
std::string name_problem(std::string_view name) {
  if (name.empty()) return "empty name";
  if (name.size() > kMaxNameLength) return "name longer than 253 characters";
  std::size_t label = 0;
  char prev = '.';
  for (char c : name) {
    if (static_cast<unsigned char>(c) >= 0x80) return "non-ASCII name: use punycode (xn--...)";
    if (c == '.') {
      if (label == 0) return "empty label";
      if (prev == '-') return "a label ends with '-'";
      label = 0;
    } else {
      if (!is_ldh(c))
        return std::string("'") + c + "' in a name: letters, digits, '-', '_' and '.' only";
      if (label == 0 && c == '-') return "a label starts with '-'";
      if (++label > 63) return "a label longer than 63 characters";
    }
    prev = c;
  }
  if (prev == '-') return "a label ends with '-'";
  return {};
}

Result<std::uint16_t> parse_port(std::string_view s) {
  if (s.empty() || s.size() > 5) return invalid_rules("bad port '" + std::string(s) + "'");
  unsigned v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return invalid_rules("bad port '" + std::string(s) + "'");
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  if (v == 0 || v > 65535) return invalid_rules("port " + std::string(s) + " out of range 1-65535");
  return static_cast<std::uint16_t>(v);
}

Result<std::vector<PortRange>> parse_ports(std::string_view s) {
  if (s == "*") return std::vector<PortRange>{};
  std::vector<PortRange> out;
  while (true) {
    const auto comma = s.find(',');
    const std::string_view item = s.substr(0, comma);
    if (out.size() == kMaxPortItems) return invalid_rules("more than 32 port items");
    const auto dash = item.find('-');
    auto first = parse_port(item.substr(0, dash));
    if (!first) return first.take_error();
    PortRange r{*first, *first};
    if (dash != std::string_view::npos) {
      auto last = parse_port(item.substr(dash + 1));
      if (!last) return last.take_error();
      if (*last < *first)
        return invalid_rules("port range " + std::string(item) + " runs backwards");
      r.last = *last;
    }
    out.push_back(r);
    if (comma == std::string_view::npos) break;
    s = s.substr(comma + 1);
  }
  return out;
}

// The host part, classified: bracketed IPv6, IPv4 (maybe with /len), or a name.
Result<Rule> parse_host(std::string_view host, bool bracketed) {
  Rule r;
  if (bracketed) {
    auto c = Cidr::parse(host);
    if (!c || host.find(':') == std::string_view::npos)
      return invalid_rules("brackets hold an IPv6 address: [2001:db8::1] or [2001:db8::]/32");
    r.kind = Rule::Kind::kAddress;
    r.cidr = *c;
    return r;
  }
  if (host.find('/') != std::string_view::npos || IpAddr::parse(host)) {
    auto c = Cidr::parse(host);
    if (!c) return c.take_error();
    r.kind = Rule::Kind::kAddress;
    r.cidr = *c;
    return r;
  }
  std::string name;
  name.reserve(host.size());
  for (char c : host) name.push_back(lower(c));
  if (name.ends_with('.')) name.pop_back();
  if (name == "*")
    return invalid_rules("'*' alone would allow every name: list the names, or use mode full");
  if (name.starts_with("*.")) {
    r.kind = Rule::Kind::kWildcard;
    name.erase(0, 2);
  }
  if (name.find('*') != std::string::npos)
    return invalid_rules("'*' only as the whole leftmost label (*.example.com)");
  if (auto why = name_problem(name); !why.empty()) return invalid_rules(why);
  r.name = std::move(name);
  return r;
}

std::string quote_rule(std::string_view text) {
  // Rules come from callers: keep the message one printable line.
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (std::size_t i = 0; i < text.size() && i < 80; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  if (text.size() > 80) out += "...";
  return out + "\"";
}

bool any_port_match(const std::vector<Rule>& rules, std::optional<std::string_view> name,
                    const IpAddr& addr, std::uint16_t port, bool check_port) {
  for (const Rule& r : rules) {
    const bool host = (name && r.matches_name(*name)) || r.matches_address(addr);
    if (host && (!check_port || r.matches_port(port))) return true;
  }
  return false;
}

}  // namespace

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::kNone: return "none";
    case Mode::kAllowList: return "allowlist";
    case Mode::kFull: return "full";
  }
  return "?";
}

std::optional<Mode> parse_mode(std::string_view name) {
  if (name == "none") return Mode::kNone;
  if (name == "allowlist" || name == "allow-list") return Mode::kAllowList;
  if (name == "full") return Mode::kFull;
  return std::nullopt;
}

const char* reason_name(Reason reason) {
  switch (reason) {
    case Reason::kAllowed: return "allowed";
    case Reason::kNotAllowed: return "not_allowed";
    case Reason::kDenied: return "denied";
    case Reason::kPrivateAddress: return "private_address";
    case Reason::kPortNotAllowed: return "port_not_allowed";
    case Reason::kSniMismatch: return "sni_mismatch";
    case Reason::kHostMismatch: return "host_mismatch";
    case Reason::kRuleRemoved: return "rule_removed";
    case Reason::kLimit: return "limit";
    case Reason::kDnsRefused: return "dns_refused";
    case Reason::kUnsupported: return "unsupported";
  }
  return "?";
}

bool Rule::matches_port(std::uint16_t port) const {
  if (ports.empty()) return true;
  return std::any_of(ports.begin(), ports.end(),
                     [port](const PortRange& r) { return port >= r.first && port <= r.last; });
}

bool Rule::matches_name(std::string_view n) const {
  switch (kind) {
    case Kind::kName: return n == name;
    case Kind::kWildcard:
      // At least one label before ".suffix": "*.a.test" is not "a.test",
      // "a.test.evil" or "evila.test".
      return n.size() > name.size() + 1 && n.ends_with(name) &&
             n[n.size() - name.size() - 1] == '.';
    case Kind::kAddress: return false;
  }
  return false;
}

bool Rule::matches_address(const IpAddr& addr) const {
  return kind == Kind::kAddress && cidr.contains(addr);
}

std::string Rule::to_string() const {
  // append() rather than operator+: GCC 12 reports a false -Wrestrict on
  // "literal" + string chains.
  std::string out;
  switch (kind) {
    case Kind::kName: out.append(name); break;
    case Kind::kWildcard: out.append("*.").append(name); break;
    case Kind::kAddress:
      if (cidr.base().is_v4()) {
        out.append(cidr.prefix() == 32 ? cidr.base().to_string() : cidr.to_string());
      } else {
        out.append("[").append(cidr.base().to_string()).append("]");
        if (cidr.prefix() != 128) out.append("/").append(std::to_string(cidr.prefix()));
      }
      break;
  }
  out.push_back(':');
  if (ports.empty()) return out.append("*");
  for (std::size_t i = 0; i < ports.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.append(std::to_string(ports[i].first));
    if (ports[i].last != ports[i].first) out.append("-").append(std::to_string(ports[i].last));
  }
  return out;
}

std::optional<std::string> normalize_name(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) out.push_back(lower(c));
  if (out.ends_with('.')) out.pop_back();
  if (!name_problem(out).empty()) return std::nullopt;
  return out;
}

Result<Rule> parse_rule(std::string_view text, ListKind kind) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  if (text.empty()) return invalid_rules("empty rule");
  if (text.size() > kMaxRuleLength) return invalid_rules("rule longer than 1024 characters");
  std::string host(text);
  std::optional<std::string_view> ports;
  const bool bracketed = text.front() == '[';
  if (bracketed) {
    // "[v6]", "[v6]:ports", "[v6]/len", "[v6]/len:ports"
    const auto close = text.find(']');
    if (close == std::string_view::npos) return invalid_rules("'[' without ']'");
    std::string_view rest = text.substr(close + 1);
    host = std::string(text.substr(1, close - 1));
    if (rest.starts_with('/')) {
      const auto colon = rest.find(':');
      host += rest.substr(0, colon);
      rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon);
    }
    if (!rest.empty() && rest.front() != ':') return invalid_rules("expected ':ports' after ']'");
    if (!rest.empty()) ports = rest.substr(1);
  } else if (const auto colon = text.find(':'); colon != std::string_view::npos) {
    if (text.find(':', colon + 1) != std::string_view::npos)
      return invalid_rules("an IPv6 address goes in brackets: [2001:db8::1]:443");
    host = std::string(text.substr(0, colon));
    ports = text.substr(colon + 1);
  }
  auto r = parse_host(host, bracketed);
  if (!r) return r;
  if (ports) {
    auto p = parse_ports(*ports);
    if (!p) return p.take_error();
    r->ports = std::move(*p);
  } else if (kind == ListKind::kAllow) {
    r->ports = {{80, 80}, {443, 443}};
  }
  return r;
}

Result<std::vector<Rule>> parse_rules(const std::vector<std::string>& texts, ListKind kind) {
  const char* list = kind == ListKind::kAllow ? "network.allow" : "network.deny";
  if (texts.size() > kMaxRules)
    return invalid_rules(std::string(list) + ": at most 256 rules (got " +
                         std::to_string(texts.size()) + ")");
  std::vector<Rule> out;
  out.reserve(texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    auto r = parse_rule(texts[i], kind);
    if (!r)
      return invalid_rules(std::string(list) + "[" + std::to_string(i) + "] " +
                           quote_rule(texts[i]) + ": " + r.error().context);
    out.push_back(std::move(*r));
  }
  return out;
}

Result<std::shared_ptr<const Policy>> make_policy(Mode mode, const std::vector<std::string>& allow,
                                                  const std::vector<std::string>& deny) {
  auto a = parse_rules(allow, ListKind::kAllow);
  if (!a) return a.take_error();
  auto d = parse_rules(deny, ListKind::kDeny);
  if (!d) return d.take_error();
  return std::make_shared<const Policy>(Policy{mode, std::move(*a), std::move(*d), {}});
}

Decision decide(const Policy& policy, std::optional<std::string_view> name, const IpAddr& addr,
                std::uint16_t port, std::span<const IpAddr> host_addrs) {
  std::optional<std::string> norm;
  if (name) norm = normalize_name(*name);
  std::optional<std::string_view> n;
  if (norm) n = *norm;
  if (any_port_match(policy.deny, n, addr, port, true)) return {false, Reason::kDenied};
  const std::vector<Rule> none;
  const std::vector<Rule>& allow = policy.mode == Mode::kNone ? none : policy.allow;

  // The host's own addresses and the cloud metadata endpoints are refused
  // as single addresses, first: a rule opening a private range that holds
  // them (10.0.0.0/8 around the host's LAN address) does not open them;
  // only a rule for exactly that address (or a trusted one) does.
  const Cidr exact = Cidr::of(addr, addr.is_v4() ? 32 : 128);
  std::optional<Cidr> refused;
  if (std::find(host_addrs.begin(), host_addrs.end(), addr) != host_addrs.end() ||
      is_metadata_address(addr))
    refused = exact;
  if (!refused) refused = builtin_refusal(addr);
  if (refused) {
    for (const Rule& r : allow)
      if (r.kind == Rule::Kind::kAddress && refused->covers(r.cidr) && r.matches_address(addr) &&
          r.matches_port(port))
        return {true, Reason::kAllowed};
    for (const Rule& r : policy.trusted)
      if ((r.matches_address(addr) || (n && r.matches_name(*n))) && r.matches_port(port))
        return {true, Reason::kAllowed};
    return {false, Reason::kPrivateAddress};
  }
  if (any_port_match(allow, n, addr, port, true)) return {true, Reason::kAllowed};
  if (any_port_match(allow, n, addr, port, false)) return {false, Reason::kPortNotAllowed};
  return {false, Reason::kNotAllowed};
}

bool name_allowed_somewhere(const Policy& policy, std::string_view name) {
  if (policy.mode == Mode::kNone) return false;
  auto n = normalize_name(name);
  if (!n) return false;
  for (const Rule& r : policy.deny)
    if (r.ports.empty() && r.matches_name(*n)) return false;
  return std::any_of(policy.allow.begin(), policy.allow.end(),
                     [&](const Rule& r) { return r.matches_name(*n); });
}

}  // namespace sandcastle::net
