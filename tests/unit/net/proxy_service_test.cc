#include "net/proxy_service.h"

#include <gtest/gtest.h>
#include <spdlog/fmt/fmt.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "net/dns_wire.h"
#include "net/http_head.h"
#include "unit/net/client_hello_fixture.h"
#include "unit/net/net_test_servers.h"
#include "unit/net/net_test_util.h"

namespace sandcastle::net {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace)

using namespace test_util;  // ip(): an address literal

std::string bytes_of(std::span<const std::uint8_t> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

class ProxyServiceTest : public ::testing::Test {
 protected:
  // allowed.test, x.test and loop.test resolve to 127.0.0.1 (reachable only
  // on the echo port, by the address rule); far.test to a test-net address.
  void SetUp() override { start({}); }

  void start(ProxyOptions opts, std::vector<std::string> extra_rules = {}) {
    attachment_.reset();
    service_.reset();
    opts.resolver = dns_.address();
    auto svc = ProxyService::start(opts);
    ASSERT_TRUE(svc.ok()) << svc.error().message();
    service_ = std::move(*svc);
    const std::string echo = std::to_string(echo_.port());
    std::vector<std::string> rules = {"allowed.test:" + echo, "x.test:" + echo,
                                      "127.0.0.1/32:" + echo, "far.test:443", "loop.test:443"};
    rules.insert(rules.end(), extra_rules.begin(), extra_rules.end());
    session_ = std::make_shared<Session>("sb-test", test_util::allow_policy(rules));
    Listeners l;
    l.http = tcp_listener(http_port_);
    l.socks = tcp_listener(socks_port_);
    l.dns_tcp = tcp_listener(dns_tcp_port_);
    l.dns_udp = udp_socket(dns_udp_port_);
    auto att = service_->attach(session_, std::move(l));
    ASSERT_TRUE(att.ok()) << att.error().message();
    attachment_ = std::move(*att);
  }

  std::string echo_target(const std::string& host) const {
    return host + ":" + std::to_string(echo_.port());
  }

  // CONNECT; returns the socket and the proxy's reply head.
  UniqueFd connect_via_http(const std::string& target, std::string& reply) {
    UniqueFd c = dial(http_port_);
    send_all(c.get(), "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n");
    reply = read_until(c.get(), "\r\n\r\n");
    return c;
  }

  std::string refused_body(const std::string& target) {
    std::string reply;
    UniqueFd c = connect_via_http(target, reply);
    return reply + read_all(c.get());
  }

  dns::Message ask_udp(const std::string& name, std::uint16_t qtype) {
    auto q = dns::build_query(0x1234, name, qtype, true);
    UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    timeval tv{.tv_sec = 5, .tv_usec = 0};
    ::setsockopt(s.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in a = loopback(dns_udp_port_);
    ::sendto(s.get(), q->data(), q->size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
    std::vector<std::uint8_t> buf(65536);
    const ssize_t n = ::recv(s.get(), buf.data(), buf.size(), 0);
    EXPECT_GT(n, 0);
    auto m = dns::parse(std::span(buf.data(), n > 0 ? static_cast<std::size_t>(n) : 0));
    EXPECT_TRUE(m.ok());
    return m.ok() ? *m : dns::Message{};
  }

  // An abstract AF_UNIX listener named `prefix` + pid (its address in `a`,
  // `len`) attached as the HTTP proxy's, as the engine backend attaches one.
  std::unique_ptr<Attachment> attach_abstract(const std::string& prefix, sockaddr_un& a,
                                              socklen_t& len) {
    UniqueFd l(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    a = sockaddr_un{};
    a.sun_family = AF_UNIX;
    const std::string name = prefix + std::to_string(::getpid());
    std::memcpy(a.sun_path + 1, name.data(), name.size());
    len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    EXPECT_EQ(::bind(l.get(), reinterpret_cast<sockaddr*>(&a), len), 0);
    EXPECT_EQ(::listen(l.get(), 8), 0);
    Listeners ls;
    ls.http = std::move(l);
    auto att = service_->attach(session_, std::move(ls));
    if (!att.ok()) {
      ADD_FAILURE() << att.error().message();
      return nullptr;
    }
    return std::move(*att);
  }

  DnsResponder dns_{{{"allowed.test", {ip("127.0.0.1")}},
                     {"x.test", {ip("127.0.0.1")}},
                     {"loop.test", {ip("127.0.0.1")}},
                     {"far.test", {ip("198.51.100.9")}}}};
  EchoServer echo_;
  std::unique_ptr<ProxyService> service_;
  std::shared_ptr<Session> session_;
  std::unique_ptr<Attachment> attachment_;
  std::uint16_t http_port_ = 0, socks_port_ = 0, dns_tcp_port_ = 0, dns_udp_port_ = 0;
};

TEST_F(ProxyServiceTest, ConnectTunnelsToTheAllowedAddress) {
  std::string reply;
  UniqueFd c = connect_via_http(echo_target("allowed.test"), reply);
  EXPECT_EQ(reply, "HTTP/1.1 200 Connection established\r\n\r\n");
  send_all(c.get(), "ping\n");
  EXPECT_EQ(read_until(c.get(), "\n"), "ping\n");
  EXPECT_EQ(session_->stats().open, 1U);
  EXPECT_EQ(session_->stats().allowed, 1U);
}

TEST_F(ProxyServiceTest, RefusalsAre403sNamingTargetAndReason) {
  EXPECT_NE(refused_body("other.test:443").find("403 Forbidden"), std::string::npos);
  EXPECT_NE(refused_body("other.test:443").find("sandcastle: other.test:443 refused (not_allowed)"),
            std::string::npos);
  EXPECT_NE(
      refused_body("far.test:8080").find("sandcastle: far.test:8080 refused (port_not_allowed)"),
      std::string::npos);
  // The name is allowed, its address is loopback: no rule lifts that on 443.
  EXPECT_NE(
      refused_body("loop.test:443").find("sandcastle: loop.test:443 refused (private_address)"),
      std::string::npos);
  EXPECT_NE(refused_body("127.0.0.1:22").find("refused (private_address)"), std::string::npos);
  // A name no rule names is never looked up.
  EXPECT_EQ(dns_.asked("other.test"), 0);
  auto ring = session_->last_refusals();
  ASSERT_EQ(ring.size(), 5U);
  EXPECT_EQ(ring[0].reason, Reason::kNotAllowed);
  EXPECT_EQ(ring[2].reason, Reason::kPortNotAllowed);
  EXPECT_EQ(ring[2].address, "198.51.100.9");
  EXPECT_EQ(ring[3].reason, Reason::kPrivateAddress);
}

TEST_F(ProxyServiceTest, AbsoluteFormNeedsHostToBeTheUrlsAuthority) {
  UniqueFd c = dial(http_port_);
  const std::string t = echo_target("allowed.test");
  send_all(c.get(), "GET http://" + t + "/x HTTP/1.1\r\nHost: " + t +
                        "\r\nProxy-Connection: keep-alive\r\n\r\n");
  const std::string got = read_until(c.get(), "\r\n\r\n");
  EXPECT_EQ(got, "GET /x HTTP/1.1\r\nHost: " + t + "\r\nConnection: close\r\n\r\n");

  UniqueFd d = dial(http_port_);
  send_all(d.get(), "GET http://" + t + "/x HTTP/1.1\r\nHost: other.test\r\n\r\n");
  const std::string refused = read_all(d.get());
  EXPECT_NE(refused.find("403 Forbidden"), std::string::npos);
  EXPECT_NE(refused.find("host_mismatch"), std::string::npos);
  EXPECT_EQ(session_->last_refusals().back().reason, Reason::kHostMismatch);
}

TEST_F(ProxyServiceTest, HostInsideATunnelMustBeTheTarget) {
  std::string reply;
  UniqueFd c = connect_via_http(echo_target("allowed.test"), reply);
  ASSERT_NE(reply.find(" 200 "), std::string::npos);
  send_all(c.get(), "GET / HTTP/1.1\r\nHost: other.test\r\n\r\n");
  const std::string got = read_all(c.get());
  EXPECT_NE(got.find("HTTP/1.1 403 Forbidden"), std::string::npos) << got;
  EXPECT_EQ(session_->last_refusals().back().reason, Reason::kHostMismatch);

  UniqueFd ok = connect_via_http(echo_target("allowed.test"), reply);
  const std::string req = "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n";
  send_all(ok.get(), req);
  EXPECT_EQ(read_until(ok.get(), "\r\n\r\n"), req);
}

TEST_F(ProxyServiceTest, TlsServerNameMustBeTheTarget) {
  const std::string hello = bytes_of(fixtures::kHelloSni);  // SNI allowed.test
  std::string reply;
  UniqueFd ok = connect_via_http(echo_target("allowed.test"), reply);
  send_all(ok.get(), hello);
  EXPECT_EQ(read_until(ok.get(), "", hello.size()), hello);

  UniqueFd bad = connect_via_http(echo_target("x.test"), reply);
  ASSERT_NE(reply.find(" 200 "), std::string::npos);
  send_all(bad.get(), hello);
  EXPECT_EQ(read_all(bad.get()), std::string("\x15\x03\x01\x00\x02\x02\x70", 7));
  const auto last = session_->last_refusals().back();
  EXPECT_EQ(last.reason, Reason::kSniMismatch);
  EXPECT_EQ(last.target, "allowed.test");

  // Without a server name it passes.
  UniqueFd none = connect_via_http(echo_target("x.test"), reply);
  const std::string no_sni = bytes_of(fixtures::kHelloNoSni);
  send_all(none.get(), no_sni);
  EXPECT_EQ(read_until(none.get(), "", no_sni.size()), no_sni);
}

// The first bytes are checked whenever they come: a client that waits out
// the head timeout is not let through unchecked, and a quiet client's first
// bytes (a server-speaks-first protocol) are relayed, none lost.
TEST_F(ProxyServiceTest, AClientThatWaitsIsStillChecked) {
  start(ProxyOptions{.head_timeout = std::chrono::milliseconds(100)});
  const std::string hello = bytes_of(fixtures::kHelloSni);  // SNI allowed.test
  std::string reply;
  UniqueFd bad = connect_via_http(echo_target("x.test"), reply);
  ASSERT_NE(reply.find(" 200 "), std::string::npos);
  UniqueFd quiet = connect_via_http(echo_target("allowed.test"), reply);
  ASSERT_NE(reply.find(" 200 "), std::string::npos);
  // Longer than the head timeout: the time is what is under test here.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  send_all(bad.get(), hello);
  EXPECT_EQ(read_all(bad.get()), std::string("\x15\x03\x01\x00\x02\x02\x70", 7));
  EXPECT_EQ(session_->last_refusals().back().reason, Reason::kSniMismatch);
  send_all(quiet.get(), "SSH-2.0-late\r\n");
  EXPECT_EQ(read_until(quiet.get(), "\r\n"), "SSH-2.0-late\r\n");
}

TEST_F(ProxyServiceTest, AnIpLiteralTakesItsNameFromTheDnsMap) {
  EXPECT_EQ(ask_udp("x.test", dns::type::kA).answers.size(), 1U);
  EXPECT_EQ(session_->name_for(ip("127.0.0.1")), "x.test");
  std::string reply;
  UniqueFd c = connect_via_http(echo_target("127.0.0.1"), reply);
  ASSERT_NE(reply.find(" 200 "), std::string::npos);
  send_all(c.get(), bytes_of(fixtures::kHelloSni));  // allowed.test, not x.test
  EXPECT_EQ(read_all(c.get()), std::string("\x15\x03\x01\x00\x02\x02\x70", 7));
}

TEST_F(ProxyServiceTest, SocksConnectsAndRefuses) {
  auto handshake = [&](const std::string& host, std::uint16_t port, char cmd = 0x01) {
    UniqueFd c = dial(socks_port_);
    send_all(c.get(), std::string("\x05\x01\x00", 3));
    EXPECT_EQ(read_until(c.get(), "", 2), std::string("\x05\x00", 2));
    std::string req{0x05, cmd, 0x00, 0x03, static_cast<char>(host.size())};
    req += host;
    req.push_back(static_cast<char>(port >> 8));
    req.push_back(static_cast<char>(port & 0xff));
    send_all(c.get(), req);
    return c;
  };
  UniqueFd ok = handshake("allowed.test", echo_.port());
  const std::string rep = read_until(ok.get(), "", 10);
  ASSERT_EQ(rep.size(), 10U);
  EXPECT_EQ(rep[1], 0x00);
  send_all(ok.get(), "hi");
  EXPECT_EQ(read_until(ok.get(), "", 2), "hi");

  UniqueFd refused = handshake("other.test", 443);
  EXPECT_EQ(read_until(refused.get(), "", 10)[1], 0x02);
  UniqueFd bind = handshake("allowed.test", echo_.port(), 0x02);
  EXPECT_EQ(read_until(bind.get(), "", 10)[1], 0x07);

  // An IPv6 address: ::1 is loopback, refused.
  UniqueFd v6 = dial(socks_port_);
  send_all(v6.get(), std::string("\x05\x01\x00", 3));
  EXPECT_EQ(read_until(v6.get(), "", 2), std::string("\x05\x00", 2));
  std::string req{0x05, 0x01, 0x00, 0x04};
  req.append(15, '\0');
  req += std::string{0x01, 0x01, static_cast<char>(0xbb)};  // ::1 port 443
  send_all(v6.get(), req);
  EXPECT_EQ(read_until(v6.get(), "", 10)[1], 0x02);
  EXPECT_EQ(session_->last_refusals().back().address, "::1");
  EXPECT_EQ(session_->last_refusals().back().reason, Reason::kPrivateAddress);
}

TEST_F(ProxyServiceTest, DnsRefusesNamesOffTheListWithoutAskingAnyone) {
  const dns::Message m = ask_udp("other.test", dns::type::kA);
  EXPECT_EQ(m.rcode(), dns::Rcode::kRefused);
  EXPECT_EQ(m.ede_code, dns::ede::kBlocked);
  EXPECT_EQ(dns_.asked("other.test"), 0);
  EXPECT_EQ(session_->last_refusals().back().reason, Reason::kDnsRefused);
}

TEST_F(ProxyServiceTest, DnsAnswersAllowedNamesWithACappedTtl) {
  const dns::Message m = ask_udp("allowed.test", dns::type::kA);
  EXPECT_EQ(m.rcode(), dns::Rcode::kNoError);
  ASSERT_EQ(m.answers.size(), 1U);
  EXPECT_EQ(m.answers[0].address, ip("127.0.0.1"));
  EXPECT_LE(m.answers[0].ttl, 30U);
  EXPECT_EQ(session_->name_for(ip("127.0.0.1")), "allowed.test");
  // Other types: NODATA; PTR: REFUSED.
  const dns::Message txt = ask_udp("allowed.test", 16);
  EXPECT_EQ(txt.rcode(), dns::Rcode::kNoError);
  EXPECT_TRUE(txt.answers.empty());
  EXPECT_EQ(ask_udp("1.0.0.127.in-addr.arpa", dns::type::kPtr).rcode(), dns::Rcode::kRefused);
  // No AAAA record: NODATA.
  const dns::Message aaaa = ask_udp("allowed.test", dns::type::kAaaa);
  EXPECT_EQ(aaaa.rcode(), dns::Rcode::kNoError);
  EXPECT_TRUE(aaaa.answers.empty());
}

TEST_F(ProxyServiceTest, DnsRefusesAnAllowedNameWhoseAddressIsPrivate) {
  const dns::Message m = ask_udp("loop.test", dns::type::kA);
  EXPECT_EQ(m.rcode(), dns::Rcode::kRefused);
  EXPECT_EQ(session_->last_refusals().back().reason, Reason::kPrivateAddress);
  EXPECT_FALSE(session_->name_for(ip("127.0.0.1")).has_value());
}

TEST_F(ProxyServiceTest, DnsOverTcp) {
  auto q = dns::build_query(7, "allowed.test", dns::type::kA, false);
  UniqueFd c = dial(dns_tcp_port_);
  std::string framed{static_cast<char>(q->size() >> 8), static_cast<char>(q->size() & 0xff)};
  framed.append(q->begin(), q->end());
  send_all(c.get(), framed + framed);  // two queries on one connection
  for (int i = 0; i < 2; ++i) {
    const std::string len = read_until(c.get(), "", 2);
    ASSERT_EQ(len.size(), 2U);
    const std::size_t n =
        (std::size_t{static_cast<unsigned char>(len[0])} << 8) | static_cast<unsigned char>(len[1]);
    const std::string body = read_until(c.get(), "", n);
    auto m = dns::parse(std::span(reinterpret_cast<const std::uint8_t*>(body.data()), body.size()));
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->id, 7);
    EXPECT_EQ(m->answers.size(), 1U);
  }
}

TEST_F(ProxyServiceTest, AHalfCloseIsPassedOn) {
  std::string reply;
  UniqueFd c = connect_via_http(echo_target("allowed.test"), reply);
  ASSERT_NE(reply.find(" 200 "), std::string::npos);
  send_all(c.get(), "last words");
  ::shutdown(c.get(), SHUT_WR);
  // The echo server sees the end, answers, and closes: all of it comes back.
  EXPECT_EQ(read_all(c.get()), "last words");
}

TEST_F(ProxyServiceTest, AnIdleTunnelIsClosed) {
  start(ProxyOptions{.idle_timeout = std::chrono::milliseconds(200)});
  std::string reply;
  UniqueFd c = connect_via_http(echo_target("allowed.test"), reply);
  ASSERT_NE(reply.find(" 200 "), std::string::npos);
  send_all(c.get(), "x");  // past the peek
  ASSERT_EQ(read_until(c.get(), "", 1), "x");
  const auto before = std::chrono::steady_clock::now();
  char b = 0;
  EXPECT_EQ(::recv(c.get(), &b, 1, 0), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(2));
}

TEST_F(ProxyServiceTest, DnsQueriesPastTheRateAreRefused) {
  start(ProxyOptions{.dns_queries_per_second = 2});
  EXPECT_EQ(ask_udp("allowed.test", dns::type::kA).rcode(), dns::Rcode::kNoError);
  EXPECT_EQ(ask_udp("allowed.test", dns::type::kA).rcode(), dns::Rcode::kNoError);
  // The window opened with the first query, a second ago at most.
  EXPECT_EQ(ask_udp("allowed.test", dns::type::kA).rcode(), dns::Rcode::kRefused);
  EXPECT_EQ(session_->last_refusals().back().reason, Reason::kLimit);
}

TEST_F(ProxyServiceTest, GarbageIsClosedOrAnsweredWithFormErr) {
  UniqueFd c = dial(http_port_);
  send_all(c.get(), std::string(kMaxHead + 100, 'A'));  // no end of head in sight
  EXPECT_EQ(read_all(c.get()), "");

  UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  timeval tv{.tv_sec = 5, .tv_usec = 0};
  ::setsockopt(s.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in a = loopback(dns_udp_port_);
  const std::uint8_t two_questions[] = {0xab, 0xcd, 0x01, 0x00, 0x00, 0x02, 0, 0, 0, 0, 0, 0};
  ::sendto(s.get(), two_questions, sizeof two_questions, 0, reinterpret_cast<sockaddr*>(&a),
           sizeof a);
  std::uint8_t buf[512];
  const ssize_t n = ::recv(s.get(), buf, sizeof buf, 0);
  ASSERT_GE(n, 12);
  EXPECT_EQ(buf[0], 0xab);
  EXPECT_EQ(buf[1], 0xcd);
  EXPECT_EQ(buf[3] & 0x0f, 1);  // FORMERR
}

TEST_F(ProxyServiceTest, ANewPolicyClosesAnOpenTunnelAtOnce) {
  std::string reply;
  UniqueFd c = connect_via_http(echo_target("allowed.test"), reply);
  send_all(c.get(), "a");
  ASSERT_EQ(read_until(c.get(), "", 1), "a");
  const auto before = std::chrono::steady_clock::now();
  EXPECT_EQ(session_->set_policy(test_util::allow_policy({"far.test:443"}), service_->host_addrs()),
            1U);
  timeval tv{.tv_sec = 1, .tv_usec = 0};
  ::setsockopt(c.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char b = 0;
  EXPECT_EQ(::recv(c.get(), &b, 1, 0), 0);  // EOF, not the timeout
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(1));
  EXPECT_EQ(session_->last_refusals().back().reason, Reason::kRuleRemoved);
}

TEST_F(ProxyServiceTest, TwoHundredConcurrentTunnels) {
  constexpr int kN = 200;
  std::vector<UniqueFd> conns;
  for (int i = 0; i < kN; ++i) {
    conns.push_back(dial(http_port_));
    const std::string t = echo_target("allowed.test");
    ASSERT_TRUE(send_all(conns.back().get(), "CONNECT " + t + " HTTP/1.1\r\n\r\n"));
  }
  int errors = 0;
  for (auto& c : conns)
    if (read_until(c.get(), "\r\n\r\n") != "HTTP/1.1 200 Connection established\r\n\r\n") ++errors;
  auto token = [](int i) { return fmt::format("n{};", i); };
  for (int i = 0; i < kN; ++i) send_all(conns[i].get(), token(i));
  for (int i = 0; i < kN; ++i) {
    const std::string want = token(i);
    if (read_until(conns[i].get(), ";") != want) ++errors;
  }
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(session_->stats().open, static_cast<std::uint32_t>(kN));
}

TEST_F(ProxyServiceTest, PastTheSandboxLimitIs503) {
  start(ProxyOptions{.max_per_sandbox = 2});
  std::string reply;
  UniqueFd a = connect_via_http(echo_target("allowed.test"), reply);
  UniqueFd b = connect_via_http(echo_target("allowed.test"), reply);
  ASSERT_NE(reply.find(" 200 "), std::string::npos);
  const std::string third = refused_body(echo_target("allowed.test"));
  EXPECT_NE(third.find("503 Service Unavailable"), std::string::npos) << third;
  EXPECT_EQ(session_->last_refusals().back().reason, Reason::kLimit);
}

// A client that closes its tunnel before sending a byte (while the proxy
// waits to peek at it) frees its slot at once, not at the head timeout.
TEST_F(ProxyServiceTest, ATunnelClosedBeforeItsFirstByteFreesItsSlotAtOnce) {
  start(ProxyOptions{.max_per_sandbox = 1});
  std::string reply;
  UniqueFd a = connect_via_http(echo_target("allowed.test"), reply);
  ASSERT_NE(reply.find(" 200 "), std::string::npos);
  a.reset();
  for (int i = 0; i < 100 && service_->open_connections() != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(service_->open_connections(), 0U);
  EXPECT_EQ(session_->stats().open, 0U);
  UniqueFd b = connect_via_http(echo_target("allowed.test"), reply);
  EXPECT_NE(reply.find(" 200 "), std::string::npos) << reply;
}

TEST_F(ProxyServiceTest, DestroyingTheAttachmentClosesEverything) {
  std::string reply;
  UniqueFd c = connect_via_http(echo_target("allowed.test"), reply);
  ASSERT_NE(reply.find(" 200 "), std::string::npos);
  attachment_.reset();
  char b = 0;
  EXPECT_EQ(::recv(c.get(), &b, 1, 0), 0);
  EXPECT_FALSE(dial(http_port_));  // the listener is closed
  for (int i = 0; i < 100 && service_->open_connections() != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(service_->open_connections(), 0U);
  EXPECT_EQ(session_->stats().open, 0U);
}

TEST_F(ProxyServiceTest, AttachChecksTheListeners) {
  std::uint16_t port = 0;
  Listeners wide;
  wide.http = tcp_listener(port, INADDR_ANY);
  auto r = service_->attach(session_, std::move(wide));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  Listeners unbound;
  unbound.socks = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  auto u = service_->attach(session_, std::move(unbound));
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.error().code, ErrorCode::kInvalidArgument);
  Listeners udp_as_tcp;
  udp_as_tcp.http = udp_socket(port);
  EXPECT_FALSE(service_->attach(session_, std::move(udp_as_tcp)).ok());
}

TEST_F(ProxyServiceTest, AnAbstractUnixListenerServesLikeTheTcpOne) {
  sockaddr_un a{};
  socklen_t len = 0;
  auto att = attach_abstract("sandcastle-proxy-test-", a, len);
  ASSERT_NE(att, nullptr);
  UniqueFd c(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_EQ(::connect(c.get(), reinterpret_cast<sockaddr*>(&a), len), 0);
  timeval tv{.tv_sec = 5, .tv_usec = 0};
  ::setsockopt(c.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  send_all(c.get(), "CONNECT " + echo_target("allowed.test") + " HTTP/1.1\r\n\r\n");
  EXPECT_EQ(read_until(c.get(), "\r\n\r\n"), "HTTP/1.1 200 Connection established\r\n\r\n");
  send_all(c.get(), "u");
  EXPECT_EQ(read_until(c.get(), "", 1), "u");
}

// "GET\thttp://10.0.0.5/\tx http://allowed.test/ HTTP/1.1" is one method
// here and two words to a lenient parser further on: a method is a token.
TEST_F(ProxyServiceTest, AMethodThatIsNotATokenIsABadRequest) {
  UniqueFd c = dial(http_port_);
  send_all(c.get(), "GET\thttp://10.0.0.5/\tx http://" + echo_target("allowed.test") +
                        "/ HTTP/1.1\r\nHost: " + echo_target("allowed.test") + "\r\n\r\n");
  EXPECT_EQ(read_until(c.get(), "\r\n").rfind("HTTP/1.1 400 ", 0), 0U);
}

TEST_F(ProxyServiceTest, AnAbstractUnixListenerServesOnlyThisProcess) {
  sockaddr_un a{};
  socklen_t len = 0;
  auto att = attach_abstract("sandcastle-proxy-stranger-", a, len);
  ASSERT_NE(att, nullptr);
  // Another process (a local user who found the name in /proc/net/unix):
  // its connection is closed unanswered. Plain syscalls only in the child.
  const std::string request = "CONNECT " + echo_target("allowed.test") + " HTTP/1.1\r\n\r\n";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int c = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(c, reinterpret_cast<sockaddr*>(&a), len) != 0) ::_exit(2);
    // The server may have closed it already: no SIGPIPE, and a reset counts
    // as closed as much as an EOF does.
    (void)!::send(c, request.data(), request.size(), MSG_NOSIGNAL);
    char b[64];
    ::_exit(::read(c, b, sizeof b) <= 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the stranger got an answer";
}

// A host proxy: answers one CONNECT with `status`, then echoes.
struct HostProxy {
  explicit HostProxy(std::string status) : status_(std::move(status)) {
    listener_ = tcp_listener(port_);
    thread_ = std::thread([this] {
      UniqueFd c(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      request_ = read_until(c.get(), "\r\n\r\n");
      send_all(c.get(), "HTTP/1.1 " + status_ + "\r\n\r\n");
      const std::string more = read_until(c.get(), "", 1);
      send_all(c.get(), more);
    });
  }
  ~HostProxy() {
    if (thread_.joinable()) thread_.join();
  }
  // What it was asked, once its one connection is over.
  std::string request() {
    thread_.join();
    return request_;
  }
  std::string status_;
  std::uint16_t port_ = 0;
  UniqueFd listener_;
  std::string request_;
  std::thread thread_;
};

TEST_F(ProxyServiceTest, TunnelsChainThroughTheHostsProxyWithItsCredentials) {
  HostProxy host_proxy("200 Connection established");
  ProxyOptions opts;
  opts.upstream.https =
      UpstreamProxy{.host = "127.0.0.1", .port = host_proxy.port_, .authorization = "Basic dTpw"};
  start(opts);
  std::string reply;
  UniqueFd c = connect_via_http(echo_target("allowed.test"), reply);
  EXPECT_EQ(reply, "HTTP/1.1 200 Connection established\r\n\r\n");
  send_all(c.get(), "z");
  EXPECT_EQ(read_until(c.get(), "", 1), "z");
  c.reset();
  // The address decided on, not the name: the host's proxy must not resolve
  // it again (a second A record or a rebinding answer would be its choice).
  const std::string decided = "127.0.0.1:" + std::to_string(echo_.port());
  EXPECT_EQ(host_proxy.request(), "CONNECT " + decided + " HTTP/1.1\r\nHost: " + decided +
                                      "\r\nProxy-Authorization: Basic dTpw\r\n\r\n");
}

TEST_F(ProxyServiceTest, AHostProxyRefusalIsA502ThatSaysSo) {
  HostProxy host_proxy("407 Proxy Authentication Required");
  ProxyOptions opts;
  opts.upstream.https =
      UpstreamProxy{.host = "127.0.0.1", .port = host_proxy.port_, .authorization = ""};
  start(opts);
  const std::string got = refused_body(echo_target("allowed.test"));
  EXPECT_NE(got.find("502 Bad Gateway"), std::string::npos) << got;
  EXPECT_NE(got.find("407 Proxy Authentication Required"), std::string::npos) << got;
}

TEST_F(ProxyServiceTest, AConnectThatHangsIs504AndSocks0x04) {
  // A listener whose backlog is full: further SYNs are dropped, so a
  // connect neither succeeds nor fails.
  std::uint16_t port = 0;
  UniqueFd full(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a = loopback(0);
  ASSERT_EQ(::bind(full.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(full.get(), 0), 0);
  port = port_of(full.get());
  std::vector<UniqueFd> fillers;
  for (int i = 0; i < 2; ++i) {
    UniqueFd f(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    sockaddr_in to = loopback(port);
    ::connect(f.get(), reinterpret_cast<sockaddr*>(&to), sizeof to);
    fillers.push_back(std::move(f));
  }
  pollfd first{fillers[0].get(), POLLOUT, 0};  // the one the queue holds is connected
  ASSERT_EQ(::poll(&first, 1, 1000), 1);
  ProxyOptions opts;
  opts.connect_timeout = std::chrono::milliseconds(300);
  start(opts, {"127.0.0.1/32:" + std::to_string(port)});
  const auto before = std::chrono::steady_clock::now();
  const std::string got = refused_body("127.0.0.1:" + std::to_string(port));
  EXPECT_NE(got.find("504 Gateway Timeout"), std::string::npos) << got;
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(3));

  UniqueFd s = dial(socks_port_);
  send_all(s.get(), std::string("\x05\x01\x00", 3));
  EXPECT_EQ(read_until(s.get(), "", 2), std::string("\x05\x00", 2));
  std::string req{0x05, 0x01, 0x00, 0x01, 127, 0, 0, 1};
  req.push_back(static_cast<char>(port >> 8));
  req.push_back(static_cast<char>(port & 0xff));
  send_all(s.get(), req);
  EXPECT_EQ(read_until(s.get(), "", 10)[1], 0x04);
}

}  // namespace
}  // namespace sandcastle::net
