// The hostile programs of the integration suite (tests/integration/escape/)
// in a full-mode sandbox: pasta joined to its network namespace, an nft
// table in it, allow 198.51.100.0/24 and allowed.test, deny 198.51.100.3.
// Each program must get its one exact answer; after each, a full-mode
// neighbour is intact and still reaches 198.51.100.2 directly, the hostile
// sandbox's pasta is still the process the server started, and its firewall
// still refuses the denied neighbour: never a network the rules do not cover.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <map>

#include "../integration/escape/escape_cases.h"
#include "../integration/sandbox/fixture.h"
#include "common/unique_fd.h"
#include "net/proxy_service.h"
#include "net/user_net.h"
#include "net_world.h"
#include "service/lifecycle.h"
#include "service/sandbox_network.h"
#include "service_world.h"

namespace sandcastle::nettest {
namespace {

using nlohmann::json;
using sandbox::testing::escape::Case;
using namespace std::chrono_literals;
namespace escape = sandbox::testing::escape;

// Where full mode differs from mode none (escape_cases.h), and why. The
// sandbox has a route out (through pasta), the firewall in its namespace,
// and the DNS stub on its lo, but no proxies: programs connect directly.
// As in mode none: tcp_host_loopback and abstract_unix (the sandbox's own lo
// and abstract namespace, where nothing listens), netlink and the raw and
// packet sockets (seccomp), net_admin (no CAP_NET_ADMIN in its namespace),
// ipv6_external (pasta runs IPv4 only: no route), and every non-network
// program.
const std::map<std::string, std::string>& full_expected() {
  static const std::map<std::string, std::string> m = {
      // Aimed at the denied 198.51.100.3 (its HTTP server is up): the
      // firewall's TCP reset.
      {"tcp_external", "ECONNREFUSED\n"},
      // UDP to the denied .3 (port 53, refused twice over): the output
      // chain's reject drops the packet, and sendto says EPERM.
      {"udp_external", "EPERM\n"},
      // Direct: a built-in refusal, reset at once. No proxy listens on the
      // sandbox's :3128 in full mode.
      {"metadata", "direct ECONNREFUSED\nconnect ECONNREFUSED\nget ECONNREFUSED\n"},
      // The same 200 queries/s limit as in allowlist: the stub is the one
      // DNS path full mode leaves open.
      {"dns_flood", "probe NOERROR\nanswered 1000\nrate_limited True\nafter NOERROR\n"},
      // proxy_to_host, proxy_garbage and proxy_flood find no proxy on
      // :3128/:1080: ECONNREFUSED, as in mode none.
  };
  return m;
}

// The server for one suite (service_world.h), offering full mode; every
// sandbox a full one: allow the test net and allowed.test, deny .3.
struct FullServer : ServiceServer {
  FullServer() { caller_ = {"mallory", "k-mallory"}; }
  Status start() {
    return ServiceServer::start({net::Mode::kNone, net::Mode::kAllowList, net::Mode::kFull});
  }
  Result<std::string> create() {
    return ServiceServer::create({{"language", "bash"},
                                  {"network",
                                   {{"mode", "full"},
                                    {"allow", {"198.51.100.0/24:*", "allowed.test"}},
                                    {"deny", {"198.51.100.3"}}}}});
  }
};

// A listener on 127.0.0.1 of the test's namespace (pasta's "host") and an
// abstract unix one; the programs aim at both, and neither may accept.
struct HostListeners {
  UniqueFd tcp;
  UniqueFd abstract;
  Status open(escape::HostFacts& facts) {
    tcp = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(tcp.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(tcp.get(), 8) != 0 ||
        ::getsockname(tcp.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return Error::from_errno("loopback listener");
    facts.loopback_port = ntohs(a.sin_port);
    facts.abstract_name = "sandcastle-full-escape-" + std::to_string(::getpid());
    abstract = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    sockaddr_un u{};
    u.sun_family = AF_UNIX;
    std::memcpy(u.sun_path + 1, facts.abstract_name.data(), facts.abstract_name.size());
    const auto ulen =
        static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + facts.abstract_name.size());
    if (::bind(abstract.get(), reinterpret_cast<sockaddr*>(&u), ulen) != 0 ||
        ::listen(abstract.get(), 8) != 0)
      return Error::from_errno("abstract listener");
    return ok_status();
  }
};

class HostileFullTest : public ::testing::TestWithParam<Case> {
 public:
  static void SetUpTestSuite() {
    if (NetWorld::get() == nullptr) return;  // each test skips or fails, saying why
    if (auto s = net::full_mode_available(); !s) {
      skip_ = s.error().message();
      return;
    }
    server_ = new FullServer;
    auto s = server_->start();
    ASSERT_TRUE(s.ok()) << s.error().message();
    auto h = server_->create();
    ASSERT_TRUE(h.ok()) << h.error().message();
    hostile_ = *h;
    auto n = server_->create();
    ASSERT_TRUE(n.ok()) << n.error().message();
    neighbour_ = *n;
    ASSERT_TRUE(
        server_->entry(neighbour_)->sandbox().write_file("/workspace/canary", "intact").ok());
    auto full = server_->entry(hostile_)->full_network();
    ASSERT_NE(full, nullptr);
    pasta_pid_ = full->tool_pid();

    auto& hs = server_->entry(hostile_)->sandbox();
    ASSERT_TRUE(hs.mkdir("/workspace/esc").ok());
    for (const auto& e : escape::list_programs())
      ASSERT_TRUE(
          hs.write_file("/workspace/esc/" + e, escape::slurp(escape::program_dir() + "/" + e))
              .ok());
    auto built = server_->sh(hostile_, escape::build_script("/workspace/esc", false));
    ASSERT_EQ(built.exit_code, 0) << built.stderr_data;
    listeners_ = new HostListeners;
    auto l = listeners_->open(facts_);
    ASSERT_TRUE(l.ok()) << l.error().message();
    // The denied neighbour: its servers are up and the route to it exists,
    // so only the firewall stops the direct attempts.
    facts_.tcp_target = NetWorld::kServerB;
    facts_.udp_target = NetWorld::kServerB;
  }

  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete listeners_;
    listeners_ = nullptr;
  }

  static void expect_network_intact() {
    EXPECT_EQ(::accept(listeners_->tcp.get(), nullptr, nullptr), -1)
        << "a sandbox reached the host's loopback";
    EXPECT_EQ(::accept(listeners_->abstract.get(), nullptr, nullptr), -1)
        << "a sandbox reached a host unix socket";
    // The hostile sandbox's pasta is the one the server started, and its
    // firewall still answers: .2 reached, the denied .3 refused (curl's 7,
    // a connect refused at once, not 28, a timeout).
    auto full = server_->entry(hostile_)->full_network();
    ASSERT_NE(full, nullptr);
    EXPECT_EQ(full->tool_pid(), pasta_pid_);
    EXPECT_TRUE(full->tool_running());
    auto r = server_->sh(hostile_,
                         "curl -sS -o /dev/null -w '%{http_code}\\n' --max-time 10 "
                         "http://198.51.100.2/host; curl -s --max-time 5 http://198.51.100.3/; "
                         "echo $?");
    EXPECT_EQ(r.stdout_data, "200\n7\n") << r.stderr_data;
    auto canary = server_->entry(neighbour_)->sandbox().read_file("/workspace/canary");
    ASSERT_TRUE(canary.ok());
    EXPECT_EQ(canary->data, "intact");
    // The neighbour reaches the allowed server directly and by name (its
    // own DNS stub, its own rate limit).
    r = server_->sh(neighbour_,
                    "curl -sS --max-time 10 http://198.51.100.2/host; echo;"
                    "curl -sS --max-time 10 http://allowed.test/host; echo");
    EXPECT_EQ(r.stdout_data, "198.51.100.2\nallowed.test\n") << r.stderr_data;
  }

  static FullServer* server_;
  static HostListeners* listeners_;
  static std::string skip_;
  static std::string hostile_;
  static std::string neighbour_;
  static pid_t pasta_pid_;
  static escape::HostFacts facts_;
};

FullServer* HostileFullTest::server_ = nullptr;
HostListeners* HostileFullTest::listeners_ = nullptr;
std::string HostileFullTest::skip_;
std::string HostileFullTest::hostile_;
std::string HostileFullTest::neighbour_;
pid_t HostileFullTest::pasta_pid_ = 0;
escape::HostFacts HostileFullTest::facts_;  // NOLINT(cert-err58-cpp): a test's static

TEST_P(HostileFullTest, IsDeniedInFullMode) {
  REQUIRE_NET_WORLD();
  if (!skip_.empty()) GTEST_SKIP() << skip_;
  ASSERT_FALSE(hostile_.empty());
  const Case& c = GetParam();
  const std::string program = c.program;
  auto r = server_->entry(hostile_)->sandbox().exec(
      escape::program_request(program, "/workspace/esc", facts_));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->reason, sandbox::EndReason::kExited)
      << "signal " << r->signal << ": " << r->stderr_data;
  EXPECT_EQ(r->exit_code, 0) << r->stderr_data;
  EXPECT_EQ(r->stdout_data, escape::expected_in_mode(c, full_expected()))
      << "stderr: " << r->stderr_data;
  expect_network_intact();
}

INSTANTIATE_TEST_SUITE_P(HostileFull, HostileFullTest, ::testing::ValuesIn(escape::cases()),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           return escape::case_name(p.param);
                         });

}  // namespace
}  // namespace sandcastle::nettest
