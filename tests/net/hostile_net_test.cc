// The hostile programs of the integration suite (tests/integration/escape/)
// in an allowlist sandbox: each must get its one exact denial, and after each
// a neighbour sandbox must be intact and still reach its allowed host through
// the server's proxies (which the hostile one shares). Also: one tenant
// holding every connection its limit allows does not starve another.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <future>
#include <map>
#include <thread>

#include "../integration/escape/escape_cases.h"
#include "../integration/sandbox/fixture.h"
#include "net/proxy_service.h"
#include "net_world.h"
#include "service/lifecycle.h"
#include "service_world.h"

namespace sandcastle::nettest {
namespace {

using nlohmann::json;
using sandbox::testing::escape::Case;
using namespace std::chrono_literals;
namespace escape = sandbox::testing::escape;

constexpr std::array<const char*, 2> kAllow = {"allowed.test", "*.allowed.test:443"};
// Small, so proxy_flood reaches it quickly (the default is 256).
constexpr std::size_t kMaxPerSandbox = 64;

// Where allowlist differs from mode none (escape_cases.h), and why. The
// sandbox still has only lo, now with the proxies and the DNS stub on it, so
// the direct attempts answer as in mode none: tcp_external and udp_external
// (aimed at world addresses the server reaches) ENETUNREACH, no route;
// tcp_host_loopback ECONNREFUSED, the sandbox's own lo; ipv6_external
// ENETUNREACH.
const std::map<std::string, std::string>& allowlist_expected() {
  static const std::map<std::string, std::string> m = {
      // The proxy refuses every spelling of the host's loopback (where the
      // server itself listens) and the metadata address: built-in refusals
      // or names off the list, each a 403 / SOCKS 0x02, never a connect.
      {"proxy_to_host",
       "127.0.0.1 403\n[::1] 403\nlocalhost 403\n0.0.0.0 403\n169.254.169.254 403\n"
       "2130706433 403\nsocks5 0x02\n"},
      // Still no route to it; through the proxy a built-in refusal.
      {"metadata", "direct ENETUNREACH\nconnect 403\nget 403\n"},
      // Garbage is a 400 (or a close, where nothing parses), a head past
      // 16 KiB is closed, and the next client is served each time.
      {"proxy_garbage",
       "3128 garbage 400\n3128 next 200\n3128 long closed\n3128 next 200\n"
       "1080 garbage closed\n1080 next 0x00\n1080 long closed\n1080 next 0x00\n"},
      // kMaxPerSandbox tunnels, then 503 for each connection past the limit.
      {"proxy_flood", "200 64\n503 236\n"},
      // 200 queries/s, then REFUSED with EDE "Rate limited"; the next second
      // is answered again.
      {"dns_flood", "probe NOERROR\nanswered 1000\nrate_limited True\nafter NOERROR\n"},
  };
  return m;
}

// The server for one suite (service_world.h), its proxies' per-sandbox
// limit small, every sandbox an allowlist one.
struct Server : ServiceServer {
  Server() { caller_ = {"mallory", "k-mallory"}; }
  Status start() { return ServiceServer::start({}, {.max_per_sandbox = kMaxPerSandbox}); }
  Result<std::string> create() {
    return ServiceServer::create(
        {{"language", "bash"}, {"network", {{"mode", "allowlist"}, {"allow", kAllow}}}});
  }
  sandbox::Sandbox& sandbox(const std::string& id) { return entry(id)->sandbox(); }
  std::shared_ptr<net::Session> session(const std::string& id) { return entry(id)->network(); }
  // Started, with two sandboxes (a, b).
  void two_tenants(std::string& a, std::string& b) {
    auto s = start();
    ASSERT_TRUE(s.ok()) << s.error().message();
    auto x = create();
    ASSERT_TRUE(x.ok()) << x.error().message();
    auto y = create();
    ASSERT_TRUE(y.ok()) << y.error().message();
    a = *x;
    b = *y;
  }
};

class HostileNetTest : public ::testing::TestWithParam<Case> {
 public:
  static void SetUpTestSuite() {
    if (NetWorld::get() == nullptr) return;  // each test skips or fails, saying why
    server_ = new Server;
    auto s = server_->start();
    ASSERT_TRUE(s.ok()) << s.error().message();
    auto h = server_->create();
    ASSERT_TRUE(h.ok()) << h.error().message();
    hostile_ = *h;
    auto n = server_->create();
    ASSERT_TRUE(n.ok()) << n.error().message();
    neighbour_ = *n;
    ASSERT_TRUE(server_->sandbox(neighbour_).write_file("/workspace/canary", "intact").ok());

    auto& hs = server_->sandbox(hostile_);
    ASSERT_TRUE(hs.mkdir("/workspace/esc").ok());
    for (const auto& e : escape::list_programs())
      ASSERT_TRUE(
          hs.write_file("/workspace/esc/" + e, escape::slurp(escape::program_dir() + "/" + e))
              .ok());
    auto built = server_->sh(hostile_, escape::build_script("/workspace/esc", false));
    ASSERT_EQ(built.exit_code, 0) << built.stderr_data;
    open_listeners();
  }

  // A listener on this netns's 127.0.0.1 (where the server and its proxies
  // run) and an abstract unix one: the programs aim at both.
  static void open_listeners() {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::listen(listener_, 8), 0);
    socklen_t len = sizeof a;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
    facts_.loopback_port = ntohs(a.sin_port);

    facts_.abstract_name = "sandcastle-net-escape-" + std::to_string(::getpid());
    unix_listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_un u{};
    u.sun_family = AF_UNIX;
    std::memcpy(u.sun_path + 1, facts_.abstract_name.data(), facts_.abstract_name.size());
    ASSERT_EQ(::bind(unix_listener_, reinterpret_cast<sockaddr*>(&u),
                     static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 +
                                            facts_.abstract_name.size())),
              0);
    ASSERT_EQ(::listen(unix_listener_, 8), 0);
    // The neighbour world's HTTP server and DNS responder: the server
    // reaches both, the sandbox has no route (ENETUNREACH, as in mode none).
    facts_.tcp_target = NetWorld::kServerB;
    facts_.udp_target = NetWorld::kDnsAddr;
  }

  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    if (listener_ >= 0) ::close(listener_);
    if (unix_listener_ >= 0) ::close(unix_listener_);
    listener_ = unix_listener_ = -1;
  }

  static void expect_nothing_leaked() {
    // The program has exited: the proxies close all it had open, at once.
    auto session = server_->session(hostile_);
    ASSERT_NE(session, nullptr);
    for (int i = 0; i < 100 && server_->proxies_->open_connections() > 0; ++i)
      std::this_thread::sleep_for(20ms);
    EXPECT_EQ(server_->proxies_->open_connections(), 0U);
    EXPECT_EQ(session->stats().open, 0U);
    EXPECT_EQ(::accept(listener_, nullptr, nullptr), -1) << "a sandbox reached the host's loopback";
    EXPECT_EQ(::accept(unix_listener_, nullptr, nullptr), -1)
        << "a sandbox reached a host unix socket";
    auto canary = server_->sandbox(neighbour_).read_file("/workspace/canary");
    ASSERT_TRUE(canary.ok());
    EXPECT_EQ(canary->data, "intact");
    // The proxies and the DNS server it shares with the hostile sandbox
    // still serve it.
    auto r = server_->sh(neighbour_,
                         "curl -sS --max-time 20 http://allowed.test/host; echo;"
                         "getent hosts allowed.test");
    EXPECT_EQ(r.stdout_data, "allowed.test\n198.51.100.2    allowed.test\n") << r.stderr_data;
  }

  static Server* server_;
  static std::string hostile_;
  static std::string neighbour_;
  static escape::HostFacts facts_;
  static int listener_;
  static int unix_listener_;
};

Server* HostileNetTest::server_ = nullptr;
std::string HostileNetTest::hostile_;
std::string HostileNetTest::neighbour_;
escape::HostFacts HostileNetTest::facts_;  // NOLINT(cert-err58-cpp): a test's static
int HostileNetTest::listener_ = -1;
int HostileNetTest::unix_listener_ = -1;

TEST_P(HostileNetTest, IsDeniedInAllowlist) {
  REQUIRE_NET_WORLD();
  ASSERT_FALSE(hostile_.empty());
  const Case& c = GetParam();
  const std::string program = c.program;
  auto r =
      server_->sandbox(hostile_).exec(escape::program_request(program, "/workspace/esc", facts_));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->reason, sandbox::EndReason::kExited) << r->stderr_data;
  EXPECT_EQ(r->exit_code, 0) << r->stderr_data;
  EXPECT_EQ(r->stdout_data, escape::expected_in_mode(c, allowlist_expected()))
      << "stderr: " << r->stderr_data;
  expect_nothing_leaked();
}

INSTANTIATE_TEST_SUITE_P(HostileAllowlist, HostileNetTest, ::testing::ValuesIn(escape::cases()),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           return escape::case_name(p.param);
                         });

// Tenant A holds every tunnel its limit allows (and is refused past it);
// tenant B's proxy answers at once all the while.
TEST(HostileNetNeighbourTest, AFloodingTenantDoesNotStarveAnother) {
  REQUIRE_NET_WORLD();
  Server server;
  std::string a, b;
  server.two_tenants(a, b);
  if (HasFatalFailure()) return;
  const std::string flood = escape::program_dir() + "/proxy_flood.py";
  ASSERT_TRUE(server.sandbox(a).write_file("flood.py", escape::slurp(flood), 0644, false).ok());

  std::promise<sandbox::ExecResult> held;
  auto done = held.get_future();
  std::thread t([&] { held.set_value(server.sh(a, "python3 flood.py allowed.test 300 release")); });
  auto session = server.session(a);
  ASSERT_NE(session, nullptr);
  // Wait for A to hold its kMaxPerSandbox tunnels (the program then waits
  // for the release file).
  for (int i = 0; i < 600 && session->stats().open < kMaxPerSandbox; ++i)
    std::this_thread::sleep_for(50ms);
  EXPECT_EQ(session->stats().open, kMaxPerSandbox);

  const auto started = std::chrono::steady_clock::now();
  auto r = server.sh(b,
                     "curl -sS --max-time 10 http://allowed.test/host; echo;"
                     "curl -sS --max-time 10 -x socks5h://127.0.0.1:1080 http://allowed.test/host");
  EXPECT_EQ(r.stdout_data, "allowed.test\nallowed.test") << r.stderr_data;
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
  EXPECT_EQ(server.session(b)->stats().refused_by_reason.count(net::Reason::kLimit), 0U);

  ASSERT_TRUE(server.sandbox(a).write_file("release", "", 0644, false).ok());
  ASSERT_EQ(done.wait_for(90s), std::future_status::ready);
  t.join();
  auto flooded = done.get();
  EXPECT_EQ(flooded.stdout_data, "200 64\n503 236\n") << flooded.stderr_data;
}

// Tenant A floods its DNS stub past the rate limit; tenant B's stub answers
// each of its lookups meanwhile (the limit is per sandbox).
TEST(HostileNetNeighbourTest, ADnsFloodDoesNotSilenceAnotherTenantsStub) {
  REQUIRE_NET_WORLD();
  Server server;
  std::string a, b;
  server.two_tenants(a, b);
  if (HasFatalFailure()) return;
  const std::string flood = escape::program_dir() + "/dns_flood.py";
  ASSERT_TRUE(server.sandbox(a).write_file("flood.py", escape::slurp(flood), 0644, false).ok());
  auto flooding =
      std::async(std::launch::async, [&] { return server.sh(a, "python3 flood.py allowed.test"); });
  // From the flood's first refusal on, B looks up 20 times (getent hosts:
  // `ahosts` asks getaddrinfo with AI_ADDRCONFIG, which finds no address
  // but lo's in an allowlist sandbox and does not even ask).
  auto session = server.session(a);
  ASSERT_NE(session, nullptr);
  auto limited = [&] {
    const auto st = session->stats();
    const auto it = st.refused_by_reason.find(net::Reason::kLimit);
    return it != st.refused_by_reason.end() && it->second > 0;
  };
  for (int i = 0; i < 200 && !limited(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(limited());
  auto r = server.sh(b,
                     "n=0; for i in $(seq 20); do getent hosts allowed.test >/dev/null && "
                     "n=$((n+1)); done; echo $n");
  EXPECT_EQ(r.stdout_data, "20\n") << r.stderr_data;
  ASSERT_EQ(flooding.wait_for(60s), std::future_status::ready);
  EXPECT_EQ(flooding.get().stdout_data,
            "probe NOERROR\nanswered 1000\nrate_limited True\nafter NOERROR\n");
  const auto b_stats = server.session(b)->stats();
  EXPECT_EQ(b_stats.refused_by_reason.count(net::Reason::kLimit), 0U);
}

}  // namespace
}  // namespace sandcastle::nettest
