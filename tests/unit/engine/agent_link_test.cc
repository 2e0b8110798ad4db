// AgentLink, the server's end of an agent stream: against the real static
// agent run here as a child (raw stream, no engine), and against a hostile
// "agent" played by the test, whose every overreach must end the link (or
// be refused) without the server's buffers growing.
#include "sandbox/engine/agent_link.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

namespace sandcastle::sandbox::engine {
namespace {

using namespace std::chrono_literals;

struct Pair {
  UniqueFd server, peer;
};

Pair socket_pair() {
  int sp[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
  return {UniqueFd(sp[0]), UniqueFd(sp[1])};
}

AgentLink::Options raw_options(std::chrono::milliseconds hello = 5s) {
  AgentLink::Options o;
  o.engine_framed = false;
  o.hello_timeout = hello;
  o.name = "test";
  return o;
}

void send_all(int fd, const std::string& bytes) {
  std::size_t at = 0;
  while (at < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    if (n <= 0) return;  // the link closed its end: what a test may expect
    at += static_cast<std::size_t>(n);
  }
}

// Frames the link sent to the peer, read until `want` matches or 5 s pass.
struct FrameReader {
  int fd;
  std::string buf;
  bool next(std::uint32_t* channel, std::string* payload) {
    auto end = std::chrono::steady_clock::now() + 5s;
    for (;;) {
      if (buf.size() >= kFrameHeader) {
        char h[kFrameHeader];
        std::copy_n(buf.data(), kFrameHeader, h);
        FrameHeader fh = decode_frame_header(h);
        if (buf.size() >= kFrameHeader + fh.length) {
          *channel = fh.channel;
          *payload = buf.substr(kFrameHeader, fh.length);
          buf.erase(0, kFrameHeader + fh.length);
          return true;
        }
      }
      struct pollfd p {
        fd, POLLIN, 0
      };
      if (std::chrono::steady_clock::now() > end || ::poll(&p, 1, 100) < 0) return false;
      if (!p.revents) continue;
      char tmp[65536];
      ssize_t n = ::read(fd, tmp, sizeof tmp);
      if (n <= 0) return false;
      buf.append(tmp, static_cast<std::size_t>(n));
    }
  }
  std::optional<AgentControl> next_control() {
    std::uint32_t ch = 0;
    std::string payload;
    while (next(&ch, &payload))
      if (ch == kControlChannel) return decode_control(payload);
    return std::nullopt;
  }
};

bool wait_dead(const AgentLink& link) {
  for (int i = 0; i < 250 && link.alive(); ++i) std::this_thread::sleep_for(20ms);
  return !link.alive();
}

std::unique_ptr<AgentLink> started_link(Pair& p) {
  send_all(p.peer.get(), encode_frame(kControlChannel, encode_hello(4242)));
  auto link = AgentLink::start(std::move(p.server), "", raw_options());
  EXPECT_TRUE(link.ok()) << link.error().message();
  return link.ok() ? std::move(*link) : nullptr;
}

TEST(AgentLinkHostile, AStreamWithoutHelloIsRefused) {
  auto p = socket_pair();
  auto link = AgentLink::start(std::move(p.server), "", raw_options(200ms));
  ASSERT_FALSE(link.ok());
  EXPECT_EQ(link.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(link.error().context.find("no hello"), std::string::npos) << link.error().context;
}

TEST(AgentLinkHostile, AnotherProtocolVersionIsRefused) {
  auto p = socket_pair();
  std::string hello = encode_hello(7);
  hello[4] = 9;  // version 9
  send_all(p.peer.get(), encode_frame(kControlChannel, hello));
  auto link = AgentLink::start(std::move(p.server), "", raw_options());
  ASSERT_FALSE(link.ok());
  EXPECT_NE(link.error().context.find("protocol 9"), std::string::npos) << link.error().context;
}

TEST(AgentLinkHostile, AnOversizedFrameEndsTheLinkAndWakesWaiters) {
  auto p = socket_pair();
  auto link = started_link(p);
  ASSERT_TRUE(link);
  auto waiter = link->watch(5);
  std::string header(kFrameHeader, '\0');
  std::string big = encode_frame(3, std::string(16, 'x'));
  big[4] = '\xff';  // length 0x...ff: past kMaxFrameFromAgent
  big[5] = '\xff';
  big[6] = '\x01';
  send_all(p.peer.get(), big.substr(0, kFrameHeader));
  ASSERT_TRUE(wait_dead(*link));
  EXPECT_NE(link->end_reason().find("agent frame of"), std::string::npos) << link->end_reason();
  struct pollfd w {
    waiter->fd(), POLLIN, 0
  };
  EXPECT_EQ(::poll(&w, 1, 1000), 1);
  EXPECT_FALSE(waiter->pop().has_value());
  EXPECT_TRUE(waiter->dead());
  auto st = link->send_control(encode_usage_query(1));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kUnavailable);
}

TEST(AgentLinkHostile, CreditPastTheWindowEndsTheLink) {
  auto p = socket_pair();
  auto link = started_link(p);
  ASSERT_TRUE(link);
  auto ch = link->open_channel();
  ASSERT_TRUE(ch.ok());
  send_all(p.peer.get(), encode_frame(kControlChannel, encode_credit(ch->first, 1)));
  ASSERT_TRUE(wait_dead(*link));
  EXPECT_NE(link->end_reason().find("credit"), std::string::npos) << link->end_reason();
}

TEST(AgentLinkHostile, DataPastTheWindowEndsTheLinkInsteadOfBuffering) {
  auto p = socket_pair();
  auto link = started_link(p);
  ASSERT_TRUE(link);
  auto ch = link->open_channel();  // nobody reads ch->second
  ASSERT_TRUE(ch.ok());
  const std::string chunk = encode_frame(ch->first, std::string(kMaxDataFrame, 'd'));
  // Without waiting on a full socket: once the link is dead nobody reads.
  std::thread flood([&] {
    std::size_t at = 0;
    for (int sent = 0; sent < 200 && link->alive();) {
      ssize_t n =
          ::send(p.peer.get(), chunk.data() + at, chunk.size() - at, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        std::this_thread::sleep_for(1ms);
        continue;
      }
      at += static_cast<std::size_t>(n);
      if (at == chunk.size()) {
        at = 0;
        ++sent;
      }
    }
  });
  EXPECT_TRUE(wait_dead(*link));
  flood.join();
  EXPECT_NE(link->end_reason().find("overran channel"), std::string::npos) << link->end_reason();
}

TEST(AgentLinkHostile, ServerMessagesFromTheAgentEndTheLink) {
  auto p = socket_pair();
  auto link = started_link(p);
  ASSERT_TRUE(link);
  AgentExec e;
  e.id = 1;
  e.argv = {"true"};
  send_all(p.peer.get(), encode_frame(kControlChannel, encode_exec(e)));
  ASSERT_TRUE(wait_dead(*link));
  EXPECT_NE(link->end_reason().find("server's message"), std::string::npos) << link->end_reason();
}

TEST(AgentLinkHostile, ConnectionsNobodyAskedForAreClosed) {
  auto p = socket_pair();
  auto link = started_link(p);
  ASSERT_TRUE(link);
  FrameReader r{p.peer.get(), {}};
  // For an exec with no listener: answered with kClose, nothing kept.
  send_all(p.peer.get(), encode_frame(kControlChannel, encode_accepted(9, kAgentChannelBase + 1)));
  auto c = r.next_control();
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->kind, AgentMsg::kClose);
  EXPECT_EQ(c->a, kAgentChannelBase + 1);
  EXPECT_TRUE(link->alive());
}

TEST(AgentLinkHostile, AConnectionOnTheServersChannelsEndsTheLink) {
  auto p = socket_pair();
  auto link = started_link(p);
  ASSERT_TRUE(link);
  // Below the agent's half of the channel space: a flood of these would
  // otherwise buy a reply each in the server's memory.
  send_all(p.peer.get(), encode_frame(kControlChannel, encode_accepted(9, 5)));
  ASSERT_TRUE(wait_dead(*link));
  EXPECT_NE(link->end_reason().find("not its to pick"), std::string::npos) << link->end_reason();
}

TEST(AgentLinkHostile, AnAgentThatNeverReadsIsCutOff) {
  auto p = socket_pair();
  auto link = started_link(p);
  ASSERT_TRUE(link);
  // Nothing reads the peer: what the server queues for the agent (here a
  // close per refused connection) stops at the hard mark, and the link ends.
  std::thread flood([&] {
    for (std::uint32_t round = 0; round < 4096 && link->alive(); ++round) {
      std::string b;
      for (std::uint32_t i = 0; i < 4096; ++i)
        b +=
            encode_frame(kControlChannel, encode_accepted(9, kAgentChannelBase + round * 4096 + i));
      std::size_t at = 0;
      while (at < b.size() && link->alive()) {
        ssize_t n = ::send(p.peer.get(), b.data() + at, b.size() - at, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
          std::this_thread::sleep_for(1ms);
          continue;
        }
        at += static_cast<std::size_t>(n);
      }
    }
  });
  EXPECT_TRUE(wait_dead(*link));
  flood.join();
  EXPECT_NE(link->end_reason().find("does not read"), std::string::npos) << link->end_reason();
}

TEST(AgentLinkHostile, TheStreamsEndIsTheAgentsDeath) {
  auto p = socket_pair();
  auto link = started_link(p);
  ASSERT_TRUE(link);
  auto waiter = link->watch(1);
  p.peer.reset();
  ASSERT_TRUE(wait_dead(*link));
  EXPECT_NE(link->end_reason().find("stream ended"), std::string::npos) << link->end_reason();
  EXPECT_TRUE(waiter->dead());
}

// The real agent, on one socket as its stdin and stdout.
class RealAgent {
 public:
  RealAgent() {
    auto p = socket_pair();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(p.peer.get(), 0);
      ::dup2(p.peer.get(), 1);
      int devnull = ::open("/dev/null", O_WRONLY);
      if (devnull >= 0) ::dup2(devnull, 2);
      ::execl(SANDCASTLE_AGENT_PATH, SANDCASTLE_AGENT_PATH, "serve", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    p.peer.reset();
    auto link = AgentLink::start(std::move(p.server), "", raw_options());
    EXPECT_TRUE(link.ok()) << link.error().message();
    if (link.ok()) link_ = std::move(*link);
  }
  ~RealAgent() {
    link_.reset();  // EOF: the agent kills its commands and exits
    int st = 0;
    for (int i = 0; i < 500 && ::waitpid(pid_, &st, WNOHANG) == 0; ++i)
      std::this_thread::sleep_for(10ms);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &st, 0);
  }
  AgentLink& link() { return *link_; }
  bool ok() const { return link_ != nullptr; }

 private:
  pid_t pid_ = -1;
  std::unique_ptr<AgentLink> link_;
};

std::string read_to_eof(int fd) {
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return out;
    out.append(buf, static_cast<std::size_t>(n));
  }
}

TEST(AgentLinkReal, RunsACommandAndRelaysItsOutput) {
  RealAgent agent;
  ASSERT_TRUE(agent.ok());
  EXPECT_GT(agent.link().agent_pid(), 0u);
  AgentLink& link = agent.link();
  auto out = link.open_channel();
  ASSERT_TRUE(out.ok());
  AgentExec e;
  e.id = link.next_id();
  e.argv = {"/bin/sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' y; exit 4"};
  e.env = {"PATH=/usr/bin:/bin"};
  e.cwd = "/";
  e.timeout_ms = 20000;
  e.ch_stdout = out->first;
  auto waiter = link.watch(e.id);
  ASSERT_TRUE(link.send_control(encode_exec(e), {e.ch_stdout}).ok());
  std::string got = read_to_eof(out->second.get());
  EXPECT_EQ(got.size(), 3'000'000u);
  EXPECT_EQ(got.find_first_not_of('y'), std::string::npos);
  std::optional<AgentDone> done;
  for (int i = 0; i < 500 && !done; ++i) {
    while (auto m = waiter->pop())
      if (m->kind == AgentMsg::kDone) done = m->done;
    if (!done) std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(done.has_value());
  EXPECT_TRUE(WIFEXITED(done->wait_status));
  EXPECT_EQ(WEXITSTATUS(done->wait_status), 4);
}

}  // namespace
}  // namespace sandcastle::sandbox::engine
