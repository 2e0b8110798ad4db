// Full mode end to end: real native sandboxes made through the service
// layer, pasta joining each one's network namespace and an nft table in it,
// against the world of net_world.h. Programs connect directly (no proxy
// variables); every refusal is checked by the errno a program sees.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <thread>

#include "net/user_net.h"
#include "service/durable.h"
#include "service_world.h"

namespace sandcastle::nettest {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// A listener in the test's namespace, where pasta's sockets live (the
// "host" of the sandbox), on addr and a free port.
std::pair<UniqueFd, std::uint16_t> listen_at(const char* addr) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  ::inet_pton(AF_INET, addr, &sin.sin_addr);
  socklen_t len = sizeof sin;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sin), sizeof sin) != 0 ||
      ::listen(fd.get(), 8) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sin), &len) != 0)
    return {UniqueFd(), 0};
  return {std::move(fd), ntohs(sin.sin_port)};
}

// Python printing, per line, "ok" or the errno name of one attempt.
constexpr const char* kPyPrelude =
    "import socket, errno\n"
    "def err(f):\n"
    "  try: f(); return 'ok'\n"
    "  except OSError as e: return errno.errorcode[e.errno]\n"
    "def tcp(a, p): return err(lambda: socket.create_connection((a, p), timeout=5).close())\n"
    "def udp(a, p):\n"
    "  u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.connect((a, p))\n"
    "  return err(lambda: u.send(b'x'))\n";

class FullTest : public ServiceWorldTest {
 protected:
  void SetUp() override {
    REQUIRE_NET_WORLD();
    if (auto s = net::full_mode_available(); !s) GTEST_SKIP() << s.error().message();
    // The manager's own ticks would tend networks in the middle of a test
    // that calls tend_networks itself.
    start({net::Mode::kNone, net::Mode::kAllowList, net::Mode::kFull}, std::chrono::hours(1));
  }

  // allow: the test net and the name allowed.test; deny: the neighbour .3.
  json create(std::vector<std::string> allow = {"198.51.100.0/24:*", "allowed.test"}) {
    json args{{"language", "bash"},
              {"network", {{"mode", "full"}, {"allow", allow}, {"deny", {"198.51.100.3"}}}}};
    auto r = service::create_sandbox(*env_, caller_, args);
    EXPECT_TRUE(r.ok()) << r.error().message();
    return r.ok() ? *r : json();
  }
  sandbox::ExecResult py(const std::string& id, const std::string& body) {
    return run(id, {"python3", "-c", std::string(kPyPrelude) + body});
  }
};

TEST_F(FullTest, AllowedAddressesAnswerDirectlyAndTheRestIsRefusedAtOnce) {
  const json made = create();
  ASSERT_TRUE(made.contains("sandbox_id"));
  const std::string id = made["sandbox_id"];
  EXPECT_EQ(made["network"]["mode"], "full");
  EXPECT_EQ(service::network_json(*entry(id))["mode"], "full");

  // No proxy: curl goes straight to the server.
  auto r = sh(id,
              "echo ${HTTP_PROXY-unset} ${ALL_PROXY-unset};"
              "curl -sS http://198.51.100.2/host; echo;"
              "curl -sS -o /dev/null -w '%{size_download}\\n' http://198.51.100.2/big");
  EXPECT_EQ(r.stdout_data, "unset unset\n198.51.100.2\n1048576\n") << r.stderr_data;

  // The test's namespace is the sandbox's "host": its loopback, an any-
  // address listener reached at the bridge address, the host's loopback
  // port, the metadata address, the denied neighbour, and DNS elsewhere
  // than the stub. Other UDP goes out; IPv6 has no route (pasta runs -4).
  auto [lo_listener, lo_port] = listen_at("127.0.0.1");
  auto [any_listener, any_port] = listen_at("0.0.0.0");
  ASSERT_NE(lo_port, 0);
  ASSERT_NE(any_port, 0);
  ASSERT_EQ(tcp_connect_errno(NetWorld::kBridgeAddr, any_port), 0);  // open from here
  r = py(id,
         "print(tcp('198.51.100.2', 7000))\n"
         "print(tcp('198.51.100.3', 80))\n"
         "print(tcp('127.0.0.1', " +
             std::to_string(lo_port) +
             "))\n"
             "print(tcp('127.0.0.1', " +
             std::to_string(NetWorld::host_loopback_port()) +
             "))\n"
             "print(tcp('198.51.100.1', " +
             std::to_string(any_port) +
             "))\n"
             "print(tcp('169.254.169.254', 80))\n"
             "print(udp('198.51.100.53', 53))\n"
             "print(udp('198.51.100.2', 9))\n"
             "print(tcp('fd00:5c::2', 80))\n");
  EXPECT_EQ(r.stdout_data,
            "ok\nECONNREFUSED\nECONNREFUSED\nECONNREFUSED\nECONNREFUSED\nECONNREFUSED\nEPERM\nok\n"
            "ENETUNREACH\n")
      << r.stderr_data;
}

// The firewall lives in the sandbox's own namespace, owned by its user
// namespace; its programs hold no CAP_NET_ADMIN there, so they can neither
// remove it nor move traffic around it.
TEST_F(FullTest, ProgramsCannotRemoveTheFirewall) {
  const json made = create();
  ASSERT_TRUE(made.contains("sandbox_id"));
  const std::string id = made["sandbox_id"];
  auto r = sh(id,
              "nft flush ruleset 2>&1; echo nft=$?;"
              "ip route replace 198.51.100.3/32 dev lo 2>&1; echo ip=$?");
  EXPECT_NE(r.stdout_data.find("Operation not permitted"), std::string::npos) << r.stdout_data;
  EXPECT_EQ(r.stdout_data.find("nft=0"), std::string::npos) << r.stdout_data;
  EXPECT_EQ(r.stdout_data.find("ip=0"), std::string::npos) << r.stdout_data;
  r = py(id, "print(tcp('198.51.100.3', 80))\nprint(tcp('198.51.100.2', 80))\n");
  EXPECT_EQ(r.stdout_data, "ECONNREFUSED\nok\n") << r.stderr_data;
}

TEST_F(FullTest, NamesResolveOnlyThroughTheStubAndThePolicy) {
  const json made = create();
  ASSERT_TRUE(made.contains("sandbox_id"));
  const std::string id = made["sandbox_id"];
  // allowed.test is on the list; x.allowed.test is not, but resolves into an
  // allowed range (which the sandbox reaches directly anyway); other.test
  // resolves to the denied .3, so its answer is dropped.
  auto r = sh(id,
              "getent hosts allowed.test; echo dns=$?;"
              "getent hosts x.allowed.test; echo dns=$?;"
              "getent hosts other.test; echo dns=$?;"
              "curl -sS http://allowed.test/host; echo");
  EXPECT_EQ(r.stdout_data,
            "198.51.100.2    allowed.test\ndns=0\n198.51.100.2    x.allowed.test\ndns=0\ndns=2\n"
            "allowed.test\n")
      << r.stderr_data;
  auto got = reasons(id);
  ASSERT_FALSE(got.empty());
  for (const auto& reason : got) EXPECT_EQ(reason, "denied");
  EXPECT_EQ(entry(id)->network()->last_refusals().front().target, "other.test");
}

TEST_F(FullTest, NamesAreNotLookedUpWithoutAnAddressRule) {
  const json made = create({"allowed.test"});
  ASSERT_TRUE(made.contains("sandbox_id"));
  const std::string id = made["sandbox_id"];
  auto r = sh(id, "getent hosts x.allowed.test; echo dns=$?");
  EXPECT_EQ(r.stdout_data, "dns=2\n") << r.stderr_data;
  auto got = reasons(id);
  ASSERT_FALSE(got.empty());
  for (const auto& reason : got) EXPECT_EQ(reason, "dns_refused");
}

TEST_F(FullTest, ARuleChangeCutsOpenConnectionsAndRefusesTheNext) {
  const json made = create();
  ASSERT_TRUE(made.contains("sandbox_id"));
  const std::string id = made["sandbox_id"];
  // An echo connection to .2:7000, exchanged on every 50 ms until it fails;
  // `ready` marks the first exchange.
  std::promise<sandbox::ExecResult> held;
  auto done = held.get_future();
  std::thread t([&] {
    held.set_value(py(id,
                      "import time\n"
                      "s = socket.create_connection(('198.51.100.2', 7000), timeout=5)\n"
                      "s.sendall(b'ping'); assert s.recv(4) == b'ping'\n"
                      "open('ready', 'w').close()\n"
                      "def once():\n"
                      "  s.sendall(b'ping')\n"
                      "  if s.recv(4) != b'ping': raise OSError(errno.EPIPE, 'eof')\n"
                      "for i in range(400):\n"
                      "  e = err(once)\n"
                      "  if e != 'ok': break\n"
                      "  time.sleep(0.05)\n"
                      "print(e)\n"
                      "print(tcp('198.51.100.2', 7000))\n"
                      "print(tcp('198.51.100.2', 80))\n"));
  });
  bool ready = false;
  for (int i = 0; i < 200 && !ready; ++i) {
    ready = entry(id)->sandbox().stat("ready").ok();
    if (!ready) std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(ready);

  auto changed = service::set_sandbox_network(
      *env_, caller_, json{{"sandbox_id", id}, {"deny", {"198.51.100.3", "198.51.100.2:7000"}}});
  ASSERT_TRUE(changed.ok()) << changed.error().message();
  EXPECT_EQ((*changed)["network"]["mode"], "full");
  EXPECT_EQ((*changed)["network"]["deny"], json::array({"198.51.100.3:*", "198.51.100.2:7000"}));
  EXPECT_EQ((*changed)["closed_connections"], 0);  // nothing proxied in full mode
  ASSERT_EQ(done.wait_for(25s), std::future_status::ready);
  t.join();
  EXPECT_EQ(done.get().stdout_data, "ECONNRESET\nECONNREFUSED\nok\n");
  // The stored rules are the new ones.
  EXPECT_EQ(service::network_json(*entry(id))["deny"],
            json::array({"198.51.100.3:*", "198.51.100.2:7000"}));
}

// A fork is a full sandbox of its own (its own pasta and firewall) with the
// live rules of the original, changes included.
TEST_F(FullTest, AForkGetsItsOwnNetworkWithTheLiveRules) {
  const json made = create();
  ASSERT_TRUE(made.contains("sandbox_id"));
  const std::string id = made["sandbox_id"];
  auto changed = service::set_sandbox_network(
      *env_, caller_, json{{"sandbox_id", id}, {"deny", {"198.51.100.2:7000"}}});
  ASSERT_TRUE(changed.ok()) << changed.error().message();
  auto forked = service::fork_sandbox(*env_, caller_, json{{"sandbox_id", id}});
  ASSERT_TRUE(forked.ok()) << forked.error().message();
  const std::string copy = (*forked)["sandbox_id"];
  EXPECT_EQ((*forked)["network"]["mode"], "full");
  EXPECT_EQ((*forked)["network"]["deny"], json::array({"198.51.100.2:7000"}));
  auto a = entry(id)->full_network();
  auto b = entry(copy)->full_network();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a->tool_pid(), b->tool_pid());
  auto r = py(copy,
              "print(tcp('198.51.100.2', 7000))\n"
              "print(tcp('198.51.100.3', 80))\n"
              "print(tcp('198.51.100.2', 80))\n");
  EXPECT_EQ(r.stdout_data, "ECONNREFUSED\nok\nok\n") << r.stderr_data;
  // Closing the original leaves the fork's network up.
  a.reset();
  ASSERT_TRUE(service::close_sandbox(*env_, caller_, id).ok());
  EXPECT_TRUE(b->tool_running());
  r = py(copy, "print(tcp('198.51.100.2', 80))\n");
  EXPECT_EQ(r.stdout_data, "ok\n") << r.stderr_data;
}

// The firewall refuses the host's own addresses; one the host gains after
// the sandbox was made is refused once the manager tends the networks (its
// thread does every reap interval), not only from the next rule change.
TEST_F(FullTest, AnAddressTheHostGainsIsRefusedAfterTheNextTend) {
  const json made = create({"198.51.100.0/24:*", "203.0.113.0/24:*"});
  ASSERT_TRUE(made.contains("sandbox_id"));
  const std::string id = made["sandbox_id"];
  auto [listener, port] = listen_at("0.0.0.0");
  ASSERT_NE(port, 0);
  const char* added = "203.0.113.77";
  auto add = run_command({"ip", "addr", "add", std::string(added) + "/32", "dev", "lo"});
  ASSERT_TRUE(add.ok() && add->status == 0) << (add.ok() ? add->err : add.error().message());
  struct Remove {
    ~Remove() { (void)run_command({"ip", "addr", "del", "203.0.113.77/32", "dev", "lo"}); }
  } remove;
  const std::string probe =
      "print(tcp('" + std::string(added) + "', " + std::to_string(port) + "))\n";
  // Loaded at create, the firewall does not know the address yet.
  auto r = py(id, probe);
  EXPECT_EQ(r.stdout_data, "ok\n") << r.stderr_data;
  manager_->tend_networks();
  r = py(id, probe + "print(tcp('198.51.100.2', 80))\nprint(tcp('198.51.100.3', 80))\n");
  EXPECT_EQ(r.stdout_data, "ECONNREFUSED\nok\nECONNREFUSED\n") << r.stderr_data;
  // A rule change keeps refusing it (its firewall is rendered with the
  // addresses read then, not the proxies' older list).
  auto changed = service::set_sandbox_network(
      *env_, caller_, json{{"sandbox_id", id}, {"deny", {"198.51.100.2:7000"}}});
  ASSERT_TRUE(changed.ok()) << changed.error().message();
  r = py(id, probe);
  EXPECT_EQ(r.stdout_data, "ECONNREFUSED\n") << r.stderr_data;
}

// pasta dying is seen, recorded for get_sandbox_status and logged, and it
// is started again; the firewall, which lives in the namespace, still holds.
TEST_F(FullTest, PastaThatExitsIsRecordedAndStartedAgain) {
  const json made = create();
  ASSERT_TRUE(made.contains("sandbox_id"));
  const std::string id = made["sandbox_id"];
  auto full = entry(id)->full_network();
  ASSERT_NE(full, nullptr);
  const pid_t first = full->tool_pid();
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, first, 0)));
  ASSERT_TRUE(pidfd);
  ASSERT_EQ(::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0), 0);
  struct pollfd p {
    pidfd.get(), POLLIN, 0
  };
  ASSERT_EQ(::poll(&p, 1, 5000), 1);
  EXPECT_FALSE(full->tool_running());
  auto r = py(id, "print(tcp('198.51.100.2', 80))\n");
  EXPECT_NE(r.stdout_data, "ok\n");  // no route without pasta

  manager_->tend_networks();
  EXPECT_EQ(service::network_status_json(*entry(id))["last_failure"],
            "pasta exited (signal 9); restarted (1 of 3)");
  EXPECT_EQ(full->restarts(), 1);
  EXPECT_NE(full->tool_pid(), first);
  EXPECT_TRUE(full->tool_running());
  r = py(id, "print(tcp('198.51.100.2', 80))\nprint(tcp('198.51.100.3', 80))\n");
  EXPECT_EQ(r.stdout_data, "ok\nECONNREFUSED\n") << r.stderr_data;
  // Running again: another tend changes nothing.
  const pid_t second = full->tool_pid();
  manager_->tend_networks();
  EXPECT_EQ(full->tool_pid(), second);
  EXPECT_EQ(full->restarts(), 1);
}

TEST_F(FullTest, ClosingTheSandboxKillsPasta) {
  const json made = create();
  ASSERT_TRUE(made.contains("sandbox_id"));
  const std::string id = made["sandbox_id"];
  auto full = entry(id)->full_network();
  ASSERT_NE(full, nullptr);
  ASSERT_TRUE(full->tool_running());
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, full->tool_pid(), 0)));
  ASSERT_TRUE(pidfd);
  full.reset();
  auto closed = service::close_sandbox(*env_, caller_, id);
  ASSERT_TRUE(closed.ok()) << closed.error().message();
  struct pollfd p {
    pidfd.get(), POLLIN, 0
  };
  EXPECT_EQ(::poll(&p, 1, 5000), 1);
}

}  // namespace
}  // namespace sandcastle::nettest
