// Issue 19 on the engine backend, the transport: in allowlist mode the agent
// listens on 127.0.0.1:3128, :1080 and :53 inside the container and relays
// each connection (and each DNS datagram, as TCP DNS) to listeners of the
// server's. Real engines (the fixture's Podman and dockerd); this test
// stands in for the proxy service by serving those listeners itself.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <future>
#include <thread>

#include "backend_fixture.h"
#include "service/sandbox_network.h"

namespace sandcastle::sandbox::engine::testing {
namespace {

using namespace std::chrono_literals;

SandboxSpec allowlist_spec() {
  SpecOptions o;
  o.image = "host";
  o.limits.memory_bytes = 256 * kMiB;
  o.limits.disk_bytes = 16 * kMiB;
  o.limits.exec_timeout = std::chrono::seconds(30);
  o.network = NetworkMode::kAllowList;
  return *SandboxSpec::create(o);
}

// One connection off `listener` within 20 s (else empty).
UniqueFd accept_one(int listener) {
  struct pollfd p {
    listener, POLLIN, 0
  };
  if (::poll(&p, 1, 20'000) != 1) return {};
  return UniqueFd(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
}

// Exactly `n` bytes (fewer at EOF or after 20 s).
std::string read_n(int fd, std::size_t n) {
  std::string out;
  while (out.size() < n) {
    struct pollfd p {
      fd, POLLIN, 0
    };
    if (::poll(&p, 1, 20'000) != 1) break;
    char buf[4096];
    ssize_t r = ::read(fd, buf, std::min(sizeof buf, n - out.size()));
    if (r <= 0) break;
    out.append(buf, static_cast<std::size_t>(r));
  }
  return out;
}

class EngineNetTest : public BackendTest<EngineBackend, ::testing::TestWithParam<std::string>> {
 protected:
  void SetUp() override {
    std::string why;
    engine_ = test_engine(GetParam(), &why);
    if (!engine_) GTEST_SKIP() << GetParam() << " cannot run here: " << why;
    auto o = backend_options(engine_->url);
    o.allowlist = true;
    use(EngineBackend::create(o));
    spec_ = allowlist_spec();
  }
  // A sandbox and its listeners (fails the test if either cannot be had).
  void open(bool proxies = true) {
    sb_ = make();
    ASSERT_TRUE(sb_);
    auto l = sb_->open_net_listeners(proxies);
    ASSERT_TRUE(l.ok()) << l.error().message();
    listeners_ = std::move(*l);
  }
  // `python` (a program for python3 -c) running in the sandbox while the
  // caller serves the listeners.
  std::future<ExecResult> start(const std::string& python) {
    return std::async(std::launch::async, [this, python] {
      return run(*sb_, {"python3", "-c", python});
    });
  }
  const TestEngine* engine_ = nullptr;
  std::unique_ptr<Sandbox> sb_;
  net::Listeners listeners_;
};

TEST_P(EngineNetTest, ListenersAreServersSocketsOnly) {
  open();
  ASSERT_TRUE(listeners_.http && listeners_.socks && listeners_.dns_tcp);
  EXPECT_FALSE(listeners_.dns_udp);
  for (int fd : {listeners_.http.get(), listeners_.socks.get(), listeners_.dns_tcp.get()}) {
    struct sockaddr_un addr {};
    socklen_t len = sizeof addr;
    ASSERT_EQ(::getsockname(fd, reinterpret_cast<struct sockaddr*>(&addr), &len), 0);
    EXPECT_EQ(addr.sun_family, AF_UNIX);
    EXPECT_EQ(addr.sun_path[0], '\0') << "abstract: no path for anyone to open";
    int listening = 0;
    socklen_t ol = sizeof listening;
    ASSERT_EQ(::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ol), 0);
    EXPECT_EQ(listening, 1);
  }
  auto again = sb_->open_net_listeners(true);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kFailedPrecondition);
}

// A warm container of an allowlist pool is made for it too: its listeners
// open once it is taken (the sysctl was set when it was created).
TEST_P(EngineNetTest, WarmAllowlistContainersOpenTheirListeners) {
  auto o = backend_options(engine_->url);
  o.allowlist = true;
  o.pool_size = 1;
  o.pool_spec = allowlist_spec();
  ASSERT_NO_FATAL_FAILURE(use(EngineBackend::create(o)));
  for (int i = 0; i < 600 && backend_->warm_ready_for(spec_) == 0; ++i)
    std::this_thread::sleep_for(50ms);  // the pool fills in the background, unobservably
  ASSERT_EQ(backend_->warm_ready_for(spec_), 1u);
  ASSERT_NO_FATAL_FAILURE(open());
  auto done = start(
      "import socket\n"
      "s = socket.create_connection(('127.0.0.1', 1080), timeout=20)\n"
      "s.sendall(b'warm')\n");
  UniqueFd conn = accept_one(listeners_.socks.get());
  ASSERT_TRUE(conn);
  EXPECT_EQ(read_n(conn.get(), 4), "warm");
  EXPECT_EQ(done.get().exit_code, 0);
}

// Full mode's share: the DNS stub only; nothing listens on the proxies'
// ports.
TEST_P(EngineNetTest, WithoutProxiesOnlyDnsListens) {
  open(false);
  EXPECT_TRUE(listeners_.dns_tcp);
  EXPECT_FALSE(listeners_.http || listeners_.socks || listeners_.dns_udp);
  auto done = start(
      "import socket, errno\n"
      "for port in (3128, 1080, 53):\n"
      "    try:\n"
      "        socket.create_connection(('127.0.0.1', port), timeout=20); print(port, "
      "'connected')\n"
      "    except OSError as e: print(port, errno.errorcode[e.errno])\n");
  UniqueFd conn = accept_one(listeners_.dns_tcp.get());
  EXPECT_TRUE(conn);
  ExecResult r = done.get();
  EXPECT_EQ(r.stdout_data, "3128 ECONNREFUSED\n1080 ECONNREFUSED\n53 connected\n") << r.stderr_data;
}

// Bytes to 127.0.0.1:3128, :1080 and :53 (TCP) in the sandbox come out of
// the matching listener here, and the replies go back.
TEST_P(EngineNetTest, TcpConnectionsRoundTrip) {
  open();
  auto done = start(
      "import socket\n"
      "for port in (3128, 1080, 53):\n"
      "    s = socket.create_connection(('127.0.0.1', port), timeout=20)\n"
      "    msg = b'hello %d' % port\n"
      "    s.sendall(msg)\n"
      "    got = b''\n"
      "    while len(got) < len(msg) + 5:\n"
      "        b = s.recv(100)\n"
      "        if not b: break\n"
      "        got += b\n"
      "    print(got.decode())\n");
  for (auto [fd, port] : {std::pair{listeners_.http.get(), 3128},
                          {listeners_.socks.get(), 1080},
                          {listeners_.dns_tcp.get(), 53}}) {
    UniqueFd conn = accept_one(fd);
    ASSERT_TRUE(conn) << "no connection for :" << port;
    const std::string want = "hello " + std::to_string(port);
    std::string got = read_n(conn.get(), want.size());
    EXPECT_EQ(got, want);
    std::string reply = "echo " + got;
    ASSERT_EQ(::write(conn.get(), reply.data(), reply.size()), static_cast<ssize_t>(reply.size()));
  }
  ExecResult r = done.get();
  EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data, "echo hello 3128\necho hello 1080\necho hello 53\n");
}

// A datagram to 127.0.0.1:53 arrives on dns_tcp in TCP DNS framing; the
// framed reply goes back to the sender as a datagram.
TEST_P(EngineNetTest, UdpDnsIsRelayedAsFramedTcp) {
  open();
  auto done = start(
      "import socket\n"
      "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
      "s.settimeout(20)\n"
      "s.sendto(b'\\x12\\x34query-bytes', ('127.0.0.1', 53))\n"
      "data, peer = s.recvfrom(512)\n"
      "print(data.hex(), peer[0], peer[1])\n");
  UniqueFd conn = accept_one(listeners_.dns_tcp.get());
  ASSERT_TRUE(conn);
  const std::string query = "\x12\x34query-bytes";
  EXPECT_EQ(read_n(conn.get(), 2 + query.size()), std::string("\x00\x0d", 2) + query);
  const std::string answer("\x12\x34\x81\x80", 4);
  const std::string framed = std::string("\x00\x04", 2) + answer;
  ASSERT_EQ(::write(conn.get(), framed.data(), framed.size()), 6);
  ExecResult r = done.get();
  EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data, "12348180 127.0.0.1 53\n");
  // The agent ends the flow once it has the answer.
  EXPECT_EQ(read_n(conn.get(), 1), "");
}

// One DNS query off dns_tcp (the connection then closed, unanswered):
// its question name, or "" if none came.
std::string serve_one_lookup(int dns_tcp) {
  UniqueFd conn = accept_one(dns_tcp);
  if (!conn) return "";
  std::string head = read_n(conn.get(), 2);
  if (head.size() != 2) return "";
  const std::size_t len =
      (static_cast<unsigned char>(head[0]) << 8) | static_cast<unsigned char>(head[1]);
  std::string msg = read_n(conn.get(), len);
  // The question follows the 12-byte header: labels up to a zero.
  std::string name;
  for (std::size_t at = 12; at < msg.size() && msg[at] != 0;) {
    const auto n = static_cast<unsigned char>(msg[at]);
    if (!name.empty()) name += '.';
    name += msg.substr(at + 1, n);
    at += 1 + n;
  }
  return name;
}

// The sandbox's resolver is 127.0.0.1: a name lookup reaches dns_tcp.
TEST_P(EngineNetTest, NameLookupsGoToTheStub) {
  open();
  ExecRequest req;
  req.argv = {"python3", "-c",
              "import socket\n"
              "try: socket.getaddrinfo('lookup.allowed.test', 80)\n"
              "except OSError as e: print('failed')\n"};
  req.env["RES_OPTIONS"] = "timeout:2 attempts:1";
  auto done = std::async(std::launch::async, [&] { return sb_->exec(req); });
  EXPECT_EQ(serve_one_lookup(listeners_.dns_tcp.get()), "lookup.allowed.test");
  auto r = done.get();
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->stdout_data, "failed\n");
}

// An image of the engine's (not "host", whose /etc is the template): with
// no network the engines write no nameserver into it (Podman no
// resolv.conf at all, Docker the image's), so the C library's default,
// 127.0.0.1, is the stub here too (busybox's musl resolver).
TEST_P(EngineNetTest, EngineImagesResolveThroughTheStub) {
  SpecOptions o = allowlist_spec().options();
  o.image = engine_->image;
  spec_ = *SandboxSpec::create(o);
  open();
  auto none = run(*sb_, {"sh", "-c", "grep -s nameserver /etc/resolv.conf || echo none"});
  EXPECT_EQ(none.stdout_data, "none\n");
  auto done = std::async(std::launch::async, [&] {
    return run(*sb_, {"sh", "-c", "nslookup image.allowed.test >/dev/null 2>&1; echo $?"});
  });
  EXPECT_EQ(serve_one_lookup(listeners_.dns_tcp.get()), "image.allowed.test");
  EXPECT_NE(done.get().stdout_data, "0\n");
}

// Nothing in the sandbox can take the proxies' ports, not with SO_REUSEADDR
// or SO_REUSEPORT either (the agent sets neither, and :53 is below 1024 only
// for the agent's sake).
TEST_P(EngineNetTest, UserCodeCannotBindTheProxyPorts) {
  open();
  auto r = run(*sb_, {"python3", "-c",
                      "import socket\n"
                      "for kind, port in ((socket.SOCK_STREAM, 3128), (socket.SOCK_STREAM, 1080),\n"
                      "                   (socket.SOCK_STREAM, 53), (socket.SOCK_DGRAM, 53)):\n"
                      "    for reuse in (False, True):\n"
                      "        s = socket.socket(socket.AF_INET, kind)\n"
                      "        if reuse:\n"
                      "            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                      "            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)\n"
                      "        try:\n"
                      "            s.bind(('127.0.0.1', port)); print(port, 'bound')\n"
                      "        except OSError as e: print(port, e.errno)\n"});
  EXPECT_EQ(r.stdout_data, "3128 98\n3128 98\n1080 98\n1080 98\n53 98\n53 98\n53 98\n53 98\n")
      << r.stderr_data;
}

TEST_P(EngineNetTest, DestroyShutsTheListeners) {
  open();
  struct sockaddr_un addr {};
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(listeners_.http.get(), reinterpret_cast<struct sockaddr*>(&addr), &len),
            0);
  ASSERT_TRUE(sb_->destroy().ok());
  struct pollfd p {
    listeners_.http.get(), POLLIN, 0
  };
  ASSERT_EQ(::poll(&p, 1, 0), 1);
  EXPECT_TRUE(p.revents & POLLHUP);
  UniqueFd c(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EXPECT_EQ(::connect(c.get(), reinterpret_cast<struct sockaddr*>(&addr), len), -1);
  EXPECT_EQ(errno, ECONNREFUSED);
}

// The installer's per-exec listener (ExecRequest::private_listener_port)
// shares the relay listener code: its connections still arrive, beside the
// sandbox's own listeners.
TEST_P(EngineNetTest, AnExecsPrivateListenerStillRelays) {
  open();
  ExecRequest req;
  req.argv = {"python3", "-c",
              "import socket\n"
              "s = socket.create_connection(('127.0.0.1', 3129), timeout=20)\n"
              "s.sendall(b'via exec')\n"
              "print(s.recv(100).decode())\n"};
  req.private_listener_port = 3129;
  std::promise<UniqueFd> handed;
  ExecCallbacks cb;
  cb.on_listener = [&](UniqueFd fd) { handed.set_value(std::move(fd)); };
  auto done = std::async(std::launch::async, [&] { return sb_->exec(req, cb); });
  auto listener = handed.get_future();
  ASSERT_EQ(listener.wait_for(20s), std::future_status::ready);
  UniqueFd l = listener.get();
  UniqueFd conn = accept_one(l.get());
  ASSERT_TRUE(conn);
  EXPECT_EQ(read_n(conn.get(), 8), "via exec");
  ASSERT_EQ(::write(conn.get(), "answered", 8), 8);
  auto r = done.get();
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->stdout_data, "answered\n") << r->stderr_data;
}

// The whole path, with the server's own proxies (service::attach_network,
// as the service does it): refusals from the DNS stub, the HTTP proxy and
// the SOCKS proxy reach a program in the container. Nothing needs a
// network: every name here is off the list.
TEST_P(EngineNetTest, TheServersProxiesAnswerThroughTheAgent) {
  SpecOptions o = allowlist_spec().options();
  o.network_allow = {"allowed.test"};
  spec_ = *SandboxSpec::create(o);
  sb_ = make();
  ASSERT_TRUE(sb_);
  auto proxies = net::ProxyService::start({});
  ASSERT_TRUE(proxies.ok()) << proxies.error().message();
  auto handle = service::attach_network(*sb_, proxies->get(), sb_->id());
  ASSERT_TRUE(handle.ok()) << handle.error().message();
  auto r = run(
      *sb_, {"python3", "-c",
             "import socket, struct\n"
             "q = struct.pack('>HHHHHH', 0x1234, 0x0100, 1, 0, 0, 0)\n"
             "q += b'\\x05other\\x04test\\x00' + struct.pack('>HH', 1, 1)\n"
             "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
             "u.settimeout(20)\n"
             "u.sendto(q, ('127.0.0.1', 53))\n"
             "a, _ = u.recvfrom(4096)\n"
             "print('dns', a[:2].hex(), a[3] & 15)\n"
             "h = socket.create_connection(('127.0.0.1', 3128), timeout=20)\n"
             "h.sendall(b'CONNECT other.test:443 HTTP/1.1\\r\\nHost: other.test:443\\r\\n\\r\\n')\n"
             "print(h.recv(200).split(b'\\r\\n')[0].decode())\n"
             "s = socket.create_connection(('127.0.0.1', 1080), timeout=20)\n"
             "s.sendall(b'\\x05\\x01\\x00')\n"
             "assert s.recv(2) == b'\\x05\\x00'\n"
             "s.sendall(b'\\x05\\x01\\x00\\x03\\x0aother.test\\x01\\xbb')\n"
             "print('socks', s.recv(10)[1])\n"});
  EXPECT_EQ(r.stdout_data, "dns 1234 5\nHTTP/1.1 403 Forbidden\nsocks 2\n") << r.stderr_data;
  // What a program that honours the proxy environment sees.
  auto curl =
      run(*sb_, {"sh", "-c", "echo $HTTPS_PROXY; curl -sS https://other.test/ 2>&1; echo $?"});
  EXPECT_EQ(curl.stdout_data,
            "http://127.0.0.1:3128\ncurl: (56) CONNECT tunnel failed, response 403\n56\n");
  EXPECT_GE(handle->session->stats().refused, 4u);
}

// Until the server serves it, the backend refuses allowlist by default; a
// sandbox without a network has no listeners to open.
TEST_P(EngineNetTest, AllowlistIsRefusedUnlessEnabled) {
  use(EngineBackend::create(backend_options(engine_->url)));
  auto sb = backend_->create(allowlist_spec());
  ASSERT_FALSE(sb.ok());
  EXPECT_EQ(sb.error().code, ErrorCode::kInvalidArgument);
  auto none = make(test_spec());
  ASSERT_TRUE(none);
  auto l = none->open_net_listeners(false);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.error().code, ErrorCode::kFailedPrecondition);
}

INSTANTIATE_TEST_SUITE_P(Engines, EngineNetTest, ::testing::Values("podman", "docker"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace sandcastle::sandbox::engine::testing
