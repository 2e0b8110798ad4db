// sandcastle-agent's other channels: a command's fd 3, its listener's
// connections, file workers, and how channels stay independent of each other.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>

#include "agent_harness.h"
#include "sandbox/native/file_wire.h"

namespace sandcastle::sandbox::engine::agent_test {
namespace {

TEST(AgentChannels, Fd3IsASocketBothWays) {
  AgentProc a;
  AgentExec e = make_exec(a, 1, {"sh", "-c", "read -r line <&3; echo \"got $line\" >&3"});
  e.ch_fd3 = a.new_channel();
  a.send_control(encode_exec(e));
  a.write(e.ch_fd3, "ping\n");
  const AgentDone* done = a.wait_done(1);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(WEXITSTATUS(done->wait_status), 0);
  EXPECT_EQ(a.chans[e.ch_fd3].data, "got ping\n");
  // The command's end is gone: its EOF before kDone, then the agent's
  // close (we could still have sent) once its data is credited.
  EXPECT_LT(a.event_index("eof:" + std::to_string(e.ch_fd3)), a.event_index("ctl:5:1"));
  EXPECT_TRUE(a.pump_until([&] { return a.chans[e.ch_fd3].closed; }));
}

TEST(AgentChannels, StdinClosedByTheCommandIsReportedClosed) {
  AgentProc a;
  AgentExec e = make_exec(a, 2, {"sh", "-c", "exec 0<&-; sleep 0.2"});
  e.ch_stdin = a.new_channel();
  a.send_control(encode_exec(e));
  a.write(e.ch_stdin, std::string(100000, 'x'));
  const AgentDone* done = a.wait_done(2);
  ASSERT_NE(done, nullptr);
  EXPECT_TRUE(a.chans[e.ch_stdin].closed);
}

// One command never reads its stdin while 1 MiB is offered to it: only its
// own channel waits; another command on the same stream runs meanwhile.
TEST(AgentChannels, AStalledStdinDoesNotStallAnotherExec) {
  AgentProc a;
  AgentExec slow = make_exec(a, 3, {"sleep", "300"});
  slow.ch_stdin = a.new_channel();
  a.send_control(encode_exec(slow));
  a.write(slow.ch_stdin, std::string(1 << 20, 's'));
  a.pump_for(200ms);
  // What went: the agent's window and the pipe's buffer, no more.
  EXPECT_LT(a.chans[slow.ch_stdin].sent, std::uint64_t{1} << 20);
  EXPECT_FALSE(a.chans[slow.ch_stdin].pending.empty());
  AgentExec quick = make_exec(a, 4, {"echo", "through"});
  const AgentDone* done = a.run(quick, 5s);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(a.chans[quick.ch_stdout].data, "through\n");
  a.send_control(encode_signal(3, AgentSignal::kCancel));
  const AgentDone* slow_done = a.wait_done(3);
  ASSERT_NE(slow_done, nullptr);
  EXPECT_EQ(slow_done->end, AgentEnd::kCancelled);
  EXPECT_TRUE(a.chans[slow.ch_stdin].closed);
}

std::uint16_t free_port() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(s);
  return ntohs(addr.sin_port);
}

TEST(AgentChannels, ListenerConnectionsBecomeChannels) {
  AgentProc a;
  std::uint16_t port = free_port();
  AgentExec e = make_exec(a, 5,
                          {"bash", "-c",
                           "exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(port) +
                               "; echo hi >&3; read -r l <&3; echo \"$l\""});
  e.listen_port = port;
  a.send_control(encode_exec(e));
  ASSERT_TRUE(a.pump_until([&] {
    for (const auto& c : a.controls)
      if (c.kind == AgentMsg::kAccepted) return true;
    return false;
  }));
  std::uint32_t ch = 0;
  for (const auto& c : a.controls)
    if (c.kind == AgentMsg::kAccepted) {
      EXPECT_EQ(c.a, 5u);
      ch = c.b;
    }
  EXPECT_GE(ch, kAgentChannelBase);
  ASSERT_TRUE(a.pump_until([&] { return a.chans[ch].data == "hi\n"; }));
  a.write(ch, "back\n");
  const AgentDone* done = a.wait_done(5);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(WEXITSTATUS(done->wait_status), 0);
  EXPECT_EQ(a.chans[e.ch_stdout].data, "back\n");
  // The listener went with the command.
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_NE(::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(errno, ECONNREFUSED);
  ::close(s);
}

// In namespaces of its own the port is the command's alone: taken in the
// container or not, it listens (and the container's holder is untouched).
// Without them, the agent's own listener cannot be had: an exec failure.
TEST(AgentChannels, ListenerOnATakenPortIsTheCommandsOwnOrAnExecFailure) {
  AgentProc a;
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(s, 1), 0);
  socklen_t len = sizeof addr;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  AgentExec e = make_exec(a, 6, {"bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/" + port + "; echo in"});
  e.listen_port = ntohs(addr.sin_port);
  a.send_control(encode_exec(e));
  const AgentControl* end = a.wait_end(6);
  ::close(s);
  ASSERT_NE(end, nullptr);
  if (own_netns_available()) {
    ASSERT_EQ(end->kind, AgentMsg::kDone);
    EXPECT_EQ(a.chans[e.ch_stdout].data, "in\n");
    return;
  }
  ASSERT_EQ(end->kind, AgentMsg::kExecFailed);
  EXPECT_EQ(end->failure->err, EADDRINUSE);
  EXPECT_EQ(end->failure->step, "listen");
}

// file_wire.h's protocol, spoken over the relayed channel.
class FileTalk {
 public:
  FileTalk(AgentProc& a, std::uint32_t ch) : a_(a), ch_(ch) {}
  void request(const native::FileRequest& r, const std::string& data = {}) {
    a_.write(ch_, native::frame(native::encode(r)) + data);
  }
  std::optional<native::FileReply> reply() {
    std::string msg;
    if (!take_message(msg)) return std::nullopt;
    return native::decode_file_reply(msg);
  }
  // A read's data: chunks of u32 length and bytes, then a length of 0.
  bool take_chunks(std::string& out) {
    for (;;) {
      std::string len;
      if (!take_raw(4, len)) return false;
      std::uint32_t n = 0;
      std::memcpy(&n, len.data(), 4);
      if (n == 0) return true;
      std::string part;
      if (!take_raw(n, part)) return false;
      out += part;
    }
  }
  bool take_raw(std::size_t n, std::string& out) {
    if (!a_.pump_until([&] { return a_.chans[ch_].data.size() - pos_ >= n; })) return false;
    out = a_.chans[ch_].data.substr(pos_, n);
    pos_ += n;
    return true;
  }

 private:
  bool take_message(std::string& msg) {
    std::string len;
    if (!take_raw(4, len)) return false;
    std::uint32_t n = 0;
    std::memcpy(&n, len.data(), 4);
    return n <= native::kMaxFileMessage && take_raw(n, msg);
  }
  AgentProc& a_;
  std::uint32_t ch_;
  std::size_t pos_ = 0;
};

TEST(AgentChannels, FilesWriteThenReadThroughAWorker) {
  char tmpl[] = "/tmp/agent-files-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  AgentProc a;
  std::uint32_t ch = a.new_channel();
  a.send_control(encode_files(ch, 0));
  FileTalk t(a, ch);
  std::string content(200000, '\0');
  for (std::size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * 7);
  native::FileRequest w;
  w.op = native::FileOp::kWrite;
  w.path = dir + "/sub/f.bin";
  w.length = content.size();
  w.flags = native::kFileParents;
  t.request(w, content);
  auto rep = t.reply();
  ASSERT_TRUE(rep);
  EXPECT_EQ(rep->status, native::FileStatus::kOk) << rep->step << " " << rep->err;
  native::FileRequest r;
  r.op = native::FileOp::kRead;
  r.path = w.path;
  r.length = content.size();
  t.request(r);
  rep = t.reply();
  ASSERT_TRUE(rep);
  ASSERT_EQ(rep->status, native::FileStatus::kOk);
  EXPECT_EQ(rep->size, content.size());
  std::string back;
  ASSERT_TRUE(t.take_chunks(back));
  EXPECT_TRUE(back == content);
  // A special file is refused, not read.
  r.path = "/dev/zero";
  t.request(r);
  rep = t.reply();
  ASSERT_TRUE(rep);
  EXPECT_EQ(rep->status, native::FileStatus::kNotRegular);
  // Our EOF ends the worker; its EOF comes back.
  a.close_write(ch);
  EXPECT_TRUE(a.pump_until([&] { return a.chans[ch].eof; }));
  std::filesystem::remove_all(dir);
}

TEST(AgentChannels, FilesRespectTheSizeLimit) {
  char tmpl[] = "/tmp/agent-files-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  AgentProc a;
  std::uint32_t ch = a.new_channel();
  a.send_control(encode_files(ch, 4096));
  FileTalk t(a, ch);
  native::FileRequest w;
  w.op = native::FileOp::kWrite;
  w.path = dir + "/big";
  w.length = 10000;
  t.request(w, std::string(10000, 'b'));
  auto rep = t.reply();
  ASSERT_TRUE(rep);
  EXPECT_EQ(rep->status, native::FileStatus::kErrno);
  EXPECT_EQ(rep->err, EFBIG);
  std::filesystem::remove_all(dir);
}

TEST(AgentChannels, UsageCountsProcesses) {
  AgentProc a;
  a.send_control(encode_usage_query(42));
  ASSERT_TRUE(a.pump_until([&] { return a.find(AgentMsg::kUsage, 42) != nullptr; }));
  EXPECT_GT(a.find(AgentMsg::kUsage, 42)->b, 1u);
}

}  // namespace
}  // namespace sandcastle::sandbox::engine::agent_test
