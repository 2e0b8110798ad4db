#include "net/resolver.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#include "common/crypto.h"
#include "net/dns_wire.h"
#include "net/http_head.h"
#include "net/lookup_pool.h"
#include "net/rules.h"

namespace sandcastle::net {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using asio::ip::udp;
using Clock = std::chrono::steady_clock;

constexpr auto kSystemTtl = std::chrono::seconds(30);
constexpr auto kNegativeTtl = std::chrono::seconds(30);

std::uint16_t random_id() {
  const std::string b = crypto::random_bytes(2);
  return static_cast<std::uint16_t>((static_cast<unsigned char>(b[0]) << 8) |
                                    static_cast<unsigned char>(b[1]));
}

// Joins the A and AAAA halves of a kBoth lookup: IPv4 first (what works
// on more hosts), the smaller TTL, an error only when both failed.
struct Join {
  Resolver::Handler done;
  int pending = 2;
  Resolved v4, v6;
  int oks = 0;
  std::optional<Error> error;
  void add(bool is_v4, Result<Resolved> r) {
    if (r.ok()) {
      (is_v4 ? v4 : v6) = std::move(*r);
      ++oks;
    } else if (!error) {
      error = r.error();
    }
    if (--pending > 0) return;
    if (oks == 0) return done(*error);
    Resolved out = std::move(v4);
    out.addrs.insert(out.addrs.end(), v6.addrs.begin(), v6.addrs.end());
    if (v6.ttl.count() > 0 && (out.ttl.count() == 0 || v6.ttl < out.ttl)) out.ttl = v6.ttl;
    done(std::move(out));
  }
};

// getaddrinfo for one family (or both), as asio's resolver asked it.
Result<Resolved> system_lookup(const std::string& name, Resolver::Want want) {
  addrinfo hints{};
  hints.ai_family = want == Resolver::Want::kV4   ? AF_INET
                    : want == Resolver::Want::kV6 ? AF_INET6
                                                  : AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  const int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &list);
  Resolved out{.addrs = {}, .ttl = kSystemTtl};
  if (rc == EAI_NONAME || rc == EAI_NODATA || rc == EAI_ADDRFAMILY) return out;
  if (rc == EAI_SYSTEM) return Error::from_errno("lookup failed");
  if (rc != 0)
    return Error::make(ErrorCode::kUnavailable,
                       std::string("lookup failed: ") + ::gai_strerror(rc));
  for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    std::optional<IpAddr> a;
    if (ai->ai_family == AF_INET) {
      const auto* sa = reinterpret_cast<const sockaddr_in*>(ai->ai_addr);
      std::array<std::uint8_t, 4> b{};
      std::memcpy(b.data(), &sa->sin_addr, b.size());
      a = IpAddr::v4(b);
    } else if (ai->ai_family == AF_INET6) {
      const auto* sa = reinterpret_cast<const sockaddr_in6*>(ai->ai_addr);
      std::array<std::uint8_t, 16> b{};
      std::memcpy(b.data(), &sa->sin6_addr, b.size());
      a = IpAddr::v6(b);
    }
    if (a && std::find(out.addrs.begin(), out.addrs.end(), *a) == out.addrs.end())
      out.addrs.push_back(*a);
  }
  ::freeaddrinfo(list);
  return out;
}

// getaddrinfo blocks (for up to the resolv.conf timeouts when a name's server
// never answers), so it runs on the resolver's own small pool, fairly shared
// between tenants, and the answer is posted back to the loop.
class SystemResolver final : public Resolver {
 public:
  SystemResolver(asio::io_context& io, BlockingLookup lookup)
      : io_(io),
        lookup_(lookup ? std::move(lookup) : BlockingLookup(&system_lookup)),
        pool_(kSystemLookupThreads, kSystemLookupThreadsPerSandbox, kLookupsPerServer) {}
  ~SystemResolver() override {
    alive_.reset();  // answers posted from now on are dropped; pool_ joins next
  }

  void resolve_for(Tenant tenant, const std::string& name, Want want, Handler handler) override {
    const std::uint64_t id = next_id_++;
    pending_.emplace(id, std::move(handler));
    const std::weak_ptr<char> alive = alive_;
    const bool queued = pool_.submit(tenant, [this, id, name, want, alive] {
      // On a pool thread: lookup_ and io_ outlive it (the pool joins first).
      Result<Resolved> r = lookup_(name, want);
      asio::post(io_, [this, id, alive, r = std::move(r)]() mutable {
        if (alive.expired()) return;  // the resolver is gone
        answer(id, std::move(r));
      });
    });
    if (!queued)
      asio::post(io_, [this, id, alive] {
        if (!alive.expired())
          answer(id, Error::make(ErrorCode::kResourceExhausted, "too many lookups queued"));
      });
  }

 private:
  void answer(std::uint64_t id, Result<Resolved> r) {
    auto node = pending_.extract(id);
    if (!node.empty()) node.mapped()(std::move(r));
  }

  asio::io_context& io_;
  const BlockingLookup lookup_;
  std::shared_ptr<char> alive_ = std::make_shared<char>();
  std::map<std::uint64_t, Handler> pending_;  // loop only
  std::uint64_t next_id_ = 1;
  LookupPool pool_;  // last: its threads are joined before the rest goes
};

class DnsResolver;

// One question to the server: UDP, 2 s x 2 tries, then TCP on truncation.
class Query : public std::enable_shared_from_this<Query> {
 public:
  Query(asio::io_context& io, udp::endpoint server, std::string name, std::uint16_t qtype,
        Resolver::Handler done)
      : server_(std::move(server)),
        name_(std::move(name)),
        qtype_(qtype),
        done_(std::move(done)),
        udp_(io),
        tcp_(io),
        timer_(io) {}

  void start() { send_udp(); }

 private:
  void send_udp() {
    boost::system::error_code ec;
    udp_.close(ec);
    // A fresh socket and id per try: the kernel picks a random source port.
    udp_.open(server_.protocol(), ec);
    if (!ec) udp_.connect(server_, ec);
    auto wire = dns::build_query(id_ = random_id(), name_, qtype_, true);
    if (ec || !wire.ok()) return finish(Error::make(ErrorCode::kUnavailable, "cannot query"));
    query_ = std::move(*wire);
    ++tries_;
    auto self = shared_from_this();
    udp_.async_send(asio::buffer(query_), [self](const boost::system::error_code&, std::size_t) {});
    receive_udp();
    timer_.expires_after(kResolverTimeout);
    timer_.async_wait([self](const boost::system::error_code& e) {
      if (e || self->finished_) return;
      if (self->tries_ < kResolverTries) return self->send_udp();
      self->finish(Error::make(ErrorCode::kTimeout, "the resolver did not answer"));
    });
  }

  void receive_udp() {
    auto self = shared_from_this();
    udp_.async_receive(asio::buffer(buf_),
                       [self](const boost::system::error_code& ec, std::size_t n) {
                         if (ec || self->finished_) return;  // a closed socket or a retry's
                         if (!self->take(std::span(self->buf_.data(), n), false))
                           self->receive_udp();
                       });
  }

  void query_tcp() {
    timer_.cancel();
    boost::system::error_code ec;
    udp_.close(ec);
    timer_.expires_after(kResolverTimeout);
    auto self = shared_from_this();
    timer_.async_wait([self](const boost::system::error_code& e) {
      if (e || self->finished_) return;
      self->finish(Error::make(ErrorCode::kTimeout, "the resolver did not answer over TCP"));
    });
    tcp_.async_connect(tcp::endpoint(server_.address(), server_.port()),
                       [self](const boost::system::error_code& e) {
                         if (e || self->finished_) return self->fail_tcp();
                         self->framed_.resize(2 + self->query_.size());
                         self->framed_[0] = static_cast<std::uint8_t>(self->query_.size() >> 8);
                         self->framed_[1] = static_cast<std::uint8_t>(self->query_.size());
                         std::copy(self->query_.begin(), self->query_.end(),
                                   self->framed_.begin() + 2);
                         asio::async_write(self->tcp_, asio::buffer(self->framed_),
                                           [self](const boost::system::error_code& w, std::size_t) {
                                             if (w) return self->fail_tcp();
                                             self->read_tcp();
                                           });
                       });
  }

  void read_tcp() {
    auto self = shared_from_this();
    asio::async_read(tcp_, asio::buffer(buf_.data(), 2),
                     [self](const boost::system::error_code& e, std::size_t) {
                       if (e) return self->fail_tcp();
                       const std::size_t len = (std::size_t{self->buf_[0]} << 8) | self->buf_[1];
                       asio::async_read(
                           self->tcp_, asio::buffer(self->buf_.data(), len),
                           [self, len](const boost::system::error_code& r, std::size_t) {
                             if (r) return self->fail_tcp();
                             if (!self->take(std::span(self->buf_.data(), len), true))
                               self->fail_tcp();
                           });
                     });
  }

  void fail_tcp() {
    if (!finished_)
      finish(Error::make(ErrorCode::kUnavailable, "the resolver's TCP answer failed"));
  }

  // True when the message ended the query (answered or failed).
  bool take(std::span<const std::uint8_t> wire, bool tcp) {
    auto msg = dns::parse(wire);
    if (!msg.ok() || msg->id != id_ || !msg->is_response() || msg->question.qtype != qtype_ ||
        normalize_name(msg->question.name) != name_)
      return false;  // not the answer to this query: keep waiting
    if (msg->truncated() && !tcp) {
      query_tcp();
      return true;
    }
    if (msg->rcode() == dns::Rcode::kNxDomain) {
      finish(Resolved{.addrs = {}, .ttl = kNegativeTtl});
      return true;
    }
    if (msg->rcode() != dns::Rcode::kNoError) {
      finish(Error::make(ErrorCode::kUnavailable, "the resolver answered with an error"));
      return true;
    }
    Resolved out{.addrs = {}, .ttl = std::chrono::seconds(0)};
    for (const auto& rec : msg->answers) {
      if (rec.rtype != qtype_ || !rec.address) continue;
      out.addrs.push_back(*rec.address);
      const auto ttl = std::chrono::seconds(rec.ttl);
      if (out.ttl.count() == 0 || ttl < out.ttl) out.ttl = ttl;
    }
    if (out.addrs.empty()) out.ttl = kNegativeTtl;
    finish(std::move(out));
    return true;
  }

  void finish(Result<Resolved> r) {
    if (finished_) return;
    finished_ = true;
    timer_.cancel();
    boost::system::error_code ec;
    udp_.close(ec);
    tcp_.close(ec);
    auto done = std::move(done_);
    done(std::move(r));
  }

  udp::endpoint server_;
  std::string name_;
  std::uint16_t qtype_;
  Resolver::Handler done_;
  udp::socket udp_;
  tcp::socket tcp_;
  asio::steady_timer timer_;
  std::uint16_t id_ = 0;
  int tries_ = 0;
  bool finished_ = false;
  std::vector<std::uint8_t> query_, framed_;
  std::array<std::uint8_t, dns::kMaxMessage> buf_{};
};

class DnsResolver final : public Resolver {
 public:
  DnsResolver(asio::io_context& io, udp::endpoint server) : io_(io), server_(std::move(server)) {}

  void resolve_for(Tenant, const std::string& name, Want want, Handler handler) override {
    if (want != Want::kBoth)
      return one(name, want == Want::kV4 ? dns::type::kA : dns::type::kAaaa, std::move(handler));
    auto join = std::make_shared<Join>();
    join->done = std::move(handler);
    one(name, dns::type::kA, [join](Result<Resolved> r) { join->add(true, std::move(r)); });
    one(name, dns::type::kAaaa, [join](Result<Resolved> r) { join->add(false, std::move(r)); });
  }

 private:
  using Key = std::pair<std::string, std::uint16_t>;
  struct Entry {
    Resolved value;
    Clock::time_point until;
  };

  void one(const std::string& name, std::uint16_t qtype, Handler handler) {
    const Key key{name, qtype};
    const auto now = Clock::now();
    if (auto it = cache_.find(key); it != cache_.end()) {
      if (it->second.until > now) {
        Resolved r = it->second.value;
        r.ttl = std::max(std::chrono::seconds(1),
                         std::chrono::duration_cast<std::chrono::seconds>(it->second.until - now));
        return asio::post(io_, [handler = std::move(handler), r = std::move(r)]() mutable {
          handler(std::move(r));
        });
      }
      cache_.erase(it);
    }
    auto q = std::make_shared<Query>(io_, server_, name, qtype,
                                     [this, alive = std::weak_ptr<char>(alive_), key,
                                      handler = std::move(handler)](Result<Resolved> r) {
                                       if (alive.expired()) return;  // the resolver went first
                                       if (r.ok()) store(key, *r);
                                       handler(std::move(r));
                                     });
    q->start();
  }

  void store(const Key& key, const Resolved& r) {
    if (r.ttl.count() <= 0) return;
    const auto now = Clock::now();
    if (cache_.size() >= kResolverCacheMax) {
      std::erase_if(cache_, [&](const auto& e) { return e.second.until <= now; });
      if (cache_.size() >= kResolverCacheMax) cache_.erase(cache_.begin());
    }
    cache_[key] = Entry{.value = r, .until = now + r.ttl};
  }

  asio::io_context& io_;
  udp::endpoint server_;
  std::map<Key, Entry> cache_;
  std::shared_ptr<char> alive_ = std::make_shared<char>();
};

}  // namespace

boost::asio::ip::address to_asio(const IpAddr& a) {
  if (a.is_v4()) {
    boost::asio::ip::address_v4::bytes_type b{};
    std::copy(a.bytes().begin(), a.bytes().end(), b.begin());
    return boost::asio::ip::address_v4(b);
  }
  boost::asio::ip::address_v6::bytes_type b{};
  std::copy(a.bytes().begin(), a.bytes().end(), b.begin());
  return boost::asio::ip::address_v6(b);
}

IpAddr from_asio(const boost::asio::ip::address& a) {
  if (a.is_v4()) return IpAddr::v4(a.to_v4().to_bytes());
  return IpAddr::v6(a.to_v6().to_bytes());
}

namespace {

// RFC 6761: "localhost" and every name below it are loopback, answered here
// and never sent to a DNS server (which may not know them, or may say
// otherwise), so the policy sees loopback and refuses it as such.
class LocalhostResolver final : public Resolver {
 public:
  LocalhostResolver(asio::io_context& io, std::unique_ptr<Resolver> next)
      : io_(io), next_(std::move(next)) {}
  void resolve_for(Tenant tenant, const std::string& name, Want want, Handler handler) override {
    if (name != "localhost" && !name.ends_with(".localhost")) {
      next_->resolve_for(tenant, name, want, std::move(handler));
      return;
    }
    Resolved r;
    r.ttl = std::chrono::seconds(30);
    if (want != Want::kV6) r.addrs.push_back(IpAddr::v4({127, 0, 0, 1}));
    if (want != Want::kV4) r.addrs.push_back(*IpAddr::parse("::1"));
    asio::post(io_, [h = std::move(handler), r = std::move(r)]() mutable { h(std::move(r)); });
  }

 private:
  asio::io_context& io_;
  std::unique_ptr<Resolver> next_;
};

// The caps and the sharing of identical lookups, in front of the rest: one
// tenant's slow names cost it its own cap, never unbounded queued work.
class LimitedResolver final : public Resolver {
 public:
  LimitedResolver(asio::io_context& io, std::unique_ptr<Resolver> next, ResolverLimits limits)
      : io_(io), next_(std::move(next)), limits_(limits) {}

  void resolve_for(Tenant tenant, const std::string& name, Want want, Handler handler) override {
    Key key{name, want};
    auto it = inflight_.find(key);
    // A tenant's lookups are the distinct questions it waits for: asking
    // again one it waits for already costs no lookup, only a waiter.
    const bool new_for_tenant =
        tenant != nullptr && (it == inflight_.end() || !it->second.tenants.contains(tenant));
    if (new_for_tenant && count_of(tenant) >= limits_.per_tenant)
      return refuse(std::move(handler), "for this sandbox", limits_.per_tenant);
    if (it == inflight_.end() && inflight_.size() >= limits_.total)
      return refuse(std::move(handler), "on this server", limits_.total);
    if (it != inflight_.end() && it->second.waiters.size() >= kLookupWaitersMax)
      return refuse(std::move(handler), "for one name", kLookupWaitersMax);
    if (new_for_tenant) ++per_tenant_[tenant];
    const bool start = it == inflight_.end();
    Inflight& entry = start ? inflight_[key] : it->second;
    if (tenant != nullptr) entry.tenants.insert(tenant);
    entry.waiters.push_back(std::move(handler));
    if (!start) return;  // the same question is out already: wait for its answer
    next_->resolve_for(tenant, name, want,
                       [this, alive = std::weak_ptr<char>(alive_), key](Result<Resolved> r) {
                         if (!alive.expired()) answer(key, std::move(r));
                       });
  }

 private:
  using Key = std::pair<std::string, Want>;
  struct Inflight {
    std::vector<Handler> waiters;
    std::set<Tenant> tenants;  // whose cap it counts against
  };

  std::size_t count_of(Tenant tenant) const {
    auto it = per_tenant_.find(tenant);
    return it == per_tenant_.end() ? 0 : it->second;
  }

  void refuse(Handler handler, const char* where, std::size_t limit) {
    auto e = Error::make(ErrorCode::kResourceExhausted, "too many DNS lookups in flight " +
                                                            std::string(where) + " (limit " +
                                                            std::to_string(limit) + ")");
    asio::post(io_, [alive = std::weak_ptr<char>(alive_), h = std::move(handler), e] {
      if (!alive.expired()) h(e);
    });
  }

  void answer(const Key& key, Result<Resolved> r) {
    auto node = inflight_.extract(key);
    if (node.empty()) return;
    for (Tenant t : node.mapped().tenants) {
      auto c = per_tenant_.find(t);
      if (c != per_tenant_.end() && --c->second == 0) per_tenant_.erase(c);
    }
    for (Handler& h : node.mapped().waiters) h(r);
  }

  asio::io_context& io_;
  std::unique_ptr<Resolver> next_;
  const ResolverLimits limits_;
  std::map<Key, Inflight> inflight_;
  std::map<Tenant, std::size_t> per_tenant_;  // distinct lookups each waits for
  std::shared_ptr<char> alive_ = std::make_shared<char>();
};

std::unique_ptr<Resolver> wrap(asio::io_context& io, std::unique_ptr<Resolver> lookup,
                               ResolverLimits limits) {
  return std::make_unique<LimitedResolver>(
      io, std::make_unique<LocalhostResolver>(io, std::move(lookup)), limits);
}

}  // namespace

Result<std::unique_ptr<Resolver>> Resolver::make(asio::io_context& io, const std::string& spec,
                                                 ResolverLimits limits) {
  if (spec.empty() || spec == "system") return make_system(io, {}, limits);
  std::string host;
  std::uint16_t port = 0;
  std::optional<IpAddr> addr;
  if (split_host_port(spec, 53, host, port)) addr = IpAddr::parse(host);
  if (!addr)
    return Error::make(ErrorCode::kInvalidArgument,
                       "network.resolver must be HOST:PORT with an IP address (\"" + spec + "\")");
  return wrap(io, std::make_unique<DnsResolver>(io, udp::endpoint(to_asio(*addr), port)), limits);
}

std::unique_ptr<Resolver> Resolver::make_system(asio::io_context& io, BlockingLookup lookup,
                                                ResolverLimits limits) {
  return wrap(io, std::make_unique<SystemResolver>(io, std::move(lookup)), limits);
}

}  // namespace sandcastle::net
