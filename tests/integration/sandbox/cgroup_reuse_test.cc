// cgroup reuse (v1): a recycled group starts from zero and takes the next
// sandbox's limits, up and down; a group with a process left is never reused;
// sandboxes made and destroyed in a row leave no groups behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <thread>

#include "fixture.h"
#include "sandbox/native/cgroup.h"
#include "sandbox/native/fs_util.h"
#include "sandbox/native/reaper.h"

namespace sandcastle::sandbox::testing {
namespace {

using native::CgroupSupport;
using native::CgroupVersion;
using native::SandboxCgroup;

// Forks a child inside `cg` that burns ~200 ms of CPU and touches 32 MiB,
// then exits; returns once it is reaped.
void busy_child_in(SandboxCgroup& cg) {
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    char c;
    ::close(go[1]);
    if (::read(go[0], &c, 1) != 1) _exit(1);
    // 200 ms of its own CPU time, not of the wall clock: on a loaded
    // machine a wall-clock loop gets less than the test asserts.
    struct timespec t {};
    do {
      ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    } while (t.tv_sec == 0 && t.tv_nsec < 200'000'000);
    std::string block(32u << 20, 'x');
    _exit(block[12345] == 'x' ? 0 : 1);
  }
  ::close(go[0]);
  ASSERT_TRUE(cg.add_process(pid).ok());
  ASSERT_EQ(::write(go[1], "g", 1), 1);
  ::close(go[1]);
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

TEST(CgroupReuse, RecycledGroupStartsFromZeroAndTakesNewLimits) {
  CgroupSupport support = native::detect_cgroups();
  if (support.version != CgroupVersion::kV1) GTEST_SKIP() << "needs writable cgroup v1 hierarchies (root)";
  Limits limits;
  limits.memory_bytes = 256 * kMiB;
  auto cg = SandboxCgroup::create(support, "sandcastle-" + std::to_string(::getpid()) + "-reuse-test", limits);
  ASSERT_TRUE(cg.ok()) << cg.error().message();
  busy_child_in(**cg);
  EXPECT_GT((*cg)->cpu_usage_us(), 100'000u);
  EXPECT_GT((*cg)->memory_peak(), 30 * kMiB);

  ASSERT_TRUE((*cg)->recycle().ok());
  EXPECT_LT((*cg)->cpu_usage_us(), 1'000u);
  // The peak restarts at what is still charged (reclaimable cache only).
  EXPECT_LT((*cg)->memory_peak(), 16 * kMiB);
  EXPECT_EQ((*cg)->process_count(), 0u);

  limits.memory_bytes = 64 * kMiB;
  limits.pids = 17;
  ASSERT_TRUE((*cg)->apply_limits(limits).ok());
  EXPECT_EQ(native::read_small_file((*cg)->file("memory", "memory.limit_in_bytes")),
            std::to_string(64 * kMiB) + "\n");
  EXPECT_EQ(native::read_small_file((*cg)->file("pids", "pids.max")), "17\n");
  EXPECT_TRUE((*cg)->remove().ok());
}

TEST(CgroupReuse, GroupWithAProcessLeftIsNotReused) {
  CgroupSupport support = native::detect_cgroups();
  if (support.version != CgroupVersion::kV1) GTEST_SKIP() << "needs writable cgroup v1 hierarchies (root)";
  auto cg = SandboxCgroup::create(support, "sandcastle-" + std::to_string(::getpid()) + "-busy-test", Limits{});
  ASSERT_TRUE(cg.ok()) << cg.error().message();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::pause();
    _exit(0);
  }
  ASSERT_TRUE((*cg)->add_process(pid).ok());
  auto st = (*cg)->recycle();
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(st.error().message().find("still has processes"), std::string::npos) << st.error().message();
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  EXPECT_TRUE((*cg)->remove().ok());
}

class ReuseTest : public SandboxTest {};

// Alternating limits through the backend: with groups recycled, each limit
// is written over the last sandbox's, in both directions.
TEST_F(ReuseTest, AlternatingMemoryLimitsHoldForEverySandbox) {
  if (!cgroups()) GTEST_SKIP() << "no cgroups: memory is fenced by rlimits";
  for (int i = 0; i < 6; ++i) {
    SpecOptions o;
    bool small = i % 2 == 0;
    o.limits.memory_bytes = (small ? 64 : 256) * kMiB;
    auto sb = make(o);
    ASSERT_NE(sb, nullptr);
    ExecRequest req;
    req.argv = {"/usr/bin/python3", "-c", "x = bytearray(100 << 20); print('ok')"};
    auto r = sb->exec(req);
    ASSERT_TRUE(r.ok()) << r.error().message();
    if (small) {
      EXPECT_EQ(r->reason, EndReason::kOutOfMemory) << "round " << i;
    } else {
      EXPECT_EQ(r->stdout_data, "ok\n") << "round " << i << ": " << r->stderr_data;
      auto u = sb->usage();
      ASSERT_TRUE(u.ok());
      // CPU time is this sandbox's own (a recycled group was reset).
      EXPECT_LT(u->cpu_time, std::chrono::seconds(5));
    }
    EXPECT_TRUE(sb->destroy().ok());
  }
}

// Many sandboxes in a row: the groups under our parent stay bounded (live
// ones, the backend's pool, the spare groups), none are left per sandbox, and
// the same few groups serve them all (each is named after the sandbox it was
// made for: without reuse there would be one name per sandbox).
TEST_F(ReuseTest, SandboxesInARowReuseAFewGroupsAndLeaveNoneBehind) {
  if (!cgroups()) GTEST_SKIP() << "no cgroups";
  CgroupSupport support = native::detect_cgroups();
  const std::string parent = support.v1_parents.at("memory");
  const std::string prefix = "sandcastle-" + std::to_string(::getpid()) + "-";
  std::set<std::string> seen;
  auto ours = [&] {
    std::size_t n = 0;
    for (const auto& name : native::list_dir(parent))
      if (name.rfind(prefix, 0) == 0) {
        ++n;
        seen.insert(name);
      }
    return n;
  };
  ours();
  const std::size_t before = seen.size();
  constexpr int kSandboxes = 40;
  for (int i = 0; i < kSandboxes; ++i) {
    auto sb = make();
    ASSERT_NE(sb, nullptr);
    ours();
    EXPECT_TRUE(sb->destroy().ok());
    sb.reset();
    // Teardown is asynchronous: a moment for the reaper to hand the group back.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::size_t n = ours();
  for (int i = 0; i < 100 && n > 24; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    n = ours();
  }
  // sb_ + 2 prespawned + at most 16 spare (Reaper::kMaxSpareCgroups).
  EXPECT_LE(n, 1u + 2u + native::Reaper::kMaxSpareCgroups);
  EXPECT_LT(seen.size() - before, static_cast<std::size_t>(kSandboxes / 2))
      << "groups were made afresh for most sandboxes";
}

}  // namespace
}  // namespace sandcastle::sandbox::testing
