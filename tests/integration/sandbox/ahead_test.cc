// AheadCommand (sandbox.h): a pooled sandbox starts a command before any exec
// asks for it, and hands it the one exec it was started for; every other
// exec gets a process of its own, as without it. The loader here is a few
// lines of Python speaking the contract (fd 3, one message: the last word
// and stdio); the server's own (src/kernels/python_ahead.py) is tested
// end to end in tests/e2e/python_ahead.test.mjs.
//
// Backends of their own, one at a time, in a child process (as the warm
// pool's tests: AheadCommands.TestsRunInAProcessOfTheirOwn).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "fixture.h"
#include "sandbox/native/fs_util.h"
#include "sandbox/native/native_backend.h"
#include "sandbox/native/pool_sizer.h"

namespace sandcastle::sandbox::testing {
namespace {

using namespace std::chrono_literals;
using native::NativeBackend;
using native::NativeBackendOptions;
using native::PoolStats;

constexpr const char* kChildEnv = "SANDCASTLE_AHEAD_CHILD";
constexpr const char* kPython = "/usr/bin/python3";

// Says "ahead-loader <word> <stdin> <files in its working directory>" and
// exits with the word as its status.
constexpr const char* kLoader = R"(import os, socket, sys
s = socket.socket(fileno=3)
word, fds, _, _ = socket.recv_fds(s, 4096, 3)
if not word: os._exit(0)
s.close()
for i, fd in enumerate(fds):
    os.dup2(fd, i)
    os.close(fd)
os.chdir(os.getcwd())
print("ahead-loader", word.decode(), sys.stdin.read(), ",".join(sorted(os.listdir("."))), flush=True)
sys.exit(int(word))
)";

AheadCommand test_command() {
  AheadCommand c;
  c.base.argv = {kPython};
  c.loader = {"-c", kLoader};
  return c;
}

// last: the sandbox's last exec (a one-shot's), the only kind handed over.
ExecResult run(Sandbox& sb, std::vector<std::string> argv, std::string stdin_data = {},
               std::map<std::string, std::string> env = {}, bool last = true) {
  ExecRequest req;
  req.last = last;
  req.argv = std::move(argv);
  req.stdin_data = std::move(stdin_data);
  req.env = std::move(env);
  auto r = sb.exec(req);
  EXPECT_TRUE(r.ok()) << r.error().message();
  return r ? *r : ExecResult{};
}

// Live processes started with the test loader (its -c text in their cmdline).
std::vector<pid_t> loaders() {
  std::vector<pid_t> out;
  for (pid_t pid : proc_pids()) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
    std::stringstream text;
    text << in.rdbuf();
    if (text.str().find("ahead-loader") != std::string::npos) out.push_back(pid);
  }
  return out;
}

char state_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  auto close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() ? 'X' : line[close + 2];
}

class AheadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::getenv(kChildEnv))
      GTEST_SKIP() << "runs in a process of its own, started by AheadCommands.*";
  }
  static std::unique_ptr<NativeBackend> backend(std::uint64_t budget = 64ull << 20,
                                                const std::string& storage_dir = {}) {
    NativeBackendOptions o;
    o.storage_dir = storage_dir;
    o.pool.min = 2;
    o.pool.max = 2;
    o.pool.memory_budget_bytes = budget;
    auto b = NativeBackend::create(std::move(o));
    EXPECT_TRUE(b.ok()) << b.error().message();
    return b ? std::move(*b) : nullptr;
  }
  static std::unique_ptr<Sandbox> take(NativeBackend& b) {
    auto sb = b.create(SandboxSpec::defaults());
    EXPECT_TRUE(sb.ok()) << sb.error().message();
    return sb ? std::move(*sb) : nullptr;
  }
};

TEST_F(AheadTest, ThePooledSandboxHandsItsOwnExecToTheStartedCommand) {
  auto b = backend();
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(b->wait_pool([](const PoolStats& s) { return s.ready == 2; }, 60s));
  EXPECT_EQ(b->pool_stats().ahead, 0u);
  // The ready ones start it at once; the refill's from then on.
  b->set_ahead_command(test_command());
  EXPECT_EQ(b->pool_stats().ahead, 2u);
  auto sb = take(*b);
  ASSERT_NE(sb, nullptr);
  auto r = run(*sb, {kPython, "7"}, "in");
  EXPECT_EQ(r.stdout_data, "ahead-loader 7 in \n") << r.stderr_data;
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_TRUE(b->wait_pool([](const PoolStats& s) { return s.made == 3 && s.ahead == 2; }, 60s));
  // An exec after it anyway is an ordinary one.
  r = run(*sb, {kPython, "-c", "print('plain')"}, {}, {}, false);
  EXPECT_EQ(r.stdout_data, "plain\n");
  EXPECT_TRUE(sb->destroy().ok());
}

TEST_F(AheadTest, AnyOtherExecGetsAProcessOfItsOwn) {
  auto b = backend();
  ASSERT_NE(b, nullptr);
  b->set_ahead_command(test_command());
  ASSERT_TRUE(b->wait_pool([](const PoolStats& s) { return s.ready == 2 && s.ahead == 2; }, 60s));
  // Another program; another environment; not the sandbox's last exec:
  // none is handed over (python3 itself says it has no file "7").
  auto a = take(*b);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(run(*a, {"/bin/echo", "x"}).stdout_data, "x\n");
  auto c = take(*b);
  ASSERT_NE(c, nullptr);
  auto r = run(*c, {kPython, "7"}, {}, {{"OTHER", "1"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_data.find("can't open file"), std::string::npos) << r.stderr_data;
  EXPECT_EQ(r.stdout_data, "");
  ASSERT_TRUE(b->wait_pool([](const PoolStats& s) { return s.ready == 2 && s.ahead == 2; }, 60s));
  auto d = take(*b);
  ASSERT_NE(d, nullptr);
  r = run(*d, {kPython, "7"}, {}, {}, false);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_data.find("can't open file"), std::string::npos) << r.stderr_data;
  for (auto* sb : {a.get(), c.get(), d.get()}) EXPECT_TRUE(sb->destroy().ok());
}

TEST_F(AheadTest, AStartedCommandThatDiedLeavesItsExecToAFreshProcess) {
  auto b = backend();
  ASSERT_NE(b, nullptr);
  b->set_ahead_command(test_command());
  ASSERT_TRUE(b->wait_pool([](const PoolStats& s) { return s.ready == 2 && s.ahead == 2; }, 60s));
  // SIGKILL every started one (the OOM killer's way): dead, not yet reaped.
  // (Init starts them after the pool says so: their exec has no event.)
  auto pids = loaders();
  for (int i = 0; i < 2000 && pids.size() < 2; ++i) {
    std::this_thread::sleep_for(5ms);
    pids = loaders();
  }
  ASSERT_EQ(pids.size(), 2u);
  for (pid_t p : pids) ASSERT_EQ(::kill(p, SIGKILL), 0);
  for (pid_t p : pids)
    for (int i = 0; i < 1000 && state_of(p) != 'Z' && state_of(p) != 'X'; ++i)
      std::this_thread::sleep_for(5ms);  // the kernel's kill: no event to wait on
  auto sb = take(*b);
  ASSERT_NE(sb, nullptr);
  auto r = run(*sb, {kPython, "7"});
  EXPECT_EQ(r.reason, EndReason::kExited);
  EXPECT_EQ(r.exit_code, 2) << "the exec went to a fresh python3, which has no file 7";
  EXPECT_NE(r.stderr_data.find("can't open file"), std::string::npos) << r.stderr_data;
  EXPECT_TRUE(sb->destroy().ok());
}

TEST_F(AheadTest, NoneStartsBeyondThePoolsMemoryBudget) {
  // Two ready sandboxes (1 MiB each) leave no room for one more command
  // (kAheadCommandBytes) under 5 MiB; under 6 MiB, room for one.
  static_assert(native::kPooledSandboxBytes == 1ull << 20 &&
                native::kAheadCommandBytes == 4ull << 20);
  auto tight = backend(5ull << 20);
  ASSERT_NE(tight, nullptr);
  tight->set_ahead_command(test_command());
  ASSERT_TRUE(tight->wait_pool([](const PoolStats& s) { return s.ready == 2; }, 60s));
  EXPECT_EQ(tight->pool_stats().ahead, 0u);
  EXPECT_TRUE(loaders().empty());
  tight.reset();
  auto one = backend(6ull << 20);
  ASSERT_NE(one, nullptr);
  one->set_ahead_command(test_command());
  ASSERT_TRUE(one->wait_pool([](const PoolStats& s) { return s.ready == 2; }, 60s));
  EXPECT_EQ(one->pool_stats().ahead, 1u);
}

// A persistent sandbox is a pooled one whose disk is mounted over
// /workspace after its command started: the command works in the disk's
// /workspace all the same (it changes there again by name).
TEST_F(AheadTest, APersistentSandboxsStartedCommandWorksOnItsDisk) {
  if (::geteuid() != 0) GTEST_SKIP() << "a persistent sandbox's disk needs root (loop devices)";
  char tmpl[] = "/var/tmp/sc-ahead-storage-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string storage = tmpl;
  {
    auto b = backend(64ull << 20, storage);
    ASSERT_NE(b, nullptr);
    b->set_ahead_command(test_command());
    ASSERT_TRUE(b->wait_pool([](const PoolStats& s) { return s.ready == 2 && s.ahead == 2; }, 60s));
    auto spec = SandboxSpec::create(
        SpecOptions{.persistence = Persistence::kPersistent, .storage_id = "ahead-test"});
    ASSERT_TRUE(spec.ok()) << spec.error().message();
    auto sb = b->create(*spec);
    ASSERT_TRUE(sb.ok()) << sb.error().message();
    EXPECT_EQ(b->pool_stats().taken, 1u) << "a pooled sandbox with its disk mounted";
    ASSERT_TRUE((*sb)->write_file("/workspace/on-disk.txt", "x").ok());
    EXPECT_EQ(run(**sb, {kPython, "0"}).stdout_data, "ahead-loader 0  on-disk.txt\n");
    EXPECT_TRUE((*sb)->destroy().ok());
    EXPECT_TRUE(b->remove_storage("ahead-test").ok());
  }
  (void)native::remove_tree(storage);
}

TEST(AheadCommands, TestsRunInAProcessOfTheirOwn) {
  auto child = run_tests_in_child("AheadTest.*", kChildEnv);
  EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) << child.out;
  // Without root the persistent one skips, saying why.
  const int passed = ::geteuid() == 0 ? 5 : 4;
  EXPECT_NE(child.out.find("[  PASSED  ] " + std::to_string(passed) + " tests."), std::string::npos)
      << child.out;
}

}  // namespace
}  // namespace sandcastle::sandbox::testing
