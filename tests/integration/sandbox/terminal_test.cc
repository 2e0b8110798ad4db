// Issue 18: an interactive shell on a pty inside a native sandbox. Real
// sandboxes, real ptys: what the shell answers on its tty, resize, Ctrl-C,
// its exit code, the per-sandbox cap, the end with the sandbox, and the
// server refusing a descriptor from the sandbox that is no pty master.
#include "sandbox/native/terminal.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>

#include "../terminal_io.h"
#include "fixture.h"
#include "sandbox/native/fd_passing.h"
#include "sandbox/native/fs_util.h"
#include "sandbox/native/mounts.h"
#include "sandbox/native/native_sandbox.h"
#include "sandbox/native/wire.h"

namespace sandcastle::sandbox::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class TerminalTest : public SandboxTest {
 protected:
  std::unique_ptr<Terminal> open(TerminalRequest req = {}) {
    auto t = sb_->open_terminal(req);
    EXPECT_TRUE(t.ok()) << t.error().message();
    return t.ok() ? std::move(*t) : nullptr;
  }
};

TEST_F(TerminalTest, ShellAnswersOnItsOwnPtyAsTheSandboxUser) {
  auto uid = run({"id", "-u"});
  std::string want_uid = uid.stdout_data.substr(0, uid.stdout_data.find('\n'));
  auto t = open();
  ASSERT_TRUE(t);
  // The quotes keep the typed line (the tty echoes it) from matching.
  type(*t, "echo A$(tty)A; echo U$(id -u)U; echo T${TERM}T\n");
  std::string out;
  EXPECT_TRUE(read_until(*t, out, std::regex("T[a-z0-9-]+T"))) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("A/dev/pts/[0-9]+A"))) << out;
  EXPECT_NE(out.find("U" + want_uid + "U"), std::string::npos) << out;
  EXPECT_NE(out.find("Txterm-256colorT"), std::string::npos) << out;
}

// The shell is a command like any other: no capabilities, the sandbox's
// seccomp filter, which refuses TIOCSTI (typing into a terminal) whatever
// dev.tty.legacy_tiocsti says.
TEST_F(TerminalTest, ShellHasNoCapabilitiesAndCannotTypeIntoItsTty) {
  auto t = open();
  ASSERT_TRUE(t);
  type(*t,
       "grep CapEff /proc/self/status; /usr/bin/python3 -c \"import fcntl,termios; "
       "fcntl.ioctl(0, termios.TIOCSTI, b'x')\" 2>&1 | tail -1\n");
  std::string out;
  ASSERT_TRUE(read_until(*t, out, std::regex("Error: .*\r\n"))) << out;
  EXPECT_NE(out.find("CapEff:\t0000000000000000"), std::string::npos) << out;
  EXPECT_NE(out.find("PermissionError: [Errno 1] Operation not permitted"), std::string::npos)
      << out;
}

// A step after the pty (chdir, execve) that fails makes the open fail with
// that step and its errno, not a terminal that ends at once with 137.
TEST_F(TerminalTest, AMissingCwdOrProgramFailsTheOpenWithItsErrno) {
  TerminalRequest bad_cwd;
  bad_cwd.cwd = "/no/such/dir";
  auto a = sb_->open_terminal(bad_cwd);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().code, ErrorCode::kSystem) << a.error().message();
  EXPECT_EQ(a.error().sys_errno, ENOENT) << a.error().message();
  EXPECT_NE(a.error().message().find("chdir /no/such/dir"), std::string::npos)
      << a.error().message();
  TerminalRequest bad_prog;
  bad_prog.argv = {"/no/such/shell"};
  auto b = sb_->open_terminal(bad_prog);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().code, ErrorCode::kSystem) << b.error().message();
  EXPECT_EQ(b.error().sys_errno, ENOENT) << b.error().message();
  EXPECT_NE(b.error().message().find("execve /no/such/shell"), std::string::npos)
      << b.error().message();
  // The failed opens gave their slots back.
  for (int i = 0; i < kMaxTerminalsPerSandbox; ++i) {
    auto t = open();
    ASSERT_TRUE(t);
  }
}

TEST_F(TerminalTest, ResizeReachesTheShell) {
  auto t = open(sized(80, 24));
  ASSERT_TRUE(t);
  std::string out;
  type(*t, "echo S$(stty size)S\n");
  ASSERT_TRUE(read_until(*t, out, std::regex("S24 80S"))) << out;
  ASSERT_TRUE(t->resize(132, 43).ok());
  type(*t, "echo S$(stty size)S\n");
  EXPECT_TRUE(read_until(*t, out, std::regex("S43 132S"))) << out;
  EXPECT_EQ(t->resize(0, 10).error().code, ErrorCode::kInvalidArgument);
}

TEST_F(TerminalTest, CtrlCInterruptsTheForegroundCommand) {
  auto t = open();
  ASSERT_TRUE(t);
  std::string out;
  type(*t, "sh -c 'echo RE\"\"ADY; exec sleep 100'\n");
  ASSERT_TRUE(read_until(*t, out, std::regex("READY\r\n"))) << out;
  auto start = Clock::now();
  type(*t, "\x03");
  type(*t, "echo after=$?\n");
  EXPECT_TRUE(read_until(*t, out, std::regex("after=130"))) << out;
  EXPECT_LT(Clock::now() - start, 10s);
}

TEST_F(TerminalTest, ExitCodeIsReportedAfterTheOutput) {
  auto t = open();
  ASSERT_TRUE(t);
  type(*t, "echo bye-bye; exit 3\n");
  std::string out;
  auto code = wait_end(*t, out);
  ASSERT_TRUE(code.has_value()) << out;
  EXPECT_EQ(*code, 3);
  EXPECT_NE(out.find("bye-bye\r\n"), std::string::npos) << out;
  EXPECT_FALSE(t->write("x").ok());
  // Ended and read: the descriptor no longer wakes an event loop.
  struct pollfd p = {t->fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0);
}

// The output is bounded by its reader: a shell whose output nobody reads
// waits in its write (the server holds nothing), and none of it is lost.
TEST_F(TerminalTest, AShellNobodyReadsWaitsAndLosesNothing) {
  auto t = open();
  ASSERT_TRUE(t);
  std::string out;
  type(*t, "echo O\"\"K\n");
  ASSERT_TRUE(read_until(*t, out, std::regex("OK\r\n")));
  constexpr long long kBytes = 4 << 20;
  type(*t, "head -c " + std::to_string(kBytes) + " /dev/zero | tr '\\0' x; echo; echo D\"\"ONE\n");
  // Not read: the writer is still there, asleep in its write to the full pty
  // (seen from the host: another exec lists only its own processes; until a
  // deadline).
  auto* native = dynamic_cast<native::NativeSandbox*>(sb_.get());
  ASSERT_NE(native, nullptr);
  auto deadline = Clock::now() + 10s;
  std::string state;
  do {
    state.clear();
    for (pid_t p : host_descendants(native->init_pid()))
      if (host_comm(p) == "tr") state += std::string(1, host_state(p)) + "\n";
  } while (state.rfind('S', 0) != 0 && Clock::now() < deadline);
  EXPECT_EQ(state.substr(0, 1), "S") << state;
  EXPECT_EQ(std::count(state.begin(), state.end(), '\n'), 1) << state;
  EXPECT_GE(count_until(*t, 'x', "DONE\r\n"), kBytes);
}

TEST_F(TerminalTest, KillEndsTheShell) {
  auto t = open();
  ASSERT_TRUE(t);
  std::string out;
  type(*t, "echo O\"\"K\n");
  ASSERT_TRUE(read_until(*t, out, std::regex("OK\r\n")));
  t->kill();
  auto code = wait_end(*t, out);
  ASSERT_TRUE(code.has_value()) << out;
  EXPECT_EQ(*code, 128 + SIGKILL);
}

TEST_F(TerminalTest, FifthTerminalIsRefusedUntilOneCloses) {
  std::vector<std::unique_ptr<Terminal>> open_ones;
  for (int i = 0; i < kMaxTerminalsPerSandbox; ++i) {
    open_ones.push_back(open());
    ASSERT_TRUE(open_ones.back());
  }
  auto fifth = sb_->open_terminal({});
  ASSERT_FALSE(fifth.ok());
  EXPECT_EQ(fifth.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(fifth.error().message().find("4 terminals"), std::string::npos)
      << fifth.error().message();
  open_ones.pop_back();
  auto again = sb_->open_terminal({});
  EXPECT_TRUE(again.ok()) << again.error().message();
}

// The sandbox's devpts has a max= of its own: the host's kernel.pty.max is
// shared by every tenant.
TEST_F(TerminalTest, ASandboxOpensAtMostItsShareOfPtys) {
  auto r =
      run({"/usr/bin/python3", "-c",
           "import os, errno\n"
           "fds = []\n"
           "try:\n"
           "    for i in range(1000): fds.append(os.open('/dev/ptmx', os.O_RDWR | os.O_NOCTTY))\n"
           "except OSError as e: print(len(fds), errno.errorcode[e.errno])\n"});
  EXPECT_EQ(r.stdout_data, std::to_string(native::kMaxPtysPerSandbox) + " ENOSPC\n")
      << r.stderr_data;
}

TEST_F(TerminalTest, DestroyingTheSandboxEndsItsTerminal) {
  auto t = open();
  ASSERT_TRUE(t);
  std::string out;
  type(*t, "echo O\"\"K\n");
  ASSERT_TRUE(read_until(*t, out, std::regex("OK\r\n")));
  ASSERT_TRUE(sb_->destroy().ok());
  auto code = wait_end(*t, out);
  ASSERT_TRUE(code.has_value()) << out;
  EXPECT_EQ(*code, 128 + SIGKILL);
  EXPECT_FALSE(sb_->open_terminal({}).ok());
}

TEST_F(TerminalTest, DestroyingTheTerminalKillsWhatTheShellStarted) {
  // The event to wait on: a FIFO both processes hold open for writing; its
  // reader, in a second terminal, sees EOF when the last of them is gone.
  ASSERT_EQ(sh("mkfifo /tmp/held").exit_code, 0);
  auto watch = open();
  ASSERT_TRUE(watch);
  std::string wout;
  type(*watch, "cat /tmp/held; echo GO\"\"NE\n");
  auto t = open();
  ASSERT_TRUE(t);
  std::string out;
  // A background process of the shell's, and one that left its session.
  type(*t,
       "sh -c 'echo A\"\"1; exec sleep 1000' 3>/tmp/held & "
       "setsid sh -c 'echo B\"\"1; exec sleep 1001' 3>/tmp/held &\n");
  ASSERT_TRUE(read_until(*t, out, std::regex("A1\r\n[\\s\\S]*B1\r\n|B1\r\n[\\s\\S]*A1\r\n")))
      << out;
  EXPECT_FALSE(read_until(*watch, wout, std::regex("GONE\r\n"), 200ms)) << wout;
  t.reset();
  EXPECT_TRUE(read_until(*watch, wout, std::regex("GONE\r\n"))) << wout;
  // None is left (seen from the host: another exec lists only its own).
  // GONE came as they closed their files on the way out; their supervisor
  // reaps them a moment later (until a deadline).
  auto* native = dynamic_cast<native::NativeSandbox*>(sb_.get());
  ASSERT_NE(native, nullptr);
  auto sleeps = [&] {
    std::string left;
    for (pid_t p : host_descendants(native->init_pid()))
      if (host_comm(p) == "sleep") left += std::to_string(p) + ":" + host_state(p) + " ";
    return left;
  };
  const auto deadline = Clock::now() + 10s;
  while (!sleeps().empty() && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(sleeps(), "");
}

// Host pids of the processes in the user namespace of host pid `pid` that
// hold a pty master (a descriptor on a ptmx), by a scan of the host's /proc.
std::vector<std::string> holders_of_a_master(const std::string& pid) {
  std::vector<std::string> found;
  auto link = [](const std::string& p) {
    char buf[256];
    ssize_t n = ::readlink(p.c_str(), buf, sizeof buf);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
  };
  const std::string userns = link("/proc/" + pid + "/ns/user");
  if (userns.empty()) return {"(no such process " + pid + ")"};
  if (userns == link("/proc/self/ns/user"))
    return {"(the sandbox shares the host's user namespace)"};
  for (const auto& proc : std::filesystem::directory_iterator("/proc")) {
    const std::string name = proc.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (link("/proc/" + name + "/ns/user") != userns) continue;
    std::error_code ec;
    for (const auto& fd : std::filesystem::directory_iterator("/proc/" + name + "/fd", ec)) {
      const std::string target = link(fd.path());
      if (target.size() >= 4 && target.compare(target.size() - 4, 4, "ptmx") == 0)
        found.push_back(name + " " + fd.path().filename().string() + " -> " + target);
    }
    if (ec) found.push_back(name + ": " + ec.message());
  }
  return found;
}

// terminal.h: the server's master is the only open description of it; no
// process of the sandbox (the shell, its supervisor, init) keeps one.
TEST_F(TerminalTest, NoProcessOfTheSandboxHoldsAMaster) {
  if (::geteuid() != 0) GTEST_SKIP() << "reads the supervisor's /proc/<pid>/fd: needs root";
  const std::string tag = "sc-holder-" + std::to_string(::getpid());
  TerminalRequest req;
  req.argv = {"/bin/sh", "-c", "echo RE\"\"ADY; sleep 1000; :", tag};
  auto t = open(req);
  ASSERT_TRUE(t);
  std::string out;
  ASSERT_TRUE(read_until(*t, out, std::regex("READY\r\n"))) << out;
  // The shell's host pid: the process whose argv carries the tag.
  // (Read with plain read(2): a process that exits meanwhile reads as empty,
  // where an istreambuf_iterator throws on its ESRCH.)
  std::string shell;
  for (pid_t pid : proc_pids()) {
    const std::string cmdline =
        native::read_small_file("/proc/" + std::to_string(pid) + "/cmdline");
    if (cmdline.find(tag) != std::string::npos) shell = std::to_string(pid);
  }
  ASSERT_FALSE(shell.empty());
  // The supervisor closes its copy just after sending it: allow it that.
  auto deadline = Clock::now() + 5s;
  std::vector<std::string> held;
  do {
    held = holders_of_a_master(shell);
  } while (!held.empty() && Clock::now() < deadline);
  EXPECT_TRUE(held.empty()) << ::testing::PrintToString(held);
}

TEST_F(TerminalTest, ShellSeesTheSandboxNotTheHost) {
  const std::string marker = "/tmp/sandcastle-terminal-host-" + std::to_string(::getpid());
  { std::ofstream(marker) << "host"; }
  auto t = open();
  ASSERT_TRUE(t);
  std::string out;
  type(*t, "ls " + marker +
               " >/dev/null 2>&1; echo M$?M; echo P$(ls /proc | grep -c '^[0-9]')P; echo "
               "H$(hostname)H\n");
  ASSERT_TRUE(read_until(*t, out, std::regex("H[^H\r\n$()]+H"))) << out;
  ::unlink(marker.c_str());
  EXPECT_NE(out.find("M2M"), std::string::npos) << out;  // not found in the sandbox's /tmp
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("P([0-9]+)P"))) << out;
  EXPECT_LT(std::stoi(m[1]), 20) << "the sandbox's /proc shows the host's processes: " << out;
  EXPECT_NE(out.find("H" + sb_->spec().hostname() + "H"), std::string::npos) << out;
}

// The hostile side: what arrives on a terminal's report socket crossed from
// the sandbox. Only a pty master is taken; anything else is refused and
// closed, never used.
class TerminalReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int sp[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
    ours_.reset(sp[0]);
    theirs_.reset(sp[1]);
  }
  void send_report(native::ReportKind kind, std::vector<int> fds) {
    native::ExecReport rep;
    rep.kind = kind;
    ASSERT_EQ(native::send_with_fds(theirs_.get(), native::encode(rep), fds.data(),
                                    static_cast<int>(fds.size())),
              0);
  }
  Result<UniqueFd> receive() { return native::receive_terminal_master(ours_.get(), 2s); }
  UniqueFd ours_, theirs_;
};

TEST_F(TerminalReportTest, APipeInsteadOfTheMasterIsRefusedAndClosed) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  UniqueFd r(p[0]), w(p[1]);
  send_report(native::ReportKind::kTerminal, {r.get()});
  r.reset();
  auto got = receive();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, ErrorCode::kInternal);
  EXPECT_NE(got.error().message().find("no pty master"), std::string::npos)
      << got.error().message();
  // The server kept no copy of the read end: the pipe has no reader left.
  (void)::signal(SIGPIPE, SIG_IGN);
  EXPECT_EQ(::write(w.get(), "x", 1), -1);
  EXPECT_EQ(errno, EPIPE);
}

TEST_F(TerminalReportTest, OtherDescriptorsAreRefused) {
  UniqueFd master(::open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC));
  ASSERT_TRUE(master);
  int unlock = 0;
  ASSERT_EQ(::ioctl(master.get(), TIOCSPTLCK, &unlock), 0);
  UniqueFd slave(::ioctl(master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
  ASSERT_TRUE(slave);
  UniqueFd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  UniqueFd ro_master(::open("/dev/ptmx", O_RDONLY | O_NOCTTY | O_CLOEXEC));
  EXPECT_TRUE(native::is_pty_master(master.get()));
  for (int fd : {slave.get(), null.get(), ro_master.get(), ours_.get()}) {
    EXPECT_FALSE(native::is_pty_master(fd));
    send_report(native::ReportKind::kTerminal, {fd});
    auto got = receive();
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.error().code, ErrorCode::kInternal) << got.error().message();
  }
  // A master, but with a second descriptor, or under another kind.
  send_report(native::ReportKind::kTerminal, {master.get(), master.get()});
  EXPECT_EQ(receive().error().code, ErrorCode::kInternal);
  send_report(native::ReportKind::kListener, {master.get()});
  EXPECT_EQ(receive().error().code, ErrorCode::kInternal);
  send_report(native::ReportKind::kTerminal, {});
  EXPECT_EQ(receive().error().code, ErrorCode::kInternal);
  // The real thing is taken, and made non-blocking.
  send_report(native::ReportKind::kTerminal, {master.get()});
  auto got = receive();
  ASSERT_TRUE(got.ok()) << got.error().message();
  EXPECT_TRUE(::fcntl(got->get(), F_GETFL) & O_NONBLOCK);
}

}  // namespace
}  // namespace sandcastle::sandbox::testing
