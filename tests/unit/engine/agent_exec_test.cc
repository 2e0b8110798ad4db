// sandcastle-agent's commands: the static agent run as a child, spoken to
// through agent_wire.h as the engine backend does (no engine needed).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "agent_harness.h"

namespace sandcastle::sandbox::engine::agent_test {
namespace {

TEST(AgentExec, HelloComesFirstWithVersionAndPid) {
  AgentProc a;
  EXPECT_EQ(a.hello.kind, AgentMsg::kHello);
  EXPECT_EQ(a.hello.a, kAgentProtocolVersion);
  EXPECT_EQ(a.hello.b, static_cast<std::uint32_t>(a.pid()));
}

TEST(AgentExec, EchoOutputArrivesBeforeDone) {
  AgentProc a;
  AgentExec e = make_exec(a, 7, {"echo", "hello"});
  const AgentDone* done = a.run(e);
  ASSERT_NE(done, nullptr);
  ASSERT_NE(a.find(AgentMsg::kStarted, 7), nullptr);
  EXPECT_EQ(a.chans[e.ch_stdout].data, "hello\n");
  EXPECT_TRUE(a.chans[e.ch_stdout].eof);
  EXPECT_TRUE(a.chans[e.ch_stderr].eof);
  EXPECT_LT(a.event_index("ctl:3:7"), a.event_index("eof:" + std::to_string(e.ch_stdout)));
  EXPECT_LT(a.event_index("eof:" + std::to_string(e.ch_stdout)), a.event_index("ctl:5:7"));
  EXPECT_TRUE(WIFEXITED(done->wait_status));
  EXPECT_EQ(WEXITSTATUS(done->wait_status), 0);
  EXPECT_EQ(done->end, AgentEnd::kExited);
  EXPECT_GT(done->maxrss_kib, 0u);
}

TEST(AgentExec, LargeOutputAllArrivesBeforeDone) {
  AgentProc a;
  // Written, then the main process exits at once: every byte still counts.
  AgentExec e = make_exec(a, 1, {"sh", "-c", "head -c 3000000 /dev/zero; exit 4"});
  const AgentDone* done = a.run(e);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(a.chans[e.ch_stdout].data.size(), 3000000u);
  EXPECT_EQ(WEXITSTATUS(done->wait_status), 4);
  EXPECT_LE(a.max_frame, kMaxDataFrame);
}

TEST(AgentExec, ExitCodeAndEnvironmentAreTheRequestsOwn) {
  AgentProc a;
  AgentExec e = make_exec(a, 2, {"sh", "-c", "echo \"$ONLY:$HOME:$(pwd)\"; exit 3"});
  e.env = {"PATH=/usr/bin:/bin", "ONLY=yes"};
  e.cwd = "/tmp";
  const AgentDone* done = a.run(e);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(WEXITSTATUS(done->wait_status), 3);
  EXPECT_EQ(a.chans[e.ch_stdout].data, "yes::/tmp\n");
}

TEST(AgentExec, StdinPassesThroughWithFlowControl) {
  AgentProc a;
  AgentExec e = make_exec(a, 3, {"cat"});
  e.ch_stdin = a.new_channel();
  std::string in(1 << 20, '\0');
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<char>((i * 131) ^ (i >> 9));
  a.send_control(encode_exec(e));
  a.write(e.ch_stdin, in);
  a.close_write(e.ch_stdin);
  const AgentDone* done = a.wait_done(3, 20s);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(WEXITSTATUS(done->wait_status), 0);
  EXPECT_TRUE(a.chans[e.ch_stdout].data == in) << a.chans[e.ch_stdout].data.size();
  // Every byte sent was credited back (four windows' worth went through one).
  EXPECT_EQ(a.chans[e.ch_stdin].sent, in.size());
  EXPECT_EQ(a.chans[e.ch_stdin].credit, kWindow);
}

TEST(AgentExec, OutputStopsAtTheWindowUntilCredited) {
  AgentProc a;
  AgentExec e = make_exec(a, 4, {"head", "-c", "1000000", "/dev/zero"});
  a.chans[e.ch_stdout].hold_credit = true;
  a.send_control(encode_exec(e));
  ASSERT_TRUE(a.pump_until([&] { return a.chans[e.ch_stdout].data.size() >= kWindow; }));
  a.pump_for(300ms);
  EXPECT_EQ(a.chans[e.ch_stdout].data.size(), kWindow);
  EXPECT_EQ(a.find(AgentMsg::kDone, 4), nullptr);
  a.release_credit(e.ch_stdout);
  const AgentControl* end = a.wait_end(4);
  ASSERT_NE(end, nullptr);
  EXPECT_EQ(a.chans[e.ch_stdout].data.size(), 1000000u);
}

// The command has exited with output still in its pipe, waiting for credit
// that never comes: the server's kClose of that channel lets kDone through.
TEST(AgentExec, ServerCloseOfADrainingChannelEndsTheExec) {
  AgentProc a;
  AgentExec e = make_exec(a, 15, {"head", "-c", "300000", "/dev/zero"});
  a.chans[e.ch_stdout].hold_credit = true;
  a.send_control(encode_exec(e));
  ASSERT_TRUE(a.pump_until([&] { return a.chans[e.ch_stdout].data.size() >= kWindow; }));
  a.pump_for(200ms);
  EXPECT_EQ(a.find(AgentMsg::kDone, 15), nullptr);
  a.send_control(encode_close(e.ch_stdout));
  const AgentControl* end = a.wait_end(15, 5s);
  ASSERT_NE(end, nullptr);
  EXPECT_EQ(end->kind, AgentMsg::kDone);
  EXPECT_EQ(WEXITSTATUS(end->done->wait_status), 0);
}

TEST(AgentExec, TimeoutKillsTheCommand) {
  AgentProc a;
  AgentExec e = make_exec(a, 5, {"sleep", "30"});
  e.timeout_ms = 200;
  auto t0 = std::chrono::steady_clock::now();
  const AgentDone* done = a.run(e);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(done->end, AgentEnd::kTimeout);
  EXPECT_TRUE(WIFSIGNALED(done->wait_status));
  EXPECT_EQ(WTERMSIG(done->wait_status), SIGKILL);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 200ms);
  EXPECT_TRUE(pid_gone(static_cast<pid_t>(a.find(AgentMsg::kStarted, 5)->b)));
}

// The command starts two background sleeps, one in a session of its own
// (out of the process group), and waits; cancel must take all three.
TEST(AgentExec, CancelKillsTheWholeTree) {
  AgentProc a;
  AgentExec e =
      make_exec(a, 6, {"sh", "-c", "sleep 300 & echo $!; setsid sleep 301 & echo $!; wait"});
  a.send_control(encode_exec(e));
  ASSERT_TRUE(a.pump_until([&] {
    return std::count(a.chans[e.ch_stdout].data.begin(), a.chans[e.ch_stdout].data.end(), '\n') ==
           2;
  }));
  pid_t bg1 = 0, bg2 = 0;
  ASSERT_EQ(std::sscanf(a.chans[e.ch_stdout].data.c_str(), "%d %d", &bg1, &bg2), 2);
  ASSERT_FALSE(pid_gone(bg1));
  ASSERT_FALSE(pid_gone(bg2));
  a.send_control(encode_signal(6, AgentSignal::kCancel));
  const AgentDone* done = a.wait_done(6);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(done->end, AgentEnd::kCancelled);
  EXPECT_TRUE(wait_gone(bg1));
  EXPECT_TRUE(wait_gone(bg2));
}

// Two commands at once: cancelling one leaves the other's processes alone.
TEST(AgentExec, CancelTakesOnlyItsOwnCommand) {
  AgentProc a;
  AgentExec keep = make_exec(a, 20, {"sh", "-c", "sleep 300 & echo $!; wait"});
  AgentExec kill = make_exec(a, 21, {"sh", "-c", "sleep 301 & echo $!; wait"});
  a.send_control(encode_exec(keep));
  a.send_control(encode_exec(kill));
  ASSERT_TRUE(a.pump_until([&] {
    return !a.chans[keep.ch_stdout].data.empty() && !a.chans[kill.ch_stdout].data.empty();
  }));
  pid_t kept = std::atoi(a.chans[keep.ch_stdout].data.c_str());
  pid_t killed = std::atoi(a.chans[kill.ch_stdout].data.c_str());
  a.send_control(encode_signal(21, AgentSignal::kCancel));
  const AgentControl* end = a.wait_end(21);
  ASSERT_NE(end, nullptr);
  EXPECT_TRUE(wait_gone(killed));
  EXPECT_FALSE(pid_gone(kept));
  EXPECT_EQ(a.find(AgentMsg::kDone, 20), nullptr);
  a.send_control(encode_signal(20, AgentSignal::kCancel));
  ASSERT_NE(a.wait_end(20), nullptr);
  EXPECT_TRUE(wait_gone(kept));
}

// As in the native backend: what a command left running ends with it.
TEST(AgentExec, NothingOutlivesTheMainProcess) {
  AgentProc a;
  AgentExec e = make_exec(a, 8, {"sh", "-c", "sleep 300 & echo $!; setsid sleep 301 & echo $!"});
  const AgentDone* done = a.run(e);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(done->end, AgentEnd::kExited);
  pid_t bg1 = 0, bg2 = 0;
  ASSERT_EQ(std::sscanf(a.chans[e.ch_stdout].data.c_str(), "%d %d", &bg1, &bg2), 2);
  EXPECT_TRUE(wait_gone(bg1));
  EXPECT_TRUE(wait_gone(bg2));
}

// A daemon that left its session is still its command's while another
// command runs (a terminal that stays open): the command's keeper inherits
// it, so it ends with the command.
TEST(AgentExec, NothingOutlivesTheMainProcessWhileAnotherCommandRuns) {
  AgentProc a;
  AgentExec other = make_exec(a, 30, {"sh", "-c", "sleep 300 & echo $!; wait"});
  a.send_control(encode_exec(other));
  ASSERT_TRUE(a.pump_until([&] { return !a.chans[other.ch_stdout].data.empty(); }));
  const pid_t other_bg = std::atoi(a.chans[other.ch_stdout].data.c_str());
  // The daemon says its own pid (setsid(1) forks when it leads a group),
  // then lets go of every stream of the command.
  AgentExec e = make_exec(
      a, 31, {"sh", "-c", "(setsid sh -c 'echo $$; exec sleep 301 >/dev/null 2>&1' &) | head -n1"});
  const AgentDone* done = a.run(e);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(done->end, AgentEnd::kExited);
  const pid_t daemon = std::atoi(a.chans[e.ch_stdout].data.c_str());
  ASSERT_GT(daemon, 1);
  EXPECT_TRUE(wait_gone(daemon));
  EXPECT_FALSE(pid_gone(other_bg));
  a.send_control(encode_signal(30, AgentSignal::kCancel));
  ASSERT_NE(a.wait_end(30), nullptr);
  EXPECT_TRUE(wait_gone(other_bg));
}

// A command that kills its keeper ends as killed, and what it started is
// swept by the agent; another command's processes are left alone.
TEST(AgentExec, ACommandThatKillsItsKeeperTakesOnlyItself) {
  AgentProc a;
  AgentExec other = make_exec(a, 32, {"sh", "-c", "sleep 300 & echo $!; wait"});
  a.send_control(encode_exec(other));
  ASSERT_TRUE(a.pump_until([&] { return !a.chans[other.ch_stdout].data.empty(); }));
  const pid_t other_bg = std::atoi(a.chans[other.ch_stdout].data.c_str());
  AgentExec e = make_exec(
      a, 33,
      {"sh", "-c",
       "(setsid sh -c 'echo $$; exec sleep 302 >/dev/null 2>&1' &) | head -n1; kill -9 $PPID"});
  const AgentDone* done = a.run(e);
  ASSERT_NE(done, nullptr);
  EXPECT_TRUE(WIFSIGNALED(done->wait_status));
  EXPECT_EQ(WTERMSIG(done->wait_status), SIGKILL);
  const pid_t bg = std::atoi(a.chans[e.ch_stdout].data.c_str());
  ASSERT_GT(bg, 1);
  EXPECT_TRUE(wait_gone(bg));
  EXPECT_FALSE(pid_gone(other_bg));
  a.send_control(encode_signal(32, AgentSignal::kCancel));
  ASSERT_NE(a.wait_end(32), nullptr);
}

// The keeper kills and reaps what a command left before it reaps the
// command: until then the command's pid (and its group's id) cannot be
// reused, so the agent's kill of that group never reaches a stranger. Seen
// from outside: once the command's /proc entry is gone, none of what it
// left is there any more, not even as a zombie.
TEST(AgentExec, TheCommandIsReapedAfterWhatItLeft) {
  AgentProc a;
  AgentExec e = make_exec(
      a, 35,
      {"sh", "-c",
       "p=; for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 "
       "30 31 32; do sleep 300 & p=\"$p $!\"; done; echo $p; read x"});
  e.ch_stdin = a.new_channel();
  a.send_control(encode_exec(e));
  ASSERT_TRUE(
      a.pump_until([&] { return a.chans[e.ch_stdout].data.find('\n') != std::string::npos; }));
  const AgentControl* started = a.find(AgentMsg::kStarted, 35);
  ASSERT_NE(started, nullptr);
  const std::string cmd_proc = "/proc/" + std::to_string(started->b);
  std::vector<pid_t> left;
  std::istringstream in(a.chans[e.ch_stdout].data);
  for (pid_t p = 0; in >> p;) left.push_back(p);
  ASSERT_EQ(left.size(), 32u);
  a.write(e.ch_stdin, "go\n");
  ASSERT_TRUE(a.pump_until([&] { return a.chans[e.ch_stdin].pending.empty(); }));
  // The command's entry goes when it is reaped: look as fast as we can.
  auto until = std::chrono::steady_clock::now() + 10s;
  while (::access(cmd_proc.c_str(), F_OK) == 0 && std::chrono::steady_clock::now() < until) {
  }
  std::size_t still_there = 0;
  for (pid_t p : left) still_there += ::access(("/proc/" + std::to_string(p)).c_str(), F_OK) == 0;
  EXPECT_EQ(still_there, 0u) << "the command was reaped before what it left";
  const AgentDone* done = a.wait_done(35);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(WEXITSTATUS(done->wait_status), 0);
  for (pid_t p : left) EXPECT_TRUE(wait_gone(p));
}

// kStarted names the command (its shell's $$), not its keeper; a signal
// that kills the command is the exec's wait status.
TEST(AgentExec, StartedPidIsTheCommandsAndItsSignalIsTheStatus) {
  AgentProc a;
  AgentExec e = make_exec(a, 34, {"sh", "-c", "echo $$; kill -TERM $$"});
  const AgentDone* done = a.run(e);
  ASSERT_NE(done, nullptr);
  const AgentControl* started = a.find(AgentMsg::kStarted, 34);
  ASSERT_NE(started, nullptr);
  EXPECT_EQ(static_cast<pid_t>(started->b), std::atoi(a.chans[e.ch_stdout].data.c_str()));
  EXPECT_TRUE(WIFSIGNALED(done->wait_status));
  EXPECT_EQ(WTERMSIG(done->wait_status), SIGTERM);
}

TEST(AgentExec, InterruptReachesTheMainProcess) {
  AgentProc a;
  AgentExec e = make_exec(
      a, 9,
      {"bash", "-c", "trap 'echo got-int; exit 5' INT; echo ready; while :; do sleep 0.05; done"});
  a.send_control(encode_exec(e));
  ASSERT_TRUE(a.pump_until([&] { return a.chans[e.ch_stdout].data == "ready\n"; }));
  a.send_control(encode_signal(9, AgentSignal::kInterrupt));
  const AgentDone* done = a.wait_done(9);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(a.chans[e.ch_stdout].data, "ready\ngot-int\n");
  EXPECT_EQ(WEXITSTATUS(done->wait_status), 5);
  EXPECT_EQ(done->end, AgentEnd::kExited);
}

TEST(AgentExec, MissingProgramIsExecveEnoent) {
  AgentProc a;
  AgentExec e = make_exec(a, 10, {"no-such-program-sandcastle"});
  a.send_control(encode_exec(e));
  const AgentControl* end = a.wait_end(10);
  ASSERT_NE(end, nullptr);
  ASSERT_EQ(end->kind, AgentMsg::kExecFailed);
  EXPECT_EQ(end->failure->err, ENOENT);
  EXPECT_EQ(end->failure->step, "execve");
  EXPECT_EQ(a.find(AgentMsg::kStarted, 10), nullptr);
  // The agent goes on serving.
  AgentExec again = make_exec(a, 11, {"/bin/true"});
  again.cwd = "/no/such/dir";
  a.send_control(encode_exec(again));
  end = a.wait_end(11);
  ASSERT_NE(end, nullptr);
  ASSERT_EQ(end->kind, AgentMsg::kExecFailed);
  EXPECT_EQ(end->failure->err, ENOENT);
  EXPECT_EQ(end->failure->step, "chdir");
}

TEST(AgentExec, RlimitsAreApplied) {
  AgentProc a;
  AgentExec e = make_exec(a, 12, {"bash", "-c", "ulimit -n; ulimit -f; ulimit -c"});
  e.rlimit_nofile = 77;
  e.rlimit_fsize = 1024 * 1024;
  const AgentDone* done = a.run(e);
  ASSERT_NE(done, nullptr);
  // bash's ulimit -f counts 1024-byte blocks.
  EXPECT_EQ(a.chans[e.ch_stdout].data, "77\n1024\n0\n");
}

TEST(AgentExec, OnlyFdsZeroToTwoAreOpenAndSignalsAreReset) {
  AgentProc a;
  AgentExec e =
      make_exec(a, 13, {"sh", "-c", "ls /proc/self/fd; grep -E '^Sig(Blk|Ign)' /proc/self/status"});
  const AgentDone* done = a.run(e);
  ASSERT_NE(done, nullptr);
  // 0-2 and ls's own directory fd (3).
  EXPECT_EQ(a.chans[e.ch_stdout].data,
            "0\n1\n2\n3\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
}

TEST(AgentExec, StreamEofKillsEveryCommandAndTheAgentLeaves) {
  AgentProc a;
  AgentExec e = make_exec(a, 14, {"sleep", "300"});
  a.send_control(encode_exec(e));
  ASSERT_TRUE(a.pump_until([&] { return a.find(AgentMsg::kStarted, 14) != nullptr; }));
  pid_t pid = static_cast<pid_t>(a.find(AgentMsg::kStarted, 14)->b);
  a.close_stream();
  int st = a.wait_exit();
  EXPECT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  EXPECT_TRUE(wait_gone(pid));
}

}  // namespace
}  // namespace sandcastle::sandbox::engine::agent_test
