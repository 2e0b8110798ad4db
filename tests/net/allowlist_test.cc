// Allowlist mode end to end: real native sandboxes made through the service
// layer, the server's proxies serving them, and the world of net_world.h
// (its own bridge, servers and DNS responder). Every refusal is checked by
// what the program sees and by the reason the sandbox's status records.
#include <gtest/gtest.h>

#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <thread>

#include "common/metrics.h"
#include "service_world.h"

namespace sandcastle::nettest {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

class AllowlistTest : public ServiceWorldTest {
 protected:
  void SetUp() override {
    REQUIRE_NET_WORLD();
    start({net::Mode::kNone, net::Mode::kAllowList});
  }

  std::string create(const std::vector<std::string>& allow) {
    json args{{"language", "bash"}, {"network", {{"mode", "allowlist"}, {"allow", allow}}}};
    auto r = service::create_sandbox(*env_, caller_, args);
    EXPECT_TRUE(r.ok()) << r.error().message();
    if (!r.ok()) return {};
    const std::string id = (*r)["sandbox_id"];
    // The test CA, for https.
    std::ifstream in(NetWorld::get()->ca_cert());
    std::stringstream ca;
    ca << in.rdbuf();
    EXPECT_TRUE(entry(id)->sandbox().write_file("ca.pem", ca.str(), 0644, false).ok());
    return id;
  }
};

TEST_F(AllowlistTest, AllowedHostsAnswerThroughEveryRoute) {
  const auto id = create({"allowed.test", "*.allowed.test:443", "198.51.100.2/32:7000"});
  ASSERT_FALSE(id.empty());
  // HTTP_PROXY and HTTPS_PROXY (curl and python read them), the SOCKS proxy
  // resolving remotely (socks5h) and locally through the DNS stub (socks5:
  // the proxy maps the address back to the name), and python's urllib.
  auto r = sh(id,
              "curl -sS http://allowed.test/host; echo;"
              "curl -sS --cacert ca.pem https://allowed.test/host; echo;"
              "curl -sS --cacert ca.pem https://x.allowed.test/host; echo;"
              "curl -sS -x socks5h://127.0.0.1:1080 http://allowed.test/host; echo;"
              "curl -sS -x socks5://127.0.0.1:1080 http://allowed.test/host; echo;"
              "python3 -c \"import urllib.request as u;"
              "print(u.urlopen('http://allowed.test/host').read().decode())\";"
              "getent hosts allowed.test");
  EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data,
            "allowed.test\nallowed.test\nx.allowed.test\nallowed.test\nallowed.test\n"
            "allowed.test\n198.51.100.2    allowed.test\n");
  // A raw TCP tunnel to an allowed address and port (the echo server).
  r = sh(
      id,
      "python3 -c \"import socket\n"
      "s = socket.create_connection(('127.0.0.1', 3128))\n"
      "s.sendall(b'CONNECT 198.51.100.2:7000 HTTP/1.1\\r\\nHost: 198.51.100.2:7000\\r\\n\\r\\n')\n"
      "head = b''\n"
      "while not head.endswith(b'\\r\\n\\r\\n'): head += s.recv(1)\n"
      "print(head.split(b' ')[1].decode()); s.sendall(b'ping'); print(s.recv(4).decode())\"");
  EXPECT_EQ(r.stdout_data, "200\nping\n") << r.stderr_data;
  EXPECT_TRUE(reasons(id).empty());
  EXPECT_GE(entry(id)->network()->stats().allowed, 7U);
}

TEST_F(AllowlistTest, EverythingElseIsRefusedAtOnceWithItsReason) {
  const auto id = create({"allowed.test", "*.allowed.test:443"});
  ASSERT_FALSE(id.empty());
  auto r = sh(id,
              "code() { curl -s -o /dev/null -w '%{http_code} %{http_connect}\\n' \"$@\"; };"
              "code http://allowed.test:8080/;"  // port_not_allowed
              "code http://other.test/;"         // not_allowed
              "code http://198.51.100.3/;"       // the neighbour's literal
              "code --cacert ca.pem https://allowed.test.evil/;"
              "code http://evilallowed.test/;"
              "code --cacert ca.pem https://allowed.test:22/;"
              "code -H 'Host: other.test' http://allowed.test/;"  // host_mismatch
              "getent hosts other.test; echo dns=$?");
  EXPECT_EQ(r.stdout_data, "403 000\n403 000\n403 000\n000 403\n403 000\n000 403\n403 000\ndns=2\n")
      << r.stderr_data;
  auto got = reasons(id);
  ASSERT_GE(got.size(), 8U);
  EXPECT_EQ(
      std::vector<std::string>(got.begin(), got.begin() + 7),
      (std::vector<std::string>{"port_not_allowed", "not_allowed", "not_allowed", "not_allowed",
                                "not_allowed", "port_not_allowed", "host_mismatch"}));
  // getent asks for AAAA and A, and the resolver may retry: all refused.
  for (std::size_t i = 7; i < got.size(); ++i) EXPECT_EQ(got[i], "dns_refused");
  // The status a caller reads names them.
  auto status = service::network_status_json(*entry(id));
  EXPECT_EQ(status["last_refusals"][0]["target"], "allowed.test:8080");
  EXPECT_EQ(status["stats"]["refused_by_reason"]["not_allowed"], 4);
  // And /metrics counts them by reason.
  const std::string metrics = metrics::registry().render();
  EXPECT_NE(metrics.find("sandcastle_network_refused_total{reason=\"host_mismatch\"}"),
            std::string::npos);
}

TEST_F(AllowlistTest, NamesOfLoopbackOrMetadataAddressesAndLoopbackLiteralsAreRefused) {
  const auto port = std::to_string(NetWorld::host_loopback_port());
  const auto id = create({"loop.test:*", "meta.test", "localhost:*"});
  ASSERT_FALSE(id.empty());
  auto r = sh(id,
              "code() { curl -s --noproxy '' -o /dev/null -w '%{http_code}\\n' \"$@\"; };"
              "code http://loop.test:" +
                  port +
                  "/; code http://meta.test/;"
                  "code http://127.0.0.1:" +
                  port + "/; code http://localhost:" + port +
                  "/;"
                  "code http://0.0.0.0:" +
                  port + "/; code 'http://[::ffff:127.0.0.1]:" + port +
                  "/';"
                  "code http://2130706433:" +
                  port +
                  "/;"
                  "getent hosts loop.test; echo dns=$?");
  EXPECT_EQ(r.stdout_data, "403\n403\n403\n403\n403\n403\n403\ndns=2\n") << r.stderr_data;
  for (const auto& reason : reasons(id))
    EXPECT_TRUE(reason == "private_address" || reason == "not_allowed") << reason;
}

TEST_F(AllowlistTest, ATlsNameOtherThanTheTunnelsIsRefused) {
  const auto id = create({"allowed.test"});
  ASSERT_FALSE(id.empty());
  auto r = sh(id,
              "echo | openssl s_client -proxy 127.0.0.1:3128 -connect allowed.test:443 "
              "-servername other.test -CAfile ca.pem 2>&1; echo rc=$?");
  EXPECT_NE(r.stdout_data.find("alert number 112"), std::string::npos) << r.stdout_data;
  EXPECT_NE(r.stdout_data.find("rc=1"), std::string::npos);
  EXPECT_EQ(reasons(id), std::vector<std::string>{"sni_mismatch"});
}

TEST_F(AllowlistTest, NoOtherWayOutUdpRawOrIpv6) {
  const auto id = create({"allowed.test"});
  ASSERT_FALSE(id.empty());
  auto r =
      sh(id,
         "python3 -c \"import socket, errno\n"
         "def err(f):\n"
         "  try: f(); return 'ok'\n"
         "  except OSError as e: return errno.errorcode[e.errno]\n"
         "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
         "print(err(lambda: u.sendto(b'x', ('198.51.100.2', 53))))\n"
         "print(err(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)))\n"
         "print(err(lambda: socket.create_connection(('fd00:5c::2', 80), timeout=5)))\n"
         "print(err(lambda: socket.create_connection(('198.51.100.2', 80), timeout=5)))\";"
         "curl -s -o /dev/null -w '%{http_code}\\n' 'http://[fd00:5c::2]/'");
  EXPECT_EQ(r.stdout_data, "ENETUNREACH\nEPERM\nENETUNREACH\nENETUNREACH\n403\n") << r.stderr_data;
}

TEST_F(AllowlistTest, ARuleChangeTakesEffectAtOnceAndClosesTunnelsItNoLongerAllows) {
  const auto id = create({"allowed.test", "198.51.100.2/32:7000"});
  ASSERT_FALSE(id.empty());
  // A tunnel to the echo server, held open until the proxy closes it.
  std::promise<sandbox::ExecResult> held;
  auto done = held.get_future();
  std::thread t([&] {
    held.set_value(sh(id,
                      "python3 -c \"import socket\n"
                      "s = socket.create_connection(('127.0.0.1', 3128))\n"
                      "s.sendall(b'CONNECT 198.51.100.2:7000 HTTP/1.1\\r\\n\\r\\n')\n"
                      "s.settimeout(20)\n"
                      "print(s.recv(100).split(b' ')[1].decode(), flush=True)\n"
                      "print('eof' if s.recv(100) == b'' else 'data')\""));
  });
  auto session = entry(id)->network();
  for (int i = 0; i < 200 && session->stats().open == 0; ++i) std::this_thread::sleep_for(50ms);
  ASSERT_EQ(session->stats().open, 1U);

  auto changed = service::set_sandbox_network(
      *env_, caller_, json{{"sandbox_id", id}, {"allow", {"allowed.test"}}});
  ASSERT_TRUE(changed.ok()) << changed.error().message();
  EXPECT_EQ((*changed)["closed_connections"], 1);
  EXPECT_EQ((*changed)["network"]["allow"], json::array({"allowed.test:80,443"}));
  ASSERT_EQ(done.wait_for(10s), std::future_status::ready);
  t.join();
  EXPECT_EQ(done.get().stdout_data, "200\neof\n");
  EXPECT_EQ(reasons(id), std::vector<std::string>{"rule_removed"});

  // The next connection meets the new rules; the kept host still answers.
  auto r = sh(id,
              "curl -sS http://allowed.test/host; echo;"
              "curl -s -o /dev/null -w '%{http_connect}\\n' -p -x http://127.0.0.1:3128 "
              "http://198.51.100.2:7000/");
  EXPECT_EQ(r.stdout_data, "allowed.test\n403\n") << r.stderr_data;

  // The mode is fixed, and mode none has no rules to change.
  auto mode =
      service::set_sandbox_network(*env_, caller_, json{{"sandbox_id", id}, {"mode", "none"}});
  ASSERT_FALSE(mode.ok());
  EXPECT_EQ(mode.error().code, ErrorCode::kFailedPrecondition);
}

TEST_F(AllowlistTest, ModeNoneRefusesRulesAndTheServerOffersOnlyItsModes) {
  auto r = service::create_sandbox(
      *env_, caller_, json{{"network", {{"mode", "none"}, {"allow", {"allowed.test"}}}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().context, "network rules need mode \"allowlist\" (mode none has no way out)");
  env_->config.network_modes = {net::Mode::kNone};
  // The input schemas are built from the config once (Env::InputSchemas), as
  // a server's config is fixed from its start: a changed one needs them anew.
  env_->input_schemas = std::make_shared<service::Env::InputSchemas>();
  r = service::create_sandbox(*env_, caller_, json{{"network", {{"mode", "allowlist"}}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);  // not in the schema's enum
  r = service::create_sandbox(*env_, caller_,
                              json{{"network", {{"mode", "allowlist"}, {"allow", {"bad rule!"}}}}});
  ASSERT_FALSE(r.ok());
}

// A pause that freezes keeps the session, its rules and listeners; the
// changed rules are in the sandbox's record, which is what a stopped
// persistent sandbox starts again from and what a fork copies (full_test.cc
// forks; durable stop/start of a persistent sandbox reads the same record).
TEST_F(AllowlistTest, ChangedRulesAreRecordedAndSurviveAFreeze) {
  const auto id = create({"allowed.test", "other.test"});
  ASSERT_FALSE(id.empty());
  auto changed = service::set_sandbox_network(
      *env_, caller_, json{{"sandbox_id", id}, {"allow", {"allowed.test"}}});
  ASSERT_TRUE(changed.ok()) << changed.error().message();
  auto record = manager_->store().get(id);
  ASSERT_TRUE(record.has_value());
  EXPECT_NE(record->spec_json.find(R"("network_allow":["allowed.test:80,443"])"), std::string::npos)
      << record->spec_json;
  ASSERT_TRUE(manager_->pause(id, caller_.owner, service::PauseMode::kFreeze).ok());
  ASSERT_TRUE(manager_->resume(id, caller_.owner).ok());
  auto out = sh(id,
                "curl -sS http://allowed.test/host; echo;"
                "curl -s -o /dev/null -w '%{http_code}' http://other.test/");
  EXPECT_EQ(out.stdout_data, "allowed.test\n403") << out.stderr_data;
}

TEST_F(AllowlistTest, CallersMayNotOpenLoopbackOrPrivateRangesUnlessTheOperatorLetsThem) {
  const json loopback{{"network", {{"mode", "allowlist"}, {"allow", {"127.0.0.1/32:*"}}}}};
  auto r = service::create_sandbox(*env_, caller_, loopback);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(r.error().context.find("network.allow[0] \"127.0.0.1/32:*\" opens loopback"),
            std::string::npos)
      << r.error().context;
  // A wide rule opens nothing refused (decide() never lifts a refusal for
  // a rule wider than the refused block).
  r = service::create_sandbox(
      *env_, caller_, json{{"network", {{"mode", "allowlist"}, {"allow", {"0.0.0.0/0:*"}}}}});
  ASSERT_TRUE(r.ok()) << r.error().message();
  // set_sandbox_network is held to the same.
  auto changed = service::set_sandbox_network(
      *env_, caller_, json{{"sandbox_id", (*r)["sandbox_id"]}, {"allow", {"169.254.169.254"}}});
  ASSERT_FALSE(changed.ok());
  EXPECT_EQ(changed.error().code, ErrorCode::kPermissionDenied);

  env_->config.network_private_allow = {net::Cidr::parse("127.0.0.0/8").value()};
  r = service::create_sandbox(*env_, caller_, loopback);
  ASSERT_TRUE(r.ok()) << r.error().message();
  // And then it is reached: the test's listener on this namespace's loopback.
  const auto id = (*r)["sandbox_id"].get<std::string>();
  auto out = sh(id,
                "curl -s -o /dev/null -w '%{http_connect}' -p -x http://127.0.0.1:3128 "
                "http://127.0.0.1:" +
                    std::to_string(NetWorld::host_loopback_port()) + "/");
  EXPECT_NE(out.stdout_data, "403") << out.stderr_data;
}

}  // namespace
}  // namespace sandcastle::nettest
