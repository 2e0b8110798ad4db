// The package installer's use of the ProxyService (ported from the old
// EgressProxy tests): a session whose policy is exactly the index hosts,
// trusted, so an index on loopback is reachable on its port only; plain
// requests forwarded in origin form, one per connection; the last refusal
// and the last failed connection kept for the install's diagnosis.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "net/proxy_service.h"
#include "unit/net/net_test_servers.h"
#include "unit/net/net_test_util.h"

namespace sandcastle::net {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace)

using namespace test_util;  // ip(): an address literal

// One connection: reads a request head, answers answer(head), then closes.
class OneShotServer {
 public:
  explicit OneShotServer(std::function<std::string(const std::string&)> answer)
      : answer_(std::move(answer)) {
    listener_ = tcp_listener(port_);
    thread_ = std::thread([this] {
      UniqueFd c(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!c) return;
      head_ = read_until(c.get(), "\r\n\r\n");
      send_all(c.get(), answer_(head_));
    });
  }
  ~OneShotServer() {
    ::shutdown(listener_.get(), SHUT_RDWR);  // wakes an accept that got nothing
    thread_.join();
  }
  OneShotServer(const OneShotServer&) = delete;
  OneShotServer& operator=(const OneShotServer&) = delete;
  std::uint16_t port() const { return port_; }

 private:
  std::function<std::string(const std::string&)> answer_;
  std::uint16_t port_ = 0;
  UniqueFd listener_;
  std::string head_;
  std::thread thread_;
};

std::string echo_head(const std::string& head) {
  return "up:" + head;
}

class InstallerProxyTest : public ::testing::Test {
 protected:
  // `indexes` become exact allow rules, trusted unless `trusted` is false.
  void start(const std::vector<std::string>& indexes, bool trusted = true, ProxyOptions opts = {}) {
    opts.resolver = dns_.address();
    auto svc = ProxyService::start(opts);
    ASSERT_TRUE(svc.ok()) << svc.error().message();
    service_ = std::move(*svc);
    Policy p;
    p.mode = Mode::kAllowList;
    for (const auto& text : indexes) {
      auto r = parse_rule(text, ListKind::kAllow);
      ASSERT_TRUE(r.ok()) << text;
      p.allow.push_back(*r);
      if (trusted) p.trusted.push_back(*r);
    }
    session_ = std::make_shared<Session>("sb-test/installer",
                                         std::make_shared<const Policy>(std::move(p)));
    Listeners l;
    l.http = tcp_listener(http_port_);
    auto att = service_->attach(session_, std::move(l));
    ASSERT_TRUE(att.ok()) << att.error().message();
    attachment_ = std::move(*att);
  }

  // Sends `request` to the proxy; everything it answers until it closes.
  std::string exchange(const std::string& request) {
    UniqueFd c = dial(http_port_);
    send_all(c.get(), request);
    return read_all(c.get());
  }

  DnsResponder dns_{{{"index.test", {ip("127.0.0.1")}}}};
  std::unique_ptr<ProxyService> service_;
  std::shared_ptr<Session> session_;
  std::unique_ptr<Attachment> attachment_;
  std::uint16_t http_port_ = 0;
};

TEST_F(InstallerProxyTest, AbsoluteFormIsForwardedInOriginForm) {
  OneShotServer up(echo_head);
  const std::string authority = "127.0.0.1:" + std::to_string(up.port());
  start({authority});
  const std::string got = exchange("GET http://" + authority +
                                   "/simple/pkg/ HTTP/1.1\r\nHost: " + authority + "\r\n\r\n");
  EXPECT_EQ(got.rfind("up:GET /simple/pkg/ HTTP/1.1\r\n", 0), 0U) << got;
}

// One request per upstream connection: a kept-alive client's next request
// would be relayed unchecked.
TEST_F(InstallerProxyTest, AForwardedRequestClosesItsConnection) {
  OneShotServer up(echo_head);
  const std::string authority = "127.0.0.1:" + std::to_string(up.port());
  start({authority});
  const std::string got =
      exchange("GET http://" + authority + "/f.whl HTTP/1.1\r\nHost: " + authority +
               "\r\nProxy-Connection: keep-alive\r\nconnection : Keep-Alive\r\nKeep-Alive: 300\r\n"
               "Proxy-Authorization: Basic eDp5\r\nAccept: */*\r\n\r\n");
  // Then EOF: the proxy closed too.
  EXPECT_EQ(got, "up:GET /f.whl HTTP/1.1\r\nHost: " + authority +
                     "\r\nAccept: */*\r\nConnection: close\r\n\r\n");
}

TEST_F(InstallerProxyTest, TheLastRefusalNamesTheRefusedHost) {
  start({"127.0.0.1:1"});
  EXPECT_TRUE(session_->last_refusals().empty());
  const std::string got = exchange(
      "GET http://files.example.org:8080/x.whl HTTP/1.1\r\nHost: files.example.org:8080\r\n\r\n");
  EXPECT_EQ(got.rfind("HTTP/1.1 403", 0), 0U) << got;
  ASSERT_EQ(session_->last_refusals().size(), 1U);
  EXPECT_EQ(session_->last_refusals().back().target, "files.example.org:8080");
  EXPECT_EQ(session_->last_refusals().back().reason, Reason::kNotAllowed);
  EXPECT_EQ(dns_.asked("files.example.org"), 0);
}

TEST_F(InstallerProxyTest, ATrustedIndexNameOnLoopbackIsReachableOnItsPortOnly) {
  EchoServer echo;
  const std::string index = "index.test:" + std::to_string(echo.port());
  start({index});
  UniqueFd c = dial(http_port_);
  send_all(c.get(), "CONNECT " + index + " HTTP/1.1\r\nHost: " + index + "\r\n\r\n");
  EXPECT_EQ(read_until(c.get(), "\r\n\r\n"), "HTTP/1.1 200 Connection established\r\n\r\n");
  send_all(c.get(), "ping\n");
  EXPECT_EQ(read_until(c.get(), "\n"), "ping\n");
  c.reset();
  const std::string other = "index.test:" + std::to_string(echo.port() == 1 ? 2 : 1);
  // Another port of the same name: its loopback address stays refused.
  EXPECT_NE(exchange("CONNECT " + other + " HTTP/1.1\r\n\r\n").find("refused (private_address)"),
            std::string::npos);
  EXPECT_NE(exchange("CONNECT 127.0.0.1:" + std::to_string(echo.port()) + " HTTP/1.1\r\n\r\n")
                .find("refused (private_address)"),
            std::string::npos);
}

TEST_F(InstallerProxyTest, AnUntrustedRuleDoesNotLiftTheLoopbackRefusal) {
  EchoServer echo;
  const std::string index = "index.test:" + std::to_string(echo.port());
  start({index}, /*trusted=*/false);
  EXPECT_NE(exchange("CONNECT " + index + " HTTP/1.1\r\n\r\n").find("refused (private_address)"),
            std::string::npos);
}

TEST_F(InstallerProxyTest, AConnectionThatFailsIsTheSessionsLastFailure) {
  std::uint16_t port = 0;
  { UniqueFd gone = tcp_listener(port); }  // a port nothing listens on now
  const std::string authority = "127.0.0.1:" + std::to_string(port);
  start({authority});
  EXPECT_EQ(session_->last_failure(), "");
  const std::string got = exchange("CONNECT " + authority + " HTTP/1.1\r\n\r\n");
  EXPECT_EQ(got.rfind("HTTP/1.1 502", 0), 0U) << got;
  EXPECT_EQ(session_->last_failure(), "cannot connect to " + authority);
}

TEST_F(InstallerProxyTest, AHostProxyRefusalIsA502AndTheLastFailure) {
  OneShotServer host([](const std::string&) {
    return std::string("HTTP/1.1 407 Proxy Authentication Required\r\n\r\n");
  });
  ProxyOptions opts;
  opts.upstream.https =
      UpstreamProxy{.host = "127.0.0.1", .port = host.port(), .authorization = ""};
  start({"pypi.org:443"}, true, opts);
  const std::string got = exchange("CONNECT pypi.org:443 HTTP/1.1\r\n\r\n");
  EXPECT_EQ(got.rfind("HTTP/1.1 502", 0), 0U) << got;
  const std::string why = "the host's proxy 127.0.0.1:" + std::to_string(host.port()) +
                          " refused CONNECT pypi.org:443 (HTTP/1.1 407 Proxy Authentication "
                          "Required)";
  EXPECT_NE(got.find(why), std::string::npos) << got;
  EXPECT_EQ(session_->last_failure(), why);
}

// Plain requests go through the host's proxy in a tunnel, in origin form:
// the host's proxy is never handed a name to resolve for a caller's rule
// (here a trusted rule whose name our DNS does not know, so its name).
TEST_F(InstallerProxyTest, PlainRequestsTunnelThroughTheHostsProxy) {
  std::string connect_head, inner_head;
  UniqueFd l;
  std::uint16_t port = 0;
  l = tcp_listener(port);
  std::thread host([&] {
    UniqueFd c(::accept4(l.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!c) return;
    connect_head = read_until(c.get(), "\r\n\r\n");
    send_all(c.get(), "HTTP/1.1 200 Connection established\r\n\r\n");
    inner_head = read_until(c.get(), "\r\n\r\n");
    send_all(c.get(), "HTTP/1.0 200 OK\r\n\r\nok");
  });
  ProxyOptions opts;
  opts.upstream.http =
      UpstreamProxy{.host = "127.0.0.1", .port = port, .authorization = "Basic dTpw"};
  start({"mirror.corp:80"}, true, opts);
  const std::string got = exchange(
      "GET http://mirror.corp/simple/ HTTP/1.1\r\nHost: mirror.corp\r\nProxy-Authorization: Basic "
      "eDp5\r\n\r\n");
  ::shutdown(l.get(), SHUT_RDWR);
  host.join();
  EXPECT_EQ(got, "HTTP/1.0 200 OK\r\n\r\nok");
  EXPECT_EQ(connect_head.rfind("CONNECT mirror.corp:80 HTTP/1.1\r\n", 0), 0U) << connect_head;
  EXPECT_NE(connect_head.find("Proxy-Authorization: Basic dTpw\r\n"), std::string::npos);
  EXPECT_EQ(inner_head.rfind("GET /simple/ HTTP/1.1\r\n", 0), 0U) << inner_head;
  EXPECT_EQ(inner_head.find("eDp5"), std::string::npos) << "the sandbox's credentials went out";
}

}  // namespace
}  // namespace sandcastle::net
