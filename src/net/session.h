// One sandbox's network state as the server keeps it: the live policy, the
// open tunnels (so a rule change can close the ones it no longer allows),
// the DNS map (address -> the name the stub answered with), counters and the
// last refusals. Pure bookkeeping, thread-safe; the I/O is ProxyService's.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "net/address.h"
#include "net/rules.h"

namespace sandcastle::net {

constexpr std::size_t kRefusalRing = 20;  // last refusals kept per sandbox
constexpr std::size_t kDnsMapMax = 4096;  // addresses remembered per sandbox
constexpr int kRefusalLogPerMinute = 10;  // then one summary line

// How a connection reached the policy.
enum class Via : std::uint8_t { kHttp, kConnect, kSocks, kDns, kTls, kFirewall };
const char* via_name(Via via);

struct Refusal {
  std::chrono::system_clock::time_point at{};
  Via via = Via::kConnect;
  std::string target{};   // what the client asked for: a name or a literal (bounded, printable)
  std::string address{};  // the address decided on, "" when none was resolved
  std::uint16_t port = 0;
  Reason reason = Reason::kNotAllowed;
};

struct SessionStats {
  std::uint64_t allowed = 0;  // connections let through
  std::uint64_t refused = 0;  // all refusals (connections and DNS)
  std::map<Reason, std::uint64_t> refused_by_reason{};
  std::uint64_t dns_queries = 0;
  std::uint64_t bytes_out = 0;  // sandbox -> world
  std::uint64_t bytes_in = 0;   // world -> sandbox
  std::uint32_t open = 0;       // tunnels open now
};

// What an open tunnel was decided on; kept so a new policy can re-decide it.
struct TunnelTarget {
  std::optional<std::string> name{};  // normalized name the decision used
  IpAddr addr{};
  std::uint16_t port = 0;
  Via via = Via::kConnect;
};

class Session {
 public:
  using Clock = std::chrono::steady_clock;
  // `log_id` names the sandbox in log lines and metrics.
  Session(std::string log_id, std::shared_ptr<const Policy> policy);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const std::string& id() const { return id_; }
  Mode mode() const;
  std::shared_ptr<const Policy> policy() const;
  std::uint64_t generation() const;

  // Swaps the policy (its mode must equal the current one) and re-decides
  // every open tunnel; those no longer allowed are closed through their
  // close function and recorded as rule_removed. Returns how many closed.
  std::size_t set_policy(std::shared_ptr<const Policy> policy, std::span<const IpAddr> host_addrs);

  // Decides and counts: an allowed decision counts as allowed, a refusal is
  // recorded (ring, counters, rate-limited log line).
  Decision decide(Via via, std::string_view target, std::optional<std::string_view> name,
                  const IpAddr& addr, std::uint16_t port, std::span<const IpAddr> host_addrs);
  // A refusal decided elsewhere (limits, SNI/Host mismatch, DNS REFUSED).
  void record_refusal(Via via, std::string_view target, std::string_view address,
                      std::uint16_t port, Reason reason);

  // The DNS map: `addr` was answered for `name` and stays mapped until
  // `ttl` + 60 s from now; at most kDnsMapMax entries (oldest dropped).
  void remember(const IpAddr& addr, std::string_view name, std::chrono::seconds ttl);
  std::optional<std::string> name_for(const IpAddr& addr) const;

  // An open tunnel; `close` is called (from any thread, at most once) when
  // a new policy refuses it. The returned id goes to tunnel_closed.
  std::uint64_t tunnel_opened(TunnelTarget target, std::function<void()> close);
  void tunnel_closed(std::uint64_t id);
  void count_dns_query();
  void count_bytes(std::uint64_t out, std::uint64_t in);

  // Why the last allowed connection could not be made ("cannot connect to
  // h:p", "the host's proxy ... refused CONNECT ..."): a one-line text the
  // package installer's diagnosis quotes. "" until one failed.
  void record_failure(std::string why);
  std::string last_failure() const;

  SessionStats stats() const;
  std::vector<Refusal> last_refusals() const;  // oldest first

 private:
  struct Tunnel {
    TunnelTarget target;
    std::function<void()> close;
  };
  struct Mapped {
    std::string name;
    Clock::time_point until;
  };
  void record_locked(Refusal refusal);

  const std::string id_;
  mutable std::mutex mu_;
  std::shared_ptr<const Policy> policy_;
  std::uint64_t generation_ = 1;
  std::map<std::uint64_t, Tunnel> tunnels_;
  std::uint64_t next_tunnel_ = 1;
  std::map<IpAddr, Mapped> dns_map_;
  SessionStats stats_;
  std::string last_failure_;
  std::array<Refusal, kRefusalRing> ring_{};
  std::size_t ring_next_ = 0, ring_size_ = 0;
  Clock::time_point log_window_{};
  int logged_in_window_ = 0, suppressed_ = 0;
};

}  // namespace sandcastle::net
