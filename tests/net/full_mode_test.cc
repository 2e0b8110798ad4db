// Full mode's pieces against the world: a child in new user and network
// namespaces stands in for a sandbox; UserNet gives it pasta, nft::apply
// loads the firewall, and probes that enter its namespaces (fork + setns)
// check what a program inside sees.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>

#include "common/unique_fd.h"
#include "net/nft.h"
#include "net/user_net.h"
#include "net_world.h"

namespace sandcastle::nettest {
namespace {

// A process in a new user namespace (uid 0 inside = `outer_uid` outside)
// and a network namespace it owns, sleeping until destroyed.
class StandIn {
 public:
  static Result<std::unique_ptr<StandIn>> make(uid_t outer_uid) {
    int go[2];
    int ready[2];
    if (::pipe2(go, O_CLOEXEC) != 0 || ::pipe2(ready, O_CLOEXEC) != 0)
      return Error::from_errno("pipe");
    UniqueFd go_rd(go[0]), go_wr(go[1]), ready_rd(ready[0]), ready_wr(ready[1]);
    pid_t pid = ::fork();
    if (pid < 0) return Error::from_errno("fork");
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      go_wr.reset();
      ready_rd.reset();
      char c = ::unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0 ? 'u' : 'e';
      (void)!::write(ready_wr.get(), &c, 1);
      ready_wr.reset();
      // Until the parent closes its end.
      while (::read(go_rd.get(), &c, 1) < 0 && errno == EINTR) {
      }
      _exit(0);
    }
    std::unique_ptr<StandIn> s(new StandIn());
    s->pid_ = pid;
    s->go_ = std::move(go_wr);
    go_rd.reset();
    ready_wr.reset();
    char c = 0;
    if (::read(ready_rd.get(), &c, 1) != 1 || c != 'u')
      return Error::make(ErrorCode::kSystem, "stand-in: unshare(CLONE_NEWUSER|CLONE_NEWNET)");
    const std::string proc = "/proc/" + std::to_string(pid);
    const std::string map = "0 " + std::to_string(outer_uid) + " 1\n";
    for (const char* file : {"/setgroups", "/uid_map", "/gid_map"}) {
      std::ofstream f(proc + file);
      f << (std::strcmp(file, "/setgroups") == 0 ? "deny\n" : map);
      f.close();
      if (!f) return Error::make(ErrorCode::kIo, std::string("stand-in: write ") + file);
    }
    s->netns_ = UniqueFd(::open((proc + "/ns/net").c_str(), O_RDONLY | O_CLOEXEC));
    s->userns_ = UniqueFd(::open((proc + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC));
    if (!s->netns_ || !s->userns_) return Error::from_errno("stand-in: open its namespaces");
    return s;
  }

  ~StandIn() {
    go_.reset();
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  StandIn(const StandIn&) = delete;
  StandIn& operator=(const StandIn&) = delete;

  int netns() const { return netns_.get(); }
  int userns() const { return userns_.get(); }

  // Runs `probe` in a forked child inside the stand-in's namespaces; its
  // int result (an errno, a status code), or -1 when entering failed.
  int inside(const std::function<int()>& probe) const {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return -1;
    UniqueFd rd(p[0]), wr(p[1]);
    pid_t pid = ::fork();
    if (pid < 0) return -1;
    if (pid == 0) {
      int r = -1;
      if (::setns(userns_.get(), CLONE_NEWUSER) == 0 && ::setns(netns_.get(), CLONE_NEWNET) == 0)
        r = probe();
      (void)!::write(wr.get(), &r, sizeof r);
      _exit(0);
    }
    wr.reset();
    int r = -1;
    if (::read(rd.get(), &r, sizeof r) != sizeof r) r = -1;
    ::waitpid(pid, nullptr, 0);
    return r;
  }

 private:
  StandIn() = default;
  pid_t pid_ = -1;
  UniqueFd go_;
  UniqueFd netns_;
  UniqueFd userns_;
};

// A UDP datagram to addr:port on a connected socket, then a reply within
// 2 s: 0 when one came, else the errno of send or recv.
int udp_exchange(const std::string& addr, std::uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(port);
  ::inet_pton(AF_INET, addr.c_str(), &sin.sin_addr);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sin), sizeof sin) != 0) return errno;
  timeval tv{2, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  // A DNS query for allowed.test (id 0x1919), so the world's resolver answers.
  const unsigned char q[] = {0x19, 0x19, 0x01, 0x00, 0,   1, 0,   0,   0,   0,   0, 0, 7, 'a', 'l',
                             'l',  'o',  'w',  'e',  'd', 4, 't', 'e', 's', 't', 0, 0, 1, 0,   1};
  if (::send(fd.get(), q, sizeof q, 0) < 0) return errno;
  char buf[512];
  if (::recv(fd.get(), buf, sizeof buf, 0) < 0) return errno;
  return 0;
}

// One send/recv on `fd`: 0 when the bytes came back, else the errno
// (ECONNRESET when the peer, or our own firewall, reset the flow).
int echo_once(int fd) {
  const char msg[] = "ping";
  if (::send(fd, msg, sizeof msg, MSG_NOSIGNAL) < 0) return errno;
  char got[sizeof msg];
  ssize_t n = ::recv(fd, got, sizeof got, MSG_WAITALL);
  if (n < 0) return errno;
  return n == static_cast<ssize_t>(sizeof got) ? 0 : EPIPE;
}

// Inside the stand-in: an echo connection to .2:7000, then `ruleset`
// loaded into this namespace (already entered: userns -1), then the same
// connection again. -1 when the first exchange or the load failed.
int echo_then_cut(const std::string& ruleset, int netns) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(NetWorld::kEchoPort);
  ::inet_pton(AF_INET, NetWorld::kServerA, &sin.sin_addr);
  timeval tv{5, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sin), sizeof sin) != 0) return -1;
  if (echo_once(fd.get()) != 0) return -1;
  if (!net::nft::apply(-1, netns, ruleset)) return -1;
  return echo_once(fd.get());
}

// A listener in the test's (the "host's") namespace.
std::pair<UniqueFd, std::uint16_t> listen_on(const char* addr) {
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

void run_full_mode_case(bool root, net::UserNetTool tool) {
  // uid 0 inside maps to an unrelated uid, so nft keeps CAP_NET_ADMIN
  // only through the ambient set, as for a sandbox whose root is not ours.
  auto sandbox = StandIn::make(root ? 100000 : ::geteuid());
  ASSERT_TRUE(sandbox) << sandbox.error().message();
  const StandIn& sb = **sandbox;

  auto net = net::UserNet::start(sb.netns(), sb.userns(), root, tool);
  ASSERT_TRUE(net) << net.error().message();
  EXPECT_EQ((*net)->tool(), tool);
  const pid_t pasta = (*net)->pid();
  ASSERT_TRUE((*net)->running());

  // Through pasta, before any rule: both servers answer.
  EXPECT_EQ(sb.inside([] {
    auto r = http_get(NetWorld::kServerA, 80, "/", "allowed.test");
    return r ? r->status : -errno;
  }),
            200);
  EXPECT_EQ(sb.inside([] { return tcp_connect_errno(NetWorld::kServerB, 80); }), 0);
  EXPECT_EQ(sb.inside([] { return udp_exchange(NetWorld::kDnsAddr, 53); }), 0);

  auto policy = net::make_policy(net::Mode::kFull, {"198.51.100.0/24:*"}, {"198.51.100.3"});
  ASSERT_TRUE(policy) << policy.error().message();
  // The "host" is the test's own namespace, where the tool's sockets live
  // (198.51.100.1, fd00:5c::1, loopback).
  auto host_now = net::host_addresses();
  ASSERT_TRUE(host_now) << host_now.error().message();
  const std::vector<net::IpAddr>& host = *host_now;
  const std::string ruleset = net::nft::render_ruleset(**policy, host);
  auto applied = net::nft::apply(sb.userns(), sb.netns(), ruleset);
  ASSERT_TRUE(applied) << applied.error().message();

  auto [lo_listener, lo_port] = listen_on("127.0.0.1");
  auto [any_listener, any_port] = listen_on("0.0.0.0");
  ASSERT_NE(lo_port, 0);
  ASSERT_NE(any_port, 0);
  // Still open: the allowed neighbour's big body.
  EXPECT_EQ(sb.inside([] {
    auto r = http_get(NetWorld::kServerA, 80, "/big", "allowed.test");
    return r && r->body.size() == NetWorld::kBigBody ? r->status : -1;
  }),
            200);
  // Refused at once, with the errno a program sees.
  EXPECT_EQ(sb.inside([] { return tcp_connect_errno(NetWorld::kServerB, 80); }), ECONNREFUSED);
  EXPECT_EQ(sb.inside([] { return tcp_connect_errno("169.254.169.254", 80); }), ECONNREFUSED);
  EXPECT_EQ(sb.inside([p = lo_port] { return tcp_connect_errno("127.0.0.1", p); }), ECONNREFUSED);
  EXPECT_EQ(sb.inside([p = any_port] { return tcp_connect_errno(NetWorld::kBridgeAddr, p); }),
            ECONNREFUSED);
  // UDP: a packet rejected in the output hook fails its own send with
  // EPERM (the ICMP error is queued behind it), at once and never silently.
  EXPECT_EQ(sb.inside([] { return udp_exchange(NetWorld::kDnsAddr, 53); }), EPERM);

  // A bad ruleset: nft's own message comes back.
  auto bad = net::nft::apply(sb.userns(), sb.netns(), "table inet sandcastle { bogus }\n");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kIo);
  EXPECT_NE(bad.error().context.find("Error"), std::string::npos) << bad.error().context;

  // A new ruleset cuts a flow opened under the old one (no `ct
  // established accept`): an echo connection to .2 works, .2 is denied from
  // inside the same probe, and the open connection's next exchange fails.
  const std::string deny_a = net::nft::render_ruleset(
      **net::make_policy(net::Mode::kFull, {}, {"198.51.100.2:7000"}), host);
  EXPECT_EQ(sb.inside([&deny_a, netns = sb.netns()] { return echo_then_cut(deny_a, netns); }),
            ECONNRESET);

  // Destroying the UserNet kills and reaps the tool.
  net->reset();
  EXPECT_EQ(::kill(pasta, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST(FullModeTest, AvailableHereAsRoot) {
  REQUIRE_NET_WORLD();
  auto s = net::UserNet::available();
  EXPECT_TRUE(s) << s.error().message();
  auto nft = net::nft::nft_binary();
  EXPECT_TRUE(nft) << nft.error().message();
}

TEST(FullModeTest, PastaAndNftAsRoot) {
  REQUIRE_NET_WORLD();
  if (auto s = net::UserNet::available(); !s) GTEST_SKIP() << s.error().message();
  if (auto nft = net::nft::nft_binary(); !nft) GTEST_SKIP() << nft.error().message();
  run_full_mode_case(true, net::UserNetTool::kPasta);
}

TEST(FullModeTest, Slirp4netnsAndNftAsRoot) {
  REQUIRE_NET_WORLD();
  if (auto s = net::UserNet::find_tool(net::UserNetTool::kSlirp4netns); !s)
    GTEST_SKIP() << s.error().message();
  if (auto nft = net::nft::nft_binary(); !nft) GTEST_SKIP() << nft.error().message();
  run_full_mode_case(true, net::UserNetTool::kSlirp4netns);
}

constexpr uid_t kNobody = 65534;

// Runs `body` in a forked child as uid/gid 65534 (gtest failures there are
// printed by the child and reported through its exit status).
int as_nobody(const std::function<void()>& body) {
  pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(kNobody, kNobody, kNobody) != 0 ||
        ::setresuid(kNobody, kNobody, kNobody) != 0)
      _exit(3);
    // The uid change cleared "dumpable", which would leave /proc/<pid> of
    // the stand-in root's and its uid_map unwritable; a server started as
    // this user is dumpable.
    ::prctl(PR_SET_DUMPABLE, 1);
    body();
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool tun_open_to_others() {
  struct stat st {};
  return ::stat("/dev/net/tun", &st) == 0 && (st.st_mode & 0006) == 0006;
}

// A namespace nobody configures never gets a route: the probe ends at its
// deadline with kTimeout (not a hang).
TEST(FullModeTest, RouteWaitTimesOutWithoutATool) {
  REQUIRE_NET_WORLD();
  auto sandbox = StandIn::make(100000);
  ASSERT_TRUE(sandbox) << sandbox.error().message();
  const auto t0 = std::chrono::steady_clock::now();
  auto s = net::wait_default_route((*sandbox)->netns(), (*sandbox)->userns(),
                                   std::chrono::milliseconds(200));
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kTimeout);
  EXPECT_GE(took, std::chrono::milliseconds(200));
  EXPECT_LT(took, std::chrono::milliseconds(1500));
}

// As root without --runas, pasta drops to nobody and cannot open the
// sandbox's user namespace: start() notices the exit through the pidfd at
// once and returns pasta's own message.
TEST(FullModeTest, PastaThatExitsEarlyIsReportedWithItsMessage) {
  REQUIRE_NET_WORLD();
  if (auto s = net::UserNet::available(); !s) GTEST_SKIP() << s.error().message();
  auto sandbox = StandIn::make(100000);
  ASSERT_TRUE(sandbox) << sandbox.error().message();
  const auto t0 = std::chrono::steady_clock::now();
  auto net = net::UserNet::start((*sandbox)->netns(), (*sandbox)->userns(), /*root=*/false,
                                 net::UserNetTool::kPasta);
  ASSERT_FALSE(net);
  EXPECT_EQ(net.error().code, ErrorCode::kCancelled);
  EXPECT_NE(net.error().context.find("user namespace"), std::string::npos) << net.error().context;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, net::UserNet::kReadyTimeout);
}

// /dev/net/tun is 0600 on many hosts (on this one too): full mode without
// root then says so, naming the uid.
TEST(FullModeTest, UnavailableWithoutTunAccessSaysWhy) {
  REQUIRE_NET_WORLD();
  if (tun_open_to_others()) GTEST_SKIP() << "/dev/net/tun is open to every user here";
  EXPECT_EQ(as_nobody([] {
              auto s = net::UserNet::available();
              ASSERT_FALSE(s);
              EXPECT_EQ(s.error().code, ErrorCode::kUnavailable);
              EXPECT_EQ(s.error().sys_errno, EACCES);
              EXPECT_NE(s.error().context.find("/dev/net/tun is not accessible to uid 65534"),
                        std::string::npos)
                  << s.error().context;
            }),
            0);
}

// The unprivileged server's path (pasta without --runas, then slirp4netns
// without its mount sandbox), joining a user namespace it owns. Where /dev/net/tun is 0600, a 0666
// node for the same device is bound over it in this test's own mount namespace (the host's node is
// not touched); where that cannot be done, the test skips saying so.
TEST(FullModeTest, UserNetAndNftUnprivileged) {
  REQUIRE_NET_WORLD();
  if (auto nft = net::nft::nft_binary(); !nft) GTEST_SKIP() << nft.error().message();
  if (!tun_open_to_others()) {
    const std::string node = "/run/netns/tun-0666";  // the world's private tmpfs
    ::unlink(node.c_str());
    if (::mknod(node.c_str(), S_IFCHR | 0666, makedev(10, 200)) != 0 ||
        ::chmod(node.c_str(), 0666) != 0 ||
        ::mount(node.c_str(), "/dev/net/tun", nullptr, MS_BIND, nullptr) != 0)
      GTEST_SKIP() << "/dev/net/tun is 0600 and no private 0666 node could be bound over it ("
                   << errno_name(errno) << "): unprivileged full mode needs it read-write";
  }
  EXPECT_EQ(as_nobody([] {
              auto s = net::UserNet::available();
              ASSERT_TRUE(s) << s.error().message();
              run_full_mode_case(false, net::UserNetTool::kPasta);
              if (net::UserNet::find_tool(net::UserNetTool::kSlirp4netns))
                run_full_mode_case(false, net::UserNetTool::kSlirp4netns);
            }),
            0);
  ::umount2("/dev/net/tun", MNT_DETACH);
}

}  // namespace
}  // namespace sandcastle::nettest
