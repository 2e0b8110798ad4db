// Issue 18 on the engine backend: a shell on a pty the agent opens inside
// the container, relayed as a channel of the agent's stream. Real engines
// (the fixture's Podman and dockerd), a real pty.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <regex>

#include "../terminal_io.h"
#include "engine_fixture.h"
#include "sandbox/engine/engine_backend.h"

namespace sandcastle::sandbox::engine::testing {
namespace {

using namespace std::chrono_literals;
using sandbox::testing::count_until;
using sandbox::testing::read_until;
using sandbox::testing::sized;
using sandbox::testing::type;
using sandbox::testing::wait_end;

class EngineTerminalTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    engine_ = test_engine(GetParam(), &why);
    if (!engine_) GTEST_SKIP() << GetParam() << " cannot run here: " << why;
    EngineBackendOptions o;
    o.engine.url = engine_->url;
    o.agent_path = find_agent();
    o.pool_size = 0;
    auto b = EngineBackend::create(o);
    ASSERT_TRUE(b.ok()) << b.error().message();
    backend_ = std::move(*b);
    SpecOptions so;
    so.limits.memory_bytes = 256 * kMiB;
    so.limits.disk_bytes = 16 * kMiB;
    auto sb = backend_->create(*SandboxSpec::create(so));
    ASSERT_TRUE(sb.ok()) << sb.error().message();
    sb_ = std::move(*sb);
  }
  void TearDown() override {
    sb_.reset();
    if (backend_) backend_->shutdown();
  }
  std::unique_ptr<Terminal> open(TerminalRequest req = {}) {
    auto t = sb_->open_terminal(req);
    EXPECT_TRUE(t.ok()) << t.error().message();
    return t.ok() ? std::move(*t) : nullptr;
  }
  const TestEngine* engine_ = nullptr;
  std::unique_ptr<EngineBackend> backend_;
  std::unique_ptr<Sandbox> sb_;
};

TEST_P(EngineTerminalTest, ShellAnswersOnItsOwnPtyAsTheSandboxUser) {
  auto t = open();
  ASSERT_TRUE(t);
  type(*t, "echo A$(tty)A; echo U$(id -u)U; echo T${TERM}T\n");
  std::string out;
  EXPECT_TRUE(read_until(*t, out, std::regex("T[a-z0-9-]+T"))) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("A/dev/pts/[0-9]+A"))) << out;
  EXPECT_NE(out.find("U1000U"), std::string::npos) << out;
  EXPECT_NE(out.find("Txterm-256colorT"), std::string::npos) << out;
}

// The engines' default seccomp profiles allow TIOCSTI and this host's kernel
// does too (dev.tty.legacy_tiocsti=1): the terminal's command gets a filter
// of its own that refuses it, as the native backend's does.
TEST_P(EngineTerminalTest, ShellHasNoCapabilitiesAndCannotTypeIntoItsTty) {
  auto t = open();
  ASSERT_TRUE(t);
  type(*t,
       "grep CapEff /proc/self/status; python3 -c \"import fcntl,termios; "
       "fcntl.ioctl(0, termios.TIOCSTI, b'x')\" 2>&1 | tail -1\n");
  std::string out;
  ASSERT_TRUE(read_until(*t, out, std::regex("Error: .*\r\n"))) << out;
  EXPECT_NE(out.find("CapEff:\t0000000000000000"), std::string::npos) << out;
  EXPECT_NE(out.find("PermissionError: [Errno 1] Operation not permitted"), std::string::npos)
      << out;
}

// TIOCSETD (a line discipline is kernel code few use): refused too. N_TTY,
// the one the pty already has, would be accepted without the filter.
TEST_P(EngineTerminalTest, ShellCannotChangeItsLineDiscipline) {
  auto t = open();
  ASSERT_TRUE(t);
  type(*t,
       "python3 -c \"import fcntl,struct,termios; "
       "fcntl.ioctl(0, termios.TIOCSETD, struct.pack('i', 0)); print('LD''OK')\" 2>&1 | tail -1\n");
  std::string out;
  ASSERT_TRUE(read_until(*t, out, std::regex("(Error: |LDOK).*\r\n"))) << out;
  EXPECT_NE(out.find("PermissionError: [Errno 1] Operation not permitted"), std::string::npos)
      << out;
}

// A failed chdir or execve fails the open with its step and errno.
TEST_P(EngineTerminalTest, AMissingCwdOrProgramFailsTheOpenWithItsErrno) {
  TerminalRequest bad_cwd;
  bad_cwd.cwd = "/no/such/dir";
  auto a = sb_->open_terminal(bad_cwd);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().code, ErrorCode::kSystem) << a.error().message();
  EXPECT_EQ(a.error().sys_errno, ENOENT) << a.error().message();
  EXPECT_NE(a.error().message().find("terminal: chdir"), std::string::npos) << a.error().message();
  TerminalRequest bad_prog;
  bad_prog.argv = {"/no/such/shell"};
  auto b = sb_->open_terminal(bad_prog);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().code, ErrorCode::kSystem) << b.error().message();
  EXPECT_EQ(b.error().sys_errno, ENOENT) << b.error().message();
  EXPECT_NE(b.error().message().find("terminal: execve"), std::string::npos) << b.error().message();
}

TEST_P(EngineTerminalTest, ResizeCtrlCAndExitCode) {
  auto t = open(sized(80, 24));
  ASSERT_TRUE(t);
  std::string out;
  type(*t, "echo S$(stty size)S\n");
  ASSERT_TRUE(read_until(*t, out, std::regex("S24 80S"))) << out;
  ASSERT_TRUE(t->resize(132, 43).ok());
  // The resize is a control message, the next line data on the channel:
  // both on one stream, in order.
  type(*t, "echo S$(stty size)S\n");
  EXPECT_TRUE(read_until(*t, out, std::regex("S43 132S"))) << out;
  type(*t, "sh -c 'echo RE\"\"ADY; exec sleep 100'\n");
  ASSERT_TRUE(read_until(*t, out, std::regex("READY\r\n"))) << out;
  type(*t, "\x03");
  type(*t, "echo after=$?\n");
  EXPECT_TRUE(read_until(*t, out, std::regex("after=130"))) << out;
  type(*t, "exit 3\n");
  auto code = wait_end(*t, out);
  ASSERT_TRUE(code.has_value()) << out;
  EXPECT_EQ(*code, 3);
}

// A shell nobody reads waits at its pty: the agent's window per channel is
// all that is in flight, and none of the output is lost.
TEST_P(EngineTerminalTest, AShellNobodyReadsWaitsAndLosesNothing) {
  auto t = open();
  ASSERT_TRUE(t);
  std::string out;
  type(*t, "echo O\"\"K\n");
  ASSERT_TRUE(read_until(*t, out, std::regex("OK\r\n")));
  constexpr long long kBytes = 4 << 20;
  type(*t, "head -c " + std::to_string(kBytes) + " /dev/zero | tr '\\0' x; echo; echo D\"\"ONE\n");
  // Not read: the writer is still there, asleep in its write to the full pty
  // (seen from another exec, until a deadline).
  ExecRequest ps;
  ps.argv = {"sh", "-c", "ps -eo stat=,comm= | awk '$2 == \"tr\" { print $1 }'"};
  auto deadline = std::chrono::steady_clock::now() + 10s;
  std::string state;
  do {
    auto r = sb_->exec(ps);
    ASSERT_TRUE(r.ok()) << r.error().message();
    state = r->stdout_data;
  } while (state.rfind('S', 0) != 0 && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(state.substr(0, 1), "S") << state;
  EXPECT_EQ(std::count(state.begin(), state.end(), '\n'), 1) << state;
  EXPECT_GE(count_until(*t, 'x', "DONE\r\n"), kBytes);
}

// A NUL would cut the string the command gets: refused before the agent
// sees it, as exec does.
TEST_P(EngineTerminalTest, NulInArgvOrEnvIsRefused) {
  TerminalRequest a;
  a.argv = {"/bin/sh", std::string("-c\0x", 4)};
  auto ra = sb_->open_terminal(a);
  ASSERT_FALSE(ra.ok());
  EXPECT_EQ(ra.error().code, ErrorCode::kInvalidArgument) << ra.error().message();
  TerminalRequest e;
  e.env["FOO"] = std::string("a\0b", 3);
  auto re = sb_->open_terminal(e);
  ASSERT_FALSE(re.ok());
  EXPECT_EQ(re.error().code, ErrorCode::kInvalidArgument) << re.error().message();
  EXPECT_NE(re.error().message().find("NUL"), std::string::npos) << re.error().message();
}

TEST_P(EngineTerminalTest, FifthTerminalIsRefused) {
  std::vector<std::unique_ptr<Terminal>> open_ones;
  for (int i = 0; i < kMaxTerminalsPerSandbox; ++i) {
    open_ones.push_back(open());
    ASSERT_TRUE(open_ones.back());
  }
  auto fifth = sb_->open_terminal({});
  ASSERT_FALSE(fifth.ok());
  EXPECT_EQ(fifth.error().code, ErrorCode::kResourceExhausted);
  open_ones.pop_back();
  EXPECT_TRUE(sb_->open_terminal({}).ok());
}

TEST_P(EngineTerminalTest, DestroyingTheSandboxEndsItsTerminal) {
  auto t = open();
  ASSERT_TRUE(t);
  std::string out;
  type(*t, "echo O\"\"K\n");
  ASSERT_TRUE(read_until(*t, out, std::regex("OK\r\n")));
  ASSERT_TRUE(sb_->destroy().ok());
  auto code = wait_end(*t, out);
  ASSERT_TRUE(code.has_value()) << out;
  EXPECT_EQ(*code, 128 + SIGKILL);
  // The terminal outlives its sandbox object safely.
  sb_.reset();
  EXPECT_FALSE(t->resize(100, 30).ok());
  t.reset();
}

TEST_P(EngineTerminalTest, ShellSeesTheContainerNotTheHost) {
  const std::string marker = "/tmp/sandcastle-engine-terminal-" + std::to_string(::getpid());
  { std::ofstream(marker) << "host"; }
  auto t = open();
  ASSERT_TRUE(t);
  std::string out;
  type(*t, "ls " + marker + " >/dev/null 2>&1; echo M$?M; echo P$(ls /proc | grep -c '^[0-9]')P\n");
  ASSERT_TRUE(read_until(*t, out, std::regex("P[0-9]+P"))) << out;
  ::unlink(marker.c_str());
  EXPECT_TRUE(std::regex_search(out, std::regex("M[12]M"))) << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("P([0-9]+)P"))) << out;
  EXPECT_LT(std::stoi(m[1]), 20) << out;
}

INSTANTIATE_TEST_SUITE_P(Engines, EngineTerminalTest, ::testing::Values("podman", "docker"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace sandcastle::sandbox::engine::testing
