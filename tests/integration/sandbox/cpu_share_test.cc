// Background CPU share (cgroup.h, CpuShare): a group set to kBackground gets
// v1 cpu.shares 2 and back to 1024; killed sandboxes exit at the background
// share, and those that have not exited after Reaper::kBackgroundExit get the
// normal share, queued ones too (a busy machine must not keep their memory
// held indefinitely); a kill a caller waits for keeps the normal share.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

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

// A child that waits in pause(2), in `cg`, as a killed sandbox's init
// stand-in: its pid and a pidfd (pid -1 on failure, reported).
native::InitProcess paused_child_in(SandboxCgroup& cg) {
  native::InitProcess init;
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (;;) ::pause();
  }
  EXPECT_GT(pid, 0);
  if (pid <= 0) return init;
  EXPECT_TRUE(cg.add_process(pid).ok());
  init.pid = pid;
  init.pidfd = UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  EXPECT_TRUE(init.pidfd);
  return init;
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

// Two sandboxes killed together, both slow to exit: the reaper waits on the
// first, and the one queued behind it gets the normal share on time too.
TEST(CpuShare, KilledSandboxesExitAtTheBackgroundShareAndGetTheNormalOneIfSlow) {
  CgroupSupport support = native::detect_cgroups();
  if (!has_v1_cpu(support)) GTEST_SKIP() << "needs a writable cgroup v1 cpu hierarchy (root)";
  if (::access("/sys/fs/cgroup/freezer", W_OK) != 0)
    GTEST_SKIP() << "needs the v1 freezer hierarchy";
  const std::string prefix = "sandcastle-" + std::to_string(::getpid()) + "-slow-exit-";
  FreezerGroup freezer(prefix + "freezer");
  ASSERT_FALSE(freezer.dir.empty());
  struct Dying {
    std::shared_ptr<SandboxCgroup> cg;
    pid_t pid = -1;
    native::InitProcess init;
  };
  std::vector<Dying> dying(2);
  for (std::size_t i = 0; i < dying.size(); ++i) {
    auto made = SandboxCgroup::create(support, prefix + std::to_string(i), Limits{});
    ASSERT_TRUE(made.ok()) << made.error().message();
    dying[i].cg = std::move(*made);
    dying[i].init = paused_child_in(*dying[i].cg);
    dying[i].pid = dying[i].init.pid;
    ASSERT_GT(dying[i].pid, 0);
    ASSERT_TRUE(
        native::write_small_file(freezer.dir + "/cgroup.procs", std::to_string(dying[i].pid)));
  }
  ASSERT_TRUE(freezer.set("FROZEN"));

  native::Reaper reaper;
  const auto killed = std::chrono::steady_clock::now();  // no later than the reaper's
  for (auto& d : dying) reaper.kill_and_release("slow", std::move(d.init), d.cg);
  // Killed: background at once (set before the signal).
  for (auto& d : dying) EXPECT_EQ(shares_of(*d.cg), "2\n");
  // Still frozen, so not exited: the normal share after kBackgroundExit,
  // the second (queued behind the first, which the reaper waits on) too.
  auto all_normal = [&] {
    return std::all_of(dying.begin(), dying.end(),
                       [](const Dying& d) { return shares_of(*d.cg) == "1024\n"; });
  };
  for (int i = 0; i < 1000 && !all_normal(); ++i) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(all_normal());
  EXPECT_GE(std::chrono::steady_clock::now() - killed, native::Reaper::kBackgroundExit);
  // Thawed, the kills land; the reaper finishes with them.
  ASSERT_TRUE(freezer.set("THAWED"));
  for (auto& d : dying) {
    int st = 0;
    ASSERT_EQ(::waitpid(d.pid, &st, 0), d.pid);
    EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    d.cg.reset();
  }
  reaper.drain();
  reaper.release_spares();  // the groups, if they were kept for next sandboxes
}

// A caller that waits for the exit (a persistent sandbox's release) keeps
// the normal share.
TEST(CpuShare, AKillACallerWaitsForKeepsTheNormalShare) {
  CgroupSupport support = native::detect_cgroups();
  if (!has_v1_cpu(support)) GTEST_SKIP() << "needs a writable cgroup v1 cpu hierarchy (root)";
  auto made = SandboxCgroup::create(support, "sandcastle-" + std::to_string(::getpid()) + "-waited",
                                    Limits{});
  ASSERT_TRUE(made.ok()) << made.error().message();
  std::shared_ptr<SandboxCgroup> cg = std::move(*made);
  native::InitProcess init = paused_child_in(*cg);
  const pid_t pid = init.pid;
  ASSERT_GT(pid, 0);
  native::Reaper reaper;
  reaper.kill_and_release("waited", std::move(init), cg, /*background=*/false);
  EXPECT_EQ(shares_of(*cg), "1024\n");
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  cg.reset();
  reaper.drain();
  reaper.release_spares();
}

}  // namespace
}  // namespace sandcastle::sandbox::testing
