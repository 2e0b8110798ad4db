#include "net/session.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "common/metrics.h"

namespace sandcastle::net {
namespace {

constexpr std::size_t kTargetMax = 260;  // a 253-character name and a port
constexpr auto kDnsMapGrace = std::chrono::seconds(60);

// Printable ASCII only, bounded: a refusal's target comes from the sandbox.
std::string printable(std::string_view text) {
  std::string out;
  out.reserve(std::min(text.size(), kTargetMax));
  for (char c : text.substr(0, kTargetMax)) {
    out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  }
  return out;
}

}  // namespace

const char* via_name(Via via) {
  switch (via) {
    case Via::kHttp: return "http";
    case Via::kConnect: return "connect";
    case Via::kSocks: return "socks";
    case Via::kDns: return "dns";
    case Via::kTls: return "tls";
    case Via::kFirewall: return "firewall";
  }
  return "unknown";
}

Session::Session(std::string log_id, std::shared_ptr<const Policy> policy)
    : id_(std::move(log_id)), policy_(std::move(policy)) {}

Mode Session::mode() const {
  std::lock_guard lock(mu_);
  return policy_->mode;
}

std::shared_ptr<const Policy> Session::policy() const {
  std::lock_guard lock(mu_);
  return policy_;
}

std::uint64_t Session::generation() const {
  std::lock_guard lock(mu_);
  return generation_;
}

std::size_t Session::set_policy(std::shared_ptr<const Policy> policy,
                                std::span<const IpAddr> host_addrs) {
  std::vector<std::function<void()>> closes;
  {
    std::lock_guard lock(mu_);
    policy_ = std::move(policy);
    ++generation_;
    for (auto it = tunnels_.begin(); it != tunnels_.end();) {
      const TunnelTarget& t = it->second.target;
      const std::optional<std::string_view> name =
          t.name ? std::optional<std::string_view>(*t.name) : std::nullopt;
      if (net::decide(*policy_, name, t.addr, t.port, host_addrs).allowed) {
        ++it;
        continue;
      }
      record_locked({.at = std::chrono::system_clock::now(),
                     .via = t.via,
                     .target = printable(t.name.value_or(t.addr.to_string())),
                     .address = t.addr.to_string(),
                     .port = t.port,
                     .reason = Reason::kRuleRemoved});
      closes.push_back(std::move(it->second.close));
      it = tunnels_.erase(it);
      --stats_.open;
    }
  }
  // Outside the lock: a close function may call back into the session.
  for (auto& close : closes) {
    if (close) close();
  }
  return closes.size();
}

Decision Session::decide(Via via, std::string_view target, std::optional<std::string_view> name,
                         const IpAddr& addr, std::uint16_t port,
                         std::span<const IpAddr> host_addrs) {
  std::lock_guard lock(mu_);
  const Decision d = net::decide(*policy_, name, addr, port, host_addrs);
  if (d.allowed) {
    ++stats_.allowed;
    metrics::registry()
        .counter("sandcastle_network_connections_total", "connections the proxies let through",
                 {{"mode", mode_name(policy_->mode)}})
        .inc();
  } else {
    record_locked({.at = std::chrono::system_clock::now(),
                   .via = via,
                   .target = printable(target),
                   .address = addr.to_string(),
                   .port = port,
                   .reason = d.reason});
  }
  return d;
}

void Session::record_refusal(Via via, std::string_view target, std::string_view address,
                             std::uint16_t port, Reason reason) {
  std::lock_guard lock(mu_);
  record_locked({.at = std::chrono::system_clock::now(),
                 .via = via,
                 .target = printable(target),
                 .address = printable(address),
                 .port = port,
                 .reason = reason});
}

void Session::record_locked(Refusal refusal) {
  metrics::registry()
      .counter("sandcastle_network_refused_total", "connections and DNS queries refused by policy",
               {{"reason", reason_name(refusal.reason)}})
      .inc();
  ++stats_.refused;
  ++stats_.refused_by_reason[refusal.reason];
  // A program that retries in a loop must not flood the log: at most
  // kRefusalLogPerMinute lines a minute, then one line saying how many more.
  const auto now = Clock::now();
  if (now - log_window_ >= std::chrono::minutes(1)) {
    if (suppressed_ > 0) {
      spdlog::info("network: sandbox {}: {} more refusals not logged", id_, suppressed_);
    }
    log_window_ = now;
    logged_in_window_ = 0;
    suppressed_ = 0;
  }
  if (logged_in_window_ < kRefusalLogPerMinute) {
    ++logged_in_window_;
    spdlog::info("network: sandbox {}: {} {} ({}) port {} refused: {}", id_, via_name(refusal.via),
                 refusal.target, refusal.address, refusal.port, reason_name(refusal.reason));
  } else {
    ++suppressed_;
  }
  ring_[ring_next_] = std::move(refusal);
  ring_next_ = (ring_next_ + 1) % kRefusalRing;
  ring_size_ = std::min(ring_size_ + 1, kRefusalRing);
}

void Session::remember(const IpAddr& addr, std::string_view name, std::chrono::seconds ttl) {
  std::lock_guard lock(mu_);
  const auto now = Clock::now();
  if (dns_map_.size() >= kDnsMapMax && !dns_map_.contains(addr)) {
    // Drop expired entries first, then the one that expires soonest.
    std::erase_if(dns_map_, [&](const auto& entry) { return entry.second.until <= now; });
    if (dns_map_.size() >= kDnsMapMax) {
      auto soonest = std::min_element(
          dns_map_.begin(), dns_map_.end(),
          [](const auto& a, const auto& b) { return a.second.until < b.second.until; });
      dns_map_.erase(soonest);
    }
  }
  dns_map_[addr] = Mapped{.name = std::string(name.substr(0, kMaxNameLength)),
                          .until = now + ttl + kDnsMapGrace};
}

std::optional<std::string> Session::name_for(const IpAddr& addr) const {
  std::lock_guard lock(mu_);
  auto it = dns_map_.find(addr);
  if (it == dns_map_.end() || it->second.until <= Clock::now()) return std::nullopt;
  return it->second.name;
}

std::uint64_t Session::tunnel_opened(TunnelTarget target, std::function<void()> close) {
  std::lock_guard lock(mu_);
  const std::uint64_t id = next_tunnel_++;
  tunnels_.emplace(id, Tunnel{.target = std::move(target), .close = std::move(close)});
  ++stats_.open;
  return id;
}

void Session::tunnel_closed(std::uint64_t id) {
  std::lock_guard lock(mu_);
  if (tunnels_.erase(id) > 0) --stats_.open;
}

void Session::count_dns_query() {
  std::lock_guard lock(mu_);
  ++stats_.dns_queries;
}

void Session::count_bytes(std::uint64_t out, std::uint64_t in) {
  std::lock_guard lock(mu_);
  stats_.bytes_out += out;
  stats_.bytes_in += in;
}

void Session::record_failure(std::string why) {
  std::lock_guard lock(mu_);
  last_failure_ = std::move(why);
}

std::string Session::last_failure() const {
  std::lock_guard lock(mu_);
  return last_failure_;
}

SessionStats Session::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::vector<Refusal> Session::last_refusals() const {
  std::lock_guard lock(mu_);
  std::vector<Refusal> out;
  out.reserve(ring_size_);
  const std::size_t start = (ring_next_ + kRefusalRing - ring_size_) % kRefusalRing;
  for (std::size_t i = 0; i < ring_size_; ++i) out.push_back(ring_[(start + i) % kRefusalRing]);
  return out;
}

}  // namespace sandcastle::net
