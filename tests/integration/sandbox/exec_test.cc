// Basic behaviour of exec in a native sandbox: output, status, stdin, env,
// identity, working directory, streaming, and failures with step + errno.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "fixture.h"
#include "sandbox/native/init_loop.h"
#include "sandbox/native/native_sandbox.h"

namespace sandcastle::sandbox::testing {
namespace {

class ExecTest : public SandboxTest {};

TEST_F(ExecTest, EchoesStdoutAndExitCode) {
  auto r = sh("echo hello; echo oops >&2; exit 3");
  EXPECT_EQ(r.reason, EndReason::kExited);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.stdout_data, "hello\n");
  EXPECT_EQ(r.stderr_data, "oops\n");
}

TEST_F(ExecTest, StdinIsDelivered) {
  auto r = run({"/bin/cat"}, std::string("bin\0ary\n", 8));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.stdout_data, std::string("bin\0ary\n", 8));
}

TEST_F(ExecTest, RunsAsSandboxUserWithNoCapabilities) {
  auto r = sh("id -u; id -g; id -un; grep -E '^Cap(Eff|Prm|Bnd|Amb|Inh)' /proc/self/status; "
              "grep NoNewPrivs /proc/self/status; grep Seccomp: /proc/self/status");
  EXPECT_EQ(r.stdout_data,
            "1000\n1000\nsandbox\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\n"
            "CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\n"
            "NoNewPrivs:\t1\nSeccomp:\t2\n");
}

TEST_F(ExecTest, CleanEnvironmentWithRequestOverrides) {
  ExecRequest req;
  req.argv = {"/usr/bin/env"};
  req.env = {{"FOO", "bar"}};
  auto r = sb_->exec(req);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_NE(r->stdout_data.find("FOO=bar\n"), std::string::npos);
  EXPECT_NE(r->stdout_data.find("PATH=/usr/local/bin:/usr/bin:/bin\n"), std::string::npos);
  EXPECT_EQ(r->stdout_data.find("SANDCASTLE"), std::string::npos);
}

TEST_F(ExecTest, WorkdirHostnameAndLoopback) {
  auto r = sh("pwd; hostname; cat /proc/net/dev | grep -c ':'; ls /sys 2>&1 | head -1");
  EXPECT_EQ(r.stdout_data.substr(0, 11), "/workspace\n");
  EXPECT_NE(r.stdout_data.find("sandbox\n1\n"), std::string::npos) << r.stdout_data;
}

TEST_F(ExecTest, PidNamespaceHidesHost) {
  // Only this exec's own processes are visible (its /proc is its PID
  // namespace's, exec_proc.h): its supervisor, sh, ls and grep.
  auto r = sh("ls /proc | grep -c '^[0-9]'");
  EXPECT_LE(std::stoi(r.stdout_data), 4) << r.stdout_data;
}

TEST_F(ExecTest, MissingCommandReportsStepAndErrno) {
  ExecRequest req;
  req.argv = {"/nonexistent/tool"};
  auto r = sb_->exec(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().sys_errno, ENOENT);
  EXPECT_EQ(r.error().context, "execve /nonexistent/tool");
  req.argv = {"no-such-command-anywhere"};
  r = sb_->exec(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().sys_errno, ENOENT);
  req.argv = {"/bin/true"};
  req.cwd = "/missing-dir";
  r = sb_->exec(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().context, "chdir /missing-dir");
  EXPECT_EQ(r.error().sys_errno, ENOENT);
}

TEST_F(ExecTest, PathSearchUsesRequestPath) {
  auto r = run({"true"});
  EXPECT_EQ(r.exit_code, 0);
}

TEST_F(ExecTest, StreamsOutputThroughCallbacks) {
  ExecRequest req;
  req.argv = {"/bin/sh", "-c", "for i in 1 2 3; do echo $i; done"};
  std::string seen;
  ExecCallbacks cb;
  cb.on_stdout = [&](std::string_view s) { seen += s; };
  auto r = sb_->exec(req, cb);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(seen, "1\n2\n3\n");
}

TEST_F(ExecTest, ConcurrentExecsOnOneSandbox) {
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::vector<std::string> outs(kThreads);
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      ExecRequest req;
      req.argv = {"/bin/sh", "-c", "sleep 0.1; echo " + std::to_string(i)};
      auto r = sb_->exec(req);
      if (r) outs[i] = r->stdout_data;
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) EXPECT_EQ(outs[i], std::to_string(i) + "\n");
}

TEST_F(ExecTest, StatePersistsBetweenExecs) {
  EXPECT_EQ(sh("echo data > state.txt").exit_code, 0);
  EXPECT_EQ(sh("cat state.txt").stdout_data, "data\n");
}

TEST_F(ExecTest, PythonRuns) {
  auto r = py("import sys, ssl; print(sys.version_info[0])");
  EXPECT_EQ(r.stdout_data, "3\n") << r.stderr_data;
}

// interrupt() delivers SIGINT to the exec's main process, which goes on; a
// token with no exec running has nothing to interrupt.
TEST_F(ExecTest, InterruptSendsSigintAndTheCommandGoesOn) {
  CancelToken token;
  EXPECT_FALSE(token.interrupt());
  ExecRequest req;
  req.argv = {"/usr/bin/python3", "-u", "-c",
              "import signal, sys, time\n"
              "got = []\n"
              "signal.signal(signal.SIGINT, lambda *a: got.append(1))\n"
              "print('ready')\n"
              "while len(got) < 1: time.sleep(0.01)\n"
              "print('one')\n"
              "while len(got) < 2: time.sleep(0.01)\n"
              "print('two SIGINTs, still running')\n"};
  // The second SIGINT only once the first was handled: two sent while the
  // first is still pending are one signal (a loaded machine, TSan, showed it).
  std::atomic<bool> ready{false}, one{false};
  ExecCallbacks cb;
  cb.on_stdout = [&](std::string_view s) {
    if (s.find("ready") != std::string_view::npos) ready = true;
    if (s.find("one") != std::string_view::npos) one = true;
  };
  std::thread interrupter([&] {
    while (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_TRUE(token.interrupt());
    while (!one) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_TRUE(token.interrupt());
  });
  auto r = sb_->exec(req, cb, &token);
  interrupter.join();
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->reason, EndReason::kExited);
  EXPECT_EQ(r->exit_code, 0) << r->stderr_data;
  EXPECT_EQ(r->stdout_data, "ready\none\ntwo SIGINTs, still running\n");
  EXPECT_FALSE(token.interrupt()) << "the exec has ended";
}

// A waiting exec sleeps until something happens: a server holds thousands
// of idle kernels, each an exec with a token, and polling the token (as it
// once did, every 20 ms) kept the machine busy. A cancel still lands at once.
TEST_F(ExecTest, WaitingExecWithTokenDoesNotPollAndCancelLandsAtOnce) {
  CancelToken token;
  std::atomic<pid_t> tid{0};
  std::optional<Result<ExecResult>> result;
  std::thread execer([&] {
    tid = static_cast<pid_t>(::syscall(SYS_gettid));
    ExecRequest req;
    req.argv = {"/bin/sleep", "30"};
    result = sb_->exec(req, {}, &token);
  });
  while (!tid) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto switches = [&] {
    std::ifstream f("/proc/self/task/" + std::to_string(tid.load()) + "/status");
    std::string line;
    while (std::getline(f, line))
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0) return std::stol(line.substr(24));
    return -1L;
  };
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the exec is set up and waiting
  const long before = switches();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const long woke = switches() - before;
  EXPECT_LT(woke, 10) << "the waiting exec thread woke " << woke << " times in 1 s";
  const auto t0 = std::chrono::steady_clock::now();
  token.cancel();
  execer.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
  ASSERT_TRUE(result && result->ok());
  EXPECT_EQ((*result)->reason, EndReason::kCancelled);
}

// Without a handler, SIGINT ends the command like a terminal's ^C would.
TEST_F(ExecTest, InterruptWithoutHandlerEndsTheCommandBySigint) {
  CancelToken token;
  ExecRequest req;
  req.argv = {"/bin/sh", "-c", "echo ready; exec sleep 30"};
  std::atomic<bool> ready{false};
  ExecCallbacks cb;
  cb.on_stdout = [&](std::string_view) { ready = true; };
  std::thread interrupter([&] {
    while (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // sh has exec'd sleep
    EXPECT_TRUE(token.interrupt());
  });
  auto r = sb_->exec(req, cb, &token);
  interrupter.join();
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->reason, EndReason::kKilled);
  EXPECT_EQ(r->signal, SIGINT);
}

// An idle sandbox sheds its waiting exec slot (a supervisor and its child)
// after native::kSlotIdle; the next exec starts one on demand, and the slot
// is kept ready again while execs follow.
TEST_F(ExecTest, IdleSandboxShedsItsExecSlotAndStillExecs) {
  auto* native = dynamic_cast<native::NativeSandbox*>(sb_.get());
  ASSERT_NE(native, nullptr);
  EXPECT_EQ(sh("echo warm").stdout_data, "warm\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the used slot is replaced
  const size_t ready = host_descendants(native->init_pid()).size();
  std::this_thread::sleep_for(native::kSlotIdle + std::chrono::milliseconds(700));
  const size_t idle = host_descendants(native->init_pid()).size();
  EXPECT_EQ(idle + 2, ready) << "the slot's supervisor and child are gone";
  EXPECT_EQ(sh("echo after idle").stdout_data, "after idle\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(host_descendants(native->init_pid()).size(), ready) << "a slot is ready again";
}

// A one-shot's command is its sandbox's last (ExecRequest::last): init
// starts no supervisor for a next exec, which would only be made to be
// killed. Sync point: the first file operation has init fork a file worker,
// so by the time it answers, init has passed the point where it would
// have started the slot.
TEST_F(ExecTest, LastExecLeavesNoSlotForANextOne) {
  auto slots_after = [this](bool last) {
    auto sb = make();
    auto* native = dynamic_cast<native::NativeSandbox*>(sb.get());
    EXPECT_NE(native, nullptr);
    if (!native) return std::size_t{0};
    const auto first_slot = host_descendants(native->init_pid());  // the exec uses it
    ExecRequest req;
    req.argv = {"/bin/true"};
    req.last = last;
    auto r = sb->exec(req);
    EXPECT_TRUE(r.ok() && r->status() == 0);
    // The used slot's processes end after reporting (no event to wait on).
    auto used_left = [&] {
      auto now = host_descendants(native->init_pid());
      return std::any_of(first_slot.begin(), first_slot.end(), [&](pid_t p) {
        return std::find(now.begin(), now.end(), p) != now.end();
      });
    };
    for (int i = 0; i < 1000 && used_left(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_FALSE(used_left());
    EXPECT_TRUE(sb->stat("/").ok());  // forks the file worker
    const std::size_t n = host_descendants(native->init_pid()).size();
    EXPECT_TRUE(sb->destroy().ok());
    return n - 1;  // the file worker is not a slot
  };
  // A next slot's supervisor (its waiting child may still be on its way).
  EXPECT_GE(slots_after(false), 1u);
  EXPECT_EQ(slots_after(true), 0u);
  // The flag changes nothing else: a last exec still runs and reports.
  ExecRequest req;
  req.argv = {"/bin/sh", "-c", "echo last; exit 3"};
  req.last = true;
  auto r = sb_->exec(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data, "last\n");
  EXPECT_EQ(r->status(), 3);
}

// The next slot is made once the exec that took the last one ends, so it
// does not compete with it; a long exec gets one anyway after
// native::kRefillAfter, so a second exec beside it finds one ready.
TEST_F(ExecTest, ALongExecGetsTheNextSlotWhileItRuns) {
  using namespace std::chrono_literals;
  auto* native = dynamic_cast<native::NativeSandbox*>(sb_.get());
  ASSERT_NE(native, nullptr);
  const auto before = host_descendants(native->init_pid());  // the waiting slot
  auto running = std::async(std::launch::async, [this] {
    ExecRequest req;
    req.argv = {"/bin/sleep", "1"};
    return sb_->exec(req);
  });
  // The waiting slot took the exec; a new one (supervisor and child) beside it.
  const auto started = std::chrono::steady_clock::now();
  auto fresh_supervisors = [&] {
    std::size_t n = 0;
    for (pid_t p : host_descendants(native->init_pid()))
      if (std::find(before.begin(), before.end(), p) == before.end()) ++n;
    return n;
  };
  while (fresh_supervisors() < 2 && std::chrono::steady_clock::now() - started < 800ms)
    std::this_thread::sleep_for(2ms);
  EXPECT_GE(fresh_supervisors(), 2u) << "no next slot while the exec ran";
  EXPECT_LT(std::chrono::steady_clock::now() - started, 800ms);
  ExecRequest quick;
  quick.argv = {"/bin/true"};
  auto q = sb_->exec(quick);
  ASSERT_TRUE(q.ok()) << q.error().message();
  EXPECT_EQ(q->status(), 0);
  EXPECT_EQ(running.wait_for(0s), std::future_status::timeout) << "the long exec still runs";
  auto r = running.get();
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->status(), 0);
}

TEST_F(ExecTest, DestroyedSandboxRefusesExec) {
  ASSERT_TRUE(sb_->destroy().ok());
  ExecRequest req;
  req.argv = {"/bin/true"};
  auto r = sb_->exec(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
}

}  // namespace
}  // namespace sandcastle::sandbox::testing
