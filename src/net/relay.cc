// A connection's life after its front end read the target: decide, resolve
// once, connect to the exact address allowed, then relay, after peeking at
// the client's first bytes.
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "net/http_head.h"
#include "net/proxy_internal.h"
#include "net/rules.h"
#include "net/tls_sni.h"

namespace sandcastle::net::detail {
namespace {

using asio::ip::tcp;

constexpr std::string_view kUnrecognizedName{"\x15\x03\x01\x00\x02\x02\x70", 7};

void no_delay(Stream& s) {
  const int one = 1;
  if (s.is_open()) ::setsockopt(s.native_handle(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Whether `name` may pass without an address: an operator's (trusted) exact
// name rule on `port`: the host's proxy resolves it after our own lookup
// failed (a split horizon). Never a caller's rule: the host's proxy would
// resolve the name to whatever it likes, private addresses included.
bool exact_name_allows(const Policy& p, const std::string& name, std::uint16_t port) {
  return std::any_of(p.trusted.begin(), p.trusted.end(), [&](const Rule& r) {
    return r.kind == Rule::Kind::kName && r.matches_name(name) && r.matches_port(port);
  });
}

// The request line of a cleartext HTTP request: "TOKEN SP target SP HTTP/x".
bool looks_like_http(std::string_view first_line) {
  const auto sp1 = first_line.find(' ');
  const auto sp2 = first_line.rfind(' ');
  if (sp1 == std::string_view::npos || sp1 == 0 || sp2 == sp1) return false;
  for (char c : first_line.substr(0, sp1))
    if (c < 'A' || c > 'Z') return false;
  return first_line.substr(sp2 + 1).starts_with("HTTP/");
}

}  // namespace

Conn::Conn(std::shared_ptr<AttachState> att, Stream client, bool limited)
    : att_(std::move(att)),
      client_(std::move(client)),
      upstream_(att_->core->io),
      timer_(att_->core->io),
      limited_(limited) {
  Core& c = core();
  if (limited_) {
    ++c.limited[att_->session.get()];
  } else {
    ++c.per_session[att_->session.get()];
    ++c.total;
  }
  no_delay(client_);
  last_active_ = std::chrono::steady_clock::now();
}

Conn::~Conn() {
  Core& c = core();
  auto& map = limited_ ? c.limited : c.per_session;
  if (auto it = map.find(att_->session.get()); it != map.end() && --it->second == 0) map.erase(it);
  if (!limited_) --c.total;
  if (tunnel_id_ != 0) session().tunnel_closed(tunnel_id_);
  att_->conns.erase(this);
}

void Conn::close() {
  if (closed_) return;
  closed_ = true;
  ErrorCodeT ec;
  timer_.cancel();
  proxy_lookup_.reset();
  client_.close(ec);
  upstream_.close(ec);
}

std::string Conn::outcome_text(Outcome outcome, Reason reason, const std::string& target,
                               const std::string& message) {
  switch (outcome) {
    case Outcome::kRefused:
      return "sandcastle: " + target + " refused (" + reason_name(reason) + ")";
    case Outcome::kNoName: return "sandcastle: cannot resolve " + target + ": " + message;
    case Outcome::kUnreachable: return "sandcastle: cannot connect to " + target + ": " + message;
    case Outcome::kTimeout: return "sandcastle: connecting to " + target + " timed out";
    case Outcome::kUpstream: return "sandcastle: " + message;
    case Outcome::kOpen: break;
  }
  return "sandcastle: " + target;
}

std::string Conn::target_text() const {
  return authority(target_.host, target_.port);
}

void Conn::arm_head_timer() {
  timer_.expires_after(core().options.head_timeout);
  timer_.async_wait([self = shared_from_this()](const ErrorCodeT& ec) {
    if (!ec) self->close();
  });
}

void Conn::read_client(std::size_t max, std::function<bool(const std::string&)> enough,
                       std::function<void()> done) {
  if (enough(in_)) return done();
  if (in_.size() >= max) return close();
  auto buf = std::make_shared<std::array<char, 4096>>();
  client_.async_read_some(asio::buffer(*buf, std::min(buf->size(), max - in_.size())),
                          [self = shared_from_this(), buf, max, enough = std::move(enough),
                           done = std::move(done)](const ErrorCodeT& ec, std::size_t n) mutable {
                            if (ec || self->closed_) return self->close();
                            self->in_.append(buf->data(), n);
                            self->read_client(max, std::move(enough), std::move(done));
                          });
}

void Conn::reply_and_close(std::string data) {
  finishing_ = true;
  timer_.expires_after(core().options.head_timeout);
  timer_.async_wait([self = shared_from_this()](const ErrorCodeT& ec) {
    if (!ec) self->close();
  });
  auto msg = std::make_shared<std::string>(std::move(data));
  asio::async_write(client_, asio::buffer(*msg),
                    [self = shared_from_this(), msg](const ErrorCodeT&, std::size_t) {
                      if (self->closed_) return;
                      // Say we are done, then drain what the client still
                      // sends (so the close is not a reset) until the timer.
                      ErrorCodeT ec;
                      self->client_.shutdown(asio::socket_base::shutdown_send, ec);
                      self->drain();
                    });
}

void Conn::drain() {
  client_.async_read_some(asio::buffer(sink_),
                          [self = shared_from_this()](const ErrorCodeT& ec, std::size_t) {
                            if (ec || self->closed_) return self->close();
                            self->drain();
                          });
}

std::string Conn::failure_text(Outcome outcome, const std::string& message) const {
  const std::string to =
      via_ ? "the host's proxy " + authority(via_->host, via_->port) : target_text();
  switch (outcome) {
    case Outcome::kNoName: return "cannot resolve " + target_text() + ": " + message;
    case Outcome::kUnreachable: return "cannot connect to " + to;
    case Outcome::kTimeout: return "cannot connect to " + to + " (timed out)";
    case Outcome::kUpstream: return message;
    case Outcome::kOpen:
    case Outcome::kRefused: break;
  }
  return {};
}

void Conn::open_target(Target target, Opened done) {
  // A connection that could not be made is the session's last failure (the
  // package installer's diagnosis quotes it: installers hide the 502 body).
  done = [self = shared_from_this(), done = std::move(done)](Outcome o, Reason r,
                                                             const std::string& message) {
    if (o != Outcome::kOpen && o != Outcome::kRefused)
      self->session().record_failure(self->failure_text(o, message));
    done(o, r, message);
  };
  target_ = std::move(target);
  // Read before the policy: a change after this is seen in established().
  generation_ = session().generation();
  const auto policy = session().policy();
  const auto hosts = core().host_addrs();
  if (auto ip = IpAddr::parse(target_.host)) {
    name_ = session().name_for(*ip);
    if (name_) names_.push_back(*name_);
    const Decision d =
        session().decide(target_.via, target_text(), name_, *ip, target_.port, *hosts);
    if (!d.allowed) return done(Outcome::kRefused, d.reason, "");
    addr_ = *ip;
    return decided({*ip}, std::move(done));
  }
  const auto name = normalize_name(target_.host);
  // A name no rule names is refused before any lookup, as the DNS stub
  // refuses it: a refused name never reaches a DNS server (nothing leaks
  // through lookups), and address rules apply to addresses asked for.
  if (!name || !name_allowed_somewhere(*policy, *name)) {
    session().record_refusal(target_.via, target_text(), "", target_.port, Reason::kNotAllowed);
    return done(Outcome::kRefused, Reason::kNotAllowed, "");
  }
  name_ = *name;
  names_.push_back(*name);
  // Counted against this sandbox's cap of lookups in flight.
  core().resolver->resolve_for(
      &session(), *name, Resolver::Want::kBoth,
      [self = shared_from_this(), done = std::move(done)](Result<Resolved> r) mutable {
        if (self->closed_) return;
        self->resolved(std::move(r), std::move(done));
      });
}

void Conn::resolved(Result<Resolved> r, Opened done) {
  const auto policy = session().policy();
  const auto hosts = core().host_addrs();
  via_ = core().options.upstream.route(target_.tunnel, target_.host);
  if (!r.ok() || r->addrs.empty()) {
    // With the host's proxy, the local lookup may fail (a split horizon):
    // then only an exact name rule passes, and the host's proxy resolves.
    if (via_ && exact_name_allows(*policy, *name_, target_.port))
      return connect_via_proxy(std::move(done));
    return done(Outcome::kNoName, Reason::kAllowed, r.ok() ? "no address" : r.error().message());
  }
  std::vector<IpAddr> allowed;
  std::optional<Decision> first_refusal;
  for (const IpAddr& a : r->addrs) {
    const Decision d = decide(*policy, name_, a, target_.port, *hosts);
    if (d.allowed) {
      allowed.push_back(a);
    } else if (!first_refusal) {
      first_refusal = d;
    }
  }
  const IpAddr& shown = allowed.empty() ? r->addrs.front() : allowed.front();
  // Counts and records once, on the address shown.
  const Decision d =
      session().decide(target_.via, target_text(), name_, shown, target_.port, *hosts);
  if (allowed.empty() || !d.allowed) return done(Outcome::kRefused, d.reason, "");
  addr_ = allowed.front();
  // A TLS name or Host may also be the name the DNS stub gave this address.
  for (const IpAddr& a : allowed)
    if (auto mapped = session().name_for(a);
        mapped && std::find(names_.begin(), names_.end(), *mapped) == names_.end())
      names_.push_back(*mapped);
  decided(std::move(allowed), std::move(done));
}

void Conn::decided(std::vector<IpAddr> allowed, Opened done) {
  via_ = core().options.upstream.route(target_.tunnel, target_.host);
  arm_connect_timer();
  if (via_) return connect_via_proxy(std::move(done));
  connect_next(std::move(allowed), 0, target_.port, std::move(done));
}

void Conn::arm_connect_timer() {
  timer_.expires_after(core().options.connect_timeout);
  timer_.async_wait([self = shared_from_this()](const ErrorCodeT& ec) {
    if (ec || self->closed_) return;
    self->timed_out_ = true;
    ErrorCodeT ignored;
    self->upstream_.close(ignored);
    self->proxy_lookup_.reset();
  });
}

void Conn::connect_next(std::vector<IpAddr> addrs, std::size_t i, std::uint16_t port, Opened done) {
  if (timed_out_) return done(Outcome::kTimeout, Reason::kAllowed, "connect timed out");
  if (i >= addrs.size()) return done(Outcome::kUnreachable, Reason::kAllowed, last_error_);
  const tcp::endpoint ep(to_asio(addrs[i]), port);
  ErrorCodeT ec;
  upstream_.close(ec);
  upstream_.open(asio::generic::stream_protocol(ep.protocol().family(), IPPROTO_TCP), ec);
  if (ec) return done(Outcome::kUnreachable, Reason::kAllowed, ec.message());
  upstream_.async_connect(asio::generic::stream_protocol::endpoint(ep),
                          [self = shared_from_this(), addrs = std::move(addrs), i, port,
                           done = std::move(done)](const ErrorCodeT& e) mutable {
                            if (self->closed_) return;
                            if (e) {
                              self->last_error_ = e.message();
                              return self->connect_next(std::move(addrs), i + 1, port,
                                                        std::move(done));
                            }
                            if (self->via_) return self->proxy_handshake(std::move(done));
                            if (!self->via_) self->addr_ = addrs[i];
                            self->established(std::move(done));
                          });
}

void Conn::connect_via_proxy(Opened done) {
  if (auto ip = IpAddr::parse(via_->host)) {
    return connect_next({*ip}, 0, via_->port, std::move(done));
  }
  proxy_lookup_ = std::make_shared<tcp::resolver>(core().io);
  proxy_lookup_->async_resolve(
      via_->host, std::to_string(via_->port),
      [self = shared_from_this(), keep = proxy_lookup_, done = std::move(done)](
          const ErrorCodeT& ec, const tcp::resolver::results_type& results) mutable {
        if (self->closed_) return;
        std::vector<IpAddr> addrs;
        if (!ec)
          for (const auto& e : results) addrs.push_back(from_asio(e.endpoint().address()));
        if (addrs.empty())
          self->last_error_ = "cannot resolve the host's proxy " + self->via_->host;
        self->connect_next(std::move(addrs), 0, self->via_->port, std::move(done));
      });
}

void Conn::proxy_handshake(Opened done) {
  // Always a tunnel, to the address decided on (a name only on the trusted
  // path above): the host's proxy must not resolve the name again, which
  // could give it an address decide() never saw (rebinding, a second A
  // record). Plain requests then go through it in origin form.
  const std::string auth = addr_ ? authority(addr_->to_string(), target_.port) : target_text();
  auto req = std::make_shared<std::string>(
      "CONNECT " + auth + " HTTP/1.1\r\nHost: " + auth + "\r\n" +
      (via_->authorization.empty() ? "" : "Proxy-Authorization: " + via_->authorization + "\r\n") +
      "\r\n");
  asio::async_write(upstream_, asio::buffer(*req),
                    [self = shared_from_this(), req, done = std::move(done)](const ErrorCodeT& ec,
                                                                             std::size_t) mutable {
                      if (self->closed_) return;
                      if (ec) return done(Outcome::kUnreachable, Reason::kAllowed, ec.message());
                      self->read_proxy_reply(std::move(done));
                    });
}

void Conn::read_proxy_reply(Opened done) {
  const std::string proxy = authority(via_->host, via_->port);
  if (const auto end = early_.find("\r\n\r\n"); end != std::string::npos) {
    std::string status = early_.substr(0, std::min(early_.find("\r\n"), std::size_t{200}));
    const auto sp = status.find(' ');
    if (sp == std::string::npos || status.compare(sp + 1, 1, "2") != 0) {
      for (auto& c : status)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
      return done(
          Outcome::kUpstream, Reason::kAllowed,
          "the host's proxy " + proxy + " refused CONNECT " + target_text() + " (" + status + ")");
    }
    early_.erase(0, end + 4);
    return established(std::move(done));
  }
  if (early_.size() > kMaxHead)
    return done(Outcome::kUpstream, Reason::kAllowed,
                "the host's proxy " + proxy + " sent no reply");
  auto buf = std::make_shared<std::array<char, 4096>>();
  upstream_.async_read_some(
      asio::buffer(*buf), [self = shared_from_this(), buf, proxy, done = std::move(done)](
                              const ErrorCodeT& ec, std::size_t n) mutable {
        if (self->closed_) return;
        if (ec)
          return done(self->timed_out_ ? Outcome::kTimeout : Outcome::kUpstream, Reason::kAllowed,
                      "the host's proxy " + proxy + " closed the connection");
        self->early_.append(buf->data(), n);
        self->read_proxy_reply(std::move(done));
      });
}

void Conn::established(Opened done) {
  timer_.cancel();
  no_delay(upstream_);
  // The rules changed while this connection was being made: set_policy did
  // not see it (it registers only now), so decide again under the new ones.
  if (addr_ && session().generation() != generation_) {
    const Decision d =
        decide(*session().policy(), name_, *addr_, target_.port, *core().host_addrs());
    if (!d.allowed) {
      session().record_refusal(target_.via, target_text(), addr_->to_string(), target_.port,
                               Reason::kRuleRemoved);
      return done(Outcome::kRefused, Reason::kRuleRemoved, "");
    }
  }
  if (addr_) {
    std::function<void()> close_fn = [core = att_->core_ref, weak = weak_from_this()] {
      if (auto c = core.lock()) {
        asio::post(c->io, [weak] {
          if (auto conn = weak.lock()) conn->close();
        });
      }
    };
    tunnel_id_ = session().tunnel_opened(
        TunnelTarget{.name = name_, .addr = *addr_, .port = target_.port, .via = target_.via},
        std::move(close_fn));
  }
  done(Outcome::kOpen, Reason::kAllowed, "");
}

void Conn::relay(std::string to_upstream, std::string to_client, bool peek) {
  timer_.cancel();
  if (peek) {
    peek_ = std::move(in_);
  } else {
    to_upstream += in_;
  }
  in_.clear();
  auto up = std::make_shared<std::string>(std::move(to_upstream));
  auto down = std::make_shared<std::string>(std::move(to_client) + early_);
  early_.clear();
  asio::async_write(client_, asio::buffer(*down),
                    [self = shared_from_this(), up, down, peek](const ErrorCodeT& ec, std::size_t) {
                      if (ec || self->closed_) return self->close();
                      asio::async_write(
                          self->upstream_, asio::buffer(*up),
                          [self, up, peek](const ErrorCodeT& e, std::size_t) {
                            if (e || self->closed_) return self->close();
                            self->touch();
                            self->arm_idle();
                            self->pump(false);
                            if (!peek) return self->pump(true);
                            // No deadline of its own: a client that stays
                            // silent (a server-speaks-first protocol) is
                            // checked when it does speak; the idle timeout
                            // bounds the wait. Passing unchecked after a
                            // while would let a patient client through.
                            self->peek_more();
                          });
                    });
}

Conn::Peek Conn::peek_check() {
  const auto bytes = std::span(reinterpret_cast<const std::uint8_t*>(peek_.data()), peek_.size());
  const SniResult sni = peek_sni(bytes);
  auto known = [&](std::string_view name) {
    const auto n = normalize_name(name);
    return names_.empty() || (n && std::find(names_.begin(), names_.end(), *n) != names_.end());
  };
  switch (sni.status) {
    case SniStatus::kNeedMore: return peek_.size() >= kPeekMax ? Peek::kBadSni : Peek::kMore;
    case SniStatus::kNone: return Peek::kPass;
    case SniStatus::kMalformed: peek_name_ = "(malformed ClientHello)"; return Peek::kBadSni;
    case SniStatus::kName:
      peek_name_ = sni.name;
      return known(sni.name) ? Peek::kPass : Peek::kBadSni;
    case SniStatus::kNotTls: break;
  }
  // Cleartext: only an HTTP request is checked (its Host).
  if (peek_.empty() || peek_[0] < 'A' || peek_[0] > 'Z') return Peek::kPass;
  const auto eol = peek_.find("\r\n");
  if (eol == std::string::npos) return peek_.size() >= kPeekMax ? Peek::kPass : Peek::kMore;
  if (!looks_like_http(std::string_view(peek_).substr(0, eol))) return Peek::kPass;
  bool complete = false;
  auto head = parse_head(peek_, &complete);
  if (!complete) return peek_.size() >= kPeekMax ? Peek::kBadHost : Peek::kMore;
  const auto host = head ? header_value(head->fields, "host") : std::nullopt;
  std::string h;
  std::uint16_t port = 0;
  peek_name_ = host.value_or("(no Host)");
  if (!host || !split_host_port(*host, target_.port, h, port)) return Peek::kBadHost;
  return known(h) ? Peek::kPass : Peek::kBadHost;
}

void Conn::peek_more() {
  switch (peek_check()) {
    case Peek::kPass: return peek_pass();
    case Peek::kBadSni:
      session().record_refusal(Via::kTls, peek_name_, addr_ ? addr_->to_string() : "", target_.port,
                               Reason::kSniMismatch);
      return refuse_in_tunnel(std::string(kUnrecognizedName));
    case Peek::kBadHost:
      session().record_refusal(Via::kHttp, peek_name_, addr_ ? addr_->to_string() : "",
                               target_.port, Reason::kHostMismatch);
      return refuse_in_tunnel(plain_reply(
          "403 Forbidden", "sandcastle: Host " + peek_name_ + " is not the tunnel's target " +
                               target_text() + " (host_mismatch)\n"));
    case Peek::kMore: break;
  }
  auto buf = std::make_shared<std::array<char, 4096>>();
  client_.async_read_some(asio::buffer(*buf, std::min(buf->size(), kPeekMax + 1 - peek_.size())),
                          [self = shared_from_this(), buf](const ErrorCodeT& ec, std::size_t n) {
                            if (self->closed_ || self->finishing_) return;
                            if (ec) return self->close();
                            self->touch();
                            self->peek_.append(buf->data(), n);
                            self->peek_more();
                          });
}

void Conn::peek_pass() {
  auto data = std::make_shared<std::string>(std::move(peek_));
  peek_.clear();
  session().count_bytes(data->size(), 0);
  asio::async_write(upstream_, asio::buffer(*data),
                    [self = shared_from_this(), data](const ErrorCodeT& ec, std::size_t) {
                      if (ec || self->closed_) return self->close();
                      self->pump(true);
                    });
}

void Conn::refuse_in_tunnel(std::string reply) {
  ErrorCodeT ec;
  upstream_.close(ec);
  reply_and_close(std::move(reply));
}

void Conn::pump(bool to_upstream) {
  const int d = to_upstream ? 0 : 1;
  Stream& from = to_upstream ? client_ : upstream_;
  if (bufs_[d].empty()) bufs_[d].resize(kRelayBuffer);
  from.async_read_some(asio::buffer(bufs_[d]), [self = shared_from_this(), to_upstream, d](
                                                   const ErrorCodeT& ec, std::size_t n) {
    if (self->closed_ || self->finishing_) return;
    Stream& to = to_upstream ? self->upstream_ : self->client_;
    if (ec == asio::error::eof) {
      // Half-close: pass the end on, keep the other direction going.
      ErrorCodeT ignored;
      to.shutdown(asio::socket_base::shutdown_send, ignored);
      self->done_[d] = true;
      if (self->done_[0] && self->done_[1]) self->close();
      return;
    }
    if (ec) return self->close();
    self->touch();
    self->session().count_bytes(to_upstream ? n : 0, to_upstream ? 0 : n);
    asio::async_write(to, asio::buffer(self->bufs_[d].data(), n),
                      [self, to_upstream](const ErrorCodeT& e, std::size_t) {
                        if (self->closed_ || self->finishing_) return;
                        if (e) return self->close();
                        self->pump(to_upstream);
                      });
  });
}

void Conn::touch() {
  last_active_ = std::chrono::steady_clock::now();
}

void Conn::arm_idle() {
  timer_.expires_at(last_active_ + core().options.idle_timeout);
  timer_.async_wait([self = shared_from_this()](const ErrorCodeT& ec) {
    if (ec || self->closed_ || self->finishing_) return;
    if (std::chrono::steady_clock::now() - self->last_active_ >= self->core().options.idle_timeout)
      return self->close();
    self->arm_idle();
  });
}

}  // namespace sandcastle::net::detail
