// The DNS stub (:53, UDP and TCP): answers A/AAAA for names the policy
// allows somewhere, with the addresses the policy would let a connection
// reach, and REFUSED (EDE 15 "Blocked") for every other name, which is never
// forwarded, so nothing leaks through lookups of names off the list.
#include <boost/asio/write.hpp>

#include "net/dns_wire.h"
#include "net/proxy_internal.h"
#include "net/rules.h"

namespace sandcastle::net::detail {
namespace {

// Whether a connection to `addr` for `name` could be allowed on a port an
// allow rule names for `name`; `why` gets the refusal otherwise.
bool address_ok(const Policy& policy, const std::string& name, const IpAddr& addr,
                std::span<const IpAddr> hosts, Reason& why) {
  // A name rule naming it, or in full mode (which looks up more names, see
  // served_name) an address rule covering the answer.
  const bool by_address = policy.mode == Mode::kFull;
  for (const Rule& r : policy.allow) {
    if (!r.matches_name(name) && !(by_address && r.matches_address(addr))) continue;
    const std::uint16_t port = r.ports.empty() ? 443 : r.ports.front().first;
    const Decision d = decide(policy, name, addr, port, hosts);
    if (d.allowed) return true;
    why = d.reason;
  }
  return false;
}

void on_resolved(const std::shared_ptr<AttachState>& att, const dns::Message& query,
                 const std::string& name, bool tcp, Result<Resolved> r,
                 const std::function<void(std::vector<std::uint8_t>)>& reply) {
  if (att->closed) return;
  if (!r.ok() && r.error().code == ErrorCode::kResourceExhausted) {
    // Too many lookups in flight: said at once, not after a client timeout.
    att->session->record_refusal(Via::kDns, name, "", 0, Reason::kLimit);
    return reply(
        dns::build_error(query, dns::Rcode::kServFail, dns::ede::kOther, r.error().message()));
  }
  if (!r.ok()) return reply(dns::build_error(query, dns::Rcode::kServFail));
  if (r->addrs.empty()) return reply(dns::build_nodata(query));
  Session& s = *att->session;
  const auto policy = s.policy();
  const auto hosts = att->core->host_addrs();
  std::vector<IpAddr> ok;
  Reason why = Reason::kPrivateAddress;
  for (const IpAddr& a : r->addrs)
    if (address_ok(*policy, name, a, *hosts, why)) ok.push_back(a);
  if (ok.empty()) {
    s.record_refusal(Via::kDns, name, r->addrs.front().to_string(), 0, why);
    return reply(dns::build_refused(query, dns::ede::kBlocked,
                                    std::string("Blocked (") + reason_name(why) + ")"));
  }
  const auto cap = att->core->options.dns_ttl_cap;
  const auto ttl = std::max(std::chrono::seconds(1), std::min(r->ttl, cap));
  for (const IpAddr& a : ok) s.remember(a, name, ttl);
  reply(dns::build_answer(query, ok, static_cast<std::uint32_t>(ttl.count()),
                          dns::reply_limit(query, tcp), static_cast<std::uint32_t>(cap.count())));
}

// Queries past dns_queries_per_second in the current second.
bool rate_limited(AttachState& att) {
  const auto now = std::chrono::steady_clock::now();
  if (now - att.dns_window >= std::chrono::seconds(1)) {
    att.dns_window = now;
    att.dns_in_window = 0;
  }
  return ++att.dns_in_window > att.core->options.dns_queries_per_second;
}

class DnsTcpConn final : public Conn {
 public:
  using Conn::Conn;
  void start() override {
    if (limited_) return close();
    next();
  }

 private:
  void next() {
    timer_.cancel();
    arm_head_timer();
    read_client(
        2 + dns::kMaxMessage,
        [](const std::string& in) {
          return in.size() >= 2 &&
                 in.size() >= 2 + ((std::size_t{static_cast<unsigned char>(in[0])} << 8) |
                                   std::size_t{static_cast<unsigned char>(in[1])});
        },
        [this, self = shared_from_this()] {
          const std::size_t len =
              (static_cast<unsigned char>(in_[0]) << 8) | static_cast<unsigned char>(in_[1]);
          const std::vector<std::uint8_t> query(in_.data() + 2, in_.data() + 2 + len);
          in_.erase(0, 2 + len);
          answer_dns(att_, query, true, [this, self](std::vector<std::uint8_t> answer) {
            if (closed_) return;
            auto framed = std::make_shared<std::vector<std::uint8_t>>(answer.size() + 2);
            (*framed)[0] = static_cast<std::uint8_t>(answer.size() >> 8);
            (*framed)[1] = static_cast<std::uint8_t>(answer.size());
            std::copy(answer.begin(), answer.end(), framed->begin() + 2);
            asio::async_write(client_, asio::buffer(*framed),
                              [this, self, framed](const ErrorCodeT& ec, std::size_t) {
                                if (ec || closed_) return close();
                                next();
                              });
          });
        });
  }
};

// Which names the stub looks up. Allowlist: only names a rule could allow,
// so names off the list never leave the server. Full: the sandbox already
// reaches the allowed address ranges directly, so any name not denied by
// name is looked up when an address rule exists; its answers are still
// filtered by decide() (an address outside every allowed range is dropped).
bool served_name(const Policy& policy, const std::string& name) {
  if (name_allowed_somewhere(policy, name)) return true;
  if (policy.mode != Mode::kFull) return false;
  for (const auto& r : policy.deny)
    if (r.ports.empty() && r.matches_name(name)) return false;
  for (const auto& r : policy.allow)
    if (r.kind == Rule::Kind::kAddress) return true;
  return false;
}

}  // namespace

void answer_dns(const std::shared_ptr<AttachState>& att, std::span<const std::uint8_t> wire,
                bool tcp, std::function<void(std::vector<std::uint8_t>)> reply) {
  auto msg = dns::parse(wire);
  if (!msg.ok()) {
    if (auto id = dns::peek_id(wire)) reply(dns::build_formerr(*id));
    return;
  }
  if (msg->is_response()) return;
  Session& s = *att->session;
  s.count_dns_query();
  const dns::Message& q = *msg;
  if (rate_limited(*att)) {
    s.record_refusal(Via::kDns, q.question.name, "", 0, Reason::kLimit);
    return reply(dns::build_refused(q, dns::ede::kOther, "Rate limited"));
  }
  if (q.opcode() != 0) return reply(dns::build_error(q, dns::Rcode::kNotImp));
  if (q.question.qclass != dns::kClassIn || q.question.qtype == dns::type::kPtr)
    return reply(dns::build_refused(q, dns::ede::kProhibited, "Not served"));
  const auto policy = s.policy();
  const auto name = normalize_name(q.question.name);
  if (!name || !served_name(*policy, *name)) {
    s.record_refusal(Via::kDns, q.question.name, "", 0, Reason::kDnsRefused);
    return reply(dns::build_refused(q, dns::ede::kBlocked, "Blocked"));
  }
  const std::uint16_t qtype = q.question.qtype;
  if (qtype != dns::type::kA && qtype != dns::type::kAaaa) return reply(dns::build_nodata(q));
  att->core->resolver->resolve_for(
      att->session.get(), *name, qtype == dns::type::kA ? Resolver::Want::kV4 : Resolver::Want::kV6,
      [att, q = *msg, name = *name, tcp, reply = std::move(reply)](Result<Resolved> r) {
        on_resolved(att, q, name, tcp, std::move(r), reply);
      });
}

void serve_dns_udp(const std::shared_ptr<AttachState>& att) {
  if (att->closed) return;  // close_all released the socket
  att->dns_udp->async_receive_from(
      asio::buffer(att->dns_buf), att->dns_peer, [att](const ErrorCodeT& ec, std::size_t n) {
        if (att->closed) return;
        if (ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor) return;
        if (!ec) {
          const auto peer = att->dns_peer;
          answer_dns(att, std::span(att->dns_buf.data(), n), false,
                     [att, peer](std::vector<std::uint8_t> answer) {
                       if (att->closed) return;
                       auto data = std::make_shared<std::vector<std::uint8_t>>(std::move(answer));
                       att->dns_udp->async_send_to(asio::buffer(*data), peer,
                                                   [data](const ErrorCodeT&, std::size_t) {});
                     });
        }
        serve_dns_udp(att);
      });
}

std::shared_ptr<Conn> make_dns_tcp_conn(std::shared_ptr<AttachState> att, Stream s, bool limited) {
  return std::make_shared<DnsTcpConn>(std::move(att), std::move(s), limited);
}

}  // namespace sandcastle::net::detail
