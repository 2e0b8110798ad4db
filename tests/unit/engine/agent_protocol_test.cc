// The agent protocol's robustness: malformed input ends the agent with 2
// (the server drops the stream anyway), and decode_control survives any bytes.
#include <sys/wait.h>

#include <random>

#include "agent_harness.h"

namespace sandcastle::sandbox::engine::agent_test {
namespace {

int exit_code_after(const std::string& raw) {
  AgentProc a;
  a.send_raw(raw);
  int st = a.wait_exit();
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(AgentProtocol, MalformedControlMessageExitsTwo) {
  EXPECT_EQ(exit_code_after(encode_frame(kControlChannel, std::string("\x63\0\0\0", 4))), 2);
  // A message only the agent sends.
  EXPECT_EQ(exit_code_after(encode_frame(kControlChannel, encode_started(1, 2))), 2);
}

TEST(AgentProtocol, OversizedFramesExitTwo) {
  std::string head(kFrameHeader, '\0');
  head[0] = 5;  // channel 5
  std::uint32_t len = kMaxDataFrame + 1;
  std::memcpy(head.data() + 4, &len, 4);
  EXPECT_EQ(exit_code_after(head), 2);
  len = kMaxFrameToAgent + 1;
  head[0] = 0;
  std::memcpy(head.data() + 4, &len, 4);
  EXPECT_EQ(exit_code_after(head), 2);
}

TEST(AgentProtocol, ChannelMisuseExitsTwo) {
  AgentProc a;
  AgentExec e = make_exec(a, 1, {"sleep", "300"});
  e.ch_stdin = a.new_channel();
  a.send_control(encode_exec(e));
  ASSERT_TRUE(a.pump_until([&] { return a.find(AgentMsg::kStarted, 1) != nullptr; }));
  pid_t pid = static_cast<pid_t>(a.find(AgentMsg::kStarted, 1)->b);
  // More than the window on one channel, without waiting for credit (the
  // pipe's buffer takes some: twice the window is past it either way).
  a.chans[e.ch_stdin].raw = true;
  std::string flood;
  for (std::uint32_t sent = 0; sent <= 2 * kWindow; sent += kMaxDataFrame)
    flood += encode_frame(e.ch_stdin, std::string(kMaxDataFrame, 'f'));
  a.send_raw(flood);
  int st = a.wait_exit();
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 2);
  EXPECT_TRUE(wait_gone(pid));  // nothing it started outlives it
}

TEST(AgentProtocol, ReusedChannelExitsTwo) {
  AgentProc a;
  AgentExec e = make_exec(a, 1, {"sleep", "300"});
  a.send_control(encode_exec(e));
  AgentExec f = make_exec(a, 2, {"true"});
  f.ch_stderr = e.ch_stdout;
  a.send_control(encode_exec(f));
  int st = a.wait_exit();
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 2);
}

TEST(AgentProtocol, UnknownExecsAndClosedChannelsAreIgnored) {
  AgentProc a;
  a.send_control(encode_signal(99, AgentSignal::kCancel));
  a.send_control(encode_credit(1234, 10));
  a.send_control(encode_close(1234));
  a.send_raw(encode_frame(1234, "late bytes"));
  AgentExec e = make_exec(a, 1, {"echo", "fine"});
  a.send_control(encode_exec(e));
  const AgentControl* end = a.wait_end(1);
  ASSERT_NE(end, nullptr);
  EXPECT_EQ(end->kind, AgentMsg::kDone);
  EXPECT_EQ(a.chans[e.ch_stdout].data, "fine\n");
}

// Every encoder's output, cut anywhere or with bytes flipped, decodes to a
// whole message or to nothing, never past its bytes (ASan build).
TEST(AgentProtocol, DecodeControlSurvivesTruncatedAndRandomPayloads) {
  AgentExec e;
  e.id = 3;
  e.argv = {"python3", "-c", "print(1)"};
  e.env = {"A=b", "PATH=/bin"};
  e.cwd = "/workspace";
  e.listen_port = 8080;
  const std::vector<std::string> valid = {encode_hello(1),
                                          encode_exec(e),
                                          encode_started(1, 2),
                                          encode_failure({1, 2, "execve"}),
                                          encode_done({1, 0, AgentEnd::kTimeout, 5, 6}),
                                          encode_signal(1, AgentSignal::kInterrupt),
                                          encode_files(4, 1 << 20),
                                          encode_credit(4, 100),
                                          encode_close(4),
                                          encode_usage_query(9),
                                          encode_usage(9, 3, 4096),
                                          encode_accepted(1, kAgentChannelBase)};
  for (const auto& v : valid) {
    ASSERT_TRUE(decode_control(v).has_value());
    for (std::size_t cut = 0; cut < v.size(); ++cut)
      EXPECT_FALSE(decode_control(std::string_view(v).substr(0, cut)).has_value()) << cut;
    EXPECT_FALSE(decode_control(v + "x").has_value());
  }
  std::mt19937 rng(17);
  for (int i = 0; i < 20000; ++i) {
    std::string p = valid[rng() % valid.size()];
    for (int flips = 1 + static_cast<int>(rng() % 4); flips > 0; --flips)
      p[rng() % p.size()] = static_cast<char>(rng());
    if (rng() % 3 == 0) p.resize(rng() % (p.size() + 1));
    (void)decode_control(p);
    std::string noise(rng() % 64, '\0');
    for (auto& c : noise) c = static_cast<char>(rng());
    (void)decode_control(noise);
  }
  // Counts that claim more strings than there are bytes.
  std::string huge = encode_exec(e);
  std::uint32_t many = 0xffffffffu;
  std::memcpy(huge.data() + 8, &many, 4);  // argv's count
  EXPECT_FALSE(decode_control(huge).has_value());
}

}  // namespace
}  // namespace sandcastle::sandbox::engine::agent_test

namespace sandcastle::sandbox::engine::agent_test {
namespace {

// Issue 18: a terminal's exec names its one channel (the pty, both ways) and
// no other; its size comes in pairs; kResize carries both in one word.
TEST(AgentProtocol, TerminalExecWithOtherChannelsExitsTwo) {
  AgentProc a;
  AgentExec e = make_exec(a, 1, {"sh"});
  e.ch_stdin = a.new_channel();
  e.pty_cols = 80;
  e.pty_rows = 24;
  ASSERT_NE(e.ch_stdout, 0u);
  EXPECT_FALSE(decode_control(encode_exec(e)).has_value());
  a.send_control(encode_exec(e));
  int st = a.wait_exit();
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 2);
}

TEST(AgentProtocol, ResizeAndPtySizeDecode) {
  auto m = decode_control(encode_resize(7, 132, 43));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->kind, AgentMsg::kResize);
  EXPECT_EQ(m->a, 7u);
  EXPECT_EQ(m->b, (132u << 16) | 43u);
  AgentExec e;
  e.id = 1;
  e.argv = {"sh"};
  e.ch_stdin = 5;
  e.pty_cols = 132;
  e.pty_rows = 43;
  auto d = decode_control(encode_exec(e));
  ASSERT_TRUE(d.has_value() && d->exec.has_value());
  EXPECT_EQ(d->exec->pty_cols, 132);
  EXPECT_EQ(d->exec->pty_rows, 43);
  e.pty_rows = 0;  // one without the other
  EXPECT_FALSE(decode_control(encode_exec(e)).has_value());
}

}  // namespace
}  // namespace sandcastle::sandbox::engine::agent_test
