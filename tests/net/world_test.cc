// The net_tests world itself: each server answers as net_world.h says, the
// DNS responder gives its fixed zone, and nothing of the host's is reachable
// from the test's network namespace.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include "common/unique_fd.h"
#include "net/dns_wire.h"
#include "net_world.h"

namespace sandcastle::nettest {
namespace {

TEST(NetWorldTest, HttpServesTheBigBodyAndEchoesHost) {
  REQUIRE_NET_WORLD();
  auto big = http_get(NetWorld::kServerA, 80, "/big", "allowed.test");
  ASSERT_TRUE(big) << big.error().message();
  EXPECT_EQ(big->status, 200);
  EXPECT_EQ(big->body.size(), NetWorld::kBigBody);
  auto host = http_get(NetWorld::kServerA, 80, "/host", "x.allowed.test");
  ASSERT_TRUE(host) << host.error().message();
  EXPECT_EQ(host->body, "x.allowed.test");
  auto b = http_get(NetWorld::kServerB, 80, "/", "other.test");
  ASSERT_TRUE(b) << b.error().message();
  EXPECT_EQ(b->body, "hello from b\n");
}

TEST(NetWorldTest, HttpsVerifiesWithTheCaForTheAllowedNames) {
  REQUIRE_NET_WORLD();
  const std::string ca = NetWorld::get()->ca_cert();
  for (const std::string name : {"allowed.test", "x.allowed.test"}) {
    auto r = run_command({"curl", "-sS", "--max-time", "10", "--cacert", ca, "--resolve",
                          name + ":443:" + NetWorld::kServerA, "https://" + name + "/host"});
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->status, 0) << r->err;
    EXPECT_EQ(r->out, name);
  }
  // A name the certificate does not carry fails verification (curl's 60).
  auto bad =
      run_command({"curl", "-sS", "--max-time", "10", "--cacert", ca, "--resolve",
                   std::string("other.test:443:") + NetWorld::kServerA, "https://other.test/"});
  ASSERT_TRUE(bad) << bad.error().message();
  EXPECT_EQ(bad->status, 60) << bad->err;
}

TEST(NetWorldTest, TcpEchoAnswers) {
  REQUIRE_NET_WORLD();
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(NetWorld::kEchoPort);
  ::inet_pton(AF_INET, NetWorld::kServerA, &sin.sin_addr);
  ASSERT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&sin), sizeof sin), 0)
      << errno_name(errno);
  const std::string msg = "ping 7000";
  ASSERT_EQ(::send(fd.get(), msg.data(), msg.size(), 0), static_cast<ssize_t>(msg.size()));
  std::string got(msg.size(), '\0');
  ASSERT_EQ(::recv(fd.get(), got.data(), got.size(), MSG_WAITALL),
            static_cast<ssize_t>(msg.size()));
  EXPECT_EQ(got, msg);
}

TEST(NetWorldTest, Ipv6ServerAnswers) {
  REQUIRE_NET_WORLD();
  auto r = http_get(NetWorld::kServerV6, 80, "/", "v6.test");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello from v6\n");
}

// One query over UDP (or TCP) to the world's resolver.
Result<net::dns::Message> ask(const std::string& name, bool tcp) {
  auto query = net::dns::build_query(0x5c19, name, net::dns::type::kA, false);
  if (!query) return query.take_error();
  UniqueFd fd(::socket(AF_INET, (tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC, 0));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(53);
  ::inet_pton(AF_INET, NetWorld::kDnsAddr, &sin.sin_addr);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sin), sizeof sin) != 0)
    return Error::from_errno("connect resolver");
  timeval tv{5, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::vector<std::uint8_t> wire = *query;
  if (tcp) {
    wire.insert(wire.begin(), {static_cast<std::uint8_t>(query->size() >> 8),
                               static_cast<std::uint8_t>(query->size() & 0xff)});
  }
  if (::send(fd.get(), wire.data(), wire.size(), 0) != static_cast<ssize_t>(wire.size()))
    return Error::from_errno("send query");
  std::vector<std::uint8_t> buf(65537);
  ssize_t n = ::recv(fd.get(), buf.data(), buf.size(), 0);
  if (n <= 0) return Error::from_errno("recv reply");
  std::span<const std::uint8_t> reply(buf.data(), static_cast<std::size_t>(n));
  if (tcp) {
    if (n < 2) return Error::make(ErrorCode::kIo, "short TCP reply");
    reply = reply.subspan(2);
  }
  return net::dns::parse(reply);
}

TEST(NetWorldTest, DnsResponderAnswersItsZoneOverUdpAndTcp) {
  REQUIRE_NET_WORLD();
  const std::vector<std::pair<std::string, std::string>> zone = {
      {"allowed.test", "198.51.100.2"},
      {"x.allowed.test", "198.51.100.2"},
      {"allowed.test.evil", "198.51.100.3"},
      {"other.test", "198.51.100.3"},
      {"loop.test", "127.0.0.1"},
      {"meta.test", "169.254.169.254"}};
  for (bool tcp : {false, true}) {
    for (const auto& [name, addr] : zone) {
      auto m = ask(name, tcp);
      ASSERT_TRUE(m) << name << ": " << m.error().message();
      EXPECT_EQ(m->id, 0x5c19);
      EXPECT_EQ(m->rcode(), net::dns::Rcode::kNoError) << name;
      ASSERT_EQ(m->answers.size(), 1U) << name;
      ASSERT_TRUE(m->answers[0].address) << name;
      EXPECT_EQ(m->answers[0].address->to_string(), addr) << name;
    }
    auto nx = ask("nothing.test", tcp);
    ASSERT_TRUE(nx) << nx.error().message();
    EXPECT_EQ(nx->rcode(), net::dns::Rcode::kNxDomain);
    EXPECT_TRUE(nx->answers.empty());
  }
}

TEST(NetWorldTest, NothingOfTheHostIsReachable) {
  REQUIRE_NET_WORLD();
  // The host's loopback listener (opened before the unshare) is not this
  // namespace's loopback.
  ASSERT_NE(NetWorld::host_loopback_port(), 0);
  EXPECT_EQ(tcp_connect_errno("127.0.0.1", NetWorld::host_loopback_port()), ECONNREFUSED);
  // The host's own addresses are not local here: the default route sends
  // them to 198.51.100.254, which nobody answers (ARP fails).
  int checked = 0;
  for (const net::IpAddr& a : NetWorld::host_addrs()) {
    if (!a.is_v4() || net::builtin_refused(a)) continue;
    EXPECT_EQ(tcp_connect_errno(a.to_string(), 22, 5000), EHOSTUNREACH) << a.to_string();
    ++checked;
  }
  if (checked == 0) (void)std::fprintf(stderr, "(the host has no routable IPv4 address to try)\n");
}

}  // namespace
}  // namespace sandcastle::nettest
