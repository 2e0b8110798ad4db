// ExecRequest::private_listener_port: an exec in a network namespace of its
// own, holding a loopback listener the server accepts on (the package
// installer's egress proxy). Only that exec's processes can reach the
// listener; the rest of the sandbox cannot, and the exec has no other route.
#include <linux/landlock.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "fixture.h"

namespace sandcastle::sandbox::testing {
namespace {

using namespace std::chrono_literals;

constexpr std::uint16_t kPort = 3128;

// Python that connects to 127.0.0.1:port, prints "connected" or the errno
// name, and closes.
std::string connect_probe(const std::string& host, std::uint16_t port) {
  return "import socket, errno\n"
         "s = socket.socket()\n"
         "try:\n"
         "    s.connect(('" + host + "', " + std::to_string(port) + "))\n"
         "    print('connected')\n"
         "except OSError as e:\n"
         "    print('err:' + errno.errorcode[e.errno])\n";
}

std::uint16_t local_port(int fd) {
  struct sockaddr_in a {};
  socklen_t len = sizeof a;
  if (::getsockname(fd, reinterpret_cast<struct sockaddr*>(&a), &len) != 0) return 0;
  return ntohs(a.sin_port);
}

// Accepts one connection (within 20 s); -1 if none came.
int accept_one(int listener) {
  struct pollfd p {listener, POLLIN, 0};
  if (::poll(&p, 1, 20'000) != 1) return -1;
  return ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
}

bool landlock_available() {
  return ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION) > 0;
}

std::string read_some(int fd) {
  char buf[64];
  ssize_t n = ::read(fd, buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

class PrivateNetworkTest : public SandboxTest {
 protected:
  Result<ExecResult> private_exec(const std::string& code, const std::function<void(UniqueFd)>& on_listener,
                                  std::uint16_t port = kPort, std::chrono::milliseconds timeout = 20s) {
    ExecRequest req;
    req.argv = {"/usr/bin/python3", "-c", code, std::to_string(port)};
    req.timeout = timeout;
    req.private_listener_port = port;
    ExecCallbacks cb;
    cb.on_listener = on_listener;
    return sb_->exec(req, cb);
  }
};

// The command connects to its listener and talks to the server, finds no
// route out, and waits for the server's "done"; meanwhile an ordinary exec
// of the same sandbox is refused on the same port.
TEST_F(PrivateNetworkTest, OnlyThePrivateExecReachesItsListener) {
  std::promise<void> accepted, others_checked;
  std::string received;
  std::uint16_t listener_port = 0;
  std::thread server;
  auto on_listener = [&](UniqueFd fd) {
    listener_port = local_port(fd.get());
    server = std::thread([&, l = std::move(fd)] {
      int c = accept_one(l.get());
      if (c < 0) return accepted.set_value();
      received = read_some(c);
      (void)!::write(c, "pong", 4);
      accepted.set_value();
      others_checked.get_future().wait();
      (void)!::write(c, "done", 4);
      ::close(c);
    });
  };
  const std::string code =
      "import socket, errno, sys\n"
      "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
      "s.sendall(b'ping')\n"
      "print('got:' + s.recv(16).decode(), flush=True)\n"
      "o = socket.socket()\n"
      "try:\n"
      "    o.connect(('10.1.2.3', 80))\n"
      "    print('routed')\n"
      "except OSError as e:\n"
      "    print('err:' + errno.errorcode[e.errno])\n"
      "print('then:' + s.recv(16).decode())\n";
  std::future<Result<ExecResult>> run = std::async(std::launch::async, [&] { return private_exec(code, on_listener); });

  auto ready = accepted.get_future();
  bool connected = ready.wait_for(30s) == std::future_status::ready;
  EXPECT_TRUE(connected) << "the private exec never reached its listener";
  if (connected) {
    EXPECT_EQ(listener_port, kPort);
    // The same port from the sandbox's shared network namespace: nobody there.
    EXPECT_EQ(py(connect_probe("127.0.0.1", kPort)).stdout_data, "err:ECONNREFUSED\n");
  }
  others_checked.set_value();
  auto r = run.get();
  if (server.joinable()) server.join();
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->exit_code, 0) << r->stderr_data;
  EXPECT_EQ(r->stdout_data, "got:pong\nerr:ENETUNREACH\nthen:done\n") << r->stderr_data;
  EXPECT_EQ(received, "ping");
}

// All of a sandbox's commands run as one uid, but another exec cannot reach
// into the private exec's processes through /proc (its memory, environment,
// fds) and so cannot make it use its listener: each exec's /proc lists its
// own processes only, and each exec's command is a Landlock domain of its own.
TEST_F(PrivateNetworkTest, OtherExecsCannotReachIntoThePrivateExec) {
  if (!landlock_available()) GTEST_SKIP() << "the kernel has no Landlock";
  std::promise<void> accepted, others_checked;
  std::thread server;
  auto on_listener = [&](UniqueFd fd) {
    server = std::thread([&, l = std::move(fd)] {
      int c = accept_one(l.get());
      accepted.set_value();
      if (c < 0) return;
      others_checked.get_future().wait();
      ::close(c);
    });
  };
  const std::string code =
      "import socket, sys  # private-exec-marker\n"
      "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
      "s.recv(16)\n";
  auto run = std::async(std::launch::async, [&] { return private_exec(code, on_listener); });
  ASSERT_EQ(accepted.get_future().wait_for(30s), std::future_status::ready);
  const std::string probe =
      "import os, errno\n"
      "me = os.readlink('/proc/self')\n"
      "def probe(pid):\n"
      "    out = []\n"
      "    for what, how in (('mem', lambda p: open(p, 'r+b')), ('environ', lambda p: open(p, 'rb').read()),\n"
      "                      ('fd/0', os.readlink)):\n"
      "        try:\n"
      "            how('/proc/%s/%s' % (pid, what)); out.append(what + ':ok')\n"
      "        except OSError as e:\n"
      "            out.append(what + ':' + errno.errorcode[e.errno])\n"
      "    return ' '.join(out)\n"
      "pids = [p for p in os.listdir('/proc') if p.isdigit() and p != me and\n"
      "        b'private-exec' + b'-marker' in open('/proc/%s/cmdline' % p, 'rb').read()]\n"
      "print(len(pids), *[probe(p) for p in pids])\n"
      "print('self', probe(me))\n";
  auto r = py(probe);
  others_checked.set_value();
  auto done = run.get();
  if (server.joinable()) server.join();
  // Not even listed: each exec's /proc shows its own processes only
  // (exec_proc.h); the Landlock domain that once made these EACCES stays.
  EXPECT_EQ(r.stdout_data, "0\nself mem:ok environ:ok fd/0:ok\n") << r.stderr_data;
  ASSERT_TRUE(done.ok()) << done.error().message();
  EXPECT_EQ(done->exit_code, 0) << done->stderr_data;
}

// The server's copy is the only one: once it closes the listener, the
// command's next connect is refused (init, the supervisor and the command
// hold none).
TEST_F(PrivateNetworkTest, ListenerEndsWithTheServersCopy) {
  std::thread server;
  auto on_listener = [&](UniqueFd fd) {
    server = std::thread([l = std::move(fd)]() mutable {
      int c = accept_one(l.get());
      if (c < 0) return;
      (void)read_some(c);
      (void)!::write(c, "pong", 4);
      l.reset();  // before the connection ends: the command sees EOF after this
      ::close(c);
    });
  };
  const std::string code =
      "import socket, errno, sys\n"
      "port = int(sys.argv[1])\n"
      "s = socket.create_connection(('127.0.0.1', port))\n"
      "s.sendall(b'ping')\n"
      "print('got:' + s.recv(16).decode())\n"
      "while s.recv(16): pass\n"
      "try:\n"
      "    socket.create_connection(('127.0.0.1', port))\n"
      "    print('connected again')\n"
      "except OSError as e:\n"
      "    print('err:' + errno.errorcode[e.errno])\n";
  auto r = private_exec(code, on_listener);
  if (server.joinable()) server.join();
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->stdout_data, "got:pong\nerr:ECONNREFUSED\n") << r->stderr_data;
}

// Each private exec gets a namespace of its own, made for it; ordinary
// execs before and after share the sandbox's.
TEST_F(PrivateNetworkTest, EachPrivateExecHasItsOwnNamespace) {
  const std::string code = "import os\nprint(os.readlink('/proc/self/ns/net'))\n";
  auto shared_before = py(code).stdout_data;
  auto p1 = private_exec(code, [](UniqueFd) {});
  auto p2 = private_exec(code, [](UniqueFd) {});
  auto shared_after = py(code).stdout_data;
  ASSERT_TRUE(p1.ok()) << p1.error().message();
  ASSERT_TRUE(p2.ok()) << p2.error().message();
  EXPECT_EQ(p1->exit_code, 0) << p1->stderr_data;
  EXPECT_NE(shared_before.find("net:["), std::string::npos) << shared_before;
  EXPECT_EQ(shared_before, shared_after);
  EXPECT_NE(p1->stdout_data, shared_before);
  EXPECT_NE(p2->stdout_data, shared_before);
  EXPECT_NE(p1->stdout_data, p2->stdout_data);
}

// Two installs at once in one sandbox: same port, each its own listener.
TEST_F(PrivateNetworkTest, ConcurrentPrivateExecsUseTheSamePortApart) {
  std::promise<void> a_accepted, b_accepted, go;
  std::shared_future<void> go_f = go.get_future().share();
  std::thread sa, sb;
  auto serve = [&](std::thread& t, std::promise<void>& accepted, const char* token) {
    return [&t, &accepted, &go_f, token](UniqueFd fd) {
      t = std::thread([&accepted, &go_f, token, l = std::move(fd)] {
        int c = accept_one(l.get());
        accepted.set_value();
        if (c < 0) return;
        go_f.wait();
        (void)!::write(c, token, 1);
        ::close(c);
      });
    };
  };
  const std::string code =
      "import socket, sys\n"
      "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
      "print('got:' + s.recv(16).decode())\n";
  auto ra = std::async(std::launch::async, [&] { return private_exec(code, serve(sa, a_accepted, "a")); });
  auto rb = std::async(std::launch::async, [&] { return private_exec(code, serve(sb, b_accepted, "b")); });
  // Both connected before either is answered: they ran at the same time.
  EXPECT_EQ(a_accepted.get_future().wait_for(30s), std::future_status::ready);
  EXPECT_EQ(b_accepted.get_future().wait_for(30s), std::future_status::ready);
  go.set_value();
  auto a = ra.get();
  auto b = rb.get();
  if (sa.joinable()) sa.join();
  if (sb.joinable()) sb.join();
  ASSERT_TRUE(a.ok()) << a.error().message();
  ASSERT_TRUE(b.ok()) << b.error().message();
  EXPECT_EQ(a->stdout_data, "got:a\n") << a->stderr_data;
  EXPECT_EQ(b->stdout_data, "got:b\n") << b->stderr_data;
}

// The supervisor's timeout and kill still hold for a private exec.
TEST_F(PrivateNetworkTest, TimeoutEndsThePrivateExec) {
  auto r = private_exec("import time\ntime.sleep(60)\n", [](UniqueFd) {}, kPort, 500ms);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->reason, EndReason::kTimeout);
  EXPECT_EQ(sh("echo still here").stdout_data, "still here\n");
}

TEST_F(PrivateNetworkTest, RefusedWithoutACallback) {
  ExecRequest req;
  req.argv = {"/bin/true"};
  req.private_listener_port = kPort;
  auto r = sb_->exec(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace sandcastle::sandbox::testing
