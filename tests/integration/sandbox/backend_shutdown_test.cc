// Destroying the native backend (what a clean exit of the server does) leaves
// nothing of it on the host (issue 13): no runtime directory, no cgroup named
// after it (spares kept for reuse included), no process descending from it
// (zygote, inits, what runs in the sandboxes) and no mount of its runtime
// directory, even while an owner still holds a sandbox.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "fixture.h"
#include "sandbox/native/cgroup.h"
#include "sandbox/native/fs_util.h"
#include "sandbox/native/host_image.h"
#include "sandbox/native/native_backend.h"

namespace sandcastle::sandbox::native {
namespace {

constexpr const char* kChildEnv = "SANDCASTLE_SHUTDOWN_CHILD";

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// Host processes that descend from `root`, as "pid comm".
std::set<std::string> descendants(pid_t root) {
  std::map<pid_t, pid_t> parent;
  std::map<pid_t, std::string> comm;
  for (const auto& name : list_dir("/proc")) {
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::string stat = read_small_file("/proc/" + name + "/stat");
    auto open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    pid_t pid = std::atoi(name.c_str());
    parent[pid] = ppid;
    comm[pid] = stat.substr(open + 1, close - open - 1);
  }
  std::set<std::string> out;
  for (const auto& [pid, ppid] : parent) {
    for (pid_t p = ppid; p > 1 && parent.count(p); p = parent[p]) {
      if (p == root) {
        out.insert(std::to_string(pid) + " " + comm[pid]);
        break;
      }
    }
  }
  return out;
}

std::set<std::string> own_cgroups(const CgroupSupport& cg, pid_t pid) {
  std::set<std::string> parents(cg.v2_parent.empty() ? std::set<std::string>{}
                                                     : std::set{cg.v2_parent});
  for (const auto& [ctrl, dir] : cg.v1_parents) parents.insert(dir);
  const std::string prefix = std::string(kRuntimePrefix) + std::to_string(pid) + "-";
  std::set<std::string> out;
  for (const auto& parent : parents)
    for (const auto& name : list_dir(parent))
      if (name.rfind(prefix, 0) == 0) out.insert(parent + "/" + name);
  return out;
}

std::set<std::string> mounts_of(const std::string& dir) {
  std::ifstream in("/proc/self/mountinfo");
  std::set<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (line.find(dir) != std::string::npos) out.insert(line);
  return out;
}

ExecRequest command(std::vector<std::string> argv) {
  ExecRequest req;
  req.argv = std::move(argv);
  return req;
}

std::string run_dir_of(pid_t pid) {
  return runtime_parent() + "/" + kRuntimePrefix + std::to_string(pid);
}

// The body, in a process of its own (see below).
TEST(BackendShutdownChild, DestroyingTheBackendLeavesNothing) {
  if (!std::getenv(kChildEnv))
    GTEST_SKIP() << "runs in a process of its own, started by BackendShutdown.*";
  const pid_t self = ::getpid();
  const std::string run_dir = run_dir_of(self);
  const CgroupSupport cg = detect_cgroups();
  auto backend = NativeBackend::create();
  ASSERT_TRUE(backend.ok()) << backend.error().message();
  auto make = [&]() -> std::unique_ptr<Sandbox> {
    auto sb = (*backend)->create(SandboxSpec::defaults());
    EXPECT_TRUE(sb.ok()) << sb.error().message();
    return sb ? std::move(*sb) : nullptr;
  };
  // One closed (its emptied cgroup is kept as a spare), two still held by
  // their owner when the backend goes, one with a process in the background.
  auto closed = make();
  auto held = make();
  auto busy = make();
  ASSERT_TRUE(closed && held && busy);
  ASSERT_TRUE(closed->exec(command({"/bin/true"})).ok());
  ASSERT_TRUE(closed->destroy().ok());
  auto bg = busy->exec(command({"/bin/sh", "-c", "sleep 1000 >/dev/null 2>&1 & echo started"}));
  ASSERT_TRUE(bg.ok()) << bg.error().message();
  EXPECT_EQ(bg->stdout_data, "started\n");

  EXPECT_TRUE(exists(run_dir + "/share")) << run_dir;
  if (cg.version != CgroupVersion::kNone) {
    EXPECT_GE(own_cgroups(cg, self).size(), 2u);
  }
  EXPECT_GE(descendants(self).size(), 3u) << "the zygote and the inits";

  backend->reset();

  EXPECT_FALSE(exists(run_dir)) << run_dir;
  EXPECT_EQ(own_cgroups(cg, self), std::set<std::string>{});
  EXPECT_EQ(descendants(self), std::set<std::string>{});
  EXPECT_EQ(mounts_of(run_dir), std::set<std::string>{});
  // Its owner finds the sandbox destroyed, and may still let go of it.
  auto after = held->exec(command({"/bin/true"}));
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.error().code, ErrorCode::kUnavailable) << after.error().message();
  held.reset();
  busy.reset();
}

// This process already has the fixture's backend, whose runtime directory is
// named after this pid: a second backend runs in a child process.
TEST(BackendShutdown, DestroyingTheBackendLeavesNothing) {
  auto run = testing::run_tests_in_child("BackendShutdownChild.*", kChildEnv);
  const pid_t child = run.pid;
  const std::string& out = run.out;
  EXPECT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << out;
  EXPECT_NE(out.find("[  PASSED  ] 1 test."), std::string::npos) << out;
  // Nothing was left for the next start's sweep either.
  EXPECT_FALSE(exists(run_dir_of(child)));
  EXPECT_EQ(own_cgroups(detect_cgroups(), child), std::set<std::string>{});
}

}  // namespace
}  // namespace sandcastle::sandbox::native
