// sandcastle-agent after review (issue 17): the environment bash would give
// a command, every channel closed towards the server, a drain that cannot
// wait for ever, an agent that other programs of its uid cannot write
// through, and an install listener only the install's own session can use.
#include <arpa/inet.h>
#include <linux/landlock.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>

#include "agent_harness.h"

namespace sandcastle::sandbox::engine::agent_test {
namespace {

constexpr uid_t kNobody = 65534;

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(AgentHardening, ShellEnvAddsPwdShlvlAndTheExecutedPath) {
  AgentProc a;
  AgentExec e = make_exec(a, 1, {"env"});
  // The first PATH entry has no env: _ names the candidate that ran.
  e.env = {"PATH=/no/such/dir:/usr/bin:/bin", "LANG=C"};
  e.cwd = "/usr/../tmp";
  e.shell_env = true;
  const AgentDone* done = a.run(e);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(lines_of(a.chans[e.ch_stdout].data),
            (std::vector<std::string>{"PATH=/no/such/dir:/usr/bin:/bin", "LANG=C", "PWD=/tmp",
                                      "SHLVL=0", "_=/usr/bin/env"}));
  // Without it: the request's environment and nothing else.
  AgentExec plain = make_exec(a, 2, {"env"});
  plain.env = e.env;
  a.send_control(encode_exec(plain));
  ASSERT_NE(a.wait_end(2), nullptr);
  EXPECT_EQ(lines_of(a.chans[plain.ch_stdout].data),
            (std::vector<std::string>{"PATH=/no/such/dir:/usr/bin:/bin", "LANG=C"}));
}

// Every channel the server named is closed back (outputs: EOF first), so
// the server can release its end; all of it before the exec's last message.
void expect_closed_before(AgentProc& a, const AgentExec& e, const std::string& last) {
  const std::size_t at = a.event_index(last);
  ASSERT_LT(at, a.events.size()) << last;
  for (std::uint32_t ch : {e.ch_stdin, e.ch_stdout, e.ch_stderr, e.ch_fd3}) {
    if (ch == 0) continue;
    EXPECT_LT(a.event_index("close:" + std::to_string(ch)), at) << "channel " << ch;
    if (ch != e.ch_stdin) {
      EXPECT_LT(a.event_index("eof:" + std::to_string(ch)), at) << "channel " << ch;
    }
  }
}

TEST(AgentHardening, ChannelsOfAFailedExecAreClosed) {
  AgentProc a;
  AgentExec e = make_exec(a, 3, {"/no/such/program"});
  e.ch_stdin = a.new_channel();
  e.ch_fd3 = a.new_channel();
  a.send_control(encode_exec(e));
  const AgentControl* end = a.wait_end(3);
  ASSERT_NE(end, nullptr);
  ASSERT_EQ(end->kind, AgentMsg::kExecFailed);
  EXPECT_EQ(end->failure->err, ENOENT);
  expect_closed_before(a, e, "ctl:4:3");
  // Refused before any descriptor was made: the same.
  AgentExec bad = make_exec(a, 4, {"echo", std::string("a\0b", 3)});
  bad.ch_stdin = a.new_channel();
  a.send_control(encode_exec(bad));
  end = a.wait_end(4);
  ASSERT_NE(end, nullptr);
  ASSERT_EQ(end->kind, AgentMsg::kExecFailed);
  EXPECT_EQ(end->failure->err, EINVAL);
  expect_closed_before(a, bad, "ctl:4:4");
}

// Out of descriptors half way: stdin's pipe was made, stdout's was not.
TEST(AgentHardening, ChannelsOfAnExecOutOfDescriptorsAreClosed) {
  AgentProc a({.nofile = 7});  // 0-2, the signalfd, stdin's pipe: 6 is the last
  AgentExec e = make_exec(a, 5, {"true"});
  e.ch_stdin = a.new_channel();
  a.send_control(encode_exec(e));
  const AgentControl* end = a.wait_end(5);
  ASSERT_NE(end, nullptr);
  ASSERT_EQ(end->kind, AgentMsg::kExecFailed);
  EXPECT_EQ(end->failure->err, EMFILE);
  EXPECT_EQ(end->failure->step, "pipe");
  expect_closed_before(a, e, "ctl:4:5");
}

TEST(AgentHardening, AFailedFilesSessionClosesItsChannel) {
  AgentProc a({.nofile = 5});  // no room for the worker's socketpair
  std::uint32_t ch = a.new_channel();
  a.send_control(encode_files(ch, 0));
  const AgentControl* end = a.wait_end(ch);
  ASSERT_NE(end, nullptr);
  ASSERT_EQ(end->kind, AgentMsg::kExecFailed);
  EXPECT_EQ(end->failure->err, EMFILE);
  const std::size_t at = a.event_index("ctl:4:" + std::to_string(ch));
  EXPECT_LT(a.event_index("eof:" + std::to_string(ch)), at);
  EXPECT_LT(a.event_index("close:" + std::to_string(ch)), at);
}

// A stdin the server ended, and outputs at their EOF: closed too.
TEST(AgentHardening, EveryChannelOfAFinishedExecIsClosed) {
  AgentProc a;
  AgentExec e = make_exec(a, 6, {"cat"});
  e.ch_stdin = a.new_channel();
  a.send_control(encode_exec(e));
  a.write(e.ch_stdin, "through\n");
  a.close_write(e.ch_stdin);
  const AgentDone* done = a.wait_done(6);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(a.chans[e.ch_stdout].data, "through\n");
  // Those with data once the server has credited all of it: maybe after
  // kDone (which does not wait for it).
  EXPECT_TRUE(a.pump_until([&] {
    return a.chans[e.ch_stdin].closed && a.chans[e.ch_stdout].closed && a.chans[e.ch_stderr].closed;
  }));
  EXPECT_TRUE(a.chans[e.ch_stdout].eof);
  EXPECT_TRUE(a.chans[e.ch_stderr].eof);
}

// The command exited with output in its pipe and the server never gives
// credit: after a few seconds the channel is closed and kDone sent anyway.
TEST(AgentHardening, ADrainWithoutCreditEndsInSeconds) {
  AgentProc a;
  AgentExec e = make_exec(a, 7, {"head", "-c", "300000", "/dev/zero"});
  a.chans[e.ch_stdout].hold_credit = true;
  const AgentDone* done = a.run(e, 15s);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(WEXITSTATUS(done->wait_status), 0);
  EXPECT_EQ(a.chans[e.ch_stdout].data.size(), kWindow);
  expect_closed_before(a, e, "ctl:5:7");
}

uid_t owner_of(pid_t pid) {
  struct stat st {};
  // /proc/PID/fd: owned by root when PID is not dumpable (/proc/PID itself
  // keeps the euid).
  if (::stat(("/proc/" + std::to_string(pid) + "/fd").c_str(), &st) != 0)
    return static_cast<uid_t>(-1);
  return st.st_uid;
}

// A process of the agent's uid opens /proc/<agent>/fd/1 for writing; its
// errno (0: it could).
int open_as(uid_t uid, const std::string& path) {
  int p[2];
  if (::pipe(p) != 0) return -1;
  pid_t child = ::fork();
  if (child == 0) {
    int err = 0;
    if (::setresgid(uid, uid, uid) != 0 || ::setresuid(uid, uid, uid) != 0) {
      err = -2;
    } else if (int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC); fd < 0) {
      err = errno;
    }
    (void)!::write(p[1], &err, sizeof err);
    _exit(0);
  }
  ::close(p[1]);
  int err = -1;
  if (::read(p[0], &err, sizeof err) != sizeof err) err = -1;
  ::close(p[0]);
  ::waitpid(child, nullptr, 0);
  return err;
}

TEST(AgentHardening, TheAgentsStreamIsOutOfReachOfItsCommands) {
  AgentProc a({.uid = kNobody});
  const pid_t agent = static_cast<pid_t>(a.hello.b);
  // Through the agent, as the sandbox would try it.
  AgentExec e = make_exec(a, 8,
                          {"sh", "-c",
                           "echo frame >/proc/$PPID/fd/1 && echo wrote; "
                           "stat -c %u /proc/$$"});
  const AgentDone* done = a.run(e);
  ASSERT_NE(done, nullptr);
  EXPECT_NE(a.chans[e.ch_stderr].data.find("Permission denied"), std::string::npos)
      << a.chans[e.ch_stderr].data;
  // The command itself is dumpable again (its /proc entries are its own).
  EXPECT_EQ(a.chans[e.ch_stdout].data, std::to_string(kNobody) + "\n");
  // The exact errno, from another process of the same uid.
  EXPECT_EQ(open_as(kNobody, "/proc/" + std::to_string(agent) + "/fd/1"), EACCES);
  EXPECT_EQ(owner_of(agent), 0u);
  // The file worker (forked, never execs) stays so.
  std::uint32_t ch = a.new_channel();
  a.send_control(encode_files(ch, 0));
  pid_t worker = -1;
  ASSERT_TRUE(a.pump_until([&] {
    std::ifstream f("/proc/" + std::to_string(agent) + "/task/" + std::to_string(agent) +
                    "/children");
    return static_cast<bool>(f >> worker);
  }));
  EXPECT_EQ(owner_of(worker), 0u);
  EXPECT_EQ(open_as(kNobody, "/proc/" + std::to_string(worker) + "/fd/3"), EACCES);
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

std::size_t accepted_count(const AgentProc& a) {
  std::size_t n = 0;
  for (const auto& c : a.controls)
    if (c.kind == AgentMsg::kAccepted) ++n;
  return n;
}

// Only the exec's own session may use its listener. In namespaces of its
// own (own_net.h) nothing outside the command even reaches it: this test
// process is refused at connect; else it is cut off at once (EOF or reset,
// no hang). A command of another exec: the same. A process of the exec's
// own that left its session (setsid): cut off by the session check.
TEST(AgentHardening, TheListenerServesOnlyItsOwnSession) {
  AgentProc a;
  const bool own_net = own_netns_available();
  const std::uint16_t port = free_port();
  const std::string tcp = "/dev/tcp/127.0.0.1/" + std::to_string(port);
  AgentExec e = make_exec(
      a, 9,
      {"bash", "-c",
       "read -r go; setsid -w bash -c '(exec 3<>" + tcp + " && cat <&3); echo left'; exec 3<>" +
           tcp + "; echo hi >&3; read -r l <&3; echo \"$l\""});
  e.ch_stdin = a.new_channel();
  e.listen_port = port;
  a.send_control(encode_exec(e));
  ASSERT_TRUE(a.pump_until([&] { return a.find(AgentMsg::kStarted, 9) != nullptr; }));

  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in addr {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int c = ::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  if (own_net) {
    EXPECT_EQ(c, -1);
    EXPECT_EQ(errno, ECONNREFUSED);
  } else {
    ASSERT_EQ(c, 0);
    (void)!::write(s, "GET / HTTP/1.0\r\n\r\n", 18);
    ssize_t got = 1;
    int got_errno = 0;
    EXPECT_TRUE(a.pump_until([&] {
      struct pollfd p {
        s, POLLIN, 0
      };
      if (::poll(&p, 1, 0) != 1) return false;
      char ch;
      got = ::recv(s, &ch, 1, 0);
      got_errno = errno;
      return true;
    }));
    EXPECT_TRUE(got == 0 || (got < 0 && got_errno == ECONNRESET)) << got << " " << got_errno;
  }
  ::close(s);

  AgentExec other =
      make_exec(a, 10, {"bash", "-c", "(exec 3<>" + tcp + " && cat <&3); echo ended"});
  a.send_control(encode_exec(other));
  const AgentControl* end = a.wait_end(10);
  ASSERT_NE(end, nullptr);
  EXPECT_EQ(a.chans[other.ch_stdout].data, "ended\n");
  EXPECT_EQ(accepted_count(a), 0u);

  a.write(e.ch_stdin, "go\n");
  ASSERT_TRUE(a.pump_until([&] { return accepted_count(a) == 1; }));
  std::uint32_t ch = 0;
  for (const auto& m : a.controls)
    if (m.kind == AgentMsg::kAccepted) ch = m.b;
  ASSERT_TRUE(a.pump_until([&] { return a.chans[ch].data == "hi\n"; }));
  a.write(ch, "back\n");
  end = a.wait_end(9);
  ASSERT_NE(end, nullptr);
  ASSERT_EQ(end->kind, AgentMsg::kDone);
  EXPECT_EQ(a.chans[e.ch_stdout].data, "left\nback\n");
  EXPECT_EQ(accepted_count(a), 1u);
}

bool landlock_available() {
  struct landlock_ruleset_attr attr {};
  attr.handled_access_fs = LANDLOCK_ACCESS_FS_MAKE_BLOCK;
  long fd = syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0U);
  if (fd < 0) return false;
  ::close(static_cast<int>(fd));
  return true;
}

// Each command in a Landlock domain of its own: one exec cannot read
// another's /proc/<pid>/environ (ptrace-class access), though both run as
// one uid; its own children it can.
TEST(AgentHardening, OneCommandCannotReachIntoAnother) {
  if (!landlock_available()) GTEST_SKIP() << "no Landlock in this kernel";
  AgentProc a({.uid = kNobody});
  AgentExec victim = make_exec(a, 11, {"sleep", "30"});
  victim.env.push_back("SECRET=s3");
  a.send_control(encode_exec(victim));
  ASSERT_TRUE(a.pump_until([&] { return a.find(AgentMsg::kStarted, 11) != nullptr; }));
  const std::string pid = std::to_string(a.find(AgentMsg::kStarted, 11)->b);
  AgentExec probe = make_exec(a, 12,
                              {"sh", "-c",
                               // Its own child's environment (a forked shell: no execve
                               // to race with): readable.
                               "{ sleep 5; :; } & tr '\\0' '\\n' </proc/$!/environ | grep -c PATH; "
                               "cat /proc/" +
                                   pid + "/environ; echo \"status $?\""});
  const AgentDone* done = a.run(probe);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(a.chans[probe.ch_stdout].data, "1\nstatus 1\n") << a.chans[probe.ch_stderr].data;
  EXPECT_NE(a.chans[probe.ch_stderr].data.find("Permission denied"), std::string::npos)
      << a.chans[probe.ch_stderr].data;
  a.send_control(encode_signal(11, AgentSignal::kCancel));
  ASSERT_NE(a.wait_end(11), nullptr);
}

}  // namespace
}  // namespace sandcastle::sandbox::engine::agent_test
