// Name lookups for the proxies and the DNS stub, on the proxies' loop: the
// system resolver (asio's async_resolve, i.e. getaddrinfo on asio's helper
// thread), or one DNS server of the operator's ("HOST:PORT") asked directly
// over UDP (TCP when the answer is truncated), with a bounded TTL cache.
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

class Resolver {
 public:
  using Handler = std::function<void(Result<Resolved>)>;
  // Which addresses to look up (DNS query types for kA, kAaaa).
  enum class Want : std::uint8_t { kV4, kV6, kBoth };

  virtual ~Resolver() = default;
  // "" = the system resolver; "HOST:PORT" (an IP literal, [v6] bracketed)
  // = that server. Runs on `io`, which must outlive the resolver.
  static Result<std::unique_ptr<Resolver>> make(boost::asio::io_context& io,
                                                const std::string& spec);

  // `name` is normalized (net::normalize_name). The handler runs on the
  // loop, once (not at all when the loop stops first). Call on the loop
  // thread only.
  virtual void resolve(const std::string& name, Want want, Handler handler) = 0;
};

}  // namespace sandcastle::net
