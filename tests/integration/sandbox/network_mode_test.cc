// Network modes (issue 19) as the native backend runs them: allowlist and
// full sandboxes are made like mode none (warm ones too) and their init
// opens the proxy and DNS sockets inside the sandbox on request; full hands
// its namespaces to the server. The proxies and full mode's network itself
// are tested in tests/net/.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "fixture.h"
#include "net/user_net.h"
#include "sandbox/native/native_sandbox.h"

namespace sandcastle::sandbox::testing {
namespace {

class NetworkModeTest : public SandboxTest {};

// Full mode: made like mode none; the server gets the sandbox's namespaces
// from its init (pidfd) to start pasta and load the firewall (tests/net/
// full_test.cc). Where the host lacks what full needs, the exact refusal.
TEST_F(NetworkModeTest, FullSandboxesHandOverTheirNamespaces) {
  SpecOptions o;
  o.network = NetworkMode::kFull;
  o.network_allow = {"allowed.test"};
  auto spec = SandboxSpec::create(o);
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  auto made = backend_->create(*spec);
  if (auto why = net::full_mode_available(); !why) {
    ASSERT_FALSE(made.ok());
    EXPECT_EQ(made.error().code, ErrorCode::kUnavailable);
    EXPECT_EQ(made.error().context,
              "native backend: network mode \"full\" is not available on this server: " +
                  why.error().message() + "; use \"allowlist\" with the hosts the sandbox needs");
    return;
  }
  ASSERT_TRUE(made.ok()) << made.error().message();
  auto sb = std::move(*made);
  auto ns = sb->network_namespaces();
  ASSERT_TRUE(ns.ok()) << ns.error().message();
  // The very namespaces of the sandbox's init, not the server's.
  const pid_t init = dynamic_cast<native::NativeSandbox&>(*sb).init_pid();
  auto same = [](int fd, const std::string& path) {
    struct stat a {
    }, b{};
    return ::fstat(fd, &a) == 0 && ::stat(path.c_str(), &b) == 0 && a.st_ino == b.st_ino &&
           a.st_dev == b.st_dev;
  };
  const std::string proc = "/proc/" + std::to_string(init) + "/ns/";
  EXPECT_TRUE(same(ns->netns.get(), proc + "net"));
  EXPECT_TRUE(same(ns->userns.get(), proc + "user"));
  EXPECT_FALSE(same(ns->netns.get(), "/proc/self/ns/net"));
  EXPECT_FALSE(same(ns->userns.get(), "/proc/self/ns/user"));
  EXPECT_TRUE(::fcntl(ns->netns.get(), F_GETFD) & FD_CLOEXEC);

  // Only the DNS sockets: full mode has no proxies.
  auto l = sb->open_net_listeners(false);
  ASSERT_TRUE(l.ok()) << l.error().message();
  EXPECT_TRUE(l->dns_tcp && l->dns_udp);
  EXPECT_FALSE(l->http || l->socks);
  // And no proxy variables.
  std::swap(sb_, sb);
  auto r = sh("echo \"${HTTP_PROXY-unset} ${ALL_PROXY-unset}\"");
  std::swap(sb_, sb);
  EXPECT_EQ(r.stdout_data, "unset unset\n");

  // Once destroyed, the namespaces are no longer handed out.
  ASSERT_TRUE(sb->destroy().ok());
  auto gone = sb->network_namespaces();
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code, ErrorCode::kUnavailable);
}

TEST_F(NetworkModeTest, AllowlistSandboxesComeFromTheWarmPoolAndHoldTheirPorts) {
  ASSERT_TRUE(backend_->wait_pool([](const native::PoolStats& s) { return s.ready > 0; },
                                  std::chrono::seconds(20)));
  const auto before = backend_->pool_stats().taken;
  SpecOptions o;
  o.network = NetworkMode::kAllowList;
  o.network_allow = {"allowed.test"};
  auto sb = make(o);
  ASSERT_TRUE(sb);
  // The pool's sandboxes are made for mode none; the mode is not in the key.
  EXPECT_EQ(backend_->pool_stats().taken, before + 1);

  auto l = sb->open_net_listeners(true);
  ASSERT_TRUE(l.ok()) << l.error().message();
  ASSERT_TRUE(l->http && l->socks && l->dns_tcp && l->dns_udp);

  // A program of the sandbox reaches the proxy port: its connection waits on
  // the listener the server holds.
  std::swap(sb_, sb);
  auto r =
      py("import socket\n"
         "s = socket.create_connection(('127.0.0.1', 3128)); s.sendall(b'hi'); print('sent')\n");
  std::swap(sb_, sb);
  EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  struct pollfd p {
    l->http.get(), POLLIN, 0
  };
  ASSERT_EQ(::poll(&p, 1, 5000), 1);
  UniqueFd conn(::accept4(l->http.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(conn);
  char buf[2];
  EXPECT_EQ(::recv(conn.get(), buf, 2, MSG_WAITALL), 2);

  // It cannot take the ports: 3128 is in use (no SO_REUSEPORT on ours), and
  // 53 is below 1024, where it has no capability.
  std::swap(sb_, sb);
  r =
      py("import socket, errno\n"
         "for port in (3128, 1080, 53):\n"
         "  s = socket.socket()\n"
         "  s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
         "  s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)\n"
         "  try: s.bind(('127.0.0.1', port)); print(port, 'bound')\n"
         "  except OSError as e: print(port, errno.errorcode[e.errno])\n");
  std::swap(sb_, sb);
  EXPECT_EQ(r.stdout_data, "3128 EADDRINUSE\n1080 EADDRINUSE\n53 EACCES\n");
  EXPECT_TRUE(sb->destroy().ok());
}

TEST_F(NetworkModeTest, ModeNoneHasNoProxyEnvironment) {
  auto r = sh("echo \"${HTTP_PROXY-unset} ${ALL_PROXY-unset}\"");
  EXPECT_EQ(r.stdout_data, "unset unset\n");
  SpecOptions o;
  o.network = NetworkMode::kAllowList;
  auto sb = make(o);
  ASSERT_TRUE(sb);
  std::swap(sb_, sb);
  r = sh("echo \"$HTTP_PROXY $HTTPS_PROXY $ALL_PROXY $NO_PROXY\"");
  std::swap(sb_, sb);
  EXPECT_EQ(r.stdout_data,
            "http://127.0.0.1:3128 http://127.0.0.1:3128 socks5h://127.0.0.1:1080 "
            "localhost,127.0.0.1,::1\n");
  EXPECT_TRUE(sb->destroy().ok());
}

}  // namespace
}  // namespace sandcastle::sandbox::testing
