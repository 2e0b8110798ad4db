// Sandbox::listen_loopback: a listener inside the sandbox's network namespace
// that the server accepts on — the only way in or out of an offline sandbox,
// and only for the port the server asked for.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "fixture.h"

namespace sandcastle::sandbox::testing {
namespace {

class LoopbackListenerTest : public SandboxTest {
 protected:
  // Connects to 127.0.0.1:port from inside the sandbox, sends "ping", prints
  // what came back, or the errno name of the failure.
  ExecResult connect_from_sandbox(std::uint16_t port) {
    return py("import socket, errno\n"
              "s = socket.socket()\n"
              "try:\n"
              "    s.connect(('127.0.0.1', " + std::to_string(port) + "))\n"
              "    s.sendall(b'ping')\n"
              "    print('got:' + s.recv(16).decode())\n"
              "except OSError as e:\n"
              "    print('err:' + errno.errorcode[e.errno])\n");
  }
};

std::uint16_t local_port(int fd) {
  struct sockaddr_in a {};
  socklen_t len = sizeof a;
  if (::getsockname(fd, reinterpret_cast<struct sockaddr*>(&a), &len) != 0) return 0;
  return ntohs(a.sin_port);
}

TEST_F(LoopbackListenerTest, ServerAcceptsConnectionFromSandbox) {
  auto listener = sb_->listen_loopback(0);
  ASSERT_TRUE(listener.ok()) << listener.error().message();
  int fd = listener->get();
  EXPECT_EQ(::fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  std::uint16_t port = local_port(fd);
  ASSERT_NE(port, 0);

  std::string received;
  std::thread server([&] {
    struct pollfd p {fd, POLLIN, 0};
    if (::poll(&p, 1, 20'000) != 1) return;
    int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) return;
    char buf[16];
    ssize_t n = ::read(c, buf, sizeof buf);
    if (n > 0) received.assign(buf, static_cast<std::size_t>(n));
    (void)!::write(c, "pong", 4);
    ::close(c);
  });
  auto r = connect_from_sandbox(port);
  server.join();
  EXPECT_EQ(r.stdout_data, "got:pong\n") << r.stderr_data;
  EXPECT_EQ(received, "ping");
}

TEST_F(LoopbackListenerTest, WithoutListenerConnectIsRefused) {
  // A listener in another sandbox is not reachable from this one.
  auto other = make();
  ASSERT_NE(other, nullptr);
  auto listener = other->listen_loopback(0);
  ASSERT_TRUE(listener.ok()) << listener.error().message();
  std::uint16_t port = local_port(listener->get());
  EXPECT_EQ(connect_from_sandbox(port).stdout_data, "err:ECONNREFUSED\n");
  EXPECT_EQ(connect_from_sandbox(8080).stdout_data, "err:ECONNREFUSED\n");
  EXPECT_TRUE(other->destroy().ok());
}

TEST_F(LoopbackListenerTest, ListenerIsGoneOnceServerClosesIt) {
  auto listener = sb_->listen_loopback(0);
  ASSERT_TRUE(listener.ok()) << listener.error().message();
  std::uint16_t port = local_port(listener->get());
  listener->reset();
  EXPECT_EQ(connect_from_sandbox(port).stdout_data, "err:ECONNREFUSED\n");
  // The port is free again: init kept no copy.
  auto again = sb_->listen_loopback(port);
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(local_port(again->get()), port);
}

TEST_F(LoopbackListenerTest, PortInUseReportsStepAndErrno) {
  auto first = sb_->listen_loopback(0);
  ASSERT_TRUE(first.ok()) << first.error().message();
  std::uint16_t port = local_port(first->get());
  auto second = sb_->listen_loopback(port);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().sys_errno, EADDRINUSE);
  EXPECT_EQ(second.error().context, "bind 127.0.0.1:" + std::to_string(port));
}

TEST_F(LoopbackListenerTest, ExecStillWorksAlongsideListenRequests) {
  auto listener = sb_->listen_loopback(0);
  ASSERT_TRUE(listener.ok()) << listener.error().message();
  EXPECT_EQ(sh("echo ok").stdout_data, "ok\n");
}

TEST_F(LoopbackListenerTest, DestroyedSandboxRefuses) {
  ASSERT_TRUE(sb_->destroy().ok());
  auto listener = sb_->listen_loopback(0);
  ASSERT_FALSE(listener.ok());
  EXPECT_EQ(listener.error().code, ErrorCode::kUnavailable);
  sb_.reset();
}

}  // namespace
}  // namespace sandcastle::sandbox::testing
