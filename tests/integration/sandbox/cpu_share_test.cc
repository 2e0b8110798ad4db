// Background CPU share (cgroup.h, CpuShare): a group set to kBackground gets
// v1 cpu.shares 2 and back to 1024; a killed sandbox exits at the background
// share, and one that has not exited after Reaper::kBackgroundExit gets the
// normal share (a busy machine must not keep its memory held indefinitely).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "sandbox/native/cgroup.h"
#include "sandbox/native/fs_util.h"
#include "sandbox/native/reaper.h"

namespace sandcastle::sandbox::testing {
namespace {

using namespace std::chrono_literals;
using native::CgroupSupport;
using native::CgroupVersion;
using native::CpuShare;
using native::SandboxCgroup;

bool has_v1_cpu(const CgroupSupport& s) {
  return s.version == CgroupVersion::kV1 && s.v1_parents.count("cpu");
}

std::string shares_of(const SandboxCgroup& cg) {
  return native::read_small_file(cg.file("cpu", "cpu.shares"));
}

TEST(CpuShare, BackgroundIsTwoSharesAndNormalIsTheDefault) {
  CgroupSupport support = native::detect_cgroups();
  if (!has_v1_cpu(support)) GTEST_SKIP() << "needs a writable cgroup v1 cpu hierarchy (root)";
  auto cg = SandboxCgroup::create(
      support, "sandcastle-" + std::to_string(::getpid()) + "-share-test", Limits{});
  ASSERT_TRUE(cg.ok()) << cg.error().message();
  EXPECT_EQ(shares_of(**cg), "1024\n");
  EXPECT_EQ((*cg)->cpu_share(), CpuShare::kNormal);
  ASSERT_TRUE((*cg)->set_cpu_share(CpuShare::kBackground).ok());
  EXPECT_EQ(shares_of(**cg), "2\n");
  EXPECT_EQ((*cg)->cpu_share(), CpuShare::kBackground);
  ASSERT_TRUE((*cg)->set_cpu_share(CpuShare::kNormal).ok());
  EXPECT_EQ(shares_of(**cg), "1024\n");
  EXPECT_TRUE((*cg)->remove().ok());
}

// A v1 freezer group of the test's own: a frozen process does not act on
// SIGKILL until thawed, which stands for a sandbox whose exit is slow.
struct FreezerGroup {
  std::string dir;
  explicit FreezerGroup(const std::string& name) : dir("/sys/fs/cgroup/freezer/" + name) {
    if (::mkdir(dir.c_str(), 0755) != 0) dir.clear();
  }
  ~FreezerGroup() {
    if (!dir.empty()) {
      (void)native::write_small_file(dir + "/freezer.state", "THAWED");
      for (int i = 0; i < 400 && ::rmdir(dir.c_str()) != 0; ++i) std::this_thread::sleep_for(5ms);
    }
  }
  bool set(const char* state) {
    if (!native::write_small_file(dir + "/freezer.state", state)) return false;
    for (int i = 0; i < 400; ++i) {  // FREEZING until every task stopped
      if (native::read_small_file(dir + "/freezer.state") == std::string(state) + "\n") return true;
      std::this_thread::sleep_for(5ms);
    }
    return false;
  }
};

TEST(CpuShare, AKilledSandboxExitsAtTheBackgroundShareAndGetsTheNormalOneIfSlow) {
  CgroupSupport support = native::detect_cgroups();
  if (!has_v1_cpu(support)) GTEST_SKIP() << "needs a writable cgroup v1 cpu hierarchy (root)";
  if (::access("/sys/fs/cgroup/freezer", W_OK) != 0)
    GTEST_SKIP() << "needs the v1 freezer hierarchy";
  const std::string name = "sandcastle-" + std::to_string(::getpid()) + "-slow-exit";
  auto made = SandboxCgroup::create(support, name, Limits{});
  ASSERT_TRUE(made.ok()) << made.error().message();
  std::shared_ptr<SandboxCgroup> cg = std::move(*made);
  FreezerGroup freezer(name);
  ASSERT_FALSE(freezer.dir.empty());

  pid_t pid = ::fork();
  if (pid == 0) {
    for (;;) ::pause();
  }
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(cg->add_process(pid).ok());
  ASSERT_TRUE(native::write_small_file(freezer.dir + "/cgroup.procs", std::to_string(pid)));
  ASSERT_TRUE(freezer.set("FROZEN"));
  native::InitProcess init;
  init.pid = pid;
  init.pidfd = UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  ASSERT_TRUE(init.pidfd);

  native::Reaper reaper;
  const auto killed = std::chrono::steady_clock::now();  // no later than the reaper's
  reaper.kill_and_release(name, std::move(init), cg);
  // Killed: background at once (set before the signal).
  EXPECT_EQ(shares_of(*cg), "2\n");
  // Still frozen, so not exited: the normal share after kBackgroundExit.
  std::string shares;
  for (int i = 0; i < 1000 && (shares = shares_of(*cg)) != "1024\n"; ++i)
    std::this_thread::sleep_for(5ms);
  EXPECT_EQ(shares, "1024\n");
  EXPECT_GE(std::chrono::steady_clock::now() - killed, native::Reaper::kBackgroundExit);
  // Thawed, the kill lands; the reaper finishes with it.
  ASSERT_TRUE(freezer.set("THAWED"));
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  cg.reset();
  reaper.drain();
  reaper.release_spares();  // the group, if it was kept for a next sandbox
}

}  // namespace
}  // namespace sandcastle::sandbox::testing
