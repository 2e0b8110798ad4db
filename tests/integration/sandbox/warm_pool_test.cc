// The native backend's warm pool, the only one the server has: nothing made
// ahead of demand at pool size 0 (no init, no zygote), a pooled sandbox only
// for a create whose whole spec is the pool's, and a size that follows the
// arrival rate (grown by a burst, shed when idle, under the server's cap).
// Time is a clock the test moves; waits are on the pool's own events.
//
// Each test makes backends of its own, one at a time; a backend's runtime
// directory is named after the process, so they run in a child process
// without the fixture's shared backend (WarmPool.TestsRunInAProcessOfTheirOwn).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "fixture.h"
#include "sandbox/native/cgroup.h"
#include "sandbox/native/fs_util.h"
#include "sandbox/native/native_backend.h"

namespace sandcastle::sandbox::testing {
namespace {

using namespace std::chrono_literals;
using native::NativeBackend;
using native::NativeBackendOptions;
using native::PoolStats;

constexpr const char* kWarmPoolChildEnv = "SANDCASTLE_WARM_POOL_CHILD";

// Our live children named sc-zygote, and how many live children each has
// (every sandbox init, pooled or handed out, is a child of its zygote).
std::map<pid_t, std::size_t> zygotes_and_inits() {
  std::map<pid_t, std::size_t> out;
  auto stat_of = [](const std::string& pid, std::string* comm, std::string* state, pid_t* ppid) {
    std::ifstream in("/proc/" + pid + "/stat");
    std::string line;
    std::getline(in, line);
    auto open = line.find('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos) return false;
    *comm = line.substr(open + 1, close - open - 1);
    std::istringstream rest(line.substr(close + 2));
    rest >> *state >> *ppid;
    return true;
  };
  std::vector<std::pair<pid_t, pid_t>> procs;  // pid, ppid of live processes
  std::set<pid_t> zygotes;
  for (const auto& name : native::list_dir("/proc")) {
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string comm, state;
    pid_t ppid = 0;
    if (!stat_of(name, &comm, &state, &ppid) || state == "Z" || state == "X") continue;
    const pid_t pid = static_cast<pid_t>(std::stoi(name));
    procs.emplace_back(pid, ppid);
    if (comm == "sc-zygote" && ppid == ::getpid()) zygotes.insert(pid);
  }
  for (pid_t z : zygotes) out[z] = 0;
  for (auto [pid, ppid] : procs)
    if (zygotes.count(ppid)) ++out[ppid];
  return out;
}

// Zygotes (and their inits) that `before` did not list: this test's backend's.
std::map<pid_t, std::size_t> new_zygotes(const std::map<pid_t, std::size_t>& before) {
  auto now = zygotes_and_inits();
  for (const auto& [z, _] : before) now.erase(z);
  return now;
}

// A clock the test moves by hand (shared: the refill thread reads it until
// the backend is gone).
struct ManualClock {
  std::shared_ptr<std::atomic<std::int64_t>> ns = std::make_shared<std::atomic<std::int64_t>>(0);
  std::function<std::chrono::steady_clock::time_point()> fn() const {
    return [ns = ns] {
      return std::chrono::steady_clock::time_point{} + 1000s + std::chrono::nanoseconds(ns->load());
    };
  }
  void advance(std::chrono::nanoseconds d) const { ns->fetch_add(d.count()); }
};

// A storage dir for persistent sandboxes, removed with what is left in it.
struct StorageDir {
  std::string path;
  StorageDir() {
    char tmpl[] = "/var/tmp/sc-pool-storage-XXXXXX";
    if (::mkdtemp(tmpl)) path = tmpl;
  }
  ~StorageDir() {
    if (!path.empty()) (void)native::remove_tree(path);
  }
};

class WarmPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::getenv(kWarmPoolChildEnv))
      GTEST_SKIP() << "runs in a process of its own, started by WarmPool.*";
  }
  static std::unique_ptr<NativeBackend> backend(NativeBackendOptions o) {
    auto b = NativeBackend::create(std::move(o));
    EXPECT_TRUE(b.ok()) << b.error().message();
    return b ? std::move(*b) : nullptr;
  }
  // A backend whose pool holds two (at most two), once both are ready;
  // null (and the test failed) otherwise.
  static std::unique_ptr<NativeBackend> pool_of_two_filled() {
    NativeBackendOptions o;
    o.pool.min = 2;
    o.pool.max = 2;
    auto b = backend(o);
    if (!b) return nullptr;
    const bool filled = b->wait_pool([](const PoolStats& s) { return s.ready == 2; }, 60s);
    EXPECT_TRUE(filled) << "ready " << b->pool_stats().ready;
    return filled ? std::move(b) : nullptr;
  }
  static SandboxSpec spec(SpecOptions o = {}) {
    auto s = SandboxSpec::create(std::move(o));
    EXPECT_TRUE(s.ok()) << s.error().message();
    return s ? *s : SandboxSpec::defaults();
  }
  static std::string run(Sandbox& sb, std::vector<std::string> argv) {
    ExecRequest req;
    req.argv = std::move(argv);
    auto r = sb.exec(req);
    EXPECT_TRUE(r.ok()) << r.error().message();
    return r ? r->stdout_data : std::string();
  }
};

TEST_F(WarmPoolTest, PoolSizeZeroMakesNoInitAndNoZygoteAheadOfDemand) {
  const auto before = zygotes_and_inits();
  NativeBackendOptions o;
  o.pool.min = 0;
  auto b = backend(o);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->warm_ready(), 0u);
  EXPECT_TRUE(new_zygotes(before).empty()) << "a zygote was started before any create";
  // A burst still makes nothing ahead of demand: each create is its own.
  {
    std::vector<std::unique_ptr<Sandbox>> held;
    for (int i = 0; i < 5; ++i) {
      auto sb = b->create(spec());
      ASSERT_TRUE(sb.ok()) << sb.error().message();
      held.push_back(std::move(*sb));
    }
    auto z = new_zygotes(before);
    ASSERT_EQ(z.size(), 1u);
    EXPECT_EQ(z.begin()->second, 5u) << "inits beyond the five sandboxes asked for";
    EXPECT_EQ(b->pool_stats().made, 0u);
    for (auto& sb : held) EXPECT_TRUE(sb->destroy().ok());
  }
  // Once they are reaped, not one init is left.
  std::size_t inits = 1;
  for (int i = 0; i < 500 && inits > 0; ++i) {
    auto z = new_zygotes(before);
    inits = z.empty() ? 0 : z.begin()->second;
    if (inits > 0) std::this_thread::sleep_for(10ms);  // the kernel's reap, no event to wait on
  }
  EXPECT_EQ(inits, 0u);
  EXPECT_EQ(b->warm_ready(), 0u);
}

TEST_F(WarmPoolTest, PoolOfTwoHoldsExactlyTwoInits) {
  const auto before = zygotes_and_inits();
  auto b = pool_of_two_filled();
  ASSERT_NE(b, nullptr);
  auto z = new_zygotes(before);
  ASSERT_EQ(z.size(), 1u);
  EXPECT_EQ(z.begin()->second, 2u);
}

// Every spec field that differs from the pool's makes the create build its
// own sandbox; only the very spec the pool was made for takes one.
TEST_F(WarmPoolTest, PooledSandboxOnlyForTheWholeSpec) {
  NativeBackendOptions o;
  o.pool.min = 2;
  o.pool.max = 2;
  StorageDir storage;
  o.storage_dir = storage.path;
  auto b = backend(o);
  ASSERT_NE(b, nullptr);
  auto full = [&] { return b->wait_pool([](const PoolStats& s) { return s.ready == 2; }, 60s); };
  ASSERT_TRUE(full());

  std::vector<std::pair<std::string, SpecOptions>> others;
  auto with = [&](const std::string& what, auto change) {
    SpecOptions so;
    change(so);
    others.emplace_back(what, so);
  };
  with("memory", [](SpecOptions& s) { s.limits.memory_bytes = 256 * kMiB; });
  with("pids", [](SpecOptions& s) { s.limits.pids = 100; });
  with("cpu", [](SpecOptions& s) { s.limits.cpu_millis = 500; });
  with("disk", [](SpecOptions& s) { s.limits.disk_bytes = 128 * kMiB; });
  with("tmp", [](SpecOptions& s) { s.limits.tmp_bytes = 32 * kMiB; });
  with("open_files", [](SpecOptions& s) { s.limits.open_files = 512; });
  with("file_size", [](SpecOptions& s) { s.limits.file_size_bytes = 64 * kMiB; });
  with("exec_timeout", [](SpecOptions& s) { s.limits.exec_timeout = 5s; });
  with("env", [](SpecOptions& s) { s.env["POOL_TEST"] = "1"; });
  with("workdir", [](SpecOptions& s) { s.workdir = "/tmp"; });
  with("hostname", [](SpecOptions& s) { s.hostname = "not-pooled"; });
  for (const auto& [what, so] : others) {
    const auto taken = b->pool_stats().taken;
    auto sb = b->create(spec(so));
    ASSERT_TRUE(sb.ok()) << what << ": " << sb.error().message();
    EXPECT_EQ(b->pool_stats().taken, taken) << what << ": a pooled sandbox went to another spec";
    EXPECT_EQ(b->warm_ready(), 2u) << what;
    EXPECT_TRUE((*sb)->destroy().ok());
  }
  // What the differing spec asked for is what the sandbox has.
  {
    auto sb = b->create(spec(SpecOptions{.hostname = "not-pooled"}));
    ASSERT_TRUE(sb.ok());
    EXPECT_EQ(run(**sb, {"/bin/hostname"}), "not-pooled\n");
    SpecOptions ws;
    ws.limits.tmp_bytes = 32 * kMiB;
    auto small = b->create(spec(ws));
    ASSERT_TRUE(small.ok());
    EXPECT_EQ(run(**small, {"/bin/sh", "-c", "df -k /tmp | tail -1 | awk '{print $2}'"}),
              "32768\n");
  }
  // Persistent (a storage dir): as root a pooled one of the same spec but
  // for its /workspace, with its own disk image mounted over that; without
  // root one made anew on a tmpfs its copy on disk is restored into.
  {
    const auto taken = b->pool_stats().taken;
    auto p = b->create(spec(SpecOptions{.persistence = Persistence::kPersistent, .storage_id = "pool-test"}));
    ASSERT_TRUE(p.ok()) << p.error().message();
    EXPECT_EQ((*p)->spec().persistence(), Persistence::kPersistent);
    if (::geteuid() == 0) {
      EXPECT_EQ(run(**p, {"/bin/sh", "-c", "stat -f -c %T /workspace"}), "ext2/ext3\n");
      EXPECT_TRUE((*p)->destroy().ok());
      EXPECT_EQ(b->pool_stats().taken, taken + 1);
      EXPECT_TRUE(b->wait_pool([](const PoolStats& s) { return s.ready >= 2; }, 20s));
    } else {
      EXPECT_EQ(run(**p, {"/bin/sh", "-c", "stat -f -c %T /workspace"}), "tmpfs\n");
      EXPECT_TRUE((*p)->destroy().ok());
      EXPECT_EQ(b->pool_stats().taken, taken);
    }
    EXPECT_EQ(b->warm_ready(), 2u);
  }
  // The pool's own spec takes one.
  const auto taken = b->pool_stats().taken;
  auto pooled = b->create(spec());
  ASSERT_TRUE(pooled.ok());
  EXPECT_EQ(b->pool_stats().taken, taken + 1);
  EXPECT_EQ(run(**pooled, {"/bin/hostname"}), "sandbox\n");
}

// The other way round: a pool whose spec is persistent is one no create may
// take (a persistent sandbox is made on its own storage, never ahead of
// demand), so none is kept, even with a storage dir, and an ephemeral
// create is built for itself.
TEST_F(WarmPoolTest, PersistentPoolSpecServesNoEphemeralCreate) {
  const auto before = zygotes_and_inits();
  NativeBackendOptions o;
  o.pool.min = 2;
  StorageDir storage;
  o.storage_dir = storage.path;
  o.pool_spec = spec(SpecOptions{.persistence = Persistence::kPersistent, .storage_id = "pool-test"});
  auto b = backend(o);
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(new_zygotes(before).empty());
  auto sb = b->create(spec());
  ASSERT_TRUE(sb.ok()) << sb.error().message();
  EXPECT_EQ(b->pool_stats().taken, 0u);
  EXPECT_EQ(b->pool_stats().made, 0u);
  EXPECT_EQ((*sb)->spec().persistence(), Persistence::kEphemeral);
}

TEST_F(WarmPoolTest, BurstGrowsThePoolAndIdlenessShrinksItBack) {
  ManualClock clock;
  NativeBackendOptions o;
  o.pool.min = 1;
  o.pool.max = 6;
  o.clock = clock.fn();
  auto b = backend(o);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(b->wait_pool([](const PoolStats& s) { return s.ready == 1; }, 60s));
  EXPECT_EQ(b->pool_stats().target, 1u);
  // Eight creates at one instant: a burst of eight, more than the max.
  for (int i = 0; i < 8; ++i) {
    auto sb = b->create(spec());
    ASSERT_TRUE(sb.ok()) << sb.error().message();
    EXPECT_TRUE((*sb)->destroy().ok());
  }
  EXPECT_EQ(b->pool_stats().target, 6u);
  ASSERT_TRUE(b->wait_pool([](const PoolStats& s) { return s.ready == 6; }, 120s))
      << "ready " << b->pool_stats().ready;
  EXPECT_EQ(b->pool_stats().shed, 0u);
  // Not shed while creates come: still six after the burst has faded but
  // only 0.5 s since the last take.
  clock.advance(500ms);
  b->pool_wake();
  EXPECT_EQ(b->pool_stats().shed, 0u);
  // Idle for a minute (twelve holds): back to the floor, the rest destroyed.
  clock.advance(60s);
  b->pool_wake();
  ASSERT_TRUE(b->wait_pool([](const PoolStats& s) { return s.ready == 1; }, 60s))
      << "ready " << b->pool_stats().ready;
  EXPECT_EQ(b->pool_stats().shed, 5u);
  EXPECT_EQ(b->pool_stats().target, 1u);
}

TEST_F(WarmPoolTest, ReadyAndLiveStayUnderTheServerCap) {
  ManualClock clock;
  NativeBackendOptions o;
  o.pool.min = 2;
  o.pool.max = 16;
  o.pool.server_cap = 5;
  o.clock = clock.fn();
  auto b = backend(o);
  ASSERT_NE(b, nullptr);
  std::vector<std::unique_ptr<Sandbox>> held;
  for (int i = 0; i < 4; ++i) {
    auto sb = b->create(spec());
    ASSERT_TRUE(sb.ok()) << sb.error().message();
    held.push_back(std::move(*sb));
  }
  // Four live, cap five: one ready at most, however busy (and at once, not
  // only once the pool has been idle a while).
  ASSERT_TRUE(b->wait_pool([](const PoolStats& s) { return s.target == 1 && s.ready == 1; }, 60s))
      << "ready " << b->pool_stats().ready << ", target " << b->pool_stats().target;
  held.pop_back();  // room again: the pool may grow (up to cap - live = 2)
  ASSERT_TRUE(b->wait_pool([](const PoolStats& s) { return s.ready == 2; }, 60s));
  EXPECT_EQ(b->pool_stats().target, 2u);
}

// Sandboxes made ahead of demand wait at the background CPU share (a
// refill yields to the sandboxes in use); the one a create takes runs at
// the normal share.
TEST_F(WarmPoolTest, PooledSandboxesWaitAtTheBackgroundShareAndRunAtTheNormal) {
  const auto support = native::detect_cgroups();
  if (support.version != native::CgroupVersion::kV1 || !support.v1_parents.count("cpu"))
    GTEST_SKIP() << "needs a writable cgroup v1 cpu hierarchy (root)";
  const std::string parent = support.v1_parents.at("cpu");
  const std::string ours = "sandcastle-" + std::to_string(::getpid()) + "-";
  auto shares_by_group = [&] {
    std::map<std::string, std::string> out;
    for (const auto& name : native::list_dir(parent))
      if (name.rfind(ours, 0) == 0)
        out[name] = native::read_small_file(parent + "/" + name + "/cpu.shares");
    return out;
  };
  auto b = pool_of_two_filled();
  ASSERT_NE(b, nullptr);
  auto pooled = shares_by_group();
  ASSERT_EQ(pooled.size(), 2u);
  for (const auto& [name, shares] : pooled) EXPECT_EQ(shares, "2\n") << name;

  auto sb = b->create(spec());
  ASSERT_TRUE(sb.ok()) << sb.error().message();
  EXPECT_TRUE(pooled.count((*sb)->id())) << "not a pooled sandbox: " << (*sb)->id();
  EXPECT_EQ(native::read_small_file(parent + "/" + (*sb)->id() + "/cpu.shares"), "1024\n");
  EXPECT_EQ(run(**sb, {"/bin/echo", "in use"}), "in use\n");
  // The one made to replace it waits at the background share too.
  ASSERT_TRUE(b->wait_pool([](const PoolStats& s) { return s.ready == 2 && s.made == 3; }, 60s));
  auto now = shares_by_group();
  ASSERT_EQ(now.size(), 3u);
  for (const auto& [name, shares] : now)
    EXPECT_EQ(shares, name == (*sb)->id() ? "1024\n" : "2\n") << name;
  EXPECT_TRUE((*sb)->destroy().ok());
}

TEST(WarmPool, TestsRunInAProcessOfTheirOwn) {
  auto child = run_tests_in_child("WarmPoolTest.*", kWarmPoolChildEnv);
  EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) << child.out;
  // The CPU-share test needs a v1 cpu hierarchy it can write (root here);
  // without one it says why it skipped.
  const auto support = native::detect_cgroups();
  const bool shares =
      support.version == native::CgroupVersion::kV1 && support.v1_parents.count("cpu");
  const std::string passed = "[  PASSED  ] " + std::to_string(shares ? 7 : 6) + " tests.";
  EXPECT_NE(child.out.find(passed), std::string::npos) << child.out;
}

}  // namespace
}  // namespace sandcastle::sandbox::testing
