// ProxyService under pressure: a sandbox past its cap of DNS lookups in
// flight (the DNS stub and the proxies say so at once, a neighbour is
// served), and attachments destroyed while the service stops.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <random>
#include <thread>

#include "net/dns_wire.h"
#include "net/proxy_service.h"
#include "net/resolver.h"
#include "unit/net/net_test_servers.h"

namespace sandcastle::net {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace)

std::shared_ptr<Session> session(const std::string& id) {
  auto p = make_policy(Mode::kAllowList, {"allowed.test:443", "*.stall.test:443"}, {});
  EXPECT_TRUE(p.ok()) << p.error().message();
  return std::make_shared<Session>(id, *p);
}

struct Attached {
  std::shared_ptr<Session> session;
  std::unique_ptr<Attachment> attachment;
  std::uint16_t http = 0, dns_udp = 0;
};

Attached attach(ProxyService& svc, const std::string& id) {
  Attached a{.session = session(id), .attachment = nullptr};
  Listeners l;
  l.http = tcp_listener(a.http);
  l.dns_udp = udp_socket(a.dns_udp);
  auto att = svc.attach(a.session, std::move(l));
  EXPECT_TRUE(att.ok()) << att.error().message();
  if (att.ok()) a.attachment = std::move(*att);
  return a;
}

// A UDP client of one sandbox's DNS stub.
class DnsClient {
 public:
  explicit DnsClient(std::uint16_t port) : port_(port), s_(::socket(AF_INET, SOCK_DGRAM, 0)) {
    timeval tv{.tv_sec = 5, .tv_usec = 0};
    ::setsockopt(s_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  void send(std::uint16_t id, const std::string& name) {
    auto q = dns::build_query(id, name, dns::type::kA, true);
    sockaddr_in a = loopback(port_);
    ::sendto(s_.get(), q->data(), q->size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  std::optional<dns::Message> receive() {
    std::vector<std::uint8_t> buf(65536);
    const ssize_t n = ::recv(s_.get(), buf.data(), buf.size(), 0);
    if (n <= 0) return std::nullopt;
    auto m = dns::parse(std::span(buf.data(), static_cast<std::size_t>(n)));
    if (!m.ok()) return std::nullopt;
    return *m;
  }

 private:
  std::uint16_t port_;
  UniqueFd s_;
};

std::string stalled(int i) {
  return "s" + std::to_string(i) + ".stall.test";
}

TEST(ProxyLookupLimits, PastItsCapASandboxIsToldAtOnceAndANeighbourIsServed) {
  DnsResponder dns({{"allowed.test", {IpAddr::v4({198, 51, 100, 2})}}}, {}, false, ".stall.test");
  auto svc = ProxyService::start({.resolver = dns.address()});
  ASSERT_TRUE(svc.ok()) << svc.error().message();
  Attached a = attach(**svc, "sb-a");
  Attached b = attach(**svc, "sb-b");

  // Names whose server never answers: each holds one of a's lookups.
  DnsClient client(a.dns_udp);
  const int cap = static_cast<int>(kLookupsPerSandbox);
  for (int i = 0; i < cap; ++i) client.send(static_cast<std::uint16_t>(i), stalled(i));
  client.send(1000, stalled(cap));
  // The stalled ones would answer after 2 x kResolverTimeout; this one at once.
  auto over = client.receive();
  ASSERT_TRUE(over.has_value());
  EXPECT_EQ(over->id, 1000);
  EXPECT_EQ(over->rcode(), dns::Rcode::kServFail);
  EXPECT_EQ(over->ede_code, dns::ede::kOther);
  EXPECT_EQ(over->ede_text, "too many DNS lookups in flight for this sandbox (limit 32)");
  EXPECT_EQ(dns.asked(stalled(cap)), 0);
  EXPECT_EQ(a.session->last_refusals().back().reason, Reason::kLimit);

  // The proxies share the cap: a CONNECT that needs a lookup is a 502 now.
  UniqueFd c = dial(a.http);
  send_all(c.get(), "CONNECT s99.stall.test:443 HTTP/1.1\r\nHost: s99.stall.test:443\r\n\r\n");
  const std::string reply = read_all(c.get());
  EXPECT_NE(reply.find("HTTP/1.1 502 "), std::string::npos) << reply;
  EXPECT_NE(reply.find("too many DNS lookups in flight for this sandbox (limit 32)"),
            std::string::npos)
      << reply;

  // SOCKS has no text to carry: "host unreachable", as for a failed lookup.
  Listeners socks_l;
  std::uint16_t socks_port = 0;
  socks_l.socks = tcp_listener(socks_port);
  auto socks_att = (*svc)->attach(a.session, std::move(socks_l));
  ASSERT_TRUE(socks_att.ok());
  UniqueFd sc = dial(socks_port);
  send_all(sc.get(), std::string("\x05\x01\x00", 3));
  EXPECT_EQ(read_until(sc.get(), "", 2), std::string("\x05\x00", 2));
  const std::string host = "s98.stall.test";
  send_all(sc.get(), std::string("\x05\x01\x00\x03", 4) + static_cast<char>(host.size()) + host +
                         std::string("\x01\xbb", 2));
  const std::string rep = read_until(sc.get(), "", 10);
  ASSERT_GE(rep.size(), 2U);
  EXPECT_EQ(rep[1], '\x04');
  EXPECT_EQ(dns.asked(host), 0);

  // The neighbour's lookups go through, while a's still wait.
  DnsClient nb(b.dns_udp);
  nb.send(7, "allowed.test");
  auto answer = nb.receive();
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->rcode(), dns::Rcode::kNoError);
  ASSERT_EQ(answer->answers.size(), 1U);
  EXPECT_EQ(dns.asked(stalled(0)), 1);  // a's first is still on its first try
}

// Destroying an attachment while the service stops must never hang (it
// once could: the close was posted after the loop's last turn).
TEST(ProxyServiceShutdown, AttachmentsDestroyedWhileTheServiceStopsNeverHang) {
  std::mt19937 rng(std::random_device{}());
  for (int round = 0; round < 200; ++round) {
    auto svc = ProxyService::start({.resolver = "127.0.0.1:9"});
    ASSERT_TRUE(svc.ok());
    Attached a = attach(**svc, "sb-race");
    ASSERT_TRUE(a.attachment);
    std::atomic<int> ready{0};
    const int spin_a = static_cast<int>(rng() % 2000), spin_s = static_cast<int>(rng() % 2000);
    auto spin = [](int n) {  // a random head start, to vary who goes first
      std::atomic<int> x{0};
      for (int i = 0; i < n; ++i) x.fetch_add(1, std::memory_order_relaxed);
    };
    auto done = std::async(std::launch::async, [&] {
      std::thread t([&] {
        ++ready;
        while (ready.load() < 2) {
        }
        spin(spin_a);
        a.attachment.reset();
      });
      ++ready;
      while (ready.load() < 2) {
      }
      spin(spin_s);
      svc->reset();
      t.join();
    });
    if (done.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      ADD_FAILURE() << "round " << round << ": destroying hung";
      std::abort();  // the hung threads cannot be joined
    }
  }
}

TEST(ProxyServiceShutdown, AnAttachmentMayOutliveTheService) {
  auto svc = ProxyService::start({.resolver = "127.0.0.1:9"});
  ASSERT_TRUE(svc.ok());
  Attached a = attach(**svc, "sb-late");
  svc->reset();
  EXPECT_FALSE(dial(a.http, 1000));  // closed with the service
  a.attachment.reset();              // returns at once
}

}  // namespace
}  // namespace sandcastle::net
