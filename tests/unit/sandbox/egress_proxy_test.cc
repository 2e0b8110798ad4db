#include "sandbox/egress_proxy.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

namespace sandcastle::sandbox {
namespace {

// A loopback listener on an ephemeral port.
UniqueFd listen_loopback(uint16_t& port) {
  UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(::listen(s.get(), 16), 0);
  socklen_t len = sizeof a;
  getsockname(s.get(), reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
  return s;
}

UniqueFd dial(uint16_t port) {
  UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  EXPECT_EQ(::connect(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return s;
}

std::string read_some(int fd, size_t want) {
  std::string out;
  char buf[4096];
  while (out.size() < want) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Upstream that answers one connection: echoes what it reads, prefixed.
struct Upstream {
  uint16_t port = 0;
  UniqueFd listener = listen_loopback(port);
  std::string received;
  std::thread t{[this] {
    UniqueFd c(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    char buf[4096];
    ssize_t n = ::recv(c.get(), buf, sizeof buf, 0);
    if (n > 0) {
      received.assign(buf, static_cast<size_t>(n));
      std::string reply = "up:" + received;
      (void)!::send(c.get(), reply.data(), reply.size(), MSG_NOSIGNAL);
    }
  }};
  ~Upstream() {
    if (t.joinable()) t.join();
  }
};

TEST(EgressProxyTest, RuleFromUrl) {
  EXPECT_EQ(*rule_from_url("https://pypi.org/simple"), (EgressRule{"pypi.org", 443}));
  EXPECT_EQ(*rule_from_url("http://127.0.0.1:8080/simple/"), (EgressRule{"127.0.0.1", 8080}));
  EXPECT_EQ(*rule_from_url("HTTPS://User:pw@Registry.NPMJS.org"), (EgressRule{"registry.npmjs.org", 443}));
  EXPECT_EQ(*rule_from_url("http://[::1]:81/x"), (EgressRule{"::1", 81}));
  EXPECT_FALSE(rule_from_url("ftp://x").ok());
  EXPECT_FALSE(rule_from_url("pypi.org").ok());
  EXPECT_FALSE(rule_from_url("http://h:99999/").ok());
}

TEST(EgressProxyTest, ConnectToAllowedHostTunnels) {
  Upstream up;
  uint16_t pport = 0;
  EgressProxy proxy(listen_loopback(pport), {{"127.0.0.1", up.port}});
  UniqueFd c = dial(pport);
  std::string req = "CONNECT 127.0.0.1:" + std::to_string(up.port) + " HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_GT(::send(c.get(), req.data(), req.size(), 0), 0);
  std::string established = read_some(c.get(), 39);
  EXPECT_EQ(established.rfind("HTTP/1.1 200", 0), 0u) << established;
  ASSERT_GT(::send(c.get(), "hello", 5, 0), 0);
  EXPECT_EQ(read_some(c.get(), 8), "up:hello");
  EXPECT_EQ(proxy.allowed_count(), 1u);
}

TEST(EgressProxyTest, OtherHostsAreRefusedWith403) {
  Upstream up;  // reachable, but not on the allow-list
  uint16_t pport = 0;
  EgressProxy proxy(listen_loopback(pport), {{"127.0.0.1", static_cast<uint16_t>(up.port + 1)}});
  UniqueFd c = dial(pport);
  std::string req = "CONNECT 127.0.0.1:" + std::to_string(up.port) + " HTTP/1.1\r\n\r\n";
  ASSERT_GT(::send(c.get(), req.data(), req.size(), 0), 0);
  std::string reply = read_some(c.get(), 12);
  EXPECT_EQ(reply.rfind("HTTP/1.1 403", 0), 0u) << reply;
  EXPECT_EQ(proxy.denied_count(), 1u);
  // Let the upstream thread finish.
  UniqueFd unblock = dial(up.port);
}

TEST(EgressProxyTest, AbsoluteFormRequestIsForwardedInOriginForm) {
  Upstream up;
  uint16_t pport = 0;
  EgressProxy proxy(listen_loopback(pport), {{"127.0.0.1", up.port}});
  UniqueFd c = dial(pport);
  std::string req = "GET http://127.0.0.1:" + std::to_string(up.port) + "/simple/pkg/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  ASSERT_GT(::send(c.get(), req.data(), req.size(), 0), 0);
  std::string reply = read_some(c.get(), 3 + 26);
  EXPECT_EQ(reply.rfind("up:GET /simple/pkg/ HTTP/1.1\r\n", 0), 0u) << reply;
}

// One request per upstream connection: a kept-alive client's next request
// would be relayed unchecked and in absolute form.
TEST(EgressProxyTest, ForwardedRequestClosesItsConnection) {
  Upstream up;
  uint16_t pport = 0;
  EgressProxy proxy(listen_loopback(pport), {{"127.0.0.1", up.port}});
  UniqueFd c = dial(pport);
  std::string req = "GET http://127.0.0.1:" + std::to_string(up.port) +
                    "/f.whl HTTP/1.1\r\nHost: 127.0.0.1\r\nProxy-Connection: keep-alive\r\n"
                    "connection : Keep-Alive\r\nKeep-Alive: 300\r\nProxy-Authorization: Basic eDp5\r\n"
                    "Accept: */*\r\n\r\n";
  ASSERT_GT(::send(c.get(), req.data(), req.size(), 0), 0);
  const std::string expected = "up:GET /f.whl HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: */*\r\nConnection: close\r\n\r\n";
  EXPECT_EQ(read_some(c.get(), expected.size() + 1), expected);  // then EOF: the proxy closed too
}

}  // namespace
}  // namespace sandcastle::sandbox
