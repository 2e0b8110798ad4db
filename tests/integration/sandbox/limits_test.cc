// Resource fences: memory, disk, output, time, processes — each exceeded on
// purpose, with the exact outcome asserted and the sandbox still usable.
#include <gtest/gtest.h>

#include <thread>

#include "fixture.h"
#include "sandbox/native/native_sandbox.h"

namespace sandcastle::sandbox::testing {
namespace {

class LimitsTest : public SandboxTest {};

TEST_F(LimitsTest, MemoryBombIsStopped) {
  SpecOptions o;
  o.limits.memory_bytes = 128 * kMiB;
  auto small = make(o);
  ASSERT_NE(small, nullptr);
  ExecRequest req;
  req.argv = {"/usr/bin/python3", "-c",
              "chunks = []\n"
              "try:\n"
              "    while True: chunks.append(bytearray(8 << 20))\n"
              "except MemoryError:\n"
              "    print('MemoryError')\n"};
  auto r = small->exec(req);
  ASSERT_TRUE(r.ok()) << r.error().message();
  if (cgroups()) {
    // The memory cgroup's OOM killer: SIGKILL, shell status 137.
    EXPECT_EQ(r->reason, EndReason::kOutOfMemory);
    EXPECT_EQ(r->signal, SIGKILL);
    EXPECT_EQ(r->status(), 137);
  } else {
    std::cerr << "[ note ] no cgroups: memory is fenced by RLIMIT_DATA (MemoryError)\n";
    EXPECT_EQ(r->reason, EndReason::kExited);
    EXPECT_EQ(r->stdout_data, "MemoryError\n");
  }
  req.argv = {"/bin/echo", "alive"};
  auto again = small->exec(req);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->stdout_data, "alive\n");
  EXPECT_TRUE(small->destroy().ok());
}

TEST_F(LimitsTest, DiskFillGetsEnospcInside) {
  SpecOptions o;
  o.limits.disk_bytes = 8 * kMiB;
  auto small = make(o);
  ASSERT_NE(small, nullptr);
  ExecRequest req;
  req.argv = {"/bin/sh", "-c", "dd if=/dev/zero of=/workspace/fill bs=1M count=64 2>&1 | head -1"};
  auto r = small->exec(req);
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->stdout_data.find("No space left on device"), std::string::npos) << r->stdout_data;
  auto st = small->stat("/workspace/fill");
  ASSERT_TRUE(st.ok());
  EXPECT_LE(st->size, 8 * kMiB);
  EXPECT_GE(st->size, 7 * kMiB);
  auto usage = small->usage();
  ASSERT_TRUE(usage.ok());
  EXPECT_GE(usage->disk_bytes, 7 * kMiB);
  EXPECT_TRUE(small->destroy().ok());
}

TEST_F(LimitsTest, FileSizeLimitGivesEfbig) {
  SpecOptions o;
  o.limits.file_size_bytes = 1 * kMiB;
  auto small = make(o);
  ASSERT_NE(small, nullptr);
  ExecRequest req;
  req.argv = {"/usr/bin/python3", "-c",
              "import errno, signal\n"
              "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
              "f = open('/tmp/big', 'wb')\n"
              "try:\n"
              "    f.write(b'x' * (2 << 20)); f.flush(); print('OK')\n"
              "except OSError as e:\n"
              "    print(errno.errorcode[e.errno])\n"};
  auto r = small->exec(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data, "EFBIG\n") << r->stderr_data;
  EXPECT_TRUE(small->destroy().ok());
}

TEST_F(LimitsTest, OutputFloodIsCappedHeadAndTail) {
  ExecRequest req;
  req.argv = {"/bin/sh", "-c", "echo FIRST; head -c 20000000 /dev/zero | tr '\\0' x; echo; echo LAST"};
  req.output.max_bytes = 64 * 1024;
  auto r = sb_->exec(req);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->stdout_truncated);
  EXPECT_FALSE(r->stderr_truncated);
  EXPECT_EQ(r->stdout_total, 20000000u + 6 + 1 + 5);
  EXPECT_LT(r->stdout_data.size(), 64 * 1024 + 100);
  EXPECT_TRUE(r->stdout_data.starts_with("FIRST\n"));
  EXPECT_TRUE(r->stdout_data.ends_with("\nLAST\n"));
  EXPECT_NE(r->stdout_data.find("bytes truncated"), std::string::npos);
}

TEST_F(LimitsTest, InfiniteLoopTimesOutAndSandboxSurvives) {
  auto r = run({"/usr/bin/python3", "-c", "while True: pass"}, {}, std::chrono::milliseconds(500));
  EXPECT_EQ(r.reason, EndReason::kTimeout);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_GE(r.duration, std::chrono::milliseconds(500));
  EXPECT_LT(r.duration, std::chrono::milliseconds(3000));
  EXPECT_GT(r.cpu_time, std::chrono::milliseconds(100));
  EXPECT_EQ(sh("echo still here").stdout_data, "still here\n");
}

TEST_F(LimitsTest, TimeoutKillsDoubleForkedDaemons) {
  // The daemon escapes its parent (setsid + double fork) and would keep
  // writing forever; the exec's end must take it down too.
  auto r = py("import os, time\n"
              "if os.fork() == 0:\n"
              "    os.setsid()\n"
              "    if os.fork() == 0:\n"
              "        while True:\n"
              "            open('/workspace/beat', 'a').write('x'); time.sleep(0.01)\n"
              "    os._exit(0)\n"
              "os.wait(); time.sleep(0.2); print('parent exits')\n");
  EXPECT_EQ(r.stdout_data, "parent exits\n");
  auto before = sb_->stat("/workspace/beat");
  ASSERT_TRUE(before.ok());
  EXPECT_GT(before->size, 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto after = sb_->stat("/workspace/beat");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(before->size, after->size) << "daemon survived its exec";
  // No python process is left anywhere in the sandbox (seen from the host:
  // an exec lists only its own processes).
  auto* native = dynamic_cast<native::NativeSandbox*>(sb_.get());
  ASSERT_NE(native, nullptr);
  for (pid_t p : host_descendants(native->init_pid())) EXPECT_NE(host_comm(p), "python3") << p;
}

TEST_F(LimitsTest, CancelStopsTheExec) {
  CancelToken token;
  ExecRequest req;
  req.argv = {"/bin/sleep", "30"};
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    token.cancel();
  });
  auto r = sb_->exec(req, {}, &token);
  canceller.join();
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->reason, EndReason::kCancelled);
  EXPECT_LT(r->duration, std::chrono::seconds(5));
}

TEST_F(LimitsTest, PidsLimitStopsForkBombAndHostIsFine) {
  SpecOptions o;
  o.limits.pids = 32;
  auto small = make(o);
  ASSERT_NE(small, nullptr);
  ExecRequest req;
  req.argv = {"/usr/bin/python3", "-c",
              "import os, errno, time\n"
              "n = 0\n"
              "try:\n"
              "    while True:\n"
              "        if os.fork() == 0:\n"
              "            time.sleep(30); os._exit(0)\n"
              "        n += 1\n"
              "except OSError as e:\n"
              "    print(errno.errorcode[e.errno], n < 32)\n"};
  auto r = small->exec(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data, "EAGAIN True\n") << r->stderr_data;
  EXPECT_EQ(sh("echo host-side sandbox fine").exit_code, 0);
  EXPECT_TRUE(small->destroy().ok());
}

TEST_F(LimitsTest, UsageReportsAccounting) {
  auto u = sb_->usage();
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->accounting, cgroups() ? "cgroup v1" : "rlimits only");
  EXPECT_GE(u->processes, 1u);
}

TEST_F(LimitsTest, ExecReportsPeakMemoryAndCpu) {
  auto r = py("x = bytearray(64 << 20); print(len(x) >> 20)");
  EXPECT_EQ(r.stdout_data, "64\n");
  EXPECT_GT(r.peak_memory_bytes, 60 * kMiB);
}

}  // namespace
}  // namespace sandcastle::sandbox::testing
