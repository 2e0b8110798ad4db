// Each exec's own /proc (exec_proc.h) and the supervisor that serves one
// exec after another (supervisor.h): a command finds itself in /proc under
// the PID getpid() gives it, sees no other exec's processes, the sandbox's
// masks still hold, and nothing of one exec (processes, resource usage)
// reaches the next.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <future>
#include <string>
#include <thread>

#include "fixture.h"
#include "sandbox/native/native_sandbox.h"

namespace sandcastle::sandbox::testing {
namespace {

using namespace std::chrono_literals;

class ExecProcTest : public SandboxTest {};

TEST_F(ExecProcTest, ACommandFindsItselfInProcUnderItsOwnPid) {
  // Field 1 of /proc/<pid>/stat is the pid as that /proc counts it; with the
  // sandbox's /proc it was another process's, or none.
  auto r = sh("read pid rest < /proc/$$/stat; echo $$ $pid; exec readlink /proc/self");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  const std::string self_pid = r.stdout_data.substr(0, r.stdout_data.find(' '));
  EXPECT_EQ(r.stdout_data, self_pid + " " + self_pid + "\n" + self_pid + "\n");
  // procps looks itself up by getpid(): "fatal library error, lookup self" before.
  auto ps = sh("echo $$; ps -o pid= -p $$");
  EXPECT_EQ(ps.exit_code, 0) << ps.stderr_data;
  EXPECT_EQ(ps.stderr_data, "");
  const std::string shell = ps.stdout_data.substr(0, ps.stdout_data.find('\n'));
  std::string listed = ps.stdout_data.substr(shell.size() + 1);
  listed.erase(0, listed.find_first_not_of(' '));
  EXPECT_EQ(listed, shell + "\n") << ps.stdout_data;
}

// The supervisor (PID 1 of the exec) holds the sandbox's seccomp filter and
// the command inherits it: one filter each, none loaded twice.
TEST_F(ExecProcTest, TheCommandInheritsTheSupervisorsFilter) {
  for (int i = 0; i < 2; ++i) {  // a fresh supervisor, then a reused one
    auto r = sh("grep -h '^Seccomp' /proc/1/status /proc/self/status");
    ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
    EXPECT_EQ(r.stdout_data,
              "Seccomp:\t2\nSeccomp_filters:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\n");
  }
  // The filter is in force on the command all the same: keyctl (allowed
  // without it, whatever the capabilities) gets EPERM.
  auto denied =
      py("import ctypes\n"
         "libc = ctypes.CDLL(None, use_errno=True)\n"
         "print(libc.syscall(250, 0, -3, 0), ctypes.get_errno())\n");
  EXPECT_EQ(denied.stdout_data, "-1 1\n") << denied.stderr_data;
}

// A command leads a process group of its own in init's session, which has
// no terminal: kill(0) reaches only the command's group (the supervisor
// reports as ever), and there is no controlling terminal to open.
TEST_F(ExecProcTest, ACommandLeadsItsOwnGroupInASessionWithoutATerminal) {
  auto r =
      py("import os\n"
         "me = os.getpid()\n"
         "print(os.getpgid(0) == me, os.getsid(0) == me, os.getsid(0) == os.getsid(1))\n"
         "try:\n"
         "    os.open('/dev/tty', os.O_RDWR)\n"
         "except OSError as e:\n"
         "    print(e.errno)\n");
  EXPECT_EQ(r.stdout_data, "True False True\n6\n") << r.stderr_data;  // ENXIO
  for (int i = 0; i < 2; ++i) {  // and the supervisor serves the next exec
    auto killed = sh("kill -TERM 0; sleep 5");
    EXPECT_EQ(killed.signal, SIGTERM) << killed.stderr_data;
    EXPECT_EQ(sh("echo alive").stdout_data, "alive\n");
  }
}

TEST_F(ExecProcTest, AnotherExecsProcessesAreNotListed) {
  std::atomic<bool> up{false};
  CancelToken token;
  auto other = std::async(std::launch::async, [&] {
    ExecRequest req;
    req.argv = {"/bin/sh", "-c", "echo up; exec sleep 31.5"};
    ExecCallbacks cb;
    cb.on_stdout = [&](std::string_view) { up = true; };
    return sb_->exec(req, cb, &token);
  });
  const auto started = std::chrono::steady_clock::now();
  while (!up && std::chrono::steady_clock::now() - started < 10s) std::this_thread::sleep_for(2ms);
  ASSERT_TRUE(up) << "the other exec did not start";
  // Its own: the supervisor (PID 1), sh and ps; never the other's sleep.
  auto r = sh("ps ax -o pid=,args=");
  EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data.find("sleep 31.5"), std::string::npos) << r.stdout_data;
  EXPECT_NE(r.stdout_data.find("ps ax"), std::string::npos) << r.stdout_data;
  auto count = sh("ls /proc | grep -c '^[0-9]'");
  EXPECT_LE(std::stoi(count.stdout_data), 4) << count.stdout_data;
  token.cancel();
  auto ended = other.get();
  ASSERT_TRUE(ended.ok()) << ended.error().message();
  EXPECT_EQ(ended->reason, EndReason::kCancelled);
}

TEST_F(ExecProcTest, TheSandboxsMasksHoldOnTheExecsProc) {
  // Empty (masked) where the host's are not; /proc/sys read-only.
  auto r =
      sh("cat /proc/interrupts /proc/keys /proc/timer_list | wc -c; ls -A /proc/acpi | wc -l; "
         "echo x > /proc/sys/kernel/hostname");
  EXPECT_EQ(r.stdout_data, "0\n0\n");
  EXPECT_NE(r.stderr_data.find("Read-only file system"), std::string::npos) << r.stderr_data;
  EXPECT_NE(r.exit_code, 0);
}

TEST_F(ExecProcTest, NothingOfOneExecReachesTheNext) {
  // The daemon escapes its shell (setsid, its parent gone) and would run on.
  auto first = sh("(setsid sleep 1000.5 &); echo started");
  ASSERT_EQ(first.exit_code, 0) << first.stderr_data;
  // Looked for from the host: the next exec might run under another
  // supervisor, whose /proc would not list a survivor anyway.
  auto* native = dynamic_cast<native::NativeSandbox*>(sb_.get());
  ASSERT_NE(native, nullptr);
  for (pid_t p : host_descendants(native->init_pid())) EXPECT_NE(host_comm(p), "sleep") << p;
  // A supervisor serves one exec after another (its PIDs count on then);
  // the peak memory reported is still each exec's own, not the largest of
  // any before it in that supervisor.
  bool reused = false;
  for (int i = 0; i < 5 && !reused; ++i) {
    auto big = py("b = bytearray(96 * 1024 * 1024)\nfor i in range(0, len(b), 4096): b[i] = 1");
    ASSERT_EQ(big.exit_code, 0) << big.stderr_data;
    EXPECT_GT(big.peak_memory_bytes, 90u << 20);
    auto small = sh("echo $$");
    reused = std::stoi(small.stdout_data) > 2;
    EXPECT_LT(small.peak_memory_bytes, 32u << 20) << "after " << big.peak_memory_bytes;
    EXPECT_LT(small.cpu_time, big.cpu_time);
  }
  EXPECT_TRUE(reused) << "no exec was served by the supervisor of the one before";
}

}  // namespace
}  // namespace sandcastle::sandbox::testing
