// Name lookups for the proxies and the DNS stub, on the proxies' loop: the
// system resolver (getaddrinfo on a small pool of threads the resolver owns,
// shared fairly between sandboxes), or one DNS server of the operator's
// ("HOST:PORT") asked directly over UDP (TCP when the answer is truncated),
// with a bounded TTL cache. Lookups in flight are capped per sandbox and per
// server, and identical ones in flight are asked once.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "net/address.h"

namespace sandcastle::net {

boost::asio::ip::address to_asio(const IpAddr& addr);
IpAddr from_asio(const boost::asio::ip::address& addr);

struct Resolved {
  std::vector<IpAddr> addrs{};  // empty: the name has no address of that type
  std::chrono::seconds ttl{0};  // the smallest TTL of the answers (the system resolver: 30 s)
};

constexpr std::size_t kResolverCacheMax = 4096;  // (name, type) entries
constexpr auto kResolverTimeout = std::chrono::seconds(2);
constexpr int kResolverTries = 2;
// Lookups in flight (distinct name and type): per sandbox, and per server. Past either, a lookup
// fails at once with kResourceExhausted: the DNS stub answers SERVFAIL (EDE "Other"), the proxies
// 502 / SOCKS "host unreachable", each saying the limit was hit.
constexpr std::size_t kLookupsPerSandbox = 32;
constexpr std::size_t kLookupsPerServer = 256;
// Waiters on one lookup in flight (asking the same name again joins it).
constexpr std::size_t kLookupWaitersMax = 1024;
// The system resolver's getaddrinfo threads; one sandbox holds at most
// kSystemLookupThreadsPerSandbox of them, so one stays free for the others.
constexpr std::size_t kSystemLookupThreads = 4;
constexpr std::size_t kSystemLookupThreadsPerSandbox = 3;

struct ResolverLimits {
  std::size_t per_tenant = kLookupsPerSandbox;
  std::size_t total = kLookupsPerServer;
};

class Resolver {
 public:
  using Handler = std::function<void(Result<Resolved>)>;
  // Which addresses to look up (DNS query types for kA, kAaaa).
  enum class Want : std::uint8_t { kV4, kV6, kBoth };

  // Whose lookup (the session): the per-sandbox cap and the system pool's
  // fairness count by it. nullptr: nobody's (the server's cap only).
  using Tenant = const void*;
  // The system resolver's blocking call (getaddrinfo), run on its pool.
  using BlockingLookup = std::function<Result<Resolved>(const std::string& name, Want want)>;

  virtual ~Resolver() = default;
  // "" = the system resolver; "HOST:PORT" (an IP literal, [v6] bracketed)
  // = that server. Runs on `io`, which must outlive the resolver; destroy it
  // on the loop thread or once the loop has stopped.
  static Result<std::unique_ptr<Resolver>> make(boost::asio::io_context& io,
                                                const std::string& spec,
                                                ResolverLimits limits = {});
  // The system resolver with `lookup` in place of getaddrinfo (tests).
  static std::unique_ptr<Resolver> make_system(boost::asio::io_context& io, BlockingLookup lookup,
                                               ResolverLimits limits = {});

  // `name` is normalized (net::normalize_name). The handler runs on the
  // loop, once, never inside this call (not at all when the loop stops or
  // the resolver goes first). Call on the loop thread only.
  virtual void resolve_for(Tenant tenant, const std::string& name, Want want, Handler handler) = 0;
  // Nobody's lookup (the server's cap only).
  void resolve(const std::string& name, Want want, Handler handler) {
    resolve_for(nullptr, name, want, std::move(handler));
  }
};

}  // namespace sandcastle::net
