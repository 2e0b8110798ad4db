#include "sandbox/egress_proxy.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/base64.h"

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
  EXPECT_EQ(*rule_from_url("HTTPS://User:pw@Registry.NPMJS.org"),
            (EgressRule{"registry.npmjs.org", 443}));
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
  std::string req = "GET http://127.0.0.1:" + std::to_string(up.port) +
                    "/simple/pkg/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
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
  std::string req =
      "GET http://127.0.0.1:" + std::to_string(up.port) +
      "/f.whl HTTP/1.1\r\nHost: 127.0.0.1\r\nProxy-Connection: keep-alive\r\n"
      "connection : Keep-Alive\r\nKeep-Alive: 300\r\nProxy-Authorization: Basic eDp5\r\n"
      "Accept: */*\r\n\r\n";
  ASSERT_GT(::send(c.get(), req.data(), req.size(), 0), 0);
  const std::string expected =
      "up:GET /f.whl HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: */*\r\nConnection: close\r\n\r\n";
  EXPECT_EQ(read_some(c.get(), expected.size() + 1), expected);  // then EOF: the proxy closed too
}

TEST(EgressProxyTest, LastDeniedNamesTheRefusedHost) {
  uint16_t pport = 0;
  EgressProxy proxy(listen_loopback(pport), {{"127.0.0.1", 1}});
  EXPECT_EQ(proxy.last_denied(), "");
  UniqueFd c = dial(pport);
  std::string req = "GET http://files.example.org:8080/x.whl HTTP/1.1\r\n\r\n";
  ASSERT_GT(::send(c.get(), req.data(), req.size(), 0), 0);
  EXPECT_EQ(read_some(c.get(), 12).rfind("HTTP/1.1 403", 0), 0u);
  EXPECT_EQ(proxy.last_denied(), "files.example.org:8080");
}

std::function<const char*(const char*)> env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    static thread_local std::string v;
    auto it = vars.find(name);
    if (it == vars.end()) return nullptr;
    v = it->second;
    return v.c_str();
  };
}

TEST(UpstreamProxiesTest, ReadsTheHostsSettingsLikeCurl) {
  std::vector<std::string> warnings;
  auto p = UpstreamProxies::from_env(
      env_of({{"https_proxy", "http://u%40corp:p%3Ass@proxy.corp:3128"},
              {"HTTPS_PROXY", "http://ignored:1"},
              {"HTTP_PROXY", "proxy.corp"},
              {"NO_PROXY", " .internal.org, localhost ,10.0.0.5:443,[::1]"}}),
      &warnings);
  ASSERT_TRUE(p.https && p.http);
  EXPECT_EQ(p.https->host, "proxy.corp");
  EXPECT_EQ(p.https->port, 3128);
  EXPECT_EQ(p.https->authorization, "Basic " + base64_encode("u@corp:p:ss"));
  EXPECT_EQ(p.http->port, 80);
  EXPECT_EQ(p.http->authorization, "");
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(p.route(true, "pypi.org"), &*p.https);
  EXPECT_EQ(p.route(false, "pypi.org"), &*p.http);
  EXPECT_EQ(p.route(true, "internal.org"), nullptr);
  EXPECT_EQ(p.route(true, "pkgs.INTERNAL.org"), nullptr);
  EXPECT_NE(p.route(true, "notinternal.org"), nullptr);
  EXPECT_EQ(p.route(true, "localhost"), nullptr);
  EXPECT_EQ(p.route(true, "10.0.0.5"), nullptr);
  EXPECT_EQ(p.route(true, "::1"), nullptr);
  EXPECT_NE(p.route(true, "127.0.0.1"), nullptr);  // only what NO_PROXY names
  EXPECT_EQ(UpstreamProxies::from_env(env_of({{"https_proxy", "http://p:1"}, {"no_proxy", "*"}}))
                .route(true, "x"),
            nullptr);
}

TEST(UpstreamProxiesTest, UnusableSettingsAreNamedWithoutTheirValue) {
  std::vector<std::string> warnings;
  auto p = UpstreamProxies::from_env(env_of({{"HTTPS_PROXY", "https://user:secret@proxy:443"},
                                             {"http_proxy", "http://proxy:99999"}}),
                                     &warnings);
  EXPECT_FALSE(p.https);
  EXPECT_FALSE(p.http);
  ASSERT_EQ(warnings.size(), 2u);
  for (const auto& w : warnings) EXPECT_EQ(w.find("secret"), std::string::npos) << w;
  EXPECT_EQ(p.route(true, "pypi.org"), nullptr);
}

// The host's proxy in a test: answers one CONNECT with `status`, then echoes.
struct HostProxy {
  explicit HostProxy(std::string status) : status_(std::move(status)) {}
  std::string status_;
  uint16_t port = 0;
  UniqueFd listener = listen_loopback(port);
  std::string head;
  std::thread t{[this] {
    UniqueFd c(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    char buf[4096];
    while (head.find("\r\n\r\n") == std::string::npos) {
      ssize_t n = ::recv(c.get(), buf, sizeof buf, 0);
      if (n <= 0) return;
      head.append(buf, static_cast<size_t>(n));
    }
    std::string reply = "HTTP/1.1 " + status_ + "\r\n\r\n";
    (void)!::send(c.get(), reply.data(), reply.size(), MSG_NOSIGNAL);
    ssize_t n = ::recv(c.get(), buf, sizeof buf, 0);
    if (n > 0) {
      std::string echo = "via:" + std::string(buf, static_cast<size_t>(n));
      (void)!::send(c.get(), echo.data(), echo.size(), MSG_NOSIGNAL);
    }
  }};
  ~HostProxy() {
    if (t.joinable()) t.join();
  }
};

TEST(EgressProxyTest, TunnelsGoThroughTheHostsProxyWithItsCredentials) {
  HostProxy host("200 Connection established");
  UpstreamProxies via;
  via.https = UpstreamProxy{"127.0.0.1", host.port, "Basic dTpw"};
  uint16_t pport = 0;
  EgressProxy proxy(listen_loopback(pport), {{"pypi.org", 443}}, EgressLimits{}, via);
  UniqueFd c = dial(pport);
  std::string req =
      "CONNECT pypi.org:443 HTTP/1.1\r\nProxy-Authorization: Basic c2FuZGJveA==\r\n\r\n";
  ASSERT_GT(::send(c.get(), req.data(), req.size(), 0), 0);
  EXPECT_EQ(read_some(c.get(), 39).rfind("HTTP/1.1 200", 0), 0u);
  ASSERT_GT(::send(c.get(), "hello", 5, 0), 0);
  EXPECT_EQ(read_some(c.get(), 9), "via:hello");
  // Ours, not the sandbox's, credentials; the name is resolved by the host's proxy.
  EXPECT_EQ(host.head,
            "CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\nProxy-Authorization: Basic "
            "dTpw\r\n\r\n");
}

TEST(EgressProxyTest, AHostProxyRefusalIsA502ThatSaysSo) {
  HostProxy host("407 Proxy Authentication Required");
  UpstreamProxies via;
  via.https = UpstreamProxy{"127.0.0.1", host.port, ""};
  uint16_t pport = 0;
  EgressProxy proxy(listen_loopback(pport), {{"pypi.org", 443}}, EgressLimits{}, via);
  UniqueFd c = dial(pport);
  std::string req = "CONNECT pypi.org:443 HTTP/1.1\r\n\r\n";
  ASSERT_GT(::send(c.get(), req.data(), req.size(), 0), 0);
  std::string reply = read_some(c.get(), 4096);
  EXPECT_EQ(reply.rfind("HTTP/1.1 502", 0), 0u) << reply;
  EXPECT_NE(reply.find("the host's proxy 127.0.0.1:" + std::to_string(host.port) +
                       " refused CONNECT pypi.org:443"),
            std::string::npos)
      << reply;
}

TEST(EgressProxyTest, PlainRequestsGoToTheHostsProxyInAbsoluteForm) {
  Upstream host;  // the host's http proxy: echoes what it gets
  UpstreamProxies via;
  via.http = UpstreamProxy{"127.0.0.1", host.port, "Basic dTpw"};
  uint16_t pport = 0;
  EgressProxy proxy(listen_loopback(pport), {{"mirror.corp", 80}}, EgressLimits{}, via);
  UniqueFd c = dial(pport);
  std::string req =
      "GET http://mirror.corp/simple/ HTTP/1.1\r\nHost: mirror.corp\r\nProxy-Authorization: Basic "
      "eDp5\r\n\r\n";
  ASSERT_GT(::send(c.get(), req.data(), req.size(), 0), 0);
  const std::string expected =
      "up:GET http://mirror.corp/simple/ HTTP/1.1\r\nHost: mirror.corp\r\nProxy-Authorization: "
      "Basic dTpw\r\n"
      "Connection: close\r\n\r\n";
  EXPECT_EQ(read_some(c.get(), expected.size() + 1), expected);
}

}  // namespace
}  // namespace sandcastle::sandbox
