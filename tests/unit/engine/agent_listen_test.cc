// kListen (issue 19): the agent's listeners for the whole sandbox, run as a
// local child on port 0 (the kernel picks a free port, kListening says
// which), so the test never needs the proxies' real ports.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "agent_harness.h"
#include "common/unique_fd.h"

namespace sandcastle::sandbox::engine::agent_test {
namespace {

struct sockaddr_in loopback(std::uint16_t port) {
  struct sockaddr_in addr {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

// The port of the agent's listener `id`, after pumping for its answer.
std::uint16_t listen_on(AgentProc& a, std::uint32_t id, ListenKind kind) {
  a.send_control(encode_listen(id, kind, 0));
  EXPECT_TRUE(a.pump_until([&] { return a.find(AgentMsg::kListening, id) != nullptr; }));
  const AgentControl* m = a.find(AgentMsg::kListening, id);
  return m ? static_cast<std::uint16_t>(m->b) : 0;
}

// The channel of the n-th (from 0) kAccepted for `id`, after pumping for it.
std::uint32_t accepted(AgentProc& a, std::uint32_t id, std::size_t n = 0) {
  std::uint32_t ch = 0;
  auto nth = [&] {
    std::size_t seen = 0;
    for (const auto& c : a.controls)
      if (c.kind == AgentMsg::kAccepted && c.a == id && seen++ == n) {
        ch = c.b;
        return true;
      }
    return false;
  };
  EXPECT_TRUE(a.pump_until(nth));
  return ch;
}

TEST(AgentListen, MessagesDecode) {
  auto m = decode_control(encode_listen(9, ListenKind::kDns, 53));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->kind, AgentMsg::kListen);
  EXPECT_EQ(m->a, 9u);
  EXPECT_EQ(m->b, (1u << 16) | 53u);
  auto l = decode_control(encode_listening(9, 3128));
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->b, 3128u);
  // A kind the agent does not know is malformed.
  std::string bad = encode_listen(9, ListenKind::kTcp, 80);
  bad[10] = 7;  // the kind half of the second word
  EXPECT_FALSE(decode_control(bad).has_value());
}

TEST(AgentListen, TcpConnectionsBecomeChannelsOfTheListener) {
  AgentProc a;
  const std::uint16_t port = listen_on(a, 40, ListenKind::kTcp);
  ASSERT_NE(port, 0);
  UniqueFd c(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  auto addr = loopback(port);
  ASSERT_EQ(::connect(c.get(), reinterpret_cast<struct sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::write(c.get(), "ping", 4), 4);
  const std::uint32_t ch = accepted(a, 40);
  EXPECT_GE(ch, kAgentChannelBase);
  ASSERT_TRUE(a.pump_until([&] { return a.chans[ch].data == "ping"; }));
  a.write(ch, "pong");
  a.close_write(ch);
  std::string got;
  ASSERT_TRUE(a.pump_until([&] {
    char buf[16];
    ssize_t n = ::recv(c.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) got.append(buf, static_cast<std::size_t>(n));
    return n == 0;  // our EOF arrived after the bytes
  }));
  EXPECT_EQ(got, "pong");
}

TEST(AgentListen, DatagramsBecomeFramedChannels) {
  AgentProc a;
  const std::uint16_t port = listen_on(a, 41, ListenKind::kDns);
  ASSERT_NE(port, 0);
  UniqueFd u(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  auto addr = loopback(port);
  const std::string query("\xab\xcdquestion", 10);
  ASSERT_EQ(::sendto(u.get(), query.data(), query.size(), 0,
                     reinterpret_cast<struct sockaddr*>(&addr), sizeof addr),
            10);
  const std::uint32_t ch = accepted(a, 41);
  ASSERT_TRUE(a.pump_until([&] { return a.chans[ch].data.size() >= 12; }));
  EXPECT_EQ(a.chans[ch].data, std::string("\x00\x0a", 2) + query);
  // The reply in two pieces: only a whole message is sent back.
  a.write(ch, std::string("\x00\x05\xab", 3));
  a.pump_for(std::chrono::milliseconds(100));
  a.write(ch, "\xcdok\x01");
  std::string got;
  struct sockaddr_in from {};
  ASSERT_TRUE(a.pump_until([&] {
    char buf[64];
    socklen_t len = sizeof from;
    ssize_t n = ::recvfrom(u.get(), buf, sizeof buf, MSG_DONTWAIT,
                           reinterpret_cast<struct sockaddr*>(&from), &len);
    if (n > 0) got.assign(buf, static_cast<std::size_t>(n));
    return n > 0;
  }));
  EXPECT_EQ(got, "\xab\xcdok\x01");
  EXPECT_EQ(ntohs(from.sin_port), port);
  // The flow is over: the agent's EOF on the channel (its kClose follows
  // the server's own end, as for any socket).
  EXPECT_TRUE(a.pump_until([&] { return a.chans[ch].eof; }));
  a.close_write(ch);
  EXPECT_TRUE(a.pump_until([&] { return a.chans[ch].closed; }));
  // The TCP side of a dns listener is a plain one.
  UniqueFd c(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_EQ(::connect(c.get(), reinterpret_cast<struct sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_NE(accepted(a, 41, 1), 0u);
}

TEST(AgentListen, AtMost64DatagramsInFlight) {
  AgentProc a;
  const std::uint16_t port = listen_on(a, 42, ListenKind::kDns);
  UniqueFd u(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  auto addr = loopback(port);
  for (int i = 0; i < 100; ++i)
    ASSERT_EQ(::sendto(u.get(), "q", 1, 0, reinterpret_cast<struct sockaddr*>(&addr), sizeof addr),
              1);
  a.pump_for(std::chrono::milliseconds(500));
  std::size_t n = 0;
  for (const auto& c : a.controls) n += c.kind == AgentMsg::kAccepted;
  EXPECT_EQ(n, kMaxDnsFlows);
}

// Connections from the sandbox leave 128 channels free: a command still
// runs while code in the sandbox holds every connection it can.
TEST(AgentListen, ConnectionsLeaveRoomForCommands) {
  AgentProc a;
  const std::uint16_t port = listen_on(a, 45, ListenKind::kTcp);
  auto addr = loopback(port);
  std::vector<UniqueFd> held;
  for (std::uint32_t i = 0; i < kMaxChannels; ++i) {
    UniqueFd c(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    ASSERT_EQ(::connect(c.get(), reinterpret_cast<struct sockaddr*>(&addr), sizeof addr), 0);
    held.push_back(std::move(c));
    if (i % 64 == 63) a.pump_for(std::chrono::milliseconds(20));  // the backlog is 512
  }
  auto count = [&] {
    std::size_t n = 0;
    for (const auto& c : a.controls) n += c.kind == AgentMsg::kAccepted;
    return n;
  };
  EXPECT_TRUE(a.pump_until([&] { return count() == kMaxChannels - 128; }));
  a.pump_for(std::chrono::milliseconds(200));
  EXPECT_EQ(count(), kMaxChannels - 128);
  AgentExec e = make_exec(a, 1, {"echo", "room"});
  const AgentDone* done = a.run(e);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(a.chans[e.ch_stdout].data, "room\n");
}

TEST(AgentListen, PortInUseIsAnErrnoNotAnExit) {
  UniqueFd taken(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  auto addr = loopback(0);
  ASSERT_EQ(::bind(taken.get(), reinterpret_cast<struct sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(taken.get(), reinterpret_cast<struct sockaddr*>(&addr), &len), 0);
  AgentProc a;
  a.send_control(encode_listen(43, ListenKind::kTcp, ntohs(addr.sin_port)));
  const AgentControl* f = a.wait_end(43);
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->kind, AgentMsg::kExecFailed);
  EXPECT_EQ(f->failure->err, EADDRINUSE);
  EXPECT_EQ(f->failure->step, "bind");
  // A listener id given twice is the server's error.
  (void)listen_on(a, 44, ListenKind::kTcp);
  a.send_control(encode_listen(44, ListenKind::kTcp, 0));
  int st = a.wait_exit();
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 2);
}

}  // namespace
}  // namespace sandcastle::sandbox::engine::agent_test
